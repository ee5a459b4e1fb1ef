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

/// The declared domain of a numeric flag: its value must be a finite number in
/// [min, max] (an open end excludes the bound). Checked on the flag's text while parsing,
/// so a bad value stops the run before anything is built, with the flag, the value, the rule
/// and the fix in the message. Integer flags are also refused when not an integer.
struct FlagDomain {
  std::string name;  ///< "--num-layers"
  bool integer = false;
  double min = 0.0, max = 0.0;
  bool min_open = false, max_open = false;
  std::string units;  ///< "layers", "iterations", "elements" ...; may be empty
  /// The refusal for `value`, or "" when it is inside the domain.
  std::string check(double value) const;
  std::string describe() const;  ///< e.g. "an integer >= 1 (layers)"
};

/// Every numeric flag pretrain_gpt accepts, with its domain (for --help and the tests).
std::vector<FlagDomain> numeric_flag_domains();

/// Every flag name pretrain_gpt registers (implemented, or accepted as a documented no-op), in
/// registration order: the catalogue (known_flags.h) is checked against it.
std::vector<std::string> registered_flag_names();

/// The exit-code contract of pretrain_gpt, as printed by --help.
inline constexpr const char* kExitCodeHelp =
    "Exit codes (the same on one rank and under mpirun):\n"
    "  0  success\n"
    "  2  usage or validation error: a flag, a file named by a flag, or a rule between flags; found before\n"
    "     anything is built, every rank agreeing; rank 0 prints 'pretrain_gpt: error: ...'\n"
    "  1  runtime failure: '[rank R] FATAL: <what>' once (a failure all ranks detect together exits\n"
    "     cleanly; a failure on one rank aborts the job through MPI_Abort)\n";

struct ParsedArguments {
  Configs configs;
  /// What some accepted flags mean here, for rank 0 to log at start (e.g. --distributed-backend:
  /// MPI carries every collective).
  std::vector<std::string> notes;
  bool help_requested = false;
  std::string help_text;
};

/// Parses argv[1..]; no validation across flags (see validate.h).
StatusOr<ParsedArguments> parse_arguments(int argc, const char* const* argv);
/// Same, from a list of tokens (tests).
StatusOr<ParsedArguments> parse_arguments(const std::vector<std::string>& args);

}  // namespace mindspeed
