// ForwardContext and MicroBatch: what every module's forward/backward receives for one
// micro-batch. Modules never own a step's state; the per-micro-batch Saved structs do, so a
// schedule can keep several micro-batches (and several model chunks) in flight at once.
// Nothing in here is written during compute: the context is a value, copied and narrowed
// per module (ModuleScope sets `weights`), never shared mutable state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/rng.h"
#include "core/swap_tier.h"
#include "kernels/backend.h"
#include "config/parallel_config.h"
#include "module/parameter.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

/// A micro-batch's arrays in a device's memory, where its kernels read them (upload_micro_batch).
struct MicroBatchDeviceArrays {
  Tensor tokens, labels, loss_mask, position_ids, doc_start, seq_index;
};

/// One micro-batch as the data pipeline gives it: [B, T] row-major per sample.
struct MicroBatch {
  int64_t B = 0, T = 0;
  std::vector<int32_t> tokens;        ///< [B, T]
  std::vector<int32_t> labels;        ///< [B, T]
  std::vector<float> loss_mask;       ///< [B, T], 1 = counted
  std::vector<int32_t> position_ids;  ///< [B, T]
  std::vector<int32_t> doc_start;     ///< [B, T] first position of each token's document, or empty
  int64_t first_sample = 0;           ///< global index of sample 0 (keys the dropout masks)
  // Context parallelism (MindSpeed's get_batch_on_this_cp_rank, context_parallel/cp_split.h):
  // the vectors above hold this rank's T positions of each sample, in local order, and
  // doc_start its queries' document starts (positions in the sample).
  int64_t seq_total = 0;               ///< positions of a whole sample; 0 = T (no context parallelism)
  std::vector<int32_t> seq_index;      ///< [T] position in the sample of local position t; empty = t
  std::vector<int32_t> sample_doc_start;  ///< [B, seq_total] every position's document start (EOD reset), or empty
  double sample_loss_tokens = 0.0;     ///< loss-mask sum of the whole samples (every CP rank's share)
  /// On a device backend: the copies of the arrays above that kernels read (the vectors stay for
  /// host code). Null on the CPU, where kernels read the vectors.
  std::shared_ptr<const MicroBatchDeviceArrays> device;
  int64_t sample_length() const { return seq_total > 0 ? seq_total : T; }
  // The arrays where kernels read them (the device copies when there are), null when empty.
  const int32_t* kernel_tokens() const { return device ? device->tokens.i32() : tokens.data(); }
  const int32_t* kernel_labels() const { return device ? device->labels.i32() : labels.data(); }
  const float* kernel_loss_mask() const { return device ? device->loss_mask.f32() : loss_mask.data(); }
  const int32_t* kernel_position_ids() const { return device ? device->position_ids.i32() : position_ids.data(); }
  const int32_t* kernel_doc_start() const {
    if (doc_start.empty()) return nullptr;
    return device ? device->doc_start.i32() : doc_start.data();
  }
  const int32_t* kernel_seq_index() const {
    if (seq_index.empty()) return nullptr;
    return device ? device->seq_index.i32() : seq_index.data();
  }
};

/// Copies `mb`'s arrays into the backend's memory (mb.device) for its kernels; nothing on the CPU.
void upload_micro_batch(MicroBatch& mb, const Backend& backend, Allocator& alloc);

/// Per-micro-batch loss bookkeeping, as Megatron's loss_func returns it.
struct LossSums {
  double loss_sum = 0.0;    ///< sum over tokens of loss * loss_mask
  double num_tokens = 0.0;  ///< sum of loss_mask
};

class ComputeWeights;
class WeightGradQueue;

/// The MoE routers' auxiliary losses of one iteration, per global layer (Megatron's
/// moe_layer_wise_logging_tracker): "load_balancing_loss" (aux / coeff) and "z_loss"
/// (z / coeff), summed over the micro-batches; the log line reduces and averages them.
struct MoeAuxLosses {
  std::vector<double> load_balancing;  ///< [num_layers]
  std::vector<double> z;               ///< [num_layers]
  bool any_load_balancing = false, any_z = false;
  void clear() {
    std::fill(load_balancing.begin(), load_balancing.end(), 0.0);
    std::fill(z.begin(), z.end(), 0.0);
  }
};

/// Called by the model around each module's use of its parameters, so the data-parallel
/// layer can overlap communication with compute (Megatron's forward pre-hooks and
/// gradient-ready backward hooks): before_forward waits for a pending parameter all-gather,
/// grads_ready starts a bucket's gradient reduction once all its gradients are final.
class ParameterHooks {
 public:
  virtual ~ParameterHooks() = default;
  virtual void before_forward(const std::vector<Parameter*>& params) = 0;
  /// Before a module writes its parameters' gradients (its backward; the fused output layer's
  /// forward): FSDP with sharded gradients gives them storage here.
  virtual void prepare_grads(const std::vector<Parameter*>& params) {}
  /// Before a module's backward (its weights are read again, its gradients written).
  virtual void before_backward(const std::vector<Parameter*>& params) { prepare_grads(params); }
  /// After a module's forward or backward scope: FSDP with sharded parameters frees them.
  virtual void after_use(const std::vector<Parameter*>& params) {}
  virtual void grads_ready(const std::vector<Parameter*>& params) = 0;
};

/// Where the dropout masks of one call come from (see DropoutSpec).
enum class DropoutSite : uint64_t { kEmbedding = 1, kAttentionProbs = 2, kAttentionOutput = 3, kMlpOutput = 4 };

struct ForwardContext {
  const Backend* backend = nullptr;
  Allocator* alloc = nullptr;
  const ParallelState* ps = nullptr;
  bool training = true;           ///< dropout on, gradients wanted
  bool sequence_parallel = false;  ///< activations outside TP regions are [s/tp, b, h]
  /// MindSpeed's --use-ascend-coc: the tensor-parallel linear layers split their tokens into
  /// this many chunks to overlap each collective with GEMMs (tensor_parallel/coc.h); 1 = off.
  int coc_chunks = 1;
  /// MindSpeed's --use-ascend-mc2 (with sequence parallelism): the same layers through the fused
  /// all-gather + GEMM and GEMM + reduce-scatter ops of tensor_parallel/comm_gemm.h.
  bool mc2 = false;
  /// --unaligned-linear with sequence parallelism: the positions of a sample, split over tp as
  /// unaligned_share does (ranks below s % tp hold one more) when they do not divide; 0 = even.
  int64_t unaligned_sequence = 0;
  /// The decoder's activations are in 2D tensor parallelism's [s/(X*CP), b, h/Y] layout
  /// (tensor_parallel/linear_2d.h); the embedding and the output layer see whole rows.
  bool tp_2d = false;
  /// 2D tensor parallelism's --enable-overlap-ag-with-matmul, --enable-overlap-matmul-with-rs and
  /// --enable-backward-overlap-ag-with-matmul (which layers honour which: linear_2d.h).
  struct Tp2dOverlap {
    bool ag_with_matmul = false, matmul_with_rs = false, backward_ag_with_matmul = false;
  } tp_2d_overlap;
  bool gradient_accumulation_fusion = true;  ///< false: --no-gradient-accumulation-fusion
  /// --bf16: activations are rounded to bf16 where written and saved for backward in bf16.
  bool bf16 = false;
  /// --fp16: the same in fp16 (values above 65504 become infinite), and the gradients that
  /// flow between layers in backward are rounded to fp16 too: an fp16 model's overflow, which
  /// the loss scaler detects and skips.
  bool fp16 = false;
  uint64_t seed = 1234;
  int64_t iteration = 0;          ///< keys the dropout masks with the micro-batch's samples
  ParameterHooks* hooks = nullptr;  ///< data-parallel overlap; null = none
  /// fp32 views of the current module's bf16 weights (set by ModuleScope); null = fp32 model.
  const ComputeWeights* weights = nullptr;
  /// Not null: linear layers (and the output layer and the embedding) queue their weight
  /// gradients here instead of computing them in backward (the zero-bubble B/W split); the
  /// schedule flushes the queue. Null (the default): weight gradients are computed at once.
  WeightGradQueue* wgrad_queue = nullptr;
  /// How attention spans the context-parallel group (sizes and ranks are in ps).
  ContextParallelConfig cp;
  /// MoE: the gradient scale of the routers' auxiliary and z losses (Megatron's
  /// MoEAuxLossAutoScaler scale: 1 / number of micro-batches), and where their values are
  /// recorded for the log (null: not recorded).
  float moe_aux_loss_scale = 1.0f;
  /// --fp16 / --loss-scale: the loss scaler's scale, multiplied into the loss before backward
  /// (Megatron's grad_scale_func); 1 without a scaler.
  float loss_scaler_scale = 1.0f;
  /// --calculate-per-token-loss: each micro-batch's loss enters backward as its raw sum (the
  /// trainer divides the reduced gradients by the global batch's loss tokens).
  bool calculate_per_token_loss = false;
  MoeAuxLosses* moe_aux_losses = nullptr;
  /// A forward run again in backward (activation recompute): it computes the same values but
  /// records nothing twice (the MoE routers' token counts; the caller also clears
  /// moe_aux_losses). See recompute_context().
  bool recomputing = false;
  /// --swap-attention: where layers move their saved activations between forward and
  /// backward (null: nowhere, they stay resident).
  SwapTier* swap_tier = nullptr;

  bool half_precision() const { return bf16 || fp16; }
  /// The 16-bit storage of activations (kFloat32 when neither --bf16 nor --fp16).
  DType half_dtype() const { return bf16 ? DType::kBFloat16 : fp16 ? DType::kFloat16 : DType::kFloat32; }
  const KernelTable& k() const { return backend->kernels; }
  const KernelContext& kc() const { return backend->context; }
  /// The weights of `p` as fp32 for the kernels: the parameter buffer itself for fp32
  /// parameters, the current ModuleScope's converted copy for bf16 / fp16 ones.
  const float* w(const Parameter& p) const;
  /// Rows of a [s, b, h] activation outside the tensor-parallel regions on this rank.
  int64_t local_rows(int64_t full_rows) const {
    return tp_2d ? full_rows / ps->sizes.tp_x : rows_of_rank(full_rows, ps->tp_rank);
  }
  /// Local position of this rank's first row block along the sequence (sequence parallelism,
  /// or the X axis of 2D tensor parallelism).
  int64_t sequence_offset(int64_t T) const {
    if (tp_2d) return ps->tp_x_rank * (T / ps->sizes.tp_x);
    if (!sequence_parallel) return 0;
    return unaligned_sequence > 0 ? unaligned_share(T, ps->sizes.tensor, ps->tp_rank).first
                                  : ps->tp_rank * (T / ps->sizes.tensor);
  }
  /// local_rows of tensor-parallel rank k: its share of the sequence positions (an uneven one
  /// with unaligned_sequence) times the batch.
  int64_t rows_of_rank(int64_t full_rows, int k) const {
    if (!sequence_parallel) return full_rows;
    const int tp = ps->sizes.tensor;
    if (unaligned_sequence <= 0) return full_rows / tp;
    MS_CHECK(full_rows % unaligned_sequence == 0, full_rows, " rows are not whole samples of ",
             unaligned_sequence, " positions (--unaligned-linear sequence split)");
    return unaligned_share(unaligned_sequence, tp, k).count * (full_rows / unaligned_sequence);
  }
  /// The first row of tensor-parallel rank k's block (sequence parallelism).
  int64_t first_row_of_rank(int64_t full_rows, int k) const {
    int64_t row = 0;
    for (int j = 0; j < k; ++j) row += rows_of_rank(full_rows, j);
    return sequence_parallel ? row : 0;
  }
  /// Philox stream of a dropout site; element indices inside it are global (sample, position,
  /// channel) coordinates, so masks do not depend on the parallel layout.
  /// This context for a recompute pass (see `recomputing`).
  ForwardContext recompute_context() const {
    ForwardContext c = *this;
    c.recomputing = true;
    c.moe_aux_losses = nullptr;
    return c;
  }
  RngStream dropout_stream(int64_t layer, DropoutSite site) const {
    return RngStream{seed, stream_id(0x64726f70ull /*"drop"*/, static_cast<uint64_t>(iteration),
                                     static_cast<uint64_t>(layer), static_cast<uint64_t>(site))};
  }
};

}  // namespace mindspeed
