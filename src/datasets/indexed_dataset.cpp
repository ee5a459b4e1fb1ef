// Megatron indexed dataset reader and builder (see indexed_dataset.h).
#include "datasets/indexed_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "core/check.h"

namespace mindspeed {

static_assert(std::endian::native == std::endian::little,
              "the .idx/.bin format is little-endian; add byte swapping for this host");

namespace {

constexpr char kIndexMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
constexpr char kLegacyMagic[8] = {'T', 'N', 'T', 'I', 'D', 'X', '\0', '\0'};
constexpr int64_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, N, D

template <typename T>
T load(const uint8_t* p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}

std::string errno_text(int err) { return std::strerror(err); }

// a * b + c for sizes, saturating at UINT64_MAX (only used to print what a header needs).
uint64_t saturating_size(uint64_t a, uint64_t b, uint64_t c) {
  if (a != 0 && b > (UINT64_MAX - c) / a) return UINT64_MAX;
  return a * b + c;
}

std::string temp_path_for(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return str_cat(path, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
}

}  // namespace

int64_t indexed_dtype_size(IndexedDType dtype) {
  switch (dtype) {
    case IndexedDType::kUInt8:
    case IndexedDType::kInt8: return 1;
    case IndexedDType::kInt16:
    case IndexedDType::kUInt16: return 2;
    case IndexedDType::kInt32:
    case IndexedDType::kFloat32: return 4;
    case IndexedDType::kInt64:
    case IndexedDType::kFloat64: return 8;
  }
  return 0;
}

const char* indexed_dtype_name(IndexedDType dtype) {
  switch (dtype) {
    case IndexedDType::kUInt8: return "uint8";
    case IndexedDType::kInt8: return "int8";
    case IndexedDType::kInt16: return "int16";
    case IndexedDType::kInt32: return "int32";
    case IndexedDType::kInt64: return "int64";
    case IndexedDType::kFloat64: return "float64";
    case IndexedDType::kFloat32: return "float32";
    case IndexedDType::kUInt16: return "uint16";
  }
  return "?";
}

StatusOr<IndexedDType> indexed_dtype_from_code(int64_t code) {
  if (code < 1 || code > 8) {
    return invalid_argument("dtype code ", code, " is not a Megatron DType (1=uint8, 2=int8, "
                            "3=int16, 4=int32, 5=int64, 6=float64, 7=float32, 8=uint16)");
  }
  return static_cast<IndexedDType>(code);
}

IndexedDType optimal_dtype(std::optional<int64_t> vocab_size) {
  if (vocab_size && *vocab_size < 65500) return IndexedDType::kUInt16;
  return IndexedDType::kInt32;
}

std::string get_idx_path(const std::string& path_prefix) { return path_prefix + ".idx"; }
std::string get_bin_path(const std::string& path_prefix) { return path_prefix + ".bin"; }

bool indexed_dataset_exists(const std::string& path_prefix) {
  struct stat st;
  return ::stat(get_idx_path(path_prefix).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::stat(get_bin_path(path_prefix).c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// ---------------------------------------------------------------- reader

// A read-only memory mapping of a whole file (none for an empty file).
struct IndexedDataset::Mapping {
  const uint8_t* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data != nullptr) ::munmap(const_cast<uint8_t*>(data), size);
  }
};

StatusOr<std::unique_ptr<IndexedDataset::Mapping>> IndexedDataset::map_file(
    const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return not_found(what, " '", path, "' does not exist");
    return invalid_argument("cannot open ", what, " '", path, "': ", errno_text(err));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return invalid_argument(what, " '", path, "' is not a regular file");
  }
  auto mapping = std::make_unique<IndexedDataset::Mapping>();
  mapping->size = static_cast<size_t>(st.st_size);
  if (mapping->size > 0) {
    void* data = ::mmap(nullptr, mapping->size, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return invalid_argument("cannot memory-map ", what, " '", path, "': ", errno_text(err));
    }
    mapping->data = static_cast<const uint8_t*>(data);
  }
  ::close(fd);
  return mapping;
}

IndexedDataset::~IndexedDataset() = default;

StatusOr<std::unique_ptr<IndexedDataset>> IndexedDataset::open(const std::string& path_prefix,
                                                               bool multimodal) {
  std::unique_ptr<IndexedDataset> ds(new IndexedDataset());
  ds->path_prefix_ = path_prefix;
  ds->multimodal_ = multimodal;
  const std::string idx_path = get_idx_path(path_prefix);
  const std::string bin_path = get_bin_path(path_prefix);
  MS_ASSIGN_OR_RETURN(ds->idx_, map_file(idx_path, "index file"));
  MS_ASSIGN_OR_RETURN(ds->bin_, map_file(bin_path, "data file"));
  const uint8_t* idx = ds->idx_->data;
  const uint64_t idx_size = ds->idx_->size;
  const uint64_t bin_size = ds->bin_->size;

  if (idx_size >= 8 && std::memcmp(idx, kLegacyMagic, 8) == 0) {
    return invalid_argument("index file '", idx_path, "' is in Megatron's legacy (pre-MMIDIDX) "
                            "IndexedDataset format, which is not supported; re-run "
                            "preprocess_data on the original JSONL");
  }
  if (idx_size < 9 || std::memcmp(idx, kIndexMagic, 9) != 0) {
    if (idx_size < 9 && idx_size > 0 && std::memcmp(idx, kIndexMagic, idx_size) == 0) {
      return data_loss("index file '", idx_path, "' is truncated: ", idx_size,
                       " bytes, the header alone is ", kHeaderBytes);
    }
    return invalid_argument("index file '", idx_path, "' is not a Megatron indexed-dataset "
                            "index (it does not start with \"MMIDIDX\\0\\0\")");
  }
  if (idx_size < static_cast<uint64_t>(kHeaderBytes)) {
    return data_loss("index file '", idx_path, "' is truncated: ", idx_size,
                     " bytes, the header alone is ", kHeaderBytes);
  }
  const uint64_t version = load<uint64_t>(idx + 9);
  if (version != 1) {
    return invalid_argument("index file '", idx_path, "' has version ", version,
                            "; only version 1 exists");
  }
  auto dtype = indexed_dtype_from_code(idx[17]);
  if (!dtype.ok()) {
    return invalid_argument("index file '", idx_path, "': ", dtype.status().message());
  }
  ds->dtype_ = *dtype;
  const uint64_t n = load<uint64_t>(idx + 18);
  const uint64_t d = load<uint64_t>(idx + 26);
  const uint64_t per_sequence = 4 + 8 + (multimodal ? 1 : 0);
  const uint64_t available = idx_size - kHeaderBytes;
  if (n > available / per_sequence || d > (available - n * per_sequence) / 8) {
    const uint64_t needed = saturating_size(d, 8, saturating_size(n, per_sequence, kHeaderBytes));
    return data_loss("index file '", idx_path, "' is truncated or corrupt: its header says ", n,
                     " sequences and ", d, " document-index entries",
                     multimodal ? " (multimodal)" : "", ", which need ",
                     needed == UINT64_MAX ? std::string("more than 2^64") : std::to_string(needed),
                     " bytes, but the file has ", idx_size);
  }
  if (d == 0) {
    return data_loss("index file '", idx_path, "' has an empty document index (it must hold at "
                     "least the leading 0)");
  }
  ds->sequence_count_ = static_cast<int64_t>(n);
  ds->document_count_ = static_cast<int64_t>(d);
  ds->lengths_ = idx + kHeaderBytes;
  ds->pointers_ = ds->lengths_ + 4 * n;
  ds->documents_ = ds->pointers_ + 8 * n;
  ds->modes_ = multimodal ? ds->documents_ + 8 * d : nullptr;

  // Document index: [0, ..., N], non-decreasing (Megatron asserts only the last entry).
  int64_t previous = 0;
  for (uint64_t j = 0; j < d; ++j) {
    const int64_t value = ds->document_index(static_cast<int64_t>(j));
    if ((j == 0 && value != 0) || value < previous || value > static_cast<int64_t>(n)) {
      return data_loss("index file '", idx_path, "' is corrupt: document index entry ", j, " is ",
                       value, " (entries must rise from 0 to the sequence count ", n, ")");
    }
    previous = value;
  }
  if (previous != static_cast<int64_t>(n)) {
    return data_loss("index file '", idx_path, "' is corrupt: the last document index entry is ",
                     previous, ", not the sequence count ", n);
  }
  // Every sequence must lie inside the .bin.
  const int64_t itemsize = indexed_dtype_size(ds->dtype_);
  for (uint64_t i = 0; i < n; ++i) {
    const int64_t length = load<int32_t>(ds->lengths_ + 4 * i);
    const int64_t pointer = load<int64_t>(ds->pointers_ + 8 * i);
    const int64_t bytes = length * itemsize;
    if (length < 0 || pointer < 0 || static_cast<uint64_t>(bytes) > bin_size ||
        static_cast<uint64_t>(pointer) > bin_size - static_cast<uint64_t>(bytes)) {
      return data_loss("dataset '", path_prefix, "' is corrupt or truncated: sequence ", i,
                       " (byte offset ", pointer, ", ", length, " tokens of ",
                       indexed_dtype_name(ds->dtype_), ") does not fit in data file '", bin_path,
                       "' of ", bin_size, " bytes");
    }
  }
  return ds;
}

int32_t IndexedDataset::sequence_length(int64_t i) const {
  MS_CHECK(i >= 0 && i < sequence_count_, "sequence ", i, " out of range [0, ", sequence_count_,
           ") in ", path_prefix_);
  return load<int32_t>(lengths_ + 4 * i);
}

int64_t IndexedDataset::sequence_pointer(int64_t i) const {
  MS_CHECK(i >= 0 && i < sequence_count_, "sequence ", i, " out of range [0, ", sequence_count_,
           ") in ", path_prefix_);
  return load<int64_t>(pointers_ + 8 * i);
}

int64_t IndexedDataset::document_index(int64_t j) const {
  MS_CHECK(j >= 0 && j < document_count_, "document index entry ", j, " out of range [0, ",
           document_count_, ") in ", path_prefix_);
  return load<int64_t>(documents_ + 8 * j);
}

int8_t IndexedDataset::sequence_mode(int64_t i) const {
  MS_CHECK(multimodal_, "sequence modes exist only for multimodal datasets (", path_prefix_, ")");
  MS_CHECK(i >= 0 && i < sequence_count_, "sequence ", i, " out of range in ", path_prefix_);
  return static_cast<int8_t>(modes_[i]);
}

std::vector<int32_t> IndexedDataset::sequence_lengths() const {
  std::vector<int32_t> out(sequence_count_);
  if (!out.empty()) std::memcpy(out.data(), lengths_, out.size() * sizeof(int32_t));
  return out;
}

std::vector<int64_t> IndexedDataset::sequence_pointers() const {
  std::vector<int64_t> out(sequence_count_);
  if (!out.empty()) std::memcpy(out.data(), pointers_, out.size() * sizeof(int64_t));
  return out;
}

std::vector<int64_t> IndexedDataset::document_indices() const {
  std::vector<int64_t> out(document_count_);
  std::memcpy(out.data(), documents_, out.size() * sizeof(int64_t));
  return out;
}

std::vector<int8_t> IndexedDataset::sequence_modes() const {
  if (!multimodal_) return {};
  return std::vector<int8_t>(reinterpret_cast<const int8_t*>(modes_),
                             reinterpret_cast<const int8_t*>(modes_) + sequence_count_);
}

std::span<const uint8_t> IndexedDataset::sequence_bytes(int64_t i) const {
  const int64_t bytes = int64_t{sequence_length(i)} * indexed_dtype_size(dtype_);
  if (bytes == 0) return {};
  return {bin_->data + sequence_pointer(i), static_cast<size_t>(bytes)};
}

std::span<const uint8_t> IndexedDataset::bin_bytes() const {
  if (bin_->size == 0) return {};
  return {bin_->data, bin_->size};
}

namespace {

// Copies `count` values to int32 token ids; returns the index of the first value that is
// not a token id in [0, 2^31) (it is not copied), or -1.
template <typename T>
int64_t widen(const uint8_t* src, int64_t count, int32_t* out) {
  static_assert(std::is_integral_v<T>);
  for (int64_t k = 0; k < count; ++k) {
    const T value = load<T>(src + k * sizeof(T));
    if constexpr (std::is_signed_v<T>) {
      if (value < 0) return k;
    }
    if constexpr (sizeof(T) > sizeof(int32_t)) {
      if (value > std::numeric_limits<int32_t>::max()) return k;
    }
    out[k] = static_cast<int32_t>(value);
  }
  return -1;
}

// The value at `src` as text, for messages.
std::string value_text(IndexedDType dtype, const uint8_t* src) {
  switch (dtype) {
    case IndexedDType::kUInt8: return std::to_string(load<uint8_t>(src));
    case IndexedDType::kInt8: return std::to_string(load<int8_t>(src));
    case IndexedDType::kInt16: return std::to_string(load<int16_t>(src));
    case IndexedDType::kUInt16: return std::to_string(load<uint16_t>(src));
    case IndexedDType::kInt32: return std::to_string(load<int32_t>(src));
    case IndexedDType::kInt64: return std::to_string(load<int64_t>(src));
    case IndexedDType::kFloat32: return str_cat(load<float>(src));
    case IndexedDType::kFloat64: return str_cat(load<double>(src));
  }
  return "?";
}

Status float_dtype_error(const std::string& path_prefix, IndexedDType dtype) {
  return invalid_argument("dataset '", path_prefix, "' stores ", indexed_dtype_name(dtype),
                          " values (dtype code ", static_cast<int>(dtype), " in '",
                          get_idx_path(path_prefix), "'), but a token dataset holds integer ids "
                          "(Megatron's preprocess_data writes uint16 or int32); re-create it "
                          "with preprocess_data from the original JSONL");
}

}  // namespace

bool indexed_dtype_is_float(IndexedDType dtype) {
  return dtype == IndexedDType::kFloat32 || dtype == IndexedDType::kFloat64;
}

int64_t IndexedDataset::document_of_sequence(int64_t i) const {
  MS_CHECK(i >= 0 && i < sequence_count_, "sequence ", i, " out of range [0, ", sequence_count_,
           ") in ", path_prefix_);
  // Entries rise from 0 to N (checked by open()): the last entry <= i.
  int64_t lo = 0, hi = document_count_ - 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (document_index(mid) <= i) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

Status IndexedDataset::bad_token(int64_t i, int64_t position, const std::string& value) const {
  return invalid_argument("data file '", get_bin_path(path_prefix_), "': token ", position,
                          " of sequence ", i, " (document ", document_of_sequence(i), ") is ",
                          value, ", which is not a token id (0 to 2147483647); the ",
                          indexed_dtype_name(dtype_), " dataset is corrupt or was not written "
                          "by preprocess_data with a tokenizer: re-create it with "
                          "preprocess_data from the original JSONL");
}

Status IndexedDataset::get(int64_t i, int64_t offset, int64_t length, int32_t* out) const {
  const int64_t size = sequence_length(i);
  MS_CHECK(offset >= 0 && length >= 0 && offset <= size && length <= size - offset,
           "tokens [", offset, ", ", offset + length, ") out of range for sequence ", i, " of ",
           size, " tokens in ", path_prefix_);
  if (indexed_dtype_is_float(dtype_)) return float_dtype_error(path_prefix_, dtype_);
  if (length == 0) return ok_status();
  const int64_t itemsize = indexed_dtype_size(dtype_);
  const uint8_t* src = bin_->data + sequence_pointer(i) + offset * itemsize;
  int64_t bad = -1;
  switch (dtype_) {
    case IndexedDType::kUInt8: bad = widen<uint8_t>(src, length, out); break;
    case IndexedDType::kInt8: bad = widen<int8_t>(src, length, out); break;
    case IndexedDType::kInt16: bad = widen<int16_t>(src, length, out); break;
    case IndexedDType::kUInt16: bad = widen<uint16_t>(src, length, out); break;
    case IndexedDType::kInt32: bad = widen<int32_t>(src, length, out); break;
    case IndexedDType::kInt64: bad = widen<int64_t>(src, length, out); break;
    case IndexedDType::kFloat32:
    case IndexedDType::kFloat64: break;
  }
  if (bad >= 0) return bad_token(i, offset + bad, value_text(dtype_, src + bad * itemsize));
  return ok_status();
}

StatusOr<std::unique_ptr<IndexedDataset>> open_token_dataset(const std::string& path_prefix) {
  MS_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> ds, IndexedDataset::open(path_prefix));
  if (indexed_dtype_is_float(ds->dtype())) return float_dtype_error(path_prefix, ds->dtype());
  return ds;
}

// ---------------------------------------------------------------- builder

StatusOr<std::unique_ptr<IndexedDatasetBuilder>> IndexedDatasetBuilder::create(
    const std::string& bin_path, IndexedDType dtype, bool multimodal) {
  MS_RETURN_IF_ERROR(indexed_dtype_from_code(static_cast<int64_t>(dtype)).status());
  std::unique_ptr<IndexedDatasetBuilder> builder(new IndexedDatasetBuilder());
  builder->bin_path_ = bin_path;
  builder->bin_tmp_path_ = temp_path_for(bin_path);
  builder->dtype_ = dtype;
  builder->multimodal_ = multimodal;
  builder->bin_file_ = std::fopen(builder->bin_tmp_path_.c_str(), "wb");
  if (builder->bin_file_ == nullptr) {
    const int err = errno;
    builder->finalized_ = true;  // nothing to clean up
    return invalid_argument("cannot create data file '", bin_path, "' (via '",
                            builder->bin_tmp_path_, "'): ", errno_text(err),
                            " (does the output directory exist and is it writable?)");
  }
  std::setvbuf(builder->bin_file_, nullptr, _IOFBF, 1 << 20);
  return builder;
}

IndexedDatasetBuilder::~IndexedDatasetBuilder() {
  if (!finalized_) discard();
}

void IndexedDatasetBuilder::discard() {
  if (bin_file_ != nullptr) {
    std::fclose(bin_file_);
    bin_file_ = nullptr;
  }
  if (!bin_tmp_path_.empty()) std::remove(bin_tmp_path_.c_str());
  finalized_ = true;
}

Status IndexedDatasetBuilder::check_open() const {
  if (finalized_) {
    return failed_precondition("the builder of '", bin_path_, "' was already finalized");
  }
  return ok_status();
}

Status IndexedDatasetBuilder::write_bytes(const void* data, size_t size) {
  if (size == 0) return ok_status();
  if (std::fwrite(data, 1, size, bin_file_) != size) {
    const int err = errno;
    return data_loss("writing data file '", bin_path_, "' (via '", bin_tmp_path_,
                     "') failed: ", errno_text(err));
  }
  return ok_status();
}

namespace {

// Converts tokens to the dtype's little-endian bytes; returns the index of the first value
// that does not fit (integer dtypes), or -1.
template <typename Out, typename In>
int64_t convert_tokens(std::span<const In> in, uint8_t* out) {
  for (size_t k = 0; k < in.size(); ++k) {
    if constexpr (std::is_integral_v<Out>) {
      if (!std::in_range<Out>(in[k])) return static_cast<int64_t>(k);
    }
    const Out value = static_cast<Out>(in[k]);
    std::memcpy(out + k * sizeof(Out), &value, sizeof(Out));
  }
  return -1;
}

}  // namespace

template <typename T>
Status IndexedDatasetBuilder::write_tokens(std::span<const T> tokens) {
  buffer_.resize(tokens.size() * indexed_dtype_size(dtype_));
  int64_t bad = -1;
  switch (dtype_) {
    case IndexedDType::kUInt8: bad = convert_tokens<uint8_t>(tokens, buffer_.data()); break;
    case IndexedDType::kInt8: bad = convert_tokens<int8_t>(tokens, buffer_.data()); break;
    case IndexedDType::kInt16: bad = convert_tokens<int16_t>(tokens, buffer_.data()); break;
    case IndexedDType::kUInt16: bad = convert_tokens<uint16_t>(tokens, buffer_.data()); break;
    case IndexedDType::kInt32: bad = convert_tokens<int32_t>(tokens, buffer_.data()); break;
    case IndexedDType::kInt64: bad = convert_tokens<int64_t>(tokens, buffer_.data()); break;
    case IndexedDType::kFloat32: bad = convert_tokens<float>(tokens, buffer_.data()); break;
    case IndexedDType::kFloat64: bad = convert_tokens<double>(tokens, buffer_.data()); break;
  }
  if (bad >= 0) {
    return invalid_argument("token id ", tokens[bad], " does not fit the dtype ",
                            indexed_dtype_name(dtype_), " of '", bin_path_,
                            "' (is the vocabulary size right?)");
  }
  MS_RETURN_IF_ERROR(write_bytes(buffer_.data(), buffer_.size()));
  num_tokens_ += static_cast<int64_t>(tokens.size());
  return ok_status();
}

template <typename T>
Status IndexedDatasetBuilder::add_item_impl(std::span<const T> tokens, int8_t mode) {
  MS_RETURN_IF_ERROR(check_open());
  if (tokens.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return invalid_argument("a sequence of ", tokens.size(), " tokens does not fit the int32 "
                            "sequence length of the .idx format");
  }
  MS_RETURN_IF_ERROR(write_tokens(tokens));
  sequence_lengths_.push_back(static_cast<int32_t>(tokens.size()));
  if (multimodal_) sequence_modes_.push_back(mode);
  return ok_status();
}

Status IndexedDatasetBuilder::add_item(std::span<const int32_t> tokens, int8_t mode) {
  return add_item_impl(tokens, mode);
}
Status IndexedDatasetBuilder::add_item(std::span<const int64_t> tokens, int8_t mode) {
  return add_item_impl(tokens, mode);
}

void IndexedDatasetBuilder::end_document() {
  MS_CHECK(!finalized_, "end_document() after finalize() on '", bin_path_, "'");
  document_indices_.push_back(num_sequences());
}

template <typename T>
Status IndexedDatasetBuilder::add_document_impl(std::span<const T> tokens,
                                                std::span<const int32_t> lengths,
                                                std::span<const int8_t> modes) {
  MS_RETURN_IF_ERROR(check_open());
  int64_t total = 0;
  for (int32_t length : lengths) {
    if (length < 0) return invalid_argument("add_document: negative sequence length ", length);
    total += length;
  }
  if (total != static_cast<int64_t>(tokens.size())) {
    return invalid_argument("add_document: the sequence lengths sum to ", total, " but the "
                            "document has ", tokens.size(), " tokens");
  }
  if (!modes.empty() && (!multimodal_ || modes.size() != lengths.size())) {
    return invalid_argument("add_document: ", modes.size(), " modes for ", lengths.size(),
                            " sequences", multimodal_ ? "" : " (the builder is not multimodal)");
  }
  MS_RETURN_IF_ERROR(write_tokens(tokens));
  sequence_lengths_.insert(sequence_lengths_.end(), lengths.begin(), lengths.end());
  document_indices_.push_back(num_sequences());
  if (multimodal_) {
    if (modes.empty()) {
      sequence_modes_.insert(sequence_modes_.end(), lengths.size(), 0);
    } else {
      sequence_modes_.insert(sequence_modes_.end(), modes.begin(), modes.end());
    }
  }
  return ok_status();
}

Status IndexedDatasetBuilder::add_document(std::span<const int32_t> tokens,
                                           std::span<const int32_t> lengths,
                                           std::span<const int8_t> modes) {
  return add_document_impl(tokens, lengths, modes);
}
Status IndexedDatasetBuilder::add_document(std::span<const int64_t> tokens,
                                           std::span<const int32_t> lengths,
                                           std::span<const int8_t> modes) {
  return add_document_impl(tokens, lengths, modes);
}

Status IndexedDatasetBuilder::add_index(const std::string& path_prefix) {
  MS_RETURN_IF_ERROR(check_open());
  MS_ASSIGN_OR_RETURN(auto other, IndexedDataset::open(path_prefix, multimodal_));
  if (other->dtype() != dtype_) {
    return invalid_argument("cannot add dataset '", path_prefix, "' of dtype ",
                            indexed_dtype_name(other->dtype()), " to '", bin_path_,
                            "' of dtype ", indexed_dtype_name(dtype_),
                            " (all merged datasets must share one dtype)");
  }
  // Megatron copies the .bin as is and recomputes pointers from the lengths, which is only
  // right when the sequences are stored back to back from offset 0 (as every builder does).
  const int64_t itemsize = indexed_dtype_size(dtype_);
  int64_t expected = 0;
  for (int64_t i = 0; i < other->num_sequences(); ++i) {
    if (other->sequence_pointer(i) != expected) {
      return invalid_argument("cannot add dataset '", path_prefix, "': sequence ", i,
                              " starts at byte ", other->sequence_pointer(i), " instead of ",
                              expected, " (its sequences are not stored back to back)");
    }
    expected += int64_t{other->sequence_length(i)} * itemsize;
  }
  if (static_cast<int64_t>(other->bin_bytes().size()) != expected) {
    return invalid_argument("cannot add dataset '", path_prefix, "': its data file has ",
                            other->bin_bytes().size(), " bytes but its sequences take ",
                            expected);
  }
  const int64_t offset = num_sequences();
  const std::vector<int32_t> lengths = other->sequence_lengths();
  const std::vector<int64_t> documents = other->document_indices();
  MS_RETURN_IF_ERROR(write_bytes(other->bin_bytes().data(), other->bin_bytes().size()));
  sequence_lengths_.insert(sequence_lengths_.end(), lengths.begin(), lengths.end());
  for (size_t j = 1; j < documents.size(); ++j) document_indices_.push_back(offset + documents[j]);
  if (multimodal_) {
    const std::vector<int8_t> modes = other->sequence_modes();
    sequence_modes_.insert(sequence_modes_.end(), modes.begin(), modes.end());
  }
  num_tokens_ += expected / itemsize;
  return ok_status();
}

Status IndexedDatasetBuilder::finalize(const std::string& idx_path) {
  MS_RETURN_IF_ERROR(check_open());
  if (document_indices_.back() != num_sequences()) {
    return failed_precondition(num_sequences() - document_indices_.back(),
                               " sequence(s) were added to '", bin_path_,
                               "' after the last end_document(); call end_document() first");
  }
  // Close the data file first: a write error must not leave a valid-looking index behind.
  const bool bin_ok = std::fflush(bin_file_) == 0 && std::ferror(bin_file_) == 0;
  const int bin_err = errno;
  const bool closed = std::fclose(bin_file_) == 0;
  bin_file_ = nullptr;
  if (!bin_ok || !closed) {
    discard();
    return data_loss("writing data file '", bin_path_, "' failed: ", errno_text(bin_err));
  }

  const std::string idx_tmp_path = temp_path_for(idx_path);
  std::FILE* idx = std::fopen(idx_tmp_path.c_str(), "wb");
  if (idx == nullptr) {
    const int err = errno;
    discard();
    return invalid_argument("cannot create index file '", idx_path, "' (via '", idx_tmp_path,
                            "'): ", errno_text(err));
  }
  std::setvbuf(idx, nullptr, _IOFBF, 1 << 20);
  const uint64_t version = 1;
  const uint8_t code = static_cast<uint8_t>(dtype_);
  const uint64_t n = sequence_lengths_.size();
  const uint64_t d = document_indices_.size();
  // Write errors are sticky in the FILE and checked once at the end (ferror).
  const auto write = [idx](const void* data, size_t size, size_t count) {
    if (count > 0) std::fwrite(data, size, count, idx);
  };
  write(kIndexMagic, 1, sizeof(kIndexMagic));
  write(&version, sizeof(version), 1);
  write(&code, 1, 1);
  write(&n, sizeof(n), 1);
  write(&d, sizeof(d), 1);
  write(sequence_lengths_.data(), sizeof(int32_t), n);
  // Pointers from the lengths, as _IndexWriter._sequence_pointers does.
  const int64_t itemsize = indexed_dtype_size(dtype_);
  int64_t pointer = 0;
  std::vector<int64_t> pointers;
  pointers.reserve(std::min<uint64_t>(n, 1 << 20));
  for (uint64_t i = 0; i < n; ++i) {
    pointers.push_back(pointer);
    pointer += int64_t{sequence_lengths_[i]} * itemsize;
    if (pointers.size() == pointers.capacity() || i + 1 == n) {
      write(pointers.data(), sizeof(int64_t), pointers.size());
      pointers.clear();
    }
  }
  write(document_indices_.data(), sizeof(int64_t), d);
  if (multimodal_) write(sequence_modes_.data(), 1, sequence_modes_.size());
  const bool idx_ok = std::fflush(idx) == 0 && std::ferror(idx) == 0;
  const int idx_err = errno;
  const bool idx_closed = std::fclose(idx) == 0;
  if (!idx_ok || !idx_closed) {
    std::remove(idx_tmp_path.c_str());
    discard();
    return data_loss("writing index file '", idx_path, "' failed: ", errno_text(idx_err));
  }
  if (std::rename(bin_tmp_path_.c_str(), bin_path_.c_str()) != 0) {
    const int err = errno;
    std::remove(idx_tmp_path.c_str());
    discard();
    return invalid_argument("cannot move '", bin_tmp_path_, "' to '", bin_path_, "': ",
                            errno_text(err));
  }
  if (std::rename(idx_tmp_path.c_str(), idx_path.c_str()) != 0) {
    const int err = errno;
    std::remove(idx_tmp_path.c_str());
    std::remove(bin_path_.c_str());  // no .bin without its .idx
    finalized_ = true;
    return invalid_argument("cannot move '", idx_tmp_path, "' to '", idx_path, "': ",
                            errno_text(err));
  }
  finalized_ = true;
  return ok_status();
}

}  // namespace mindspeed
