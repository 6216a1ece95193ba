#!/bin/sh
# install_pip.sh - the Python package on a fresh prefix: cmake --install into
# a scratch prefix, then `pip install --no-build-isolation guard/python`
# (offline: the system's setuptools and wheel) twice, into a venv that sees
# the system's packages (pinhole.pc found through PKG_CONFIG_PATH) and with
# --target (PINHOLE_PREFIX). Neither run sets PINHOLE_LIBRARY or the loader
# path: the package must find the library from what was recorded at install.
# `python3 -m pinhole check` must print and exit as the installed
# `pinhole-guard check` does. The builds leave the source tree as it was;
# a later build records what it finds, never what an earlier one did; the
# library is looked up in its documented order (a recorded prefix holding
# another library is passed over for the loader path) and, when none is
# usable, the error names every candidate tried.
# Usage: install_pip.sh BUILD_DIR        (exit 77: venv or pip missing)
set -eu
BUILD=$1
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
$PY -c 'import venv, ensurepip' 2>/dev/null || { echo "SKIP: python3-venv missing"; exit 77; }
$PY -m pip --version >/dev/null 2>&1 || { echo "SKIP: python3-pip missing"; exit 77; }
$PY -c 'import setuptools, wheel' 2>/dev/null || { echo "SKIP: python3-setuptools/python3-wheel missing"; exit 77; }
unset PINHOLE_LIBRARY LD_LIBRARY_PATH PYTHONPATH
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
fails=0
check() { # NAME EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then echo "ok - $1"; else echo "FAIL - $1: expected '$2', got '$3'"; fails=$((fails + 1)); fi
}

P=$scratch/prefix
cmake --install "$BUILD" --prefix "$P" >/dev/null
cp -r "$SRC/guard/python" "$scratch/src"   # a copy: what pip leaves in it is checked
(cd "$scratch/src" && find . | sort) >"$scratch/tree.before"
"$P/bin/policyc" compile "$P/share/doc/pinhole/examples/allowlist.yaml" -o "$scratch/t.ptab" >/dev/null
URLS="https://api.github.com/repos http://api.github.com/ http://169.254.169.254/ https://evil.example/"

$PY -m venv --without-pip --system-site-packages "$scratch/venv"
PKG_CONFIG_PATH=$P/lib/pkgconfig $PY -m pip --python "$scratch/venv/bin/python" install -q --no-index \
    --no-build-isolation "$scratch/src" >"$scratch/pip.out" 2>&1 || { cat "$scratch/pip.out"; exit 1; }
PTARGET=$scratch/target
PINHOLE_PREFIX=$P $PY -m pip install -q --no-index --no-build-isolation --target "$PTARGET" \
    "$scratch/src" >"$scratch/pip2.out" 2>&1 || { cat "$scratch/pip2.out"; exit 1; }
(cd "$scratch/src" && find . | sort) >"$scratch/tree.after"
check "py.typed is installed with the package" yes \
    "$([ -f "$PTARGET/pinhole/py.typed" ] && echo yes || echo no)"
check "pip builds out of the source tree (no build/, no egg-info left in it)" "" \
    "$(diff "$scratch/tree.before" "$scratch/tree.after" | grep '^>' | tr '\n' ' ')"
# A third build from the same tree finds no library (no prefix, no
# pinhole.pc): it records none, not the prefix the build before it found.
T3=$scratch/target3
env -u PKG_CONFIG_PATH PKG_CONFIG_LIBDIR=/nonexistent $PY -m pip install -q --no-index \
    --no-build-isolation --target "$T3" "$scratch/src" >"$scratch/pip3.out" 2>&1 || { cat "$scratch/pip3.out"; exit 1; }
check "a later build records only what it found" "None" \
    "$(cd "$scratch" && PYTHONPATH=$T3 $PY -c 'import pinhole._config as c; print(c.LIBDIR)')"
err=$(cd "$scratch" && PYTHONPATH=$T3 $PY -c 'import pinhole; pinhole.library_path()' 2>&1 || true)
case $err in
*"LibraryError: no usable libpinhole; tried, in order: "*"loader path libpinhole.so.1"*) check "no library: the error names what was tried" ok ok ;;
*) check "no library: the error names what was tried" "LibraryError ... loader path" "$err" ;;
esac
check "no recorded prefix: the loader path" "$P/lib" \
    "$(cd "$scratch" && LD_LIBRARY_PATH=$P/lib PYTHONPATH=$T3 $PY -c 'import pinhole, os; print(os.path.dirname(pinhole.library_path()))')"
# A recorded prefix whose library is another one (here libpinhole-base,
# which lacks the guard's functions): passed over, named in the error.
S=$scratch/stale
mkdir -p "$S/lib"
base=$(ls "$P"/lib/libpinhole-base.so.* | head -n 1)
cp "$base" "$S/lib/libpinhole.so.1"
cp "$base" "$S/lib/libpinhole.so"
T4=$scratch/target4
PINHOLE_PREFIX=$S $PY -m pip install -q --no-index --no-build-isolation --target "$T4" \
    "$scratch/src" >"$scratch/pip4.out" 2>&1 || { cat "$scratch/pip4.out"; exit 1; }
check "a stale recorded prefix is passed over for the loader path" "$P/lib" \
    "$(cd "$scratch" && LD_LIBRARY_PATH=$P/lib PYTHONPATH=$T4 $PY -c 'import pinhole, os; print(os.path.dirname(pinhole.library_path()))')"
err=$(cd "$scratch" && PYTHONPATH=$T4 $PY -c 'import pinhole; pinhole.library_path()' 2>&1 || true)
case $err in
*"recorded install prefix $S/lib/libpinhole.so.1: libpinhole has no "*) check "a stale prefix: the error says why it was passed over" ok ok ;;
*) check "a stale prefix: the error says why it was passed over" "recorded install prefix ... has no" "$err" ;;
esac

# shellcheck disable=SC2086
"$P/bin/pinhole-guard" check --table "$scratch/t.ptab" --list default $URLS >"$scratch/c.out" 2>/dev/null && rc_c=0 || rc_c=$?
for how in venv target; do
    if [ $how = venv ]; then run="$scratch/venv/bin/python"; else run="env PYTHONPATH=$PTARGET $PY"; fi
    cd "$scratch"   # not the source tree: the installed package must be the one imported
    lib=$($run -c 'import pinhole; print(pinhole.library_path())')
    check "$how: libpinhole from the install prefix" "$P/lib" "$(dirname "$lib")"
    # shellcheck disable=SC2086
    $run -m pinhole check --table "$scratch/t.ptab" --list default $URLS >"$scratch/py.out" 2>"$scratch/py.err" && rc_p=0 || rc_p=$?
    check "$how: python3 -m pinhole check prints what pinhole-guard check prints" \
        "$(cat "$scratch/c.out")" "$(cat "$scratch/py.out")"
    check "$how: same exit status (1: some refused)" "1 $rc_c" "$rc_p $rc_c"
    $run -m pinhole check --table "$scratch/t.ptab" https://api.github.com/ >/dev/null && rc_p=0 || rc_p=$?
    check "$how: all allowed: exit 0" 0 "$rc_p"
    $run -m pinhole check --table "$scratch/missing.ptab" https://api.github.com/ 2>/dev/null && rc_p=0 || rc_p=$?
    check "$how: unusable table: exit 2" 2 "$rc_p"
    cd "$SRC"
done
[ $fails -eq 0 ] && echo "install: pip install of guard/python finds the installed libpinhole" || exit 1
