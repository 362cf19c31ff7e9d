"""Routes split by noun; each module has ``pages`` (HTML) and ``api`` (JSON) routers."""
