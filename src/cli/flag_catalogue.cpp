// The flag catalogue's decisions (flag_catalogue.h): the refusal categories with their roadmap
// homes, one refusal row per known flag that pretrain_gpt does not register, the accepted no-ops
// and mappings, mindspeed-cpp's own flags, and the renderings (docs/flags.md, --help, the error).
// The rows were decided flag by flag against Megatron-LM core_v0.12.1's arguments.py, MindSpeed and
// MindSpeed-LLM (tools/flag_catalogue/extract_flags.py lists their flags); every table is sorted
// by name.
#include "cli/flag_catalogue.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <map>
#include <set>

#include "cli/arguments.h"
#include "cli/known_flags.h"

namespace mindspeed {
namespace {

using enum RefusalCategory;

constexpr RefusalCategoryInfo kCategories[] = {
    {kLaunchCompat, "launch-compat", "not yet: launch-script compatibility", "issue 15"},
    {kTokenizer, "tokenizer", "not yet: tokenizer option", "issue 15"},
    {kMegatronNoop, "megatron-noop",
     "ignored by Megatron core_v0.12 too (deprecated, no effect); not accepted here yet",
     "issue 15"},
    {kMegatronRemoved, "megatron-removed", "refused by Megatron core_v0.12 too (a removed flag)",
     "Megatron's rule"},
    {kData, "data", "not yet: data pipeline option", "issue 3"},
    {kParallelCore, "parallel-core",
     "not yet: data/tensor-parallel or distributed-optimizer option", "issue 4"},
    {kStages, "stages", "not yet: pipeline stage layout", "issue 7"},
    {kPipeline, "pipeline", "not yet: pipeline schedule or transfer option", "issue 9"},
    {kCheckpoint, "checkpoint", "not yet: checkpoint option", "issue 10"},
    {kObservability, "observability", "not yet: logging or profiling option", "issue 11"},
    {kContextParallel, "context-parallel", "not yet: context-parallel option", "issue 12"},
    {kMoe, "moe", "not yet: MoE option", "issue 13"},
    {kMemory, "memory", "not yet: memory saving (recompute, swap, offload, FSDP)", "issue 14"},
    {kPrecision, "precision",
     "not yet: low-precision training state (bf16 gradient reduction, precision-aware optimizer)",
     "issue 14"},
    {kDeviceBackend, "gpu-backend",
     "needs a GPU/NPU backend (Transformer Engine, NCCL/HCCL, CUDA graphs, Ascend or Triton "
     "kernels)",
     "future: GPU backend"},
    {kFp8, "fp8", "FP8/FP4/HiF8 training needs a GPU/NPU backend", "future: GPU backend"},
    {kModelVariant, "model-variant",
     "not yet: a GPT-family architecture variant (MLA, MTP, softcapping, other norms/activations)",
     "future: model variants"},
    {kOtherFamily, "other-family",
     "another model family (BERT, T5, vision, multimodal, Mamba, retro, biencoder)",
     "future: other model families"},
    {kInference, "inference", "inference, serving, text generation or evaluation",
     "future: inference"},
    {kFinetune, "finetune", "fine-tuning (instruction datasets, prompt templates, LoRA)",
     "future: fine-tuning"},
    {kPostTraining, "post-training",
     "reinforcement learning / preference training (RL, GRPO, DPO, PPO, reward models)",
     "future: post-training"},
    {kQuantization, "quantization", "quantisation-aware training or distillation",
     "future: quantisation"},
    {kOptimizer, "optimizer",
     "not yet: another optimizer or weight-decay schedule (SGD, Muon, decoupled LR, EMA)",
     "future: optimizers"},
    {kParallelVariant, "parallel-variant",
     "another parallelism scheme (2-D TP, ND matmul, AMPipe, virtual DP, disaggregated layers)",
     "future: parallelism variants"},
    {kAutoTuning, "auto-tuning",
     "automatic configuration search (auto settings, automated pipeline)", "future: auto-tuning"},
    {kResilience, "resilience",
     "fault tolerance (in-process restart, rerun engine, replication, TTP, high availability)",
     "future: fault tolerance"},
    {kExternalService, "external-service",
     "reports to an external service (Weights & Biases, one-logger, workload inspector)",
     "future: external services"},
    {kPreprocessTool, "preprocess-tool",
     "not a training flag: MindSpeed-LLM's data preprocessing (tools/preprocess_data ports it)",
     "future: tools/preprocess_data"},
    {kConvertTool, "convert-tool",
     "not a training flag: MindSpeed-LLM's checkpoint conversion (tools/convert_checkpoint ports "
     "it)",
     "future: tools/convert_checkpoint"},
    {kPythonRuntime, "python-runtime",
     "a facility of the Python/PyTorch runtime with no counterpart in a native engine",
     "not planned"},
};

constexpr bool categories_in_enum_order() {
  for (std::size_t i = 0; i < std::size(kCategories); ++i) {
    if (static_cast<std::size_t>(kCategories[i].category) != i) return false;
  }
  return true;
}
static_assert(categories_in_enum_order(), "kCategories must follow RefusalCategory's order");

// One row per known flag that pretrain_gpt does not register. Whoever registers a flag deletes its
// row (flag_catalogue_test reports a row for a registered flag as stale).
struct Refusal {
  std::string_view name;
  RefusalCategory category;
  std::string_view note;  // a per-flag detail, appended to the category's reason
  constexpr Refusal(std::string_view n, RefusalCategory c, std::string_view t = {})
      : name(n), category(c), note(t) {}
};

constexpr Refusal kRefusals[] = {
    {"--account-for-embedding-in-pipeline-split", kStages},
    {"--account-for-loss-in-pipeline-split", kStages},
    {"--activation-func-clamp-value", kModelVariant},
    {"--adaptive-cp-dynamic-attn-mask", kContextParallel},
    {"--adaptive-cp-manually-set-mask-list", kContextParallel},
    {"--adaptive-cp-only-reschedule", kContextParallel},
    {"--adaptive-cp-without-coarse", kContextParallel},
    {"--adaptive-memory-optimization", kMemory},
    {"--adaptive-recompute-device-size", kMemory},
    {"--adaptive-recompute-device-swap", kMemory},
    {"--adaptive-recompute-profiling-step", kMemory},
    {"--add-dense-bias", kModelVariant},
    {"--add-eos-token", kInference},
    {"--add-output-layer-bias", kModelVariant},
    {"--add-rmsnorm-offset", kModelVariant},
    {"--additional-config", kPythonRuntime},
    {"--adlr-autoresume", kResilience},
    {"--adlr-autoresume-interval", kResilience},
    {"--advantage-whiten", kPostTraining},
    {"--aiqos", kDeviceBackend},
    {"--aiqos-enable-roce", kDeviceBackend},
    {"--aiqos-mode", kDeviceBackend},
    {"--aiqos-schedule", kDeviceBackend},
    {"--allow-ambiguous-pad-tokens", kData},
    {"--alternative-prompt", kInference},
    {"--ampipe-degree", kParallelVariant, "MindSpeed AMPipe"},
    {"--ampipe-tp-sp-comm-overlap", kParallelVariant, "MindSpeed AMPipe"},
    {"--app-tag-run-name", kExternalService},
    {"--app-tag-run-version", kExternalService},
    {"--append-eod", kPreprocessTool},
    {"--apply-layernorm-1p", kModelVariant},
    {"--apply-residual-connection-post-layernorm", kModelVariant},
    {"--apply-rope-in-complex", kModelVariant},
    {"--apply-rope-no-in-complex", kModelVariant},
    {"--apply-wd-to-qk-layernorm", kOptimizer},
    {"--async-log-allreduce", kObservability},
    {"--attention-mask-on-cpu", kContextParallel},
    {"--attn-logit-softcapping", kModelVariant},
    {"--auto-detect-ckpt-format", kCheckpoint},
    {"--automated-pipeline", kAutoTuning},
    {"--automated-pipeline-perf", kAutoTuning},
    {"--balanced-moe-experts", kMoe},
    {"--balanced-moe-hot-expert-num", kMoe},
    {"--batch-size", kMegatronRemoved, "use --micro-batch-size"},
    {"--bert-embedder-type", kOtherFamily, "BERT"},
    {"--bert-load", kOtherFamily},
    {"--bert-no-binary-head", kOtherFamily, "BERT"},
    {"--beta-fast", kModelVariant},
    {"--beta-slow", kModelVariant},
    {"--biencoder-projection-dim", kOtherFamily},
    {"--biencoder-shared-query-context-model", kOtherFamily},
    {"--block-data-path", kOtherFamily},
    {"--broadcast", kInference},
    {"--cache-dir", kPreprocessTool},
    {"--cache-get-batch-config", kData},
    {"--cache-mla-latents", kModelVariant},
    {"--calc-ft-timeouts", kResilience},
    {"--chain-of-thought", kInference},
    {"--check-for-large-grads", kResilience, "rerun state machine"},
    {"--check-for-spiky-loss", kResilience, "rerun state machine"},
    {"--check-weight-hash-across-dp-replicas-interval", kResilience},
    {"--checkpoint-activations", kMegatronRemoved,
     "use --recompute-activations or --recompute-granularity"},
    {"--chimera-decouple-bw", kPipeline},
    {"--ckpt-assume-constant-structure", kCheckpoint},
    {"--ckpt-convert-format", kCheckpoint},
    {"--ckpt-convert-save", kCheckpoint},
    {"--ckpt-convert-update-legacy-dist-opt-format", kCheckpoint},
    {"--ckpt-fully-parallel-load", kCheckpoint},
    {"--ckpt-fully-parallel-save", kMegatronNoop, "the default"},
    {"--cla-share-factor", kModelVariant, "cross-layer attention"},
    {"--classes-fraction", kOtherFamily},
    {"--clip-ratio", kPostTraining},
    {"--cliprange-value", kPostTraining},
    {"--coc-fused-kernel", kDeviceBackend,
     "ATB's fused lcal_coc kernels (TP 8); the script mode (--use-ascend-coc --coc-parallel-num) "
     "runs here"},
    {"--compress-activation", kMemory},
    {"--compress-dense", kMemory},
    {"--compress-optimizer", kMemory},
    {"--compress-ratios", kModelVariant},
    {"--compress-rope-theta", kModelVariant},
    {"--config-logger-dir", kObservability},
    {"--context-parallel-cache-interval", kContextParallel},
    {"--context-parallel-kv-cache-policy", kContextParallel},
    {"--cp-attention-mask-type", kContextParallel,
     "MindSpeed-LLM's old spelling of --attention-mask-type"},
    {"--cp-comm-type", kContextParallel},
    {"--cpu-offloading-num-layers", kMemory},
    {"--create-all-gather-group", kParallelCore},
    {"--critic-mini-batch-size", kPostTraining},
    {"--critic-update-epochs", kPostTraining},
    {"--cross-entropy-fusion-impl", kLaunchCompat,
     "--optimization-level picks the fused cross entropy here"},
    {"--cross-entropy-loss-fusion", kLaunchCompat,
     "--optimization-level picks the fused cross entropy here"},
    {"--cuda-graph-impl", kDeviceBackend},
    {"--cuda-graph-scope", kDeviceBackend},
    {"--cuda-graph-warmup-steps", kDeviceBackend},
    {"--cut-max-seqlen", kFinetune},
    {"--data-args-path", kData},
    {"--data-parallel-random-init", kModelVariant, "initialisation"},
    {"--data-per-class-fraction", kOtherFamily},
    {"--dataloader-defer-npy-index-mmap", kData},
    {"--dataloader-fast-cache-load", kData},
    {"--dataloader-type", kData},
    {"--dataset-additional-keys", kFinetune},
    {"--dataset-category", kPostTraining},
    {"--dataset-dir", kPreprocessTool},
    {"--dataset-impl", kPreprocessTool},
    {"--datasets", kPreprocessTool},
    {"--ddp-average-in-collective", kParallelCore},
    {"--ddp-num-buckets", kParallelCore},
    {"--ddp-pad-buckets-for-high-nccl-busbw", kDeviceBackend},
    {"--ddp-reduce-scatter-with-fp32-accumulation", kParallelCore},
    {"--decode-only-cuda-graphs", kInference},
    {"--decoder-num-layers", kOtherFamily, "encoder-decoder"},
    {"--decoder-seq-length", kOtherFamily, "encoder-decoder (T5)"},
    {"--decoupled-lr", kOptimizer},
    {"--decoupled-min-lr", kOptimizer},
    {"--defer-embedding-wgrad-compute", kParallelCore},
    {"--defer-p2p-send-wait", kPipeline},
    {"--delay-wgrad-compute", kMoe},
    {"--dim-model-base", kModelVariant, "MiniCPM"},
    {"--dino-bottleneck-size", kOtherFamily},
    {"--dino-freeze-last-layer", kOtherFamily},
    {"--dino-head-hidden-size", kOtherFamily},
    {"--dino-local-crops-number", kOtherFamily},
    {"--dino-local-img-size", kOtherFamily},
    {"--dino-norm-last-layer", kOtherFamily},
    {"--dino-teacher-temp", kOtherFamily},
    {"--dino-warmup-teacher-temp", kOtherFamily},
    {"--dino-warmup-teacher-temp-epochs", kOtherFamily},
    {"--disable-bf16-reduced-precision-matmul", kDeviceBackend,
     "cuBLAS reduced-precision reductions"},
    {"--disable-chunked-prefill", kInference},
    {"--disable-jit-fuser", kPythonRuntime, "TorchScript / nvFuser"},
    {"--disable-mamba-mem-eff-path", kOtherFamily, "Mamba"},
    {"--disable-msc", kExternalService, "multi-storage client"},
    {"--disable-straggler-on-startup", kObservability, "straggler detection"},
    {"--disable-symmetric-registration", kDeviceBackend},
    {"--disable-tp-comm-bulk-dgrad", kDeviceBackend, "Transformer Engine"},
    {"--disable-tp-comm-bulk-wgrad", kDeviceBackend, "Transformer Engine"},
    {"--disable-tp-comm-overlap-ag", kDeviceBackend, "Transformer Engine"},
    {"--disable-tp-comm-overlap-rs", kDeviceBackend, "Transformer Engine"},
    {"--disable-tp-comm-split-ag", kDeviceBackend, "Transformer Engine"},
    {"--disable-tp-comm-split-rs", kDeviceBackend, "Transformer Engine"},
    {"--dist-ckpt-format", kMegatronNoop, "see --ckpt-format"},
    {"--dist-ckpt-optim-fully-reshardable", kCheckpoint},
    {"--dist-ckpt-save-pre-mcore-014", kCheckpoint},
    {"--dist-ckpt-strictness", kCheckpoint},
    {"--dist-train", kOtherFamily, "multimodal"},
    {"--distrib-optim-fully-reshardable-mem-efficient", kCheckpoint},
    {"--distributed-optimizer-no-replica", kResilience},
    {"--distributed-timeout-minutes", kLaunchCompat, "MPI collectives have no timeout here"},
    {"--distributed-timeout-seconds-after-init", kLaunchCompat,
     "MPI collectives have no timeout here"},
    {"--do-sample", kPostTraining},
    {"--dpo-beta", kPostTraining},
    {"--dpo-label-smoothing", kPostTraining},
    {"--dpo-loss-type", kPostTraining},
    {"--drop-thinking", kPreprocessTool},
    {"--dump-param-to-param-group-map", kObservability},
    {"--dynamic-factor", kModelVariant},
    {"--embed-layernorm", kModelVariant},
    {"--embedding-init-method-std", kModelVariant, "initialisation"},
    {"--embedding-multiplier-scale", kModelVariant},
    {"--embedding-path", kOtherFamily},
    {"--empty-unused-memory-level", kPythonRuntime, "PyTorch's CUDA caching allocator"},
    {"--enable-chunked-prefill", kInference},
    {"--enable-cuda-graph", kDeviceBackend},
    {"--enable-dsa-indexer", kModelVariant},
    {"--enable-elastic-training", kResilience},
    {"--enable-experimental", kPythonRuntime, "Megatron's experimental code paths"},
    {"--enable-expert-placement", kMoe},
    {"--enable-fine-grained-expert-placement", kMoe},
    {"--enable-ft-package", kResilience},
    {"--enable-full-sharding-in-hsdp", kMemory, "FSDP"},
    {"--enable-hbmfault-repair", kResilience},
    {"--enable-high-availability", kResilience},
    {"--enable-mg2hf-convert", kConvertTool},
    {"--enable-mhc", kModelVariant},
    {"--enable-mla-absorb", kModelVariant},
    {"--enable-mla-scale-kv-lora", kModelVariant},
    {"--enable-mla-scale-q-lora", kModelVariant},
    {"--enable-optimizer-state-local-copy", kResilience},
    {"--enable-share-memory", kData},
    {"--enable-thinking", kFinetune},
    {"--enable-token-rearrange-opt", kMoe},
    {"--enable-worker-reboot", kResilience},
    {"--enable-zero3", kMemory},
    {"--encoder-num-layers", kOtherFamily, "encoder-decoder"},
    {"--encoder-pipeline-model-parallel-size", kOtherFamily, "encoder-decoder"},
    {"--encoder-seq-length", kOtherFamily, "encoder-decoder (T5)"},
    {"--encoder-tensor-model-parallel-size", kOtherFamily, "encoder-decoder"},
    {"--end-weight-decay", kOptimizer},
    {"--entropy-coeff", kPostTraining},
    {"--error-injection-rate", kResilience},
    {"--error-injection-type", kResilience},
    {"--eval-language", kInference},
    {"--evaluation-batch-size", kInference},
    {"--evidence-data-path", kOtherFamily},
    {"--exp-avg-dtype", kPrecision},
    {"--exp-avg-sq-dtype", kPrecision},
    {"--experimental-attention-variant", kModelVariant},
    {"--expert-interval", kMoe},
    {"--expert-placement-freq", kMoe},
    {"--external-cuda-graph", kDeviceBackend},
    {"--extract-content-for-reward", kPostTraining},
    {"--fake-process-group", kPythonRuntime, "torch.distributed's fake backend"},
    {"--fc-type", kModelVariant},
    {"--fim-data", kData},
    {"--fim-eod-token", kData},
    {"--fim-fragment-rate", kData},
    {"--fim-middle-token", kData},
    {"--fim-no-prefix", kData},
    {"--fim-pad-token", kData},
    {"--fim-prefix-token", kData},
    {"--fim-rate", kData},
    {"--fim-split-sample", kData},
    {"--fim-spm-rate", kData},
    {"--fim-suffix-token", kData},
    {"--fine-grained-expert-placement-thre", kMoe},
    {"--first-k-dense-replace", kMoe},
    {"--first-last-layers-bf16", kFp8},
    {"--fix-router", kMoe},
    {"--fix-sub-seq-length", kData},
    {"--flash-decode", kInference},
    {"--fp16-lm-cross-entropy", kLaunchCompat, "the cross entropy in fp16"},
    {"--fp32-residual-connection", kLaunchCompat, "fp32 residual stream"},
    {"--fp4-format", kFp8},
    {"--fp4-param-gather", kFp8},
    {"--fp4-quantizer-factory", kFp8},
    {"--fp4-recipe", kFp8},
    {"--fp8-amax-compute-algo", kFp8},
    {"--fp8-amax-history-len", kFp8},
    {"--fp8-format", kFp8},
    {"--fp8-interval", kMegatronNoop},
    {"--fp8-margin", kFp8},
    {"--fp8-param-gather", kFp8},
    {"--fp8-quantizer-factory", kFp8},
    {"--fp8-recipe", kFp8},
    {"--fp8-reuse-quantized-weight", kFp8},
    {"--fsdp-double-buffer", kMemory, "FSDP"},
    {"--fsdp-manual-registration", kDeviceBackend},
    {"--fsdp2-config-path", kMemory},
    {"--fsdp2-config-str", kMemory},
    {"--ft-num-warmup-iters", kResilience},
    {"--full-attention-interval", kModelVariant},
    {"--full-shuffle-instruction-dataset", kFinetune},
    {"--full-validation", kData},
    {"--gamma", kPostTraining},
    {"--geglu", kModelVariant},
    {"--gelu-tanh", kModelVariant},
    {"--glu-linear-offset", kModelVariant},
    {"--grad-reduce-in-bf16", kPrecision},
    {"--greedy", kInference},
    {"--grpo-clamp-eps-lower", kPostTraining},
    {"--grpo-clamp-eps-upper", kPostTraining},
    {"--grpo-default-temperature", kPostTraining},
    {"--grpo-default-top-p", kPostTraining},
    {"--grpo-entropy-term-weight", kPostTraining},
    {"--grpo-filter-groups-with-same-reward", kPostTraining},
    {"--grpo-group-size", kPostTraining},
    {"--grpo-iterations", kPostTraining},
    {"--grpo-kl-beta", kPostTraining},
    {"--grpo-prompts-per-step", kPostTraining},
    {"--hc-eps", kModelVariant},
    {"--hc-mult", kModelVariant},
    {"--hc-sinkhorn-iters", kModelVariant},
    {"--hccl-op-mode", kDeviceBackend},
    {"--head-lr-mult", kOtherFamily, "vision"},
    {"--heterogeneous-layers-config-encoded-json", kModelVariant},
    {"--heterogeneous-layers-config-path", kModelVariant},
    {"--hf-cfg-dir", kConvertTool},
    {"--hf-chat-template", kInference},
    {"--hf-datasets-params", kPreprocessTool},
    {"--hf-save-dir", kConvertTool},
    {"--hierarchical-context-parallel-sizes", kContextParallel},
    {"--hif8-amax-collect-interval", kFp8},
    {"--hif8-amax-history-len", kFp8},
    {"--hif8-grad-margin", kFp8},
    {"--hif8-input-margin", kFp8},
    {"--hif8-scale-update-interval", kFp8},
    {"--hif8-weight-margin", kFp8},
    {"--high-priority-stream-groups", kDeviceBackend},
    {"--history-turns", kInference},
    {"--hybrid-attention-ratio", kOtherFamily, "hybrid Mamba"},
    {"--hybrid-mlp-ratio", kOtherFamily, "hybrid Mamba"},
    {"--hybrid-override-pattern", kOtherFamily, "hybrid Mamba"},
    {"--ict-head-size", kOtherFamily},
    {"--ict-load", kOtherFamily},
    {"--image-tag-type", kOtherFamily, "multimodal"},
    {"--img-h", kOtherFamily},
    {"--img-w", kOtherFamily},
    {"--index-head-dim", kModelVariant},
    {"--index-n-heads", kModelVariant},
    {"--index-share-for-mtp-iteration", kModelVariant},
    {"--index-skip-topk-offset", kModelVariant},
    {"--index-topk", kModelVariant},
    {"--index-topk-freq", kModelVariant},
    {"--index-topk-pattern", kModelVariant},
    {"--indexer-batch-size", kOtherFamily},
    {"--indexer-log-interval", kOtherFamily},
    {"--indexer-loss-coeff", kModelVariant},
    {"--indexer-qk-quant-scheme", kModelVariant},
    {"--inference-batch-times-seqlen-threshold", kInference},
    {"--inference-coordinator-port", kInference},
    {"--inference-dynamic-batching", kInference},
    {"--inference-dynamic-batching-block-size", kInference},
    {"--inference-dynamic-batching-buffer-guaranteed-fraction", kInference},
    {"--inference-dynamic-batching-buffer-overflow-factor", kInference},
    {"--inference-dynamic-batching-buffer-size-gb", kInference},
    {"--inference-dynamic-batching-chunk-size", kInference},
    {"--inference-dynamic-batching-cuda-graph-max-tokens", kInference},
    {"--inference-dynamic-batching-cuda-graph-mixed-prefill-count", kInference},
    {"--inference-dynamic-batching-max-requests", kInference},
    {"--inference-dynamic-batching-max-requests-override", kInference},
    {"--inference-dynamic-batching-max-tokens", kInference},
    {"--inference-dynamic-batching-max-tokens-override", kInference},
    {"--inference-dynamic-batching-num-cuda-graphs", kInference},
    {"--inference-dynamic-batching-paused-buffer-size-gb", kInference},
    {"--inference-dynamic-batching-track-paused-request-events", kInference},
    {"--inference-dynamic-batching-unified-memory-level", kInference},
    {"--inference-logging-step-interval", kInference},
    {"--inference-max-batch-size", kInference},
    {"--inference-max-requests", kInference},
    {"--inference-max-seq-length", kInference},
    {"--inference-rng-tracker", kInference},
    {"--inference-tensor-model-parallel-size", kPostTraining},
    {"--inference-wandb-logging", kInference},
    {"--inference-wandb-logging-step-interval", kInference},
    {"--init-method-xavier-uniform", kModelVariant, "initialisation"},
    {"--init-model-with-meta-device", kMemory, "FSDP"},
    {"--init-norm-weight-in-fp32", kModelVariant},
    {"--inprocess-active-world-size", kResilience},
    {"--inprocess-barrier-timeout", kResilience},
    {"--inprocess-completion-timeout", kResilience},
    {"--inprocess-empty-cuda-cache", kResilience},
    {"--inprocess-granularity", kResilience},
    {"--inprocess-hard-timeout", kResilience},
    {"--inprocess-heartbeat-interval", kResilience},
    {"--inprocess-heartbeat-timeout", kResilience},
    {"--inprocess-last-call-wait", kResilience},
    {"--inprocess-max-iterations", kResilience},
    {"--inprocess-monitor-process-interval", kResilience},
    {"--inprocess-monitor-thread-interval", kResilience},
    {"--inprocess-progress-watchdog-interval", kResilience},
    {"--inprocess-restart", kResilience},
    {"--inprocess-soft-timeout", kResilience},
    {"--inprocess-termination-grace-time", kResilience},
    {"--input-embeds-norm", kModelVariant},
    {"--input-jitter", kMoe},
    {"--input-layernorm-in-fp32", kModelVariant},
    {"--instruction-template", kInference},
    {"--interleave-probs", kPreprocessTool},
    {"--interleave-sliding-window", kModelVariant},
    {"--is-hybrid-model", kOtherFamily, "hybrid Mamba"},
    {"--is-instruction-dataset", kFinetune},
    {"--is-pairwise-dataset", kPostTraining},
    {"--iter-per-epoch", kOtherFamily},
    {"--iterations-to-skip", kData},
    {"--jit-compile", kDeviceBackend, "NPU graph compilation"},
    {"--json-keys", kPreprocessTool},
    {"--keep-fp8-transpose-cache", kFp8},
    {"--keep-fp8-transpose-cache-when-using-custom-fsdp", kFp8},
    {"--keep-newlines", kPreprocessTool},
    {"--kitchen-config-file", kQuantization},
    {"--kitchen-recipe-number", kQuantization},
    {"--kl-coef", kPostTraining},
    {"--kl-loss-reduction", kQuantization},
    {"--kl-loss-weight", kQuantization},
    {"--kl-temperature", kQuantization},
    {"--kv-compress", kModelVariant},
    {"--kv-head-repeat-before-uly-alltoall", kContextParallel},
    {"--kv-lora-rank", kModelVariant},
    {"--lam", kPostTraining},
    {"--langrl-env-config", kPostTraining},
    {"--langrl-external-server", kPostTraining},
    {"--langrl-inference-server-conversation-template", kPostTraining},
    {"--langrl-inference-server-type", kPostTraining},
    {"--layerwise-disaggregated-training", kParallelVariant},
    {"--layerzero", kMemory, "MindSpeed LayerZero"},
    {"--layerzero-config", kMemory, "MindSpeed LayerZero"},
    {"--lazy-mpu-init", kPythonRuntime, "external process-group initialisation"},
    {"--legacy-tokenizer", kTokenizer},
    {"--linear-attention-freq", kModelVariant},
    {"--linear-key-head-dim", kModelVariant},
    {"--linear-num-key-heads", kModelVariant},
    {"--linear-num-value-heads", kModelVariant},
    {"--linear-value-head-dim", kModelVariant},
    {"--load-checkpoint-loosely", kCheckpoint},
    {"--load-main-params-from-ckpt", kCheckpoint},
    {"--local-rank", kLaunchCompat, "set by torch.distributed.launch; MPI gives the rank here"},
    {"--log-energy", kDeviceBackend, "GPU energy counters"},
    {"--log-max-attention-logit", kModelVariant, "QK-clip"},
    {"--log-progress", kObservability},
    {"--log-straggler", kObservability, "straggler detection"},
    {"--logging-level", kObservability},
    {"--long-factor", kModelVariant},
    {"--long-mscale", kModelVariant},
    {"--longrope-freqs-type", kModelVariant},
    {"--lora-alpha", kFinetune},
    {"--lora-ckpt-filter", kFinetune},
    {"--lora-fusion", kFinetune},
    {"--lora-load", kFinetune},
    {"--lora-modules-to-save", kFinetune},
    {"--lora-r", kFinetune},
    {"--lora-register-forward-hook", kFinetune},
    {"--lora-target-modules", kFinetune},
    {"--loss-chunk-size", kMemory},
    {"--loss-compute-mode", kMemory},
    {"--low-memory-resume", kCheckpoint},
    {"--lu-lora-final-layer-index", kFinetune},
    {"--lu-lora-lr", kFinetune},
    {"--lu-lora-lr-ratio", kFinetune},
    {"--main-grads-dtype", kPrecision},
    {"--main-params-dtype", kPrecision},
    {"--mamba-chunk-size", kOtherFamily},
    {"--mamba-d-conv", kOtherFamily},
    {"--mamba-d-ssm", kOtherFamily},
    {"--mamba-expand", kOtherFamily},
    {"--mamba-head-dim", kOtherFamily, "Mamba"},
    {"--mamba-num-groups", kOtherFamily, "Mamba"},
    {"--mamba-num-heads", kOtherFamily, "Mamba"},
    {"--mamba-state-dim", kOtherFamily, "Mamba"},
    {"--manual-gc", kPythonRuntime, "Python's garbage collector"},
    {"--manual-gc-interval", kPythonRuntime, "Python's garbage collector"},
    {"--map-keys", kPreprocessTool},
    {"--mask-factor", kOtherFamily},
    {"--mask-prob", kOtherFamily, "BERT"},
    {"--mask-type", kOtherFamily},
    {"--max-batch-size", kInference},
    {"--max-eval-samples", kInference},
    {"--max-length", kInference},
    {"--max-new-tokens", kInference},
    {"--max-prompt-length", kPostTraining},
    {"--max-samples", kPreprocessTool},
    {"--max-tokens-to-oom", kInference},
    {"--mbs-idx", kAutoTuning},
    {"--md5-validate", kPostTraining},
    {"--megatron-cp-in-bnsd", kContextParallel},
    {"--memory-fragmentation", kAutoTuning},
    {"--memory-snapshot-path", kPythonRuntime,
     "PyTorch's CUDA memory history; see --profile-with-memory"},
    {"--merge-group-keys", kPreprocessTool},
    {"--mg-save-dir", kConvertTool},
    {"--mid-level-dataset-surplus", kData},
    {"--missing-eos-penalty", kPostTraining},
    {"--mix-strategy", kPreprocessTool},
    {"--mla-fa-divide-qk", kModelVariant},
    {"--mla-fa-without-pad", kModelVariant},
    {"--mla-mm-split", kModelVariant},
    {"--mla-swap-core-attn-out", kModelVariant},
    {"--mla-up-proj-tp-overlap", kModelVariant},
    {"--mla-zero-memory", kModelVariant, "MLA"},
    {"--mlp-chunks-for-prefill", kInference},
    {"--model-parallel-size", kMegatronRemoved, "use --tensor-model-parallel-size"},
    {"--moe-adaptive-recompute-activation", kMemory},
    {"--moe-adaptive-recompute-activation-scale", kMemory},
    {"--moe-alltoall-mc2", kDeviceBackend, "Ascend MC2"},
    {"--moe-apply-probs-on-input", kMoe},
    {"--moe-bmm-mc2", kDeviceBackend, "Ascend MC2"},
    {"--moe-comm-aux-loss-coeff", kMoe},
    {"--moe-deepep-num-sms", kDeviceBackend, "DeepEP"},
    {"--moe-device-level-aux-loss-coeff", kMoe},
    {"--moe-dynamic-padding", kMoe},
    {"--moe-enable-deepep", kDeviceBackend, "DeepEP"},
    {"--moe-extended-tp", kMegatronNoop, "use --expert-tensor-parallel-size"},
    {"--moe-fb-overlap", kMoe},
    {"--moe-intermediate-size", kMoe, "MindSpeed-LLM's spelling of --moe-ffn-hidden-size"},
    {"--moe-model-type", kMoe},
    {"--moe-no-drop", kMoe},
    {"--moe-pad-experts-for-cuda-graph-inference", kInference},
    {"--moe-per-layer-logging", kMoe},
    {"--moe-revert-type-after-topk", kMoe},
    {"--moe-router-force-load-balancing", kMoe},
    {"--moe-router-fusion", kDeviceBackend},
    {"--moe-router-padding-for-fp8", kFp8},
    {"--moe-router-score-reuse", kMoe},
    {"--moe-train-capacity-factor", kMoe},
    {"--moe-unperm2-mem-optim", kMemory},
    {"--moe-unperm2-mem-optim-swap", kMemory},
    {"--moe-upcycling-granularity", kMoe, "dense-to-MoE upcycling"},
    {"--moe-use-legacy-grouped-gemm", kDeviceBackend, "GroupedMLP vs TEGroupedMLP"},
    {"--moe-use-sinkhorn", kMoe},
    {"--moe-use-upcycling", kMoe, "dense-to-MoE upcycling"},
    {"--moe-zerc", kMoe},
    {"--moe-zero-memory", kMemory},
    {"--moe-zero-memory-num-layers", kMemory},
    {"--mrope-section", kOtherFamily, "multimodal rope"},
    {"--mscale", kModelVariant},
    {"--mscale-all-dim", kModelVariant},
    {"--mtp-loss-scaling-factor", kModelVariant},
    {"--mtp-mem-efficient-logits", kModelVariant},
    {"--mtp-num-layers", kModelVariant},
    {"--mtp-spec", kModelVariant},
    {"--multi-head-latent-attention", kModelVariant},
    {"--multi-latent-attention", kModelVariant},
    {"--multiple-validation-sets", kData},
    {"--muon-coefficient-type", kOptimizer},
    {"--muon-extra-scale-factor", kOptimizer},
    {"--muon-fp32-matmul-prec", kOptimizer},
    {"--muon-momentum", kOptimizer},
    {"--muon-nesterov", kOptimizer},
    {"--muon-no-split-qkv", kOptimizer},
    {"--muon-num-ns-steps", kOptimizer},
    {"--muon-scalar-optimizer", kOptimizer},
    {"--muon-scale-mode", kOptimizer},
    {"--muon-tp-mode", kOptimizer},
    {"--muon-use-nesterov", kOptimizer},
    {"--n-group", kMoe, "MindSpeed-LLM's old spelling of --moe-router-num-groups"},
    {"--n-hash-layers", kMoe},
    {"--n-samples-per-prompt", kPostTraining},
    {"--n-subs", kPreprocessTool},
    {"--nccl-all-reduce-for-prefill", kInference},
    {"--nccl-communicator-config-path", kDeviceBackend},
    {"--nd1-dim1-size", kParallelVariant},
    {"--nd2-dim1-size", kParallelVariant},
    {"--neat-pack", kFinetune},
    {"--no-align-grad-reduce", kParallelCore},
    {"--no-align-param-gather", kParallelCore},
    {"--no-async-tensor-model-parallel-allreduce", kMegatronNoop},
    {"--no-barrier-with-level-1-timing", kObservability, "with --timing-log-level 1"},
    {"--no-chat-template", kInference},
    {"--no-ckpt-fully-parallel-save", kCheckpoint},
    {"--no-clone-scatter-output-in-embedding", kParallelCore},
    {"--no-create-attention-mask-in-dataloader", kData},
    {"--no-cut-token", kFinetune},
    {"--no-data-sharding", kOtherFamily},
    {"--no-defer-p2p-send-wait", kPipeline},
    {"--no-enable-linear-qkv", kModelVariant},
    {"--no-fp8-wgrad", kFp8},
    {"--no-gradient-reduce-div-fusion", kParallelCore},
    {"--no-hif8-step-recovery", kFp8},
    {"--no-inference-wandb-logging", kInference},
    {"--no-initialization", kCheckpoint},
    {"--no-langrl-external-server", kPostTraining},
    {"--no-manual-gc-eval", kPythonRuntime, "Python's garbage collector"},
    {"--no-mmap-bin-files", kData},
    {"--no-moe-npu-fast-ops", kDeviceBackend},
    {"--no-one-logger", kExternalService},
    {"--no-overlap-p2p-communication", kPipeline},
    {"--no-pad-to-seq-lengths", kFinetune},
    {"--no-pin-cpu-grads", kMemory},
    {"--no-pin-cpu-params", kMemory},
    {"--no-post-layer-norm", kModelVariant},
    {"--no-qad-enable", kQuantization},
    {"--no-rl-calculate-intra-group-similarity", kPostTraining},
    {"--no-rl-inference-logprobs-is-correction", kPostTraining},
    {"--no-rl-offload-inference-model-weights-when-idle", kPostTraining},
    {"--no-rl-offload-kv-cache-during-training", kPostTraining},
    {"--no-rl-partial-rollouts", kPostTraining},
    {"--no-rl-remove-kv-cache-during-training", kPostTraining},
    {"--no-rl-reset-cuda-graphs", kPostTraining},
    {"--no-rl-skip-bos-token", kPostTraining},
    {"--no-rl-training-cuda-graphs", kPostTraining},
    {"--no-rl-use-sequence-packing", kPostTraining},
    {"--no-rl-verify-model-weights-swap", kPostTraining},
    {"--no-rope-freq", kModelVariant},
    {"--no-scatter-gather-tensors-in-pipeline", kPipeline},
    {"--no-shuffle", kData},
    {"--no-strict-fsdp-dtensor-load", kCheckpoint},
    {"--no-use-gmm-fp8", kDeviceBackend},
    {"--no-use-rts", kMoe},
    {"--no-use-sparse-c8-indexer", kModelVariant},
    {"--no-use-tokenizer-model-from-checkpoint-args", kCheckpoint},
    {"--no-weight-decay-cond-type", kOptimizer},
    {"--noisy-gate-policy", kMoe},
    {"--non-persistent-ckpt-type", kCheckpoint},
    {"--non-persistent-global-ckpt-dir", kCheckpoint},
    {"--non-persistent-local-ckpt-algo", kCheckpoint},
    {"--non-persistent-local-ckpt-dir", kCheckpoint},
    {"--non-persistent-save-interval", kCheckpoint},
    {"--norm-topk-prob", kMoe},
    {"--npu-datadump", kDeviceBackend},
    {"--num-channels", kOtherFamily},
    {"--num-classes", kOtherFamily},
    {"--num-dataset-builder-threads", kData},
    {"--num-distributed-optimizer-instances", kParallelCore},
    {"--num-gpus-for-infer", kPostTraining},
    {"--num-gpus-for-train", kPostTraining},
    {"--num-layer-list", kStages},
    {"--num-layers-at-end-in-bf16", kFp8},
    {"--num-layers-at-start-in-bf16", kFp8},
    {"--num-samples-per-step", kPostTraining},
    {"--num-zero-experts", kMoe},
    {"--o-groups", kModelVariant},
    {"--o-lora-rank", kModelVariant},
    {"--object-storage-cache-path", kData},
    {"--offload-optimizer-states", kMemory},
    {"--one-logger-async", kExternalService},
    {"--one-logger-project", kExternalService},
    {"--one-logger-run-name", kExternalService},
    {"--only-convert-last-checkpoint", kConvertTool},
    {"--onnx-safe", kInference, "ONNX export"},
    {"--op-cal-tflops", kObservability},
    {"--optimize-recomp-communication-level", kMemory},
    {"--optimize-recomp-communication-status", kMemory},
    {"--optimize-send-recv-comm", kPipeline},
    {"--optimize-vpp-send-recv-comm", kPipeline},
    {"--optimized-mbs-list", kAutoTuning},
    {"--optimized-mbs-mode", kAutoTuning},
    {"--optimizer-cpu-offload", kMemory},
    {"--optimizer-offload-fraction", kMemory},
    {"--origin-postprocess", kInference},
    {"--original-seq-len", kModelVariant},
    {"--outer-dp-sharding-strategy", kMemory, "FSDP"},
    {"--output-bert-embeddings", kOtherFamily, "BERT"},
    {"--output-layer-slice-num", kModelVariant},
    {"--output-logit-softcapping", kModelVariant},
    {"--output-multiplier-scale", kModelVariant},
    {"--output-prefix", kPreprocessTool},
    {"--overlap-cpu-optimizer-d2h-h2d", kMemory},
    {"--overlap-moe-expert-parallel-comm", kMoe},
    {"--overlap-p2p-communication-warmup-flush", kPipeline},
    {"--overlap-param-gather-with-optimizer-step", kParallelCore},
    {"--override-opt-param-scheduler", kCheckpoint},
    {"--override-opt_param-scheduler", kCheckpoint},
    {"--overwrite-cache", kPreprocessTool},
    {"--pack", kPreprocessTool},
    {"--pad-to-multiple-of", kFinetune},
    {"--pad-vocab-size-to", kPreprocessTool},
    {"--padded-base-length", kModelVariant},
    {"--padded-samples", kFinetune},
    {"--param-and-grad-buffer-pad", kParallelCore},
    {"--partial-rotary-factor", kModelVariant},
    {"--patch-dim", kOtherFamily},
    {"--per-dataset-sequences-path", kData},
    {"--per-split-data-args-path", kData},
    {"--perform-rl-step", kPostTraining},
    {"--phase-transition-iterations", kData},
    {"--pipe-experts-multi-data", kMoe},
    {"--pipe-experts-multi-stream", kMoe},
    {"--pipeline-model-parallel-comm-backend", kDeviceBackend},
    {"--pipeline-model-parallel-layout", kStages},
    {"--pipeline-model-parallel-split-rank", kOtherFamily, "encoder-decoder"},
    {"--pipeline-num-transformer-layers", kStages},
    {"--post-norm", kModelVariant},
    {"--pp-schedule-list", kAutoTuning},
    {"--ppo-epochs", kPostTraining},
    {"--ppo-mini-batch-size", kPostTraining},
    {"--pref-ftx", kPostTraining},
    {"--pretrained-checkpoint", kCheckpoint},
    {"--print-expert-load", kMoe},
    {"--profile-data-simplification", kObservability},
    {"--profile-export-type", kObservability},
    {"--prompt-type", kFinetune},
    {"--prompt-type-path", kFinetune},
    {"--q-lora-rank", kModelVariant},
    {"--qad-enable", kQuantization},
    {"--qad-teacher-load", kQuantization},
    {"--qat-quant-block-size", kQuantization},
    {"--qat-scheme", kQuantization},
    {"--qat-scope", kFp8},
    {"--qk-clip", kModelVariant},
    {"--qk-clip-alpha", kModelVariant},
    {"--qk-clip-threshold", kModelVariant},
    {"--qk-head-dim", kModelVariant},
    {"--qk-l2-norm", kModelVariant},
    {"--qk-layernorm", kModelVariant},
    {"--qk-nope-head-dim", kModelVariant},
    {"--qk-pos-emb-head-dim", kModelVariant},
    {"--qk-rope-head-dim", kModelVariant},
    {"--qlora", kFinetune},
    {"--qlora-save-dequantize", kFinetune},
    {"--quant-grads", kMemory},
    {"--quant-states", kMemory},
    {"--query-in-block-prob", kOtherFamily},
    {"--query-pre-attn-scalar", kModelVariant},
    {"--quick-geglu", kModelVariant},
    {"--reasoning-effort", kPreprocessTool},
    {"--recompute-mla-up-proj", kModelVariant, "MLA"},
    {"--recompute-module-list", kAutoTuning},
    {"--recompute-type", kAutoTuning},
    {"--record-memory-history", kPythonRuntime,
     "PyTorch's CUDA memory history; see --profile-with-memory"},
    {"--ref-model", kPostTraining},
    {"--refer-model-iter", kPostTraining},
    {"--refit-method", kPostTraining},
    {"--relative-attention-max-distance", kOtherFamily, "T5"},
    {"--relative-attention-num-buckets", kOtherFamily, "T5"},
    {"--replication", kResilience},
    {"--replication-factor", kResilience},
    {"--replication-jump", kResilience},
    {"--rerun-mode", kResilience},
    {"--reset-bucket-group-order", kParallelCore},
    {"--result-rejected-tracker-filename", kResilience, "rerun state machine"},
    {"--retriever-report-topk-accuracies", kOtherFamily},
    {"--retriever-score-scaling", kOtherFamily},
    {"--retriever-seq-length", kOtherFamily, "biencoder"},
    {"--retro-add-retriever", kOtherFamily},
    {"--retro-attention-gate", kOtherFamily},
    {"--retro-cyclic-train-iters", kOtherFamily},
    {"--retro-encoder-attention-dropout", kOtherFamily},
    {"--retro-encoder-hidden-dropout", kOtherFamily},
    {"--retro-encoder-layers", kOtherFamily},
    {"--retro-no-verify-neighbor-count", kOtherFamily},
    {"--retro-num-neighbors", kOtherFamily},
    {"--retro-num-retrieved-chunks", kOtherFamily},
    {"--retro-project-dir", kOtherFamily},
    {"--return-document-ids", kData},
    {"--reuse-grad-buf-for-mxfp8-param-ag", kFp8},
    {"--reward-model", kPostTraining},
    {"--reward-tokens", kPostTraining},
    {"--rl-calculate-intra-group-similarity", kPostTraining},
    {"--rl-default-temperature", kPostTraining},
    {"--rl-default-top-k", kPostTraining},
    {"--rl-default-top-p", kPostTraining},
    {"--rl-importance-sampling-truncation-coef", kPostTraining},
    {"--rl-inference-expert-model-parallel-size", kPostTraining},
    {"--rl-inference-expert-tensor-model-parallel-size", kPostTraining},
    {"--rl-inference-logprobs-is-correction", kPostTraining},
    {"--rl-inference-model-unified-memory-level", kPostTraining},
    {"--rl-inference-pipeline-model-parallel-size", kPostTraining},
    {"--rl-inference-tensor-model-parallel-size", kPostTraining},
    {"--rl-offload-inference-model-weights-when-idle", kPostTraining},
    {"--rl-offload-kv-cache-during-training", kPostTraining},
    {"--rl-offload-optimizer-during-inference", kPostTraining},
    {"--rl-parallel-generation-tasks", kPostTraining},
    {"--rl-partial-rollouts", kPostTraining},
    {"--rl-prompts-per-eval", kPostTraining},
    {"--rl-remove-kv-cache-during-training", kPostTraining},
    {"--rl-reset-cuda-graphs", kPostTraining},
    {"--rl-sequence-packing-algo", kPostTraining},
    {"--rl-sequence-packing-bin-size", kPostTraining},
    {"--rl-sequence-packing-max-sequences-per-bin", kPostTraining},
    {"--rl-skip-bos-token", kPostTraining},
    {"--rl-training-cuda-graphs", kPostTraining},
    {"--rl-use-sequence-packing", kPostTraining},
    {"--rl-verify-model-weights-swap", kPostTraining},
    {"--rmsnorm-weight-in-fp32", kModelVariant},
    {"--rollout-batch-size", kPostTraining},
    {"--rope-factor", kModelVariant},
    {"--rope-scaling-beta-fast", kModelVariant},
    {"--rope-scaling-beta-slow", kModelVariant},
    {"--rope-scaling-mscale", kModelVariant},
    {"--rope-scaling-mscale-all-dim", kModelVariant},
    {"--rope-scaling-original-max-position-embeddings", kModelVariant},
    {"--rope-theta", kModelVariant},
    {"--rope-type", kModelVariant},
    {"--rotary-interleaved", kModelVariant},
    {"--rotary-percent", kModelVariant},
    {"--rotary-scaling-factor", kModelVariant},
    {"--routed-scaling-factor", kMoe,
     "MindSpeed-LLM's old spelling of --moe-router-topk-scaling-factor"},
    {"--router-gating-in-fp32", kMoe},
    {"--run-workload-inspector-server", kExternalService},
    {"--s3-cache-path", kData},
    {"--sample-rate", kData},
    {"--save-layer-by-layer", kConvertTool},
    {"--save-lora-to-hf", kConvertTool},
    {"--save-memory-ratio", kAutoTuning},
    {"--save-retain-interval", kCheckpoint},
    {"--scale-depth", kModelVariant, "MiniCPM"},
    {"--scale-emb", kModelVariant, "MiniCPM"},
    {"--scale-fmt", kModelVariant},
    {"--script-data-dir", kPreprocessTool},
    {"--seq-aux", kMoe},
    {"--sft", kFinetune},
    {"--sft-tokenizer-prompt-format", kFinetune},
    {"--sgd-momentum", kOptimizer},
    {"--shape-order", kContextParallel},
    {"--share-kvstates", kModelVariant},
    {"--shared-expert-gate-output-dimension", kMoe},
    {"--sharp-enabled-group", kDeviceBackend},
    {"--short-factor", kModelVariant},
    {"--short-mscale", kModelVariant},
    {"--short-seq-prob", kOtherFamily, "BERT"},
    {"--shuffle-minibatch", kPostTraining},
    {"--skip-bias-add", kModelVariant},
    {"--sliding-window", kModelVariant},
    {"--sliding-window-size", kModelVariant},
    {"--smart-swap", kMemory},
    {"--softmax-type", kModelVariant},
    {"--spec", kPythonRuntime, "a Python layer-spec module"},
    {"--special-tokens", kTokenizer},
    {"--split-sentences", kPreprocessTool},
    {"--squared-relu", kModelVariant},
    {"--stage", kPostTraining},
    {"--start-weight-decay", kOptimizer},
    {"--straggler-ctrlr-port", kObservability, "straggler detection"},
    {"--straggler-minmax-count", kObservability, "straggler detection"},
    {"--streaming", kPreprocessTool},
    {"--suggested-communication-unit-size", kParallelCore},
    {"--swap-delay", kMemory},
    {"--swap-layer-input", kMemory},
    {"--swap-optimizer-sizes", kMemory},
    {"--swiglu-limit", kModelVariant},
    {"--swin-backbone-type", kOtherFamily},
    {"--symmetric-ar-type", kDeviceBackend},
    {"--task", kInference},
    {"--task-data-path", kInference},
    {"--te-comparison-with-bf16", kDeviceBackend},
    {"--te-comparison-with-cpu", kDeviceBackend},
    {"--te-gmm-mode", kDeviceBackend},
    {"--te-precision-config-file", kFp8},
    {"--te-rng-tracker", kDeviceBackend, "Transformer Engine"},
    {"--temperature", kInference},
    {"--test-mode", kPythonRuntime, "Megatron's own CI mode"},
    {"--tiktoken-num-special-tokens", kTokenizer},
    {"--tiktoken-pattern", kTokenizer},
    {"--tiktoken-special-tokens", kTokenizer},
    {"--timing-log-option", kObservability},
    {"--titles-data-path", kOtherFamily},
    {"--tokenizer-hf-include-special-tokens", kTokenizer},
    {"--tokenizer-hf-use-fast", kTokenizer},
    {"--tokenizer-kwargs", kTokenizer},
    {"--tokenizer-metadata", kTokenizer},
    {"--tokenizer-not-use-fast", kTokenizer},
    {"--tokenizer-padding-side", kFinetune},
    {"--tokenizer-prompt-format", kOtherFamily, "multimodal"},
    {"--tokenizer-sentencepiece-legacy", kTokenizer},
    {"--tokenizer-special-tokens", kTokenizer},
    {"--top-k", kInference},
    {"--top-p", kInference},
    {"--topk-group", kMoe, "MindSpeed-LLM's old spelling of --moe-router-group-topk"},
    {"--topk-softmax-in-fp32", kMoe},
    {"--torch-fsdp2-no-reshard-after-forward", kMemory, "FSDP2"},
    {"--tp-comm-bootstrap-backend", kDeviceBackend},
    {"--tp-comm-overlap", kDeviceBackend, "Transformer Engine"},
    {"--tp-comm-overlap-cfg", kDeviceBackend, "Transformer Engine"},
    {"--tp-comm-overlap-rs-dgrad", kDeviceBackend, "Transformer Engine"},
    {"--train-sync-interval", kDeviceBackend, "host/device synchronisation"},
    {"--trans-hot-expert-group-num", kMoe},
    {"--trust-remote-code", kTokenizer},
    {"--ttp-dump-dir", kResilience},
    {"--ttp-dump-timeout-seconds", kResilience},
    {"--ttp-enabled", kResilience},
    {"--ttp-heartbeat-interval-ms", kResilience},
    {"--ttp-heartbeat-timeout-ms", kResilience},
    {"--ttp-max-dump-ckpt-to-keep", kResilience},
    {"--ttp-max-missed-count", kResilience},
    {"--ttp-save-optimizer", kResilience},
    {"--ttp-save-rng", kResilience},
    {"--ttp-server-ip", kResilience},
    {"--ttp-server-port", kResilience},
    {"--ttp-wait-dump-file-timeout", kResilience},
    {"--use-batch-invariant-ops", kDeviceBackend},
    {"--use-checkpoint-args", kCheckpoint},
    {"--use-checkpoint-opt-param-scheduler", kCheckpoint},
    {"--use-checkpoint-opt_param-scheduler", kCheckpoint},
    {"--use-deter-comp", kLaunchCompat, "MindSpeed-LLM: use --deterministic-mode"},
    {"--use-dist-ckpt", kMegatronNoop, "see --ckpt-format"},
    {"--use-dsa-absorb", kModelVariant},
    {"--use-ema", kOptimizer},
    {"--use-flash-attn-npu-batch-invariant", kDeviceBackend},
    {"--use-fused-lightning-indexer", kModelVariant},
    {"--use-fused-lightning-indexer-kl-loss", kModelVariant},
    {"--use-fused-lightning-indexer-loss", kModelVariant},
    {"--use-fused-mhc", kModelVariant},
    {"--use-fused-mlp", kDeviceBackend},
    {"--use-fused-sparse-flash-attention", kModelVariant},
    {"--use-fused-weighted-squared-relu", kModelVariant},
    {"--use-glm-rope", kModelVariant},
    {"--use-global-aux-loss", kModelVariant},
    {"--use-kv-cache", kInference},
    {"--use-legacy-models", kPythonRuntime,
     "Megatron's legacy models; the model here is Megatron core's GPTModel"},
    {"--use-legacy-static-engine", kInference},
    {"--use-mc2", kDeviceBackend, "Ascend MC2"},
    {"--use-megatron-fsdp", kMemory, "FSDP"},
    {"--use-mp-args-from-checkpoint-args", kCheckpoint},
    {"--use-naive-l2norm", kModelVariant},
    {"--use-nanopipe", kPipeline, "MindSpeed nanopipe"},
    {"--use-nanopipe-swap", kPipeline, "MindSpeed nanopipe"},
    {"--use-nccl-ub", kDeviceBackend},
    {"--use-nd-matmul", kParallelVariant},
    {"--use-one-sent-docs", kOtherFamily},
    {"--use-persistent-ckpt-worker", kCheckpoint},
    {"--use-pipe-experts", kMoe},
    {"--use-precision-aware-optimizer", kPrecision},
    {"--use-pytorch-profiler", kObservability, "use --profile"},
    {"--use-ring-exchange-p2p", kPipeline},
    {"--use-sharp", kDeviceBackend},
    {"--use-sparse-flash-attn", kModelVariant},
    {"--use-te-activation-func", kDeviceBackend, "Transformer Engine"},
    {"--use-torch-fsdp2", kMemory, "FSDP2"},
    {"--use-torch-optimizer-for-cpu-offload", kMemory},
    {"--use-triton-gdn", kDeviceBackend, "Triton"},
    {"--use-triton-mhc", kDeviceBackend, "Triton"},
    {"--use-triton-swiglu-limit", kDeviceBackend, "Triton"},
    {"--use-wandb", kExternalService},
    {"--v-head-dim", kModelVariant},
    {"--virtual-data-parallel-size", kParallelVariant},
    {"--virtual-optimizer", kMemory},
    {"--vision-backbone-type", kOtherFamily},
    {"--vision-pretraining", kOtherFamily},
    {"--vision-pretraining-type", kOtherFamily},
    {"--wandb-entity", kExternalService},
    {"--wandb-exp-name", kExternalService},
    {"--wandb-project", kExternalService},
    {"--wandb-save-dir", kExternalService},
    {"--warmup", kMegatronRemoved, "use --lr-warmup-fraction or --lr-warmup-iters"},
    {"--weight-decay-incr-style", kOptimizer},
    {"--wgrad-deferral-limit", kParallelCore},
    {"--window-attn-skip-freq", kModelVariant},
    {"--workers", kPreprocessTool},
    {"--yaml-cfg", kPythonRuntime, "a YAML config of Megatron objects"},
    {"--yarn-scaling-factor", kModelVariant},
};

// Registered flags that change nothing here, or map onto this engine: what each means here.
struct Acceptance {
  std::string_view name;
  std::string_view meaning;
};

constexpr Acceptance kAccepted[] = {
    {"--ai-framework",
     "pytorch and mindspore alike: this native engine serves the launch scripts of either"},
    {"--apply-query-key-layer-scaling",
     "attention scores are fp32 here: the 1/layer pre-scale and layer post-scale cancel exactly"},
    {"--attention-softmax-in-fp32", "the attention softmax always runs in fp32 here"},
    {"--distributed-backend",
     "nccl and gloo alike: MPI carries every collective and point-to-point transfer"},
    {"--handler-name",
     "the datasets are read as the indexed datasets tools/preprocess_data --handler-name wrote "
     "(the "
     "name is checked; MindSpeed-LLM would preprocess a raw --data-path first)"},
    {"--log-batch-size-to-tensorboard",
     "'batch-size' is always written to TensorBoard, as in Megatron core_v0.12"},
    {"--log-throughput", "throughput (TFLOP/s) is always in the iteration line here"},
    {"--moe-router-dtype", "only fp32, which the router always computes in here"},
    {"--no-load-rng", "mindspeed-cpp keeps no RNG state (dropout is keyed by seed and sample)"},
    {"--no-position-embedding",
     "Megatron's deprecated spelling, accepted with --position-embedding-type rope (which has no "
     "learned position embedding), as Megatron does"},
    {"--no-save-rng", "mindspeed-cpp keeps no RNG state (dropout is keyed by seed and sample)"},
    {"--num-workers",
     "samples are read in the training process (memory-mapped): no worker processes, same data"},
    {"--transformer-impl",
     "local and transformer_engine both select the native fused kernels (as MindSpeed maps "
     "Transformer Engine onto its own)"},
    {"--use-cpu-initialization",
     "each parameter is always drawn whole in host memory and sliced for its rank, as the flag "
     "does"},
    {"--use-mcore-models",
     "ignored by Megatron core_v0.12 too: the model is Megatron core's GPTModel"},
};

// Flags only mindspeed-cpp has.
constexpr EngineFlag kEngineFlags[] = {
    {"--allow-tf32", "fp32 GEMMs on TF32 tensor cores (--device cuda)"},
    {"--auto-settings-device-tflops",
     "auto settings: dense GEMM TFLOP/s of one rank of the target cluster"},
    {"--auto-settings-inter-node-bandwidth",
     "auto settings: GB/s per rank between nodes of the target"},
    {"--auto-settings-intra-node-bandwidth",
     "auto settings: GB/s per rank within a node of the target"},
    {"--auto-settings-iters", "auto settings: iterations of each profiling and candidate run"},
    {"--auto-settings-memory-cap", "auto settings: MB one rank may use"},
    {"--auto-settings-rounds", "auto settings: interleaved rounds over the finalists"},
    {"--auto-settings-top-k", "auto settings: finalists of the mixed and black searches"},
    {"--device",
     "cpu, cuda (one GPU per rank) or cpu-fenced (device memory fenced off from host code)"},
    {"--dry-run-world-size", "print every process group for this world size and exit"},
    {"--metrics-file", "JSON lines with the numbers of the log lines (tools/plot_metrics.sh)"},
    {"--num-threads", "OpenMP threads per rank"},
    {"--peak-tflops", "per-rank peak TFLOP/s for the MFU column"},
    {"--swap-dir", "directory of the swap tier (--swap-attention, --swap-optimizer)"},
};

template <typename T, std::size_t N>
constexpr bool sorted_by_name(const T (&rows)[N]) {
  for (std::size_t i = 1; i < N; ++i) {
    if (!(rows[i - 1].name < rows[i].name)) return false;
  }
  return true;
}
static_assert(sorted_by_name(kRefusals), "kRefusals must be sorted by name without duplicates");
static_assert(sorted_by_name(kAccepted), "kAccepted must be sorted by name without duplicates");
static_assert(sorted_by_name(kEngineFlags),
              "kEngineFlags must be sorted by name without duplicates");

template <typename T, std::size_t N>
const T* find_row(const T (&rows)[N], std::string_view name) {
  const T* end = std::end(rows);
  const T* it = std::lower_bound(std::begin(rows), end, name,
                                 [](const T& row, std::string_view n) { return row.name < n; });
  return it != end && it->name == name ? it : nullptr;
}

const RefusalCategoryInfo& info(RefusalCategory category) {
  return kCategories[static_cast<std::size_t>(category)];
}

std::string refusal_text(const Refusal& r) {
  std::string text(info(r.category).reason);
  if (!r.note.empty()) text.append("; ").append(r.note);
  return text;
}

// Markdown table cells: no pipes or line breaks.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string_view flag_decision_name(FlagDecision decision) {
  switch (decision) {
    case FlagDecision::kImplemented:
      return "implemented";
    case FlagDecision::kAccepted:
      return "accepted";
    case FlagDecision::kRefused:
      return "refused";
  }
  return "?";
}

std::span<const RefusalCategoryInfo> refusal_categories() { return kCategories; }

std::span<const EngineFlag> engine_only_flags() { return kEngineFlags; }

std::string_view flag_source_display_name(std::string_view source) {
  if (source == "megatron") return "Megatron-LM";
  if (source == "mindspeed") return "MindSpeed";
  if (source == "mindspeed-llm") return "MindSpeed-LLM";
  return "mindspeed-cpp";
}

std::vector<FlagRuling> flag_catalogue(const std::vector<std::string>& registered) {
  const std::set<std::string_view> reg(registered.begin(), registered.end());
  std::vector<FlagRuling> out;
  for (const KnownFlag& f : known_flags()) {
    FlagRuling r;
    r.name = f.name;
    r.source = f.source;
    r.group = f.group;
    if (reg.count(f.name) != 0) {
      if (const Acceptance* a = find_row(kAccepted, f.name)) {
        r.decision = FlagDecision::kAccepted;
        r.reason = std::string(a->meaning);
      }
    } else {
      r.decision = FlagDecision::kRefused;
      if (const Refusal* refusal = find_row(kRefusals, f.name)) {
        r.category = refusal->category;
        r.reason = refusal_text(*refusal);
        r.home = info(refusal->category).home;
      } else {
        r.reason = "not implemented yet (no decision catalogued)";
      }
    }
    out.push_back(std::move(r));
  }
  for (const EngineFlag& e : kEngineFlags) {
    FlagRuling r;
    r.name = e.name;
    r.source = "mindspeed-cpp";
    r.group = "mindspeed-cpp";
    r.reason = std::string(e.description);
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(),
            [](const FlagRuling& a, const FlagRuling& b) { return a.name < b.name; });
  return out;
}

std::vector<FlagRuling> flag_catalogue() { return flag_catalogue(registered_flag_names()); }

std::vector<std::string> flag_catalogue_problems(const std::vector<std::string>& registered) {
  std::vector<std::string> problems;
  const std::set<std::string_view> reg(registered.begin(), registered.end());
  const std::string fix_where = " (src/cli/flag_catalogue.cpp)";
  for (const std::string& name : registered) {
    const bool known = find_known_flag(name) != nullptr;
    const bool ours = find_row(kEngineFlags, name) != nullptr;
    if (!known && !ours) {
      problems.push_back(name +
                         " is registered but in no catalogue: add it to known_flags.cpp if "
                         "Megatron-LM/MindSpeed/MindSpeed-LLM define it, else to kEngineFlags" +
                         fix_where);
    }
    if (find_row(kRefusals, name) != nullptr) {
      problems.push_back(name +
                         " is registered now, but its refusal row is still there (stale): "
                         "delete it from kRefusals, or move it to kAccepted if the flag is a "
                         "no-op here" +
                         fix_where);
    }
  }
  for (const KnownFlag& f : known_flags()) {
    if (reg.count(f.name) == 0 && find_row(kRefusals, f.name) == nullptr) {
      problems.push_back(std::string(f.name) +
                         " has no decision: register it in arguments.cpp or add a kRefusals row "
                         "with its reason" +
                         fix_where);
    }
  }
  for (const Refusal& r : kRefusals) {
    if (find_known_flag(r.name) == nullptr) {
      problems.push_back(std::string(r.name) + " has a refusal row but is not in known_flags.cpp");
    }
    if (find_row(kAccepted, r.name) != nullptr) {
      problems.push_back(std::string(r.name) + " is both refused and accepted" + fix_where);
    }
  }
  for (const Acceptance& a : kAccepted) {
    if (find_known_flag(a.name) == nullptr) {
      problems.push_back(std::string(a.name) + " is accepted but not in known_flags.cpp");
    }
    if (reg.count(a.name) == 0) {
      problems.push_back(std::string(a.name) +
                         " is catalogued as accepted, but pretrain_gpt does not register it: "
                         "register it in arguments.cpp or make its kAccepted row a kRefusals row" +
                         fix_where);
    }
  }
  for (const EngineFlag& e : kEngineFlags) {
    if (find_known_flag(e.name) != nullptr) {
      problems.push_back(std::string(e.name) +
                         " is a Megatron-LM/MindSpeed flag (known_flags.cpp), not mindspeed-cpp's "
                         "own: delete its kEngineFlags row" +
                         fix_where);
    }
    if (reg.count(e.name) == 0) {
      problems.push_back(
          std::string(e.name) +
          " is listed as a mindspeed-cpp flag but pretrain_gpt does not register it" + fix_where);
    }
  }
  return problems;
}

std::string flag_refusal_reason(std::string_view name) {
  const Refusal* r = find_row(kRefusals, name);
  if (r == nullptr) return "";
  return refusal_text(*r) + " [" + std::string(info(r->category).home) + "]";
}

std::string flag_refusal_message(std::string_view name) {
  const KnownFlag* f = find_known_flag(name);
  if (f == nullptr) return "";
  std::string message = std::string(name) + " is a " +
                        std::string(flag_source_display_name(f->source)) + " flag (" +
                        std::string(f->group) + ") that mindspeed-cpp does not implement";
  const std::string reason = flag_refusal_reason(name);
  message += reason.empty() ? " yet" : ": " + reason;
  return message + "; remove it from the command line (docs/flags.md lists every flag)";
}

std::string flag_catalogue_markdown() {
  const std::vector<FlagRuling> rulings = flag_catalogue();
  std::map<FlagDecision, int> decisions;
  std::map<RefusalCategory, int> categories;
  std::map<std::string_view, int> sources;
  for (const FlagRuling& r : rulings) {
    ++decisions[r.decision];
    ++sources[r.source];
    if (r.decision == FlagDecision::kRefused) ++categories[r.category];
  }
  std::string md;
  md += "# Megatron-LM, MindSpeed and MindSpeed-LLM flags in mindspeed-cpp\n\n";
  md +=
      "<!-- Generated by tools/flag_catalogue from src/cli/flag_catalogue.cpp, "
      "src/cli/known_flags.cpp and the flags\n"
      "     pretrain_gpt registers (src/cli/arguments.cpp); do not edit. Regenerate with\n"
      "     cmake --build --preset ci --target flag_catalogue && build/ci/tools/flag_catalogue "
      "> docs/flags.md -->\n\n";
  md +=
      "Every flag of Megatron-LM's `megatron/training/arguments.py` (core_v0.12.1, and the literal "
      "flags of newer\nrevisions), of MindSpeed (`mindspeed/arguments.py`, its features manager) "
      "and of MindSpeed-LLM\n(`mindspeed_llm/training/arguments.py`, its features manager), with "
      "what `pretrain_gpt` does with it:\n\n";
  md += "- **implemented**: registered, and does what Megatron / MindSpeed do;\n";
  md +=
      "- **accepted**: registered, but changes nothing here or maps onto this engine (the reason "
      "says how);\n";
  md +=
      "- **refused**: not registered; `pretrain_gpt` stops before anything is built, naming the "
      "reason and the\n  roadmap issue or future area it belongs to.\n\n";
  md +=
      "`pretrain_gpt --help` lists the accepted and refused flags with their reasons. A flag "
      "neither project defines\nis an unknown flag (with the nearest known name).\n\n";
  md += "| decision | flags |\n|---|---:|\n";
  for (FlagDecision d :
       {FlagDecision::kImplemented, FlagDecision::kAccepted, FlagDecision::kRefused}) {
    md += "| " + std::string(flag_decision_name(d)) + " | " + std::to_string(decisions[d]) + " |\n";
  }
  md += "| all | " + std::to_string(rulings.size()) + " |\n\n";
  md += "| source | flags |\n|---|---:|\n";
  for (const auto& [source, count] : sources) {
    md += "| " + std::string(flag_source_display_name(source)) + " | " + std::to_string(count) +
          " |\n";
  }
  md += "\n## Why flags are refused\n\n";
  md += "| reason | roadmap | flags |\n|---|---|---:|\n";
  for (const RefusalCategoryInfo& c : kCategories) {
    md += "| " + cell(c.reason) + " | " + cell(c.home) + " | " +
          std::to_string(categories[c.category]) + " |\n";
  }
  md += "\n## Every flag\n\n";
  md += "| flag | source | group | decision | reason |\n|---|---|---|---|---|\n";
  for (const FlagRuling& r : rulings) {
    std::string reason = r.reason;
    if (!r.home.empty()) reason += " [" + std::string(r.home) + "]";
    md += "| `" + std::string(r.name) + "` | " + std::string(flag_source_display_name(r.source)) +
          " | " + cell(r.group) + " | " + std::string(flag_decision_name(r.decision)) + " | " +
          cell(reason) + " |\n";
  }
  return md;
}

std::string flag_catalogue_help() {
  const std::vector<FlagRuling> rulings = flag_catalogue();
  std::string accepted, refused;
  for (const FlagRuling& r : rulings) {
    if (r.decision == FlagDecision::kAccepted) {
      accepted += "  " + std::string(r.name) + ": " + r.reason + "\n";
    } else if (r.decision == FlagDecision::kRefused) {
      refused += "  " + std::string(r.name) + ": " + r.reason;
      if (!r.home.empty()) refused += " [" + std::string(r.home) + "]";
      refused += "\n";
    }
  }
  return "Megatron-LM / MindSpeed flags accepted without their effect here (what each means):\n" +
         accepted +
         "Megatron-LM / MindSpeed flags refused (pretrain_gpt stops with the reason; docs/flags.md "
         "lists every flag):\n" +
         refused;
}

}  // namespace mindspeed
