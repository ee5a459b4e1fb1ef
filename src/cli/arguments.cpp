// Command-line parsing (arguments.h).
#include "cli/arguments.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <type_traits>

#include "cli/flag_catalogue.h"
#include "cli/known_flags.h"
#include "core/profiler.h"

namespace mindspeed {
namespace {

// Edit distance for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// Integer flags are checked on their text before CLI11 converts it: CLI11 2.1 saturates an
// out-of-range value (99999999999999999999 -> INT64_MAX), reads "" as 0 and "0x10" as 16,
// all of which Megatron's argparse int() refuses. Returns the error ("" if none); CLI11
// prefixes it with the flag.
template <typename T>
std::string check_integer(const std::string& text) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.size() > 1 && s.front() == '+' && s[1] != '-') s.remove_prefix(1);  // from_chars takes no '+'
  T value{};
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || error == std::errc::invalid_argument || end != s.data() + s.size()) {
    return str_cat("'", text, "' is not an integer");
  }
  if (error == std::errc::result_out_of_range) {
    return str_cat("'", text, "' is outside the range ", +std::numeric_limits<T>::min(), "..",
                   +std::numeric_limits<T>::max());
  }
  return "";
}

constexpr double kInf = std::numeric_limits<double>::infinity();
// --dry-run-world-size prints one line per process group: a bound that keeps it to seconds.
constexpr double kMaxDryRunWorldSize = 1 << 20;

// Domain builders: [lo, inf), (lo, inf), [lo, hi] / [lo, hi).
FlagDomain at_least(double lo, std::string units = "") { return {"", false, lo, kInf, false, false, std::move(units)}; }
FlagDomain above(double lo, std::string units = "") { return {"", false, lo, kInf, true, false, std::move(units)}; }
FlagDomain between(double lo, double hi, bool hi_open = false, std::string units = "") {
  return {"", false, lo, hi, false, hi_open, std::move(units)};
}

// A numeric flag's text against its domain (after the integer check for integer flags).
std::string check_domain(const FlagDomain& domain, const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  const double value = std::strtod(begin, &end);
  while (end != nullptr && *end != '\0' && std::isspace(static_cast<unsigned char>(*end))) ++end;
  if (end == begin || end == nullptr || *end != '\0') {
    return str_cat("'", text, "' is not a number; expected ", domain.describe());
  }
  const std::string refusal = domain.check(value);
  return refusal.empty() ? "" : str_cat("'", text, "' ", refusal);
}

// Registers the implemented flags. Options take their Megatron default from the config
// struct's initialiser; a repeated flag keeps its last value, as argparse does. Numeric
// flags declare their domain (FlagDomain), checked on the text before conversion.
class FlagRegistry {
 public:
  explicit FlagRegistry(CLI::App& app) : app_(app) {}

  /// A string-valued (or choice) flag.
  CLI::Option* value(const std::string& name, std::string& target, const std::string& help) {
    names_.push_back(name);
    return app_.add_option(name, target, help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  /// A numeric flag with its domain.
  template <typename T>
  CLI::Option* number(const std::string& name, T& target, const std::string& help, FlagDomain domain) {
    static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
    names_.push_back(name);
    domain.name = name;
    domain.integer = std::is_integral_v<T>;
    if (domain.integer) {
      domain.min = std::max(domain.min, static_cast<double>(std::numeric_limits<T>::min()));
      domain.max = std::min(domain.max, static_cast<double>(std::numeric_limits<T>::max()));
    }
    domains_.push_back(domain);
    CLI::Option* option = app_.add_option(name, target, help + " [" + domain.describe() + "]")
                              ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    if constexpr (std::is_integral_v<T>) option->check(check_integer<T>);
    option->check([domain](const std::string& text) { return check_domain(domain, text); });
    return option;
  }
  CLI::Option* flag(const std::string& name, bool& target, const std::string& help) {
    names_.push_back(name);
    return app_.add_flag(name, target, help)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  }
  CLI::Option* list(const std::string& name, std::vector<std::string>& target, const std::string& help) {
    names_.push_back(name);
    return app_.add_option(name, target, help)->expected(1, -1);
  }
  /// A flag that sets `target` to false (Megatron's store_false flags, e.g. --disable-bias-linear).
  CLI::Option* clear_flag(const std::string& name, bool& target, const std::string& help) {
    names_.push_back(name);
    return app_.add_flag_callback(name, [&target]() { target = false; }, help);
  }
  const std::vector<std::string>& names() const { return names_; }
  const std::vector<FlagDomain>& domains() const { return domains_; }

 private:
  CLI::App& app_;
  std::vector<std::string> names_;
  std::vector<FlagDomain> domains_;
};

struct Choices {
  std::string normalization = "LayerNorm";
  std::string position_embedding_type = "learned_absolute";
  std::string lr_decay_style = "linear";
  std::string lr_wsd_decay_style = "exponential";
  std::string noop_layers;
  std::string schedules_method;
  std::string context_parallel_algo = "megatron_cp_algo";
  int sparse_mode = -1;            ///< --sparse-mode; -1 = not given (causal)
  int64_t pre_tockens = 65536;     ///< --pre-tockens (MindSpeed's spelling)
  int64_t next_tockens = 0;        ///< --next-tockens
  std::string window_size;         ///< --window-size "L" or "L,0"
  std::string attention_mask_type = "causal";
  std::string ckpt_format = "safetensors";
  std::string device = "cpu";
  std::string profile_level = "level0";
  std::vector<std::string> profile_ranks = {"-1"};
  std::vector<std::string> rampup_batch_size;  ///< --rampup-batch-size START INCREMENT SAMPLES
  bool use_rope_scaling = false;
  std::string rope_scaling_type;
  std::string optimizer = "adam";
  std::string optimizer_selection = "fused_adamw";
  std::string transformer_impl = "transformer_engine";
  bool use_rotary_position_embeddings = false;
  bool npu_deterministic = false;
  bool use_fusion_attn_v2 = false;
  bool use_mcore_models = false;
  bool use_cpu_initialization = false;
  bool log_throughput = false;
  std::string attention_backend;     ///< --attention-backend; empty = not given
  int64_t persistent_save_interval = 0;  ///< Megatron's alias of --save-interval; 0 = not given
  bool no_position_embedding = false;
  std::string distributed_backend;   ///< --distributed-backend; empty = not given
  std::string ai_framework;          ///< MindSpeed --ai-framework; empty = not given
  bool disable_gloo_group = false;   ///< MindSpeed --disable-gloo-group
  bool disable_gloo_process_groups = false;  ///< Megatron --disable-gloo-process-groups
  int64_t timing_log_level = 0;      ///< --timing-log-level
  // Mixture of experts.
  std::string moe_layer_freq;
  std::string moe_router_score_function = "softmax";
  std::string moe_router_load_balancing_type = "aux_loss";
  std::string moe_token_drop_policy = "probs";
  std::string moe_token_dispatcher_type = "allgather";
  std::string moe_router_dtype;
  int64_t n_shared_experts = 0;
  bool use_fused_moe_token_permute_and_unpermute = false;
  bool gemm_gradient_accumulation_fusion = false;
  // Activation recompute.
  bool recompute_activations = false;
  std::string recompute_granularity;
  std::string recompute_method;
  std::vector<std::string> recompute_modules;
  bool moe_layer_recompute = false;
  std::string swap_modules = "input_norm,self_attention,post_attention_norm";
  std::string data_parallel_sharding_strategy = "no_shard";
  std::string auto_settings_type = "white";
};

// Megatron's recompute flags (TransformerConfig recompute_*) and MindSpeed's memory additions.
void register_recompute_flags(FlagRegistry& r, RecomputeConfig& rc, Choices& ch) {
  r.flag("--recompute-activations", ch.recompute_activations, "Recompute: selective (= --recompute-granularity "
         "selective)");
  r.value("--recompute-granularity", ch.recompute_granularity,
          "Recompute: full (whole layers) or selective (--recompute-modules)")
      ->check(CLI::IsMember({"full", "selective"}));
  r.value("--recompute-method", ch.recompute_method,
          "Full recompute: uniform (units of --recompute-num-layers) or block (the first --recompute-num-layers "
          "layers of each stage)")
      ->check(CLI::IsMember({"uniform", "block"}));
  r.number("--recompute-num-layers", rc.num_layers, "Full recompute: layers per unit (uniform) or per stage (block)",
           at_least(0, "layers"));
  r.list("--recompute-modules", ch.recompute_modules,
         "Selective recompute: core_attn, layernorm, mlp, moe_act, moe (default core_attn)");
  r.flag("--distribute-saved-activations", rc.distribute_saved_activations,
         "Full recompute: keep each unit's input split over tensor parallelism");
  r.flag("--enable-recompute-layers-per-pp-rank", rc.layers_per_pp_rank,
         "MindSpeed: block recompute counts --recompute-num-layers over a pipeline rank's model chunks");
  r.flag("--recompute-activation-function", rc.activation_function,
         "MindSpeed: drop the MLP activation's output after fc2 and recompute it in backward");
  r.number("--recompute-activation-function-num-layers", rc.activation_function_num_layers,
           "MindSpeed: layers of each model chunk with activation-function recompute (default all)",
           at_least(0, "layers"));
  r.flag("--recompute-norm", rc.norm, "MindSpeed: drop the norms' outputs after use and recompute them in backward");
  r.number("--recompute-norm-num-layers", rc.norm_num_layers,
           "MindSpeed: layers of each model chunk with norm recompute (default all)", at_least(0, "layers"));
  r.flag("--recompute-in-advance", rc.in_advance,
         "MindSpeed ripipe: run a chunk's full recompute before waiting for its backward's gradient (virtual stages)");
  r.flag("--recompute-in-bubble", rc.in_bubble,
         "MindSpeed ripipe: keep at most PP x VPP micro-batches' activations; recompute the others in the bubbles");
  r.flag("--swap-attention", rc.swap_attention,
         "MindSpeed: move each layer's saved attention activations to the swap tier (--swap-dir) after forward, "
         "prefetched one layer ahead in backward");
  r.value("--swap-modules", ch.swap_modules,
          "MindSpeed: what --swap-attention moves: input_norm, self_attention, post_attention_norm (comma list)");
  r.flag("--moe-layer-recompute", ch.moe_layer_recompute,
         "MoE: recompute the MoE layer (deprecated: --recompute-granularity selective --recompute-modules moe)");
}

Status apply_recompute_choices(ModelConfig& m, const Choices& ch) {
  RecomputeConfig& rc = m.recompute;
  if (ch.recompute_granularity == "full") rc.granularity = RecomputeGranularity::kFull;
  if (ch.recompute_granularity == "selective" || ch.recompute_activations) {
    // Megatron: --recompute-activations sets selective (and wins over full).
    rc.granularity = RecomputeGranularity::kSelective;
  }
  if (ch.recompute_method == "uniform") rc.method = RecomputeMethod::kUniform;
  if (ch.recompute_method == "block") rc.method = RecomputeMethod::kBlock;
  if (ch.recompute_modules.empty()) rc.modules.core_attn = true;  // Megatron's default
  for (const std::string& name : ch.recompute_modules) {
    if (name == "core_attn") {
      rc.modules.core_attn = true;
    } else if (name == "layernorm") {
      rc.modules.layernorm = true;
    } else if (name == "mlp") {
      rc.modules.mlp = true;
    } else if (name == "moe_act") {
      rc.modules.moe_act = true;
    } else if (name == "moe") {
      rc.modules.moe = true;
    } else if (name == "mla_up_proj") {
      return invalid_argument("--recompute-modules mla_up_proj is only supported with multi-latent attention "
                              "(Megatron's rule), which mindspeed-cpp does not implement");
    } else {
      return invalid_argument("--recompute-modules: '", name,
                              "' is not a module; choose from core_attn, layernorm, mlp, moe_act, moe");
    }
  }
  if (ch.moe_layer_recompute) {
    // Megatron core_v0.12: deprecated spelling of selective recompute of the MoE layer.
    if (rc.full()) {
      return invalid_argument("Do not set --moe-layer-recompute with full recompute granularity (Megatron's rule)");
    }
    rc.granularity = RecomputeGranularity::kSelective;
    rc.modules.moe = true;
  }
  rc.swap_modules = {false, false, false};
  for (size_t at = 0; at <= ch.swap_modules.size();) {
    const size_t comma = std::min(ch.swap_modules.find(',', at), ch.swap_modules.size());
    const std::string name = ch.swap_modules.substr(at, comma - at);
    if (name == "input_norm") {
      rc.swap_modules.input_norm = true;
    } else if (name == "self_attention") {
      rc.swap_modules.self_attention = true;
    } else if (name == "post_attention_norm") {
      rc.swap_modules.post_attention_norm = true;
    } else {
      return invalid_argument("--swap-modules: '", name,
                              "' is not a module; give a comma list of input_norm, self_attention, "
                              "post_attention_norm");
    }
    at = comma + 1;
  }
  if (!ch.recompute_modules.empty() && !rc.selective()) {
    return invalid_argument("--recompute-modules needs --recompute-granularity selective (or "
                            "--recompute-activations)");
  }
  return ok_status();
}

// Megatron's MoE flags (transformer_config.py MoE fields) and MindSpeed's MoE additions.
void register_moe_flags(FlagRegistry& r, MoeConfig& moe, ParallelConfig& p, Choices& ch) {
  r.number("--num-experts", moe.num_experts, "MoE: experts per MoE layer", between(1, 1 << 20, false, "experts"));
  r.value("--moe-layer-freq", ch.moe_layer_freq,
          "MoE: every N-th layer is MoE (an integer, default 1), or a list such as [1,0,1,0]");
  r.number("--moe-ffn-hidden-size", moe.ffn_hidden_size, "MoE: FFN size of one expert (default --ffn-hidden-size)",
           between(1, 1 << 24));
  r.number("--moe-router-topk", moe.router_topk, "MoE: experts per token", between(1, 1 << 20, false, "experts"));
  r.value("--moe-router-score-function", ch.moe_router_score_function, "MoE router scores: softmax or sigmoid")
      ->check(CLI::IsMember({"softmax", "sigmoid"}));
  r.flag("--moe-router-pre-softmax", moe.router_pre_softmax, "MoE: softmax over all experts before the top-k");
  r.number("--moe-router-topk-scaling-factor", moe.router_topk_scaling_factor,
           "MoE: the routing probabilities are multiplied by this", above(0));
  r.number("--moe-router-num-groups", moe.router_num_groups, "MoE group-limited routing: expert groups",
           between(1, 1 << 20));
  r.number("--moe-router-group-topk", moe.router_group_topk, "MoE group-limited routing: groups chosen per token",
           between(1, 1 << 20));
  r.flag("--moe-router-enable-expert-bias", moe.router_enable_expert_bias,
         "MoE aux-loss-free balancing: a per-expert bias for the selection, updated from the token counts");
  r.number("--moe-router-bias-update-rate", moe.router_bias_update_rate, "MoE: expert-bias update rate", at_least(0));
  r.value("--moe-router-load-balancing-type", ch.moe_router_load_balancing_type,
          "MoE load balancing: aux_loss, seq_aux_loss, sinkhorn or none")
      ->check(CLI::IsMember({"aux_loss", "seq_aux_loss", "sinkhorn", "none"}));
  r.number("--moe-aux-loss-coeff", moe.aux_loss_coeff, "MoE: load-balancing loss coefficient", at_least(0));
  r.number("--moe-z-loss-coeff", moe.z_loss_coeff, "MoE: router z-loss coefficient", at_least(0));
  r.number("--moe-expert-capacity-factor", moe.expert_capacity_factor,
           "MoE: expert capacity = ceil(tokens * topk / experts * factor); tokens beyond it are dropped", above(0));
  r.flag("--moe-pad-expert-input-to-capacity", moe.pad_expert_input_to_capacity,
         "MoE: every expert gets exactly its capacity of rows (padding carries probability 0)");
  r.value("--moe-token-drop-policy", ch.moe_token_drop_policy, "MoE: drop the lowest probabilities (probs) or the "
          "latest tokens (position)")
      ->check(CLI::IsMember({"probs", "position"}));
  r.number("--moe-input-jitter-eps", moe.input_jitter_eps, "MoE: router input multiplied by U(1-eps, 1+eps)",
           between(0, 1, /*hi_open=*/true));
  r.value("--moe-token-dispatcher-type", ch.moe_token_dispatcher_type,
          "MoE token dispatcher: allgather, alltoall or alltoall_seq")
      ->check(CLI::IsMember({"allgather", "alltoall", "alltoall_seq"}));
  r.value("--moe-router-dtype", ch.moe_router_dtype, "MoE: routing precision; fp32 (the router always computes in "
          "fp32 here)")
      ->check(CLI::IsMember({"fp32"}));
  r.flag("--moe-grouped-gemm", moe.grouped_gemm, "MoE: the local experts as one grouped GEMM (npu_gmm)");
  r.flag("--gemm-gradient-accumulation-fusion", ch.gemm_gradient_accumulation_fusion,
         "MindSpeed: grouped GEMM weight gradients accumulated into the fp32 gradient (needs --moe-grouped-gemm)");
  r.flag("--moe-permute-fusion", moe.permute_fusion, "MoE: fused token permute/unpermute with probabilities");
  r.flag("--use-fused-moe-token-permute-and-unpermute", ch.use_fused_moe_token_permute_and_unpermute,
         "MindSpeed spelling of --moe-permute-fusion");
  r.number("--moe-shared-expert-intermediate-size", moe.shared_expert_intermediate_size,
           "MoE: FFN size of the shared experts (a dense MLP on every token)", between(1, 1 << 24));
  r.number("--n-shared-experts", ch.n_shared_experts,
           "MindSpeed: shared experts; sets --moe-shared-expert-intermediate-size = k x the expert FFN size",
           between(1, 1 << 16, false, "experts"));
  r.flag("--shared-expert-gate", moe.shared_expert_gate, "MindSpeed-LLM: the shared experts' output times "
         "sigmoid(x . gate)");
  r.flag("--moe-shared-expert-overlap", moe.shared_expert_overlap,
         "MoE: the shared experts compute while the dispatcher communicates (alltoall)");
  r.number("--expert-tensor-parallel-size", p.expert_tensor_parallel_size,
           "MoE: tensor-parallel size of the experts (default --tensor-model-parallel-size)",
           between(1, 1 << 20, false, "ranks"));
  r.flag("--moe-tp-extend-ep", p.moe_tp_extend_ep, "MindSpeed: the tp x ep ranks hold whole experts");
  r.flag("--moe-permutation-async-comm", moe.permutation_async_comm,
         "MindSpeed: the dispatcher's collectives are asynchronous and overlap each other and the permutation");
  r.flag("--moe-alltoall-overlap-comm", moe.alltoall_overlap_comm,
         "MindSpeed: the dispatch/combine all-to-alls run while router, shared experts and permutation compute");
  r.flag("--moe-allgather-overlap-comm", moe.allgather_overlap_comm,
         "MindSpeed: the allgather dispatcher's gathers run while the router and shared experts compute");
}

// --moe-layer-freq: an integer N (layers 0, N, 2N, ... are MoE) or a list "[1,0,1,0]".
Status parse_moe_layer_freq(const std::string& text, int64_t num_layers, std::vector<int>* pattern) {
  pattern->clear();
  if (text.empty()) return ok_status();
  std::string t;
  for (char ch : text)
    if (ch != ' ') t += ch;
  if (!t.empty() && t.front() == '[' && t.back() == ']') {
    size_t begin = 1;
    while (begin < t.size()) {
      const size_t end = std::min(t.find(',', begin), t.size() - 1);
      const std::string item = t.substr(begin, end - begin);
      if (item != "0" && item != "1") {
        return invalid_argument("--moe-layer-freq \"", text, "\": list items must be 0 or 1, got '", item, "'");
      }
      pattern->push_back(item == "1" ? 1 : 0);
      begin = end + 1;
    }
    return ok_status();
  }
  if (!check_integer<int64_t>(t).empty() || std::strtoll(t.c_str(), nullptr, 10) < 1) {
    return invalid_argument("--moe-layer-freq \"", text, "\": expected an integer >= 1 or a list such as [1,0,1,0]");
  }
  const int64_t every = std::strtoll(t.c_str(), nullptr, 10);
  for (int64_t layer = 0; layer < num_layers; ++layer) pattern->push_back(layer % every == 0 ? 1 : 0);
  return ok_status();
}

Status apply_moe_choices(Configs& c, const Choices& ch) {
  MoeConfig& moe = c.model.moe;
  MS_RETURN_IF_ERROR(parse_moe_layer_freq(ch.moe_layer_freq, c.model.num_layers, &moe.layer_pattern));
  moe.score_function =
      ch.moe_router_score_function == "sigmoid" ? MoeScoreFunction::kSigmoid : MoeScoreFunction::kSoftmax;
  moe.load_balancing = ch.moe_router_load_balancing_type == "seq_aux_loss" ? MoeLoadBalancing::kSeqAuxLoss
                       : ch.moe_router_load_balancing_type == "sinkhorn"   ? MoeLoadBalancing::kSinkhorn
                       : ch.moe_router_load_balancing_type == "none"       ? MoeLoadBalancing::kNone
                                                                           : MoeLoadBalancing::kAuxLoss;
  moe.drop_policy = ch.moe_token_drop_policy == "position" ? MoeDropPolicy::kPosition : MoeDropPolicy::kProbs;
  moe.dispatcher = ch.moe_token_dispatcher_type == "alltoall"       ? MoeDispatcher::kAllToAll
                   : ch.moe_token_dispatcher_type == "alltoall_seq" ? MoeDispatcher::kAllToAllSeq
                                                                    : MoeDispatcher::kAllGather;
  moe.permute_fusion = moe.permute_fusion || ch.use_fused_moe_token_permute_and_unpermute;
  if (ch.gemm_gradient_accumulation_fusion && !moe.grouped_gemm) {
    return invalid_argument("--gemm-gradient-accumulation-fusion needs --moe-grouped-gemm (MindSpeed's rule)");
  }
  moe.gemm_gradient_accumulation_fusion = ch.gemm_gradient_accumulation_fusion;
  if (ch.n_shared_experts > 0) {
    // MindSpeed's conversion: both flags are accepted only when they agree.
    const int64_t expert_ffn = c.model.expert_ffn_hidden_size();
    const int64_t size = ch.n_shared_experts * expert_ffn;
    if (expert_ffn <= 0) {
      return invalid_argument("--n-shared-experts needs --moe-ffn-hidden-size or --ffn-hidden-size");
    }
    if (moe.shared_expert_intermediate_size > 0 && moe.shared_expert_intermediate_size != size) {
      return invalid_argument("--n-shared-experts ", ch.n_shared_experts, " means --moe-shared-expert-intermediate-size ",
                              size, " (", ch.n_shared_experts, " x ", expert_ffn, "), but ",
                              moe.shared_expert_intermediate_size, " was given");
    }
    moe.shared_expert_intermediate_size = size;
  }
  return ok_status();
}

// MindSpeed's Auto Settings (mindspeed/features_manager/auto_settings) and the target cluster's
// numbers mindspeed-cpp adds; the planner is auto_settings/.
void register_auto_settings_flags(FlagRegistry& r, AutoSettingsConfig& a, Choices& ch) {
  r.flag("--auto-settings", a.enabled,
         "MindSpeed: search the parallel layout (TP, PP, VPP, CP, EP, DP, micro-batch, recompute, "
         "distributed "
         "optimizer) for this command line and print the top 3 as runnable command lines");
  r.value("--auto-settings-type", ch.auto_settings_type,
          "white (memory and time model over profiled rates), black (run every candidate that "
          "fits, then the fastest --auto-settings-top-k again) or mixed (the model proposes, its "
          "best --auto-settings-top-k are run)")
      ->check(CLI::IsMember({"white", "black", "mixed"}));
  r.value("--auto-settings-work-dir", a.work_dir,
          "Where the planner writes its runs, profile and plan (default .)");
  r.number("--auto-settings-ranks", a.ranks,
           "Ranks this machine gives the profiling and candidate runs",
           between(1, 1 << 16, false, "ranks"));
  r.value("--auto-settings-log-level", a.log_level, "warning, info or debug")
      ->check(CLI::IsMember({"warning", "info", "debug"}));
  r.number("--target-nnodes", a.target_nnodes,
           "Nodes of the cluster planned for (default --nnodes)",
           between(1, 1 << 16, false, "nodes"));
  r.number("--nnodes", a.nnodes, "Nodes running the profiling runs",
           between(1, 1 << 16, false, "nodes"));
  r.number("--nproc-per-node", a.nproc_per_node, "Ranks per node",
           between(1, 1 << 12, false, "ranks"));
  r.number("--node-rank", a.node_rank, "This node's rank (the planner runs on node 0)",
           between(0, 1 << 16, true, "nodes"));
  r.value("--master-addr", a.master_addr, "Address of node 0 (auto settings)");
  r.number("--master-port", a.master_port, "Port of node 0 (auto settings)",
           between(1, 65535, false, "port"));
  r.value("--prof-file", a.prof_file,
          "The profiling cache (default <work dir>/auto_settings_profile.json): read when present, "
          "written after "
          "profiling");
  r.number("--auto-settings-memory-cap", a.memory_cap_mb,
           "mindspeed-cpp: MB one rank may use (default: this machine's memory over its ranks)",
           above(0, "MB"));
  r.number("--auto-settings-device-tflops", a.device_tflops,
           "mindspeed-cpp: dense GEMM TFLOP/s of one rank of the target (default: measured here)",
           above(0, "TFLOP/s"));
  r.number("--auto-settings-intra-node-bandwidth", a.intra_node_gbps,
           "mindspeed-cpp: GB/s per rank between ranks of a node (default: measured here)",
           above(0, "GB/s"));
  r.number("--auto-settings-inter-node-bandwidth", a.inter_node_gbps,
           "mindspeed-cpp: GB/s per rank between nodes (default: the intra-node figure)",
           above(0, "GB/s"));
  r.number("--auto-settings-top-k", a.top_k,
           "mindspeed-cpp: finalists: the mixed search runs the model's best, the black search "
           "its screening run's fastest",
           between(3, 1000, false, "candidates"));
  r.number("--auto-settings-rounds", a.rounds,
           "mindspeed-cpp: interleaved rounds over the finalists (each runs once per round; "
           "they rank by their median)",
           between(1, 100, false, "rounds"));
  r.number("--auto-settings-iters", a.measure_iters,
           "mindspeed-cpp: iterations of each profiling and candidate run (the first is warm-up)",
           between(2, 1000, false, "iterations"));
}

void register_flags(FlagRegistry& r, Configs& c, Choices& ch) {
  ModelConfig& m = c.model;
  r.number("--num-layers", m.num_layers, "Number of transformer layers", between(1, 1 << 20, false, "layers"));
  r.number("--hidden-size", m.hidden_size, "Transformer hidden size", between(1, 1 << 20));
  r.number("--ffn-hidden-size", m.ffn_hidden_size, "MLP hidden size (default 4h, or 8h/3 rounded to 64 with --swiglu)",
           between(1, 1 << 24));
  r.number("--num-attention-heads", m.num_attention_heads, "Number of attention heads",
           between(1, 1 << 16, false, "heads"));
  r.number("--kv-channels", m.kv_channels, "Head dimension (default hidden / heads)", between(1, 1 << 16));
  r.flag("--group-query-attention", m.group_query_attention, "Use grouped-query attention");
  r.number("--num-query-groups", m.num_query_groups, "Key/value heads with --group-query-attention",
           between(1, 1 << 16, false, "heads"));
  r.number("--seq-length", m.seq_length, "Tokens per sample", between(1, 1 << 24, false, "tokens"));
  r.number("--max-position-embeddings", m.max_position_embeddings, "Maximum positions (learned table size)",
           between(1, 1 << 24, false, "positions"));
  r.value("--normalization", ch.normalization, "LayerNorm or RMSNorm")
      ->check(CLI::IsMember({"LayerNorm", "RMSNorm"}));
  r.number("--norm-epsilon", m.norm_epsilon, "Epsilon of LayerNorm/RMSNorm", above(0));
  r.value("--noop-layers", ch.noop_layers, "MindSpeed: comma-separated 0-based indices of identity layers");
  r.flag("--swiglu", m.swiglu, "SwiGLU MLP (LLaMA)");
  r.flag("--openai-gelu", m.openai_gelu, "tanh approximation of GELU (GPT-2)");
  r.value("--position-embedding-type", ch.position_embedding_type, "learned_absolute, rope, none or alibi (MindSpeed)")
      ->check(CLI::IsMember({"learned_absolute", "rope", "none", "alibi"}));
  r.number("--alibi-fusion-attn-type", m.alibi_fusion_attn_type,
           "ALiBi inside flash attention (implies --use-fusion-attn-v2): 0 -m|d| (m d with "
           "--alibi-diagonal-opposite), 2 -m|d|, 3 -m sqrt|d|",
           between(0, 3));
  r.flag("--alibi-diagonal-opposite", m.alibi_diagonal_opposite, "ALiBi type 0: bias m (kp - qp) instead of -m |kp - qp|");
  r.flag("--square-alibi-mask", m.square_alibi_mask, "ALiBi without fusion: the bias m (kp - qp) (square tensor)");
  r.flag("--fill-neg-inf", m.fill_neg_inf, "ALiBi without fusion: the square bias carries the causal -inf");
  r.flag("--use-rotary-position-embeddings", ch.use_rotary_position_embeddings,
         "Legacy spelling of --position-embedding-type rope");
  r.number("--rotary-base", m.rotary_base, "Rotary embedding base (theta)", above(0));
  r.number("--rotary-seq-len-interpolation-factor", m.rotary_seq_len_interpolation_factor,
           "Rotary positions divided by this (linear position interpolation)", at_least(1));
  r.flag("--use-rope-scaling", ch.use_rope_scaling, "Llama 3.1 rotary frequency scaling");
  r.value("--rope-scaling-type", ch.rope_scaling_type, "MindSpeed-LLM spelling: llama3")
      ->check(CLI::IsMember({"llama3"}));
  r.number("--rope-scaling-factor", m.rope_scaling_factor, "Llama 3.1 rope scaling factor", above(0));
  r.number("--low-freq-factor", m.rope_low_freq_factor, "Llama 3.1 rope scaling low-frequency factor", above(0));
  r.number("--high-freq-factor", m.rope_high_freq_factor, "Llama 3.1 rope scaling high-frequency factor", above(0));
  r.number("--original-max-position-embeddings", m.rope_original_max_position_embeddings,
           "Llama 3.1 rope scaling: the context length the model was trained with",
           between(1, 1 << 24, false, "positions"));
  r.flag("--untie-embeddings-and-output-weights", m.untie_embeddings_and_output_weights,
         "Separate output layer instead of the tied word embeddings");
  r.clear_flag("--disable-bias-linear", m.add_bias_linear, "No biases in linear layers");
  r.flag("--add-qkv-bias", m.add_qkv_bias, "Bias in the QKV projection even with --disable-bias-linear");
  r.number("--sparse-mode", ch.sparse_mode,
           "MindSpeed flash-attention mask: 0 = band of --pre-tockens/--next-tockens, 2 = causal", between(0, 8));
  r.number("--pre-tockens", ch.pre_tockens, "With --sparse-mode 0: keys a query sees before it",
           between(1, 1ll << 40, false, "positions"));
  r.number("--next-tockens", ch.next_tockens, "With --sparse-mode 0: keys a query sees after it (0 for a causal model)",
           between(0, 1ll << 40, false, "positions"));
  r.value("--window-size", ch.window_size, "Sliding-window attention: L (or L,0): keys a query sees before it");
  r.number("--attention-dropout", m.attention_dropout, "Dropout on attention probabilities",
           between(0, 1, /*hi_open=*/true, "probability"));
  r.number("--hidden-dropout", m.hidden_dropout, "Dropout on the residual branches and embeddings",
           between(0, 1, /*hi_open=*/true, "probability"));
  r.number("--init-method-std", m.init_method_std, "Std of the normal weight initialisation", at_least(0));
  r.number("--make-vocab-size-divisible-by", m.make_vocab_size_divisible_by, "Vocabulary padding multiple",
           between(1, 1 << 20));

  ParallelConfig& p = c.parallel;
  r.number("--tensor-model-parallel-size", p.tensor_model_parallel_size, "Tensor-parallel size", between(1, 1 << 20, false, "ranks"));
  r.number("--pipeline-model-parallel-size", p.pipeline_model_parallel_size, "Pipeline-parallel size",
           between(1, 1 << 20, false, "ranks"));
  r.number("--context-parallel-size", p.context_parallel_size, "Context-parallel size", between(1, 1 << 20, false, "ranks"));
  ContextParallelConfig& cp = p.cp;
  r.value("--context-parallel-algo", ch.context_parallel_algo,
          "MindSpeed context parallelism: ulysses_cp_algo, megatron_cp_algo (ring) or hybrid_cp_algo")
      ->check(CLI::IsMember({"ulysses_cp_algo", "megatron_cp_algo", "hybrid_cp_algo"}));
  r.value("--attention-mask-type", ch.attention_mask_type,
          "causal (load-balanced ring chunks) or general (contiguous chunks)")
      ->check(CLI::IsMember({"causal", "general"}));
  r.number("--ulysses-degree-in-cp", cp.ulysses_degree, "hybrid_cp_algo: Ulysses ranks inside each ring step",
           between(1, 1 << 20, false, "ranks"));
  r.number("--cp-window-size", cp.window_size, "Double ring: ranks of each inner ring (1 = one ring)",
           between(1, 1 << 20, false, "ranks"));
  r.flag("--use-cp-send-recv-overlap", cp.send_recv_overlap,
         "Ring context parallelism: overlap the key/value transfers with each block's attention");
  r.flag("--use-ulysses-allgather-kv", cp.ulysses_allgather_kv,
         "Ulysses: all-gather keys and values along the sequence instead of the all-to-all");
  r.number("--expert-model-parallel-size", p.expert_model_parallel_size, "Expert-parallel size",
           between(1, 1 << 20, false, "ranks"));
  register_moe_flags(r, m.moe, p, ch);
  register_recompute_flags(r, m.recompute, ch);
  register_auto_settings_flags(r, c.auto_settings, ch);
  r.flag("--sequence-parallel", p.sequence_parallel, "Megatron sequence parallelism (with tensor parallelism)");
  r.flag("--unaligned-linear", m.unaligned_linear,
         "MindSpeed: query groups (with their heads) and FFN channels need not divide the "
         "tensor-parallel size; "
         "ranks below n % TP hold one more");
  r.flag("--use-ascend-coc", p.use_ascend_coc,
         "MindSpeed compute-communication overlap (script mode): tensor-parallel GEMMs split along "
         "the tokens so "
         "each chunk's collective overlaps another chunk's GEMM");
  r.flag("--use-ascend-mc2", p.use_ascend_mc2,
         "MindSpeed MC2: sequence-parallel linear layers through fused all-gather + GEMM and GEMM "
         "+ reduce-scatter "
         "ops (needs --sequence-parallel)");
  r.flag("--tp-2d", p.tp_2d,
         "MindSpeed 2D tensor parallelism: the tensor-parallel ranks as a --tp-x x --tp-y grid, "
         "activations [s/(x*cp), b, h/y]");
  r.number("--tp-x", p.tp_x,
           "2D tensor parallelism: the X axis (consecutive tensor-parallel ranks)",
           between(1, 1 << 20, false, "ranks"));
  r.number("--tp-y", p.tp_y, "2D tensor parallelism: the Y axis (tp = x * y)",
           between(1, 1 << 20, false, "ranks"));
  r.flag("--enable-overlap-ag-with-matmul", p.tp_2d_overlap_ag_with_matmul,
         "2D tensor parallelism: the second MLP linear's all-gather in chunks under its GEMM");
  r.flag("--enable-overlap-matmul-with-rs", p.tp_2d_overlap_matmul_with_rs,
         "2D tensor parallelism: the first MLP linear's reduce-scatter in chunks under its GEMM");
  r.flag(
      "--enable-backward-overlap-ag-with-matmul", p.tp_2d_backward_overlap_ag_with_matmul,
      "2D tensor parallelism: the backward all-gather of the output gradient in chunks under the "
      "input gradient's GEMM");
  r.value("--hccl-group-buffer", p.hccl_group_buffer,
          "MindSpeed per-group communication buffers in MB, e.g. \"dp:200;tp:300\" (a larger "
          "collective runs as "
          "several calls)");
  r.flag("--hccl-group-buffer-adaptive", p.hccl_group_buffer_adaptive,
         "MindSpeed: size each group's communication buffer from the model (its largest message)");
  r.number("--hccl-ep-group-buffer-adaptive-factor", p.hccl_ep_group_buffer_adaptive_factor,
           "With --hccl-group-buffer-adaptive: the expert groups' load-imbalance factor (<= 0: "
           "their 200 MB)",
           between(-1e6, 1e6));
  r.number("--coc-parallel-num", p.coc_parallel_num,
           "With --use-ascend-coc: token chunks per linear layer (1, 2, 4 or 8)", between(1, 8));
  r.number("--coc-mode", p.coc_mode,
           "With --use-ascend-coc: -1 auto (CoC when --coc-parallel-num > 1), 0 original layers, 1 "
           "rewrite (the "
           "original layers here), 2 CoC",
           between(-1, 2));
  CLI::Option* distopt = r.flag("--use-distributed-optimizer", p.use_distributed_optimizer,
                                "Shard optimizer state over data parallelism (ZeRO-1)");
  r.flag("--use-custom-fsdp", p.use_custom_fsdp,
         "Megatron's custom FSDP: shard over data parallelism what --data-parallel-sharding-strategy says");
  r.value("--data-parallel-sharding-strategy", ch.data_parallel_sharding_strategy,
          "FSDP: no_shard (DDP), optim (optimizer state, ZeRO-1), optim_grads (+ gradients, ZeRO-2), "
          "optim_grads_params (+ parameters, ZeRO-3)")
      ->check(CLI::IsMember({"no_shard", "optim", "optim_grads", "optim_grads_params"}));
  CLI::Option* overlap_grad = r.flag("--overlap-grad-reduce", p.overlap_grad_reduce, "Overlap gradient reduction with backward");
  // Declared dependencies between flags (validate.cpp checks the same rules for configs made in code).
  r.flag("--overlap-param-gather", p.overlap_param_gather, "Overlap parameter all-gather with forward")
      ->needs(distopt)
      ->needs(overlap_grad);
  r.number("--ddp-bucket-size", p.ddp_bucket_size, "Elements per gradient bucket",
           between(1, 1ll << 40, false, "elements"));
  r.number(
      "--hccl-slice-size", p.hccl_slice_size,
      "MindSpeed: elements per data-parallel collective when the distributed optimizer's state is "
      "gathered "
      "into Megatron's distrib_optim.pt (--ckpt-format torch saves; bounds the staging memory)",
      between(1, 1ll << 40, false, "elements"));
  r.clear_flag("--no-gradient-accumulation-fusion", p.gradient_accumulation_fusion,
               "Weight-gradient GEMM into a temporary, then add (instead of accumulating in place)");
  r.flag("--use-tp-pp-dp-mapping", p.use_tp_pp_dp_mapping, "Rank order tp-cp-ep-pp-dp");
  r.number("--decoder-first-pipeline-num-layers", p.decoder_first_pipeline_num_layers,
           "Layers of the first pipeline stage (uneven split; the rest evenly over the others)",
           between(1, 1 << 20, false, "layers"));
  r.number("--decoder-last-pipeline-num-layers", p.decoder_last_pipeline_num_layers,
           "Layers of the last pipeline stage (uneven split)", between(1, 1 << 20, false, "layers"));
  r.number("--num-layers-per-virtual-pipeline-stage", p.num_layers_per_virtual_pipeline_stage,
           "Interleaved schedule: layers per virtual stage (model chunk)", between(1, 1 << 20, false, "layers"));
  r.number("--num-virtual-stages-per-pipeline-rank", p.num_virtual_stages_per_pipeline_rank,
           "Interleaved schedule: model chunks per pipeline rank", between(1, 1 << 16, false, "chunks"));
  r.number("--microbatch-group-size-per-virtual-pipeline-stage", p.microbatch_group_size_per_vp_stage,
           "Interleaved schedule: micro-batches per chunk before switching chunks (default the pipeline size)",
           between(1, 1 << 24, false, "micro-batches"));
  r.value("--schedules-method", ch.schedules_method, "MindSpeed pipeline schedule: dualpipev")
      ->check(CLI::IsMember({"dualpipev"}));
  r.flag("--variable-seq-lengths", p.variable_seq_lengths,
         "Micro-batches may differ in sequence length: each tensor between pipeline stages is preceded by its shape");
  r.flag("--use-multiparameter-pipeline-model-parallel", p.multiparameter_pipeline,
         "MindSpeed: stages exchange a list of tensors, each with its own send (GPT passes one: the hidden states)");
  r.flag("--dualpipev-dw-detach", p.dualpipev_dw_detach,
         "DualPipeV: defer weight gradients of the cool-down into the bubbles");
  r.number("--dry-run-world-size", p.dry_run_world_size,
           "mindspeed-cpp: print every process group for this world size and exit",
           between(1, kMaxDryRunWorldSize, false, "ranks"));

  OptimizerConfig& o = c.optimizer;
  r.value("--optimizer", ch.optimizer, "Optimizer (adam = AdamW)")->check(CLI::IsMember({"adam"}));
  r.number("--lr", o.lr, "Peak learning rate", above(0));
  r.number("--min-lr", o.min_lr, "Learning rate at the end of the decay", at_least(0));
  r.value("--lr-decay-style", ch.lr_decay_style, "constant, linear, cosine, inverse-square-root or WSD")
      ->check(CLI::IsMember({"constant", "linear", "cosine", "inverse-square-root", "WSD"}));
  r.value("--lr-wsd-decay-style", ch.lr_wsd_decay_style, "WSD anneal: exponential, linear, cosine or minus_sqrt")
      ->check(CLI::IsMember({"exponential", "linear", "cosine", "minus_sqrt"}));
  r.number("--lr-wsd-decay-iters", o.lr_wsd_decay_iters, "Iterations of the WSD anneal (required with WSD)",
           at_least(0, "iterations"));
  r.number("--lr-decay-iters", o.lr_decay_iters, "Iterations of the decay (default --train-iters)",
           at_least(1, "iterations"));
  // --lr-warmup-iters 0 with --lr-warmup-fraction is allowed (Megatron's rule: not both
  // non-zero; validate.cpp).
  r.number("--lr-warmup-iters", o.lr_warmup_iters, "Iterations of linear warmup", at_least(0, "iterations"));
  r.number("--lr-warmup-fraction", o.lr_warmup_fraction, "Warmup as a fraction of the decay iterations",
           between(0, 1));
  r.number("--lr-warmup-init", o.lr_warmup_init, "Learning rate at the start of the warmup", at_least(0));
  // Sample-based twins of the schedule flags (with --train-samples).
  r.number("--lr-decay-samples", o.lr_decay_samples, "Samples of the decay (default --train-samples)",
           at_least(1, "samples"));
  r.number("--lr-warmup-samples", o.lr_warmup_samples, "Samples of linear warmup", at_least(0, "samples"));
  r.number("--lr-wsd-decay-samples", o.lr_wsd_decay_samples, "Samples of the WSD anneal (WSD with --train-samples)",
           at_least(0, "samples"));
  r.number("--weight-decay", o.weight_decay, "Decoupled weight decay (matrices only)", at_least(0));
  r.number("--adam-beta1", o.adam_beta1, "Adam beta1", between(0, 1, /*hi_open=*/true));
  r.number("--adam-beta2", o.adam_beta2, "Adam beta2", between(0, 1, /*hi_open=*/true));
  r.number("--adam-eps", o.adam_eps, "Adam epsilon", above(0));
  r.number("--clip-grad", o.clip_grad, "Global gradient-norm clipping (0 = off)", at_least(0));
  r.value("--optimizer-selection", ch.optimizer_selection,
          "MindSpeed: fused_adamw, fused_torch_adamw (both AdamW) or fused_ema_adamw (AdamW + an EMA of the weights)")
      ->check(CLI::IsMember({"fused_adamw", "fused_torch_adamw", "fused_ema_adamw"}));
  r.number("--ema-decay", o.ema_decay, "MindSpeed fused_ema_adamw: EMA decay d in s = d*s + (1-d)*w", between(0, 1));
  r.flag("--reuse-fp32-param", o.reuse_fp32_param,
         "MindSpeed: the fp32 master weight is the bf16 weight plus a 16-bit residual (bitwise lossless)");
  r.flag("--o2-optimizer", o.o2_optimizer, "MindSpeed-LLM: Adam moments stored in bf16 (upcast for the update)");
  r.flag("--o2-gradient", o.o2_gradient,
         "MindSpeed-LLM: main gradients accumulated and reduced in a bf16 buffer (2 bytes per parameter instead of 4; "
         "needs --bf16 and --no-gradient-accumulation-fusion)");
  r.flag("--swap-optimizer", o.swap_optimizer,
         "MindSpeed: fp32 master and Adam moments live in the swap tier (--swap-dir), updated slice by slice");
  r.number("--swap-optimizer-times", o.swap_optimizer_times, "MindSpeed: slices of the swapped optimizer step",
           between(1, 1 << 20, false, "slices"));

  TrainingConfig& t = c.training;
  r.number("--micro-batch-size", t.micro_batch_size, "Samples per micro-batch", between(1, 1 << 24, false, "samples"));
  r.number("--global-batch-size", t.global_batch_size, "Samples per iteration (gradient accumulation)",
           between(1, 1ll << 40, false, "samples"));
  r.number("--train-iters", t.train_iters, "Training iterations", between(1, 1ll << 40, false, "iterations"));
  r.number("--train-samples", t.train_samples,
           "Training samples (sample-based training, instead of --train-iters; the iterations follow from it)",
           between(1, 1ll << 50, false, "samples"));
  r.list("--rampup-batch-size", ch.rampup_batch_size,
         "START INCREMENT SAMPLES: grow the global batch from START by INCREMENT over SAMPLES samples (needs "
         "--train-samples)");
  r.flag("--decrease-batch-size-if-needed", t.decrease_batch_size_if_needed,
         "Run a global batch that --micro-batch-size x data-parallel size does not divide rounded down");
  r.value("--swap-dir", t.swap_dir,
          "mindspeed-cpp, --device cpu: directory of the swap tier's file (--swap-attention, "
          "--swap-optimizer); default "
          "$TMPDIR or /tmp (a device's tier is host memory)");
  r.number("--seed", t.seed, "Random seed (initialisation, dropout, data order)",
           between(0, 4294967295.0));
  r.number("--log-interval", t.log_interval, "Iterations between log lines", at_least(1, "iterations"));
  r.number("--eval-interval", t.eval_interval, "Iterations between evaluations", at_least(1, "iterations"));
  r.number("--eval-iters", t.eval_iters, "Iterations per evaluation", between(0, 1ll << 40, false, "iterations"));
  r.number("--optimization-level", t.optimization_level,
           "MindSpeed optimization level: 0 reference kernels, 1 fused kernels, 2 fused + algorithms", between(0, 2));
  r.flag("--use-flash-attn", t.use_flash_attn, "Flash attention (MindSpeed level-2 feature)");
  r.flag("--use-fusion-attn-v2", ch.use_fusion_attn_v2,
         "MindSpeed fusion attention v2 (flash attention with the ALiBi bias types; implies --use-flash-attn)");
  r.flag("--use-fused-rmsnorm", t.use_fused_rmsnorm, "Fused RMSNorm kernel");
  r.flag("--use-fused-swiglu", t.use_fused_swiglu, "Fused SwiGLU kernel");
  r.flag("--use-fused-rotary-pos-emb", t.use_fused_rotary_pos_emb, "Fused rotary embedding kernel");
  r.flag("--use-fused-ring-attention-update", t.use_fused_ring_attention_update,
         "Fused ring-attention update kernel (the merge of partial attentions in ring context parallelism)");
  CLI::Option* bf16 = r.flag("--bf16", t.bf16, "bf16 mixed precision");
  r.flag("--fp16", t.fp16,
         "fp16 mixed precision: fp16 weights and activations, fp32 main parameters, a loss scaler (dynamic "
         "unless --loss-scale)")
      ->excludes(bf16);
  // Loss scales are fp32 values (Megatron's scale tensor): positive and finite in fp32.
  const FlagDomain fp32_scale{"", false, 0.0, 3.4028234663852886e38, true, false, ""};
  r.number("--loss-scale", t.loss_scale,
           "A constant loss scale (with --fp16 or --bf16); unset: --fp16 scales dynamically", fp32_scale);
  r.number("--initial-loss-scale", t.initial_loss_scale, "The dynamic loss scale's start (default 2^32)", fp32_scale);
  r.number("--min-loss-scale", t.min_loss_scale, "The dynamic loss scale's floor", fp32_scale);
  r.number("--loss-scale-window", t.loss_scale_window,
           "Iterations without overflow after which the dynamic loss scale doubles", between(1, 1e15, false, "iterations"));
  r.number("--hysteresis", t.hysteresis, "Overflowing iterations after which the dynamic loss scale halves",
           at_least(1, "iterations"));
  r.flag("--calculate-per-token-loss", t.calculate_per_token_loss,
         "Normalise the loss by the global batch's loss tokens (not per micro-batch, then averaged)");
  r.flag("--accumulate-allreduce-grads-in-fp32", t.accumulate_allreduce_grads_in_fp32,
         "With --fp16: accumulate and reduce the gradients in an fp32 buffer (else fp16); --bf16 always does");
  r.flag("--attention-softmax-in-fp32", t.attention_softmax_in_fp32,
         "Accepted: attention scores and their softmax are always fp32 here (never stored in 16 bits)");
  r.flag("--apply-query-key-layer-scaling", t.apply_query_key_layer_scaling,
         "Accepted: Q.K^T / layer-number then softmax(x * layer-number) equals the plain softmax in the fp32 "
         "scores computed here; implies --attention-softmax-in-fp32 as in Megatron");
  r.flag("--deterministic-mode", t.deterministic_mode, "Bitwise-reproducible runs");
  r.flag("--npu-deterministic", ch.npu_deterministic, "MindSpeed spelling of --deterministic-mode");
  r.clear_flag("--no-check-for-nan-in-loss-and-grad", t.check_for_nan_in_loss_and_grad,
               "Do not stop on a non-finite loss or gradient (the update is skipped instead)");
  r.number("--peak-tflops", t.peak_tflops,
           "mindspeed-cpp: per-rank peak TFLOP/s for the MFU column (default: none on the CPU; on "
           "--device cuda the "
           "GEMM rate measured at start-up)",
           at_least(0, "TFLOP/s"));
  r.value("--load", t.load,
          "Continue from a checkpoint directory (latest_checkpointed_iteration.txt), or start from a Hugging Face "
          "directory (config.json + model.safetensors)");
  r.value("--save", t.save, "Checkpoint directory to save to");
  r.number("--persistent-save-interval", ch.persistent_save_interval, "Megatron's alias of --save-interval",
           between(1, 1ll << 40, false, "iterations"));
  r.number("--save-interval", t.save_interval, "Iterations between checkpoints (also saved at the end)",
           between(1, 1ll << 40, false, "iterations"));
  r.flag("--async-save", t.async_save,
         "Write checkpoints in the background (the snapshot is taken at the save; training goes on)");
  r.flag("--no-save-optim", t.no_save_optim, "Save the weights only");
  r.flag("--no-load-optim", t.no_load_optim, "Load the weights only (fresh optimizer state)");
  r.flag("--no-load-rng", t.no_load_rng, "Accepted: mindspeed-cpp keeps no RNG state (dropout is keyed by seed and sample)");
  r.flag("--no-save-rng", t.no_save_rng, "Accepted: mindspeed-cpp keeps no RNG state (dropout is keyed by seed and sample)");
  r.flag("--finetune", t.finetune, "Load the weights only and start at iteration 0");
  r.number("--ckpt-step", t.ckpt_step, "Load this iteration instead of the latest", at_least(0, "iterations"));
  r.flag("--exit-on-missing-checkpoint", t.exit_on_missing_checkpoint,
         "Stop if --load holds no checkpoint (instead of starting from random weights)");
  r.number("--exit-interval", t.exit_interval, "Save (with --save) and exit when the iteration is a multiple of this",
           between(1, 1ll << 40, false, "iterations"));
  r.number("--exit-duration-in-mins", t.exit_duration_in_mins, "Save (with --save) and exit after this many minutes",
           above(0, "minutes"));
  r.flag("--exit-signal-handler", t.exit_signal_handler, "On SIGTERM: finish the iteration, save (with --save), exit 0");
  r.flag("--skip-train", t.skip_train,
         "No training: evaluate the model (from --load) on the validation and test data and exit");
  // MindSpeed's profiling flags (core/profiler.h).
  profiler::Options& prof = t.profile;
  r.flag("--profile", prof.enabled, "Record a trace of the profiled steps (Chrome trace JSON, one file per rank)");
  r.number("--profile-step-start", prof.step_start, "First profiled train step (0-based count of steps this run)",
           between(0, 1ll << 40, false, "steps"));
  r.number("--profile-step-end", prof.step_end, "First train step no longer profiled", between(1, 1ll << 40, false, "steps"));
  r.value("--profile-level", ch.profile_level,
          "level0: steps, micro-batches, layers, optimizer, communication; level1: + kernels; level2: + shapes, stacks")
      ->check(CLI::IsMember({"level0", "level1", "level2"}));
  r.flag("--profile-with-cpu", prof.with_cpu, "Also record host-side work (data loading, checkpoint saving, logging)");
  r.flag("--profile-with-stack", prof.with_stack, "level2: native call stacks on events");
  r.flag("--profile-with-memory", prof.with_memory,
         "Counter tracks of the allocator's bytes per category (requires --profile-with-cpu)");
  r.flag("--profile-record-shapes", prof.record_shapes, "level2: kernel argument shapes");
  r.value("--profile-save-path", prof.save_path, "Directory for the traces (rank_NNNNN.trace.json)");
  r.list("--profile-ranks", ch.profile_ranks, "Global ranks to profile; -1 = all");
  r.value("--ckpt-format", ch.ckpt_format,
          "Checkpoint format: safetensors (mindspeed-cpp's resharding format) or torch (also "
          "Megatron-LM's legacy "
          "mp_rank_*/model_optim_rng.pt files, which Megatron loads with --no-load-optim); "
          "torch_dist, zarr and "
          "torch_dcp are refused");
  r.flag("--enable-hf2mg-convert", t.enable_hf2mg_convert,
         "MindSpeed-LLM: --load is a Hugging Face directory; read directly at any layout (no "
         "conversion step)");
  r.value("--model-type-hf", t.model_type_hf,
          "MindSpeed-LLM: the Hugging Face family of --load (llama2, qwen25, mixtral; also llama, "
          "qwen2, mistral, "
          "gpt2), checked against its config.json");
  r.number("--num-threads", t.num_threads, "mindspeed-cpp: OpenMP threads per rank (default cores / local ranks)",
           between(1, 4096, false, "threads"));
  r.value("--device", ch.device,
          "mindspeed-cpp: cpu; cuda (the CUDA backend, one GPU per rank); cpu-fenced (the CPU with device memory "
          "fenced off from host code: checks the host/device boundary without a GPU)")
      ->check(CLI::IsMember({"cpu", "cuda", "cpu-fenced"}));
  r.flag("--allow-tf32", t.allow_tf32, "mindspeed-cpp, --device cuda: fp32 GEMMs may use TF32 tensor cores");
  r.flag("--use-cpu-initialization", ch.use_cpu_initialization,
         "Accepted: each parameter is always drawn whole in host memory and sliced for its rank");
  r.flag("--use-mcore-models", ch.use_mcore_models,
         "Accepted, a no-op as in Megatron core_v0.12 (core models are the default there; the model is core's GPTModel)");
  r.value("--transformer-impl", ch.transformer_impl,
          "local or transformer_engine: both map to the native fused kernels (as MindSpeed maps TE)")
      ->check(CLI::IsMember({"local", "transformer_engine"}));
  r.flag("--log-throughput", ch.log_throughput, "Accepted: TFLOP/s is always in the iteration line");
  r.value("--attention-backend", ch.attention_backend,
          "Megatron's attention backend: flash or fused (flash attention), unfused (the softmax materialised), auto "
          "(flash); local needs Megatron's --spec local")
      ->check(CLI::IsMember({"flash", "fused", "unfused", "local", "auto"}));
  KernelFusionConfig& fusion = c.training.fusion;
  r.clear_flag("--no-bias-gelu-fusion", fusion.bias_gelu, "GeLU runs as its unfused reference kernel");
  r.clear_flag("--no-bias-swiglu-fusion", fusion.bias_swiglu, "SwiGLU runs as its unfused reference kernel");
  r.clear_flag("--no-bias-dropout-fusion", fusion.bias_dropout,
               "Bias-dropout-add and dropout run as their unfused reference kernels");
  r.clear_flag("--no-rope-fusion", fusion.rope, "The query/key/value split with rotary runs unfused (reference)");
  r.clear_flag("--no-masked-softmax-fusion", fusion.masked_softmax,
               "The non-flash attention's masked softmax runs unfused (reference); flash attention is unaffected, as "
               "in Megatron");
  r.clear_flag("--no-persist-layer-norm", fusion.persist_layer_norm, "LayerNorm runs as its reference kernel");
  r.flag("--no-position-embedding", ch.no_position_embedding,
         "Megatron's deprecated spelling: accepted with --position-embedding-type rope (which has no learned "
         "position embedding)");
  r.value("--distributed-backend", ch.distributed_backend,
          "nccl or gloo: MPI carries every collective here, whichever is named")
      ->check(CLI::IsMember({"nccl", "gloo"}));
  r.flag("--disable-gloo-group", ch.disable_gloo_group,
         "MindSpeed: no Gloo groups for checkpointing; this engine creates none (every rank writes "
         "its own shards)");
  r.flag("--disable-gloo-process-groups", ch.disable_gloo_process_groups,
         "Megatron: no Gloo process groups; this engine creates none (MPI carries everything)");
  r.value("--ai-framework", ch.ai_framework,
          "MindSpeed: pytorch or mindspore; this native engine serves the launch scripts of either")
      ->check(CLI::IsMember({"pytorch", "mindspore"}));
  r.number("--num-workers", c.training.num_workers,
           "Megatron's data-loader worker processes: the samples are read in the training process here (memory-"
           "mapped), so the value changes neither data nor results",
           between(0, 1 << 16, false, "workers"));
  r.number("--timing-log-level", ch.timing_log_level,
           "Megatron's timers: 0 (the iteration time in the log line); 1 and 2 are not implemented yet",
           between(0, 2));
  r.flag("--log-params-norm", c.logging.log_params_norm, "Log the L2 norm of the (fp32 main) parameters");
  r.flag("--log-num-zeros-in-grad", c.logging.log_num_zeros_in_grad,
         "Log the number of zero elements in the gradients");

  DataConfig& d = c.data;
  CLI::Option* mock = r.flag("--mock-data", d.mock_data, "Synthetic data (Megatron's MockGPTDataset)");
  r.list("--data-path", d.data_path, "[weight] prefix [weight prefix ...]")->excludes(mock);
  r.list("--train-data-path", d.train_data_path, "Training blend")->excludes(mock);
  r.list("--valid-data-path", d.valid_data_path, "Validation blend");
  r.list("--test-data-path", d.test_data_path, "Test blend");
  r.value("--split", d.split, "train,valid,test proportions (default 969,30,1)");
  r.value("--data-cache-path", d.data_cache_path, "Directory for dataset index caches");
  r.value("--tokenizer-type", d.tokenizer_type,
          "GPT2BPETokenizer (the default, as pretrain_gpt.py's), SentencePieceTokenizer, GPTSentencePieceTokenizer, "
          "Llama2Tokenizer, NullTokenizer, or MindSpeed-LLM's PretrainedFromHF (with --tokenizer-name-or-path)");
  r.value("--vocab-file", d.vocab_file, "GPT-2 vocab.json");
  r.value("--merge-file", d.merge_file, "GPT-2 merges.txt");
  r.value("--tokenizer-model", d.tokenizer_model, "SentencePiece model file");
  r.value("--tokenizer-name-or-path", d.tokenizer_name_or_path,
          "MindSpeed-LLM (--tokenizer-type PretrainedFromHF): a directory holding a Hugging Face tokenizer.json "
          "(or a SentencePiece tokenizer.model)");
  r.value("--handler-name", d.handler_name,
          "MindSpeed-LLM: the dataset handler preprocess_data used (GeneralPretrainHandler, ...); "
          "the datasets are "
          "read as they are");
  r.number("--vocab-extra-ids", d.vocab_extra_ids,
           "Extra <extra_id_N> tokens (SentencePieceTokenizer, PretrainedFromHF)", between(0, 1 << 20, false, "tokens"));
  r.number("--padded-vocab-size", c.model.padded_vocab_size_override,
           "MindSpeed-LLM: the padded vocabulary size outright (instead of --make-vocab-size-divisible-by's padding)",
           between(1, 2147483647.0, false, "tokens"));
  r.number("--vocab-size", d.vocab_size, "Vocabulary size for NullTokenizer", between(1, 2147483647.0, false, "tokens"));
  r.flag("--reset-position-ids", d.reset_position_ids, "Positions restart after each end-of-document token");
  r.flag("--reset-attention-mask", d.reset_attention_mask, "No attention across end-of-document tokens");
  r.flag("--eod-mask-loss", d.eod_mask_loss, "No loss on end-of-document tokens");
  r.flag("--no-shared-storage", d.no_shared_storage,
         "MindSpeed-LLM: no file system shared by the nodes; each node builds and caches the "
         "dataset indices "
         "(its local rank 0 when tensor parallel 0; tensor-parallel rank 0 when TP spans nodes)");

  LoggingConfig& lg = c.logging;
  r.value("--tensorboard-dir", lg.tensorboard_dir,
          "Write TensorBoard event files (Megatron's scalars, from the last rank) to this directory");
  r.number("--tensorboard-log-interval", lg.tensorboard_log_interval, "Iterations between TensorBoard scalars",
           at_least(1, "iterations"));
  r.number("--tensorboard-queue-size", lg.tensorboard_queue_size,
           "TensorBoard events buffered before they are written (also written every 120 s and at the end)",
           at_least(1, "events"));
  r.flag("--log-timers-to-tensorboard", lg.log_timers_to_tensorboard,
         "Write 'iteration-time' and 'throughput' to TensorBoard at every log line");
  r.flag("--log-memory-to-tensorboard", lg.log_memory_to_tensorboard,
         "Write the allocator's bytes ('mem-reserved-bytes', 'mem-allocated-bytes', ...) to TensorBoard");
  r.flag("--log-validation-ppl-to-tensorboard", lg.log_validation_ppl_to_tensorboard,
         "Write the validation perplexity to TensorBoard");
  r.flag("--log-world-size-to-tensorboard", lg.log_world_size_to_tensorboard, "Write the world size to TensorBoard");
  r.clear_flag("--no-log-loss-scale-to-tensorboard", lg.log_loss_scale_to_tensorboard,
               "Do not write the loss scale to TensorBoard");
  r.clear_flag("--no-log-learnig-rate-to-tensorboard", lg.log_learning_rate_to_tensorboard,
               "Do not write the learning rate to TensorBoard (Megatron <= core_r0.8 spelling)");
  r.flag("--log-batch-size-to-tensorboard", lg.log_batch_size_to_tensorboard,
         "Accepted (Megatron <= core_r0.8): 'batch-size' is always written, as in core_v0.12");
  r.value("--metrics-file", lg.metrics_file,
          "mindspeed-cpp: JSON lines, one object per logged iteration and per evaluation, the numbers of the log "
          "lines (default <tensorboard-dir>/metrics.jsonl with --tensorboard-dir; tools/plot_metrics.sh draws it)");
}

// MindSpeed's --noop-layers "i,j,...": integers, each in [0, --num-layers), no repeats.
Status parse_noop_layers(const std::string& text, int64_t num_layers, std::vector<int64_t>* out) {
  out->clear();
  if (text.empty()) return ok_status();
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    if (const std::string bad = check_integer<int64_t>(item); !bad.empty()) {
      return invalid_argument("--noop-layers \"", text, "\": ", bad, " (expected 0-based layer indices such as \"0,31\")");
    }
    const int64_t layer = std::strtoll(item.c_str(), nullptr, 10);  // an integer: checked above
    if (layer < 0 || layer >= num_layers) {
      return invalid_argument("--noop-layers \"", text, "\": layer ", layer, " is outside [0, --num-layers (",
                              num_layers, "))");
    }
    if (std::find(out->begin(), out->end(), layer) != out->end()) {
      return invalid_argument("--noop-layers \"", text, "\": layer ", layer, " is listed twice");
    }
    out->push_back(layer);
    begin = end + 1;
  }
  if (static_cast<int64_t>(out->size()) == num_layers) {
    return invalid_argument("--noop-layers \"", text, "\" makes every layer a no-op layer");
  }
  return ok_status();
}

// --window-size "L", "L,0" or "(L, 0)" (Megatron's (left, right) window).
Status parse_window_size(const std::string& text, int64_t* left) {
  std::string t;
  for (char ch : text)
    if (ch != '(' && ch != ')' && ch != ' ') t += ch;
  const size_t comma = t.find(',');
  const std::string l = t.substr(0, comma), r = comma == std::string::npos ? "0" : t.substr(comma + 1);
  if (!check_integer<int64_t>(l).empty() || !check_integer<int64_t>(r).empty() || std::strtoll(l.c_str(), nullptr, 10) < 1) {
    return invalid_argument("--window-size \"", text, "\": expected the keys a query sees before it, L or L,0 (L >= 1)");
  }
  if (std::strtoll(r.c_str(), nullptr, 10) != 0) {
    return invalid_argument("--window-size \"", text, "\": a right window would let tokens see later tokens; the GPT "
                            "model is causal (use L,0)");
  }
  *left = std::strtoll(l.c_str(), nullptr, 10);
  return ok_status();
}

// The attention mask flags: MindSpeed's --sparse-mode with --pre-tockens/--next-tockens and
// Megatron's --window-size, into ModelConfig::attention_window.
Status apply_attention_mask_flags(ModelConfig& m, const Choices& ch) {
  if (!ch.window_size.empty()) MS_RETURN_IF_ERROR(parse_window_size(ch.window_size, &m.attention_window));
  if (ch.sparse_mode == -1 || ch.sparse_mode == 2) return ok_status();  // causal (MindSpeed's default for GPT)
  if (ch.sparse_mode != 0) {
    return invalid_argument("--sparse-mode ", ch.sparse_mode, ": the model's flash attention takes 0 (a band of "
                            "--pre-tockens/--next-tockens) or 2 (causal), as MindSpeed allows with --use-flash-attn");
  }
  if (ch.next_tockens != 0) {
    return invalid_argument("--next-tockens ", ch.next_tockens, " would let a token see later tokens; the GPT model is "
                            "causal (use 0)");
  }
  if (!ch.window_size.empty() && m.attention_window != ch.pre_tockens) {
    return invalid_argument("--window-size ", ch.window_size, " and --sparse-mode 0 --pre-tockens ", ch.pre_tockens,
                            " give two different windows; give one");
  }
  m.attention_window = ch.pre_tockens;
  return ok_status();
}

// Megatron's implementation selectors and launch-environment flags: mapped onto this engine's
// kernels, or refused with the rule (Megatron's own where it has one).
Status apply_launch_compatibility_choices(Configs& c, const Choices& ch) {
  TrainingConfig& t = c.training;
  const std::string& backend = ch.attention_backend;
  if (backend == "local") {
    return invalid_argument("--attention-backend local is only supported with --spec local (Megatron's rule; its "
                            "legacy local layer spec is not part of mindspeed-cpp): use --attention-backend unfused "
                            "for the same math");
  }
  if (backend == "unfused") {
    if (t.use_flash_attn) {
      return invalid_argument("--attention-backend unfused contradicts --use-flash-attn (or a flag implying it): "
                              "give one of them");
    }
    if (c.parallel.context_parallel_size > 1) {
      return invalid_argument("--attention-backend unfused does not work with --context-parallel-size > 1: context "
                              "parallelism merges flash attention's partial results (use flash or auto)");
    }
  }
  t.attention_backend = backend == "flash"     ? AttentionBackend::kFlash
                        : backend == "fused"   ? AttentionBackend::kFused
                        : backend == "unfused" ? AttentionBackend::kUnfused
                        : backend == "auto"    ? AttentionBackend::kAuto
                                               : AttentionBackend::kUnset;
  // flash and fused (cuDNN's fused attention) are the flash kernel here; auto picks it.
  if (backend == "flash" || backend == "fused" || backend == "auto") t.use_flash_attn = true;
  if (!t.fusion.bias_swiglu && t.use_fused_swiglu) {
    return invalid_argument("--no-bias-swiglu-fusion contradicts --use-fused-swiglu: give one of them");
  }
  if (!t.fusion.rope && t.use_fused_rotary_pos_emb) {
    return invalid_argument("--no-rope-fusion contradicts --use-fused-rotary-pos-emb: give one of them");
  }
  if (ch.no_position_embedding && c.model.position_embedding_type != PositionEmbeddingType::kRope) {
    return invalid_argument("--no-position-embedding is deprecated, use --position-embedding-type (Megatron's "
                            "rule: it is accepted only with --position-embedding-type rope)");
  }
  if (ch.ckpt_format == "torch_dist" || ch.ckpt_format == "zarr" || ch.ckpt_format == "torch_dcp") {
    return unimplemented("--ckpt-format ", ch.ckpt_format,
                         " (Megatron's distributed checkpoint) is not written yet: "
                         "use --ckpt-format torch (Megatron-LM's legacy files plus this engine's "
                         "resumable state) or "
                         "safetensors");
  }
  if (ch.ckpt_format != "torch" && ch.ckpt_format != "safetensors") {
    return invalid_argument("--ckpt-format ", ch.ckpt_format, ": expected torch or safetensors");
  }
  t.ckpt_format_torch = ch.ckpt_format == "torch";
  t.device = ch.device == "cuda" ? DeviceKind::kCuda : ch.device == "cpu-fenced" ? DeviceKind::kCpuFenced : DeviceKind::kCpu;
  if (t.allow_tf32 && t.device != DeviceKind::kCuda) {
    return invalid_argument("--allow-tf32 is about the GPU's tensor cores: it needs --device cuda");
  }
  if (!t.swap_dir.empty() && t.device != DeviceKind::kCpu) {
    return invalid_argument("--swap-dir names the directory of the CPU's swap file; with --device ",
                            ch.device, " the swap tier is host memory: leave --swap-dir out");
  }
  if (ch.timing_log_level > 0) {
    return unimplemented("--timing-log-level ", ch.timing_log_level, " (Megatron's per-phase timers in the log) is not "
                         "implemented yet: use 0, and --profile for per-phase times");
  }
  return ok_status();
}

// What the accepted launch-environment flags mean here (logged by rank 0 at start).
std::vector<std::string> launch_notes(const Choices& ch, const Configs& c) {
  std::vector<std::string> notes;
  if (!ch.distributed_backend.empty()) {
    notes.push_back("--distributed-backend " + ch.distributed_backend +
                    ": MPI carries every collective and point-to-point transfer (nccl and gloo alike)");
  }
  if (ch.disable_gloo_group || ch.disable_gloo_process_groups) {
    notes.push_back(
        std::string(ch.disable_gloo_group ? "--disable-gloo-group"
                                          : "--disable-gloo-process-groups") +
        ": no Gloo group is created here in any case; checkpoints are saved without a side channel "
        "(every rank writes its own shards over no group at all, so there is no gather to slice)");
  }
  if (!ch.ai_framework.empty()) {
    notes.push_back("--ai-framework " + ch.ai_framework + ": this native engine serves the launch scripts of "
                    "pytorch and mindspore alike");
  }
  const TrainingConfig& t = c.training;
  if (t.loss_scale > 0.0 && !t.fp16 && !t.bf16) {
    notes.push_back("--loss-scale: no loss scaler in an fp32 run (Megatron's FP32Optimizer has none either)");
  }
  if (c.data.vocab_extra_ids > 0 && c.data.tokenizer_type != "SentencePieceTokenizer" &&
      c.data.tokenizer_type != "PretrainedFromHF") {
    notes.push_back("--vocab-extra-ids: " + c.data.tokenizer_type + " adds no extra ids (as in Megatron, only "
                    "SentencePieceTokenizer and MindSpeed-LLM's PretrainedFromHF do)");
  }
  if (t.attention_softmax_in_fp32 || t.apply_query_key_layer_scaling) {
    notes.push_back("--attention-softmax-in-fp32 / --apply-query-key-layer-scaling: attention scores and their "
                    "softmax are computed in fp32 and never stored in 16 bits");
  }
  if (!c.data.handler_name.empty()) {
    notes.push_back("--handler-name " + c.data.handler_name +
                    ": the datasets are read as the indexed datasets "
                    "tools/preprocess_data --handler-name " +
                    c.data.handler_name +
                    " wrote (MindSpeed-LLM would "
                    "preprocess a raw --data-path first)");
  }
  if (c.training.enable_hf2mg_convert) {
    notes.push_back(
        "--enable-hf2mg-convert: the Hugging Face weights of --load " + c.training.load +
        " are read directly into this layout's shards (no Megatron copy is written first)");
  }
  const ParallelConfig& p = c.parallel;
  if (p.use_ascend_coc) {
    const int chunks = p.coc_chunks();
    if (chunks > 1) {
      notes.push_back(
          "--use-ascend-coc: the tensor-parallel linear layers split their tokens into " +
          std::to_string(chunks) + " chunks; each chunk's " +
          (p.sequence_parallel ? "all-gather / reduce-scatter" : "all-reduce") +
          " overlaps another chunk's GEMM (MindSpeed's script mode)");
    } else if (p.tensor_model_parallel_size == 1) {
      notes.push_back(
          "--use-ascend-coc: nothing to overlap with one tensor-parallel rank (off, as in "
          "MindSpeed)");
    } else {
      notes.push_back("--use-ascend-coc with --coc-mode " + std::to_string(p.coc_mode) +
                      " and --coc-parallel-num " + std::to_string(p.coc_parallel_num) +
                      ": the original linear layers (as in MindSpeed)");
    }
  } else if (p.use_ascend_mc2) {
    notes.push_back(
        "--use-ascend-mc2: the sequence-parallel linear layers run as fused all-gather + GEMM and "
        "GEMM + "
        "reduce-scatter calls, each a schedule of up to " +
        std::to_string(kMc2Chunks) +
        " pipelined chunks on this backend (tensor_parallel/comm_gemm.h)");
  } else if (p.coc_parallel_num != 1 || p.coc_mode != -1) {
    notes.push_back(
        "--coc-parallel-num / --coc-mode: no effect without --use-ascend-coc (as in MindSpeed)");
  }
  const bool any_2d_overlap = p.tp_2d_overlap_ag_with_matmul || p.tp_2d_overlap_matmul_with_rs ||
                              p.tp_2d_backward_overlap_ag_with_matmul;
  if (p.tp_2d) {
    notes.push_back(
        "--tp-2d: the " + std::to_string(p.tensor_model_parallel_size) +
        " tensor-parallel ranks as a " + std::to_string(p.tp_x) + " x " + std::to_string(p.tp_y) +
        " grid; activations [s/(x*cp), b, h/y], attention by Ulysses over the y x cp ranks");
  } else if (p.tp_x != 1 || p.tp_y != 1 || any_2d_overlap) {
    notes.push_back(
        "--tp-x / --tp-y / --enable-*overlap*-with-* : no effect without --tp-2d (as in "
        "MindSpeed)");
  }
  if (p.hccl_ep_group_buffer_adaptive_factor != -1.0 && !p.hccl_group_buffer_adaptive) {
    notes.push_back(
        "--hccl-ep-group-buffer-adaptive-factor: no effect without --hccl-group-buffer-adaptive "
        "(as in "
        "MindSpeed)");
  }
  if (c.training.num_workers != 2) {
    notes.push_back("--num-workers " + std::to_string(c.training.num_workers) +
                    ": samples are read in the training process (memory-mapped); no worker processes");
  }
  return notes;
}

Status apply_choices(Configs& c, const Choices& ch) {
  c.auto_settings.type = ch.auto_settings_type == "black"   ? AutoSettingsType::kBlack
                         : ch.auto_settings_type == "mixed" ? AutoSettingsType::kMixed
                                                            : AutoSettingsType::kWhite;
  if (ch.persistent_save_interval > 0) c.training.save_interval = ch.persistent_save_interval;
  MS_RETURN_IF_ERROR(apply_attention_mask_flags(c.model, ch));
  MS_RETURN_IF_ERROR(parse_noop_layers(ch.noop_layers, c.model.num_layers, &c.model.noop_layers));
  MS_RETURN_IF_ERROR(apply_moe_choices(c, ch));
  MS_RETURN_IF_ERROR(apply_recompute_choices(c.model, ch));
  const std::string& fsdp = ch.data_parallel_sharding_strategy;
  c.parallel.fsdp_sharding = fsdp == "optim"                ? FsdpShardingStrategy::kOptim
                             : fsdp == "optim_grads"        ? FsdpShardingStrategy::kOptimGrads
                             : fsdp == "optim_grads_params" ? FsdpShardingStrategy::kOptimGradsParams
                                                            : FsdpShardingStrategy::kNoShard;
  c.parallel.dualpipev = ch.schedules_method == "dualpipev";
  ContextParallelConfig& cp = c.parallel.cp;
  cp.algo = ch.context_parallel_algo == "ulysses_cp_algo"  ? CpAlgo::kUlysses
            : ch.context_parallel_algo == "hybrid_cp_algo" ? CpAlgo::kHybrid
                                                           : CpAlgo::kRing;
  cp.general_mask = ch.attention_mask_type == "general";
  if (ch.use_rope_scaling || ch.rope_scaling_type == "llama3") c.model.rope_scaling = RopeScaling::kLlama3;
  c.model.normalization = ch.normalization == "RMSNorm" ? Normalization::kRMSNorm : Normalization::kLayerNorm;
  if (ch.position_embedding_type == "rope" || ch.use_rotary_position_embeddings) {
    c.model.position_embedding_type = PositionEmbeddingType::kRope;
  } else if (ch.position_embedding_type == "none") {
    c.model.position_embedding_type = PositionEmbeddingType::kNone;
  } else if (ch.position_embedding_type == "alibi") {
    c.model.position_embedding_type = PositionEmbeddingType::kAlibi;
  } else {
    c.model.position_embedding_type = PositionEmbeddingType::kLearnedAbsolute;
  }
  c.optimizer.optimizer_selection = ch.optimizer_selection == "fused_ema_adamw"     ? OptimizerSelection::kFusedEmaAdamw
                                    : ch.optimizer_selection == "fused_torch_adamw" ? OptimizerSelection::kFusedTorchAdamw
                                                                                    : OptimizerSelection::kFusedAdamw;
  if (ch.lr_decay_style == "constant") c.optimizer.lr_decay_style = LrDecayStyle::kConstant;
  if (ch.lr_decay_style == "linear") c.optimizer.lr_decay_style = LrDecayStyle::kLinear;
  if (ch.lr_decay_style == "cosine") c.optimizer.lr_decay_style = LrDecayStyle::kCosine;
  if (ch.lr_decay_style == "inverse-square-root") c.optimizer.lr_decay_style = LrDecayStyle::kInverseSquareRoot;
  if (ch.lr_decay_style == "WSD") c.optimizer.lr_decay_style = LrDecayStyle::kWSD;
  if (ch.lr_wsd_decay_style == "exponential") c.optimizer.lr_wsd_decay_style = LrWsdDecayStyle::kExponential;
  if (ch.lr_wsd_decay_style == "linear") c.optimizer.lr_wsd_decay_style = LrWsdDecayStyle::kLinear;
  if (ch.lr_wsd_decay_style == "cosine") c.optimizer.lr_wsd_decay_style = LrWsdDecayStyle::kCosine;
  if (ch.lr_wsd_decay_style == "minus_sqrt") c.optimizer.lr_wsd_decay_style = LrWsdDecayStyle::kMinusSqrt;
  c.training.deterministic_mode = c.training.deterministic_mode || ch.npu_deterministic;
  // MindSpeed: --alibi-fusion-attn-type forces --use-fusion-attn-v2, which implies
  // --use-flash-attn (v2 without a bias is v1).
  c.training.use_flash_attn |= ch.use_fusion_attn_v2 || c.model.alibi_fusion_attn_type >= 0;
  MS_RETURN_IF_ERROR(apply_launch_compatibility_choices(c, ch));
  profiler::Options& prof = c.training.profile;
  prof.level = ch.profile_level == "level2"   ? profiler::Level::kLevel2
               : ch.profile_level == "level1" ? profiler::Level::kLevel1
                                              : profiler::Level::kLevel0;
  if (!ch.rampup_batch_size.empty()) {
    std::vector<int64_t> v;
    for (const std::string& text : ch.rampup_batch_size) {
      char* end = nullptr;
      const long long value = std::strtoll(text.c_str(), &end, 10);
      if (text.empty() || end == nullptr || *end != '\0' || value <= 0) {
        return invalid_argument("--rampup-batch-size: '", text, "' is not a positive integer");
      }
      v.push_back(value);
    }
    if (v.size() != 3) {
      return invalid_argument("--rampup-batch-size takes three numbers: <start batch size> <batch size increment> "
                              "<ramp-up samples> (got ", v.size(), ")");
    }
    c.training.rampup_batch_size = RampupBatchSize{v[0], v[1], v[2]};
  }
  prof.ranks.clear();
  for (const std::string& text : ch.profile_ranks) {
    char* end = nullptr;
    const long value = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || end == nullptr || *end != '\0' || value < -1 || value > (1 << 30)) {
      return invalid_argument("--profile-ranks: '", text, "' is not a global rank (an integer >= 0, or -1 for all)");
    }
    prof.ranks.push_back(static_cast<int>(value));
  }
  MS_RETURN_IF_ERROR(profiler::validate(prof));
  return ok_status();
}

// Turns the tokens CLI11 did not recognise into the right error.
Status refuse_leftovers(const std::vector<std::string>& leftovers, const std::vector<std::string>& ours) {
  for (const std::string& token : leftovers) {
    if (!token.starts_with("-")) {
      return invalid_argument("unexpected argument '", token, "' (every option is --name value)");
    }
    const std::string name = token.substr(0, token.find('='));
    if (find_known_flag(name) != nullptr) return unimplemented(flag_refusal_message(name));
    std::string best;
    size_t best_distance = 4;
    for (const std::string& candidate : ours) {
      const size_t dist = edit_distance(name, candidate);
      if (dist < best_distance) {
        best_distance = dist;
        best = candidate;
      }
    }
    return invalid_argument("unknown flag ", name, best.empty() ? "" : " (did you mean " + best + "?)",
                            "; see --help");
  }
  return ok_status();
}

}  // namespace

std::string FlagDomain::describe() const {
  std::string text = integer ? "an integer" : "a finite number";
  // Integer bounds at the type's limits are no bound at all (and do not fit a long long
  // once converted to double).
  constexpr double kUnbounded = 4.6e18;
  const bool has_min = std::isfinite(min) && min > -kUnbounded, has_max = std::isfinite(max) && max < kUnbounded;
  auto number = [&](double v) { return integer ? std::to_string(static_cast<long long>(v)) : str_cat(v); };
  if (has_min && has_max) {
    text += str_cat(" in ", min_open ? "(" : "[", number(min), ", ", number(max), max_open ? ")" : "]");
  } else if (has_min) {
    text += str_cat(min_open ? " > " : " >= ", number(min));
  } else if (has_max) {
    text += str_cat(max_open ? " < " : " <= ", number(max));
  }
  if (!units.empty()) text += " (" + units + ")";
  return text;
}

std::string FlagDomain::check(double value) const {
  const bool below = min_open ? !(value > min) : !(value >= min);
  const bool over = max_open ? !(value < max) : !(value <= max);
  if (!std::isfinite(value) || below || over || (integer && value != std::floor(value))) {
    return str_cat("is not allowed: expected ", describe());
  }
  return "";
}

namespace {
// Registers every flag on a throw-away parser and returns what `read` takes from the registry
// (nothing when registration fails: parse_arguments reports that as an internal error).
template <typename T>
T from_registered_flags(T (*read)(const FlagRegistry&)) {
  CLI::App app;
  FlagRegistry registry(app);
  Configs configs;
  Choices choices;
  try {
    register_flags(registry, configs, choices);
  } catch (const CLI::Error&) {
    return {};
  }
  return read(registry);
}
}  // namespace

std::vector<FlagDomain> numeric_flag_domains() {
  return from_registered_flags<std::vector<FlagDomain>>([](const FlagRegistry& r) { return r.domains(); });
}

std::vector<std::string> registered_flag_names() {
  return from_registered_flags<std::vector<std::string>>([](const FlagRegistry& r) { return r.names(); });
}

StatusOr<ParsedArguments> parse_arguments(const std::vector<std::string>& args) {
  ParsedArguments parsed;
  Choices choices;
  CLI::App app{"pretrain_gpt: GPT/LLaMA pretraining with Megatron-LM and MindSpeed flags", "pretrain_gpt"};
  app.allow_extras();
  app.footer(kExitCodeHelp);
  FlagRegistry registry(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 parses a reversed vector
  // CLI11 reports everything by throwing; nothing of it leaves this function.
  try {
    register_flags(registry, parsed.configs, choices);
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    parsed.help_requested = true;
    // The implemented flags (CLI11's list), then every other Megatron / MindSpeed flag with
    // what it means here or why it is refused (the catalogue; docs/flags.md holds the table).
    parsed.help_text = app.help() + "\n" + flag_catalogue_help();
    return parsed;
  } catch (const CLI::ParseError& e) {
    return invalid_argument(e.what());
  } catch (const CLI::Error& e) {  // ConstructionError: a flag registered twice or misdeclared
    return internal_error("registering the command-line flags failed: ", e.what());
  }
  MS_RETURN_IF_ERROR(refuse_leftovers(app.remaining(), registry.names()));
  MS_RETURN_IF_ERROR(apply_choices(parsed.configs, choices));
  parsed.notes = launch_notes(choices, parsed.configs);
  return parsed;
}

StatusOr<ParsedArguments> parse_arguments(int argc, const char* const* argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return parse_arguments(args);
}

}  // namespace mindspeed
