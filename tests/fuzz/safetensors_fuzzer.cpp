// Fuzz target: a safetensors file (checkpointing/safetensors.h). The input is the whole
// file; whatever opens must read back every tensor as its dtype allows without touching
// bytes outside the file.
#include <cstddef>
#include <cstdint>

#include "checkpointing/safetensors.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mindspeed;
  const std::string path = fuzz::scratch_file("model.safetensors");
  fuzz::write_file(path, std::string_view(reinterpret_cast<const char*>(data), size));
  StatusOr<SafetensorsFile> file = SafetensorsFile::open(path);
  if (!file.ok()) return 0;
  for (const SafetensorsEntry& e : file->entries()) {
    if (file->find(e.name) == nullptr) __builtin_trap();
    StatusOr<std::vector<float>> f = file->read_f32(e.name);
    if (f.ok() && static_cast<int64_t>(f->size()) != e.numel()) __builtin_trap();
    (void)file->read_f32(e.name, {e.numel()});
    StatusOr<std::vector<int32_t>> i = file->read_i32(e.name);
    if (i.ok() && static_cast<int64_t>(i->size()) != e.numel()) __builtin_trap();
  }
  return 0;
}
