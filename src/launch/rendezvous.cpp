// The launcher's rendezvous, job start and watch (see rendezvous.h). The messages are text
// lines:
//   node -> node 0:  HELLO <node_rank|-1> <nnodes> <nproc_per_node> <run_id> <host> <addr>
//   <exec_port> node 0 -> node:  START <token> <node_rank> | ABORT <reason> | EXIT <code> |
//   KEEPALIVE node -> node 0:  KEEPALIVE agent -> node:   EXEC <token> <command>      node ->
//   agent: DONE <code>
#include "launch/rendezvous.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "launch/process_tree.h"
#include "launch/socket.h"

namespace mindspeed::launch {
namespace {

volatile std::sig_atomic_t g_signal = 0;
void on_signal(int sig) { g_signal = sig; }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

std::string host_name() {
  char buf[256] = {0};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

// The launcher's own messages, prefixed as torchrun's agent prefixes its log lines.
class Log {
 public:
  explicit Log(std::string who) : who_(std::move(who)) {}
  void info(const std::string& m) const {
    std::cout << "[torchrun " << who_ << "] " << m << std::endl;
  }
  void error(const std::string& m) const {
    std::cerr << "[torchrun " << who_ << "] ERROR: " << m << std::endl;
  }
  void rename(std::string who) { who_ = std::move(who); }

 private:
  std::string who_;
};

std::string random_token() {
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  unsigned char bytes[16] = {0};
  urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  std::string hex;
  char buf[3];
  for (unsigned char b : bytes) {
    std::snprintf(buf, sizeof(buf), "%02x", b);
    hex += buf;
  }
  return hex;
}

std::vector<std::string> words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> w;
  std::string s;
  while (in >> s) w.push_back(s);
  return w;
}

// The rest of `line` after its first `n` words.
std::string after_words(const std::string& line, int n) {
  size_t pos = 0;
  for (int i = 0; i < n; ++i) {
    pos = line.find_first_not_of(' ', pos);
    pos = line.find(' ', pos);
    if (pos == std::string::npos) return "";
  }
  return line.substr(pos + 1);
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Torchrun's variables for the ranks, and the per-process ones that must not leak from the
// launcher's own environment (a stale RANK would contradict MPI's).
const std::vector<std::string> kPerProcessVariables = {"RANK", "LOCAL_RANK", "GROUP_RANK",
                                                       "ROLE_RANK"};

struct JoinedNode {
  int node_rank = 0;
  std::string host, addr;
  int exec_port = 0;
  Connection conn{-1};
};

std::string node_name(int rank, const std::string& host, const std::string& addr) {
  return str_cat("node ", rank, " (", host, ", ", addr, ")");
}

// ---- node 0 ----------------------------------------------------------------------------

class Master {
 public:
  Master(const LaunchSpec& spec, std::vector<std::string> program)
      : spec_(spec), program_(std::move(program)), log_(str_cat("node 0 ", host_name())) {}

  int run() {
    StatusOr<int> listener = listen_on(spec_.master_addr, spec_.master_port);
    if (!listener.ok()) {
      log_.error(str_cat("node 0 (", host_name(), "): the rendezvous cannot listen at ",
                         spec_.master_addr, ":", spec_.master_port, ": ",
                         listener.status().message()));
      return 1;
    }
    listen_fd_ = *listener;
    port_ = bound_port(listen_fd_);
    addr_ = resolve_address(spec_.master_addr);
    token_ = random_token();
    log_.info(str_cat("rendezvous at ", spec_.master_addr, ":", port_, " for ", spec_.nnodes,
                      " node(s) x ", spec_.nproc_per_node, " process(es)"));
    if (const int rc = join(); rc != 0) return rc;
    ::close(listen_fd_);
    return start_and_watch();
  }

 private:
  // Aborts the rendezvous: every connected node is told why; this launcher ends.
  int abort_all(const std::string& why, std::vector<Connection>* pending) {
    log_.error(why);
    tell_abort(why, pending);
    return 1;
  }

  // ABORT with the reason to every joined node (and connections still joining).
  void tell_abort(const std::string& why, std::vector<Connection>* pending = nullptr) {
    for (auto& [r, n] : nodes_) n.conn.send("ABORT " + why);
    if (pending != nullptr) {
      for (Connection& c : *pending) c.send("ABORT " + why);
    }
  }

  int join() {
    std::vector<Connection> pending;
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(spec_.join_timeout_s));
    while (static_cast<int>(nodes_.size()) < spec_.nnodes - 1) {
      if (g_signal != 0)
        return abort_all(
            str_cat("node 0: interrupted (signal ", g_signal, ") during the rendezvous"), &pending);
      if (Clock::now() >= deadline) {
        std::string missing;
        for (int r = 1; r < spec_.nnodes; ++r) {
          if (nodes_.count(r) == 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
        }
        return abort_all(
            str_cat("the rendezvous at ", spec_.master_addr, ":", port_, " timed out after ",
                    spec_.join_timeout_s, " s: node(s) ", missing, " of ", spec_.nnodes,
                    " did not join (not started, or cannot reach ", spec_.master_addr, ":", port_,
                    ")"),
            &pending);
      }
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
      for (Connection& c : pending) fds.push_back({c.fd(), POLLIN, 0});
      poll(fds.data(), fds.size(), 200);
      if (fds[0].revents & POLLIN) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) pending.emplace_back(fd);
      }
      for (size_t i = 0; i < pending.size(); ++i) {
        if (fds.size() > i + 1 && (fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) &&
            !pending[i].read_available()) {
          pending[i].close();
        }
        std::optional<std::string> m = pending[i].next_message();
        if (!m) continue;
        const std::vector<std::string> w = words(*m);
        if (w.size() != 8 || w[0] != "HELLO") {
          pending[i].close();  // not one of ours (a port scanner, another program)
          continue;
        }
        JoinedNode node;
        node.host = w[5];
        node.addr = w[6];
        node.exec_port = std::atoi(w[7].c_str());
        int rank = std::atoi(w[1].c_str());
        const int nnodes = std::atoi(w[2].c_str()), nproc = std::atoi(w[3].c_str());
        const std::string who = str_cat("the node on ", node.host, " (", node.addr, ")");
        if (nnodes != spec_.nnodes || nproc != spec_.nproc_per_node || w[4] != spec_.run_id) {
          return abort_all(
              str_cat(who, " was started with --nnodes ", nnodes, " --nproc-per-node ", nproc,
                      " --rdzv-id ", w[4], ", node 0 with --nnodes ", spec_.nnodes,
                      " --nproc-per-node ", spec_.nproc_per_node, " --rdzv-id ", spec_.run_id,
                      ": every node of a job must be launched with the same values"),
              &pending);
        }
        if (rank < 0) {  // c10d without --node-rank: ranks in join order
          rank = 1;
          while (nodes_.count(rank) != 0) ++rank;
        }
        if (rank == 0 || nodes_.count(rank) != 0) {
          const std::string other = rank == 0 ? host_name() : nodes_[rank].host;
          return abort_all(
              str_cat("node rank ", rank, " is claimed by both ", other, " and ", node.host,
                      ": give each node its own --node-rank (0 .. ", spec_.nnodes - 1, ")"),
              &pending);
        }
        if (rank >= spec_.nnodes) {
          return abort_all(
              str_cat(who, " says --node-rank ", rank, ", outside 0 .. ", spec_.nnodes - 1),
              &pending);
        }
        // mpirun tells nodes apart by address: two launchers on one address would merge.
        int same = node.addr == addr_ ? 0 : -1;
        for (const auto& [r, n] : nodes_) same = n.addr == node.addr ? r : same;
        if (same >= 0) {
          return abort_all(str_cat("node ", rank, " (", node.host, ") and node ", same,
                                   " share the address ", node.addr, ": run one launcher per host"),
                           &pending);
        }
        node.node_rank = rank;
        node.conn = std::move(pending[i]);
        log_.info(str_cat(node_name(rank, node.host, node.addr), " joined (", nodes_.size() + 2,
                          " of ", spec_.nnodes, " nodes)"));
        nodes_[rank] = std::move(node);
      }
      pending.erase(std::remove_if(pending.begin(), pending.end(),
                                   [](const Connection& c) { return !c.open(); }),
                    pending.end());
    }
    for (Connection& c : pending)
      c.send("ABORT the rendezvous is complete; this node is not part of the job");
    for (auto& [r, n] : nodes_) n.conn.send(str_cat("START ", token_, " ", r));
    return 0;
  }

  // mpirun over the joined nodes' addresses, its daemons started through the launchers (the rsh
  // agent), never through Slurm's allocation when the launchers run inside one.
  std::vector<std::string> mpirun_command() const {
    std::string hosts = str_cat(addr_, ":", spec_.nproc_per_node);
    for (const auto& [r, n] : nodes_) hosts += str_cat(",", n.addr, ":", spec_.nproc_per_node);
    std::vector<std::string> cmd = {"mpirun",
                                    "-np",
                                    std::to_string(spec_.world_size()),
                                    "--host",
                                    hosts,
                                    "--bind-to",
                                    "none",
                                    "--mca",
                                    "plm",
                                    "rsh",
                                    "--mca",
                                    "ras",
                                    "^slurm",
                                    "--mca",
                                    "plm_rsh_agent",
                                    str_cat(self_path(), " ", kRshAgentFlag),
                                    "--mca",
                                    "plm_rsh_no_tree_spawn",
                                    "1",
                                    "-x",
                                    "MASTER_ADDR",
                                    "-x",
                                    "MASTER_PORT",
                                    "-x",
                                    "WORLD_SIZE",
                                    "-x",
                                    "LOCAL_WORLD_SIZE",
                                    "-x",
                                    "MS_TORCHRUN_AGENTS",
                                    "-x",
                                    "MS_TORCHRUN_TOKEN"};
    if (geteuid() == 0) cmd.insert(cmd.begin() + 1, "--allow-run-as-root");
    cmd.insert(cmd.end(), program_.begin(), program_.end());
    return cmd;
  }

  std::string agents_variable() const {
    std::string agents;
    for (const auto& [r, n] : nodes_)
      agents += str_cat(agents.empty() ? "" : ",", n.addr, "=", n.addr, ":", n.exec_port);
    return agents;
  }

  static std::string self_path() {
    char buf[4096] = {0};
    const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "torchrun";
  }

  // A node was lost: the others are told, this node's tree ended.
  int lose(const std::string& why) {
    log_.error(why + "; ending the job on every node");
    tell_abort(why);
    end_descendants(5.0);
    for (auto& [r, n] : nodes_) n.conn.flush();  // what a full socket kept queued
    return 1;
  }

  int start_and_watch() {
    const std::vector<std::string> env = environment_with(
        kPerProcessVariables,
        {"MASTER_ADDR=" + spec_.master_addr, str_cat("MASTER_PORT=", port_),
         str_cat("WORLD_SIZE=", spec_.world_size()),
         str_cat("LOCAL_WORLD_SIZE=", spec_.nproc_per_node),
         "MS_TORCHRUN_AGENTS=" + agents_variable(), "MS_TORCHRUN_TOKEN=" + token_});
    StatusOr<pid_t> mpirun = spawn(mpirun_command(), env);
    if (!mpirun.ok())
      return lose(str_cat("node 0: cannot start mpirun: ", mpirun.status().message()));
    log_.info(str_cat("started ", spec_.world_size(), " rank(s) on ", spec_.nnodes, " node(s)"));
    const double interval = spec_.keep_alive_interval_s;
    const double silence = interval * spec_.keep_alive_max_attempt;
    Clock::time_point last_sent = Clock::now();
    for (;;) {
      if (std::optional<int> code = reap_children(*mpirun)) {
        for (auto& [r, n] : nodes_) n.conn.send(str_cat("EXIT ", *code));
        end_descendants(3.0);
        for (auto& [r, n] : nodes_) n.conn.flush();  // what a full socket kept queued
        if (*code != 0) log_.error(str_cat("the job ended with exit code ", *code));
        return *code;
      }
      if (g_signal != 0)
        return lose(str_cat("node 0 (", host_name(), ") was interrupted (signal ", g_signal, ")"));
      std::vector<pollfd> fds;
      for (auto& [r, n] : nodes_) fds.push_back({n.conn.fd(), POLLIN, 0});
      poll(fds.data(), fds.size(), 200);
      size_t i = 0;
      for (auto& [r, n] : nodes_) {
        const bool readable = fds[i++].revents & (POLLIN | POLLHUP | POLLERR);
        const bool open = !readable || n.conn.read_available();
        while (std::optional<std::string> m = n.conn.next_message()) {
          if (m->rfind("ABORT ", 0) == 0)
            return lose(str_cat(node_name(r, n.host, n.addr), ": ", m->substr(6)));
        }
        if (!open) {
          return lose(str_cat(node_name(r, n.host, n.addr),
                              ": its launcher's connection closed (the node ended or was killed)"));
        }
        if (seconds_since(n.conn.last_heard()) > silence) {
          return lose(str_cat(node_name(r, n.host, n.addr), " has been silent for ", silence,
                              " s (keep_alive_interval ", interval, " s x keep_alive_max_attempt ",
                              spec_.keep_alive_max_attempt,
                              "): its network link is down or the host is gone"));
        }
      }
      if (seconds_since(last_sent) >= interval) {
        for (auto& [r, n] : nodes_) n.conn.send("KEEPALIVE");
        last_sent = Clock::now();
      }
    }
  }

  LaunchSpec spec_;
  std::vector<std::string> program_;
  Log log_;
  int listen_fd_ = -1, port_ = 0;
  std::string addr_, token_;
  std::map<int, JoinedNode> nodes_;
};

// ---- the other nodes -------------------------------------------------------------------

class Worker {
 public:
  explicit Worker(const LaunchSpec& spec)
      : spec_(spec),
        log_(str_cat("node ",
                     spec.node_rank < 0 ? std::string("?") : std::to_string(spec.node_rank), " ",
                     host_name())) {}

  int run() {
    const Clock::time_point deadline =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(spec_.join_timeout_s));
    const std::string me = str_cat("node ", spec_.node_rank, " (", host_name(), ")");
    StatusOr<int> fd = connect_until(spec_.master_addr, spec_.master_port, deadline);
    if (!fd.ok()) {
      log_.error(str_cat(me, ": cannot reach the master at ", spec_.master_addr, ":",
                         spec_.master_port, " within ", spec_.join_timeout_s, " s (",
                         fd.status().message(),
                         "): is node 0 started, and are --master-addr / --master-port right?"));
      return 1;
    }
    master_ = Connection(*fd);
    const std::string addr = spec_.local_addr.empty() ? local_address(*fd) : spec_.local_addr;
    StatusOr<int> exec_fd = listen_on(addr, 0);
    if (!exec_fd.ok()) {
      log_.error(str_cat(me, ": cannot listen at ", addr, ": ", exec_fd.status().message()));
      return 1;
    }
    exec_listener_ = *exec_fd;
    master_.send(str_cat("HELLO ", spec_.node_rank, " ", spec_.nnodes, " ", spec_.nproc_per_node,
                         " ", spec_.run_id, " ", host_name(), " ", addr, " ",
                         bound_port(exec_listener_)));
    // The master answers when every node has joined (its own join timeout bounds the wait).
    std::optional<std::string> start = master_.wait_message(deadline + std::chrono::seconds(30));
    if (!start || start->rfind("START ", 0) != 0) {
      log_.error(str_cat(
          me, ": the rendezvous at ", spec_.master_addr, ":", spec_.master_port, " failed: ",
          start ? (start->rfind("ABORT ", 0) == 0 ? start->substr(6) : *start)
                : std::string("node 0 ended it without a reason (or did not answer in time)")));
      return 1;
    }
    const std::vector<std::string> w = words(*start);
    token_ = w.size() > 1 ? w[1] : "";
    rank_ = w.size() > 2 ? std::atoi(w[2].c_str()) : spec_.node_rank;
    log_.rename(str_cat("node ", rank_, " ", host_name()));
    log_.info(str_cat("joined the job at ", spec_.master_addr, ":", spec_.master_port, " as node ",
                      rank_, " of ", spec_.nnodes));
    return watch();
  }

 private:
  std::string me() const { return str_cat("node ", rank_, " (", host_name(), ")"); }

  int end_here(const std::string& why) {
    log_.error(why + "; ending this node's ranks");
    end_descendants(3.0);
    return 1;
  }

  int watch() {
    const double interval = spec_.keep_alive_interval_s;
    const double silence = interval * spec_.keep_alive_max_attempt;
    Clock::time_point last_sent = Clock::now();
    std::vector<Connection> agents;    // agent connections (EXEC requests)
    std::map<pid_t, size_t> commands;  // command pid -> index in agents
    for (;;) {
      for (auto it = commands.begin(); it != commands.end();) {
        if (std::optional<int> code = reap_children(it->first)) {
          agents[it->second].send(str_cat("DONE ", *code));
          it = commands.erase(it);
        } else {
          ++it;
        }
      }
      reap_children(-1);
      if (g_signal != 0) {
        master_.send(str_cat("ABORT node ", rank_, " (", host_name(), ") was interrupted (signal ",
                             g_signal, ")"));
        return end_here(str_cat(me(), ": interrupted (signal ", g_signal, ")"));
      }
      std::vector<pollfd> fds{{master_.fd(), POLLIN, 0}, {exec_listener_, POLLIN, 0}};
      for (Connection& a : agents)
        fds.push_back({a.fd(), a.open() ? static_cast<short>(POLLIN) : short{0}, 0});
      poll(fds.data(), fds.size(), 200);
      // The messages that arrived before a close count (EXIT, ABORT are a launcher's last words).
      const bool master_open =
          !(fds[0].revents & (POLLIN | POLLHUP | POLLERR)) || master_.read_available();
      while (std::optional<std::string> m = master_.next_message()) {
        if (m->rfind("ABORT ", 0) == 0)
          return end_here(str_cat(me(), ": the job was aborted: ", m->substr(6)));
        if (m->rfind("EXIT ", 0) == 0) return finish(std::atoi(m->c_str() + 5));
      }
      if (!master_open) {
        return end_here(str_cat(me(), ": lost the master (node 0 at ", spec_.master_addr, ":",
                                spec_.master_port, "): its connection closed"));
      }
      if (seconds_since(master_.last_heard()) > silence) {
        return end_here(str_cat(me(), ": the master (node 0 at ", spec_.master_addr,
                                ") has been silent for ", silence,
                                " s: the network link is down or node 0 is gone"));
      }
      if (fds[1].revents & POLLIN) {
        const int fd = accept4(exec_listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) agents.emplace_back(fd);
      }
      for (size_t i = 0; i < agents.size(); ++i) {
        if (!agents[i].open()) continue;
        if ((fds.size() > i + 2 && (fds[i + 2].revents & (POLLIN | POLLHUP | POLLERR))) &&
            !agents[i].read_available()) {
          agents[i].close();
          continue;
        }
        std::optional<std::string> m = agents[i].next_message();
        if (!m) continue;
        const std::vector<std::string> w = words(*m);
        if (w.size() < 3 || w[0] != "EXEC" || w[1] != token_) {
          agents[i].send("DONE 255");
          agents[i].close();
          continue;
        }
        const std::string command = after_words(*m, 2);
        StatusOr<pid_t> pid =
            spawn({"/bin/sh", "-c", command}, environment_with(kPerProcessVariables, {}));
        if (!pid.ok()) {
          agents[i].send("DONE 127");
          continue;
        }
        commands[*pid] = i;
      }
      if (seconds_since(last_sent) >= interval) {
        master_.send("KEEPALIVE");
        last_sent = Clock::now();
      }
    }
  }

  // mpirun ended: MPI's daemons here end on their own; what is left after a grace is ended.
  int finish(int code) {
    for (int i = 0; i < 100 && !descendants().empty(); ++i) {
      reap_children(-1);
      usleep(100 * 1000);
    }
    end_descendants(3.0);
    return code;
  }

  LaunchSpec spec_;
  Log log_;
  Connection master_{-1};
  int exec_listener_ = -1;
  int rank_ = 0;
  std::string token_;
};

// Node 0 is the node that holds the master address (static: --node-rank 0; c10d without a
// node rank: the node where the endpoint's address is local).
bool is_master(const LaunchSpec& spec) {
  if (spec.node_rank >= 0) return spec.node_rank == 0;
  const std::string addr = resolve_address(spec.master_addr);
  return !addr.empty() && is_local_address(addr);
}

}  // namespace

int run_node(const LaunchSpec& spec, const std::vector<std::string>& program) {
  install_signal_handlers();
  become_subreaper();
  if (is_master(spec)) {
    LaunchSpec s = spec;
    s.node_rank = 0;
    return Master(s, program).run();
  }
  return Worker(spec).run();
}

int run_rsh_agent(const std::vector<std::string>& args) {
  signal(SIGPIPE, SIG_IGN);
  if (args.empty()) {
    std::cerr << "torchrun agent: no host given\n";
    return 255;
  }
  const std::string& host = args[0];
  std::string command;
  for (size_t i = 1; i < args.size(); ++i) command += (command.empty() ? "" : " ") + args[i];
  const char* agents = std::getenv("MS_TORCHRUN_AGENTS");
  const char* token = std::getenv("MS_TORCHRUN_TOKEN");
  std::string target;
  if (agents != nullptr) {
    std::stringstream list(agents);
    std::string entry;
    while (std::getline(list, entry, ',')) {
      if (entry.substr(0, entry.find('=')) == host) target = entry.substr(entry.find('=') + 1);
    }
  }
  if (target.empty() || token == nullptr || command.find('\n') != std::string::npos) {
    std::cerr << "torchrun agent: no launcher known for host " << host << "\n";
    return 255;
  }
  const size_t colon = target.rfind(':');
  StatusOr<int> fd = connect_until(target.substr(0, colon), std::atoi(target.c_str() + colon + 1),
                                   Clock::now() + std::chrono::seconds(30));
  if (!fd.ok()) {
    std::cerr << "torchrun agent: cannot reach the launcher of " << host << " at " << target << ": "
              << fd.status().message() << "\n";
    return 255;
  }
  Connection conn(*fd);
  conn.send(str_cat("EXEC ", token, " ", command));
  for (;;) {
    std::optional<std::string> m = conn.wait_message(Clock::now() + std::chrono::hours(24 * 365));
    if (!m) return 255;
    if (m->rfind("DONE ", 0) == 0) return std::atoi(m->c_str() + 5);
  }
}

}  // namespace mindspeed::launch
