"""daskscope: performance analytics for Dask."""
