# Sandbox tests that start the pinhole-sandbox binary are "e2e".
if(TARGET sandbox.test_cli)
    add_dependencies(sandbox.test_cli pinhole-sandbox)
    set_tests_properties(sandbox.test_cli PROPERTIES LABELS e2e)
endif()
