// save_checkpoint / load_checkpoint (checkpointing.h).
#include "training/checkpointing.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "checkpointing/durable_file.h"
#include "checkpointing/safetensors.h"
#include "core/check.h"
#include "core/dtype.h"
#include "parallel/agreement.h"
#include "training/megatron_torch_checkpoint.h"

namespace mindspeed {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kTracker = "latest_checkpointed_iteration.txt";
constexpr const char* kMetadata = "metadata.json";
// With --ckpt-format torch this engine's index and rank files sit in this subdirectory of the
// iteration: Megatron takes an iteration directory holding metadata.json for a torch_dist
// checkpoint, and its files (mp_rank_*) must be found as a torch one.
constexpr const char* kStateSubdir = "mindspeed_cpp";

// The directory of an iteration's index: the iteration itself, or its kStateSubdir.
std::string state_dir_of(const std::string& iteration_dir) {
  std::error_code ec;
  const std::string sub = iteration_dir + "/" + kStateSubdir;
  return fs::is_regular_file(sub + "/" + kMetadata, ec) ? sub : iteration_dir;
}
constexpr const char* kFormat = "mindspeed-cpp distributed checkpoint";
// What a checkpoint holds per parameter element: the (master) weight and the optimizer state
// (the EMA only from fused_ema_adamw runs).
const char* const kKinds[] = {"param", "exp_avg", "exp_avg_sq", "ema"};

OptimizerState state_of_kind(const std::string& kind) {
  if (kind == "param") return OptimizerState::kMainParam;
  if (kind == "exp_avg") return OptimizerState::kExpAvg;
  if (kind == "exp_avg_sq") return OptimizerState::kExpAvgSq;
  return OptimizerState::kEma;
}

std::string rank_file(int rank, const char* ext) {
  char name[64];
  std::snprintf(name, sizeof name, "rank_%05d.%s", rank, ext);
  return name;
}

StatusOr<std::string> read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("'", path, "' does not exist or cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

StatusOr<json> read_json(const std::string& path) {
  MS_ASSIGN_OR_RETURN(std::string text, read_text(path));
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return invalid_argument("'", path, "' is not a JSON object (damaged?)");
  return j;
}

// The arguments a checkpoint must agree on to be loaded (Megatron's check_checkpoint_args),
// by flag name.
json architecture_args(const ModelConfig& m) {
  json args = {{"--num-layers", m.num_layers},
          {"--hidden-size", m.hidden_size},
          {"--ffn-hidden-size", m.ffn_hidden_size},
          {"--num-attention-heads", m.num_attention_heads},
          {"--kv-channels", m.kv_channels},
          {"--num-query-groups", m.query_groups()},
          {"--max-position-embeddings", m.max_position_embeddings},
          {"--vocab-size (of the tokenizer)", m.vocab_size},
          {"--normalization", m.normalization == Normalization::kRMSNorm ? "RMSNorm" : "LayerNorm"},
          {"--swiglu", m.swiglu},
          {"--position-embedding-type", static_cast<int>(m.position_embedding_type)},
          {"--untie-embeddings-and-output-weights", m.untie_embeddings_and_output_weights},
          {"--disable-bias-linear", !m.add_bias_linear},
          {"--add-qkv-bias", m.add_qkv_bias},
          {"--noop-layers", m.noop_layers},
          {"--norm-epsilon", m.norm_epsilon},
          {"--rotary-base", m.rotary_base},
          {"--openai-gelu", m.openai_gelu},
          {"--rotary-seq-len-interpolation-factor", m.rotary_seq_len_interpolation_factor},
          {"--use-rope-scaling", m.rope_scaling == RopeScaling::kLlama3},
          {"--rope-scaling-factor", m.rope_scaling_factor},
          {"--low-freq-factor", m.rope_low_freq_factor},
          {"--high-freq-factor", m.rope_high_freq_factor},
          {"--original-max-position-embeddings", m.rope_original_max_position_embeddings}};
  // Recorded only when used, so checkpoints from before these flags load unchanged.
  if (m.attention_window > 0) args["--window-size"] = m.attention_window;
  if (m.position_embedding_type == PositionEmbeddingType::kAlibi) {
    args["--alibi-fusion-attn-type"] = m.alibi_fusion_attn_type;
    args["--alibi-diagonal-opposite"] = m.alibi_diagonal_opposite;
    args["--square-alibi-mask"] = m.square_alibi_mask;
    args["--fill-neg-inf"] = m.fill_neg_inf;
  }
  if (m.moe.enabled()) {  // the MoE architecture (the routing options are training choices)
    args["--num-experts"] = m.moe.num_experts;
    args["--moe-router-topk"] = m.moe.router_topk;
    args["--moe-ffn-hidden-size"] = m.expert_ffn_hidden_size();
    std::vector<int> pattern;
    for (int64_t l = 0; l < m.num_layers; ++l) pattern.push_back(m.moe.is_moe_layer(l) ? 1 : 0);
    args["--moe-layer-freq"] = pattern;
    args["--moe-shared-expert-intermediate-size"] = m.moe.shared_expert_intermediate_size;
    args["--shared-expert-gate"] = m.moe.shared_expert_gate;
  }
  return args;
}

json layout_args(const Configs& c, const ParallelState& ps) {
  return {{"tensor_model_parallel_size", ps.sizes.tensor},
          {"pipeline_model_parallel_size", ps.sizes.pipeline},
          {"data_parallel_size", ps.sizes.data},
          {"use_distributed_optimizer", c.parallel.use_distributed_optimizer},
          {"bf16", c.training.bf16},
          {"fp16", c.training.fp16},
          {"world_size", ps.world_size}};
}

// One chunk of one tensor as the index records it.
struct Chunk {
  std::string kind, name, file, key;
  int tp_rank = 0, tp_size = 1;
  int64_t begin = 0, end = 0;  // flat range of the tensor-parallel slice
};

json to_json(const Chunk& c) {
  return {{"kind", c.kind}, {"name", c.name}, {"file", c.file}, {"key", c.key},
          {"tp_rank", c.tp_rank}, {"tp_size", c.tp_size}, {"begin", c.begin}, {"end", c.end}};
}

// The index of one checkpoint iteration and the files it reads.
class CheckpointIndex {
 public:
  static StatusOr<CheckpointIndex> open(const std::string& iteration_dir) {
    CheckpointIndex index;
    index.dir_ = state_dir_of(iteration_dir);
    const std::string path = index.dir_ + "/" + kMetadata;
    MS_ASSIGN_OR_RETURN(index.meta_, read_json(path));
    if (index.meta_.value("format", "") != kFormat) {
      if (index.meta_.contains("sharded_backend")) {  // Megatron's dist-checkpointing metadata
        return unimplemented(
            "'", iteration_dir, "' is a Megatron-LM ",
            index.meta_.value("sharded_backend", "torch_dist"),
            " checkpoint (PyTorch Distributed Checkpoint), not read yet: convert it to the legacy ",
            "format with Megatron (--ckpt-convert-format torch --ckpt-convert-save DIR) and --load "
            "that, weights and optimizer state included");
      }
      return invalid_argument("'", path, "' is not a mindspeed-cpp checkpoint index");
    }
    try {
      for (const json& c : index.meta_.at("chunks")) {
        Chunk chunk{c.at("kind"), c.at("name"), c.at("file"), c.at("key"), c.at("tp_rank"),
                    c.at("tp_size"), c.at("begin"), c.at("end")};
        index.chunks_[{chunk.kind, chunk.name}].push_back(std::move(chunk));
      }
      for (const auto& [name, entry] : index.meta_.at("tensors").items()) {
        index.shapes_[name] = entry.at("global_shape").get<std::vector<int64_t>>();
        index.splits_[name] = entry.at("split").get<int>();
        index.split_units_[name] = entry.value("split_units", int64_t{0});  // absent: an even split
        index.tp_x_[name] = entry.value("tp_x", 0);                         // 2D tensor parallelism
      }
    } catch (const json::exception& e) {
      return invalid_argument("'", path, "' is damaged: ", e.what());
    }
    return index;
  }

  const json& meta() const { return meta_; }
  const std::map<std::string, std::vector<int64_t>>& shapes() const { return shapes_; }
  bool has(const std::string& kind, const std::string& name) const { return chunks_.count({kind, name}) > 0; }
  int split_of(const std::string& name) const { return splits_.at(name); }

  /// Every file the index lists exists with its recorded size (cheap, every rank).
  Status check_file_sizes() const {
    for (const auto& [file, entry] : meta_.at("files").items()) {
      const std::string path = dir_ + "/" + file;
      std::error_code ec;
      const auto size = fs::file_size(path, ec);
      if (ec) return not_found("checkpoint file '", path, "' is missing");
      if (static_cast<int64_t>(size) != entry.at("size").get<int64_t>()) {
        return invalid_argument("checkpoint file '", path, "' has ", size, " bytes, the index recorded ",
                                entry.at("size").get<int64_t>(), " (truncated or damaged)");
      }
    }
    return ok_status();
  }

  /// Elements of `kind` of tensor `want.name` for the shard that rank `tp_rank` of `tp_size`
  /// holds under `want` (split and global shape of this run), read slice-wise from the
  /// chunks of the saving run: only the files and byte ranges of that shard are touched.
  /// The saved global shape may differ from want's only in vocabulary padding rows (the
  /// padded vocabulary depends on the tensor-parallel size): missing rows read as zeros.
  /// `out` has the shard's size.
  Status read_shard(const std::string& kind, const ParameterSpec& want, int tp_rank, int tp_size, float* out) {
    auto it = chunks_.find({kind, want.name});
    if (it == chunks_.end() || shapes_.count(want.name) == 0) {
      return not_found("checkpoint '", dir_, "' holds no ", kind, " of '", want.name, "' (saved from another model?)");
    }
    ParameterSpec saved;
    saved.name = want.name;
    saved.global_shape = Shape::from(shapes_.at(want.name));
    saved.split = static_cast<TensorParallelSplit>(splits_.at(want.name));
    saved.split_units = split_units_.at(want.name);
    saved.tp_x = tp_x_.at(want.name);
    MS_RETURN_IF_ERROR(check_shape_fits(saved, want));
    std::vector<Chunk>& chunks = it->second;
    MS_RETURN_IF_ERROR(check_tiling(kind, saved, chunks));
    const int T = chunks.front().tp_size;
    const int64_t saved_rows = saved.global_shape[0];
    for (const ShardRun& run : shard_runs(want, tp_rank, tp_size)) {
      if (run.row >= saved_rows) {  // a padding row this run has and the saving run had not
        std::fill(out + run.local_offset, out + run.local_offset + (run.col_end - run.col_begin), 0.0f);
        continue;
      }
      int64_t at = run.local_offset;
      for (const ShardPlace& place : locate_in_shards(saved, T, run)) {
        MS_RETURN_IF_ERROR(read_slice_range(chunks, place, out + at));
        at += place.count;
      }
    }
    return ok_status();
  }

  /// The whole tensor `kind` of `spec.name` at the saved global shape.
  StatusOr<std::vector<float>> full_tensor(const std::string& kind, const ParameterSpec& spec) {
    ParameterSpec whole = spec;
    whole.split = TensorParallelSplit::kReplicated;
    std::vector<float> full(static_cast<size_t>(spec.global_shape.numel()));
    MS_RETURN_IF_ERROR(read_shard(kind, whole, 0, 1, full.data()));
    return full;
  }

 private:
  // The saved tensor must be the wanted one, up to vocabulary padding rows of the word
  // embedding and the output layer.
  static Status check_shape_fits(const ParameterSpec& saved, const ParameterSpec& want) {
    const Shape& a = saved.global_shape;
    const Shape& b = want.global_shape;
    if (a == b) return ok_status();
    const bool vocab_rows = want.name.ends_with("word_embeddings.weight") || want.name == "output_layer.weight";
    if (!vocab_rows || a.ndim() != 2 || b.ndim() != 2 || a[1] != b[1]) {
      return invalid_argument("checkpoint tensor '", want.name, "' has shape ", a.to_string(), ", this model's is ",
                              b.to_string(), " (saved from another architecture?)");
    }
    return ok_status();
  }

  // The chunks of every saved tensor-parallel slice tile it exactly; sorts them by (slice, begin).
  Status check_tiling(const std::string& kind, const ParameterSpec& saved, std::vector<Chunk>& chunks) const {
    const int T = chunks.front().tp_size;
    const Shape& g = saved.global_shape;
    const int64_t rows = g.ndim() > 0 ? g[0] : 1, width = g.ndim() > 1 ? g.numel() / g[0] : 1;
    // Even splits divide the dimension; unaligned ones (--unaligned-linear) its units.
    const int64_t pieces = saved.split_units > 0 ? saved.split_units : T;
    bool divides = T >= 1 && saved.split_units >= 0;
    switch (saved.split) {
      case TensorParallelSplit::kReplicated: divides = T == 1; break;
      case TensorParallelSplit::kRows:
        divides = divides && rows % pieces == 0;
        break;
      case TensorParallelSplit::kGluRows:
        divides = divides && rows % (2 * pieces) == 0;
        break;
      case TensorParallelSplit::kColumns:
        divides = divides && g.ndim() == 2 && width % pieces == 0;
        break;
      case TensorParallelSplit::k2dRowsXColumnsY:
      case TensorParallelSplit::k2dGluRowsXColumnsY:
      case TensorParallelSplit::k2dRowsYColumnsX: {
        const int X = saved.tp_x, Y = X > 0 && T % X == 0 ? T / X : 0;
        const bool rows_over_x = saved.split != TensorParallelSplit::k2dRowsYColumnsX;
        const int64_t row_pieces =
            (rows_over_x ? X : Y) *
            (saved.split == TensorParallelSplit::k2dGluRowsXColumnsY ? 2 : 1);
        const int64_t col_pieces = rows_over_x ? Y : X;
        divides = Y > 0 && saved.split_units == 0 && g.ndim() == 2 && rows % row_pieces == 0 &&
                  width % col_pieces == 0;
        break;
      }
      default: divides = false;
    }
    if (!divides) {
      return invalid_argument("checkpoint '", dir_, "': ", kind, " '", saved.name, "' of shape ", g.to_string(),
                              " cannot be split ", static_cast<int>(saved.split), " over ", T,
                              " tensor-parallel slices (damaged index)");
    }
    std::sort(chunks.begin(), chunks.end(),
              [](const Chunk& a, const Chunk& b) { return std::tie(a.tp_rank, a.begin) < std::tie(b.tp_rank, b.begin); });
    size_t next = 0;
    for (int t = 0; t < T; ++t) {
      int64_t covered = 0, local = 0;  // slice t's elements
      for (const ShardRun& run : shard_runs(saved, t, T)) local += run.col_end - run.col_begin;
      for (; next < chunks.size() && chunks[next].tp_rank == t; ++next) {
        const Chunk& c = chunks[next];
        if (c.tp_size != T || c.begin != covered || c.end > local) {
          return invalid_argument("checkpoint '", dir_, "': the chunks of ", kind, " '", saved.name,
                                  "' do not tile tensor-parallel slice ", t, " of ", T, " (damaged index)");
        }
        covered = c.end;
      }
      if (covered != local) {
        return invalid_argument("checkpoint '", dir_, "' is incomplete: ", kind, " '", saved.name,
                                "' tensor-parallel slice ", t, " of ", T, " has ", covered, " of ", local, " elements");
      }
    }
    if (next != chunks.size()) {
      return invalid_argument("checkpoint '", dir_, "': ", kind, " '", saved.name, "' has chunks of slices beyond ",
                              T, " (damaged index)");
    }
    return ok_status();
  }

  // Elements [place.local_offset, + place.count) of saved slice place.tp_rank, from the
  // chunks (sorted and tiling) that hold them.
  Status read_slice_range(const std::vector<Chunk>& chunks, const ShardPlace& place, float* out) {
    int64_t lo = place.local_offset;
    const int64_t hi = place.local_offset + place.count;
    // The first chunk of the slice that ends past lo.
    auto c = std::upper_bound(chunks.begin(), chunks.end(), std::make_pair(place.tp_rank, lo),
                              [](const std::pair<int, int64_t>& key, const Chunk& ch) {
                                return key.first < ch.tp_rank || (key.first == ch.tp_rank && key.second < ch.end);
                              });
    for (; lo < hi; ++c) {
      MS_CHECK(c != chunks.end() && c->tp_rank == place.tp_rank && c->begin <= lo, "checked tiling");
      const int64_t n = std::min(hi, c->end) - lo;
      MS_ASSIGN_OR_RETURN(SafetensorsFile * file, open_file(c->file));
      const SafetensorsEntry* entry = file->find(c->key);
      if (entry == nullptr || entry->numel() != c->end - c->begin) {
        return invalid_argument("checkpoint file '", dir_, "/", c->file, "' lacks tensor '", c->key,
                                "' of its index (damaged)");
      }
      MS_RETURN_IF_ERROR(file->read_f32_elements(c->key, lo - c->begin, n, 1, out + (lo - place.local_offset)));
      lo += n;
    }
    return ok_status();
  }

  // Opens (and verifies the checksum of) a file on first use.
  StatusOr<SafetensorsFile*> open_file(const std::string& file) {
    auto it = files_.find(file);
    if (it != files_.end()) return &it->second;
    const std::string path = dir_ + "/" + file;
    if (!meta_.at("files").contains(file)) return invalid_argument("checkpoint index names unknown file '", path, "'");
    // One pass over the file: mapped, checksummed from the mapping, then read from it.
    StatusOr<SafetensorsFile> f = SafetensorsFile::open(path);
    if (!f.ok() || f->crc32() != meta_.at("files").at(file).at("crc32").get<uint32_t>()) {
      return invalid_argument("checkpoint file '", path, "' fails its checksum (damaged)",
                              f.ok() ? "" : ": " + f.status().to_string());
    }
    return &files_.emplace(file, std::move(*f)).first->second;
  }

  std::string dir_;
  json meta_;
  std::map<std::pair<std::string, std::string>, std::vector<Chunk>> chunks_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, int> splits_;
  std::map<std::string, int64_t> split_units_;
  std::map<std::string, int> tp_x_;
  std::map<std::string, SafetensorsFile> files_;
};

std::vector<int64_t> dims_of(const Shape& s) {
  std::vector<int64_t> out;
  for (int i = 0; i < s.ndim(); ++i) out.push_back(s[i]);
  return out;
}

// This rank's chunks: the tensors it holds the main replica of, as safetensors entries.
void collect_chunks(const CheckpointTarget& t, bool distributed, bool save_optimizer, const std::string& file,
                    std::vector<SafetensorsTensorToWrite>* tensors, json* chunks, json* specs) {
  const ParallelState& ps = t.ps;
  const bool half = is_half_precision(t.buffer.param_dtype());  // the fp32 master is the optimizer's
  for (Parameter* p : t.buffer.params()) {
    // Data-parallel replicas (over expert-dp for expert parameters): rank 0 writes.
    if (!distributed && (p->spec.expert_parallel ? ps.expert_dp() : ps.dp_cp()).rank() != 0) continue;
    if (p->is_tied_copy()) continue;                          // the original is saved
    if (!holds_main_tp_copy(p->spec, ps)) continue;           // replicated over (an axis of) tp
    const ShardCoords at = shard_coords(p->spec, ps);
    for (const OwnedRange& r : owned_ranges(*p, t.optimizer)) {
      const int64_t n = r.hi - r.lo;
      for (const char* kind : kKinds) {
        const bool is_param = std::string(kind) == "param";
        if (!is_param && !save_optimizer) continue;
        const OptimizerState state = state_of_kind(kind);
        if (!is_param && !t.optimizer.has_state(state)) continue;
        std::vector<float> values(static_cast<size_t>(n));
        if (is_param && !half) {
          // fp32 parameters: the buffer, or its shards (FSDP optim_grads_params: owned = shard).
          const float* src = t.buffer.param_shards() != nullptr
                                 ? static_cast<const float*>(t.buffer.param_shards()) + r.shard
                                 : static_cast<const float*>(t.buffer.param_data()) + p->buffer_offset + r.lo;
          const Backend& b = t.optimizer.backend();
          b.kernels.copy_to_host(b.context, values.data(), src, n * 4);
        } else {
          t.optimizer.read_state(state, r.shard, n, values.data());
        }
        Chunk c{kind, p->spec.name, file, std::string(kind) + "/" + p->spec.name + "#" + std::to_string(r.lo),
                p->is_tensor_parallel() ? at.rank : 0, p->is_tensor_parallel() ? at.count : 1, r.lo, r.hi};
        tensors->push_back({c.key, {n}, std::move(values), {}});
        chunks->push_back(to_json(c));
      }
      (*specs)[p->spec.name] = {{"global_shape", dims_of(p->spec.global_shape)},
                                {"split", static_cast<int>(p->spec.split)}};
      if (p->spec.split_units > 0) (*specs)[p->spec.name]["split_units"] = p->spec.split_units;
      if (p->is_2d_split()) (*specs)[p->spec.name]["tp_x"] = p->spec.tp_x;
    }
  }
  // The model's persistent buffers (the MoE routers' expert biases): replicated, written by
  // the first tensor- and data-parallel rank of each pipeline stage.
  if (ps.tp_rank != 0 || ps.dp_cp().rank() != 0) return;
  for (const auto& b : t.registry.buffers()) {
    if (!b->persistent) continue;
    const int64_t n = static_cast<int64_t>(b->values.size());
    Chunk c{"param", b->name, file, "param/" + b->name + "#0", 0, 1, 0, n};
    tensors->push_back({c.key, {n}, b->values, {}});
    chunks->push_back(to_json(c));
    (*specs)[b->name] = {{"global_shape", std::vector<int64_t>{n}},
                         {"split", static_cast<int>(TensorParallelSplit::kReplicated)}};
  }
}

// What one rank writes for one save, copied out of the live buffers (so training may go on
// while it is written) with the index entries for it.
// With --ckpt-format torch it also holds this rank's Megatron-LM file
// (training/megatron_torch_checkpoint.h).
struct RankSnapshot {
  std::string file;
  std::vector<SafetensorsTensorToWrite> tensors;
  json fragment;
  std::optional<MegatronRankFile> megatron;
  int tp_rank = 0, pp_rank = 0, pp_size = 1;
};

StatusOr<RankSnapshot> take_snapshot(const CheckpointTarget& t, const Configs& configs,
                                     const CheckpointState& state, bool save_optimizer) {
  RankSnapshot snap;
  snap.file = rank_file(t.ps.world_rank, "safetensors");
  json chunks = json::array(), specs = json::object();
  collect_chunks(t, configs.parallel.use_distributed_optimizer, save_optimizer, snap.file,
                 &snap.tensors, &chunks, &specs);
  snap.fragment = {{"chunks", chunks}, {"tensors", specs}, {"files", json::object()}};
  if (configs.training.ckpt_format_torch) {
    const MegatronProgress progress{state.iteration, state.consumed_train_samples,
                                    state.consumed_valid_samples,
                                    state.floating_point_operations_so_far};
    // The optimizer's state goes into Megatron's files too (the distributed optimizer's
    // gathered over data parallelism into distrib_optim.pt: a collective, every rank calls it).
    Optimizer* megatron_optimizer = save_optimizer ? &t.optimizer : nullptr;
    MS_ASSIGN_OR_RETURN(snap.megatron,
                        megatron_rank_file_of(configs, t.registry, t.ps, t.optimizer.backend(),
                                              progress, megatron_optimizer));
    snap.tp_rank = t.ps.tp_rank;
    snap.pp_rank = t.ps.pp_rank;
    snap.pp_size = t.ps.sizes.pipeline;
  }
  return snap;
}

// Size and CRC-32 of a file just written (for the index).
StatusOr<FileDigest> digest_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found("cannot reopen '", path, "'");
  FileDigest d;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto got = static_cast<size_t>(in.gcount());
    d.crc32 = crc32_update(d.crc32, buffer.data(), got);
    d.size += static_cast<int64_t>(got);
  }
  if (in.bad()) return data_loss("cannot read back '", path, "'");
  return d;
}

// This rank's files: its index fragment and tensors into `state_dir` (the iteration's temporary
// directory, or its kStateSubdir), its Megatron file into the iteration's `tmp_dir`, listed in
// the index relative to `state_dir`.
Status write_snapshot(const std::string& tmp_dir, const std::string& state_dir, int rank,
                      RankSnapshot& snap) {
  if (!snap.tensors.empty()) {
    MS_ASSIGN_OR_RETURN(FileDigest d,
                        write_safetensors_with_digest(state_dir + "/" + snap.file, snap.tensors));
    snap.fragment["files"][snap.file] = {{"size", d.size}, {"crc32", d.crc32}};
  }
  snap.tensors.clear();
  if (snap.megatron) {
    MS_RETURN_IF_ERROR(snap.megatron->write(tmp_dir, snap.tp_rank, snap.pp_rank, snap.pp_size));
    std::vector<std::string> files = {"model_optim_rng.pt"};
    if (snap.megatron->has_distributed_optimizer()) files.push_back("distrib_optim.pt");
    for (const std::string& name : files) {
      const std::string file =
          MegatronRankFile::rank_dir(snap.tp_rank, snap.pp_rank, snap.pp_size) + "/" + name;
      MS_ASSIGN_OR_RETURN(FileDigest d, digest_of(tmp_dir + "/" + file));
      snap.fragment["files"][(state_dir == tmp_dir ? "" : "../") + file] = {{"size", d.size},
                                                                            {"crc32", d.crc32}};
    }
    snap.megatron.reset();
  }
  return write_file_atomically(state_dir + "/" + rank_file(rank, "json"), snap.fragment.dump());
}

// The index of one save without its chunks and files (filled from the ranks' fragments).
json index_skeleton(const CheckpointState& state, const Configs& c, const CheckpointTarget& t, bool save_optimizer) {
  json meta = {{"format", kFormat},
               {"version", 1},
               {"iteration", state.iteration},
               {"consumed_train_samples", state.consumed_train_samples},
               {"consumed_valid_samples", state.consumed_valid_samples},
               {"floating_point_operations_so_far", state.floating_point_operations_so_far},
               {"optimizer_step", t.optimizer.step_count()},
               {"skipped_iterations", state.skipped_iterations},
               {"skipped_samples", state.skipped_samples},
               {"has_optimizer", save_optimizer},
               {"args", architecture_args(c.model)},
               {"layout", layout_args(c, t.ps)},
               {"tensors", json::object()},
               {"chunks", json::array()},
          {"files", json::object()}};
  if (const auto& scaler = t.optimizer.grad_scaler(); scaler && scaler->is_dynamic()) {
    const GradScalerState& g = scaler->state();
    meta["grad_scaler"] = {{"scale", g.scale}, {"growth_tracker", g.growth_tracker},
                           {"hysteresis_tracker", g.hysteresis_tracker}};
  }
  return meta;
}

// Rank 0: the fragments merged into the index, the directory moved into place, the tracker.
Status finish_save(const std::string& dir, const std::string& tmp_dir, const std::string& state_dir,
                   const std::string& final_dir, json meta, int world_size) {
  for (int r = 0; r < world_size; ++r) {
    const std::string path = state_dir + "/" + rank_file(r, "json");
    MS_ASSIGN_OR_RETURN(json fragment, read_json(path));
    for (const json& chunk : fragment.at("chunks")) meta["chunks"].push_back(chunk);
    meta["tensors"].update(fragment.at("tensors"));
    meta["files"].update(fragment.at("files"));
    fs::remove(path);
  }
  MS_RETURN_IF_ERROR(write_file_atomically(state_dir + "/" + kMetadata, meta.dump(1)));
  MS_RETURN_IF_ERROR(fsync_path(state_dir));
  if (state_dir != tmp_dir) MS_RETURN_IF_ERROR(fsync_path(tmp_dir));
  std::error_code ec;
  const std::string old_dir = final_dir + ".old";
  fs::remove_all(old_dir, ec);
  if (fs::exists(final_dir)) fs::rename(final_dir, old_dir, ec);
  if (ec) return failed_precondition("cannot move the old '", final_dir, "' aside: ", ec.message());
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) return failed_precondition("cannot rename '", tmp_dir, "' to '", final_dir, "': ", ec.message());
  MS_RETURN_IF_ERROR(fsync_path(dir));
  MS_RETURN_IF_ERROR(write_file_atomically(dir + "/" + kTracker, std::to_string(meta.at("iteration").get<int64_t>())));
  fs::remove_all(old_dir, ec);
  return ok_status();
}

// Rank 0 prepares the temporary directory (clearing what killed saves left); collective.
Status prepare_save(const std::string& dir, const std::string& tmp_dir,
                    const std::string& state_dir, const ParallelState& ps) {
  Status local = ok_status();
  if (ps.world_rank == 0) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    // What saves killed before left behind: half-written iterations and moved-aside ones.
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.starts_with("iter_") && (name.ends_with(".tmp") || name.ends_with(".old"))) {
        fs::remove_all(entry.path(), ec);
      }
    }
    ec.clear();
    fs::create_directories(state_dir, ec);
    if (ec)
      local = failed_precondition("cannot create checkpoint directory '", state_dir,
                                  "': ", ec.message());
  }
  return agree_on_failure(ps.world(), local);
}

}  // namespace

std::string checkpoint_iteration_dir(const std::string& dir, int64_t iteration) {
  char name[32];
  std::snprintf(name, sizeof name, "iter_%07lld", static_cast<long long>(iteration));
  return dir + "/" + name;
}

StatusOr<std::string> tracked_iteration_dir(const std::string& dir) {
  MS_ASSIGN_OR_RETURN(std::string tracked, read_text(dir + "/" + kTracker));
  while (!tracked.empty() && std::isspace(static_cast<unsigned char>(tracked.back()))) tracked.pop_back();
  if (tracked == "release") return dir + "/release";
  char* end = nullptr;
  const long long it = std::strtoll(tracked.c_str(), &end, 10);
  if (tracked.empty() || *end != '\0' || it < 0) {
    return invalid_argument("'", dir, "/", kTracker, "' holds '", tracked, "', not an iteration number or 'release'");
  }
  return checkpoint_iteration_dir(dir, it);
}

StatusOr<ModelConfig> checkpoint_model_config(const std::string& iteration_dir) {
  MS_ASSIGN_OR_RETURN(CheckpointIndex index, CheckpointIndex::open(iteration_dir));
  const json& a = index.meta().at("args");
  ModelConfig m;
  try {
    m.num_layers = a.at("--num-layers");
    m.hidden_size = a.at("--hidden-size");
    m.ffn_hidden_size = a.at("--ffn-hidden-size");
    m.num_attention_heads = a.at("--num-attention-heads");
    m.kv_channels = a.at("--kv-channels");
    m.num_query_groups = a.at("--num-query-groups");
    m.group_query_attention = m.num_query_groups != m.num_attention_heads;
    m.max_position_embeddings = a.at("--max-position-embeddings");
    m.vocab_size = a.at("--vocab-size (of the tokenizer)");
    m.normalization = a.at("--normalization") == "RMSNorm" ? Normalization::kRMSNorm : Normalization::kLayerNorm;
    m.swiglu = a.at("--swiglu");
    m.position_embedding_type = static_cast<PositionEmbeddingType>(a.at("--position-embedding-type").get<int>());
    m.untie_embeddings_and_output_weights = a.at("--untie-embeddings-and-output-weights");
    m.add_bias_linear = !a.at("--disable-bias-linear").get<bool>();
    m.add_qkv_bias = a.at("--add-qkv-bias");
    m.noop_layers = a.at("--noop-layers").get<std::vector<int64_t>>();
    m.norm_epsilon = a.at("--norm-epsilon");
    m.rotary_base = a.at("--rotary-base");
    m.openai_gelu = a.at("--openai-gelu");
    m.rotary_seq_len_interpolation_factor = a.at("--rotary-seq-len-interpolation-factor");
    m.rope_scaling = a.at("--use-rope-scaling").get<bool>() ? RopeScaling::kLlama3 : RopeScaling::kNone;
    m.rope_scaling_factor = a.at("--rope-scaling-factor");
    m.rope_low_freq_factor = a.at("--low-freq-factor");
    m.rope_high_freq_factor = a.at("--high-freq-factor");
    m.rope_original_max_position_embeddings = a.at("--original-max-position-embeddings");
    m.attention_window = a.value("--window-size", int64_t{0});
    m.alibi_fusion_attn_type = a.value("--alibi-fusion-attn-type", -1);
    m.alibi_diagonal_opposite = a.value("--alibi-diagonal-opposite", false);
    m.square_alibi_mask = a.value("--square-alibi-mask", false);
    m.fill_neg_inf = a.value("--fill-neg-inf", false);
    m.moe.num_experts = a.value("--num-experts", int64_t{0});
    if (m.moe.enabled()) {
      m.moe.router_topk = a.at("--moe-router-topk");
      m.moe.ffn_hidden_size = a.at("--moe-ffn-hidden-size");
      m.moe.layer_pattern = a.at("--moe-layer-freq").get<std::vector<int>>();
      m.moe.shared_expert_intermediate_size = a.at("--moe-shared-expert-intermediate-size");
      m.moe.shared_expert_gate = a.at("--shared-expert-gate");
    }
  } catch (const json::exception& e) {
    return invalid_argument("'", state_dir_of(iteration_dir), "/", kMetadata,
                            "': the model arguments are incomplete (", e.what(), ")");
  }
  auto emb = index.shapes().find("embedding.word_embeddings.weight");
  m.padded_vocab_size = emb != index.shapes().end() ? emb->second.at(0) : m.vocab_size;
  return m;
}

bool has_checkpoint_tracker(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir + "/" + kTracker, ec);
}

bool has_checkpoint_index(const std::string& dir) {
  auto iteration_dir = tracked_iteration_dir(dir);
  std::error_code ec;
  return iteration_dir.ok() &&
         fs::is_regular_file(state_dir_of(*iteration_dir) + "/" + kMetadata, ec);
}

struct CheckpointSaver::Pending {
  std::string dir, tmp_dir, state_dir, final_dir;
  json meta;
  RankSnapshot snapshot;
  std::thread writer;
  std::atomic<bool> written{false};
  Status status = ok_status();
};

CheckpointSaver::CheckpointSaver(const ParallelState& ps, bool async) : ps_(ps), async_(async) {}

CheckpointSaver::~CheckpointSaver() {
  if (pending_ && pending_->writer.joinable()) pending_->writer.join();  // an error path: no finish
}

Status CheckpointSaver::save(const std::string& dir, const CheckpointState& state, const Configs& configs,
                             const CheckpointTarget& target, bool save_optimizer) {
  MS_RETURN_IF_ERROR(finish(/*wait=*/true));  // one save at a time
  auto p = std::make_unique<Pending>();
  p->dir = dir;
  p->final_dir = checkpoint_iteration_dir(dir, state.iteration);
  p->tmp_dir = p->final_dir + ".tmp";
  p->state_dir = configs.training.ckpt_format_torch ? p->tmp_dir + "/" + kStateSubdir : p->tmp_dir;
  MS_RETURN_IF_ERROR(prepare_save(dir, p->tmp_dir, p->state_dir, ps_));
  // The snapshot: copies of everything, taken before the next optimizer step.
  StatusOr<RankSnapshot> snapshot = take_snapshot(target, configs, state, save_optimizer);
  MS_RETURN_IF_ERROR(agree_on_failure(ps_.world(), snapshot.status()));
  p->snapshot = std::move(*snapshot);
  p->meta = index_skeleton(state, configs, target, save_optimizer);
  Pending* raw = p.get();
  pending_ = std::move(p);
  if (async_) {
    raw->writer = std::thread([raw, rank = ps_.world_rank] {
      raw->status = write_snapshot(raw->tmp_dir, raw->state_dir, rank, raw->snapshot);
      raw->written.store(true);
    });
    return ok_status();
  }
  raw->status = write_snapshot(raw->tmp_dir, raw->state_dir, ps_.world_rank, raw->snapshot);
  raw->written.store(true);
  return finish(/*wait=*/true);
}

Status CheckpointSaver::finish(bool wait) {
  if (!pending_) return ok_status();
  ProcessGroup& world = ps_.world();
  // Every rank must have written its files before rank 0 publishes the iteration.
  if (!wait && world.all_reduce_scalar(pending_->written.load() ? 1.0 : 0.0, ReduceOp::kMin) < 0.5) {
    return ok_status();
  }
  if (pending_->writer.joinable()) pending_->writer.join();
  std::unique_ptr<Pending> p = std::move(pending_);
  MS_RETURN_IF_ERROR(agree_on_failure(world, p->status));
  Status local = ok_status();
  if (ps_.world_rank == 0) {
    local = finish_save(p->dir, p->tmp_dir, p->state_dir, p->final_dir, std::move(p->meta),
                        ps_.world_size);
  }
  return agree_on_failure(world, local);
}

Status save_checkpoint(const std::string& dir, const CheckpointState& state, const Configs& configs,
                       const CheckpointTarget& target, bool save_optimizer) {
  CheckpointSaver saver(target.ps, /*async=*/false);
  return saver.save(dir, state, configs, target, save_optimizer);
}

Status load_megatron_optimizer_state(const MegatronTorchCheckpoint& ckpt,
                                     const CheckpointTarget& target) {
  MS_RETURN_IF_ERROR(ckpt.optimizer_readable());
  const Backend& backend = target.optimizer.backend();
  const bool half = is_half_precision(target.buffer.param_dtype());
  for (const auto& owned : target.registry.params()) {
    Parameter& p = *owned;
    const std::vector<OwnedRange> ranges = owned_ranges(p, target.optimizer);
    const ShardCoords at = shard_coords(p.spec, target.ps);
    std::vector<float> mine(static_cast<size_t>(p.local_shape.numel()));
    for (const OptimizerState state :
         {OptimizerState::kMainParam, OptimizerState::kExpAvg, OptimizerState::kExpAvgSq}) {
      const bool main = state == OptimizerState::kMainParam;
      // An fp32 run's weights are their own main copy: a 16-bit checkpoint's fp32 main
      // parameters replace the (rounded) weights loaded before.
      if (main && !half && ckpt.optimizer_state() != MegatronOptimizerState::kFloat16) continue;
      MS_ASSIGN_OR_RETURN(
          std::vector<float> full,
          ckpt.full_tensor_for_run(p.spec, main                               ? "param"
                                           : state == OptimizerState::kExpAvg ? "exp_avg"
                                                                              : "exp_avg_sq"));
      slice_for_rank(mine.data(), full.data(), p.spec, at.rank, at.count);
      if (main && !half) {
        set_parameter_from_shard(p, mine.data(), &backend);
        continue;
      }
      for (const OwnedRange& r : ranges)
        target.optimizer.write_state(state, r.shard, r.hi - r.lo, mine.data() + r.lo);
    }
  }
  target.optimizer.set_step_count(ckpt.optimizer_step());
  auto& scaler = target.optimizer.grad_scaler();
  if (scaler && scaler->is_dynamic() && ckpt.grad_scaler()) scaler->load_state(*ckpt.grad_scaler());
  return ok_status();
}

StatusOr<CheckpointState> load_checkpoint(const std::string& dir, const Configs& configs,
                                          const CheckpointTarget& target, const CheckpointLoadOptions& options) {
  ProcessGroup& world = target.ps.world();
  const Backend& backend = target.optimizer.backend();
  auto load_local = [&]() -> StatusOr<CheckpointState> {
    std::string iteration_dir;
    if (options.ckpt_step >= 0) {
      iteration_dir = checkpoint_iteration_dir(dir, options.ckpt_step);
    } else {
      MS_ASSIGN_OR_RETURN(iteration_dir, tracked_iteration_dir(dir));
    }
    MS_ASSIGN_OR_RETURN(CheckpointIndex index, CheckpointIndex::open(iteration_dir));
    MS_RETURN_IF_ERROR(index.check_file_sizes());
    const json want = architecture_args(configs.model);
    const json& have = index.meta().at("args");
    for (const auto& [flag, value] : want.items()) {
      if (!have.contains(flag) || have.at(flag) != value) {
        return invalid_argument("checkpoint '", iteration_dir, "' was saved with ", flag, " ",
                                have.contains(flag) ? have.at(flag).dump() : "(absent)", ", this run has ",
                                value.dump(), "; use the same model arguments to load it");
      }
    }
    const bool load_optimizer = options.load_optimizer && !options.finetune && index.meta().value("has_optimizer", false);
    const bool half = is_half_precision(target.buffer.param_dtype());
    const ParallelState& ps = target.ps;
    for (const auto& owned : target.registry.params()) {
      Parameter& p = *owned;
      ParameterSpec source = p.spec;
      if (p.is_tied_copy()) source.name = p.spec.tied_to;  // the copy of the original
      if (index.shapes().count(source.name) == 0) {
        return not_found("checkpoint '", iteration_dir, "' holds no tensor '", source.name,
                         "' (saved from another model?)");
      }
      const std::vector<OwnedRange> owned_by_optimizer = owned_ranges(p, target.optimizer);
      const int64_t n = p.local_shape.numel();
      for (const char* kind : kKinds) {
        const bool is_param = std::string(kind) == "param";
        if (!is_param && !load_optimizer) continue;
        const OptimizerState state = state_of_kind(kind);
        if (!is_param && !target.optimizer.has_state(state)) continue;
        std::vector<float> mine(static_cast<size_t>(n));
        const ShardCoords at = shard_coords(p.spec, ps);
        if (state == OptimizerState::kEma && !index.has(kind, source.name)) {
          // fused_ema_adamw resumed from a checkpoint without an EMA: it starts at the weights.
          MS_RETURN_IF_ERROR(index.read_shard("param", source, at.rank, at.count, mine.data()));
        } else {
          MS_RETURN_IF_ERROR(index.read_shard(kind, source, at.rank, at.count, mine.data()));
        }
        if (is_param && !half) {
          // fp32: the buffer, or (FSDP optim_grads_params) this rank's shards of it.
          if (target.buffer.param_shards() != nullptr) {
            for (const OwnedRange& r : owned_by_optimizer) {
              backend.kernels.copy_to_device(backend.context, static_cast<float*>(target.buffer.param_shards()) + r.shard,
                                             mine.data() + r.lo, (r.hi - r.lo) * 4);
            }
          } else {
            backend.kernels.copy_to_device(backend.context, p.data.f32(), mine.data(), n * 4);
          }
          continue;
        }
        // 16-bit weights of the whole local slice (unless only shards exist), then the master
        // (which sets the owned 16-bit weights too) and the optimizer state of the owned ranges.
        if (is_param && target.buffer.param_shards() == nullptr) set_parameter_from_shard(p, mine.data(), &backend);
        for (const OwnedRange& r : owned_by_optimizer) {
          target.optimizer.write_state(state, r.shard, r.hi - r.lo, mine.data() + r.lo);
        }
      }
    }
    for (const auto& b : target.registry.buffers()) {
      if (!b->persistent) continue;
      if (index.shapes().count(b->name) == 0) {
        return not_found("checkpoint '", iteration_dir, "' holds no buffer '", b->name,
                         "' (saved without --moe-router-enable-expert-bias?)");
      }
      ParameterSpec spec{.name = b->name, .global_shape = Shape{static_cast<int64_t>(b->values.size())}};
      MS_RETURN_IF_ERROR(index.read_shard("param", spec, 0, 1, b->values.data()));
    }
    target.optimizer.set_step_count(load_optimizer ? index.meta().at("optimizer_step").get<int64_t>() : 0);
    // The loss scaler's state travels with the optimizer's, as in Megatron's state_dict.
    auto& scaler = target.optimizer.grad_scaler();
    if (load_optimizer && scaler && scaler->is_dynamic() && index.meta().contains("grad_scaler")) {
      const json& g = index.meta().at("grad_scaler");
      scaler->load_state({g.at("scale").get<float>(), g.at("growth_tracker").get<int64_t>(),
                          g.at("hysteresis_tracker").get<int64_t>()});
    }
    CheckpointState state;
    if (!options.finetune) {
      state.iteration = index.meta().at("iteration");
      state.consumed_train_samples = index.meta().at("consumed_train_samples");
      state.consumed_valid_samples = index.meta().at("consumed_valid_samples");
      state.floating_point_operations_so_far = index.meta().at("floating_point_operations_so_far");
      state.skipped_iterations = index.meta().value("skipped_iterations", int64_t{0});
      state.skipped_samples = index.meta().value("skipped_samples", int64_t{0});
    }
    return state;
  };
  StatusOr<CheckpointState> result = load_local();
  MS_RETURN_IF_ERROR(agree_on_failure(world, result.status()));
  return result;
}

StatusOr<std::map<std::string, std::vector<float>>> read_checkpoint_tensors(const std::string& iteration_dir,
                                                                           const std::string& kind) {
  MS_ASSIGN_OR_RETURN(CheckpointIndex index, CheckpointIndex::open(iteration_dir));
  MS_RETURN_IF_ERROR(index.check_file_sizes());
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, shape] : index.shapes()) {
    if (!index.has(kind, name)) continue;
    ParameterSpec spec;
    spec.name = name;
    spec.global_shape = Shape::from(shape);
    spec.split = static_cast<TensorParallelSplit>(index.split_of(name));
    MS_ASSIGN_OR_RETURN(out[name], index.full_tensor(kind, spec));
  }
  return out;
}

}  // namespace mindspeed
