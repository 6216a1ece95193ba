# Guard URL tests that read tests/data/urls/*.tsv share the table reader
# (url_tsv.c); the differential test also links libcurl, whose URL API
# (curl_url) is the RFC 3986-style parser it compares the strict parser with.
foreach(t guard.test_url_hostile guard.test_url_differential guard.test_decide)
    if(TARGET ${t})
        target_sources(${t} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/url_tsv.c)
    endif()
endforeach()
if(TARGET guard.test_url_differential)
    target_link_libraries(guard.test_url_differential PRIVATE PkgConfig::CURL)
endif()
