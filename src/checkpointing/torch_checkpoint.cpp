// TorchCheckpointFile (torch_checkpoint.h).
#include "checkpointing/torch_checkpoint.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "checkpointing/durable_file.h"
#include "core/dtype.h"

namespace mindspeed {
namespace {

using Value = std::shared_ptr<PickleValue>;
Value make(PickleValue::Kind kind) { return pickle_value(kind); }

uint32_t u32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t u64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint16_t u16(const char* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// The pickle machine: a stack with marks and a memo, for the opcodes torch.save writes.
class Unpickler {
 public:
  Unpickler(const char* data, int64_t size, const std::string& where)
      : begin_(data), p_(data), end_(data + size), where_(where) {}

  StatusOr<Value> run() {
    constexpr int64_t kMaxStack = 1 << 20;
    while (p_ < end_) {
      const unsigned char op = static_cast<unsigned char>(*p_++);
      if (static_cast<int64_t>(stack_.size()) > kMaxStack) return bad("too deep");
      switch (op) {
        case 0x80: MS_RETURN_IF_ERROR(skip(1)); break;  // PROTO
        case 0x95: MS_RETURN_IF_ERROR(skip(8)); break;  // FRAME
        case '.': {                                      // STOP
          if (stack_.size() != 1) return bad("STOP with ", stack_.size(), " values on the stack");
          return stack_.back();
        }
        case '(': marks_.push_back(stack_.size()); break;  // MARK
        case '}': case 'd': {                               // EMPTY_DICT, DICT (from mark)
          auto v = make(PickleValue::Kind::kDict);
          if (op == 'd') MS_RETURN_IF_ERROR(set_items(v));
          stack_.push_back(v);
          break;
        }
        case ']': case 'l': {  // EMPTY_LIST, LIST (from mark)
          auto v = make(PickleValue::Kind::kList);
          if (op == 'l') {
            MS_ASSIGN_OR_RETURN(v->items, pop_mark());
          }
          stack_.push_back(v);
          break;
        }
        case ')': stack_.push_back(make(PickleValue::Kind::kTuple)); break;  // EMPTY_TUPLE
        case 't': {                                                          // TUPLE
          auto v = make(PickleValue::Kind::kTuple);
          MS_ASSIGN_OR_RETURN(v->items, pop_mark());
          stack_.push_back(v);
          break;
        }
        case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
          const size_t n = op - 0x84;
          if (stack_.size() < n) return bad("TUPLE", n, " on a short stack");
          auto v = make(PickleValue::Kind::kTuple);
          v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          stack_.push_back(v);
          break;
        }
        case 'q': { MS_ASSIGN_OR_RETURN(const uint64_t k, read_uint(1)); MS_RETURN_IF_ERROR(put(k)); break; }
        case 'r': { MS_ASSIGN_OR_RETURN(const uint64_t k, read_uint(4)); MS_RETURN_IF_ERROR(put(k)); break; }
        case 0x94: MS_RETURN_IF_ERROR(put(memo_.size())); break;  // MEMOIZE
        case 'h': { MS_ASSIGN_OR_RETURN(const uint64_t k, read_uint(1)); MS_RETURN_IF_ERROR(get(k)); break; }
        case 'j': { MS_ASSIGN_OR_RETURN(const uint64_t k, read_uint(4)); MS_RETURN_IF_ERROR(get(k)); break; }
        case 'K': { MS_ASSIGN_OR_RETURN(const uint64_t x, read_uint(1)); push_int(static_cast<int64_t>(x)); break; }
        case 'M': { MS_ASSIGN_OR_RETURN(const uint64_t x, read_uint(2)); push_int(static_cast<int64_t>(x)); break; }
        case 'J': {
          MS_ASSIGN_OR_RETURN(const uint64_t x, read_uint(4));
          push_int(static_cast<int32_t>(static_cast<uint32_t>(x)));
          break;
        }
        case 0x8a: {  // LONG1: little-endian two's complement, up to 8 bytes here
          MS_ASSIGN_OR_RETURN(const uint64_t n, read_uint(1));
          if (n > 8) return bad("integer of ", n, " bytes");
          MS_RETURN_IF_ERROR(need(static_cast<int64_t>(n)));
          uint64_t x = 0;
          for (uint64_t k = 0; k < n; ++k) x |= static_cast<uint64_t>(static_cast<unsigned char>(p_[k])) << (8 * k);
          if (n > 0 && n < 8 && (static_cast<unsigned char>(p_[n - 1]) & 0x80)) x |= ~uint64_t{0} << (8 * n);
          p_ += n;
          push_int(static_cast<int64_t>(x));
          break;
        }
        case 'N': stack_.push_back(make(PickleValue::Kind::kNone)); break;
        case 0x88: case 0x89: stack_.push_back(pickle_bool(op == 0x88)); break;  // NEWTRUE, NEWFALSE
        case 'G': {  // BINFLOAT, big-endian double
          MS_RETURN_IF_ERROR(need(8));
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<unsigned char>(p_[k]);
          p_ += 8;
          auto v = make(PickleValue::Kind::kFloat);
          std::memcpy(&v->f, &bits, 8);
          stack_.push_back(v);
          break;
        }
        case 'X': case 0x8c: case 0x8d: case 'B': case 'C': {  // strings and bytes
          const int width = op == 0x8c || op == 'C' ? 1 : (op == 0x8d ? 8 : 4);
          MS_ASSIGN_OR_RETURN(const uint64_t n, read_uint(width));
          MS_RETURN_IF_ERROR(need(static_cast<int64_t>(n)));
          auto v = make(op == 'B' || op == 'C' ? PickleValue::Kind::kBytes : PickleValue::Kind::kString);
          v->s.assign(p_, n);
          p_ += n;
          stack_.push_back(v);
          break;
        }
        case 'c': {  // GLOBAL module\nname\n
          MS_ASSIGN_OR_RETURN(std::string module, read_line());
          MS_ASSIGN_OR_RETURN(std::string name, read_line());
          auto v = make(PickleValue::Kind::kGlobal);
          v->s = module + "." + name;
          stack_.push_back(v);
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          MS_ASSIGN_OR_RETURN(Value name, pop());
          MS_ASSIGN_OR_RETURN(Value module, pop());
          if (name->kind != PickleValue::Kind::kString || module->kind != PickleValue::Kind::kString) {
            return bad("STACK_GLOBAL of non-strings");
          }
          auto v = make(PickleValue::Kind::kGlobal);
          v->s = module->s + "." + name->s;
          stack_.push_back(v);
          break;
        }
        case 'Q': {  // BINPERSID: ('storage', type, key, location, numel)
          MS_ASSIGN_OR_RETURN(Value pid, pop());
          if (pid->kind != PickleValue::Kind::kTuple || pid->items.size() < 5 ||
              pid->items[0]->kind != PickleValue::Kind::kString || pid->items[0]->s != "storage" ||
              pid->items[1]->kind != PickleValue::Kind::kGlobal || pid->items[2]->kind != PickleValue::Kind::kString ||
              pid->items[4]->kind != PickleValue::Kind::kInt) {
            return bad("a persistent id that is not a storage");
          }
          auto v = make(PickleValue::Kind::kTensor);
          v->tensor = std::make_shared<TorchTensorRef>();
          const std::string& type = pid->items[1]->s;
          v->tensor->storage_type = type.substr(type.rfind('.') + 1);
          v->tensor->key = pid->items[2]->s;
          v->tensor->storage_numel = pid->items[4]->i;
          stack_.push_back(v);
          break;
        }
        case 'R': case 0x81: {  // REDUCE, NEWOBJ
          MS_ASSIGN_OR_RETURN(Value args, pop());
          MS_ASSIGN_OR_RETURN(Value callable, pop());
          MS_ASSIGN_OR_RETURN(Value v, call(callable, args));
          stack_.push_back(v);
          break;
        }
        case 'b': {  // BUILD: obj.__setstate__(state)
          MS_ASSIGN_OR_RETURN(Value state, pop());
          if (stack_.empty()) return bad("BUILD on an empty stack");
          if (stack_.back()->kind == PickleValue::Kind::kObject && state->kind == PickleValue::Kind::kDict) {
            stack_.back()->dict = state->dict;
          }
          break;
        }
        case 's': {  // SETITEM
          MS_ASSIGN_OR_RETURN(Value value, pop());
          MS_ASSIGN_OR_RETURN(Value key, pop());
          if (stack_.empty() || stack_.back()->kind != PickleValue::Kind::kDict) return bad("SETITEM on a non-dict");
          stack_.back()->dict.emplace_back(key, value);
          break;
        }
        case 'u': {  // SETITEMS
          if (marks_.empty() || marks_.back() == 0) return bad("SETITEMS without a dict");
          auto dict = stack_[marks_.back() - 1];
          if (dict->kind != PickleValue::Kind::kDict) return bad("SETITEMS on a non-dict");
          MS_RETURN_IF_ERROR(set_items(dict));
          break;
        }
        case 'a': {  // APPEND
          MS_ASSIGN_OR_RETURN(Value value, pop());
          if (stack_.empty() || stack_.back()->kind != PickleValue::Kind::kList) return bad("APPEND on a non-list");
          stack_.back()->items.push_back(value);
          break;
        }
        case 'e': {  // APPENDS
          MS_ASSIGN_OR_RETURN(auto values, pop_mark());
          if (stack_.empty() || stack_.back()->kind != PickleValue::Kind::kList) return bad("APPENDS on a non-list");
          for (auto& v : values) stack_.back()->items.push_back(v);
          break;
        }
        default:
          return bad("opcode 0x", std::hex, static_cast<int>(op), std::dec,
                     " is not one torch.save writes (a pickle of another kind?)");
      }
    }
    return bad("no STOP opcode (truncated?)");
  }

 private:
  template <typename... Args>
  Status bad(const Args&... args) const {
    return invalid_argument(where_, ": pickle byte ", static_cast<int64_t>(p_ - begin_), ": ", args...);
  }
  Status need(int64_t n) const { return end_ - p_ >= n ? ok_status() : bad("truncated"); }
  Status skip(int64_t n) {
    MS_RETURN_IF_ERROR(need(n));
    p_ += n;
    return ok_status();
  }
  StatusOr<uint64_t> read_uint(int width) {
    MS_RETURN_IF_ERROR(need(width));
    uint64_t x = 0;
    for (int k = 0; k < width; ++k) x |= static_cast<uint64_t>(static_cast<unsigned char>(p_[k])) << (8 * k);
    p_ += width;
    return x;
  }
  StatusOr<std::string> read_line() {
    const char* nl = static_cast<const char*>(std::memchr(p_, '\n', static_cast<size_t>(end_ - p_)));
    if (nl == nullptr || nl - p_ > 256) return bad("GLOBAL name not ended");
    std::string s(p_, nl);
    p_ = nl + 1;
    return s;
  }
  void push_int(int64_t x) { stack_.push_back(pickle_int(x)); }
  StatusOr<Value> pop() {
    if (stack_.empty() || (!marks_.empty() && marks_.back() == stack_.size())) return bad("pop from an empty stack");
    Value v = stack_.back();
    stack_.pop_back();
    return v;
  }
  StatusOr<std::vector<Value>> pop_mark() {
    if (marks_.empty() || marks_.back() > stack_.size()) return bad("no MARK");
    std::vector<Value> out(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return out;
  }
  Status set_items(const Value& dict) {
    MS_ASSIGN_OR_RETURN(auto kv, pop_mark());
    if (kv.size() % 2 != 0) return bad("odd number of dict items");
    for (size_t k = 0; k < kv.size(); k += 2) dict->dict.emplace_back(kv[k], kv[k + 1]);
    return ok_status();
  }
  Status put(uint64_t k) {
    if (stack_.empty()) return bad("memo put from an empty stack");
    if (k > (1u << 24)) return bad("memo index ", k);
    if (memo_.size() <= k) memo_.resize(k + 1);
    memo_[k] = stack_.back();
    return ok_status();
  }
  Status get(uint64_t k) {
    if (k >= memo_.size() || !memo_[k]) return bad("memo index ", k, " was never set");
    stack_.push_back(memo_[k]);
    return ok_status();
  }
  // A call: _rebuild_tensor_v2 makes a tensor reference, OrderedDict a dict; anything else
  // stays an object with its class and arguments (argparse.Namespace gets its fields by BUILD).
  StatusOr<Value> call(const Value& callable, const Value& args) {
    if (callable->kind != PickleValue::Kind::kGlobal) return bad("call of a non-global");
    if (args->kind != PickleValue::Kind::kTuple) return bad("call arguments are not a tuple");
    if (callable->s == "collections.OrderedDict") return make(PickleValue::Kind::kDict);
    if (callable->s == "torch._utils._rebuild_tensor_v2") {
      const auto& a = args->items;
      if (a.size() < 4 || a[0]->kind != PickleValue::Kind::kTensor || a[1]->kind != PickleValue::Kind::kInt ||
          a[2]->kind != PickleValue::Kind::kTuple || a[3]->kind != PickleValue::Kind::kTuple) {
        return bad("_rebuild_tensor_v2 with unexpected arguments");
      }
      auto v = make(PickleValue::Kind::kTensor);
      v->tensor = std::make_shared<TorchTensorRef>(*a[0]->tensor);
      v->tensor->offset = a[1]->i;
      for (const auto& d : a[2]->items) {
        if (d->kind != PickleValue::Kind::kInt || d->i < 0) return bad("bad tensor size");
        v->tensor->shape.push_back(d->i);
      }
      for (const auto& d : a[3]->items) {
        if (d->kind != PickleValue::Kind::kInt) return bad("bad tensor stride");
        v->tensor->stride.push_back(d->i);
      }
      return v;
    }
    auto v = make(PickleValue::Kind::kObject);
    v->object_class = callable->s;
    v->items = args->items;
    return v;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::string where_;
  std::vector<Value> stack_;
  std::vector<size_t> marks_;
  std::vector<Value> memo_;
};

}  // namespace

std::shared_ptr<PickleValue> pickle_value(PickleValue::Kind kind) {
  auto v = std::make_shared<PickleValue>();
  v->kind = kind;
  return v;
}
std::shared_ptr<PickleValue> pickle_string(std::string s) {
  auto v = pickle_value(PickleValue::Kind::kString);
  v->s = std::move(s);
  return v;
}
std::shared_ptr<PickleValue> pickle_int(int64_t i) {
  auto v = pickle_value(PickleValue::Kind::kInt);
  v->i = i;
  return v;
}
std::shared_ptr<PickleValue> pickle_float(double f) {
  auto v = pickle_value(PickleValue::Kind::kFloat);
  v->f = f;
  return v;
}
std::shared_ptr<PickleValue> pickle_bool(bool b) {
  auto v = pickle_value(PickleValue::Kind::kBool);
  v->b = b;
  return v;
}

const PickleValue* PickleValue::get(const std::string& key) const {
  for (const auto& [k, v] : dict) {
    if (k->kind == Kind::kString && k->s == key) return v.get();
  }
  return nullptr;
}

StatusOr<TorchCheckpointFile> TorchCheckpointFile::open(const std::string& path) {
  TorchCheckpointFile file;
  file.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return not_found("'", path, "' does not exist or cannot be read");
  const off_t size = ::lseek(fd, 0, SEEK_END);
  if (size < 22) {
    ::close(fd);
    return invalid_argument("'", path, "' is too short for a torch.save zip archive");
  }
  void* mapped = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (mapped == MAP_FAILED) return invalid_argument("'", path, "' cannot be mapped");
  const size_t length = static_cast<size_t>(size);
  file.mapping_ = std::shared_ptr<const char>(static_cast<const char*>(mapped), [length](const char* base) {
    ::munmap(const_cast<char*>(base), length);
  });
  file.size_ = size;
  const char* base = file.mapping_.get();
  // End of central directory: the last "PK\5\6" within 64 KiB + 22 bytes of the end.
  int64_t eocd = -1;
  for (int64_t at = size - 22; at >= 0 && at >= size - 22 - 65535; --at) {
    if (u32(base + at) == 0x06054b50) {
      eocd = at;
      break;
    }
  }
  if (eocd < 0) return invalid_argument("'", path, "' is not a zip archive (torch.save >= 1.6 writes one)");
  int64_t count = u16(base + eocd + 10);
  int64_t cd_size = u32(base + eocd + 12), cd_offset = u32(base + eocd + 16);
  int64_t cd_end = eocd;  // the central directory ends where the end records begin
  if (cd_offset == 0xffffffff || count == 0xffff || cd_size == 0xffffffff) {
    // Zip64 (rank files over 4 GiB): the locator just before the end record points at the
    // zip64 end record, which holds the 8-byte count, size and offset.
    if (eocd < 20 || u32(base + eocd - 20) != 0x07064b50) {
      return invalid_argument("'", path, "': zip64 archive without its end-record locator (damaged)");
    }
    const uint64_t record = u64(base + eocd - 12);
    if (record + 56 > static_cast<uint64_t>(eocd - 20) || u32(base + record) != 0x06064b50) {
      return invalid_argument("'", path, "': the zip64 end record is damaged");
    }
    count = static_cast<int64_t>(u64(base + record + 32));
    cd_size = static_cast<int64_t>(u64(base + record + 40));
    cd_offset = static_cast<int64_t>(u64(base + record + 48));
    cd_end = static_cast<int64_t>(record);
  }
  if (count < 0 || cd_offset < 0 || cd_size < 0 || cd_offset + cd_size > cd_end) {
    return invalid_argument("'", path, "': the zip central directory is damaged");
  }
  int64_t at = cd_offset;
  for (int64_t k = 0; k < count; ++k) {
    if (at + 46 > cd_end || u32(base + at) != 0x02014b50) {
      return invalid_argument("'", path, "': zip central directory entry ", k, " is damaged");
    }
    const uint16_t method = u16(base + at + 10);
    int64_t csize = u32(base + at + 20), usize = u32(base + at + 24);
    const int64_t name_len = u16(base + at + 28), extra_len = u16(base + at + 30), comment_len = u16(base + at + 32);
    int64_t local = u32(base + at + 42);
    if (at + 46 + name_len + extra_len > cd_end) return invalid_argument("'", path, "': zip entry name out of bounds");
    const std::string name(base + at + 46, static_cast<size_t>(name_len));
    // Zip64 extra field (id 1): the 8-byte values of the fields that read 0xffffffff, in order.
    for (int64_t e = at + 46 + name_len; e + 4 <= at + 46 + name_len + extra_len;) {
      const uint16_t id = u16(base + e), len = u16(base + e + 2);
      if (e + 4 + len > at + 46 + name_len + extra_len) break;
      if (id == 1) {
        int64_t f = e + 4;
        auto take = [&](int64_t* field) {
          if (*field == 0xffffffff && f + 8 <= e + 4 + len) {
            *field = static_cast<int64_t>(u64(base + f));
            f += 8;
          }
        };
        take(&usize);
        take(&csize);
        take(&local);
      }
      e += 4 + len;
    }
    if (method != 0 || csize != usize) {
      return unimplemented("'", path, "': zip entry '", name, "' is compressed (torch.save stores entries)");
    }
    if (local < 0 || local + 30 > size || u32(base + local) != 0x04034b50) {
      return invalid_argument("'", path, "': zip local header of '", name, "' is damaged");
    }
    const int64_t data = local + 30 + u16(base + local + 26) + u16(base + local + 28);
    if (csize < 0 || data + csize > size) return invalid_argument("'", path, "': zip entry '", name, "' is truncated");
    file.entries_[name] = {data, csize};
    at += 46 + name_len + extra_len + comment_len;
  }
  for (const auto& [name, entry] : file.entries_) {
    if (name.ends_with("/data.pkl") && name.find('/') == name.size() - 9) {
      file.prefix_ = name.substr(0, name.size() - 8);
    }
  }
  if (file.prefix_.empty()) return invalid_argument("'", path, "' holds no <name>/data.pkl (not a torch.save file?)");
  const Entry& pkl = file.entries_.at(file.prefix_ + "data.pkl");
  Unpickler unpickler(base + pkl.offset, pkl.size, path);
  MS_ASSIGN_OR_RETURN(file.root_, unpickler.run());
  return file;
}

StatusOr<std::vector<float>> TorchCheckpointFile::read_f32(const TorchTensorRef& t) const {
  int width = 0;
  if (t.storage_type == "FloatStorage") width = 4;
  if (t.storage_type == "BFloat16Storage" || t.storage_type == "HalfStorage") width = 2;
  if (width == 0) return unimplemented(path_, ": storage type ", t.storage_type, " (expected float, bfloat16 or half)");
  int64_t numel = 1, expected_stride = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.stride.size() != t.shape.size() || (t.shape[d] > 1 && t.stride[d] != expected_stride)) {
      return unimplemented(path_, ": a non-contiguous tensor in storage ", t.key);
    }
    expected_stride *= t.shape[d];
  }
  for (int64_t d : t.shape) numel *= d;
  auto it = entries_.find(prefix_ + "data/" + t.key);
  if (it == entries_.end()) return invalid_argument(path_, ": storage record ", t.key, " is missing");
  if (t.offset < 0 || t.offset + numel > t.storage_numel || t.storage_numel * width > it->second.size) {
    return invalid_argument(path_, ": tensor of storage ", t.key, " lies outside its record");
  }
  const char* src = mapping_.get() + it->second.offset + t.offset * width;
  std::vector<float> out(static_cast<size_t>(numel));
  for (int64_t k = 0; k < numel; ++k) {
    if (width == 4) {
      std::memcpy(&out[k], src + 4 * k, 4);
    } else {
      const uint16_t bits = u16(src + 2 * k);
      if (t.storage_type == "BFloat16Storage") {
        bf16 b;
        b.bits = bits;
        out[k] = bf16_to_float(b);
      } else {
        out[k] = half_to_float(bits);
      }
    }
  }
  return out;
}

namespace {

// Pickle protocol 2 as torch.save writes it.
class Pickler {
 public:
  explicit Pickler(const std::vector<TorchSaveTensor>& tensors) : tensors_(tensors) {}
  Status dump(const PickleValue& root) {
    out_ += "\x80\x02";
    MS_RETURN_IF_ERROR(value(root));
    out_ += '.';
    return ok_status();
  }
  const std::string& bytes() const { return out_; }

 private:
  void u32(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), 4); }
  void str(const std::string& s) {
    out_ += 'X';
    u32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }
  void global(const std::string& dotted) {  // "module.name": the last dot splits
    const size_t dot = dotted.rfind('.');
    out_ += 'c';
    out_ += dotted.substr(0, dot) + "\n" + dotted.substr(dot + 1) + "\n";
  }
  void integer(int64_t v) {
    if (v >= INT32_MIN && v <= INT32_MAX) {
      out_ += 'J';
      u32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
      out_ += '\x8a';
      out_ += '\x08';
      out_.append(reinterpret_cast<const char*>(&v), 8);
    }
  }
  void ordered_dict_start() {
    global("collections.OrderedDict");
    out_ += ")R";
  }
  Status dict_items(const PickleValue& v) {
    if (v.dict.empty()) return ok_status();
    out_ += '(';
    for (const auto& [k, x] : v.dict) {
      MS_RETURN_IF_ERROR(value(*k));
      MS_RETURN_IF_ERROR(value(*x));
    }
    out_ += 'u';
    return ok_status();
  }
  Status value(const PickleValue& v) {
    using K = PickleValue::Kind;
    switch (v.kind) {
      case K::kNone: out_ += 'N'; return ok_status();
      case K::kBool: out_ += v.b ? "\x88" : "\x89"; return ok_status();
      case K::kInt: integer(v.i); return ok_status();
      case K::kFloat: {
        uint64_t bits;
        std::memcpy(&bits, &v.f, 8);
        out_ += 'G';
        for (int k = 7; k >= 0; --k) out_ += static_cast<char>((bits >> (8 * k)) & 0xff);
        return ok_status();
      }
      case K::kString: str(v.s); return ok_status();
      case K::kBytes:
        out_ += 'B';
        u32(static_cast<uint32_t>(v.s.size()));
        out_ += v.s;
        return ok_status();
      case K::kGlobal: global(v.s); return ok_status();
      case K::kList:
      case K::kTuple:
        out_ += v.kind == K::kList ? "](" : "(";
        for (const auto& x : v.items) MS_RETURN_IF_ERROR(value(*x));
        out_ += v.kind == K::kList ? "e" : "t";
        return ok_status();
      case K::kDict:
        ordered_dict_start();
        return dict_items(v);
      case K::kObject:  // cls.__new__(cls) then __setstate__(state): argparse.Namespace
        global(v.object_class);
        out_ += ")\x81}";
        MS_RETURN_IF_ERROR(dict_items(v));
        out_ += 'b';
        return ok_status();
      case K::kTensor: {
        char* end = nullptr;
        const unsigned long long index = std::strtoull(v.tensor->key.c_str(), &end, 10);
        if (v.tensor->key.empty() || *end != '\0' || index >= tensors_.size()) {
          return invalid_argument("write_torch_save: tensor key '", v.tensor->key, "' is not an index of the ",
                                  tensors_.size(), " tensors");
        }
        const TorchSaveTensor& t = tensors_[index];
        global("torch._utils._rebuild_tensor_v2");
        out_ += "((";
        str("storage");
        global("torch.FloatStorage");
        str(std::to_string(index));
        str("cpu");
        integer(static_cast<int64_t>(t.values.size()));
        out_ += "tQ";
        integer(0);
        out_ += '(';
        for (int64_t d : t.shape) integer(d);
        out_ += "t(";
        int64_t stride = 1;
        std::vector<int64_t> strides(t.shape.size());
        for (size_t d = t.shape.size(); d-- > 0;) {
          strides[d] = stride;
          stride *= t.shape[d];
        }
        for (int64_t st : strides) integer(st);
        out_ += "t\x89";  // requires_grad False
        ordered_dict_start();  // backward hooks
        out_ += "tR";
        return ok_status();
      }
    }
    return invalid_argument("write_torch_save: unknown value kind");
  }

  const std::vector<TorchSaveTensor>& tensors_;
  std::string out_;
};

}  // namespace

Status write_torch_save(const std::string& path, const std::string& record, const PickleValue& root,
                        const std::vector<TorchSaveTensor>& tensors) {
  Pickler pickler(tensors);
  MS_RETURN_IF_ERROR(pickler.dump(root));
  // The records: data.pkl, one per storage, the format version; each record's data starts at a
  // multiple of 64 bytes (PyTorch's writer pads the local header's extra field the same way).
  std::vector<std::pair<std::string, std::string_view>> records;
  records.emplace_back(record + "/data.pkl", pickler.bytes());
  for (size_t k = 0; k < tensors.size(); ++k) {
    records.emplace_back(record + "/data/" + std::to_string(k),
                         std::string_view(reinterpret_cast<const char*>(tensors[k].values.data()),
                                          tensors[k].values.size() * 4));
  }
  static const std::string kVersion = "3\n";
  records.emplace_back(record + "/version", kVersion);
  std::vector<std::string> headers;  // kept alive for the pieces
  headers.reserve(records.size() + 1);
  std::vector<std::string_view> pieces;
  std::string central;
  auto put16 = [](std::string& s, uint16_t v) { s.append(reinterpret_cast<const char*>(&v), 2); };
  auto put32 = [](std::string& s, uint32_t v) { s.append(reinterpret_cast<const char*>(&v), 4); };
  uint64_t offset = 0;
  for (const auto& [name, data] : records) {
    if (data.size() >= 0xffffffffu || offset >= 0xffffffffu) {
      return unimplemented("write_torch_save: '", path, "' would need zip64 (over 4 GiB)");
    }
    const uint32_t crc = crc32_update(0, data.data(), data.size());
    const uint64_t data_start = offset + 30 + name.size() + 4;  // 4: the extra field's own header
    const uint16_t pad = static_cast<uint16_t>((64 - data_start % 64) % 64);
    std::string h;
    put32(h, 0x04034b50); put16(h, 20); put16(h, 0); put16(h, 0); put16(h, 0); put16(h, 0);
    put32(h, crc); put32(h, static_cast<uint32_t>(data.size())); put32(h, static_cast<uint32_t>(data.size()));
    put16(h, static_cast<uint16_t>(name.size())); put16(h, static_cast<uint16_t>(4 + pad));
    h += name;
    put16(h, 0x4246); put16(h, pad);  // "FB" padding field, as PyTorch writes
    h.append(pad, 'Z');
    put32(central, 0x02014b50); put16(central, 20); put16(central, 20); put16(central, 0); put16(central, 0);
    put16(central, 0); put16(central, 0); put32(central, crc);
    put32(central, static_cast<uint32_t>(data.size())); put32(central, static_cast<uint32_t>(data.size()));
    put16(central, static_cast<uint16_t>(name.size())); put16(central, 0); put16(central, 0); put16(central, 0);
    put16(central, 0); put32(central, 0); put32(central, static_cast<uint32_t>(offset));
    central += name;
    offset += h.size() + data.size();
    headers.push_back(std::move(h));
    pieces.push_back(headers.back());
    pieces.push_back(data);
  }
  std::string end = central;
  put32(end, 0x06054b50); put16(end, 0); put16(end, 0);
  put16(end, static_cast<uint16_t>(records.size())); put16(end, static_cast<uint16_t>(records.size()));
  put32(end, static_cast<uint32_t>(central.size())); put32(end, static_cast<uint32_t>(offset)); put16(end, 0);
  headers.push_back(std::move(end));
  pieces.push_back(headers.back());
  return write_file_atomically(path, pieces).status();
}

}  // namespace mindspeed
