# library_abi.cmake - the shared libraries' ABI as their users see it:
#   - libpinhole, libpinhole-base and libpinhole-curl have the SONAME
#     lib*.so.${SOVERSION} (CMakeLists.txt, PINHOLE_SOVERSION);
#   - libpinhole exports the one decision API per kind of request and the
#     step after it (ph_decide_url, ph_decide_connect, ph_decide_again,
#     ph_decision_resolve), and no second verdict API (ph_guard_check_*);
#   - what names the SONAME elsewhere says the same number: the Debian
#     packages (debian/control, their .install files, scripts/deb-check.sh),
#     the Python binding's SONAME, and the changelog of docs/guard.md.
# Usage: cmake -DREADELF=... -DNM=... -DLIB=libpinhole.so -DBASE_LIB=...
#              -DCURL_LIB=... -DSOVERSION=N -DSRC=source-dir -P library_abi.cmake
set(fail "")
foreach(pair "libpinhole|${LIB}" "libpinhole-base|${BASE_LIB}" "libpinhole-curl|${CURL_LIB}")
    string(REPLACE "|" ";" pair "${pair}")
    list(GET pair 0 name)
    list(GET pair 1 file)
    execute_process(COMMAND ${READELF} -d ${file} OUTPUT_VARIABLE dyn RESULT_VARIABLE rc)
    string(REGEX MATCH "Library soname: \\[([^]]*)\\]" m "${dyn}")
    if(NOT rc EQUAL 0 OR NOT CMAKE_MATCH_1 STREQUAL "${name}.so.${SOVERSION}")
        string(APPEND fail "\n  ${file}: SONAME '${CMAKE_MATCH_1}', expected ${name}.so.${SOVERSION}")
    endif()
endforeach()

execute_process(COMMAND ${NM} -D --defined-only ${LIB} OUTPUT_VARIABLE syms RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
    string(APPEND fail "\n  ${NM} -D ${LIB} failed")
endif()
foreach(f ph_decide_url ph_decide_connect ph_decide_again ph_decision_resolve)
    if(NOT syms MATCHES " T ${f}\n")
        string(APPEND fail "\n  libpinhole does not export ${f}")
    endif()
endforeach()
string(REGEX MATCHALL " [A-Za-z] ph_guard_check_[A-Za-z_]*" old "${syms}")
if(old)
    string(APPEND fail "\n  libpinhole still exports:${old}")
endif()

file(READ ${SRC}/debian/control control)
string(REGEX MATCHALL "\nPackage: libpinhole[-a-z]*[0-9]+" pkgs "${control}")
string(REPLACE "\nPackage: " "" pkgs "${pkgs}")
if(NOT pkgs STREQUAL "libpinhole${SOVERSION};libpinhole-curl${SOVERSION}")
    string(APPEND fail "\n  debian/control's library packages are '${pkgs}', expected "
                       "libpinhole${SOVERSION} and libpinhole-curl${SOVERSION}")
endif()
foreach(p libpinhole${SOVERSION} libpinhole-curl${SOVERSION})
    if(NOT EXISTS ${SRC}/debian/${p}.install)
        string(APPEND fail "\n  no debian/${p}.install")
    endif()
endforeach()
file(READ ${SRC}/scripts/deb-check.sh debcheck)
foreach(row "libpinhole${SOVERSION} $M/libpinhole.so.${SOVERSION}"
            "libpinhole${SOVERSION} $M/libpinhole-base.so.${SOVERSION}"
            "libpinhole-curl${SOVERSION} $M/libpinhole-curl.so.${SOVERSION}")
    string(FIND "${debcheck}" "${row}" at)
    if(at EQUAL -1)
        string(APPEND fail "\n  scripts/deb-check.sh does not check '${row}'")
    endif()
endforeach()
file(READ ${SRC}/guard/python/pinhole/_lib.py py)
if(NOT py MATCHES "\nSONAME = \"libpinhole\\.so\\.${SOVERSION}\"\n")
    string(APPEND fail "\n  guard/python/pinhole/_lib.py's SONAME is not libpinhole.so.${SOVERSION}")
endif()
file(READ ${SRC}/docs/guard.md doc)
string(FIND "${doc}" "\n## Changes\n" at)
string(FIND "${doc}" "SONAME `libpinhole.so.${SOVERSION}`" named)
if(at EQUAL -1 OR named LESS at)
    string(APPEND fail "\n  docs/guard.md has no changelog entry (## Changes) for SONAME "
                       "`libpinhole.so.${SOVERSION}`")
endif()

if(fail)
    message(FATAL_ERROR "the libraries' ABI:${fail}")
endif()
message(STATUS "libpinhole.so.${SOVERSION}, libpinhole-base.so.${SOVERSION}, "
               "libpinhole-curl.so.${SOVERSION}; the decision API exported, no ph_guard_check_*; "
               "packages, deb-check, the Python binding and the changelog agree")
