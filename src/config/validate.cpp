// validate_configs (validate.h).
#include "config/validate.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <utility>

#include "config/group_buffers.h"
#include "config/num_microbatches_calculator.h"
#include "config/pipeline_layout.h"
#include "config/validate_moe.h"
#include "config/validate_recompute.h"
#include "core/logging.h"
#include "core/str_cat.h"

namespace mindspeed {
namespace {

// Overflow-safe size arithmetic for the memory estimate: a product or sum that leaves int64
// saturates at kHuge, reported as "more than 9.2e18".
constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();
int64_t mul(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? kHuge : out;
}
int64_t add(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_add_overflow(a, b, &out) ? kHuge : out;
}
std::string gib(int64_t bytes) {
  if (bytes == kHuge) return "more than 8 EiB (the size overflows 64 bits)";
  return str_cat(static_cast<double>(bytes) / static_cast<double>(int64_t{1} << 30), " GiB");
}

// Is `text` a blend weight (a number) rather than a dataset prefix?
bool is_number(const std::string& text) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  std::strtod(text.c_str(), &end);
  return end != nullptr && *end == '\0';
}

// Every dataset prefix a data flag names must have its .idx and .bin (checked before
// anything is built, so a typo exits with code 2 and the path instead of failing later).
Status check_data_paths(const char* flag, const std::vector<std::string>& entries) {
  for (const std::string& entry : entries) {
    if (entry.starts_with("--")) {
      return invalid_argument(flag, " got '", entry, "' as a dataset path: give at least one dataset prefix after ",
                              flag, " (a flag cannot be a path)");
    }
    if (is_number(entry)) continue;  // a blend weight
    for (const char* suffix : {".idx", ".bin"}) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(entry + suffix, ec)) {
        const bool raw = std::filesystem::exists(entry, ec);  // a JSONL file or a folder of them
        return invalid_argument(
            flag, ": dataset file '", entry, suffix, "' does not exist; give the prefix that ",
            "tools/preprocess_data wrote (without .idx/.bin)",
            raw ? str_cat(" ('", entry,
                          "' itself is raw data: MindSpeed-LLM tokenises it at "
                          "start-up; here run tools/preprocess_data on it first, e.g. with "
                          "--handler-name GeneralPretrainHandler)")
                : std::string());
      }
    }
  }
  return ok_status();
}

// A lower bound of what one rank needs: parameters, gradients and Adam state, plus four
// fp32 [s*b, h] activations per layer. Refused when it exceeds this machine's memory, with the
// real byte counts; it also catches sizes whose products overflow (--num-layers 1e9).
Status check_memory(const Configs& c, int world_size) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.parallel;
  const int64_t h = m.hidden_size, tp = p.tensor_model_parallel_size, pp = p.pipeline_model_parallel_size;
  const int64_t vocab = std::max<int64_t>(m.padded_vocab_size, m.vocab_size);
  const int64_t qkv_rows = mul(add(m.num_attention_heads, mul(2, m.query_groups())), m.kv_channels);
  const int64_t per_layer = add(add(mul(h, qkv_rows), mul(mul(m.num_attention_heads, m.kv_channels), h)),
                                mul(mul(h, m.ffn_hidden_size), m.swiglu ? 3 : 2));
  int64_t params = add(mul(per_layer, m.num_layers), mul(mul(vocab, h), m.untie_embeddings_and_output_weights ? 2 : 1));
  if (m.position_embedding_type == PositionEmbeddingType::kLearnedAbsolute) {
    params = add(params, mul(m.max_position_embeddings, h));
  }
  const int64_t params_per_rank = params == kHuge ? kHuge : params / (tp * pp);
  const int64_t dp = std::max<int64_t>(1, world_size / (tp * pp * p.context_parallel_size));
  // Adam moments (8 bytes, 4 with --o2-optimizer, none resident with --swap-optimizer).
  const int64_t moment_bytes = c.optimizer.swap_optimizer ? 0 : c.optimizer.o2_optimizer ? 4 : 8;
  const int64_t state_bytes = p.use_distributed_optimizer ? moment_bytes / dp + 1 : moment_bytes;
  // Parameters + gradients: 4 + 4, or 2 + 4 with --bf16 / --fp16, 2 + 2 with --o2-gradient or
  // --fp16 without --accumulate-allreduce-grads-in-fp32 (the 16-bit
  // model's fp32 master is left out of this lower bound: --swap-optimizer moves it off the
  // machine).
  // --swap-optimizer keeps up to three of its T slices of master + moments (12 bytes) in
  // memory: the one being updated, the next one prefetched, the previous one being written.
  const int64_t swap_resident =
      c.optimizer.swap_optimizer
          ? mul(params_per_rank, 36) / (dp * std::max<int64_t>(1, c.optimizer.swap_optimizer_times))
          : 0;
  const int64_t param_grad_bytes = c.optimizer.o2_gradient || c.training.fp16_gradients() ? 4
                                   : c.training.bf16 || c.training.fp16                  ? 6
                                                                                          : 8;
  const int64_t weight_bytes = add(mul(params_per_rank, param_grad_bytes + state_bytes), swap_resident);
  const int64_t tokens = mul(c.training.micro_batch_size, m.seq_length);
  // Per layer at least 16 bytes per token and hidden unit; full recompute keeps only the
  // layer input (2 bytes in bf16).
  const int64_t per_token_bytes = m.recompute.full() ? 2 : 16;
  const int64_t activation_bytes =
      mul(mul(mul(tokens, h), per_token_bytes), m.num_layers == kHuge ? kHuge : m.num_layers / pp);
  const int64_t needed = add(weight_bytes, activation_bytes);
  const int64_t pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return ok_status();
  const int64_t available = mul(pages, page);
  if (needed > available) {
    return invalid_argument("this model needs at least ", gib(needed), " per rank (", gib(weight_bytes),
                            " for parameters, gradients and optimizer state of ", params_per_rank == kHuge ? "> 9.2e18"
                            : std::to_string(params_per_rank), " parameters; ", gib(activation_bytes),
                            " of activations for --micro-batch-size ", c.training.micro_batch_size, " x --seq-length ",
                            m.seq_length, " x ", m.num_layers, " layers) but this machine has ", gib(available),
                            "; reduce --num-layers, --hidden-size, --micro-batch-size or --seq-length, or use more ",
                            "ranks (--tensor-model-parallel-size)");
  }
  return ok_status();
}

Status require_positive(int64_t value, const char* flag) {
  if (value <= 0) return invalid_argument(flag, " is required and must be positive (got ", value, ")");
  return ok_status();
}

// The parallel sizes divide others (heads, world size), so they are checked first.
Status validate_parallel_sizes(const ParallelConfig& p, int world_size) {
  if (world_size < 1) return invalid_argument("world size is ", world_size, ", expected at least 1");
  for (const auto& [flag, size] : {std::pair<const char*, int>{"--tensor-model-parallel-size",
                                                               p.tensor_model_parallel_size},
                                   {"--pipeline-model-parallel-size", p.pipeline_model_parallel_size},
                                   {"--context-parallel-size", p.context_parallel_size},
                                   {"--expert-model-parallel-size", p.expert_model_parallel_size}}) {
    if (size < 1) return invalid_argument(flag, " must be at least 1 (got ", size, ")");
  }
  return ok_status();
}

// MindSpeed's --unaligned-linear: query groups (with their heads), FFN channels and, with sequence
// parallelism, the sequence positions shared unevenly over tensor parallelism; its exclusions
// refused by name.
Status validate_unaligned_linear(const ModelConfig& m, const ParallelConfig& p) {
  const int tp = p.tensor_model_parallel_size;
  const char* excluded = p.context_parallel_size > 1
                             ? "context parallelism (MindSpeed needs heads % (TP x CP) == 0)"
                         : m.moe.num_experts > 0 ? "MoE models"
                         : p.use_ascend_mc2      ? "--use-ascend-mc2"
                         : p.use_ascend_coc      ? "--use-ascend-coc"
                                                 : nullptr;
  if (excluded != nullptr)
    return invalid_argument("--unaligned-linear does not work with ", excluded, " (MindSpeed)");
  if (m.query_groups() < tp) {
    return invalid_argument(
        "--unaligned-linear needs a query group per tensor-parallel rank: ", m.query_groups(),
        m.group_query_attention ? " --num-query-groups" : " --num-attention-heads", " for ", tp,
        " ranks");
  }
  if (m.ffn_hidden_size < tp) {
    return invalid_argument(
        "--unaligned-linear needs an FFN channel per tensor-parallel rank: --ffn-hidden-size ",
        m.ffn_hidden_size, " for ", tp, " ranks");
  }
  if (p.sequence_parallel && m.seq_length < tp) {
    return invalid_argument(
        "--unaligned-linear with --sequence-parallel needs a position per tensor-parallel rank: "
        "--seq-length ",
        m.seq_length, " for ", tp, " ranks");
  }
  if (p.sequence_parallel && p.variable_seq_lengths && m.seq_length % tp != 0) {
    return invalid_argument("--unaligned-linear splits the sequence of --seq-length (",
                            m.seq_length,
                            ") unevenly over tensor parallelism: not with --variable-seq-lengths");
  }
  return ok_status();
}

Status validate_model(ModelConfig& m, const ParallelConfig& p) {
  const bool alibi = m.position_embedding_type == PositionEmbeddingType::kAlibi;
  if (!alibi && (m.alibi_fusion_attn_type >= 0 || m.alibi_diagonal_opposite || m.square_alibi_mask || m.fill_neg_inf)) {
    return invalid_argument("--alibi-fusion-attn-type, --alibi-diagonal-opposite, --square-alibi-mask and "
                            "--fill-neg-inf need --position-embedding-type alibi");
  }
  if (m.alibi_fusion_attn_type == 1) {
    return invalid_argument("--alibi-fusion-attn-type 1 is not released in MindSpeed; use 0, 2 or 3");
  }
  if (alibi && !m.unaligned_linear && m.num_attention_heads % p.tensor_model_parallel_size != 0) {
    return invalid_argument("ALiBi slopes are split by head: --num-attention-heads (", m.num_attention_heads,
                            ") must be divisible by --tensor-model-parallel-size");
  }
  if (m.rope_scaling != RopeScaling::kNone || m.rotary_seq_len_interpolation_factor != 1.0f) {
    if (m.position_embedding_type != PositionEmbeddingType::kRope) {
      return invalid_argument("rope scaling (--use-rope-scaling / --rotary-seq-len-interpolation-factor) needs "
                              "--position-embedding-type rope");
    }
  }
  if (m.rope_scaling == RopeScaling::kLlama3 && !(m.rope_high_freq_factor > m.rope_low_freq_factor)) {
    return invalid_argument("--high-freq-factor (", m.rope_high_freq_factor, ") must be above --low-freq-factor (",
                            m.rope_low_freq_factor, ")");
  }
  MS_RETURN_IF_ERROR(require_positive(m.num_layers, "--num-layers"));
  MS_RETURN_IF_ERROR(require_positive(m.hidden_size, "--hidden-size"));
  MS_RETURN_IF_ERROR(require_positive(m.num_attention_heads, "--num-attention-heads"));
  MS_RETURN_IF_ERROR(require_positive(m.seq_length, "--seq-length"));
  MS_RETURN_IF_ERROR(require_positive(m.max_position_embeddings, "--max-position-embeddings"));
  if (m.ffn_hidden_size == 0) {
    m.ffn_hidden_size = m.swiglu ? (4 * m.hidden_size * 2 / 3) / 64 * 64 : 4 * m.hidden_size;
  }
  if (m.kv_channels == 0) {
    if (m.hidden_size % m.num_attention_heads != 0) {
      return invalid_argument("--hidden-size (", m.hidden_size, ") must be divisible by --num-attention-heads (",
                              m.num_attention_heads, ") unless --kv-channels is given");
    }
    m.kv_channels = m.hidden_size / m.num_attention_heads;
  }
  if (m.kv_channels % 2 != 0 && m.position_embedding_type == PositionEmbeddingType::kRope) {
    return invalid_argument("rotary embedding needs an even head dimension (--kv-channels ", m.kv_channels, ")");
  }
  if (!m.group_query_attention) m.num_query_groups = m.num_attention_heads;
  if (m.num_query_groups <= 0 || m.num_attention_heads % m.num_query_groups != 0) {
    return invalid_argument("--num-attention-heads (", m.num_attention_heads,
                            ") must be divisible by --num-query-groups (", m.num_query_groups, ")");
  }
  if (m.max_position_embeddings < m.seq_length) {
    return invalid_argument("--max-position-embeddings (", m.max_position_embeddings,
                            ") must be at least --seq-length (", m.seq_length, ")");
  }
  if (m.attention_dropout < 0.0f || m.attention_dropout >= 1.0f || m.hidden_dropout < 0.0f ||
      m.hidden_dropout >= 1.0f) {
    return invalid_argument("--attention-dropout and --hidden-dropout must be in [0, 1)");
  }
  if (m.make_vocab_size_divisible_by <= 0) {
    return invalid_argument("--make-vocab-size-divisible-by must be positive");
  }
  const int tp = p.tensor_model_parallel_size;
  if (m.unaligned_linear) return validate_unaligned_linear(m, p);
  if (p.tp_2d) return ok_status();  // heads and FFN split over --tp-x: validate_tp_2d
  if (m.num_attention_heads % tp != 0) {
    return invalid_argument("--num-attention-heads (", m.num_attention_heads,
                            ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  }
  if (m.num_query_groups % tp != 0) {
    return invalid_argument("--num-query-groups (", m.num_query_groups,
                            ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  }
  if (m.ffn_hidden_size % tp != 0) {
    return invalid_argument("--ffn-hidden-size (", m.ffn_hidden_size,
                            ") must be divisible by --tensor-model-parallel-size (", tp, ")");
  }
  return ok_status();
}

// MindSpeed's context-parallel rules (§2.1-2.4, §8.5). The Ulysses degree is the CP size for
// ulysses_cp_algo and 1 for the ring, so attention reads one number.
Status validate_context_parallel(ParallelConfig& p, const ModelConfig& m) {
  ContextParallelConfig& cp = p.cp;
  const int64_t C = p.context_parallel_size, tp = p.tensor_model_parallel_size, s = m.seq_length;
  if (C == 1) {
    cp.ulysses_degree = 1;
    cp.window_size = 1;
    return ok_status();
  }
  if (cp.algo != CpAlgo::kHybrid && cp.ulysses_degree != 1) {
    return invalid_argument("--ulysses-degree-in-cp is for --context-parallel-algo hybrid_cp_algo");
  }
  if (cp.algo == CpAlgo::kUlysses && cp.window_size != 1) {
    return invalid_argument("--cp-window-size (double ring) is for megatron_cp_algo or hybrid_cp_algo, not ulysses_cp_algo");
  }
  if (cp.ulysses_allgather_kv && cp.algo == CpAlgo::kRing) {
    return invalid_argument("--use-ulysses-allgather-kv is for ulysses_cp_algo or hybrid_cp_algo");
  }
  if (cp.algo == CpAlgo::kUlysses) cp.ulysses_degree = static_cast<int>(C);
  if (cp.algo == CpAlgo::kRing) cp.ulysses_degree = 1;
  const int64_t u = cp.ulysses_degree;
  if (cp.algo == CpAlgo::kHybrid && (C % u != 0 || C / u < 2 || u < 2)) {
    return invalid_argument("hybrid_cp_algo needs --context-parallel-size (", C, ") = --ulysses-degree-in-cp (", u,
                            ", at least 2) x a ring degree of at least 2");
  }
  const int64_t ring = C / u;
  if (m.num_attention_heads % (tp * u) != 0) {
    return invalid_argument("--num-attention-heads (", m.num_attention_heads,
                            ") must be divisible by --tensor-model-parallel-size x the Ulysses degree (", tp, " x ", u,
                            ") with --context-parallel-algo ",
                            cp.algo == CpAlgo::kUlysses ? "ulysses_cp_algo" : "hybrid_cp_algo");
  }
  if (ring > 1) {
    const int64_t chunks = cp.general_mask ? C : 2 * C;
    if (s % chunks != 0) {
      return invalid_argument("--seq-length (", s, ") must be divisible by ", cp.general_mask ? "" : "2 x ",
                              "--context-parallel-size (", chunks, ") for ring attention",
                              cp.general_mask ? " with --attention-mask-type general" : " (load-balanced chunks)");
    }
    const int64_t w = cp.window_size;
    if (w > 1 && (w >= ring || ring % w != 0)) {
      return invalid_argument("--cp-window-size (", w, ") must divide and be smaller than the ring degree (", ring,
                              ")");
    }
  } else if (cp.ulysses_allgather_kv && s % C != 0) {
    return invalid_argument("--use-ulysses-allgather-kv needs --seq-length (", s, ") divisible by --context-parallel-size (",
                            C, "); without it Ulysses splits unaligned sequences unevenly");
  }
  if (p.sequence_parallel && tp > 1 && s % (C * tp) != 0) {
    return invalid_argument("--sequence-parallel with context parallelism needs --seq-length (", s,
                            ") divisible by --context-parallel-size x --tensor-model-parallel-size (", C * tp, ")");
  }
  return ok_status();
}

// Megatron's custom FSDP rules (arguments.py) and MindSpeed's (FSDP only in isolation).
Status validate_fsdp(ParallelConfig& p) {
  if (!p.use_custom_fsdp) {
    if (p.fsdp_sharding != FsdpShardingStrategy::kNoShard) {
      return invalid_argument("--data-parallel-sharding-strategy needs --use-custom-fsdp");
    }
    return ok_status();
  }
  if (!p.use_distributed_optimizer) {
    return invalid_argument("--use-custom-fsdp only supported with distributed optimizer: add "
                            "--use-distributed-optimizer (Megatron's rule)");
  }
  if (p.shard_gradients() && p.gradient_accumulation_fusion) {
    return invalid_argument("--data-parallel-sharding-strategy optim_grads and optim_grads_params are not "
                            "supported with gradient accumulation fusion: add --no-gradient-accumulation-fusion "
                            "(Megatron's rule)");
  }
  if (p.pipeline_model_parallel_size > 1 || p.dualpipev) {
    return invalid_argument("--use-custom-fsdp does not work with pipeline parallelism (MindSpeed supports FSDP "
                            "only on its own: --pipeline-model-parallel-size 1)");
  }
  // What each strategy means for the data-parallel machinery (Megatron's arguments.py).
  if (p.fsdp_sharding == FsdpShardingStrategy::kNoShard) p.use_distributed_optimizer = false;  // nothing sharded
  if (p.shard_gradients()) p.overlap_grad_reduce = true;
  if (p.shard_parameters()) p.overlap_param_gather = true;
  return ok_status();
}

// MindSpeed's CoC (--use-ascend-coc, script mode): its choices, and its constraints on the models
// and shapes it splits (the GEMM's M, the tokens of a linear layer on a rank, divisible into the
// chunks; not with MoE). The plain layers run with modes 0 and 1 and with one tensor-parallel rank.
Status validate_communication(const ParallelConfig& p, const ModelConfig& m,
                              const TrainingConfig& t) {
  if (p.coc_parallel_num != 1 && p.coc_parallel_num != 2 && p.coc_parallel_num != 4 &&
      p.coc_parallel_num != 8) {
    return invalid_argument("--coc-parallel-num must be 1, 2, 4 or 8 (MindSpeed's choices), not ",
                            p.coc_parallel_num);
  }
  if (p.coc_mode < -1 || p.coc_mode > 2) {
    return invalid_argument(
        "--coc-mode must be -1 (auto), 0 (original), 1 (rewrite) or 2 (CoC), not ", p.coc_mode);
  }
  if (!p.hccl_group_buffer.empty())
    MS_RETURN_IF_ERROR(parse_group_buffers(p.hccl_group_buffer).status());
  if (p.use_ascend_mc2) {
    if (p.tensor_model_parallel_size == 1 || !p.sequence_parallel) {
      return invalid_argument(
          "--use-ascend-mc2 needs --tensor-model-parallel-size > 1 and --sequence-parallel "
          "(MindSpeed's MC2 fuses the sequence-parallel all-gather and reduce-scatter)");
    }
    if (p.use_ascend_coc) {
      return invalid_argument(
          "--use-ascend-mc2 and --use-ascend-coc exclude each other (MindSpeed): choose one");
    }
    if (m.moe.num_experts > 0) {
      return invalid_argument("--use-ascend-mc2 does not apply to MoE models (--num-experts ",
                              m.moe.num_experts,
                              "; MindSpeed refuses MC2 with MoE): drop --use-ascend-mc2");
    }
  }
  const int chunks = p.coc_chunks();
  if (chunks == 1) return ok_status();
  if (m.moe.num_experts > 0) {
    return invalid_argument(
        "--use-ascend-coc does not apply to MoE models (--num-experts ", m.moe.num_experts,
        "): MindSpeed refuses CoC with MoE; drop --use-ascend-coc or use --coc-parallel-num 1");
  }
  if (p.variable_seq_lengths) {
    return invalid_argument("--use-ascend-coc with --coc-parallel-num ", chunks,
                            " needs every micro-batch's tokens ",
                            "to divide into the chunks: not with --variable-seq-lengths");
  }
  const int64_t cp = p.context_parallel_size, tp = p.tensor_model_parallel_size;
  // Unaligned Ulysses gives context-parallel ranks floor or ceil of s / CP positions.
  for (const int64_t positions : {m.seq_length / cp, (m.seq_length + cp - 1) / cp}) {
    const int64_t tokens = positions * t.micro_batch_size;
    const int64_t rows = p.sequence_parallel ? tokens / tp : tokens;
    if ((p.sequence_parallel && tokens % tp != 0) || rows % chunks != 0) {
      return invalid_argument(
          "--use-ascend-coc splits the tokens of each tensor-parallel linear layer (M = "
          "--seq-length ",
          m.seq_length, cp > 1 ? str_cat(" / --context-parallel-size ", cp) : std::string(),
          " x --micro-batch-size ", t.micro_batch_size,
          p.sequence_parallel ? str_cat(" / --tensor-model-parallel-size ", tp) : std::string(),
          " = ", tokens / (p.sequence_parallel ? tp : 1),
          p.sequence_parallel && tokens % tp != 0 ? " (not whole)" : "",
          ") into --coc-parallel-num ", chunks,
          " chunks: M must be divisible by it (MindSpeed's M % p == 0); choose "
          "another --coc-parallel-num or --micro-batch-size");
    }
  }
  return ok_status();
}

// MindSpeed's 2D tensor parallelism (--tp-2d, tensor_parallel/linear_2d.h): the grid, the shapes
// it cuts, and MindSpeed's exclusions refused by name.
Status validate_tp_2d(const ParallelConfig& p, const ModelConfig& m, const TrainingConfig& t) {
  if (!p.tp_2d) return ok_status();
  const int X = p.tp_x, Y = p.tp_y, cp = p.context_parallel_size;
  if (X < 1 || Y < 1 || X * Y != p.tensor_model_parallel_size) {
    return invalid_argument("--tp-2d needs --tp-x (", X, ") x --tp-y (", Y,
                            ") = --tensor-model-parallel-size (", p.tensor_model_parallel_size,
                            ")");
  }
  const char* excluded = p.sequence_parallel     ? "--sequence-parallel"
                         : p.use_ascend_coc      ? "--use-ascend-coc"
                         : p.use_ascend_mc2      ? "--use-ascend-mc2"
                         : m.moe.num_experts > 0 ? "MoE models (--num-experts)"
                         : m.unaligned_linear    ? "--unaligned-linear"
                         : p.dualpipev           ? "--schedules-method dualpipev"
                         : t.use_fused_rmsnorm   ? "--use-fused-rmsnorm"
                         : m.recompute.distribute_saved_activations
                             ? "--distribute-saved-activations"
                         : p.variable_seq_lengths ? "--variable-seq-lengths"
                         : t.ckpt_format_torch    ? "--ckpt-format torch"
                         : cp > 1 && p.cp.algo != CpAlgo::kUlysses
                             ? "--context-parallel-algo other than ulysses_cp_algo"
                             : nullptr;
  if (excluded != nullptr) {
    return invalid_argument(
        "--tp-2d does not work with ", excluded,
        " (MindSpeed's 2D tensor parallelism excludes it, or this engine has it only for 1-D "
        "tensor parallelism)");
  }
  if (m.hidden_size % Y != 0 || m.ffn_hidden_size % X != 0) {
    return invalid_argument("--tp-2d: --hidden-size (", m.hidden_size, ") must divide by --tp-y (",
                            Y, ") and --ffn-hidden-size (", m.ffn_hidden_size, ") by --tp-x (", X,
                            ")");
  }
  if (m.query_groups() % X != 0) {
    return invalid_argument("--tp-2d: the attention's ",
                            m.group_query_attention ? "--num-query-groups (" : "heads (",
                            m.query_groups(), ") must divide by --tp-x (", X, ")");
  }
  if ((m.num_attention_heads / X) % (Y * cp) != 0) {
    return invalid_argument("--tp-2d: each X rank's ", m.num_attention_heads / X,
                            " heads must divide over the --tp-y x --context-parallel-size = ",
                            Y * cp, " ranks of its attention (Ulysses over the Y x CP union)");
  }
  const int64_t positions = m.seq_length / cp;
  if (m.seq_length % cp != 0 || positions % X != 0 || positions % Y != 0) {
    return invalid_argument("--tp-2d: --seq-length (", m.seq_length,
                            ") / --context-parallel-size (", cp, ") must divide by --tp-x (", X,
                            ") and --tp-y (", Y, ")");
  }
  return ok_status();
}

Status validate_parallel(ParallelConfig& p, const ModelConfig& m, int world_size) {
  // Sizes >= 1: validate_parallel_sizes, run first.
  // The layer split and schedule rules: PipelineLayout::build in validate_configs, once the
  // batch sizes (and so the micro-batch count) are known.
  if (p.dualpipev && !m.untie_embeddings_and_output_weights) {
    return invalid_argument("--schedules-method dualpipev needs --untie-embeddings-and-output-weights (rank 0 holds "
                            "both the embedding and the output layer; MindSpeed refuses tied embeddings)");
  }
  MS_RETURN_IF_ERROR(validate_context_parallel(p, m));
  MS_RETURN_IF_ERROR(validate_fsdp(p));
  const int64_t model_size = static_cast<int64_t>(p.tensor_model_parallel_size) *
                             p.pipeline_model_parallel_size * p.context_parallel_size;
  if (world_size % model_size != 0) {
    return invalid_argument("world size (", world_size, ") is not divisible by --tensor-model-parallel-size (",
                            p.tensor_model_parallel_size, ") x --pipeline-model-parallel-size (",
                            p.pipeline_model_parallel_size, ") x --context-parallel-size (",
                            p.context_parallel_size, ") = ", model_size);
  }
  if (p.tensor_model_parallel_size == 1) p.sequence_parallel = false;  // as Megatron
  if (p.sequence_parallel && !m.unaligned_linear &&
      m.seq_length % p.tensor_model_parallel_size != 0) {
    return invalid_argument("--sequence-parallel needs --seq-length (", m.seq_length,
                            ") divisible by --tensor-model-parallel-size (", p.tensor_model_parallel_size, ")");
  }
  if (p.overlap_param_gather && !p.use_distributed_optimizer) {
    return invalid_argument("--overlap-param-gather requires --use-distributed-optimizer");
  }
  if (p.overlap_param_gather && !p.overlap_grad_reduce) {
    return invalid_argument("--overlap-param-gather requires --overlap-grad-reduce");
  }
  if (p.ddp_bucket_size < 0) return invalid_argument("--ddp-bucket-size must not be negative");
  return ok_status();
}

Status validate_optimizer(const OptimizerConfig& o, const TrainingConfig& t) {
  if (o.lr <= 0.0f) return invalid_argument("--lr is required and must be positive (got ", o.lr, ")");
  if (o.min_lr < 0.0f || o.min_lr > o.lr) {
    return invalid_argument("--min-lr (", o.min_lr, ") must be in [0, --lr (", o.lr, ")]");
  }
  // The schedule's unit: iterations, or samples with --train-samples (validate_schedule_unit).
  const bool samples = t.train_samples > 0;
  const char* unit = samples ? "samples" : "iterations";
  const int64_t warmup_given = samples ? o.lr_warmup_samples : o.lr_warmup_iters;
  const char* warmup_flag = samples ? "--lr-warmup-samples" : "--lr-warmup-iters";
  if (o.lr_warmup_fraction >= 0.0f && warmup_given > 0) {
    return invalid_argument("give --lr-warmup-fraction or ", warmup_flag, ", not both");
  }
  if (o.lr_warmup_fraction > 1.0f) return invalid_argument("--lr-warmup-fraction must be at most 1");
  const int64_t decay = samples ? (o.lr_decay_samples > 0 ? o.lr_decay_samples : t.train_samples)
                                : (o.lr_decay_iters > 0 ? o.lr_decay_iters : t.train_iters);
  const double warmup = o.lr_warmup_fraction >= 0.0f ? o.lr_warmup_fraction * static_cast<double>(decay)
                                                     : static_cast<double>(warmup_given);
  if (warmup >= static_cast<double>(decay)) {
    const std::string given = o.lr_warmup_fraction >= 0.0f ? str_cat("--lr-warmup-fraction ", o.lr_warmup_fraction)
                                                           : str_cat(warmup_flag, " ", warmup_given);
    return invalid_argument("the warmup (", given, ": ", warmup, " ", unit, ") must be shorter than ",
                            samples ? "--lr-decay-samples (" : "--lr-decay-iters (", decay,
                            samples ? "; default --train-samples)" : "; default --train-iters)");
  }
  if (o.adam_beta1 < 0.0f || o.adam_beta1 >= 1.0f || o.adam_beta2 < 0.0f || o.adam_beta2 >= 1.0f) {
    return invalid_argument("--adam-beta1 and --adam-beta2 must be in [0, 1)");
  }
  if (o.adam_eps <= 0.0f) return invalid_argument("--adam-eps must be positive");
  if (o.lr_warmup_init > o.lr) {
    return invalid_argument("--lr-warmup-init (", o.lr_warmup_init, ") must not exceed --lr (", o.lr, ")");
  }
  if (o.lr_decay_style == LrDecayStyle::kWSD && !samples && o.lr_wsd_decay_iters < 0) {
    return invalid_argument("--lr-decay-style WSD needs --lr-wsd-decay-iters (the iterations of the final anneal)");
  }
  if (o.lr_decay_style == LrDecayStyle::kWSD && samples && o.lr_wsd_decay_samples < 0) {
    return invalid_argument("--lr-decay-style WSD with --train-samples needs --lr-wsd-decay-samples (the samples of "
                            "the final anneal)");
  }
  if (o.clip_grad < 0.0f) return invalid_argument("--clip-grad must not be negative");
  return ok_status();
}

// Megatron's iteration-based or sample-based training (arguments.py validate_args): the flags
// of the other unit refused, and with --train-samples the iteration count derived from it
// (training.py update_train_iters, ramp-up included).
Status validate_schedule_unit(TrainingConfig& t, const OptimizerConfig& o, int64_t dp) {
  if (t.train_iters > 0 && t.train_samples > 0) {
    return invalid_argument("give --train-iters or --train-samples, not both (iteration- or sample-based training)");
  }
  if (t.train_iters > 0) {
    const char* sample_flag = o.lr_decay_samples > 0       ? "--lr-decay-samples"
                              : o.lr_warmup_samples > 0    ? "--lr-warmup-samples"
                              : o.lr_wsd_decay_samples >= 0 ? "--lr-wsd-decay-samples"
                                                           : nullptr;
    if (sample_flag != nullptr) {
      return invalid_argument(sample_flag, " is for sample-based training: with --train-iters use the ",
                              "--lr-*-iters flags, or give --train-samples instead");
    }
    // A ramp-up with --train-iters: Megatron core_v0.12 asserts against it ("expected no
    // batch-size rampup for iteration-based training"), although its own GPT-3 175B example
    // script combines them. Here it runs: --train-iters iterations whose batch ramps by the
    // consumed samples, the learning rate counted in samples as Megatron's scheduler counts it.
    if (t.rampup_batch_size) {
      if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * dp;
      MS_RETURN_IF_ERROR(NumMicroBatchesCalculator::create(t.global_batch_size, t.micro_batch_size, dp,
                                                           t.decrease_batch_size_if_needed, t.rampup_batch_size)
                             .status());
    }
    if (t.decrease_batch_size_if_needed) {  // the rounded-down batch must hold a micro-batch
      if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * dp;
      MS_RETURN_IF_ERROR(NumMicroBatchesCalculator::create(t.global_batch_size, t.micro_batch_size, dp, true,
                                                           std::nullopt)
                             .status());
    }
    return ok_status();
  }
  if (t.train_samples <= 0) return invalid_argument("--train-iters or --train-samples is required");
  const char* iteration_flag = o.lr_decay_iters > 0       ? "--lr-decay-iters"
                               : o.lr_warmup_iters > 0    ? "--lr-warmup-iters"
                               : o.lr_wsd_decay_iters >= 0 ? "--lr-wsd-decay-iters"
                                                          : nullptr;
  if (iteration_flag != nullptr) {
    return invalid_argument(iteration_flag, " is for iteration-based training: with --train-samples use ",
                            "--lr-decay-samples, --lr-warmup-samples or --lr-wsd-decay-samples");
  }
  if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * dp;
  MS_ASSIGN_OR_RETURN(NumMicroBatchesCalculator calc,
                      NumMicroBatchesCalculator::create(t.global_batch_size, t.micro_batch_size, dp,
                                                        t.decrease_batch_size_if_needed, t.rampup_batch_size));
  t.train_iters = calc.train_iters_for_samples(t.train_samples);
  if (t.train_iters <= 0) {
    return invalid_argument("--train-samples ", t.train_samples, " is less than one global batch (",
                            t.global_batch_size, "): nothing to train");
  }
  return ok_status();
}

// --fp16 and its loss scaler (Megatron's validate_args and DynamicGradScaler asserts).
Status validate_mixed_precision(const TrainingConfig& t, const ParallelConfig& p) {
  if (t.fp16 && t.bf16) return invalid_argument("--fp16 and --bf16 exclude each other; give one");
  if (!t.fp16) return ok_status();
  if (p.expert_model_parallel_size > 1) {
    return invalid_argument("--fp16 does not work with --expert-model-parallel-size ", p.expert_model_parallel_size,
                            " (Megatron's rule: expert parallelism is not supported with fp16 training); use --bf16");
  }
  if (t.dynamic_loss_scaling()) {
    if (t.min_loss_scale > t.initial_loss_scale) {
      return invalid_argument("--min-loss-scale (", t.min_loss_scale, ") must be at most --initial-loss-scale (",
                              t.initial_loss_scale, ")");
    }
    if (t.loss_scale_window != std::floor(t.loss_scale_window) || t.loss_scale_window > 1e15) {
      return invalid_argument("--loss-scale-window (", t.loss_scale_window, ") must be a whole number of iterations: "
                              "the scale grows when the count of good iterations equals it, which a fraction never does");
    }
  }
  if (t.fp16_gradients()) {
    const char* fix = "; add --accumulate-allreduce-grads-in-fp32 (an fp32 gradient buffer)";
    if (p.use_custom_fsdp) {
      return invalid_argument("--fp16 keeps the gradients in fp16, which --use-custom-fsdp does not support", fix);
    }
    if (p.dualpipev) {
      return invalid_argument("--fp16 keeps the gradients in fp16, which --schedules-method dualpipev does not support "
                              "yet (its deferred weight-gradient passes would keep fp32 gradients across micro-batches)",
                              fix);
    }
  }
  return ok_status();
}

Status validate_training(TrainingConfig& t, const ParallelConfig& p, int world_size) {
  MS_RETURN_IF_ERROR(require_positive(t.train_iters, "--train-iters"));
  MS_RETURN_IF_ERROR(require_positive(t.micro_batch_size, "--micro-batch-size"));
  const int64_t dp = world_size / (static_cast<int64_t>(p.tensor_model_parallel_size) *
                                   p.pipeline_model_parallel_size * p.context_parallel_size);
  if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * dp;
  // A ramp-up's batches are checked when used, a batch to decrease is rounded down
  // (NumMicroBatchesCalculator, built in validate_schedule_unit); otherwise it must divide.
  if (!t.rampup_batch_size && !t.decrease_batch_size_if_needed && t.global_batch_size % (t.micro_batch_size * dp) != 0) {
    return invalid_argument("--global-batch-size (", t.global_batch_size, ") must be divisible by --micro-batch-size (",
                            t.micro_batch_size, ") x data-parallel size (", dp, ")");
  }
  if (t.optimization_level < 0 || t.optimization_level > 2) {
    return invalid_argument("--optimization-level must be 0, 1 or 2 (got ", t.optimization_level, ")");
  }
  if (t.log_interval <= 0) return invalid_argument("--log-interval must be positive");
  if (t.eval_interval <= 0) return invalid_argument("--eval-interval must be positive");
  if (t.eval_iters < 0) return invalid_argument("--eval-iters must not be negative");
  if (t.peak_tflops < 0.0) return invalid_argument("--peak-tflops must not be negative");
  if (!t.load.empty()) {
    // A checkpoint directory, a Hugging Face directory, or (Megatron: a warning, then random
    // weights) a directory without a checkpoint yet -- but not a file.
    std::error_code ec;
    if (std::filesystem::exists(t.load, ec) && !std::filesystem::is_directory(t.load, ec)) {
      return invalid_argument("--load ", t.load, " is a file; give the checkpoint directory (holding "
                              "latest_checkpointed_iteration.txt, or a Hugging Face config.json)");
    }
  }
  if (t.finetune && t.load.empty()) return invalid_argument("--finetune needs --load");
  MS_RETURN_IF_ERROR(validate_mixed_precision(t, p));
  return ok_status();
}

// --ckpt-format torch writes Megatron's rank files, which hold whole tensor-parallel shards of
// stages Megatron places itself; --enable-hf2mg-convert and --model-type-hf (MindSpeed-LLM)
// need a Hugging Face --load.
Status validate_checkpoint_formats(const Configs& c) {
  const TrainingConfig& t = c.training;
  if (t.ckpt_format_torch) {
    const char* why =
        c.model.moe.enabled()  ? "a mixture-of-experts model (expert-parallel rank files are "
                                 "not written yet)"
        : c.parallel.dualpipev ? "DualPipeV (its V placement of stages is not Megatron's "
                                 "chunk c of rank r = stage c x P + r)"
        : !c.model.noop_layers.empty() ? "--noop-layers (Megatron's loader has no identity layers)"
        : c.parallel.shard_parameters()
            ? "--data-parallel-sharding-strategy optim_grads_params (the "
              "parameters are sharded over data-parallel ranks)"
        : c.model.unaligned_linear
            ? "--unaligned-linear (Megatron's files hold even tensor-parallel slices)"
            : nullptr;
    if (why != nullptr) {
      return unimplemented("--ckpt-format torch with ", why,
                           ": save with --ckpt-format safetensors (it loads at any "
                           "layout, and tools/convert_checkpoint writes Megatron's files from it)");
    }
  }
  if (t.enable_hf2mg_convert) {
    std::error_code ec;
    bool safetensors = false;
    if (!t.load.empty()) {
      for (const auto& entry : std::filesystem::directory_iterator(t.load, ec)) {
        safetensors = safetensors || entry.path().extension() == ".safetensors";
      }
    }
    if (t.load.empty() || !safetensors ||
        !std::filesystem::is_regular_file(t.load + "/config.json", ec)) {
      return invalid_argument(
          "--enable-hf2mg-convert needs --load to be a Hugging Face model directory (config.json "
          "and *.safetensors)",
          t.load.empty() ? "; --load is not given" : "; --load " + t.load + " is not one");
    }
  }
  if (!t.model_type_hf.empty()) {
    static const char* const kSupported[] = {"llama2",  "llama",   "qwen25", "qwen2",
                                             "mistral", "mixtral", "gpt2"};
    if (std::find(std::begin(kSupported), std::end(kSupported), t.model_type_hf) ==
        std::end(kSupported)) {
      return unimplemented("--model-type-hf ", t.model_type_hf,
                           ": the Hugging Face importer reads llama2 / llama, "
                           "qwen25 / qwen2, mistral, mixtral and gpt2 models");
    }
  }
  return ok_status();
}

Status validate_data(const DataConfig& d) {
  MS_RETURN_IF_ERROR(check_data_paths("--data-path", d.data_path));
  MS_RETURN_IF_ERROR(check_data_paths("--train-data-path", d.train_data_path));
  MS_RETURN_IF_ERROR(check_data_paths("--valid-data-path", d.valid_data_path));
  MS_RETURN_IF_ERROR(check_data_paths("--test-data-path", d.test_data_path));
  const bool have_paths = !d.data_path.empty() || !d.train_data_path.empty();
  if (d.mock_data && have_paths) {
    return invalid_argument("--mock-data and --data-path/--train-data-path exclude each other");
  }
  if (!d.mock_data && !have_paths) {
    return invalid_argument("give --data-path (or --train-data-path), or --mock-data for synthetic data");
  }
  if (d.tokenizer_type.empty()) {
    return invalid_argument("--tokenizer-type is empty (give e.g. GPT2BPETokenizer with --vocab-file and "
                            "--merge-file, or NullTokenizer with --vocab-size; GPT2BPETokenizer when not given)");
  }
  return ok_status();
}

// --tensorboard-dir and --metrics-file are created by the last rank at the start; a name
// that is already a file (or a directory, for the metrics file) is refused here, before
// anything is built.
Status validate_logging(const LoggingConfig& l) {
  std::error_code ec;
  if (!l.tensorboard_dir.empty() && std::filesystem::exists(l.tensorboard_dir, ec) &&
      !std::filesystem::is_directory(l.tensorboard_dir, ec)) {
    return invalid_argument("--tensorboard-dir ", l.tensorboard_dir, " is a file; give a directory (it is created "
                            "when missing)");
  }
  const std::string metrics = l.metrics_path();
  if (!metrics.empty() && std::filesystem::is_directory(metrics, ec)) {
    return invalid_argument(l.metrics_file.empty() ? "<tensorboard-dir>/metrics.jsonl " : "--metrics-file ", metrics,
                            " is a directory; give a file name (lines are appended)");
  }
  return ok_status();
}

}  // namespace

// MindSpeed's rules for the optimizer memory features (§3.4 reuse-fp32-param, §3.8 O2, §3.9
// swap optimizer, §8.1 fused EMA AdamW).
Status validate_optimizer_memory(const OptimizerConfig& o, const ParallelConfig& p, const TrainingConfig& t) {
  if (o.reuse_fp32_param) {
    if (!t.bf16) return invalid_argument("--reuse-fp32-param needs --bf16 (MindSpeed's rule)");
    if (o.ema()) {
      return invalid_argument("--reuse-fp32-param does not work with --optimizer-selection fused_ema_adamw "
                              "(MindSpeed's rule)");
    }
    if (o.swap_optimizer) {
      return invalid_argument("--reuse-fp32-param does not work with --swap-optimizer (MindSpeed's rule)");
    }
    if (p.use_custom_fsdp) {
      return invalid_argument("--reuse-fp32-param does not work with --use-custom-fsdp (MindSpeed supports custom "
                              "FSDP only on its own)");
    }
  }
  if (o.o2_optimizer && !t.bf16) return invalid_argument("--o2-optimizer needs --bf16 (BF16 training only)");
  if (o.o2_gradient) {
    if (!t.bf16) return invalid_argument("--o2-gradient needs --bf16 (BF16 training only)");
    if (p.gradient_accumulation_fusion) {
      return invalid_argument("--o2-gradient needs --no-gradient-accumulation-fusion (MindSpeed-LLM's rule: the fused "
                              "kernel adds into an fp32 main gradient)");
    }
    if (p.use_custom_fsdp) {
      return invalid_argument("--o2-gradient does not work with --use-custom-fsdp (MindSpeed supports custom FSDP only "
                              "on its own)");
    }
    if (p.dualpipev) {
      return invalid_argument("--o2-gradient does not work with --schedules-method dualpipev yet: its deferred "
                              "weight-gradient passes would keep each layer's fp32 gradient across micro-batches, "
                              "which the bf16 gradient buffer exists to avoid");
    }
  }
  if (o.swap_optimizer) {
    if (!p.use_distributed_optimizer) {
      return invalid_argument("--swap-optimizer needs --use-distributed-optimizer (MindSpeed's rule)");
    }
    if (o.optimizer_selection != OptimizerSelection::kFusedAdamw) {
      return invalid_argument("--swap-optimizer needs --optimizer-selection fused_adamw (MindSpeed's rule)");
    }
    if (o.o2_optimizer) {
      return invalid_argument("--swap-optimizer needs --optimizer-selection fused_adamw, which --o2-optimizer "
                              "replaces by the bf16-moment AdamW; use one of them");
    }
    if (p.use_custom_fsdp) {
      return invalid_argument("--swap-optimizer does not work with --use-custom-fsdp (MindSpeed supports custom "
                              "FSDP only on its own)");
    }
  }
  return ok_status();
}

// MindSpeed's Auto Settings flags: only with --auto-settings, which refuses --save / --load (as
// MindSpeed's auto_settings_feature does) and needs the ranks per node.
Status validate_auto_settings(const AutoSettingsConfig& a, const TrainingConfig& t) {
  const AutoSettingsConfig d;
  if (!a.enabled) {
    const std::pair<bool, const char*> given[] = {
        {a.type != d.type, "--auto-settings-type"},
        {a.work_dir != d.work_dir, "--auto-settings-work-dir"},
        {a.ranks != d.ranks, "--auto-settings-ranks"},
        {a.log_level != d.log_level, "--auto-settings-log-level"},
        {a.target_nnodes != d.target_nnodes, "--target-nnodes"},
        {a.nnodes != d.nnodes, "--nnodes"},
        {a.nproc_per_node != d.nproc_per_node, "--nproc-per-node"},
        {a.node_rank != d.node_rank, "--node-rank"},
        {a.master_addr != d.master_addr, "--master-addr"},
        {a.master_port != d.master_port, "--master-port"},
        {a.prof_file != d.prof_file, "--prof-file"},
        {a.memory_cap_mb != d.memory_cap_mb, "--auto-settings-memory-cap"},
        {a.device_tflops != d.device_tflops, "--auto-settings-device-tflops"},
        {a.intra_node_gbps != d.intra_node_gbps, "--auto-settings-intra-node-bandwidth"},
        {a.inter_node_gbps != d.inter_node_gbps, "--auto-settings-inter-node-bandwidth"},
        {a.top_k != d.top_k, "--auto-settings-top-k"},
        {a.rounds != d.rounds, "--auto-settings-rounds"},
        {a.measure_iters != d.measure_iters, "--auto-settings-iters"},
    };
    for (const auto& [set, flag] : given) {
      if (set) {
        return invalid_argument(
            flag, " is an --auto-settings flag: add --auto-settings to plan the layout, or drop ",
            flag, " to train (torchrun takes the node flags)");
      }
    }
    return ok_status();
  }
  if (!t.save.empty() || !t.load.empty()) {
    return invalid_argument(
        "--auto-settings plans a run and trains nothing: not with ",
        !t.save.empty() ? "--save" : "--load",
        " (MindSpeed refuses them together too); plan first, then add it to the printed command");
  }
  if (a.nproc_per_node <= 0) {
    return invalid_argument(
        "--auto-settings needs --nproc-per-node (ranks per node of the cluster planned for)");
  }
  if (a.node_rank != 0) {
    return invalid_argument("--auto-settings runs on node 0 only (--node-rank ", a.node_rank,
                            "): it launches its profiling runs itself");
  }
  return ok_status();
}

Status validate_configs(Configs& c, int world_size, std::optional<int64_t> tokenizer_vocab_size) {
  MS_RETURN_IF_ERROR(validate_parallel_sizes(c.parallel, world_size));
  MS_RETURN_IF_ERROR(validate_model(c.model, c.parallel));
  MS_RETURN_IF_ERROR(validate_parallel(c.parallel, c.model, world_size));
  MS_RETURN_IF_ERROR(validate_tp_2d(c.parallel, c.model, c.training));
  MS_RETURN_IF_ERROR(validate_moe(c.model, c.parallel));
  MS_RETURN_IF_ERROR(validate_recompute(c.model, c.parallel, c.training));
  {
    const int64_t dp = world_size / (static_cast<int64_t>(c.parallel.tensor_model_parallel_size) *
                                     c.parallel.pipeline_model_parallel_size * c.parallel.context_parallel_size);
    MS_RETURN_IF_ERROR(require_positive(c.training.micro_batch_size, "--micro-batch-size"));
    MS_RETURN_IF_ERROR(validate_schedule_unit(c.training, c.optimizer, std::max<int64_t>(dp, 1)));
  }
  MS_RETURN_IF_ERROR(validate_training(c.training, c.parallel, world_size));
  MS_RETURN_IF_ERROR(validate_communication(c.parallel, c.model, c.training));
  MS_RETURN_IF_ERROR(validate_checkpoint_formats(c));
  {
    // The layer split and schedule, with the schedule's minimum number of micro-batches per
    // data-parallel rank.
    const int64_t dp = world_size / (static_cast<int64_t>(c.parallel.tensor_model_parallel_size) *
                                     c.parallel.pipeline_model_parallel_size * c.parallel.context_parallel_size);
    const int64_t num_micro = c.training.global_batch_size / (c.training.micro_batch_size * dp);
    MS_RETURN_IF_ERROR(PipelineLayout::build(c.parallel, c.model.num_layers, num_micro).status());
  }
  MS_RETURN_IF_ERROR(validate_optimizer(c.optimizer, c.training));
  MS_RETURN_IF_ERROR(validate_optimizer_memory(c.optimizer, c.parallel, c.training));
  MS_RETURN_IF_ERROR(validate_data(c.data));
  MS_RETURN_IF_ERROR(validate_logging(c.logging));
  MS_RETURN_IF_ERROR(validate_auto_settings(c.auto_settings, c.training));
  if (tokenizer_vocab_size.has_value()) {
    c.model.vocab_size = *tokenizer_vocab_size;
    c.model.padded_vocab_size = padded_vocab(*tokenizer_vocab_size, c.model.make_vocab_size_divisible_by,
                                             c.parallel.tensor_model_parallel_size);
    if (const int64_t given = c.model.padded_vocab_size_override; given > 0) {
      // MindSpeed-LLM takes it as is; the embedding must still hold every token id and split
      // evenly over the tensor-parallel ranks (Megatron's VocabUtility divides it).
      if (given < *tokenizer_vocab_size) {
        return invalid_argument("--padded-vocab-size ", given, " is smaller than the tokenizer's vocabulary (",
                                *tokenizer_vocab_size, " tokens): ids from ", given, " up would have no embedding row");
      }
      if (given % c.parallel.tensor_model_parallel_size != 0) {
        return invalid_argument("--padded-vocab-size ", given, " must be divisible by --tensor-model-parallel-size ",
                                c.parallel.tensor_model_parallel_size, " (each rank holds an equal slice of the vocabulary)");
      }
      c.model.padded_vocab_size = given;
    }
  }
  MS_RETURN_IF_ERROR(check_memory(c, world_size));
  return ok_status();
}

}  // namespace mindspeed
