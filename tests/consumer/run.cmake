# Installs the build, moves the installed tree elsewhere, then configures, builds and runs the
# consumer against the moved copy, once through find_package and once as a plain
# `c++ main.cpp $(pkg-config --cflags --libs structgrad)`: the package must name no path of the
# build machine.
#   cmake -DSOURCE_DIR=... -DBUILD_DIR=... -DWORK_DIR=... [-DGENERATOR=...]
#         [-DNCCL_INCLUDE_DIR=... -DNCCL_LIBRARY=...] -P run.cmake
if(NOT GENERATOR)
  set(GENERATOR Ninja)
endif()
set(installed ${WORK_DIR}/installed)   # where `cmake --install` puts it
set(moved ${WORK_DIR}/moved/prefix)    # where the consumer finds it
file(REMOVE_RECURSE ${WORK_DIR})

execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${installed} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "install failed")
endif()

# No package file may name the source tree, the build tree, the install prefix or any other
# absolute path (a quoted or listed item that starts with '/').
file(GLOB package_files ${installed}/*/cmake/structgrad/*.cmake)
if(NOT package_files)
  message(FATAL_ERROR "no package files under ${installed}/*/cmake/structgrad")
endif()
# Fails where `file` names the source tree, the build tree or the install prefix.
function(expect_no_tree_in file)
  file(READ ${file} text)
  foreach(dir ${SOURCE_DIR} ${BUILD_DIR} ${installed})
    string(FIND "${text}" "${dir}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} names ${dir}")
    endif()
  endforeach()
endfunction()

foreach(package_file ${package_files})
  expect_no_tree_in(${package_file})
  file(READ ${package_file} text)
  string(REGEX MATCH "[\";]/[A-Za-z0-9_.+-][^\";]*" absolute "${text}")
  if(absolute)
    message(FATAL_ERROR "${package_file} names an absolute path: ${absolute}")
  endif()
endforeach()

get_filename_component(moved_parent ${moved} DIRECTORY)
file(MAKE_DIRECTORY ${moved_parent})
file(RENAME ${installed} ${moved})

set(consumer_args -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=${moved})
foreach(hint NCCL_INCLUDE_DIR NCCL_LIBRARY)
  if(${hint})
    list(APPEND consumer_args -D${hint}=${${hint}})
  endif()
endforeach()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumer -B ${WORK_DIR}/build
                        -G ${GENERATOR} ${consumer_args} RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "configuring the consumer against ${moved} failed")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/build RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer failed")
endif()
execute_process(COMMAND ${WORK_DIR}/build/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer failed")
endif()

# The same program built by hand from the pkg-config file alone.
find_program(PKG_CONFIG pkg-config REQUIRED)
file(GLOB pc_files ${moved}/*/pkgconfig/structgrad.pc ${moved}/*/*/pkgconfig/structgrad.pc)
if(NOT pc_files)
  message(FATAL_ERROR "no structgrad.pc under ${moved}")
endif()
list(GET pc_files 0 pc_file)
expect_no_tree_in(${pc_file})
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
execute_process(COMMAND sh -c "c++ ${SOURCE_DIR}/tests/consumer/main.cpp -o ${WORK_DIR}/pkg_config_consumer \
                                $(${PKG_CONFIG} --cflags --libs structgrad)"
                RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "building the consumer with `c++ main.cpp $(pkg-config --cflags --libs structgrad)` failed")
endif()
execute_process(COMMAND ${WORK_DIR}/pkg_config_consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer built from the pkg-config file failed")
endif()
