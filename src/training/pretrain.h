// Port of megatron/training/training.py pretrain() for GPT (pretrain_gpt.py): builds the
// parallel state, tokenizer, model (initialised from the seed, or loaded from a Hugging Face
// directory with --load), data-parallel wrapper, optimizer, learning-rate schedule and
// datasets, then trains for --train-iters with Megatron's log lines, evaluation every
// --eval-interval, and validation/test evaluation at the end.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "config/configs.h"
#include "core/status.h"
#include "parallel/initialize.h"
#include "tokenizer/tokenizer.h"

namespace mindspeed {

/// The tokenizer the data flags name (--tokenizer-type, --vocab-file, ...); built before
/// validation, which needs its vocabulary size for the padded vocabulary.
StatusOr<std::unique_ptr<Tokenizer>> build_tokenizer_from_config(const DataConfig& data);

/// Callbacks into the training loop for tests and tools (nothing in the library reads the
/// environment for them).
struct PretrainHooks {
  /// Called on every rank at the start of each iteration, after the batch was fetched.
  std::function<void(int rank, int64_t iteration)> on_iteration;
  /// Called on every rank before each forward step of a training iteration's schedule
  /// (forward_step counts this rank's forward steps in the iteration from 0).
  std::function<void(int rank, int64_t iteration, int64_t forward_step)> on_forward_step;
};

/// Runs the whole job on this rank. Every rank calls it with the same validated configs
/// (validate_configs with the tokenizer's vocabulary size).
Status pretrain(const Configs& configs, const Tokenizer& tokenizer, const MpiWorld& world,
                const PretrainHooks& hooks = {});

}  // namespace mindspeed
