// Catalogue of every command-line flag that Megatron-LM, MindSpeed or MindSpeed-LLM defines, so
// that pretrain_gpt can refuse a flag it does not implement with "known Megatron/MindSpeed flag,
// not implemented" and its reason (flag_catalogue.h) instead of "unknown flag". Only names,
// arities, sources and argparse groups are recorded: the list was compiled by hand from
// Megatron-LM's megatron/training/arguments.py (core_v0.12 through the 2025 HEAD, plus the literal
// flags of early-2026 revisions), from MindSpeed's mindspeed/arguments.py and the register_args()
// of its feature manager (mindspeed/features_manager/**), and from MindSpeed-LLM's
// mindspeed_llm/training/arguments.py (v2.3.0, on core_v0.12.1) and its feature manager
// (mindspeed_llm/features_manager/**). A flag known to Megatron and another project is listed as
// "megatron"; one known to MindSpeed and MindSpeed-LLM as "mindspeed". Flags that newer Megatron
// generates from config dataclasses are listed only where they also exist as literal flags.
// tools/flag_catalogue/extract_flags.py lists the flags of those sources and the ones missing here
// (its --rows output added the MindSpeed-LLM rows and the flags the hand-made list lacked).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace mindspeed {

enum class FlagArity : uint8_t {
  kNone,  // store_true / store_false / store_const (and each half of a --foo/--no-foo pair)
  kOne,   // exactly one value
  kMany,  // nargs='+' or nargs='*'
};

struct KnownFlag {
  std::string_view name;  // "--tensor-model-parallel-size" (every alias gets its own entry)
  FlagArity arity;
  std::string_view source;  // "megatron", "mindspeed" or "mindspeed-llm"
  std::string_view group;   // argparse group title, e.g. "distributed", "network size", "moe"
};

/// Every command-line flag of Megatron-LM (megatron/training/arguments.py, core_v0.12 and newer),
/// MindSpeed (mindspeed/arguments.py and mindspeed/features_manager/**) and MindSpeed-LLM
/// (mindspeed_llm/training/arguments.py and mindspeed_llm/features_manager/**), sorted by name.
std::span<const KnownFlag> known_flags();

/// The entry for `name`, or nullptr.
const KnownFlag* find_known_flag(std::string_view name);

}  // namespace mindspeed
