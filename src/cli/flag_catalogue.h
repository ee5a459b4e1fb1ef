// The flag catalogue decided: for every Megatron-LM (core_v0.12), MindSpeed and MindSpeed-LLM flag
// of known_flags.h, what pretrain_gpt does with it. "implemented" follows from the parser
// (registered_flag_names() in arguments.h); "accepted" marks a registered flag that changes nothing
// here, or maps onto this engine, with the reason (e.g. --distributed-backend: MPI serves nccl and
// gloo alike); every other catalogue flag is "refused" with a reason category (needs a GPU backend,
// another model family, not yet: issue N, ...) and the roadmap issue or future area it belongs to.
// The same table renders docs/flags.md (tools/flag_catalogue), the --help section and the
// "not implemented" error. Ports no Megatron code: it documents Megatron's flags against this port.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mindspeed {

enum class FlagDecision : uint8_t {
  kImplemented,  // registered by pretrain_gpt and does what Megatron/MindSpeed do
  kAccepted,     // registered, but a documented no-op or mapping here (reason says why)
  kRefused,      // not registered: pretrain_gpt stops with the reason
};

std::string_view flag_decision_name(FlagDecision decision);  // "implemented", "accepted", "refused"

/// Why a known flag is refused: a small set of categories, each with its roadmap home.
enum class RefusalCategory : uint8_t {
  kLaunchCompat,     // issue 15
  kTokenizer,        // issue 15
  kMegatronNoop,     // issue 15: ignored by Megatron core_v0.12 too, not registered yet
  kMegatronRemoved,  // Megatron core_v0.12 refuses it too
  kData,             // issue 3
  kParallelCore,     // issue 4
  kStages,           // issue 7
  kPipeline,         // issue 9
  kCheckpoint,       // issue 10
  kObservability,    // issue 11
  kContextParallel,  // issue 12
  kMoe,              // issue 13
  kMemory,           // issue 14
  kPrecision,        // issue 14
  kDeviceBackend,    // future: GPU backend
  kFp8,              // future: GPU backend
  kModelVariant,     // future: model variants
  kOtherFamily,      // future: other model families
  kInference,        // future: inference
  kFinetune,         // future: fine-tuning
  kPostTraining,     // future: post-training
  kQuantization,     // future: quantisation
  kOptimizer,        // future: optimizers
  kParallelVariant,  // future: parallelism variants
  kAutoTuning,       // future: auto-tuning
  kResilience,       // future: fault tolerance
  kExternalService,  // future: external services
  kPreprocessTool,   // future: tools/preprocess_data
  kConvertTool,      // future: tools/convert_checkpoint
  kPythonRuntime,    // not planned
};

struct RefusalCategoryInfo {
  RefusalCategory category;
  std::string_view key;     // "moe", "gpu-backend", ... (stable, for docs anchors and tests)
  std::string_view reason;  // "not yet: MoE option"
  std::string_view home;    // "issue 15", "future: GPU backend", "not planned", ...
};

/// Every refusal category, in enum order.
std::span<const RefusalCategoryInfo> refusal_categories();

struct FlagRuling {
  std::string_view name;    // "--fp8-format"
  std::string_view source;  // "megatron", "mindspeed", "mindspeed-llm" or "mindspeed-cpp"
  std::string_view group;   // argparse group title ("transformer-engine"); "mindspeed-cpp" for ours
  FlagDecision decision = FlagDecision::kImplemented;
  /// Refused: the category; otherwise unused.
  RefusalCategory category = RefusalCategory::kLaunchCompat;
  /// Accepted: what the flag means here. Refused: "<category reason>[; <note>]". Implemented: the
  /// description of a mindspeed-cpp-only flag, else empty.
  std::string reason;
  std::string_view
      home;  // refused: the roadmap home ("issue 15", "future: GPU backend"); else empty
};

/// The decision on every catalogue flag (known_flags()) and every mindspeed-cpp-only flag, sorted
/// by name, given the flags the parser registers. A registered flag is implemented (or accepted
/// when the catalogue says so); an unregistered one is refused with its catalogued reason (a flag
/// with no refusal row gets a placeholder reason, and flag_catalogue_problems() reports it).
std::vector<FlagRuling> flag_catalogue(const std::vector<std::string>& registered);
/// Same, with registered_flag_names().
std::vector<FlagRuling> flag_catalogue();

/// Everything that keeps the catalogue from being decided, given the registered flags; empty when
/// every flag has exactly one decision. Reports: a registered flag that no project defines and that
/// is not a mindspeed-cpp-only flag; a refusal row for a registered flag (stale: delete it); an
/// accepted row for a flag that is not registered; a known flag that is neither registered nor
/// refused; rows naming flags outside the catalogue. (Rows are sorted: static_assert.)
std::vector<std::string> flag_catalogue_problems(const std::vector<std::string>& registered);

/// The refusal reason of a known flag, "<reason>[; <note>] [<home>]", e.g. "not yet: MoE option
/// [issue 13]"; empty when `name` has no refusal row. Needs no parser.
std::string flag_refusal_reason(std::string_view name);

/// pretrain_gpt's error for a known flag it does not register: "--fp8-format is a Megatron-LM flag
/// (transformer-engine) that mindspeed-cpp does not implement: <reason> [<home>]; remove it from
/// the command line (docs/flags.md lists every flag)". Empty when `name` is not a known flag.
std::string flag_refusal_message(std::string_view name);

/// "Megatron-LM", "MindSpeed", "MindSpeed-LLM" or "mindspeed-cpp" for a KnownFlag::source.
std::string_view flag_source_display_name(std::string_view source);

/// The flags only mindspeed-cpp has (registered, in no catalogue): name and description.
struct EngineFlag {
  std::string_view name;
  std::string_view description;
};
std::span<const EngineFlag> engine_only_flags();

/// docs/flags.md: counts, the refusal categories, and one table row per flag (flag | source |
/// group | decision | reason). Regenerate with `build/ci/tools/flag_catalogue > docs/flags.md`.
std::string flag_catalogue_markdown();

/// The --help section: one line per accepted flag (with what it means here) and per refused flag
/// (with its reason and roadmap home).
std::string flag_catalogue_help();

}  // namespace mindspeed
