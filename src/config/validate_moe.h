// Mixture-of-experts configuration rules (validate_moe.cpp), called by validate_configs.
#pragma once

#include "config/model_config.h"
#include "config/parallel_config.h"
#include "core/status.h"

namespace mindspeed {

/// Checks --num-experts and the --moe-* flags against each other and the parallel layout
/// (Megatron's and MindSpeed's rules, each named in the error); fills the MoE defaults.
Status validate_moe(ModelConfig& model, const ParallelConfig& parallel);

}  // namespace mindspeed
