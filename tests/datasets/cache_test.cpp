// Index caches: .npy bytes identical to numpy.save, Megatron's file names and descriptions
// (MD5s equal to the Python model's), round trips, and corrupt / missing / unwritable caches.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "datasets/blended_dataset.h"
#include "datasets/gpt_dataset.h"
#include "datasets/md5.h"
#include "datasets/npy_file.h"
#include "test_datasets.h"

namespace mindspeed {
namespace {

namespace fs = std::filesystem;
using testing::ReferenceVectors;
using testing::TempDir;
const ReferenceVectors& ref() { return ReferenceVectors::gpt(); }

std::string hex(const std::string& bytes) {
  static const char* k = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(k[c >> 4]);
    out.push_back(k[c & 15]);
  }
  return out;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(NpyFile, HeadersAreByteIdenticalToNumpySave) {
  for (int k = 0; ref().has("npy_" + std::to_string(k)); ++k) {
    const auto& v = ref().strings("npy_" + std::to_string(k));
    const std::string descr = v[0];
    const int ndim = std::stoi(v[1]);
    std::vector<int64_t> shape;
    for (int d = 0; d < ndim; ++d) shape.push_back(std::stoll(v[static_cast<size_t>(2 + d)]));
    NpyDtype dtype{};
    for (NpyDtype t : {NpyDtype::kUint8, NpyDtype::kInt16, NpyDtype::kUint16, NpyDtype::kInt32,
                       NpyDtype::kUint32, NpyDtype::kInt64, NpyDtype::kFloat64}) {
      if (descr == npy_descr(t)) dtype = t;
    }
    const NpyArray a = NpyArray::wrap(dtype, shape, nullptr, nullptr);
    EXPECT_EQ(hex(npy_header(a)), v.back()) << descr;
  }
}

TEST(NpyFile, RoundTripAllDtypes) {
  TempDir tmp;
  const std::string p = tmp.path() + "/a.npy";
  ASSERT_TRUE(write_npy(p, NpyArray::from_vector(std::vector<int64_t>{1, -2, 3, 4, 5, 6}, {3, 2})).ok());
  auto r = read_npy(p);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->dtype(), NpyDtype::kInt64);
  EXPECT_EQ(r->shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(r->int_at(1), -2);
  ASSERT_TRUE(write_npy(p, NpyArray::from_vector(std::vector<uint32_t>{7, 4000000000u})).ok());
  r = read_npy(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->int_at(1), 4000000000ll);
  ASSERT_TRUE(write_npy(p, NpyArray::from_vector(std::vector<int16_t>{-3})).ok());
  r = read_npy(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data<int16_t>()[0], -3);
  ASSERT_TRUE(write_npy(p, NpyArray::from_vector(std::vector<int32_t>{})).ok());
  r = read_npy(p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->numel(), 0);
  // No temp files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
}

TEST(NpyFile, CorruptFilesAreReportedNotCrashed) {
  TempDir tmp;
  const std::string p = tmp.path() + "/c.npy";
  EXPECT_EQ(read_npy(tmp.path() + "/missing.npy").status().code(), StatusCode::kNotFound);
  write_bytes(p, "not numpy at all");
  EXPECT_EQ(read_npy(p).status().code(), StatusCode::kDataLoss);
  write_bytes(p, "");
  EXPECT_EQ(read_npy(p).status().code(), StatusCode::kDataLoss);
  const NpyArray a = NpyArray::from_vector(std::vector<int32_t>{1, 2, 3, 4});
  const std::string good = npy_header(a) + std::string(reinterpret_cast<const char*>(a.raw()), 16);
  write_bytes(p, good.substr(0, good.size() - 3));  // truncated data
  auto r = read_npy(p);
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  write_bytes(p, good.substr(0, 20));  // truncated header
  EXPECT_EQ(read_npy(p).status().code(), StatusCode::kDataLoss);
  std::string big_endian = good;
  big_endian.replace(big_endian.find("<i4"), 3, ">i4");
  write_bytes(p, big_endian);
  EXPECT_EQ(read_npy(p).status().code(), StatusCode::kDataLoss);
  std::string fortran = good;
  fortran.replace(fortran.find("False"), 5, "True ");
  write_bytes(p, fortran);
  EXPECT_EQ(read_npy(p).status().code(), StatusCode::kDataLoss);
  // Dimensions beyond int64 (20 digits) and beyond any file (19 digits), written over the
  // header's padding so that its length stays the same.
  for (const std::string& dim : {std::string(20, '9'), std::string("9223372036854775807")}) {
    std::string huge = good;
    const std::string from = "(4,), }" + std::string(dim.size() - 1, ' ');
    ASSERT_NE(huge.find(from), std::string::npos);
    huge.replace(huge.find(from), from.size(), "(" + dim + ",), }");
    write_bytes(p, huge);
    r = read_npy(p);
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << dim;
    EXPECT_NE(r.status().message().find("shape"), std::string::npos) << r.status().message();
  }
  write_bytes(p, good);
  EXPECT_TRUE(read_npy(p).ok());
}

TEST(Description, MatchesMegatronJsonAndMd5) {
  GPTDatasetConfig cfg;
  cfg.random_seed = 1234;
  cfg.sequence_length = 1024;
  cfg.split = "969, 30, 1";
  cfg.blend = Blend{{"/data/my-gpt2_text_document"}, std::nullopt};
  cfg.tokenizer = {"_GPT2BPETokenizer", {"/data/gpt2-vocab.json", "/data/gpt2-merges.txt"}, {}};
  ASSERT_TRUE(cfg.finalize().ok());
  const std::string text = gpt_dataset_unique_identifiers(
      "GPTDataset", std::string("/data/my-gpt2_text_document"), 256000, Split::kTrain, cfg).dumps(4);
  std::ifstream in(std::string(MS_SOURCE_DIR) + "/tests/datasets/reference/expected_gpt_description.txt");
  const std::string expected((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, expected);
  EXPECT_EQ(md5_hex(text), ref().str("description_gpt_md5"));

  GPTDatasetConfig odd;
  odd.random_seed = 0;
  odd.sequence_length = 4096;
  odd.tokenizer = {"_HuggingFaceTokenizer", {"/models/Llama-2-7b-hf"}, {{"trust_remote_code", "True"}}};
  const std::string path = "/data/d\xc3\xa9j\xc3\xa0 vu \"q\"\\x\xf0\x9f\x98\x80";
  EXPECT_EQ(md5_hex(gpt_dataset_unique_identifiers("GPTDataset", path, std::nullopt, Split::kValid, odd).dumps(4)),
            ref().str("description_odd_md5"));
}

struct Fixture {
  std::shared_ptr<testing::SyntheticLowLevelDataset> low;
  std::shared_ptr<GPTDatasetConfig> cfg;
  std::vector<int32_t> indices;
};

Fixture make_fixture(const std::string& cache_dir, const std::string& prefix = "/data/syn_a_text_document") {
  Fixture f;
  f.low = testing::synthetic("syn_a", prefix);
  f.cfg = std::make_shared<GPTDatasetConfig>();
  f.cfg->sequence_length = 16;
  f.cfg->split = "80,15,5";
  f.cfg->blend = Blend{{prefix}, std::nullopt};
  f.cfg->tokenizer = {"_GPT2BPETokenizer", {"/data/gpt2-vocab.json", "/data/gpt2-merges.txt"}, {}};
  f.cfg->path_to_cache = cache_dir;
  EXPECT_TRUE(f.cfg->finalize().ok());
  for (int i = 0; i < 48; ++i) f.indices.push_back(i);
  return f;
}

StatusOr<std::shared_ptr<GPTDataset>> create(const Fixture& f, bool builder, int64_t n = 30) {
  return GPTDataset::create(f.low, f.low->path_prefix(), f.indices, n, Split::kTrain, f.cfg,
                            {builder, false});
}

void expect_same_indices(const GPTDataset& a, const GPTDataset& b) {
  using Getter = const NpyArray& (GPTDataset::*)() const;
  for (Getter get : {&GPTDataset::document_index, &GPTDataset::sample_index, &GPTDataset::shuffle_index}) {
    const NpyArray& x = (a.*get)();
    const NpyArray& y = (b.*get)();
    ASSERT_EQ(x.dtype(), y.dtype());
    ASSERT_EQ(x.shape(), y.shape());
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(x.int_at(i), y.int_at(i)) << i;
  }
}

TEST(GptCache, RoundTripWithMegatronFileNames) {
  TempDir tmp;
  const Fixture f = make_fixture(tmp.path() + "/cache");
  auto built = create(f, true);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  EXPECT_TRUE((*built)->built_indices());
  EXPECT_EQ((*built)->unique_description_hash(), ref().str("gpt_train_1epoch_md5"));
  const std::string base = tmp.path() + "/cache/" + ref().str("gpt_train_1epoch_md5") + "-GPTDataset-train-";
  for (const char* suffix : {"description.txt", "document_index.npy", "sample_index.npy", "shuffle_index.npy"}) {
    EXPECT_TRUE(fs::is_regular_file(base + suffix)) << base + suffix;
  }
  auto desc = read_whole_file(base + "description.txt");
  ASSERT_TRUE(desc.ok());
  EXPECT_EQ(*desc, (*built)->unique_description());

  auto loaded = create(f, false);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_FALSE((*loaded)->built_indices());
  expect_same_indices(**built, **loaded);
  std::vector<int32_t> a(17), b(17);
  for (int64_t i = 0; i < (*built)->size(); ++i) {
    ASSERT_TRUE((*built)->get_text(i, a.data()).ok());
    ASSERT_TRUE((*loaded)->get_text(i, b.data()).ok());
    ASSERT_EQ(a, b) << i;
  }
}

TEST(GptCache, InterchangeableWithMegatronCacheFiles) {
  // reference/megatron_cache holds the files the Python model wrote with numpy.save for the
  // same dataset, under Megatron's names.
  const fs::path megatron_dir = fs::path(MS_SOURCE_DIR) / "tests/datasets/reference/megatron_cache";
  TempDir theirs;
  for (const auto& e : fs::directory_iterator(megatron_dir)) {
    fs::copy_file(e.path(), fs::path(theirs.path()) / e.path().filename());
  }
  const Fixture f = make_fixture(theirs.path());
  auto loaded = create(f, true);
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_FALSE((*loaded)->built_indices()) << "Megatron's cache files were not used";

  // And the files we write are byte-identical to numpy.save's.
  TempDir ours;
  const Fixture g = make_fixture(ours.path());
  auto built = create(g, true);
  ASSERT_TRUE(built.ok());
  EXPECT_TRUE((*built)->built_indices());
  expect_same_indices(**loaded, **built);
  int compared = 0;
  for (const auto& e : fs::directory_iterator(megatron_dir)) {
    const auto a = read_whole_file(e.path().string());
    const auto b = read_whole_file((fs::path(ours.path()) / e.path().filename()).string());
    ASSERT_TRUE(a.ok() && b.ok()) << e.path();
    EXPECT_EQ(*a, *b) << e.path().filename();
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

TEST(GptCache, DefaultFolderIsUnderThePrefix) {
  TempDir tmp;
  const Fixture f = make_fixture("", tmp.path() + "/corpus/syn_text_document");
  auto ds = create(f, true);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  EXPECT_EQ((*ds)->cache_dir(), tmp.path() + "/corpus/syn_text_document/cache/GPTDataset_indices");
  EXPECT_TRUE(fs::is_regular_file((*ds)->cache_file("shuffle_index.npy")));
}

TEST(GptCache, CorruptOrMismatchedFilesAreRebuilt) {
  TempDir tmp;
  const Fixture f = make_fixture(tmp.path());
  auto reference = create(f, true);
  ASSERT_TRUE(reference.ok());
  const std::string sample_path = (*reference)->cache_file("sample_index.npy");
  const std::string shuffle_path = (*reference)->cache_file("shuffle_index.npy");
  const std::string desc_path = (*reference)->cache_file("description.txt");
  const auto good_sample = read_whole_file(sample_path);
  const auto good_shuffle = read_whole_file(shuffle_path);
  ASSERT_TRUE(good_sample.ok() && good_shuffle.ok());

  // 1. Truncated sample index: the building rank rebuilds and rewrites a valid file.
  write_bytes(sample_path, good_sample->substr(0, good_sample->size() - 5));
  auto ds = create(f, true);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  EXPECT_TRUE((*ds)->built_indices());
  expect_same_indices(**reference, **ds);
  EXPECT_EQ(*read_whole_file(sample_path), *good_sample);

  // 2. Out-of-range shuffle entry with a valid header: a reading rank builds in memory and
  //    leaves the file alone.
  std::string bad = *good_shuffle;
  bad[bad.size() - 1] = '\x7f';
  write_bytes(shuffle_path, bad);
  ds = create(f, false);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  EXPECT_TRUE((*ds)->built_indices());
  expect_same_indices(**reference, **ds);
  EXPECT_EQ(*read_whole_file(shuffle_path), bad);
  ds = create(f, true);
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(*read_whole_file(shuffle_path), *good_shuffle);

  // 3. A description that is not ours (e.g. an MD5 collision or a hand-edited file).
  write_bytes(desc_path, "{}");
  ds = create(f, true);
  ASSERT_TRUE(ds.ok());
  EXPECT_TRUE((*ds)->built_indices());
  EXPECT_EQ(*read_whole_file(desc_path), (*reference)->unique_description());

  // 4. Garbage in every file.
  for (const auto& e : fs::directory_iterator(tmp.path())) write_bytes(e.path().string(), "garbage");
  ds = create(f, true);
  ASSERT_TRUE(ds.ok());
  expect_same_indices(**reference, **ds);
}

TEST(GptCache, MissingCacheOnAReadingRankBuildsInMemoryWithoutWriting) {
  TempDir tmp;
  const Fixture f = make_fixture(tmp.path() + "/never");
  auto ds = create(f, false);
  ASSERT_TRUE(ds.ok()) << ds.status().to_string();
  EXPECT_TRUE((*ds)->built_indices());
  EXPECT_FALSE(fs::exists(tmp.path() + "/never"));
}

TEST(GptCache, UnwritableFolderIsAClearError) {
  TempDir tmp;
  write_bytes(tmp.path() + "/file", "x");
  const Fixture f = make_fixture(tmp.path() + "/file/cache");
  auto ds = create(f, true);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("--data-cache-path"), std::string::npos) << ds.status().message();
}

TEST(GptCache, DifferentConfigsGetDifferentFiles) {
  TempDir tmp;
  Fixture f = make_fixture(tmp.path());
  auto a = create(f, true, 30);
  auto b = create(f, true, 31);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->unique_description_hash(), (*b)->unique_description_hash());
  EXPECT_TRUE((*b)->built_indices());
  int n = 0;
  for (const auto& e : fs::directory_iterator(tmp.path())) n += e.is_regular_file();
  EXPECT_EQ(n, 8);
}

TEST(BlendedCache, RoundTripAndCorruption) {
  TempDir tmp;
  const Fixture f = make_fixture(tmp.path());
  auto a = create(f, true, 30);
  auto b = create(f, true, 20);
  ASSERT_TRUE(a.ok() && b.ok());
  auto blend = BlendedDataset::create({*a, *b}, {0.6, 0.4}, 40, f.cfg, {true, false});
  ASSERT_TRUE(blend.ok()) << blend.status().to_string();
  EXPECT_TRUE((*blend)->built_indices());
  const std::string di = (*blend)->cache_file("dataset_index.npy");
  EXPECT_NE(di.find("-BlendedDataset-train-dataset_index.npy"), std::string::npos);
  EXPECT_TRUE(fs::is_regular_file(di));
  auto again = BlendedDataset::create({*a, *b}, {0.6, 0.4}, 40, f.cfg, {false, false});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE((*again)->built_indices());
  for (int64_t i = 0; i < 40; ++i) {
    ASSERT_EQ((*again)->dataset_index().int_at(i), (*blend)->dataset_index().int_at(i));
    ASSERT_EQ((*again)->dataset_sample_index().int_at(i), (*blend)->dataset_sample_index().int_at(i));
  }
  write_bytes(di, "corrupt");
  again = BlendedDataset::create({*a, *b}, {0.6, 0.4}, 40, f.cfg, {true, false});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE((*again)->built_indices());
  EXPECT_TRUE(read_npy(di).ok());
}

TEST(BlendedDataset, OversamplingIsAnError) {
  TempDir tmp;
  const Fixture f = make_fixture(tmp.path());
  auto a = create(f, true, 30);
  ASSERT_TRUE(a.ok());
  auto blend = BlendedDataset::create({*a}, {1.0}, (*a)->size() + 1, f.cfg, {true, false});
  ASSERT_FALSE(blend.ok());
  EXPECT_NE(blend.status().message().find("oversamples"), std::string::npos) << blend.status().message();
}

}  // namespace
}  // namespace mindspeed
