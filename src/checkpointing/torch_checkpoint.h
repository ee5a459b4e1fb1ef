// Reading files written by torch.save (PyTorch >= 1.6): a zip archive (stored, not
// compressed) holding <name>/data.pkl, a pickle, and <name>/data/<key>, the raw bytes of each
// tensor storage. Megatron-LM's legacy --ckpt-format torch checkpoints (model_optim_rng.pt)
// are such files. The pickle is interpreted, never executed: only the opcodes torch.save
// emits (protocol 2, and the protocol-4 framing) are accepted, globals are kept as names,
// torch._utils._rebuild_tensor_v2 becomes a tensor reference, collections.OrderedDict a
// dict, any other call an opaque object; every size, offset and memo index is checked, so
// a damaged or hostile file is an error naming the file, not a crash.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace mindspeed {

/// A tensor inside a torch.save archive.
struct TorchTensorRef {
  std::string storage_type;  ///< "FloatStorage", "BFloat16Storage", "HalfStorage", ...
  std::string key;           ///< the storage's record name (<name>/data/<key>)
  int64_t storage_numel = 0;
  int64_t offset = 0;        ///< in elements
  std::vector<int64_t> shape, stride;
};

/// A value of the pickle subset torch.save writes.
struct PickleValue {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kBytes, kList, kTuple, kDict, kGlobal, kObject, kTensor };
  Kind kind = Kind::kNone;
  bool b = false;
  int64_t i = 0;
  double f = 0.0;
  std::string s;  ///< kString, kBytes; kGlobal: "module.name"
  std::vector<std::shared_ptr<PickleValue>> items;  ///< kList, kTuple; kObject: the call arguments
  std::vector<std::pair<std::shared_ptr<PickleValue>, std::shared_ptr<PickleValue>>> dict;  ///< kDict; kObject: BUILD state
  std::string object_class;  ///< kObject: "module.name" of the class or function called
  std::shared_ptr<TorchTensorRef> tensor;

  /// The dict (or an object's BUILD state dict) entry with a string key, or null.
  const PickleValue* get(const std::string& key) const;
};

/// Values to build (for write_torch_save, and the reader's own).
std::shared_ptr<PickleValue> pickle_value(PickleValue::Kind kind);
std::shared_ptr<PickleValue> pickle_string(std::string s);
std::shared_ptr<PickleValue> pickle_int(int64_t i);
std::shared_ptr<PickleValue> pickle_float(double f);
std::shared_ptr<PickleValue> pickle_bool(bool b);

class TorchCheckpointFile {
 public:
  /// Maps the archive, finds <name>/data.pkl and interprets it.
  static StatusOr<TorchCheckpointFile> open(const std::string& path);

  const PickleValue& root() const { return *root_; }
  const std::string& path() const { return path_; }
  /// A tensor's values as fp32 (float, bfloat16 and half storages; contiguous tensors).
  StatusOr<std::vector<float>> read_f32(const TorchTensorRef& tensor) const;

 private:
  struct Entry {
    int64_t offset = 0, size = 0;  // of the data inside the archive
  };
  std::string path_;
  std::shared_ptr<const char> mapping_;
  int64_t size_ = 0;
  std::string prefix_;                     // "<name>/"
  std::map<std::string, Entry> entries_;  // by full name
  std::shared_ptr<PickleValue> root_;
};

/// A tensor to write with write_torch_save (fp32, contiguous).
struct TorchSaveTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// Writes `root` as torch.save (protocol 2, zip of stored records) would: dicts (kDict, as
/// collections.OrderedDict when `ordered_dicts`), lists, tuples, strings, integers, floats,
/// bools, None, globals, argparse.Namespace-style objects (kObject with a state dict) and
/// tensors (kTensor whose `key` indexes `tensors`). `record` is the archive's top folder
/// (torch.save uses the file's stem). Durable and atomic (durable_file.h).
Status write_torch_save(const std::string& path, const std::string& record, const PickleValue& root,
                        const std::vector<TorchSaveTensor>& tensors);

}  // namespace mindspeed
