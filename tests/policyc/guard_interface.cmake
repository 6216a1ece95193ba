# policyc includes no header of guard/src but compiler-int.h, the guard's
# documented internal interface to it (docs/guard.md, "Internal interface"):
# every #include "x.h" of policyc/src that names a file of guard/src must be
# that one. Run with -DSRC=<policyc/src> -DGUARD=<guard/src>.
file(GLOB sources ${SRC}/*.c ${SRC}/*.h)
set(bad "")
foreach(f ${sources})
    file(STRINGS ${f} lines REGEX "^#include \"[^\"]+\"")
    foreach(line ${lines})
        string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" h "${line}")
        if(EXISTS ${GUARD}/${h} AND NOT h STREQUAL "compiler-int.h")
            get_filename_component(name ${f} NAME)
            list(APPEND bad "${name}: ${h}")
        endif()
    endforeach()
endforeach()
if(bad)
    list(JOIN bad "\n  " text)
    message(FATAL_ERROR "policyc includes guard-private headers (use compiler-int.h):\n  ${text}")
endif()
message(STATUS "policyc includes of guard/src: compiler-int.h only")
