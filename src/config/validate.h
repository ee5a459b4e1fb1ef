// Cross-config validation and derived defaults (Megatron's validate_args for the features
// mindspeed-cpp implements). Every rank runs the same checks before the first collective,
// so a bad configuration stops all ranks together with the same message.
#pragma once

#include <cstdint>
#include <optional>

#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

/// MindSpeed's Auto Settings flags: only with --auto-settings, never with --save / --load, and
/// --nproc-per-node given (part of validate_configs; the planner checks it before searching).
Status validate_auto_settings(const AutoSettingsConfig& a, const TrainingConfig& t);
/// Fills derived values (ffn_hidden_size, kv_channels, query groups, global batch size, and
/// -- given the tokenizer's vocabulary size -- vocab_size and padded_vocab_size, Megatron's
/// _vocab_size_with_padding) and checks every rule; the error names the flags and their
/// values. After it the configs are final: the caller keeps them const.
Status validate_configs(Configs& configs, int world_size, std::optional<int64_t> tokenizer_vocab_size = std::nullopt);

}  // namespace mindspeed
