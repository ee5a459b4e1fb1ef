// Where a run computes (--device): the CPU; an NVIDIA GPU through the CUDA backend; or the
// fenced device, the CPU with its "device" memory fenced off from host code (kernels/fenced/),
// which checks on any machine that the engine moves data between host and device only
// through the kernel table's transfers, as a GPU needs.
#pragma once

namespace mindspeed {

enum class DeviceKind { kCpu, kCuda, kCpuFenced };

constexpr const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu: return "cpu";
    case DeviceKind::kCuda: return "cuda";
    case DeviceKind::kCpuFenced: return "cpu-fenced";
  }
  return "?";
}

}  // namespace mindspeed
