// GPTInferenceWrapper (gpt_inference_wrapper.h).
#include "models/gpt/gpt_inference_wrapper.h"

#include <algorithm>

#include "tensor_parallel/mappings.h"

namespace mindspeed {

GPTInferenceWrapper::GPTInferenceWrapper(const GPTModel& model, const ForwardContext& ctx, bool use_kv_cache,
                                         int64_t max_batch_size)
    : model_(model), ctx_(ctx) {
  ctx_.training = false;
  MS_CHECK(!ctx_.sequence_parallel && !model.options().sequence_parallel,
           "generation runs without sequence parallelism");
  MS_CHECK(model.pre_process() && model.post_process(), "generation needs the whole model on one stage");
  if (use_kv_cache) {
    const ModelConfig& c = model.config();
    const int tp = ctx_.ps->sizes.tensor;  // this rank's key/value heads (an unaligned share too)
    const int64_t kv_heads = c.unaligned_linear
                                 ? unaligned_share(c.query_groups(), tp, ctx_.ps->tp_rank).count
                                 : c.query_groups() / tp;
    cache_ = std::make_unique<StaticInferenceContext>(*ctx_.backend, *ctx_.alloc, max_batch_size,
                                                      c.max_position_embeddings, c.num_layers,
                                                      kv_heads, c.kv_channels);
  }
}

Status GPTInferenceWrapper::prep_for_new_sequences(int64_t batch) {
  if (cache_ != nullptr) return cache_->reset(batch);
  return ok_status();
}

Status GPTInferenceWrapper::run_one_forward_step(const int32_t* tokens, int64_t B, int64_t T, int64_t first_position,
                                                 bool last_only, std::vector<float>* logits) {
  const ModelConfig& c = model_.config();
  const int64_t Vp = c.padded_vocab_size, V_local = Vp / ctx_.ps->sizes.tensor;
  if (cache_ != nullptr) {
    MS_RETURN_IF_ERROR(cache_->check_step(B, T));
    if (first_position != cache_->sequence_len_offset()) {
      return invalid_argument("a step at position ", first_position, " after ", cache_->sequence_len_offset(),
                              " cached positions: steps must continue the cached sequence");
    }
  } else if (first_position != 0) {
    return invalid_argument("without the key/value cache every step runs the whole sequence from position 0");
  }
  if (first_position + T > c.max_position_embeddings) {
    return invalid_argument("positions up to ", first_position + T, " exceed --max-position-embeddings ",
                            c.max_position_embeddings);
  }
  MicroBatch mb;
  mb.B = B;
  mb.T = T;
  mb.tokens.assign(tokens, tokens + B * T);
  for (int32_t id : mb.tokens) {
    if (id < 0 || id >= Vp) return invalid_argument("token ", id, " is outside the model's vocabulary [0, ", Vp, ")");
  }
  mb.position_ids.resize(static_cast<size_t>(B * T));
  for (int64_t i = 0; i < B * T; ++i) mb.position_ids[i] = static_cast<int32_t>(first_position + i % T);
  upload_micro_batch(mb, *ctx_.backend, *ctx_.alloc);  // a device's kernels read its copies
  const int64_t rows = last_only ? B : B * T;
  // The logits stay in the backend's memory until the gathered rows are copied to the host.
  Tensor local(*ctx_.alloc, Shape{B * T, V_local}, DType::kFloat32, MemoryCategory::kActivations);
  if (cache_ != nullptr) {
    model_.forward_inference(ctx_, mb, *cache_, last_only, local.f32());
    cache_->increment_sequence_len_offset(T);
  } else {
    model_.compute_logits(ctx_, mb, local.f32());
    if (last_only && T > 1) {  // sample-major [B, T, V]: keep each sample's last row
      Tensor last(*ctx_.alloc, Shape{B, V_local}, DType::kFloat32, MemoryCategory::kActivations);
      ctx_.k().copy_2d(ctx_.kc(), last.f32(), local.f32() + (T - 1) * V_local, B, V_local, V_local,
                       T * V_local);
      local = std::move(last);
    }
  }
  Tensor gathered(*ctx_.alloc, Shape{rows, Vp}, DType::kFloat32, MemoryCategory::kActivations);
  GatherFromTensorModelParallelRegion::forward(ctx_, gathered.f32(), local.f32(), rows, Vp);
  logits->resize(static_cast<size_t>(rows * Vp));
  ctx_.backend->kernels.copy_to_host(ctx_.kc(), logits->data(), gathered.f32(), gathered.nbytes());
  return ok_status();
}

}  // namespace mindspeed
