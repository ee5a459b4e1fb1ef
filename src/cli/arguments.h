// The command line of pretrain_gpt: Megatron-LM core_v0.12 and MindSpeed flag names and
// defaults, parsed with CLI11 into the Configs structs. This is the only place flags are
// known. A Megatron or MindSpeed flag that is not implemented yet (known_flags.h) stops the
// run with a message that says so; an unknown flag stops it with the nearest known name.
#pragma once

#include <string>
#include <vector>

#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

struct ParsedArguments {
  Configs configs;
  bool help_requested = false;
  std::string help_text;
};

/// Parses argv[1..]; no validation across flags (see validate.h).
StatusOr<ParsedArguments> parse_arguments(int argc, const char* const* argv);
/// Same, from a list of tokens (tests).
StatusOr<ParsedArguments> parse_arguments(const std::vector<std::string>& args);

}  // namespace mindspeed
