"""Where libpinhole was installed, recorded by setup.py when the package is
built (None: not recorded; the loader path is searched)."""
LIBDIR = None
