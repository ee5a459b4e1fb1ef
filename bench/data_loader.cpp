// Data-loader cost per training step: builds Megatron's GPTDataset over a preprocessed
// dataset (the embedded corpus: run scripts/run_demo.sh once, or pass --data-path) and times
// fetching one global batch of the gpt2-124m benchmark shape (micro-batch 4 x 1024 tokens,
// 8 micro-batches), including index building once (reported separately).
//   data_loader [--data-path PREFIX] [--tokenizer-vocab N]
#include <cstdio>
#include <string>

#include "core/timers.h"
#include "datasets/blended_megatron_dataset_builder.h"
#include "datasets/data_samplers.h"
#include "datasets/indexed_dataset.h"
#include "tokenizer/tokenizer.h"

using namespace mindspeed;

int main(int argc, char** argv) {
  std::string prefix = "build/release/data/kjv_text_document";
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--data-path" && i + 1 < argc) prefix = argv[++i];
  }
  const int64_t mbs = 4, seq = 1024, micro = 8, iters = 50;
  auto tokenizer = make_null_tokenizer(50256);  // only the EOD id and the cache key matter here
  if (!tokenizer.ok()) return 1;
  GptDataArgs a;
  a.data_path = {prefix};
  a.split = "100,0,0";
  a.seq_length = seq;
  const auto& ids = (*tokenizer)->unique_identifiers();
  a.tokenizer.class_name = ids.class_name;
  a.tokenizer.tokenizer_path = ids.tokenizer_path;
  a.tokenizer.options = ids.options;
  a.eod_token = 50256;
  a.data_cache_path = "/tmp/mindspeed_data_loader_bench_cache";
  auto cfg = gpt_dataset_config_from_args(a);
  if (!cfg.ok()) {
    std::fprintf(stderr, "%s\n", cfg.status().to_string().c_str());
    return 1;
  }
  LowLevelDatasetFactory factory = [](const std::string& p) -> StatusOr<std::shared_ptr<const LowLevelDataset>> {
    MS_ASSIGN_OR_RETURN(std::unique_ptr<IndexedDataset> ds, open_token_dataset(p));
    return std::shared_ptr<const LowLevelDataset>(std::move(ds));
  };
  Timer build_timer;
  BlendedMegatronDatasetBuilder builder(*cfg, {iters * micro * mbs, std::nullopt, std::nullopt}, factory, {});
  auto datasets = builder.build();
  if (!datasets.ok()) {
    std::fprintf(stderr, "%s\n", datasets.status().to_string().c_str());
    return 1;
  }
  const double build_s = build_timer.seconds();
  auto loader = GptDataLoader::create(datasets->train(), 0, mbs, 0, 1);
  GptBatch batch;
  Timer timer;
  for (int64_t i = 0; i < iters * micro; ++i) {
    StatusOr<bool> got = loader->next(&batch);
    if (!got.ok()) {
      std::fprintf(stderr, "%s\n", got.status().to_string().c_str());
      return 1;
    }
  }
  const double per_step = timer.seconds() / iters;
  std::printf("{\"measure\": \"data_loader\", \"index_build_or_load_s\": %.3f, \"global_batch\": \"%lld x %lld x %lld tokens\", "
              "\"ms_per_step\": %.3f, \"tokens_per_s\": %.0f}\n",
              build_s, static_cast<long long>(micro), static_cast<long long>(mbs), static_cast<long long>(seq),
              per_step * 1000.0, static_cast<double>(micro * mbs * seq) / per_step);
  return 0;
}
