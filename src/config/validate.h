// Cross-config validation and derived defaults (Megatron's validate_args for the features
// mindspeed-cpp implements). Every rank runs the same checks before the first collective,
// so a bad configuration stops all ranks together with the same message.
#pragma once

#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

/// Fills derived values (ffn_hidden_size, kv_channels, query groups, global batch size,
/// padded vocabulary once vocab_size is known) and checks every rule; the error names the
/// flags and their values.
Status validate_configs(Configs& configs, int world_size);

/// Sets model.vocab_size and model.padded_vocab_size (Megatron's _vocab_size_with_padding).
void set_vocab_size(Configs& configs, int64_t vocab_size);

}  // namespace mindspeed
