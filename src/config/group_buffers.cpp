// Per-group communication buffer sizes (group_buffers.h).
#include "config/group_buffers.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/str_cat.h"

namespace mindspeed {
namespace {

std::string trimmed(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch != ' ') out += ch;
  return out;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == sep) {
      parts.push_back(text.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

// MindSpeed's 2 * ceil(x / 2^20): x elements of the formula as MB.
int64_t mb(double x) { return 2 * static_cast<int64_t>(std::ceil(x / 1024.0 / 1024.0)); }

}  // namespace

const std::vector<std::string>& group_buffer_keys() {
  static const std::vector<std::string> keys = {"dp",
                                                "dp_cp",
                                                "cp",
                                                "mp",
                                                "mp_exp",
                                                "tp",
                                                "pp",
                                                "embd",
                                                "tp_dp_cp",
                                                "tp_dp",
                                                "tp_cp",
                                                "tp_exp",
                                                "tp_ep_mp",
                                                "exp",
                                                "ep",
                                                "dp_modulo_exp",
                                                "pp_new_stream",
                                                "cp2",
                                                "cp_ulysses",
                                                "cp_ring",
                                                "cp_ring_intra",
                                                "cp_ring_intra_overlap",
                                                "nd1_dim1",
                                                "ag_x_sd_rcv_overlap",
                                                "nd1_dim2",
                                                "ag_y_sd_rcv_overlap",
                                                "nd2_dim1",
                                                "nd2_dim2",
                                                "default_group"};
  return keys;
}

StatusOr<std::map<std::string, int64_t>> parse_group_buffers(const std::string& text) {
  std::map<std::string, int64_t> sizes;
  const char sep = text.find(',') != std::string::npos ? ',' : ';';
  for (const std::string& part : split(text, sep)) {
    const std::vector<std::string> kv = split(part, ':');
    if (kv.size() != 2) {
      return invalid_argument(
          "--hccl-group-buffer \"", text, "\": \"", part,
          "\" is not a key:MB pair; write pairs like \"dp:200;tp:300\" separated by ';' or ','");
    }
    const std::string key = trimmed(kv[0]), value = trimmed(kv[1]);
    const auto& keys = group_buffer_keys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
      std::string allowed;
      for (const std::string& k : keys) allowed += (allowed.empty() ? "" : ", ") + k;
      return invalid_argument("--hccl-group-buffer: unknown group key \"", key,
                              "\" (MindSpeed's keys: ", allowed, ")");
    }
    char* end = nullptr;
    const long long mbytes = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || end == nullptr || *end != '\0') {
      return invalid_argument("--hccl-group-buffer: \"", value, "\" for key \"", key,
                              "\" is not a whole number of MB; write e.g. ", key, ":200");
    }
    if (mbytes <= 0 || mbytes > (int64_t{1} << 40)) {
      return invalid_argument("--hccl-group-buffer: ", mbytes, " MB for key \"", key,
                              "\" must be greater than 0 (and at most 2^40)");
    }
    sizes[key] = mbytes;
  }
  return sizes;
}

std::map<std::string, int64_t> adaptive_group_buffers(const ModelConfig& m, const ParallelConfig& p,
                                                      int64_t micro_batch_size) {
  const double s = static_cast<double>(m.seq_length), b = static_cast<double>(micro_batch_size);
  const double h = static_cast<double>(m.hidden_size), cp = p.context_parallel_size;
  const double tp = p.tensor_model_parallel_size, ep = p.expert_model_parallel_size;
  const double topk = static_cast<double>(m.moe.router_topk),
               f = p.hccl_ep_group_buffer_adaptive_factor;
  const double heads = static_cast<double>(m.num_attention_heads);
  const double groups = m.group_query_attention ? static_cast<double>(m.num_query_groups) : 1.0;
  const MoeDispatcher dispatcher = m.moe.dispatcher;
  std::map<std::string, int64_t> out;
  // TP: the sequence-parallel all-gather of [s/cp, b, h], twice that as an all-reduce without SP;
  // alltoall_seq also moves the routed tokens.
  const int64_t tp_mlp = mb(s / cp * b * h);
  out["tp"] = p.sequence_parallel ? tp_mlp : 2 * tp_mlp;
  if (dispatcher == MoeDispatcher::kAllToAllSeq) {
    const int64_t tp_moe = f > 0 ? mb(f * s / cp / tp * b * h * topk) : 200;
    out["tp"] = std::max(out["tp"], tp_moe);
  }
  // PP: one stage's activations.
  out["pp"] = out["pp_new_stream"] = mb(s / cp / (p.sequence_parallel ? tp : 1.0) * b * h);
  // The optimizer's small reductions.
  out["mp"] = out["mp_exp"] = 10;
  // Experts: the routed tokens.
  out["exp"] = f > 0 ? mb(s / cp / tp * b * h * topk) : 200;
  if (dispatcher == MoeDispatcher::kAllGather) {
    out["tp_exp"] = f > 0 ? mb(f * s / cp * b * h * ep) : 200;
  } else if (dispatcher == MoeDispatcher::kAllToAllSeq && p.moe_tp_extend_ep) {
    out["tp_exp"] = f > 0 ? mb(f * s / cp / tp * b * h * topk) : 200;
  }
  out["tp_cp"] = 10;
  // Context parallelism: Ulysses' all-to-all of [s/cp, b, h/tp]; the ring's key/value blocks.
  if (p.cp.algo == CpAlgo::kUlysses) {
    out["cp"] = mb(s / cp * b * h / tp);
  } else if (p.cp.algo == CpAlgo::kRing) {
    const int64_t cp2 = mb(s / cp * b * h / heads * groups / tp);
    const int64_t whole = 2 * cp2;
    const bool window = p.cp.window_size > 1, overlap = p.cp.send_recv_overlap;
    if (overlap) {
      out["cp2"] = out["cp"] = cp2;
      if (window) out["cp_ring_intra"] = out["cp_ring_intra_overlap"] = cp2;
    } else {
      out["cp"] = whole;
      if (window) out["cp_ring_intra"] = whole;
    }
  } else {  // hybrid: Ulysses inside, ring across
    const double ulysses = p.cp.ulysses_degree, ring = cp / ulysses;
    const int64_t u = mb(s / ulysses * b * h / tp);
    const int64_t r = mb(s / ring * b * h / heads * groups / tp);
    const bool window = p.cp.window_size > 1, overlap = p.cp.send_recv_overlap;
    out["cp_ulysses"] = u;
    out["cp"] = 10;  // the loss's reductions
    if (overlap) {
      out["cp_ring"] = out["cp2"] = r;
      if (window) out["cp_ring_intra"] = out["cp_ring_intra_overlap"] = r;
    } else {
      out["cp_ring"] = 2 * r;
      if (window) out["cp_ring_intra"] = 2 * r;
    }
  }
  return out;
}

StatusOr<std::map<std::string, int64_t>> group_buffers(const Configs& c) {
  std::map<std::string, int64_t> sizes;
  if (c.parallel.hccl_group_buffer_adaptive) {
    sizes = adaptive_group_buffers(c.model, c.parallel, c.training.micro_batch_size);
  }
  if (!c.parallel.hccl_group_buffer.empty()) {
    MS_ASSIGN_OR_RETURN(auto manual, parse_group_buffers(c.parallel.hccl_group_buffer));
    for (const auto& [key, value] : manual) sizes[key] = value;
  }
  return sizes;
}

}  // namespace mindspeed
