#!/bin/bash
# no_cycles_finds.sh - scripts/symbol_cycles.py (proxy.no_cycles) fails on a
# circle, and only on one: a chain of three files, each using what the next
# defines, passes; closing it (the last using the first) fails and names the
# three; two private headers including each other fail as an include cycle.
# Built with the compiler given (CC), in a scratch directory of its own.
set -u
CC=${1:-cc}
CHECK=$PH_SOURCE_DIR/scripts/symbol_cycles.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
mkdir "$dir/src" "$dir/obj"
write() { # name uses-or-empty
    { [ -n "$2" ] && echo "int $2(void);"
      echo "int $1(void);"
      echo "int $1(void) { return ${2:+$2() +} 1; }"; } >"$dir/src/$1.c"
    "$CC" -c "$dir/src/$1.c" -o "$dir/obj/$1.c.o" || { echo "FAIL - cc $1.c"; exit 1; }
}
run() { # expected-exit what grep-pattern
    out=$(/usr/bin/python3 "$CHECK" "$dir/obj" "$dir/src" 2>&1); rc=$?
    if [ "$rc" = "$1" ] && printf '%s\n' "$out" | grep -q -- "$3"; then
        echo "ok - $2"
    else
        echo "FAIL - $2: exit $rc, want $1 and /$3/"; printf '%s\n' "$out"; fails=$((fails + 1))
    fi
}
write a b; write b c; write c ""
run 0 "a chain a -> b -> c is no cycle" "0 cycles"
write c a
run 1 "a -> b -> c -> a is one, named whole" "SYMBOL CYCLE: a b c"
write c ""
printf '#include "y.h"\n' >"$dir/src/x.h"
printf '#include "x.h"\n' >"$dir/src/y.h"
run 1 "x.h and y.h including each other" "INCLUDE CYCLE: x.h y.h"
exit $((fails > 0))
