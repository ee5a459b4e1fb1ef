// Megatron's indexed dataset: the .idx/.bin pair that preprocess_data writes and GPTDataset
// reads. Port of megatron/core/datasets/indexed_dataset.py (DType, _IndexReader,
// _IndexWriter, IndexedDataset, IndexedDatasetBuilder); files are byte-identical to Megatron's.
//
// .idx (little-endian, no padding): b"MMIDIDX\0\0", u64 version (1), u8 dtype code,
// u64 sequence count N, u64 document count D (entries of the document index, leading 0
// included), i32[N] sequence lengths (tokens), i64[N] sequence pointers (byte offsets into
// .bin), i64[D] document indices ([0, ..., N]: first sequence of each document), and for
// multimodal datasets i8[N] sequence modes. .bin: all tokens in the dtype, back to back.
//
// The reader memory-maps both files and checks every header field, size, document index
// entry and sequence extent against the real file sizes when opening (one pass over the
// index, O(sequences + documents)), so damaged files give a Status naming the file, never a
// crash; extra bytes after the index arrays are ignored, as Megatron does. Arrays in the
// mapping are not aligned (the header is 34 bytes), so they are read with memcpy through
// the accessors below. All methods are const and safe to call from several threads.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "datasets/low_level_dataset.h"

namespace mindspeed {

/// Megatron's DType codes (numpy dtypes) of the token ids in .bin.
enum class IndexedDType : uint8_t {
  kUInt8 = 1,
  kInt8 = 2,
  kInt16 = 3,
  kInt32 = 4,
  kInt64 = 5,
  kFloat64 = 6,
  kFloat32 = 7,
  kUInt16 = 8,
};

/// Bytes per element.
int64_t indexed_dtype_size(IndexedDType dtype);
/// The numpy name ("uint16").
const char* indexed_dtype_name(IndexedDType dtype);
/// InvalidArgument unless 1 <= code <= 8.
StatusOr<IndexedDType> indexed_dtype_from_code(int64_t code);
/// DType.optimal_dtype(cardinality): uint16 if vocab_size < 65500, else int32 (also when
/// the vocabulary size is unknown).
IndexedDType optimal_dtype(std::optional<int64_t> vocab_size);

/// True for float32 and float64, which Megatron's DType allows but which cannot hold token
/// ids (Megatron's token datasets are uint16 or int32).
bool indexed_dtype_is_float(IndexedDType dtype);

/// prefix + ".idx" / prefix + ".bin" (Megatron's get_idx_path / get_bin_path).
std::string get_idx_path(const std::string& path_prefix);
std::string get_bin_path(const std::string& path_prefix);
/// IndexedDataset.exists: both files are present.
bool indexed_dataset_exists(const std::string& path_prefix);

class IndexedDataset final : public LowLevelDataset {
 public:
  /// Opens `path_prefix`.idx/.bin. `multimodal` also reads the i8 sequence modes after the
  /// document indices (Megatron's multimodal=True; the header does not record it).
  /// NotFound: a file is missing. InvalidArgument: not an MMIDIDX index, wrong version or
  /// dtype code. DataLoss: sizes, counts, offsets or document indices are inconsistent.
  static StatusOr<std::unique_ptr<IndexedDataset>> open(const std::string& path_prefix,
                                                        bool multimodal = false);
  ~IndexedDataset() override;
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  // LowLevelDataset
  int64_t num_sequences() const override { return sequence_count_; }
  int32_t sequence_length(int64_t i) const override;
  /// Tokens [offset, offset + length) of sequence i as int32 token ids. InvalidArgument
  /// naming the data file, the sequence, its document, the position and the value when a
  /// stored value is negative or above 2^31 - 1 (an int64 value would wrap into a valid-
  /// looking id), and for float dtypes (token ids are integers; use sequence_bytes() for the
  /// raw values). Out-of-range arguments are a bug: MS_CHECK.
  Status get(int64_t i, int64_t offset, int64_t length, int32_t* out) const override;
  /// The document holding sequence i (the last j with document_index(j) <= i).
  int64_t document_of_sequence(int64_t i) const;
  std::string path_prefix() const override { return path_prefix_; }

  IndexedDType dtype() const { return dtype_; }
  bool multimodal() const { return multimodal_; }
  /// Entries of the document index (D, including the leading 0); documents = D - 1.
  int64_t document_count() const { return document_count_; }
  int64_t num_documents() const { return document_count_ - 1; }
  /// Byte offset of sequence i in .bin.
  int64_t sequence_pointer(int64_t i) const;
  /// Entry j of the document index: the first sequence of document j (j < D).
  int64_t document_index(int64_t j) const;
  /// Mode of sequence i (multimodal datasets only).
  int8_t sequence_mode(int64_t i) const;
  /// Copies of the index arrays (Megatron's sequence_lengths / sequence_pointers /
  /// document_indices / sequence_modes numpy views).
  std::vector<int32_t> sequence_lengths() const;
  std::vector<int64_t> sequence_pointers() const;
  std::vector<int64_t> document_indices() const;
  std::vector<int8_t> sequence_modes() const;
  /// The .bin bytes of sequence i (length * itemsize bytes, little-endian, maybe unaligned).
  std::span<const uint8_t> sequence_bytes(int64_t i) const;
  /// The whole .bin.
  std::span<const uint8_t> bin_bytes() const;

 private:
  struct Mapping;
  IndexedDataset() = default;
  Status bad_token(int64_t i, int64_t position, const std::string& value) const;
  static StatusOr<std::unique_ptr<Mapping>> map_file(const std::string& path, const char* what);

  std::string path_prefix_;
  std::unique_ptr<Mapping> idx_;
  std::unique_ptr<Mapping> bin_;
  IndexedDType dtype_ = IndexedDType::kInt32;
  bool multimodal_ = false;
  int64_t sequence_count_ = 0;
  int64_t document_count_ = 0;
  const uint8_t* lengths_ = nullptr;    // i32[N]
  const uint8_t* pointers_ = nullptr;   // i64[N]
  const uint8_t* documents_ = nullptr;  // i64[D]
  const uint8_t* modes_ = nullptr;      // i8[N] or null
};

/// Opens `path_prefix` as a dataset of token ids for GPTDataset (what --data-path names):
/// IndexedDataset::open, then InvalidArgument for a float dtype, naming the files and the fix.
StatusOr<std::unique_ptr<IndexedDataset>> open_token_dataset(const std::string& path_prefix);

/// Writes a dataset as Megatron's IndexedDatasetBuilder does, atomically: tokens go to a
/// temporary file next to `bin_path`; finalize() writes the index to a temporary file and
/// renames both into place. A builder destroyed before finalize() leaves nothing behind.
class IndexedDatasetBuilder {
 public:
  /// Megatron's IndexedDatasetBuilder(bin_path, dtype=numpy.int32, multimodal=False).
  static StatusOr<std::unique_ptr<IndexedDatasetBuilder>> create(
      const std::string& bin_path, IndexedDType dtype = IndexedDType::kInt32,
      bool multimodal = false);
  ~IndexedDatasetBuilder();
  IndexedDatasetBuilder(const IndexedDatasetBuilder&) = delete;
  IndexedDatasetBuilder& operator=(const IndexedDatasetBuilder&) = delete;

  /// Appends one sequence. InvalidArgument if a value does not fit the dtype.
  Status add_item(std::span<const int32_t> tokens, int8_t mode = 0);
  Status add_item(std::span<const int64_t> tokens, int8_t mode = 0);
  /// Closes the current document (its sequences are those added since the last call).
  void end_document();
  /// Appends one document of sequences with the given lengths (which must sum to
  /// tokens.size()); `modes` (multimodal only) defaults to zeros. A document without
  /// sequences is allowed (Megatron writes a repeated document index).
  Status add_document(std::span<const int32_t> tokens, std::span<const int32_t> lengths,
                      std::span<const int8_t> modes = {});
  Status add_document(std::span<const int64_t> tokens, std::span<const int32_t> lengths,
                      std::span<const int8_t> modes = {});
  /// Appends every document of the dataset at `path_prefix` (same dtype and modality),
  /// copying its .bin.
  Status add_index(const std::string& path_prefix);
  /// Writes `idx_path` and moves the .bin into place. FailedPrecondition if sequences were
  /// added after the last end_document().
  Status finalize(const std::string& idx_path);

  IndexedDType dtype() const { return dtype_; }
  int64_t num_sequences() const { return static_cast<int64_t>(sequence_lengths_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(document_indices_.size()) - 1; }
  int64_t num_tokens() const { return num_tokens_; }

 private:
  IndexedDatasetBuilder() = default;
  template <typename T>
  Status add_item_impl(std::span<const T> tokens, int8_t mode);
  template <typename T>
  Status add_document_impl(std::span<const T> tokens, std::span<const int32_t> lengths,
                           std::span<const int8_t> modes);
  template <typename T>
  Status write_tokens(std::span<const T> tokens);
  Status write_bytes(const void* data, size_t size);
  Status check_open() const;
  void discard();

  std::string bin_path_;
  std::string bin_tmp_path_;
  std::FILE* bin_file_ = nullptr;
  IndexedDType dtype_ = IndexedDType::kInt32;
  bool multimodal_ = false;
  bool finalized_ = false;
  int64_t num_tokens_ = 0;
  std::vector<int32_t> sequence_lengths_;
  std::vector<int64_t> document_indices_{0};
  std::vector<int8_t> sequence_modes_;
  std::vector<uint8_t> buffer_;  // dtype conversion scratch
};

}  // namespace mindspeed
