"""Build hook: records where libpinhole is installed into pinhole/_config.py
of the built package, so an installed package finds the library without
PINHOLE_LIBRARY or the loader path (pinhole._lib documents the search order).

The directory comes from, in order: the PINHOLE_PREFIX environment variable
(its lib/ or lib64/ or the multiarch lib directory holding libpinhole.so), or
`pkg-config --variable=libdir pinhole` (pinhole.pc, installed by
`cmake --install`; PKG_CONFIG_PATH is honoured). When neither finds the
library LIBDIR is recorded as None and the package falls back to the loader
path.

The build happens out of the source tree: setuptools' build/ and
pinhole.egg-info/ go to a temporary directory removed when the build ends,
so `pip install guard/python` leaves the tree as it was and no later build
can pick up what an earlier one recorded.
"""
import atexit
import os
import shutil
import subprocess
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py

LIBNAME = "libpinhole.so"


def _has_lib(d):
    return bool(d) and os.path.isfile(os.path.join(d, LIBNAME))


def find_libdir():
    prefix = os.environ.get("PINHOLE_PREFIX")
    if prefix:
        for sub in ("lib", "lib64", os.path.join("lib", "x86_64-linux-gnu"),
                    os.path.join("lib", "aarch64-linux-gnu")):
            d = os.path.join(prefix, sub)
            if _has_lib(d):
                return os.path.abspath(d)
        raise SystemExit("PINHOLE_PREFIX=%s holds no %s under lib/" % (prefix, LIBNAME))
    try:
        out = subprocess.run(["pkg-config", "--variable=libdir", "pinhole"],
                             capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    d = out.stdout.strip()
    if out.returncode == 0 and _has_lib(d):
        return os.path.realpath(d)
    return None


class BuildPyRecordingLibdir(build_py):
    def run(self):
        super().run()
        libdir = find_libdir()
        target = os.path.join(self.build_lib, "pinhole", "_config.py")
        with open(target, "w", encoding="utf-8") as f:
            f.write('"""Written at build time by setup.py: where libpinhole was installed '
                    '(None: not found; the loader path is searched)."""\n')
            f.write("LIBDIR = %r\n" % libdir)


_scratch = tempfile.mkdtemp(prefix="pinhole-py-build-")
atexit.register(shutil.rmtree, _scratch, True)
setup(cmdclass={"build_py": BuildPyRecordingLibdir},
      options={"build": {"build_base": os.path.join(_scratch, "build")},
               "egg_info": {"egg_base": _scratch}})
