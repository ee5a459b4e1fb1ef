// DType names.
#include "core/dtype.h"

namespace mindspeed {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat32: return "fp32";
    case DType::kBFloat16: return "bf16";
    case DType::kInt32: return "int32";
    case DType::kInt64: return "int64";
    case DType::kUInt8: return "uint8";
    case DType::kFloat16: return "fp16";
  }
  return "?";
}

}  // namespace mindspeed
