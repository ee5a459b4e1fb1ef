// torchrun's command line (see torchrun_args.h). Ports the flag set of torch.distributed.run
// (PyTorch 2.x) that this launcher honours.
#include "launch/torchrun_args.h"

#include <cstdlib>
#include <map>

namespace mindspeed::launch {
namespace {

// "--nproc_per_node" and "--nproc-per-node" are one flag: the name with dashes.
std::string canonical(std::string flag) {
  for (char& ch : flag) {
    if (ch == '_') ch = '-';
  }
  return flag;
}

// PET_NPROC_PER_NODE for --nproc-per-node (torchrun's environment fallback).
std::string pet_variable(const std::string& flag) {
  std::string name = "PET_";
  for (char ch : flag.substr(2))
    name += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return name;
}

StatusOr<int> to_int(const std::string& flag, const std::string& value, int min) {
  char* end = nullptr;
  const long v = std::strtol(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || v < min || v > (1 << 24)) {
    return invalid_argument("torchrun: ", flag, " expects an integer >= ", min, ", got '", value,
                            "'");
  }
  return static_cast<int>(v);
}

StatusOr<double> to_seconds(const std::string& key, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(v > 0.0)) {
    return invalid_argument("torchrun: --rdzv-conf ", key,
                            " expects a positive number of seconds, got '", value, "'");
  }
  return v;
}

// host or host:port (IPv6 in brackets).
Status split_endpoint(const std::string& endpoint, std::string* host, int* port) {
  std::string h = endpoint;
  std::string p;
  if (!h.empty() && h.front() == '[') {
    const size_t close = h.find(']');
    if (close == std::string::npos)
      return invalid_argument("torchrun: --rdzv-endpoint '", endpoint, "' lacks its ']'");
    if (close + 1 < h.size() && h[close + 1] == ':') p = h.substr(close + 2);
    h = h.substr(1, close - 1);
  } else if (const size_t colon = h.rfind(':'); colon != std::string::npos) {
    p = h.substr(colon + 1);
    h = h.substr(0, colon);
  }
  if (h.empty())
    return invalid_argument("torchrun: --rdzv-endpoint '", endpoint, "' names no host");
  *host = h;
  if (!p.empty()) {
    MS_ASSIGN_OR_RETURN(*port, to_int("--rdzv-endpoint's port", p, 1));
  }
  return ok_status();
}

Status apply_rdzv_conf(const std::string& conf, LaunchSpec* spec) {
  size_t start = 0;
  while (start < conf.size()) {
    size_t end = conf.find(',', start);
    if (end == std::string::npos) end = conf.size();
    const std::string item = conf.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return invalid_argument("torchrun: --rdzv-conf item '", item, "' is not key=value");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "join_timeout") {
      MS_ASSIGN_OR_RETURN(spec->join_timeout_s, to_seconds(key, value));
    } else if (key == "keep_alive_interval") {
      MS_ASSIGN_OR_RETURN(spec->keep_alive_interval_s, to_seconds(key, value));
    } else if (key == "keep_alive_max_attempt") {
      MS_ASSIGN_OR_RETURN(spec->keep_alive_max_attempt,
                          to_int("--rdzv-conf keep_alive_max_attempt", value, 1));
    } else {
      return invalid_argument(
          "torchrun: --rdzv-conf key '", key,
          "' is not supported here (supported: join_timeout, keep_alive_interval, "
          "keep_alive_max_attempt)");
    }
  }
  return ok_status();
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

StatusOr<std::vector<std::string>> expand_slurm_hostlist(const std::string& list) {
  std::vector<std::string> hosts;
  size_t i = 0;
  while (i < list.size()) {
    // One entry: a prefix, optionally one bracketed range list, then a suffix up to a top-level
    // ','.
    std::string prefix, ranges, suffix;
    bool in_brackets = false, seen_brackets = false;
    for (; i < list.size(); ++i) {
      const char ch = list[i];
      if (ch == ',' && !in_brackets) break;
      if (ch == '[') {
        if (in_brackets || seen_brackets)
          return invalid_argument("Slurm node list '", list, "': nested or repeated '['");
        in_brackets = seen_brackets = true;
      } else if (ch == ']') {
        if (!in_brackets) return invalid_argument("Slurm node list '", list, "': ']' without '['");
        in_brackets = false;
      } else if (in_brackets) {
        ranges += ch;
      } else {
        (seen_brackets ? suffix : prefix) += ch;
      }
    }
    ++i;  // past ','
    if (in_brackets) return invalid_argument("Slurm node list '", list, "': '[' without ']'");
    if (!seen_brackets) {
      if (!prefix.empty()) hosts.push_back(prefix);
      continue;
    }
    size_t r = 0;
    while (r <= ranges.size()) {
      size_t end = ranges.find(',', r);
      if (end == std::string::npos) end = ranges.size();
      const std::string range = ranges.substr(r, end - r);
      r = end + 1;
      const size_t dash = range.find('-');
      const std::string lo = range.substr(0, dash),
                        hi = dash == std::string::npos ? lo : range.substr(dash + 1);
      if (lo.empty() || hi.empty() || lo.find_first_not_of("0123456789") != std::string::npos ||
          hi.find_first_not_of("0123456789") != std::string::npos) {
        return invalid_argument("Slurm node list '", list, "': bad range '", range, "'");
      }
      const long a = std::stol(lo), b = std::stol(hi);
      if (b < a || b - a > 100000)
        return invalid_argument("Slurm node list '", list, "': bad range '", range, "'");
      for (long n = a; n <= b; ++n) {
        std::string digits = std::to_string(n);
        if (digits.size() < lo.size())
          digits.insert(0, lo.size() - digits.size(), '0');  // zero padding of the range
        hosts.push_back(prefix + digits + suffix);
      }
    }
  }
  if (hosts.empty()) return invalid_argument("Slurm node list '", list, "' names no host");
  return hosts;
}

StatusOr<LaunchSpec> parse_torchrun_args(const std::vector<std::string>& args,
                                         const Environment& env) {
  // Flags taking a value, and switches; the rest of torchrun's flags are refused by name.
  static const std::map<std::string, bool> kKnown = {
      {"--nnodes", true},        {"--nproc-per-node", true}, {"--node-rank", true},
      {"--master-addr", true},   {"--master-port", true},    {"--rdzv-backend", true},
      {"--rdzv-endpoint", true}, {"--rdzv-id", true},        {"--rdzv-conf", true},
      {"--local-addr", true},    {"--max-restarts", true},   {"--standalone", false},
      {"--no-python", false}};
  static const std::map<std::string, std::string> kRefused = {
      {"--module", "runs a Python module; name the training binary instead"},
      {"-m", "runs a Python module; name the training binary instead"},
      {"--run-path", "runs a Python file through runpy; name the training binary instead"},
      {"--log-dir", "per-rank log files are not written by this launcher; redirect its output"},
      {"--redirects", "per-rank log files are not written by this launcher; redirect its output"},
      {"-r", "per-rank log files are not written by this launcher; redirect its output"},
      {"--tee", "per-rank log files are not written by this launcher; redirect its output"},
      {"-t", "per-rank log files are not written by this launcher; redirect its output"},
      {"--local-ranks-filter", "every rank's output is shown"},
      {"--monitor-interval", "workers are watched continuously"},
      {"--start-method", "ranks are processes started by MPI"},
      {"--role", "there is one role"},
      {"--logs-specs", "per-rank log files are not written by this launcher"}};

  std::map<std::string, std::string> given;  // canonical flag -> value ("" for switches)
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the program
    std::string flag = a, value;
    bool has_value = false;
    if (const size_t eq = a.find('='); eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    flag = canonical(flag);
    if (auto r = kRefused.find(flag); r != kRefused.end()) {
      return invalid_argument("torchrun: ", flag, " is not supported by this launcher (", r->second,
                              ")");
    }
    auto k = kKnown.find(flag);
    if (k == kKnown.end()) {
      return invalid_argument(
          "torchrun: unknown flag ", a,
          " (supported: --nnodes, --nproc-per-node, --node-rank, --master-addr, --master-port, "
          "--rdzv-backend, --rdzv-endpoint, --rdzv-id, --rdzv-conf, --local-addr, "
          "--max-restarts 0, --standalone, --no-python)");
    }
    if (k->second && !has_value) {
      if (i + 1 >= args.size()) return invalid_argument("torchrun: ", flag, " expects a value");
      value = args[++i];
    } else if (!k->second && has_value) {
      return invalid_argument("torchrun: ", flag, " takes no value");
    }
    given[flag] = value;
  }
  LaunchSpec spec;
  spec.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  if (spec.program.empty()) {
    return invalid_argument(
        "torchrun: no training program given (usage: torchrun [flags] pretrain_gpt.py ...)");
  }
  // torchrun's PET_<FLAG> variables stand in for flags not on the line.
  for (const auto& [flag, takes_value] : kKnown) {
    if (given.count(flag) != 0) continue;
    if (std::optional<std::string> v = env(pet_variable(flag))) {
      if (takes_value) {
        given[flag] = *v;
      } else if (*v == "1" || *v == "true" || *v == "True") {
        given[flag] = "";
      }
    }
  }
  auto has = [&](const char* f) { return given.count(f) != 0; };

  if (has("--max-restarts") && given["--max-restarts"] != "0") {
    return invalid_argument(
        "torchrun: --max-restarts ", given["--max-restarts"],
        " is not supported (a failed job ends every rank; resume it from its last checkpoint with "
        "--load)");
  }
  if (has("--nnodes")) {
    const std::string& n = given["--nnodes"];
    if (n.find(':') != std::string::npos) {
      const std::string lo = n.substr(0, n.find(':')), hi = n.substr(n.find(':') + 1);
      if (lo != hi) {
        return invalid_argument("torchrun: elastic --nnodes ", n,
                                " is not supported (a fixed node count: --nnodes N or N:N)");
      }
      MS_ASSIGN_OR_RETURN(spec.nnodes, to_int("--nnodes", lo, 1));
    } else {
      MS_ASSIGN_OR_RETURN(spec.nnodes, to_int("--nnodes", n, 1));
    }
  }
  if (has("--nproc-per-node")) {
    MS_ASSIGN_OR_RETURN(spec.nproc_per_node,
                        to_int("--nproc-per-node", given["--nproc-per-node"], 1));
  }
  if (has("--rdzv-backend")) {
    spec.rdzv_backend = given["--rdzv-backend"];
    if (spec.rdzv_backend != "static" && spec.rdzv_backend != "c10d") {
      return invalid_argument(
          "torchrun: --rdzv-backend ", spec.rdzv_backend,
          " is not supported (static or c10d: both rendezvous over TCP at the endpoint)");
    }
  }
  // Slurm: one launcher per node (srun --ntasks-per-node=1 torchrun ...).
  const std::optional<std::string> slurm_nnodes = env("SLURM_NNODES"),
                                   slurm_nodeid = env("SLURM_NODEID"),
                                   slurm_nodelist = env("SLURM_JOB_NODELIST");
  const bool under_slurm = slurm_nnodes.has_value() && slurm_nodeid.has_value();
  if (!has("--nnodes") && under_slurm) {
    MS_ASSIGN_OR_RETURN(spec.nnodes, to_int("SLURM_NNODES", *slurm_nnodes, 1));
  }
  if (has("--node-rank")) {
    MS_ASSIGN_OR_RETURN(spec.node_rank, to_int("--node-rank", given["--node-rank"], 0));
  } else if (under_slurm) {
    MS_ASSIGN_OR_RETURN(spec.node_rank, to_int("SLURM_NODEID", *slurm_nodeid, 0));
  } else if (spec.rdzv_backend == "c10d") {
    spec.node_rank = -1;
  }
  if (has("--master-addr"))
    spec.master_addr = given["--master-addr"];
  else if (under_slurm && slurm_nodelist.has_value()) {
    MS_ASSIGN_OR_RETURN(std::vector<std::string> hosts, expand_slurm_hostlist(*slurm_nodelist));
    spec.master_addr = hosts.front();
  }
  if (has("--master-port")) {
    MS_ASSIGN_OR_RETURN(spec.master_port, to_int("--master-port", given["--master-port"], 1));
  }
  if (has("--rdzv-endpoint")) {
    MS_RETURN_IF_ERROR(
        split_endpoint(given["--rdzv-endpoint"], &spec.master_addr, &spec.master_port));
  }
  if (has("--rdzv-id")) spec.run_id = given["--rdzv-id"];
  if (has("--rdzv-conf")) MS_RETURN_IF_ERROR(apply_rdzv_conf(given["--rdzv-conf"], &spec));
  if (has("--local-addr")) spec.local_addr = given["--local-addr"];
  spec.no_python = has("--no-python");
  if (has("--standalone")) {
    if (spec.nnodes != 1)
      return invalid_argument("torchrun: --standalone is one node, but --nnodes is ", spec.nnodes);
    spec.node_rank = 0;
    spec.master_addr = "127.0.0.1";
    spec.master_port = 0;  // any free port, as torchrun's standalone store
  }
  if (spec.master_port > 65535)
    return invalid_argument("torchrun: --master-port ", spec.master_port, " is not a port");
  if (spec.node_rank >= spec.nnodes) {
    return invalid_argument("torchrun: --node-rank ", spec.node_rank,
                            " is out of range for --nnodes ", spec.nnodes, " (node ranks are 0 .. ",
                            spec.nnodes - 1, ")");
  }
  if (spec.program.front() == "-m" || spec.program.front() == "--module") {
    return invalid_argument("torchrun: Python modules are not supported; name the training binary");
  }
  return spec;
}

}  // namespace mindspeed::launch
