// Run-time check that this machine can execute the cpu/ kernels (compiled for AVX2+FMA on
// x86-64, for the baseline elsewhere). Lives in cpu/ so the check is next to the flags.
#include "kernels/kernels.h"

namespace mindspeed::cpu {

bool cpu_kernels_supported() {
#if defined(__x86_64__) && defined(__AVX2__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return true;
#endif
}

}  // namespace mindspeed::cpu
