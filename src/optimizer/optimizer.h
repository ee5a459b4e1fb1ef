// Port of megatron/core/optimizer/{optimizer.py, distrib_optimizer.py, clip_grads.py}:
// AdamW (decoupled weight decay on matrices only, Megatron's no_weight_decay rule for biases
// and norm weights) over the contiguous gradient buffer, with the global gradient-norm
// clipping of clip_grads.py, fp32 main parameters for bf16 models, and -- for
// --use-distributed-optimizer -- state and main parameters only for this rank's shard of
// every bucket (ZeRO-1). Data-parallel communication (reduce-scatter of gradients,
// all-gather of parameters) is the DDP's job (distributed/); this class only reads the
// gradients of the elements it owns and writes back the parameters it owns.
//
// MindSpeed's memory features change where the owned state lives, not the arithmetic (each is
// bitwise the plain AdamW step unless it says otherwise):
//   --reuse-fp32-param   no fp32 master: it is the bf16 weight plus a 16-bit residual
//                        (fp32_param_reuse.h), restored before the update and split after it;
//   --o2-optimizer       exp_avg / exp_avg_sq stored in bf16, upcast for the update (lossy);
//   fused_ema_adamw      an fp32 EMA of the master weights, s = d*s + (1-d)*w after each update;
//   --swap-optimizer     master, exp_avg and exp_avg_sq in the swap tier, in T slices: slice
//                        i+1 is read back while slice i is updated, then i is written out;
//   --o2-gradient        the gradients are bf16 (the buffer's): widened piece by piece.
// The step runs over pieces (a segment's part inside one slice, at most kWorkspaceElements
// long when it needs the fp32 workspace), so only a slice or a piece is ever resident in fp32.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "config/optimizer_config.h"
#include "core/swap_tier.h"
#include "core/tensor.h"
#include "distributed/param_and_grad_buffer.h"
#include "kernels/backend.h"
#include "optimizer/fp32_param_reuse.h"
#include "optimizer/grad_scaler.h"
#include "parallel/parallel_state.h"

namespace mindspeed {

/// The per-element state a checkpoint saves (as fp32 values, whatever the storage).
enum class OptimizerState { kMainParam, kExpAvg, kExpAvgSq, kEma };

class Optimizer {
 public:
  /// Elements of a piece that needs the fp32 workspace (reuse-fp32-param, O2, bf16 gradients).
  static constexpr int64_t kWorkspaceElements = int64_t{1} << 16;
  /// The workspace's rows: the master (reuse), exp_avg and exp_avg_sq (O2), the gradient.
  static constexpr int64_t kExpAvgRow = 1, kExpAvgSqRow = 2, kGradRow = 3, kWorkspaceRows = 4;

  struct StepResult {
    double grad_norm = 0.0;    ///< global L2 norm before clipping
    double clip_coeff = 1.0;   ///< applied to the gradients (1 = none)
    /// The gradient norm was not finite, or (with a loss scaler) a gradient was: nothing was
    /// updated (as Megatron skips an iteration whose gradients overflowed).
    bool skipped = false;
  };

  /// `swap_tier` is needed with --swap-optimizer (and must outlive the optimizer).
  Optimizer(const OptimizerConfig& config, ParamAndGradBuffer& buffer, const ParallelState& ps,
            Allocator& alloc, const Backend& backend, bool distributed, SwapTier* swap_tier = nullptr);
  ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Clips and applies one AdamW step with learning rate `lr` to the owned elements; skips
  /// the update (and the step count) when the gradient norm is not finite. With a loss
  /// scaler (Megatron's MixedPrecisionOptimizer) the gradients are first unscaled and checked
  /// for inf / NaN on every rank; the scaler is updated and an overflow skips the step.
  StepResult step(double lr);
  /// --fp16 / --loss-scale: the loss scaler (none by default).
  void set_grad_scaler(GradScaler scaler) { grad_scaler_ = std::move(scaler); }
  const std::optional<GradScaler>& grad_scaler() const { return grad_scaler_; }
  std::optional<GradScaler>& grad_scaler() { return grad_scaler_; }
  /// The scale the loss is multiplied by before backward (1 without a scaler).
  float loss_scale() const { return grad_scaler_ ? grad_scaler_->scale() : 1.0f; }
  /// Global gradient L2 norm (Megatron's get_grad_norm_fp32 over the right group).
  double grad_norm() const;
  /// Zero elements of the gradients, counted as the norm is (Megatron's count_zeros_fp32,
  /// --log-num-zeros-in-grad).
  double count_zero_grads() const;
  /// Global L2 norm of the fp32 main parameters (Megatron's calc_params_l2_norm,
  /// --log-params-norm): duplicates left out as in the gradient norm.
  double params_norm();
  /// Owned [begin, end) ranges of the buffers, in shard order.
  struct Segment {
    int64_t begin = 0, end = 0;  ///< element range in the param/grad buffers
    int64_t shard_offset = 0;    ///< where it starts in the shard-local state arrays
    bool weight_decay = true;
    bool in_grad_norm = true;    ///< false for tensor-parallel duplicates and shared copies
    bool expert = false;         ///< an expert parameter's (MoE): norm over expert model parallel
  };
  const std::vector<Segment>& segments() const { return segments_; }
  int64_t shard_numel() const { return shard_numel_; }
  int64_t step_count() const { return step_; }
  void set_step_count(int64_t step) { step_ = step; }
  /// Whether this optimizer keeps `kind`: kMainParam only for bf16 parameters (fp32 ones are
  /// their own master copy), kEma only with fused_ema_adamw.
  bool has_state(OptimizerState kind) const;
  /// fp32 values of state `kind` for shard-local elements [shard_begin, shard_begin + n), which
  /// lie in one segment (a checkpoint's per-parameter range).
  void read_state(OptimizerState kind, int64_t shard_begin, int64_t n, float* out /*[n]*/);
  /// The backend whose memory the optimizer's state (and the buffers) live in; `out` / `in` of
  /// read_state / write_state are host memory, moved through its transfers.
  const Backend& backend() const { return backend_; }
  /// Sets them; kMainParam also sets the bf16 model weights of those elements.
  void write_state(OptimizerState kind, int64_t shard_begin, int64_t n, const float* in /*[n]*/);
  /// Element exceptions of --reuse-fp32-param now (for tests and the memory report).
  int64_t reuse_exception_count() const { return static_cast<int64_t>(reuse_exceptions_.size()); }

 private:
  /// A segment's shard-local range [lo, hi) inside one swap slice (or the whole shard).
  struct Piece {
    int segment = 0;
    int64_t lo = 0, hi = 0;
  };
  /// A slice of the shard with its state in the swap tier: rows (main if bf16,) exp_avg,
  /// exp_avg_sq, each `hi - lo` floats.
  struct SwapSlice {
    int64_t lo = 0, hi = 0;
    size_t first_piece = 0, end_piece = 0;
    SwappedTensor state;
  };
  /// fp32 pointers to a piece's master, exp_avg and exp_avg_sq (storage or workspace).
  struct PieceState {
    float* param = nullptr;
    float* exp_avg = nullptr;
    float* exp_avg_sq = nullptr;
    /// The row of `kind` (kMainParam, kExpAvg or kExpAvgSq; the EMA is not per piece).
    float* of(OptimizerState kind) const {
      return kind == OptimizerState::kMainParam ? param : kind == OptimizerState::kExpAvg ? exp_avg : exp_avg_sq;
    }
  };

  /// Updates one piece: loads its fp32 state, runs AdamW (and the EMA), stores it back.
  void update_piece(const Piece& piece, float* slice, const SwapSlice* swap_slice, float lr, float grad_scale,
                    std::vector<ReuseException>* new_exceptions);
  /// The piece's fp32 state, converting into the workspace where storage is not fp32.
  PieceState load_piece(const Piece& piece, float* slice, const SwapSlice* swap_slice);
  /// Writes workspace values back (O2 moments, the reuse split, the bf16 model weights).
  void store_piece(const Piece& piece, const PieceState& st, std::vector<ReuseException>* new_exceptions);
  /// The segment holding shard-local element `shard_index` (fatal when none).
  const Segment& segment_at(int64_t shard_index) const;
  /// Applies fn(piece-like range, slice data or null, swap slice or null) over [lo, hi) for
  /// read_state / write_state, swapping slices in and out as needed.
  template <typename Fn>
  void for_state_range(int64_t lo, int64_t hi, bool write_back, Fn&& fn);

  /// A per-rank partial sum (dense and expert parts) summed over the ranks that hold the rest
  /// of the model, as the gradient norm is.
  double sum_over_model(double dense, double expert) const;
  /// The gradient of a segment's elements: in the gradient buffer, or in the buffer's
  /// gradient shards (FSDP optim_grads).
  float* grad_of(const Segment& s) const;
  float* grad_at(const Segment& s, int64_t offset) const { return grad_of(s) + offset; }
  /// Multiplies every owned gradient by the scaler's 1/scale (fp32 gradients in place; 16-bit
  /// ones as they are widened) and says whether any rank holds an inf or NaN.
  bool unscale_grads_and_check_for_nan();
  /// Gradient elements [offset, offset + n) of a segment as fp32: in place, or widened from
  /// 16-bit gradients into the workspace's gradient row (n <= kWorkspaceElements) and
  /// multiplied by half_grad_unscale_.
  const float* fp32_grads(const Segment& s, int64_t offset, int64_t n) const;
  /// The (model-dtype) parameters of a segment's elements: in the parameter buffer, or in its
  /// shards (FSDP optim_grads_params).
  void* param_of(const Segment& s) const;
  /// param_of + `offset` elements.
  void* param_at(const Segment& s, int64_t offset) const;

  OptimizerConfig config_;
  ParamAndGradBuffer& buffer_;
  const ParallelState& ps_;
  const Backend& backend_;
  bool distributed_;
  std::vector<Segment> segments_;
  int64_t shard_numel_ = 0;
  int64_t step_ = 0;
  bool has_expert_params_ = false;
  SwapTier* swap_tier_ = nullptr;
  std::optional<GradScaler> grad_scaler_;
  /// 16-bit gradients with a loss scaler: the 1/scale applied as they are widened this step.
  float half_grad_unscale_ = 1.0f;
  // Resident storage (shard-local): exp_avg / exp_avg_sq (fp32, or bf16 with O2), the fp32
  // master of bf16 params (none with reuse or swap), the reuse residual (int16 bits in a
  // 2-byte tensor), the EMA (fp32), the fp32 workspace (kWorkspaceRows x kWorkspaceElements).
  Tensor exp_avg_, exp_avg_sq_, main_params_, reuse_residual_, ema_, workspace_;
  std::vector<ReuseException> reuse_exceptions_;  ///< sorted by shard-local index
  std::vector<Piece> pieces_;
  std::vector<SwapSlice> swap_slices_;  ///< empty without --swap-optimizer
};

/// The optimizer-owned part of parameter p: [lo, hi) of its local slice and where it starts in
/// the optimizer's shard-local arrays (all of it without the distributed optimizer).
struct OwnedRange {
  int64_t lo = 0, hi = 0, shard = 0;
};
std::vector<OwnedRange> owned_ranges(const Parameter& p, const Optimizer& optimizer);

}  // namespace mindspeed
