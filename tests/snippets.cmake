# Every docs/snippets/*.cpp (the code the documentation shows) is a program: built with the
# tests and run by CTest as snippet_<name>; a snippet fails by throwing (SG_CHECK) or crashing.
# tests/docs/test_docs.cpp checks that each ```cpp block of the docs appears in one of these files.
file(GLOB SG_SNIPPET_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/snippets/*.cpp)
foreach(src ${SG_SNIPPET_SOURCES})
  get_filename_component(name ${src} NAME_WE)
  add_executable(snippet_${name} ${src})
  target_link_libraries(snippet_${name} PRIVATE structgrad::structgrad)
  add_test(NAME snippet_${name} COMMAND snippet_${name})
  set_tests_properties(snippet_${name} PROPERTIES TIMEOUT 120)
endforeach()
