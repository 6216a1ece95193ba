# Every third-party library comes from Debian 12 packages (scripts/deps.sh).
find_package(PkgConfig REQUIRED)
find_package(OpenSSL 3.0 REQUIRED)
find_package(Threads REQUIRED)

pkg_check_modules(LIBEVENT REQUIRED IMPORTED_TARGET libevent_core libevent_extra libevent_pthreads)
pkg_check_modules(CARES REQUIRED IMPORTED_TARGET libcares)
pkg_check_modules(YAML REQUIRED IMPORTED_TARGET yaml-0.1)
pkg_check_modules(PSL REQUIRED IMPORTED_TARGET libpsl)
pkg_check_modules(IDN2 REQUIRED IMPORTED_TARGET libidn2)
pkg_check_modules(JANSSON REQUIRED IMPORTED_TARGET jansson)
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
# libunistring (Unicode normalization for filenames) ships no pkg-config file.
find_path(UNISTRING_INCLUDE_DIR uninorm.h REQUIRED)
find_library(UNISTRING_LIBRARY unistring REQUIRED)
add_library(Unistring::Unistring UNKNOWN IMPORTED)
set_target_properties(Unistring::Unistring PROPERTIES
    IMPORTED_LOCATION ${UNISTRING_LIBRARY} INTERFACE_INCLUDE_DIRECTORIES ${UNISTRING_INCLUDE_DIR})
if(PINHOLE_BUILD_TESTS)
    pkg_check_modules(CMOCKA REQUIRED IMPORTED_TARGET cmocka)
endif()
