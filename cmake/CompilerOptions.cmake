# Warning and optimisation flags shared by every mindspeed-cpp target (ms_options).
add_library(ms_options INTERFACE)
target_compile_options(ms_options INTERFACE -Wall -Wextra -Wno-unused-parameter)
if(MS_WERROR)
  target_compile_options(ms_options INTERFACE -Werror)
endif()
if(CMAKE_BUILD_TYPE STREQUAL "Release" OR CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  # No -ffast-math: the reference kernels and the golden tests rely on IEEE semantics.
  target_compile_options(ms_options INTERFACE -O3 -fno-math-errno)
endif()
if(MS_FUZZ)
  # Coverage for libFuzzer in every library; the fuzz targets add -fsanitize=fuzzer (main).
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MS_FUZZ needs clang (libFuzzer): use the `fuzz` preset")
  endif()
  target_compile_options(ms_options INTERFACE -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                                              -fno-sanitize-recover=undefined -g)
  target_link_options(ms_options INTERFACE -fsanitize=address,undefined)
endif()
if(MS_SANITIZE)
  target_compile_options(ms_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                                              -fno-sanitize-recover=undefined)
  target_link_options(ms_options INTERFACE -fsanitize=address,undefined)
endif()
