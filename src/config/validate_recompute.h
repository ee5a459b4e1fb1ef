// Activation-recompute configuration rules (validate_recompute.cpp), called by validate_configs.
#pragma once

#include "config/model_config.h"
#include "config/parallel_config.h"
#include "config/training_config.h"
#include "core/status.h"

namespace mindspeed {

/// Checks the --recompute-* flags against each other, the model and the parallel layout:
/// Megatron's TransformerConfig and arguments.py rules and MindSpeed's, each named in the
/// error, and every flag that would otherwise do nothing.
Status validate_recompute(const ModelConfig& model, const ParallelConfig& parallel,
                          const TrainingConfig& training);

}  // namespace mindspeed
