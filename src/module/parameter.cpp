// ParameterRegistry, tensor-parallel slicing and master-weight initialisation.
#include "module/parameter.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "core/rng.h"

namespace mindspeed {

Parameter* ParameterRegistry::add(ParameterSpec spec, int tp_size) {
  MS_CHECK(by_name_.count(spec.name) == 0, "parameter ", spec.name, " declared twice");
  auto p = std::make_unique<Parameter>();
  Shape local = spec.global_shape;
  switch (spec.split) {
    case TensorParallelSplit::kReplicated: break;
    case TensorParallelSplit::kRows:
    case TensorParallelSplit::kGluRows: {
      const int64_t pieces = spec.split == TensorParallelSplit::kGluRows ? 2 * tp_size : tp_size;
      MS_CHECK(local[0] % pieces == 0, spec.name, ": dim 0 (", local[0], ") not divisible by ", pieces);
      local[0] /= tp_size;
      break;
    }
    case TensorParallelSplit::kColumns:
      MS_CHECK(local.ndim() == 2 && local[1] % tp_size == 0, spec.name, ": dim 1 not divisible by ",
               tp_size);
      local[1] /= tp_size;
      break;
  }
  p->spec = std::move(spec);
  p->local_shape = local;
  by_name_.emplace(p->spec.name, p.get());
  params_.push_back(std::move(p));
  return params_.back().get();
}

Parameter* ParameterRegistry::find(const std::string& name) const {
  const auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

int64_t ParameterRegistry::num_local_elements() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->local_shape.numel();
  return n;
}

namespace {
// Copies between the full tensor and one rank's shard; `to_shard` picks the direction.
void copy_shard(float* full, float* shard, const ParameterSpec& spec, int tp_rank, int tp_size,
                bool to_shard) {
  const Shape& g = spec.global_shape;
  auto copy = [&](float* f, float* s, int64_t n) {
    if (to_shard) {
      std::memcpy(s, f, sizeof(float) * n);
    } else {
      std::memcpy(f, s, sizeof(float) * n);
    }
  };
  const int64_t row = g.ndim() > 1 ? g.numel() / g[0] : 1;
  switch (spec.split) {
    case TensorParallelSplit::kReplicated:
      copy(full, shard, g.numel());
      return;
    case TensorParallelSplit::kRows: {
      const int64_t rows = g[0] / tp_size;
      copy(full + tp_rank * rows * row, shard, rows * row);
      return;
    }
    case TensorParallelSplit::kGluRows: {
      const int64_t half = g[0] / 2, rows = half / tp_size;
      copy(full + tp_rank * rows * row, shard, rows * row);
      copy(full + (half + tp_rank * rows) * row, shard + rows * row, rows * row);
      return;
    }
    case TensorParallelSplit::kColumns: {
      const int64_t cols = g[1] / tp_size;
      for (int64_t r = 0; r < g[0]; ++r) copy(full + r * g[1] + tp_rank * cols, shard + r * cols, cols);
      return;
    }
  }
}
}  // namespace

void slice_for_rank(float* out, const float* full, const ParameterSpec& spec, int tp_rank,
                    int tp_size) {
  copy_shard(const_cast<float*>(full), out, spec, tp_rank, tp_size, /*to_shard=*/true);
}

void unslice_from_rank(float* full, const float* shard, const ParameterSpec& spec, int tp_rank,
                       int tp_size) {
  copy_shard(full, const_cast<float*>(shard), spec, tp_rank, tp_size, /*to_shard=*/false);
}

void set_parameter_from_full(Parameter& p, const float* full, int tp_rank, int tp_size) {
  if (p.data.dtype == DType::kFloat32) {
    slice_for_rank(p.data.f32(), full, p.spec, tp_rank, tp_size);
    return;
  }
  MS_CHECK(p.data.dtype == DType::kBFloat16, p.spec.name, ": unsupported parameter dtype");
  std::vector<float> shard(static_cast<size_t>(p.local_shape.numel()));
  slice_for_rank(shard.data(), full, p.spec, tp_rank, tp_size);
  // Host-side loading (initialisation and checkpoints go through host memory).
  for (int64_t i = 0; i < p.local_shape.numel(); ++i) p.data.bf()[i] = float_to_bf16(shard[i]);
}

void init_full_tensor(float* full, const ParameterSpec& spec, uint64_t seed) {
  const int64_t n = spec.global_shape.numel();
  switch (spec.init) {
    case InitMethod::kZeros: std::fill(full, full + n, 0.0f); return;
    case InitMethod::kOnes: std::fill(full, full + n, 1.0f); return;
    case InitMethod::kNormal:
      // A tied copy draws from its original's stream, so both stages start equal.
      fill_normal(full, n, 0.0f, spec.init_std,
                  RngStream{seed, hash_name(spec.tied_to.empty() ? spec.name : spec.tied_to)});
      return;
  }
}

}  // namespace mindspeed
