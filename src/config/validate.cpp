// validate_configs (validate.h).
#include "config/validate.h"

#include <utility>

#include "core/logging.h"

namespace mindspeed {
namespace {

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

Status validate_model(ModelConfig& m, const ParallelConfig& p) {
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

Status validate_parallel(ParallelConfig& p, const ModelConfig& m, int world_size) {
  // Sizes >= 1: validate_parallel_sizes, run first.
  if (p.pipeline_model_parallel_size > 1) {
    return unimplemented("--pipeline-model-parallel-size ", p.pipeline_model_parallel_size,
                         ": pipeline parallelism is not implemented yet in mindspeed-cpp (use 1)");
  }
  if (p.context_parallel_size > 1) {
    return unimplemented("--context-parallel-size ", p.context_parallel_size,
                         ": context parallelism is not implemented yet in mindspeed-cpp (use 1)");
  }
  if (p.expert_model_parallel_size > 1) {
    return unimplemented("--expert-model-parallel-size ", p.expert_model_parallel_size,
                         ": expert parallelism (MoE) is not implemented yet in mindspeed-cpp (use 1)");
  }
  const int64_t model_size = static_cast<int64_t>(p.tensor_model_parallel_size) *
                             p.pipeline_model_parallel_size * p.context_parallel_size;
  if (world_size % model_size != 0) {
    return invalid_argument("world size (", world_size, ") is not divisible by --tensor-model-parallel-size (",
                            p.tensor_model_parallel_size, ") x --pipeline-model-parallel-size (",
                            p.pipeline_model_parallel_size, ") x --context-parallel-size (",
                            p.context_parallel_size, ") = ", model_size);
  }
  if (p.tensor_model_parallel_size == 1) p.sequence_parallel = false;  // as Megatron
  if (p.sequence_parallel && m.seq_length % p.tensor_model_parallel_size != 0) {
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

Status validate_optimizer(const OptimizerConfig& o, int64_t train_iters) {
  if (o.lr <= 0.0f) return invalid_argument("--lr is required and must be positive (got ", o.lr, ")");
  if (o.min_lr < 0.0f || o.min_lr > o.lr) {
    return invalid_argument("--min-lr (", o.min_lr, ") must be in [0, --lr (", o.lr, ")]");
  }
  if (o.lr_warmup_fraction >= 0.0f && o.lr_warmup_iters > 0) {
    return invalid_argument("give --lr-warmup-fraction or --lr-warmup-iters, not both");
  }
  if (o.lr_warmup_fraction > 1.0f) return invalid_argument("--lr-warmup-fraction must be at most 1");
  const int64_t decay = o.lr_decay_iters > 0 ? o.lr_decay_iters : train_iters;
  const double warmup = o.lr_warmup_fraction >= 0.0f ? o.lr_warmup_fraction * static_cast<double>(decay)
                                                     : static_cast<double>(o.lr_warmup_iters);
  if (warmup >= static_cast<double>(decay)) {
    return invalid_argument("the warmup (", warmup, " iterations) must be shorter than --lr-decay-iters (",
                            decay, "; default --train-iters)");
  }
  if (o.adam_beta1 < 0.0f || o.adam_beta1 >= 1.0f || o.adam_beta2 < 0.0f || o.adam_beta2 >= 1.0f) {
    return invalid_argument("--adam-beta1 and --adam-beta2 must be in [0, 1)");
  }
  if (o.adam_eps <= 0.0f) return invalid_argument("--adam-eps must be positive");
  if (o.clip_grad < 0.0f) return invalid_argument("--clip-grad must not be negative");
  return ok_status();
}

Status validate_training(TrainingConfig& t, const ParallelConfig& p, int world_size) {
  MS_RETURN_IF_ERROR(require_positive(t.train_iters, "--train-iters"));
  MS_RETURN_IF_ERROR(require_positive(t.micro_batch_size, "--micro-batch-size"));
  const int64_t dp = world_size / (static_cast<int64_t>(p.tensor_model_parallel_size) *
                                   p.pipeline_model_parallel_size * p.context_parallel_size);
  if (t.global_batch_size == 0) t.global_batch_size = t.micro_batch_size * dp;
  if (t.global_batch_size % (t.micro_batch_size * dp) != 0) {
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
  return ok_status();
}

Status validate_data(const DataConfig& d) {
  const bool have_paths = !d.data_path.empty() || !d.train_data_path.empty();
  if (d.mock_data && have_paths) {
    return invalid_argument("--mock-data and --data-path/--train-data-path exclude each other");
  }
  if (!d.mock_data && !have_paths) {
    return invalid_argument("give --data-path (or --train-data-path), or --mock-data for synthetic data");
  }
  if (d.tokenizer_type.empty()) {
    return invalid_argument("--tokenizer-type is required (e.g. GPT2BPETokenizer with --vocab-file and "
                            "--merge-file, or NullTokenizer with --vocab-size)");
  }
  return ok_status();
}

}  // namespace

Status validate_configs(Configs& c, int world_size, std::optional<int64_t> tokenizer_vocab_size) {
  MS_RETURN_IF_ERROR(validate_parallel_sizes(c.parallel, world_size));
  MS_RETURN_IF_ERROR(validate_model(c.model, c.parallel));
  MS_RETURN_IF_ERROR(validate_parallel(c.parallel, c.model, world_size));
  MS_RETURN_IF_ERROR(validate_training(c.training, c.parallel, world_size));
  MS_RETURN_IF_ERROR(validate_optimizer(c.optimizer, c.training.train_iters));
  MS_RETURN_IF_ERROR(validate_data(c.data));
  if (tokenizer_vocab_size.has_value()) {
    c.model.vocab_size = *tokenizer_vocab_size;
    c.model.padded_vocab_size = padded_vocab(*tokenizer_vocab_size, c.model.make_vocab_size_divisible_by,
                                             c.parallel.tensor_model_parallel_size);
  }
  return ok_status();
}

}  // namespace mindspeed
