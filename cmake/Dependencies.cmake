# Finds the third-party libraries mindspeed-cpp uses. All come from Debian packages
# (scripts/install_deps.sh installs them).
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(MPI REQUIRED COMPONENTS CXX)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)

# BLAS: OpenBLAS (OpenMP build). It shares the OpenMP runtime with our kernels, so a GEMM
# called inside one of our parallel regions runs single-threaded instead of oversubscribing.
# bench/README.md records the measurement behind this choice (OpenBLAS vs BLIS).
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
add_library(ms_blas INTERFACE)
option(MS_STATIC_BLAS "Link OpenBLAS statically (the build scripts/gpu_check.sh carries to a GPU machine)" OFF)
if(MS_STATIC_BLAS)
  find_library(MS_OPENBLAS_STATIC NAMES libopenblas.a HINTS ${OPENBLAS_LIBRARY_DIRS} REQUIRED)
  target_include_directories(ms_blas INTERFACE ${OPENBLAS_INCLUDE_DIRS})
  target_link_libraries(ms_blas INTERFACE ${MS_OPENBLAS_STATIC} gfortran pthread)
else()
  target_link_libraries(ms_blas INTERFACE PkgConfig::OPENBLAS)
endif()
# BLIS (OpenMP build) is only used by bench/gemm_peak for the BLAS comparison.
find_library(MS_BLIS_LIBRARY NAMES blis PATHS /usr/lib/x86_64-linux-gnu/blis-openmp NO_DEFAULT_PATH)

pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)

if(MS_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
if(MS_BUILD_BENCH)
  find_package(benchmark REQUIRED)
endif()
