# FindNCCL: NCCL's header and library as the imported target NCCL::NCCL. structgrad's build uses
# it, and the installed package file uses it again, so a consumer finds NCCL on its own machine.
#
# Searches NCCL_ROOT, the NCCL_HOME environment variable, the CUDA toolkit's directories (when
# CUDAToolkit was found first) and the system paths; setting NCCL_INCLUDE_DIR and NCCL_LIBRARY
# skips the search. Sets NCCL_FOUND and NCCL_VERSION (from nccl.h).
find_path(NCCL_INCLUDE_DIR nccl.h
  HINTS $ENV{NCCL_HOME} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY nccl
  HINTS $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib lib64)
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
    REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) +[0-9]+")
  foreach(_nccl_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_nccl_part} +([0-9]+)" _nccl_match "${_nccl_version_lines}")
    set(_nccl_${_nccl_part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT _nccl_MAJOR STREQUAL "")
    set(NCCL_VERSION "${_nccl_MAJOR}.${_nccl_MINOR}.${_nccl_PATCH}")
  endif()
  unset(_nccl_version_lines)
  unset(_nccl_part)
  unset(_nccl_match)
  unset(_nccl_MAJOR)
  unset(_nccl_MINOR)
  unset(_nccl_PATCH)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::NCCL)
  add_library(NCCL::NCCL UNKNOWN IMPORTED)
  set_target_properties(NCCL::NCCL PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
