// Port of megatron/core/datasets/blended_megatron_dataset_builder.py and the data-argument
// handling of megatron/training (see the header).
#include "datasets/blended_megatron_dataset_builder.h"

#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/logging.h"
#include "datasets/mock_gpt_dataset.h"

namespace mindspeed {

StatusOr<std::shared_ptr<const GPTDatasetConfig>> gpt_dataset_config_from_args(const GptDataArgs& args) {
  auto cfg = std::make_shared<GPTDatasetConfig>();
  cfg->random_seed = args.seed;
  cfg->sequence_length = args.seq_length;
  cfg->path_to_cache = args.data_cache_path;
  cfg->tokenizer = args.tokenizer;
  cfg->reset_position_ids = args.reset_position_ids;
  cfg->reset_attention_mask = args.reset_attention_mask;
  cfg->eod_mask_loss = args.eod_mask_loss;
  cfg->eod_token = args.eod_token;
  cfg->pad_token = args.pad_token;
  cfg->split = args.split;

  const bool per_split = !args.train_data_path.empty() || !args.valid_data_path.empty() ||
                         !args.test_data_path.empty();
  if (args.mock_data && (!args.data_path.empty() || per_split)) {
    return invalid_argument("--mock-data cannot be combined with --data-path or ",
                            "--train/valid/test-data-path; drop one of them");
  }
  // get_blend_and_blend_per_split: --data-path wins over the per-split paths.
  if (!args.data_path.empty()) {
    if (per_split) {
      return invalid_argument("--data-path cannot be combined with --train-data-path / ",
                              "--valid-data-path / --test-data-path; use one or the other");
    }
    MS_ASSIGN_OR_RETURN(cfg->blend, get_blend_from_list(args.data_path, "--data-path"));
    if (!cfg->split) {
      // arguments.py: the legacy default, with its spaces (it is part of the cache key).
      cfg->split = "969, 30, 1";
      log_warning("--split not given with --data-path; using Megatron's legacy default \"969, 30, 1\"");
    }
  } else if (per_split) {
    std::array<std::optional<Blend>, kNumSplits> per;
    MS_ASSIGN_OR_RETURN(per[0], get_blend_from_list(args.train_data_path, "--train-data-path"));
    MS_ASSIGN_OR_RETURN(per[1], get_blend_from_list(args.valid_data_path, "--valid-data-path"));
    MS_ASSIGN_OR_RETURN(per[2], get_blend_from_list(args.test_data_path, "--test-data-path"));
    cfg->blend_per_split = per;
  }
  MS_RETURN_IF_ERROR(cfg->finalize());
  return std::shared_ptr<const GPTDatasetConfig>(std::move(cfg));
}

StatusOr<std::array<int64_t, kNumSplits>> get_train_valid_test_num_samples(
    int64_t train_iters, std::optional<int64_t> train_samples, int64_t eval_interval,
    int64_t eval_iters, int64_t global_batch_size) {
  if (global_batch_size <= 0) {
    return invalid_argument("--global-batch-size (", global_batch_size, ") must be positive");
  }
  if (eval_interval <= 0) {
    return invalid_argument("--eval-interval (", eval_interval, ") must be positive");
  }
  if (eval_iters < 0) return invalid_argument("--eval-iters (", eval_iters, ") must be >= 0");
  int64_t train = 0;
  if (train_samples && *train_samples > 0) {
    train = *train_samples;
    train_iters = *train_samples / global_batch_size;
  } else {
    if (train_iters < 0) return invalid_argument("--train-iters (", train_iters, ") must be >= 0");
    train = train_iters * global_batch_size;
  }
  const int64_t valid = (train_iters / eval_interval + 1) * eval_iters * global_batch_size;
  const int64_t test = eval_iters * global_batch_size;
  return std::array<int64_t, kNumSplits>{train, valid, test};
}

std::vector<std::array<int64_t, kNumSplits>> get_size_per_split_per_dataset(
    const std::vector<double>& normalized_weights,
    const std::array<std::optional<int64_t>, kNumSplits>& target_size_per_split, double surplus) {
  std::vector<std::array<int64_t, kNumSplits>> out;
  for (double w : normalized_weights) {
    std::array<int64_t, kNumSplits> row{};
    for (int i = 0; i < kNumSplits; ++i) {
      const double target = static_cast<double>(target_size_per_split[i].value_or(0));
      row[i] = static_cast<int64_t>(std::ceil(std::ceil(target * w) * (1.0 + surplus)));
    }
    out.push_back(row);
  }
  return out;
}

BlendedMegatronDatasetBuilder::BlendedMegatronDatasetBuilder(
    std::shared_ptr<const GPTDatasetConfig> config,
    std::array<std::optional<int64_t>, kNumSplits> sizes, LowLevelDatasetFactory factory,
    DatasetBuildContext ctx)
    : config_(std::move(config)), sizes_(sizes), factory_(std::move(factory)), ctx_(std::move(ctx)) {}

Status BlendedMegatronDatasetBuilder::rank_zero_first(const std::function<Status()>& fn) {
  auto other_failed = [] {
    return aborted("another rank failed while building the datasets (see its log)");
  };
  Status st;
  if (ctx_.builds_first && ctx_.is_built_on_rank) st = fn();
  if (!sync(st.ok())) return st.ok() ? other_failed() : st;
  if (!ctx_.builds_first && ctx_.is_built_on_rank) st = fn();
  if (!sync(st.ok())) return st.ok() ? other_failed() : st;
  return ok_status();
}

StatusOr<BlendedMegatronDatasetBuilder::MidLevelSplits>
BlendedMegatronDatasetBuilder::build_megatron_dataset_splits(
    const std::optional<std::string>& prefix, const SplitMatrix& split,
    const std::array<std::optional<int64_t>, kNumSplits>& sizes, bool synchronize) {
  MidLevelSplits out{};
  std::shared_ptr<const LowLevelDataset> low;
  auto open = [&]() -> Status {
    if (low) return ok_status();
    if (!prefix) {
      low = std::make_shared<MockGPTLowLevelDataset>(static_cast<int32_t>(config_->eod_token));
      return ok_status();
    }
    if (!factory_) return internal_error("no LowLevelDatasetFactory to open ", *prefix);
    MS_ASSIGN_OR_RETURN(low, factory_(*prefix));
    if (!low) return not_found("cannot open the dataset ", *prefix);
    return ok_status();
  };
  for (int i = 0; i < kNumSplits; ++i) {
    if (!split[i]) continue;
    auto build_one = [&, i]() -> Status {
      MS_RETURN_IF_ERROR(open());
      const auto [begin, end] = split_index_range(*split[i], low->num_sequences());
      if (end > std::numeric_limits<int32_t>::max()) {
        return invalid_argument(low->path_prefix(), ": ", end, " sequences exceed int32");
      }
      std::vector<int32_t> indices;
      indices.reserve(static_cast<size_t>(std::max<int64_t>(0, end - begin)));
      for (int64_t k = begin; k < end; ++k) indices.push_back(static_cast<int32_t>(k));
      MS_ASSIGN_OR_RETURN(out[i], GPTDataset::create(low, prefix, std::move(indices), sizes[i],
                                                     static_cast<Split>(i), config_, role()));
      return ok_status();
    };
    if (synchronize) {
      MS_RETURN_IF_ERROR(rank_zero_first(build_one));
    } else if (ctx_.is_built_on_rank) {
      MS_RETURN_IF_ERROR(build_one());
    }
  }
  return out;
}

StatusOr<GptDatasets> BlendedMegatronDatasetBuilder::build_blend(
    const Blend& blend, const SplitMatrix& split,
    const std::array<std::optional<int64_t>, kNumSplits>& sizes, int only_split) {
  std::optional<std::vector<double>> weights;
  if (blend.weights) weights = normalize(*blend.weights);
  const size_t n = blend.prefixes.size();

  std::vector<std::array<int64_t, kNumSplits>> target;
  std::vector<std::array<std::optional<int64_t>, kNumSplits>> buffer(n);
  if (weights) {
    target = get_size_per_split_per_dataset(*weights, sizes, 0.0);
    const auto with_surplus =
        get_size_per_split_per_dataset(*weights, sizes, config_->mid_level_dataset_surplus);
    for (size_t p = 0; p < n; ++p) {
      for (int i = 0; i < kNumSplits; ++i) buffer[p][i] = with_surplus[p][i];
    }
  }

  // The mid-level datasets of every prefix: rank 0 builds them all, then the others.
  std::vector<MidLevelSplits> mids(n);
  MS_RETURN_IF_ERROR(rank_zero_first([&]() -> Status {
    for (size_t p = 0; p < n; ++p) {
      MS_ASSIGN_OR_RETURN(mids[p], build_megatron_dataset_splits(blend.prefixes[p], split, buffer[p],
                                                                  /*synchronize=*/false));
    }
    return ok_status();
  }));

  GptDatasets out;
  for (int i = 0; i < kNumSplits; ++i) {
    if (!split[i] || (only_split >= 0 && i != only_split)) continue;
    std::shared_ptr<BlendedDataset> blended;
    MS_RETURN_IF_ERROR(rank_zero_first([&]() -> Status {
      std::vector<std::shared_ptr<GPTDataset>> datasets;
      for (size_t p = 0; p < n; ++p) datasets.push_back(mids[p][i]);
      if (weights && sizes[i]) {
        // Blend by the client weights to exactly the sum of the per-dataset targets.
        int64_t size = 0;
        for (size_t p = 0; p < n; ++p) size += target[p][i];
        MS_ASSIGN_OR_RETURN(blended, BlendedDataset::create(std::move(datasets), *weights, size,
                                                            config_, role()));
      } else if (!weights) {
        // Blend by the dataset lengths, to the requested size or exhaustively.
        std::vector<int64_t> lengths;
        int64_t total = 0;
        for (const auto& d : datasets) {
          lengths.push_back(d->size());
          total += d->size();
        }
        if (sizes[i]) {
          std::vector<double> w(lengths.begin(), lengths.end());
          MS_ASSIGN_OR_RETURN(blended, BlendedDataset::create(std::move(datasets), std::move(w),
                                                              std::min(*sizes[i], total), config_,
                                                              role()));
        } else {
          MS_ASSIGN_OR_RETURN(blended, BlendedDataset::create_exhaustive(
                                           std::move(datasets), std::move(lengths), config_, role()));
        }
      } else {
        return invalid_argument("Using client-specified weights requires client-specified size (",
                                split_name(static_cast<Split>(i)), " split)");
      }
      return ok_status();
    }));
    out.splits[i] = blended;
  }
  return out;
}

StatusOr<GptDatasets> BlendedMegatronDatasetBuilder::build() {
  if (ctx_.builds_first && !ctx_.is_built_on_rank) {
    return internal_error("is_built_on_rank must be true on a rank that builds first");
  }
  const GPTDatasetConfig& cfg = *config_;
  for (int i = 0; i < kNumSplits; ++i) {
    if (sizes_[i] && *sizes_[i] < 0) {
      return invalid_argument("negative number of ", split_name(static_cast<Split>(i)),
                              " samples (", *sizes_[i], ")");
    }
  }
  if (!cfg.mock) {
    // size_is_none => weights_are_none
    for (int i = 0; i < kNumSplits; ++i) {
      const Blend* b = nullptr;
      if (cfg.blend_per_split) {
        if (!(*cfg.blend_per_split)[i]) continue;
        b = &*(*cfg.blend_per_split)[i];
      } else if (cfg.blend) {
        b = &*cfg.blend;
      }
      if (b && !sizes_[i] && b->weights) {
        return invalid_argument("the ", split_name(static_cast<Split>(i)),
                                " split has blend weights but no requested size");
      }
    }
  }

  GptDatasets out;
  if (cfg.mock) {
    MS_ASSIGN_OR_RETURN(auto mids, build_megatron_dataset_splits(std::nullopt, *cfg.split_matrix,
                                                                 sizes_, /*synchronize=*/true));
    for (int i = 0; i < kNumSplits; ++i) out.splits[i] = mids[i];
  } else if (cfg.blend) {
    if (cfg.blend->prefixes.size() == 1 && !cfg.blend->weights) {
      MS_ASSIGN_OR_RETURN(auto mids, build_megatron_dataset_splits(cfg.blend->prefixes[0],
                                                                   *cfg.split_matrix, sizes_, true));
      for (int i = 0; i < kNumSplits; ++i) out.splits[i] = mids[i];
    } else {
      MS_ASSIGN_OR_RETURN(out, build_blend(*cfg.blend, *cfg.split_matrix, sizes_, -1));
    }
  } else if (cfg.blend_per_split) {
    for (int i = 0; i < kNumSplits; ++i) {
      const auto& blend = (*cfg.blend_per_split)[i];
      if (!blend) continue;
      SplitMatrix spoof{};
      spoof[i] = std::make_pair(0.0, 1.0);
      std::array<std::optional<int64_t>, kNumSplits> sizes_spoof{0, 0, 0};
      sizes_spoof[i] = sizes_[i];
      if (blend->prefixes.size() == 1) {
        MS_ASSIGN_OR_RETURN(auto mids, build_megatron_dataset_splits(blend->prefixes[0], spoof,
                                                                     sizes_spoof, true));
        out.splits[i] = mids[i];
      } else {
        MS_ASSIGN_OR_RETURN(auto built, build_blend(*blend, spoof, sizes_spoof, i));
        out.splits[i] = built.splits[i];
      }
    }
  } else {
    return internal_error("GPTDatasetConfig was not finalized");
  }

  for (int i = 0; i < kNumSplits; ++i) {
    const auto* gpt = dynamic_cast<const GPTDataset*>(out.splits[i].get());
    if (gpt && gpt->size() > 0 && gpt->num_samples() && *gpt->num_samples() > gpt->size()) {
      return internal_error("the ", split_name(static_cast<Split>(i)), " dataset has ",
                            gpt->size(), " samples, fewer than the ", *gpt->num_samples(),
                            " requested");
    }
  }
  return out;
}

}  // namespace mindspeed
