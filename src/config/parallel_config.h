// ParallelConfig: how the model and the batch are split over ranks (Megatron's
// ModelParallelConfig and DistributedDataParallelConfig fields that are flags).
#pragma once

#include <cstdint>
#include <string>

namespace mindspeed {

/// --context-parallel-algo (MindSpeed): how attention sees the whole sequence.
enum class CpAlgo {
  kUlysses,  ///< ulysses_cp_algo: all-to-all sequence <-> heads around core attention
  kRing,     ///< megatron_cp_algo: key/value blocks passed around a ring
  kHybrid,   ///< hybrid_cp_algo: Ulysses inside groups of --ulysses-degree-in-cp, ring across
};

/// Context parallelism (MindSpeed §2.1-2.4, §8.5): what attention needs to know besides the
/// group sizes. Carried by ForwardContext.
struct ContextParallelConfig {
  CpAlgo algo = CpAlgo::kRing;      ///< --context-parallel-algo (MindSpeed's default megatron_cp_algo)
  int ulysses_degree = 1;           ///< --ulysses-degree-in-cp (hybrid); the CP size for Ulysses, 1 for ring
  bool general_mask = false;        ///< --attention-mask-type general: contiguous chunks, no load balancing
  bool send_recv_overlap = false;   ///< --use-cp-send-recv-overlap: ring transfers overlap the block's attention
  int window_size = 1;              ///< --cp-window-size (double ring: inner rings of this many ranks)
  bool ulysses_allgather_kv = false;  ///< --use-ulysses-allgather-kv: keys/values all-gathered, not all-to-all
};

/// --data-parallel-sharding-strategy (Megatron's custom FSDP, --use-custom-fsdp): what is
/// sharded over data parallelism: nothing (DDP), the optimizer state (ZeRO-1), the optimizer
/// state and the gradients (ZeRO-2), or everything (ZeRO-3).
enum class FsdpShardingStrategy { kNoShard, kOptim, kOptimGrads, kOptimGradsParams };

/// MC2 (--use-ascend-mc2) on this engine: each fused collective + GEMM call runs as this many
/// pipelined token chunks, halved until they divide the call's rows (tensor_parallel/comm_gemm.h).
inline constexpr int kMc2Chunks = 4;

struct ParallelConfig {
  int tensor_model_parallel_size = 1;    ///< --tensor-model-parallel-size
  int pipeline_model_parallel_size = 1;  ///< --pipeline-model-parallel-size
  int context_parallel_size = 1;         ///< --context-parallel-size
  ContextParallelConfig cp;              ///< the --context-parallel-algo family
  int expert_model_parallel_size = 1;    ///< --expert-model-parallel-size
  int expert_tensor_parallel_size = 0;   ///< --expert-tensor-parallel-size (0 = the tensor-parallel size)
  /// MindSpeed --moe-tp-extend-ep: the tp x ep ranks form one expert-parallel group of whole
  /// experts (expert tensor parallel 1, expert parallel tp * ep).
  bool moe_tp_extend_ep = false;
  bool sequence_parallel = false;        ///< --sequence-parallel (turned off when tp == 1, as Megatron)
  // MindSpeed's compute-communication overlap, script mode (tensor_parallel/coc.h).
  bool use_ascend_coc = false;  ///< --use-ascend-coc
  int coc_parallel_num = 1;     ///< --coc-parallel-num {1, 2, 4, 8}: token chunks per linear layer
  int coc_mode =
      -1;  ///< --coc-mode: -1 auto (2 when coc_parallel_num > 1), 0 original, 1 rewrite, 2 CoC
  bool use_ascend_mc2 = false;  ///< --use-ascend-mc2: fused all-gather + GEMM / GEMM +
                                ///< reduce-scatter (needs SP; kMc2Chunks above)
  // MindSpeed's per-group communication buffers (config/group_buffers.h).
  std::string hccl_group_buffer;  ///< --hccl-group-buffer "dp:200;tp:300" (MB per group key)
  bool hccl_group_buffer_adaptive = false;  ///< --hccl-group-buffer-adaptive
  double hccl_ep_group_buffer_adaptive_factor =
      -1.0;  ///< --hccl-ep-group-buffer-adaptive-factor (<= 0: off)
  /// The chunks the tensor-parallel linear layers split their tokens into (1: not split), as
  /// MindSpeed's MinCommConfig.acquire_module_type decides: CoC on, mode 2 (or auto with more
  /// than one chunk) and more than one tensor-parallel rank. Modes 0 and 1 run the plain layers
  /// (1, "rewrite", is MindSpeed's debugging re-implementation of them).
  int coc_chunks() const {
    const int mode = coc_mode == -1 ? (coc_parallel_num == 1 ? 0 : 2) : coc_mode;
    return use_ascend_coc && tensor_model_parallel_size > 1 && mode == 2 ? coc_parallel_num : 1;
  }
  // MindSpeed's 2D tensor parallelism (tensor_parallel/linear_2d.h).
  bool tp_2d = false;  ///< --tp-2d
  int tp_x = 1;        ///< --tp-x: the X axis of the grid (consecutive tp ranks)
  int tp_y = 1;        ///< --tp-y: the Y axis (tp = tp_x * tp_y)
  /// --enable-overlap-ag-with-matmul / --enable-overlap-matmul-with-rs /
  /// --enable-backward-overlap-ag-with-matmul: the 2D layers' all-gather (forward), reduce-scatter
  /// (forward) and backward all-gather pipelined with their GEMMs (comm_gemm.h chunks).
  bool tp_2d_overlap_ag_with_matmul = false;
  bool tp_2d_overlap_matmul_with_rs = false;
  bool tp_2d_backward_overlap_ag_with_matmul = false;
  bool use_distributed_optimizer = false;  ///< --use-distributed-optimizer
  /// Megatron's custom FSDP (--use-custom-fsdp --data-parallel-sharding-strategy); validation
  /// derives use_distributed_optimizer (no_shard: off) and overlap_grad_reduce (optim_grads: on).
  bool use_custom_fsdp = false;
  FsdpShardingStrategy fsdp_sharding = FsdpShardingStrategy::kNoShard;
  /// Gradients live only as this rank's shards between micro-batches (FSDP optim_grads and up).
  bool shard_gradients() const {
    return use_custom_fsdp && (fsdp_sharding == FsdpShardingStrategy::kOptimGrads ||
                               fsdp_sharding == FsdpShardingStrategy::kOptimGradsParams);
  }
  /// Parameters too live as shards, gathered per module (FSDP optim_grads_params).
  bool shard_parameters() const { return use_custom_fsdp && fsdp_sharding == FsdpShardingStrategy::kOptimGradsParams; }
  bool overlap_grad_reduce = false;      ///< --overlap-grad-reduce
  bool overlap_param_gather = false;     ///< --overlap-param-gather
  int64_t ddp_bucket_size = 0;           ///< --ddp-bucket-size (elements); 0 = Megatron's default
  /// MindSpeed's --hccl-slice-size: elements per collective call when the distributed
  /// optimizer's state is gathered to the first data-parallel rank (distrib_optim.pt saves).
  int64_t hccl_slice_size = 10 * 1024 * 1024;
  bool gradient_accumulation_fusion = true;  ///< false with --no-gradient-accumulation-fusion
  bool use_tp_pp_dp_mapping = false;     ///< --use-tp-pp-dp-mapping (order tp-cp-ep-pp-dp)

  // Pipeline layout and schedule (config/pipeline_layout.h).
  /// --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers; 0 = even split.
  int64_t decoder_first_pipeline_num_layers = 0;
  int64_t decoder_last_pipeline_num_layers = 0;
  /// --num-layers-per-virtual-pipeline-stage (0 = not given).
  int64_t num_layers_per_virtual_pipeline_stage = 0;
  /// --num-virtual-stages-per-pipeline-rank (0 = not given).
  int num_virtual_stages_per_pipeline_rank = 0;
  /// --microbatch-group-size-per-virtual-pipeline-stage (0 = the pipeline size).
  int64_t microbatch_group_size_per_vp_stage = 0;
  bool dualpipev = false;           ///< --schedules-method dualpipev (MindSpeed)
  bool dualpipev_dw_detach = false;  ///< --dualpipev-dw-detach (MindSpeed)
  bool variable_seq_lengths = false;  ///< --variable-seq-lengths (MindSpeed PP dynamic shapes)
  /// --use-multiparameter-pipeline-model-parallel (MindSpeed): stages exchange a list of
  /// tensors (ModelChunk::stage_tensor_widths; GPT passes one, its hidden states).
  bool multiparameter_pipeline = false;
  /// Dry run: print every process group for this world size and exit (no training).
  int dry_run_world_size = 0;            ///< --dry-run-world-size (mindspeed-cpp)
};

}  // namespace mindspeed
