# The installed CMake package: find_package(pinhole) gives pinhole::pinhole
# (the shared libpinhole) and pinhole::pinhole_static, beside pinhole.pc.
#
# A library joins the package with one line where it is defined:
#     pinhole_export(<target> <name>)     # installed as pinhole::<name>
# and, when its public interface needs a third-party package, one
# find_dependency line in cmake/pinholeConfig.cmake.in.

set(PINHOLE_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pinhole)

# pinhole_export(<target> <export name>): installs the target's library into
# the export set pinholeTargets, as pinhole::<export name>.
function(pinhole_export target name)
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
    install(TARGETS ${target} EXPORT pinholeTargets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
            RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
            INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()

# Called once, at the end of the top-level CMakeLists.txt: every
# pinhole_export above is in the set by then.
function(pinhole_install_package)
    include(CMakePackageConfigHelpers)
    install(EXPORT pinholeTargets NAMESPACE pinhole:: DESTINATION ${PINHOLE_CMAKE_DIR})
    configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/pinholeConfig.cmake.in
        ${PROJECT_BINARY_DIR}/pinholeConfig.cmake INSTALL_DESTINATION ${PINHOLE_CMAKE_DIR})
    write_basic_package_version_file(${PROJECT_BINARY_DIR}/pinholeConfigVersion.cmake
        VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
    install(FILES ${PROJECT_BINARY_DIR}/pinholeConfig.cmake
                  ${PROJECT_BINARY_DIR}/pinholeConfigVersion.cmake
            DESTINATION ${PINHOLE_CMAKE_DIR})
endfunction()
