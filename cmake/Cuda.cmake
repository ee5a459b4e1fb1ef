# The optional CUDA backend (src/kernels/cuda/): built when the CUDA toolkit is found
# (MS_CUDA=AUTO, the default), required with MS_CUDA=ON, left out with OFF. Without the toolkit
# the build is exactly the CPU-only one. The device code targets Hopper (sm_90a machine code)
# and keeps compute_90 PTX, which the driver compiles for later GPUs. cuBLASLt carries the
# GEMMs; NCCL and cuDNN are found beside the toolkit (NCCL_ROOT / CUDNN_ROOT to look elsewhere).
set(MS_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO (when the toolkit is found), ON or OFF")
set_property(CACHE MS_CUDA PROPERTY STRINGS AUTO ON OFF)
set(MS_HAVE_CUDA OFF)
if(NOT MS_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "90a-real;90-virtual")
    endif()
    enable_language(CUDA)
    # C++20 as the host code. CMake 3.25 (Debian 12's) knows no C++20 dialect flag for nvcc;
    # nvcc 12+ takes -std=c++20.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    set(CMAKE_CUDA_STANDARD 20)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # The runtime is linked explicitly (CUDA::cudart, shared) by the kernels layer; CMake's
    # implicit static runtime would name libraries without their directory in C++ links.
    set(CMAKE_CUDA_RUNTIME_LIBRARY None)
    find_package(CUDAToolkit REQUIRED)
    find_path(MS_NCCL_INCLUDE_DIR nccl.h HINTS ${NCCL_ROOT}/include ${CUDAToolkit_INCLUDE_DIRS})
    find_library(MS_NCCL_LIBRARY nccl HINTS ${NCCL_ROOT}/lib ${NCCL_ROOT}/lib64 ${CUDAToolkit_LIBRARY_DIR})
    if(NOT MS_NCCL_INCLUDE_DIR OR NOT MS_NCCL_LIBRARY)
      message(FATAL_ERROR "CUDA backend: NCCL not found (set NCCL_ROOT, or configure with -DMS_CUDA=OFF)")
    endif()
    add_library(ms_nccl INTERFACE)
    target_include_directories(ms_nccl INTERFACE ${MS_NCCL_INCLUDE_DIR})
    target_link_libraries(ms_nccl INTERFACE ${MS_NCCL_LIBRARY})
    set(MS_HAVE_CUDA ON)
    message(STATUS "CUDA backend: nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES}, "
                   "NCCL ${MS_NCCL_LIBRARY}")
  elseif(MS_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MS_CUDA=ON but no CUDA compiler was found (set CUDACXX or put nvcc on PATH)")
  else()
    message(STATUS "CUDA backend: not built (no CUDA toolkit found)")
  endif()
endif()
