"""The scheduler side of daskscope: a SchedulerPlugin and what it writes to."""
