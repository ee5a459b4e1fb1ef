// The kernel table wrapped for --profile-level level1/level2 (profiled_kernels in kernels.h):
// every call becomes a "kernel" event named after the op, with its FLOPs (GEMMs and
// attention) or the bytes it reads and writes (the others); with --profile-record-shapes its
// dimension arguments too. On a GPU each profiled call waits for its kernel (the slice is the
// kernel's time; the profiled steps lose the overlap of host and device work). Outside the
// profiled steps a wrapper is one atomic load and the call. The wrapped table lives in one
// process-wide slot (one backend per process).
#include <string>
#include <tuple>
#include <type_traits>

#include "core/profiler.h"
#include "kernels/kernels.h"

namespace mindspeed {
namespace {

KernelTable g_inner;           // the table the wrappers call
bool g_device_memory = false;  // its arrays are device memory: the host reads none of them

void append_dim(std::string& out, int64_t v) {
  if (!out.empty()) out += ',';
  out += std::to_string(v);
}
template <typename T>
void append_dims(std::string& out, const T& arg) {
  if constexpr (std::is_same_v<T, int64_t>) {
    append_dim(out, arg);
  } else if constexpr (std::is_same_v<T, AttentionDims>) {
    for (int64_t v : {arg.B, arg.T, arg.NQ, arg.NKV, arg.D, arg.keys()}) append_dim(out, v);
  }
}

template <auto Member>
struct Kernel;

template <typename R, typename... A, R (*KernelTable::*Member)(A...)>
struct Kernel<Member> {
  using Cost = profiler::Args (*)(const std::tuple<A...>&);
  static inline const char* name = "";
  static inline Cost cost = nullptr;

  static R call(A... a) {
    if (!profiler::recording(profiler::Level::kLevel1)) return (g_inner.*Member)(a...);
    profiler::Args args = cost(std::tuple<A...>(a...));
    if (profiler::recording_shapes()) {
      std::string dims;
      (append_dims(dims, std::decay_t<A>(a)), ...);
      args.add("dims", dims);
    }
    profiler::Scope scope(profiler::category::kKernel, name, profiler::Level::kLevel1, args);
    // On a GPU the call only queues the kernel: wait for it inside the slice, so the slice is
    // the kernel's time (a no-op on the CPU, whose kernels return when done).
    const KernelContext& kc = std::get<0>(std::forward_as_tuple(a...));
    if constexpr (std::is_void_v<R>) {
      (g_inner.*Member)(a...);
      g_inner.synchronize(kc);
    } else {
      R result = (g_inner.*Member)(a...);
      g_inner.synchronize(kc);
      return result;
    }
  }
};

template <auto Member>
void wrap(KernelTable& t, const char* name, typename Kernel<Member>::Cost cost) {
  if (t.*Member == nullptr) return;  // not in this table (flash attention without AVX2)
  Kernel<Member>::name = name;
  Kernel<Member>::cost = cost;
  t.*Member = &Kernel<Member>::call;
}

profiler::Args flops(double f) { return profiler::Args{}.add("flops", f); }
profiler::Args bytes(double b) { return profiler::Args{}.add("bytes", b); }
// Attention: QK^T and PV over the visible (query, key) pairs, 2 FLOPs per multiply-add.
double attention_flops(const AttentionMask& mask, const AttentionDims& d) {
  if (g_device_memory) {  // the positions and document starts are out of reach: offsets only
    AttentionMask host_part = mask;
    host_part.doc_start = host_part.q_pos = host_part.k_pos = host_part.prefix = nullptr;
    return 4.0 * static_cast<double>(d.NQ * d.D) * attention_visible_pairs(host_part, d);
  }
  return 4.0 * static_cast<double>(d.NQ * d.D) * attention_visible_pairs(mask, d);
}
// Core attention's backward has no mask: half of the T x Tk pairs (causal).
double causal_attention_flops(const AttentionDims& d) {
  return 2.0 * static_cast<double>(d.B * d.NQ) * static_cast<double>(d.T) *
         static_cast<double>(d.keys() * d.D);
}

// Grouped GEMM: 2 FLOPs per multiply-add over all routed rows (the sum of the group sizes).
double grouped_gemm_flops(const int64_t* counts, int64_t G, int64_t N, int64_t K) {
  double rows = 0.0;
  for (int64_t g = 0; g < G; ++g) rows += static_cast<double>(counts[g]);
  return 2.0 * rows * static_cast<double>(N) * static_cast<double>(K);
}

}  // namespace

KernelTable profiled_kernels(const KernelTable& inner, bool device_memory) {
  g_inner = inner;
  g_device_memory = device_memory;
  KernelTable t = inner;
  using std::get;
  // clang-format off
  wrap<&KernelTable::linear_forward>(t, "linear_forward", [](const auto& a) { return flops(2.0 * get<5>(a) * get<6>(a) * get<7>(a)); });
  wrap<&KernelTable::linear_backward_input>(t, "linear_backward_input", [](const auto& a) { return flops(2.0 * get<4>(a) * get<5>(a) * get<6>(a)); });
  wrap<&KernelTable::linear_backward_weight>(t, "linear_backward_weight", [](const auto& a) { return flops(2.0 * get<5>(a) * get<6>(a) * get<7>(a)); });
  wrap<&KernelTable::core_attention_forward>(t, "core_attention_forward", [](const auto& a) { return flops(attention_flops(get<6>(a), get<7>(a))); });
  wrap<&KernelTable::core_attention_backward>(t, "core_attention_backward", [](const auto& a) { return flops(2.0 * causal_attention_flops(get<9>(a))); });
  wrap<&KernelTable::flash_attention_forward>(t, "flash_attention_forward", [](const auto& a) { return flops(attention_flops(get<6>(a), get<7>(a))); });
  wrap<&KernelTable::flash_attention_backward>(t, "flash_attention_backward", [](const auto& a) { return flops(2.0 * attention_flops(get<10>(a), get<11>(a))); });
  // Generation: Tq new queries against Tk cached keys (QK^T and PV).
  wrap<&KernelTable::kv_cache_attention_forward>(t, "kv_cache_attention_forward", [](const auto& a) { return flops(4.0 * get<5>(a) * get<6>(a) * get<8>(a) * get<9>(a) * get<11>(a)); });
  // Ring update: reads two outputs and two lse, writes one of each (T*B*NQ rows of D + 1).
  wrap<&KernelTable::ring_attention_update>(t, "ring_attention_update", [](const auto& a) { return bytes(12.0 * get<7>(a) * get<8>(a) * get<9>(a) * (get<10>(a) + 1)); });
  wrap<&KernelTable::embedding_forward>(t, "embedding_forward", [](const auto& a) { return bytes(8.0 * get<6>(a) * get<7>(a)); });
  wrap<&KernelTable::embedding_backward>(t, "embedding_backward", [](const auto& a) { return bytes(12.0 * get<6>(a) * get<7>(a)); });
  wrap<&KernelTable::layer_norm_forward>(t, "layer_norm_forward", [](const auto& a) { return bytes(8.0 * get<7>(a) * get<8>(a)); });
  wrap<&KernelTable::layer_norm_backward>(t, "layer_norm_backward", [](const auto& a) { return bytes(16.0 * get<9>(a) * get<10>(a)); });
  wrap<&KernelTable::rms_norm_forward>(t, "rms_norm_forward", [](const auto& a) { return bytes(8.0 * get<5>(a) * get<6>(a)); });
  wrap<&KernelTable::rms_norm_backward>(t, "rms_norm_backward", [](const auto& a) { return bytes(16.0 * get<7>(a) * get<8>(a)); });
  wrap<&KernelTable::norm_partial_moments>(t, "norm_partial_moments", [](const auto& a) { return bytes(4.0 * get<6>(a) * get<7>(a)); });
  wrap<&KernelTable::norm_apply>(t, "norm_apply", [](const auto& a) { return bytes(8.0 * get<10>(a) * get<11>(a)); });
  wrap<&KernelTable::norm_backward_partials>(t, "norm_backward_partials", [](const auto& a) { return bytes(8.0 * get<7>(a) * get<8>(a)); });
  wrap<&KernelTable::norm_backward_apply>(t, "norm_backward_apply", [](const auto& a) { return bytes(16.0 * get<11>(a) * get<12>(a)); });
  wrap<&KernelTable::gelu_forward>(t, "gelu_forward", [](const auto& a) { return bytes(8.0 * get<3>(a)); });
  wrap<&KernelTable::gelu_backward>(t, "gelu_backward", [](const auto& a) { return bytes(12.0 * get<4>(a)); });
  wrap<&KernelTable::swiglu_forward>(t, "swiglu_forward", [](const auto& a) { return bytes(12.0 * get<3>(a) * get<4>(a)); });
  wrap<&KernelTable::swiglu_backward>(t, "swiglu_backward", [](const auto& a) { return bytes(20.0 * get<4>(a) * get<5>(a)); });
  wrap<&KernelTable::bias_dropout_add_forward>(t, "bias_dropout_add_forward", [](const auto& a) { return bytes(12.0 * get<5>(a) * get<6>(a)); });
  wrap<&KernelTable::bias_dropout_add_backward>(t, "bias_dropout_add_backward", [](const auto& a) { return bytes(8.0 * get<4>(a) * get<5>(a)); });
  wrap<&KernelTable::dropout_forward>(t, "dropout_forward", [](const auto& a) { return bytes(8.0 * get<3>(a)); });
  wrap<&KernelTable::dropout_backward>(t, "dropout_backward", [](const auto& a) { return bytes(8.0 * get<3>(a)); });
  wrap<&KernelTable::qkv_split_rope_forward>(t, "qkv_split_rope_forward", [](const auto& a) { return bytes(8.0 * get<8>(a) * get<9>(a) * (get<10>(a) + 2 * get<11>(a)) * get<12>(a)); });
  wrap<&KernelTable::qkv_split_rope_backward>(t, "qkv_split_rope_backward", [](const auto& a) { return bytes(8.0 * get<8>(a) * get<9>(a) * (get<10>(a) + 2 * get<11>(a)) * get<12>(a)); });
  wrap<&KernelTable::softmax_cross_entropy>(t, "softmax_cross_entropy", [](const auto& a) { return bytes(8.0 * get<5>(a) * get<6>(a)); });
  wrap<&KernelTable::vocab_parallel_ce_row_max>(t, "vocab_parallel_ce_row_max", [](const auto& a) { return bytes(4.0 * get<3>(a) * get<4>(a)); });
  wrap<&KernelTable::vocab_parallel_ce_sum_exp>(t, "vocab_parallel_ce_sum_exp", [](const auto& a) { return bytes(8.0 * get<5>(a) * get<6>(a)); });
  wrap<&KernelTable::vocab_parallel_ce_finish>(t, "vocab_parallel_ce_finish", [](const auto& a) { return bytes(8.0 * get<6>(a) * get<7>(a)); });
  wrap<&KernelTable::adamw_step>(t, "adamw_step", [](const auto& a) { return bytes(28.0 * get<5>(a)); });
  wrap<&KernelTable::ema_update>(t, "ema_update", [](const auto& a) { return bytes(12.0 * get<3>(a)); });
  wrap<&KernelTable::sum_of_squares>(t, "sum_of_squares", [](const auto& a) { return bytes(4.0 * get<2>(a)); });
  wrap<&KernelTable::masked_sums>(t, "masked_sums", [](const auto& a) { return bytes(8.0 * get<4>(a)); });
  wrap<&KernelTable::count_nonfinite>(t, "count_nonfinite", [](const auto& a) { return bytes(4.0 * get<2>(a)); });
  wrap<&KernelTable::count_zeros>(t, "count_zeros", [](const auto& a) { return bytes(4.0 * get<2>(a)); });
  wrap<&KernelTable::fill_zero>(t, "fill_zero", [](const auto& a) { return bytes(4.0 * get<2>(a)); });
  wrap<&KernelTable::fill>(t, "fill", [](const auto& a) { return bytes(4.0 * get<3>(a)); });
  wrap<&KernelTable::copy>(t, "copy", [](const auto& a) { return bytes(8.0 * get<3>(a)); });
  wrap<&KernelTable::copy_2d>(t, "copy_2d", [](const auto& a) { return bytes(8.0 * get<3>(a) * get<4>(a)); });
  wrap<&KernelTable::add_inplace>(t, "add_inplace", [](const auto& a) { return bytes(12.0 * get<3>(a)); });
  wrap<&KernelTable::scale_inplace>(t, "scale_inplace", [](const auto& a) { return bytes(8.0 * get<3>(a)); });
  wrap<&KernelTable::scale_copy>(t, "scale_copy", [](const auto& a) { return bytes(8.0 * get<4>(a)); });
  wrap<&KernelTable::round_to_bf16>(t, "round_to_bf16", [](const auto& a) { return bytes(8.0 * get<2>(a)); });
  wrap<&KernelTable::convert_to_bf16>(t, "convert_to_bf16", [](const auto& a) { return bytes(6.0 * get<3>(a)); });
  wrap<&KernelTable::convert_to_fp32>(t, "convert_to_fp32", [](const auto& a) { return bytes(6.0 * get<3>(a)); });
  wrap<&KernelTable::add_into_bf16>(t, "add_into_bf16", [](const auto& a) { return bytes(8.0 * get<3>(a)); });
  wrap<&KernelTable::round_to_fp16>(t, "round_to_fp16", [](const auto& a) { return bytes(8.0 * get<2>(a)); });
  wrap<&KernelTable::convert_to_fp16>(t, "convert_to_fp16", [](const auto& a) { return bytes(6.0 * get<3>(a)); });
  wrap<&KernelTable::convert_fp16_to_fp32>(t, "convert_fp16_to_fp32", [](const auto& a) { return bytes(6.0 * get<3>(a)); });
  wrap<&KernelTable::add_into_fp16>(t, "add_into_fp16", [](const auto& a) { return bytes(8.0 * get<3>(a)); });
  wrap<&KernelTable::transpose_01_f32>(t, "transpose_01_f32", [](const auto& a) { return bytes(8.0 * get<3>(a) * get<4>(a) * get<5>(a)); });
  wrap<&KernelTable::transpose_01_i32>(t, "transpose_01_i32", [](const auto& a) { return bytes(8.0 * get<3>(a) * get<4>(a) * get<5>(a)); });
  wrap<&KernelTable::grouped_gemm_forward>(t, "grouped_gemm_forward", [](const auto& a) { return flops(grouped_gemm_flops(get<4>(a), get<5>(a), get<6>(a), get<7>(a))); });
  wrap<&KernelTable::grouped_gemm_backward_input>(t, "grouped_gemm_backward_input", [](const auto& a) { return flops(grouped_gemm_flops(get<4>(a), get<5>(a), get<6>(a), get<7>(a))); });
  wrap<&KernelTable::grouped_gemm_backward_weight>(t, "grouped_gemm_backward_weight", [](const auto& a) { return flops(grouped_gemm_flops(get<4>(a), get<5>(a), get<6>(a), get<7>(a))); });
  // Permutations: one [R, h] side read or written, one [T, h] side (gathered rows) the other.
  wrap<&KernelTable::moe_permute_forward>(t, "moe_permute_forward", [](const auto& a) { return bytes(8.0 * get<4>(a) * get<5>(a)); });
  wrap<&KernelTable::moe_permute_backward>(t, "moe_permute_backward", [](const auto& a) { return bytes(4.0 * (get<4>(a) + get<5>(a)) * get<6>(a)); });
  wrap<&KernelTable::moe_unpermute_forward>(t, "moe_unpermute_forward", [](const auto& a) { return bytes(4.0 * (get<5>(a) + get<6>(a)) * get<7>(a)); });
  wrap<&KernelTable::moe_unpermute_backward>(t, "moe_unpermute_backward", [](const auto& a) { return bytes(12.0 * get<8>(a) * get<9>(a)); });
  wrap<&KernelTable::scale_rows>(t, "scale_rows", [](const auto& a) { return bytes(8.0 * get<4>(a) * get<5>(a)); });
  wrap<&KernelTable::copy_to_device>(t, "copy_to_device", [](const auto& a) { return bytes(get<3>(a)); });
  wrap<&KernelTable::copy_to_host>(t, "copy_to_host", [](const auto& a) { return bytes(get<3>(a)); });
  wrap<&KernelTable::copy_bytes>(t, "copy_bytes", [](const auto& a) { return bytes(2.0 * get<3>(a)); });
  wrap<&KernelTable::zero_bytes>(t, "zero_bytes", [](const auto& a) { return bytes(get<2>(a)); });
  // clang-format on
  return t;
}

}  // namespace mindspeed
