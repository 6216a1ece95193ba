# Man pages, generated from docs/ at build time by scripts/md2man.py (pandoc
# -t man): section 1 for the tools, 8 for the daemons, 5 for the files they
# read. PINHOLE_MANPAGES: AUTO (the default) builds them when pandoc is
# found, ON requires it (the Debian packages), OFF skips them.
set(PINHOLE_MANPAGES AUTO CACHE STRING "Build the man pages from docs/ (AUTO, ON, OFF)")
set_property(CACHE PINHOLE_MANPAGES PROPERTY STRINGS AUTO ON OFF)

# name | section | source in docs/ | md2man options (^ separated)
set(PINHOLE_MAN_PAGES
    "pinhole-proxy|8|pinhole-proxy.md|--drop=PERFORMANCE,TESTS"
    "pinhole-execd|8|execd.md|--summary=the execution service: sandboxes for workers^--drop=Where this stands"
    "policyc|1|policyc.md|--summary=validate allowlists and compile them into tables"
    "pinhole-guard|1|pinhole-guard.md|"
    "pinhole-sandbox|1|sandbox.md|--part=pinhole-sandbox(1)^--summary=run a tool command in a sandbox from the shell"
    "pinhole-artifacts|1|artifacts.md|--part=pinhole-artifacts(1)^--summary=put, get, list and expire artifacts from the shell"
    "pinhole-allowlist|5|allowlist.md|--summary=allowlist files: the policy grammar, version 1"
    "pinhole-proxy.yaml|5|pinhole-proxy.md|--part=OPTIONS^--summary=pinhole-proxy settings file"
    "pinhole-grants|5|grants.md|--summary=network grant tokens and the grant key file")

function(pinhole_man_pages)
    if(PINHOLE_MANPAGES STREQUAL "OFF")
        return()
    endif()
    find_program(PINHOLE_PANDOC pandoc)
    # Debian's python3 (scripts/md2man.py's #! line), not another first on PATH.
    if(NOT PINHOLE_PANDOC OR NOT EXISTS /usr/bin/python3)
        if(PINHOLE_MANPAGES STREQUAL "ON")
            message(FATAL_ERROR "PINHOLE_MANPAGES=ON needs pandoc and /usr/bin/python3")
        endif()
        message(STATUS "pandoc not found: no man pages (scripts/deps.sh installs it)")
        return()
    endif()
    set(outputs)
    file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/man)
    foreach(page IN LISTS PINHOLE_MAN_PAGES)
        string(REPLACE "|" ";" page "${page}")
        list(GET page 0 name)
        list(GET page 1 section)
        list(GET page 2 source)
        list(LENGTH page n)
        set(options)
        if(n GREATER 3)
            list(GET page 3 options)
            string(REPLACE "^" ";" options "${options}")
        endif()
        set(out ${PROJECT_BINARY_DIR}/man/${name}.${section})
        add_custom_command(OUTPUT ${out}
            COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/scripts/md2man.py
                    ${name} ${section} ${PROJECT_SOURCE_DIR}/docs/${source} ${out}
                    --version=${PROJECT_VERSION} ${options}
            DEPENDS ${PROJECT_SOURCE_DIR}/docs/${source} ${PROJECT_SOURCE_DIR}/scripts/md2man.py
            COMMENT "Man page ${name}(${section})" VERBATIM)
        list(APPEND outputs ${out})
        install(FILES ${out} DESTINATION ${CMAKE_INSTALL_MANDIR}/man${section})
    endforeach()
    add_custom_target(pinhole-man ALL DEPENDS ${outputs})
endfunction()
