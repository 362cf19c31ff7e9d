"""daskscope's command line (``daskscope ...``): see :mod:`daskscope.cli.main`."""
