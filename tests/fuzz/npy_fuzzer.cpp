// Fuzz target: a .npy file as the GPT dataset index cache reads it (datasets/npy_file.h).
// Whatever reads must have data for every element (read through int_at / data<double>).
#include <cstddef>
#include <cstdint>

#include "datasets/npy_file.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mindspeed;
  const std::string path = fuzz::scratch_file("index.npy");
  fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  StatusOr<NpyArray> array = read_npy(path);
  if (!array.ok()) return 0;
  const int64_t n = array->numel();
  if (n < 0 || array->nbytes() > static_cast<int64_t>(size)) __builtin_trap();
  uint64_t sum = 0;  // wraps; only keeps the reads
  if (array->dtype() == NpyDtype::kFloat64) {
    const double* d = array->data<double>();
    for (int64_t i = 0; i < n; ++i) sum += d[i] == d[i] ? 1 : 0;
  } else {
    for (int64_t i = 0; i < n; ++i) sum += static_cast<uint64_t>(array->int_at(i));
  }
  // Writing it back and reading it again gives the same array.
  const std::string copy = fuzz::scratch_file("copy.npy");
  if (write_npy(copy, *array).ok()) {
    StatusOr<NpyArray> again = read_npy(copy);
    if (!again.ok() || again->shape() != array->shape() || again->dtype() != array->dtype()) __builtin_trap();
  }
  volatile uint64_t sink = sum;
  (void)sink;
  return 0;
}
