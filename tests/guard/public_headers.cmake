# public_headers.cmake - every public header of libpinhole compiles (and a
# tiny program using the resolver links) with only guard/include on the
# include path and a poisoned <ares.h> first: a worker or an FFI binding
# needs no c-ares headers. Also fails if any c-ares identifier survives
# preprocessing.
# The base library's headers (BASE_INC, a list) are public too and compiled
# with them.
# Usage: cmake -DCC=... -DINC=guard/include -DBASE_INC="dirs" -DLIB=libpinhole.so -DLIBDIR=dir
#              -DBASE_LIB=libpinhole-base.so -DBASE_LIBDIR=dir -DWORK=dir
#              [-DLDFLAGS=flags a sanitizer build needs] -P public_headers.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/poison)
foreach(h ares.h ares_build.h ares_rules.h ares_version.h ares_dns.h)
    file(WRITE ${WORK}/poison/${h} "#error \"a public Pinhole header includes <${h}>\"\n")
endforeach()
file(GLOB headers RELATIVE ${INC} ${INC}/pinhole/*.h)
set(incflags -I${INC})
foreach(dir ${BASE_INC})
    file(GLOB base_headers RELATIVE ${dir} ${dir}/pinhole/*.h)
    list(APPEND headers ${base_headers})
    list(APPEND incflags -I${dir})
endforeach()
set(src "")
foreach(h ${headers})
    string(APPEND src "#include <${h}>\n")
endforeach()
string(APPEND src "
#include <stdio.h>
int main(void)
{
    ph_resolver *r = NULL;
    ph_resolver_config cfg = {.servers = \"127.0.0.1:1\", .timeout_ms = 100};
    if (ph_resolver_new(&cfg, NULL, &r, NULL) != PH_OK)
        return 1;
    ph_resolver_free(&r);
    puts(ph_reason_code(PH_REASON_DNS_TIMEOUT));
    return r == NULL ? 0 : 1;
}
")
file(WRITE ${WORK}/consumer.c "${src}")
separate_arguments(ldflags UNIX_COMMAND "${LDFLAGS}")
execute_process(COMMAND ${CC} -std=c11 -Wall -Wextra -Werror -I${WORK}/poison ${incflags}
                        ${WORK}/consumer.c ${LIB} ${BASE_LIB} ${ldflags} -Wl,-rpath,${LIBDIR}
                        -Wl,-rpath,${BASE_LIBDIR} -o ${WORK}/consumer
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
    message(FATAL_ERROR "public headers need c-ares or do not compile:\n${out}${err}")
endif()
execute_process(COMMAND ${CC} -std=c11 -E -P -I${WORK}/poison ${incflags} ${WORK}/consumer.c
                RESULT_VARIABLE rc OUTPUT_VARIABLE pre)
string(REGEX MATCH "[^A-Za-z0-9_](ares_[A-Za-z0-9_]*)" hit "${pre}")
if(hit)
    message(FATAL_ERROR "a c-ares identifier is visible in the public headers: ${hit}")
endif()
execute_process(COMMAND ${WORK}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
if(NOT rc EQUAL 0 OR NOT out STREQUAL "dns_timeout\n")
    message(FATAL_ERROR "consumer failed (${rc}): ${out}")
endif()
message(STATUS "public headers: ${headers} compile without c-ares")
