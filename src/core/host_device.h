// MS_HOST_DEVICE marks the small inline helpers that the CUDA backend's device code calls too
// (the 16-bit conversions of core/dtype.h, the argument structs of kernels/kernel_types.h): one
// definition of their arithmetic for the CPU and the GPU. Empty in host-only builds.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MS_HOST_DEVICE __host__ __device__
#else
#define MS_HOST_DEVICE
#endif

namespace mindspeed {

/// The bits of a float and back (memcpy on the host, the register reinterpretation on the device).
MS_HOST_DEVICE inline uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

MS_HOST_DEVICE inline float float_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

}  // namespace mindspeed
