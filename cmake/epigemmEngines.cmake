# The cpu backend's GEMM engines, as IMPORTED targets for the ones found:
#   epigemm::openblas  OpenBLAS's CBLAS: cblas.h and libopenblas
#   epigemm::onednn    oneDNN's C API: dnnl.h and libdnnl
# Included by src/backends/cpu and, for a static libepigemm, by the installed
# epigemmConfig.cmake, so that a consumer links the same libraries the build used.
#
# oneDNN is found by its header and library, never through its CMake package: Debian's
# dnnl-config.cmake runs find_package(OpenCL REQUIRED), which stops the whole configure on a
# machine without ocl-icd-opencl-dev (libdnnl-dev only recommends it), and the C API called here
# needs nothing that package provides.

# An engine found (its library file and header directory) as an IMPORTED target; GLOBAL because
# the build links it from several directories. Nothing when either is missing or the target exists.
function(epigemm_import_engine target library include_dir)
  if(library AND include_dir AND NOT TARGET ${target})
    add_library(${target} UNKNOWN IMPORTED GLOBAL)
    set_target_properties(${target} PROPERTIES
      IMPORTED_LOCATION "${library}" INTERFACE_INCLUDE_DIRECTORIES "${include_dir}")
  endif()
endfunction()

# OpenBLAS: its pkg-config module, when there is one, says where Debian's alternatives put it
# (/usr/include/x86_64-linux-gnu/openblas-pthread/); find_path/find_library search there first.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(EPIGEMM_OPENBLAS_PC QUIET openblas)
endif()
find_library(EPIGEMM_OPENBLAS_LIBRARY NAMES openblas HINTS ${EPIGEMM_OPENBLAS_PC_LIBRARY_DIRS})
find_path(EPIGEMM_OPENBLAS_INCLUDE_DIR cblas.h HINTS ${EPIGEMM_OPENBLAS_PC_INCLUDE_DIRS}
          PATH_SUFFIXES openblas)
epigemm_import_engine(epigemm::openblas "${EPIGEMM_OPENBLAS_LIBRARY}" "${EPIGEMM_OPENBLAS_INCLUDE_DIR}")

find_library(EPIGEMM_ONEDNN_LIBRARY NAMES dnnl)
find_path(EPIGEMM_ONEDNN_INCLUDE_DIR dnnl.h)
epigemm_import_engine(epigemm::onednn "${EPIGEMM_ONEDNN_LIBRARY}" "${EPIGEMM_ONEDNN_INCLUDE_DIR}")
