// Fuzz target: a Megatron indexed dataset (datasets/indexed_dataset.h). The input is the .idx
// file, the separator of fuzz_util.h, then the .bin file. What opens (with and without
// multimodal) must be readable end to end: every sequence as token ids (or a Status), its
// raw bytes and document, the dataset merged into a builder (merge_datasets), and, when it
// opens as a token dataset, a GPTDataset over it with every sample read (or a Status).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "datasets/gpt_dataset.h"
#include "datasets/indexed_dataset.h"
#include "fuzz_util.h"

namespace {

using namespace mindspeed;

void read_all(const IndexedDataset& ds) {
  std::vector<int32_t> out;
  for (int64_t i = 0; i < ds.num_sequences(); ++i) {
    const int32_t length = ds.sequence_length(i);
    if (length < 0) __builtin_trap();
    out.assign(static_cast<size_t>(length), 0);
    const Status status = ds.get(i, 0, length, out.data());
    if (!status.ok() && status.code() != StatusCode::kInvalidArgument) __builtin_trap();
    const std::span<const uint8_t> bytes = ds.sequence_bytes(i);
    if (static_cast<int64_t>(bytes.size()) != int64_t{length} * indexed_dtype_size(ds.dtype())) __builtin_trap();
    const int64_t doc = ds.document_of_sequence(i);
    if (doc < 0 || doc >= ds.document_count() || ds.document_index(doc) > i) __builtin_trap();
    if (ds.multimodal()) (void)ds.sequence_mode(i);
  }
  if (ds.sequence_lengths().size() != static_cast<size_t>(ds.num_sequences()) ||
      ds.sequence_pointers().size() != static_cast<size_t>(ds.num_sequences()) ||
      ds.document_indices().size() != static_cast<size_t>(ds.document_count())) {
    __builtin_trap();
  }
  // merge_datasets: add_index reads the same files; the builder is dropped unfinished.
  auto builder = IndexedDatasetBuilder::create(fuzz::scratch_file("merged.bin"), ds.dtype(), ds.multimodal());
  if (!builder.ok()) __builtin_trap();
  (void)(*builder)->add_index(ds.path_prefix());
}

void read_samples(std::unique_ptr<IndexedDataset> ds) {
  if (ds->num_sequences() > (1 << 16)) return;
  auto config = std::make_shared<GPTDatasetConfig>();
  config->sequence_length = 4;
  config->eod_token = 0;
  config->tokenizer = {"_NullTokenizer", {std::nullopt}, {{"vocab_size", "100"}}};
  if (!config->finalize().ok() || !config->mock) __builtin_trap();  // no blend: mock, no cache
  std::vector<int32_t> indices(static_cast<size_t>(ds->num_sequences()));
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int32_t>(i);
  IndexBuildRole role;
  role.log = false;
  auto gpt = GPTDataset::create(std::shared_ptr<const LowLevelDataset>(std::move(ds)), std::nullopt,
                                std::move(indices), std::nullopt, Split::kTrain, config, role);
  if (!gpt.ok()) return;
  const int64_t s = config->sequence_length;
  std::vector<int32_t> tokens(s), labels(s), positions(s), doc_start(s);
  std::vector<float> loss_mask(s);
  std::vector<int32_t> seq_len;
  const GptSampleView view{tokens.data(), labels.data(), loss_mask.data(), positions.data(), doc_start.data(),
                           &seq_len};
  for (int64_t i = 0; i < std::min<int64_t>((*gpt)->size(), 256); ++i) {
    const Status status = (*gpt)->get_sample(i, view);
    if (!status.ok() && status.code() != StatusCode::kInvalidArgument) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [idx, bin] = fuzz::split_two(data, size);
  const std::string prefix = fuzz::scratch_file("data");
  fuzz::write_file(get_idx_path(prefix), idx);
  fuzz::write_file(get_bin_path(prefix), bin);
  for (const bool multimodal : {false, true}) {
    auto ds = IndexedDataset::open(prefix, multimodal);
    if (ds.ok()) read_all(**ds);
  }
  auto tokens = open_token_dataset(prefix);
  if (tokens.ok()) read_samples(std::move(*tokens));
  return 0;
}
