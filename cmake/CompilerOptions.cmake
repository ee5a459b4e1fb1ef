# Warning and optimisation flags shared by every mindspeed-cpp target (ms_options).
# The host flags go to C++ sources, and through nvcc's -Xcompiler to the host side of CUDA
# sources; nvcc's own warnings (device code) are errors too with MS_WERROR.
add_library(ms_options INTERFACE)
target_compile_options(ms_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
                                            $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unused-parameter>)
if(MS_WERROR)
  target_compile_options(ms_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Werror>
                                              $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Werror --Werror=all-warnings>)
endif()
if(CMAKE_BUILD_TYPE STREQUAL "Release" OR CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  # No -ffast-math: the reference kernels and the golden tests rely on IEEE semantics (nor
  # nvcc's --use_fast_math, for the same reason on the device).
  target_compile_options(ms_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-O3 -fno-math-errno>
                                              $<$<COMPILE_LANGUAGE:CUDA>:-O3 -Xcompiler=-fno-math-errno>)
endif()
if(MS_FUZZ)
  # Coverage for libFuzzer in every library; the fuzz targets add -fsanitize=fuzzer (main).
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MS_FUZZ needs clang (libFuzzer): use the `fuzz` preset")
  endif()
  target_compile_options(ms_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=fuzzer-no-link,address,undefined
                                              -fno-omit-frame-pointer -fno-sanitize-recover=undefined -g>)
  target_link_options(ms_options INTERFACE -fsanitize=address,undefined)
endif()
if(MS_SANITIZE)
  target_compile_options(ms_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined
                                              -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(ms_options INTERFACE -fsanitize=address,undefined)
endif()
