// Port of megatron/training/training.py pretrain() for GPT (pretrain_gpt.py): builds the
// parallel state, tokenizer, model (initialised from the seed, or loaded from a Hugging Face
// directory with --load), data-parallel wrapper, optimizer, learning-rate schedule and
// datasets, then trains for --train-iters with Megatron's log lines, evaluation every
// --eval-interval, and validation/test evaluation at the end.
#pragma once

#include "config/configs.h"
#include "core/status.h"
#include "parallel/initialize.h"

namespace mindspeed {

/// Runs the whole job on this rank. Every rank calls it with the same configs.
Status pretrain(Configs configs, const MpiWorld& world);

}  // namespace mindspeed
