// Tests for datasets/indexed_dataset: the builder writes the same bytes as an independent
// Python writer (reference/indexed_dataset_reference.py -> reference/indexed_*), the reader
// reads them back, and damaged files give a Status instead of a crash.
#include "datasets/indexed_dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "scratch_dir.h"

namespace mindspeed {
namespace {

const std::string kReferenceDir = std::string(MS_SOURCE_DIR) + "/tests/datasets/reference";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_bytes(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

using testing::ScratchDir;

// One dataset of reference/indexed_corpus.txt.
struct Sequence {
  int8_t mode = 0;
  std::vector<int64_t> tokens;
};
struct CorpusDataset {
  std::string name;
  IndexedDType dtype = IndexedDType::kInt32;
  bool multimodal = false;
  std::vector<std::string> merged_from;
  std::vector<std::vector<Sequence>> documents;
};

std::map<std::string, CorpusDataset> read_corpus() {
  std::map<std::string, CorpusDataset> corpus;
  std::ifstream in(kReferenceDir + "/indexed_corpus.txt");
  EXPECT_TRUE(in.good());
  std::string line;
  CorpusDataset* current = nullptr;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "dataset") {
      CorpusDataset ds;
      int code = 0, multimodal = 0;
      fields >> ds.name >> code >> multimodal;
      ds.dtype = static_cast<IndexedDType>(code);
      ds.multimodal = multimodal != 0;
      std::string from;
      while (fields >> from) ds.merged_from.push_back(from);
      current = &(corpus[ds.name] = ds);
    } else if (kind == "doc") {
      current->documents.emplace_back();
    } else if (kind == "seq") {
      Sequence seq;
      int mode = 0;
      fields >> mode;
      seq.mode = static_cast<int8_t>(mode);
      int64_t value;
      while (fields >> value) seq.tokens.push_back(value);
      current->documents.back().push_back(seq);
    }
  }
  return corpus;
}

std::string reference_prefix(const std::string& name) {
  return kReferenceDir + "/indexed_" + name;
}

void expect_same_files(const std::string& prefix, const std::string& name) {
  EXPECT_EQ(read_bytes(prefix + ".bin"), read_bytes(reference_prefix(name) + ".bin"))
      << name << ".bin";
  EXPECT_EQ(read_bytes(prefix + ".idx"), read_bytes(reference_prefix(name) + ".idx"))
      << name << ".idx";
}

// Writes a corpus dataset with add_item/end_document (per_item) or add_document.
void build(const CorpusDataset& ds, const std::string& prefix, bool per_item) {
  auto builder = IndexedDatasetBuilder::create(prefix + ".bin", ds.dtype, ds.multimodal);
  ASSERT_TRUE(builder.ok()) << builder.status().to_string();
  for (const auto& doc : ds.documents) {
    if (per_item) {
      for (const auto& seq : doc) ASSERT_TRUE((*builder)->add_item(seq.tokens, seq.mode).ok());
      (*builder)->end_document();
    } else {
      std::vector<int64_t> tokens;
      std::vector<int32_t> lengths;
      std::vector<int8_t> modes;
      for (const auto& seq : doc) {
        tokens.insert(tokens.end(), seq.tokens.begin(), seq.tokens.end());
        lengths.push_back(static_cast<int32_t>(seq.tokens.size()));
        modes.push_back(seq.mode);
      }
      const std::span<const int8_t> doc_modes =
          ds.multimodal ? std::span<const int8_t>(modes) : std::span<const int8_t>();
      const Status s = (*builder)->add_document(tokens, lengths, doc_modes);
      ASSERT_TRUE(s.ok()) << s.to_string();
    }
  }
  const Status s = (*builder)->finalize(prefix + ".idx");
  ASSERT_TRUE(s.ok()) << s.to_string();
}

TEST(IndexedDataset, DTypes) {
  EXPECT_EQ(optimal_dtype(50257), IndexedDType::kUInt16);
  EXPECT_EQ(optimal_dtype(65499), IndexedDType::kUInt16);
  EXPECT_EQ(optimal_dtype(65500), IndexedDType::kInt32);
  EXPECT_EQ(optimal_dtype(std::nullopt), IndexedDType::kInt32);
  const int64_t sizes[] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
  const char* names[] = {"", "uint8", "int8", "int16", "int32", "int64", "float64", "float32",
                         "uint16"};
  for (int code = 1; code <= 8; ++code) {
    auto dtype = indexed_dtype_from_code(code);
    ASSERT_TRUE(dtype.ok());
    EXPECT_EQ(indexed_dtype_size(*dtype), sizes[code]);
    EXPECT_STREQ(indexed_dtype_name(*dtype), names[code]);
  }
  EXPECT_EQ(indexed_dtype_from_code(0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(indexed_dtype_from_code(9).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(get_idx_path("a/b"), "a/b.idx");
  EXPECT_EQ(get_bin_path("a/b"), "a/b.bin");
}

TEST(IndexedDataset, BuilderMatchesPythonReferenceForEveryDType) {
  const auto corpus = read_corpus();
  ASSERT_EQ(corpus.size(), 12u);
  ScratchDir dir;
  for (const auto& [name, ds] : corpus) {
    if (!ds.merged_from.empty()) continue;
    SCOPED_TRACE(name);
    build(ds, dir.file(name + "_items"), /*per_item=*/true);
    expect_same_files(dir.file(name + "_items"), name);
    build(ds, dir.file(name + "_docs"), /*per_item=*/false);
    expect_same_files(dir.file(name + "_docs"), name);
  }
}

TEST(IndexedDataset, AddIndexMatchesPythonReference) {
  const auto corpus = read_corpus();
  const CorpusDataset& merged = corpus.at("merged");
  ASSERT_EQ(merged.merged_from, (std::vector<std::string>{"u16", "u16b"}));
  ScratchDir dir;
  auto builder = IndexedDatasetBuilder::create(dir.file("m.bin"), IndexedDType::kUInt16);
  ASSERT_TRUE(builder.ok());
  for (const auto& part : merged.merged_from) {
    const Status s = (*builder)->add_index(reference_prefix(part));
    ASSERT_TRUE(s.ok()) << s.to_string();
  }
  ASSERT_TRUE((*builder)->finalize(dir.file("m.idx")).ok());
  expect_same_files(dir.file("m"), "merged");
  EXPECT_EQ((*builder)->num_documents(), 17);

  // Multimodal datasets carry their modes along.
  auto mm = IndexedDatasetBuilder::create(dir.file("mm.bin"), IndexedDType::kUInt16, true);
  ASSERT_TRUE((*mm)->add_index(reference_prefix("mm")).ok());
  ASSERT_TRUE((*mm)->finalize(dir.file("mm.idx")).ok());
  expect_same_files(dir.file("mm"), "mm");

  // Mismatched dtypes are refused (Megatron asserts).
  auto i32 = IndexedDatasetBuilder::create(dir.file("x.bin"), IndexedDType::kInt32);
  const Status s = (*i32)->add_index(reference_prefix("u16"));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("uint16"), std::string::npos) << s.message();
  EXPECT_EQ((*i32)->add_index(dir.file("missing")).code(), StatusCode::kNotFound);
}

TEST(IndexedDataset, ReaderReadsPythonReference) {
  const auto corpus = read_corpus();
  for (const auto& [name, ds] : corpus) {
    SCOPED_TRACE(name);
    auto reader = IndexedDataset::open(reference_prefix(name), ds.multimodal);
    ASSERT_TRUE(reader.ok()) << reader.status().to_string();
    const IndexedDataset& r = **reader;
    EXPECT_EQ(r.dtype(), ds.dtype);
    EXPECT_EQ(r.path_prefix(), reference_prefix(name));
    EXPECT_EQ(r.num_documents(), static_cast<int64_t>(ds.documents.size()));
    int64_t seq = 0, pointer = 0;
    const int64_t itemsize = indexed_dtype_size(ds.dtype);
    for (size_t d = 0; d < ds.documents.size(); ++d) {
      EXPECT_EQ(r.document_index(d), seq);
      for (const auto& s : ds.documents[d]) {
        const int32_t length = static_cast<int32_t>(s.tokens.size());
        ASSERT_EQ(r.sequence_length(seq), length);
        EXPECT_EQ(r.sequence_pointer(seq), pointer);
        if (ds.multimodal) {
          EXPECT_EQ(r.sequence_mode(seq), s.mode);
        }
        std::vector<int32_t> out(length, -7);
        const Status read = r.get(seq, 0, length, out.data());
        // Token ids are integers in [0, 2^31): float dtypes and other values are refused.
        const auto is_token = [](int64_t v) { return v >= 0 && v <= INT32_MAX; };
        const auto bad = std::find_if_not(s.tokens.begin(), s.tokens.end(), is_token);
        if (indexed_dtype_is_float(ds.dtype)) {
          EXPECT_EQ(read.code(), StatusCode::kInvalidArgument) << read.to_string();
          EXPECT_NE(read.message().find("a token dataset holds integer ids"), std::string::npos)
              << read.message();
        } else if (bad != s.tokens.end()) {
          EXPECT_EQ(read.code(), StatusCode::kInvalidArgument) << read.to_string();
          EXPECT_NE(read.message().find(str_cat("token ", bad - s.tokens.begin(), " of sequence ",
                                                seq, " (document ", d, ") is ", *bad)),
                    std::string::npos)
              << read.message();
        } else {
          ASSERT_TRUE(read.ok()) << read.to_string();
          for (int32_t k = 0; k < length; ++k) {
            EXPECT_EQ(out[k], s.tokens[k]) << "seq " << seq << " token " << k;
          }
          if (length >= 3) {  // a slice
            int32_t two[2];
            ASSERT_TRUE(r.get(seq, 1, 2, two).ok());
            EXPECT_EQ(two[0], s.tokens[1]);
            EXPECT_EQ(two[1], s.tokens[2]);
          }
        }
        if (ds.dtype == IndexedDType::kInt64) {  // full 64-bit values through the raw bytes
          const auto bytes = r.sequence_bytes(seq);
          ASSERT_EQ(bytes.size(), static_cast<size_t>(length) * 8);
          for (int32_t k = 0; k < length; ++k) {
            int64_t v;
            std::memcpy(&v, bytes.data() + 8 * k, 8);
            EXPECT_EQ(v, s.tokens[k]);
          }
        }
        pointer += int64_t{length} * itemsize;
        ++seq;
      }
    }
    EXPECT_EQ(r.num_sequences(), seq);
    EXPECT_EQ(r.document_index(r.document_count() - 1), seq);
    EXPECT_EQ(r.sequence_lengths().size(), static_cast<size_t>(seq));
    EXPECT_EQ(r.sequence_pointers().size(), static_cast<size_t>(seq));
    EXPECT_EQ(r.document_indices().size(), ds.documents.size() + 1);
    EXPECT_EQ(static_cast<int64_t>(r.bin_bytes().size()), pointer);
  }
  // A multimodal index read without multimodal=True: the trailing modes are ignored.
  auto plain = IndexedDataset::open(reference_prefix("mm"), false);
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE((*plain)->sequence_modes().empty());
  EXPECT_TRUE(indexed_dataset_exists(reference_prefix("u16")));
  EXPECT_FALSE(indexed_dataset_exists(reference_prefix("nope")));
}

TEST(IndexedDataset, BuilderWritesAtomically) {
  ScratchDir dir;
  {
    auto builder = IndexedDatasetBuilder::create(dir.file("a.bin"), IndexedDType::kUInt16);
    ASSERT_TRUE(builder.ok());
    ASSERT_TRUE((*builder)->add_item(std::vector<int32_t>{1, 2, 3}).ok());
    (*builder)->end_document();
    EXPECT_EQ(dir.entries().size(), 1u);  // only the temporary file
    EXPECT_FALSE(std::filesystem::exists(dir.file("a.bin")));
  }  // destroyed without finalize: nothing is left
  EXPECT_TRUE(dir.entries().empty());

  auto builder = IndexedDatasetBuilder::create(dir.file("a.bin"), IndexedDType::kUInt16);
  ASSERT_TRUE((*builder)->add_item(std::vector<int32_t>{1, 2, 3}).ok());
  (*builder)->end_document();
  ASSERT_TRUE((*builder)->finalize(dir.file("a.idx")).ok());
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"a.bin", "a.idx"}));
  EXPECT_EQ((*builder)->num_tokens(), 3);
  // The builder is closed now.
  EXPECT_EQ((*builder)->add_item(std::vector<int32_t>{1}).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ((*builder)->finalize(dir.file("a.idx")).code(), StatusCode::kFailedPrecondition);
}

TEST(IndexedDataset, BuilderErrors) {
  ScratchDir dir;
  auto missing_dir = IndexedDatasetBuilder::create(dir.file("no/such/dir/x.bin"));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_NE(missing_dir.status().message().find("no/such/dir/x.bin"), std::string::npos);

  auto builder = IndexedDatasetBuilder::create(dir.file("b.bin"), IndexedDType::kUInt16);
  Status s = (*builder)->add_item(std::vector<int32_t>{1, 70000});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("70000"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("uint16"), std::string::npos) << s.message();
  EXPECT_EQ((*builder)->add_item(std::vector<int32_t>{-1}).code(), StatusCode::kInvalidArgument);
  s = (*builder)->add_document(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("sum to 2"), std::string::npos) << s.message();
  s = (*builder)->add_document(std::vector<int32_t>{1}, std::vector<int32_t>{1},
                               std::vector<int8_t>{1});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);  // modes on a non-multimodal builder
  ASSERT_TRUE((*builder)->add_item(std::vector<int32_t>{5}).ok());
  s = (*builder)->finalize(dir.file("b.idx"));
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("end_document"), std::string::npos) << s.message();
  (*builder)->end_document();
  ASSERT_TRUE((*builder)->finalize(dir.file("b.idx")).ok());
  auto reader = IndexedDataset::open(dir.file("b"));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->num_sequences(), 1);  // the refused items left no trace

  // Float datasets store the values (any int), int8 refuses 200.
  auto f = IndexedDatasetBuilder::create(dir.file("f.bin"), IndexedDType::kFloat32);
  EXPECT_TRUE((*f)->add_item(std::vector<int64_t>{1, 1 << 30}).ok());
  auto i8 = IndexedDatasetBuilder::create(dir.file("i8.bin"), IndexedDType::kInt8);
  EXPECT_EQ((*i8)->add_item(std::vector<int64_t>{200}).code(), StatusCode::kInvalidArgument);
}

// ---- values that are not token ids

// An int64 token of 2^40 is 0 modulo 2^32: converted with a plain cast it would pass every
// later vocabulary check as id 0. It is refused when read, naming the file, the sequence,
// the document and the value; so is a negative id.
TEST(IndexedDataset, RefusesInt64ValuesOutsideTheTokenIdRange) {
  ScratchDir dir;
  const std::string prefix = dir.file("big");
  auto builder = IndexedDatasetBuilder::create(get_bin_path(prefix), IndexedDType::kInt64);
  ASSERT_TRUE(builder.ok());
  ASSERT_TRUE((*builder)->add_document(std::vector<int64_t>{1, 2, 3}, std::vector<int32_t>{3}).ok());
  ASSERT_TRUE((*builder)
                  ->add_document(std::vector<int64_t>{4, int64_t{1} << 40, 6, -1, INT32_MAX},
                                 std::vector<int32_t>{2, 3})
                  .ok());
  ASSERT_TRUE((*builder)->finalize(get_idx_path(prefix)).ok());
  auto ds = IndexedDataset::open(prefix);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  std::vector<int32_t> out(3, -7);
  ASSERT_TRUE((*ds)->get(0, 0, 3, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3}));
  ASSERT_TRUE((*ds)->get(1, 0, 1, out.data()).ok());  // the token before the bad one
  EXPECT_EQ(out[0], 4);
  Status s = (*ds)->get(1, 0, 2, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  for (const std::string& fragment : std::vector<std::string>{get_bin_path(prefix),
                                                               "token 1 of sequence 1 (document 1) is 1099511627776",
                                                               "not a token id", "re-create it with preprocess_data"}) {
    EXPECT_NE(s.message().find(fragment), std::string::npos) << fragment << " not in: " << s.message();
  }
  s = (*ds)->get(2, 0, 3, out.data());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("token 1 of sequence 2 (document 1) is -1,"), std::string::npos) << s.message();
  ASSERT_TRUE((*ds)->get(2, 2, 1, out.data()).ok());  // INT32_MAX itself is an id
  EXPECT_EQ(out[0], INT32_MAX);
  EXPECT_EQ((*ds)->document_of_sequence(0), 0);
  EXPECT_EQ((*ds)->document_of_sequence(2), 1);
}

// float32/float64 datasets are not token datasets: open_token_dataset (what --data-path
// opens) refuses them, and reading them as token ids is refused instead of truncating.
TEST(IndexedDataset, RefusesFloatDtypesAsTokenDatasets) {
  for (const char* name : {"f32", "f64"}) {
    SCOPED_TRACE(name);
    auto token = open_token_dataset(reference_prefix(name));
    ASSERT_FALSE(token.ok());
    const Status& s = token.status();
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    const std::vector<std::string> fragments = {reference_prefix(name),
                                                std::string(name) == "f32" ? "float32" : "float64",
                                                "a token dataset holds integer ids", "preprocess_data"};
    for (const std::string& fragment : fragments) {
      EXPECT_NE(s.message().find(fragment), std::string::npos) << fragment << " not in: " << s.message();
    }
    auto raw = IndexedDataset::open(reference_prefix(name));  // still readable as raw bytes
    ASSERT_TRUE(raw.ok());
    ASSERT_GT((*raw)->sequence_length(0), 0);
    int32_t id = -7;
    EXPECT_EQ((*raw)->get(0, 0, 1, &id).code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(id, -7);
  }
  auto u16 = open_token_dataset(reference_prefix("u16"));
  EXPECT_TRUE(u16.ok()) << u16.status().to_string();
}

// ---- damaged files

struct Damaged {
  ScratchDir dir;
  std::string idx = read_bytes(reference_prefix("u16") + ".idx");
  std::string bin = read_bytes(reference_prefix("u16") + ".bin");
  std::string written_bin = "unset";
  Status open_with(const std::string& idx_bytes, const std::string& bin_bytes,
                   bool multimodal = false) {
    write_bytes(dir.file("d.idx"), idx_bytes);
    if (bin_bytes != written_bin || !std::filesystem::exists(dir.file("d.bin"))) {
      write_bytes(dir.file("d.bin"), bin_bytes);
      written_bin = bin_bytes;
    }
    auto ds = IndexedDataset::open(dir.file("d"), multimodal);
    if (!ds.ok()) return ds.status();
    // Whatever opens must be fully readable (as token ids, or a Status).
    for (int64_t i = 0; i < (*ds)->num_sequences(); ++i) {
      std::vector<int32_t> out((*ds)->sequence_length(i) + 1);
      MS_RETURN_IF_ERROR((*ds)->get(i, 0, (*ds)->sequence_length(i), out.data()));
    }
    return ok_status();
  }
  template <typename T>
  std::string patched(size_t offset, T value) const {
    std::string out = idx;
    std::memcpy(out.data() + offset, &value, sizeof(T));
    return out;
  }
};

void expect_status(const Status& s, StatusCode code, const std::string& fragment) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("d."), std::string::npos) << "no file name in: " << s.message();
}

TEST(IndexedDataset, RejectsDamagedFiles) {
  Damaged t;
  ASSERT_TRUE(t.open_with(t.idx, t.bin).ok());
  const uint64_t n = 31, d = 13;  // the u16 reference
  const size_t lengths = 34, pointers = 34 + 4 * n, documents = 34 + 12 * n;

  // Missing files.
  std::filesystem::remove(t.dir.file("d.bin"));
  auto missing = IndexedDataset::open(t.dir.file("d"));
  expect_status(missing.status(), StatusCode::kNotFound, "d.bin");
  const Status none = IndexedDataset::open(t.dir.file("none")).status();
  EXPECT_EQ(none.code(), StatusCode::kNotFound);
  EXPECT_NE(none.message().find("none.idx"), std::string::npos) << none.message();

  expect_status(t.open_with("", t.bin), StatusCode::kInvalidArgument, "not a Megatron");
  expect_status(t.open_with("MMIDI", t.bin), StatusCode::kDataLoss, "truncated");
  expect_status(t.open_with(t.idx.substr(0, 20), t.bin), StatusCode::kDataLoss, "truncated");
  expect_status(t.open_with("TNTIDX" + std::string(2, '\0') + t.idx.substr(8), t.bin),
                StatusCode::kInvalidArgument, "legacy");
  expect_status(t.open_with("XMIDIDX" + t.idx.substr(7), t.bin), StatusCode::kInvalidArgument,
                "MMIDIDX");
  expect_status(t.open_with(t.patched<uint64_t>(9, 2), t.bin), StatusCode::kInvalidArgument,
                "version 2");
  expect_status(t.open_with(t.patched<uint8_t>(17, 0), t.bin), StatusCode::kInvalidArgument,
                "dtype code 0");
  expect_status(t.open_with(t.patched<uint8_t>(17, 9), t.bin), StatusCode::kInvalidArgument,
                "dtype code 9");
  expect_status(t.open_with(t.patched<uint64_t>(18, n + 1), t.bin), StatusCode::kDataLoss,
                "truncated or corrupt");
  expect_status(t.open_with(t.patched<uint64_t>(18, UINT64_MAX), t.bin), StatusCode::kDataLoss,
                "more than 2^64");
  expect_status(t.open_with(t.patched<uint64_t>(26, d + 1), t.bin), StatusCode::kDataLoss,
                "truncated or corrupt");
  expect_status(t.open_with(t.patched<uint64_t>(26, uint64_t{1} << 62), t.bin),
                StatusCode::kDataLoss, "truncated or corrupt");
  expect_status(t.open_with(t.patched<uint64_t>(26, 0), t.bin), StatusCode::kDataLoss,
                "empty document index");
  expect_status(t.open_with(t.idx.substr(0, t.idx.size() - 1), t.bin), StatusCode::kDataLoss,
                "truncated");
  expect_status(t.open_with(t.idx, t.bin.substr(0, t.bin.size() - 1)), StatusCode::kDataLoss,
                "does not fit in data file");
  expect_status(t.open_with(t.idx, ""), StatusCode::kDataLoss, "does not fit in data file");
  expect_status(t.open_with(t.patched<int32_t>(lengths + 4, -1), t.bin), StatusCode::kDataLoss,
                "sequence 1");
  expect_status(t.open_with(t.patched<int32_t>(lengths, 1 << 30), t.bin), StatusCode::kDataLoss,
                "sequence 0");
  expect_status(t.open_with(t.patched<int64_t>(pointers + 8 * 5, -2), t.bin),
                StatusCode::kDataLoss, "sequence 5");
  expect_status(t.open_with(t.patched<int64_t>(pointers + 8 * 5, INT64_MAX), t.bin),
                StatusCode::kDataLoss, "sequence 5");
  expect_status(t.open_with(t.patched<int64_t>(documents, 1), t.bin), StatusCode::kDataLoss,
                "document index entry 0");
  expect_status(t.open_with(t.patched<int64_t>(documents + 8 * (d - 1), n - 1), t.bin),
                StatusCode::kDataLoss, "sequence count");
  expect_status(t.open_with(t.patched<int64_t>(documents + 8 * 4, 0), t.bin),
                StatusCode::kDataLoss, "document index entry 4");
  expect_status(t.open_with(t.patched<int64_t>(documents + 8 * 4, int64_t{n} + 5), t.bin),
                StatusCode::kDataLoss, "document index entry 4");
  // multimodal=True on an index without modes: the modes would run past the end.
  expect_status(t.open_with(t.idx, t.bin, true), StatusCode::kDataLoss, "multimodal");
}

// Every truncation and every single-byte change of a small index opens cleanly or fails
// with a Status; whatever opens is readable end to end (Damaged::open_with reads it all).
TEST(IndexedDataset, NeverCrashesOnTruncatedOrFlippedIndex) {
  Damaged t;
  int opened = 0;
  for (size_t size = 0; size < t.idx.size(); ++size) {
    opened += t.open_with(t.idx.substr(0, size), t.bin).ok();
  }
  EXPECT_EQ(opened, 0);
  for (size_t i = 0; i < t.idx.size(); ++i) {
    for (uint8_t flip : {uint8_t{0x01}, uint8_t{0xff}}) {
      std::string idx = t.idx;
      idx[i] = static_cast<char>(idx[i] ^ flip);
      const Status s = t.open_with(idx, t.bin);
      if (!s.ok()) {
        EXPECT_TRUE(s.code() == StatusCode::kDataLoss || s.code() == StatusCode::kInvalidArgument)
            << s.to_string();
      }
    }
  }
}

}  // namespace
}  // namespace mindspeed
