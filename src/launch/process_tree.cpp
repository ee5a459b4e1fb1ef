// Starting and ending the launcher's process tree (see process_tree.h).
#include "launch/process_tree.h"

#include <dirent.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

extern char** environ;

namespace mindspeed::launch {
namespace {

// pid -> parent pid of every process (from /proc/<pid>/stat: the field after the command).
std::map<pid_t, pid_t> parent_map() {
  std::map<pid_t, pid_t> parents;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return parents;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::ifstream stat(std::string("/proc/") + e->d_name + "/stat");
    std::string text;
    std::getline(stat, text);
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    long ppid = 0;
    rest >> state >> ppid;
    if (state != 'Z') parents[static_cast<pid_t>(pid)] = static_cast<pid_t>(ppid);
  }
  closedir(dir);
  return parents;
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

void become_subreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

StatusOr<pid_t> spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty()) return invalid_argument("nothing to start");
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return internal_error("fork failed: ", std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);
    if (!env.empty()) environ = envp.data();
    execvp(args[0], args.data());
    const std::string msg = str_cat("cannot start ", argv[0], ": ", std::strerror(errno), "\n");
    (void)!write(2, msg.data(), msg.size());
    _exit(127);
  }
  return pid;
}

std::vector<pid_t> descendants() {
  const std::map<pid_t, pid_t> parents = parent_map();
  const pid_t self = getpid();
  std::vector<pid_t> out;
  for (const auto& [pid, ppid] : parents) {
    // Walk up to init or to us.
    pid_t p = ppid;
    for (int depth = 0; depth < 64 && p > 1 && p != self; ++depth) {
      auto it = parents.find(p);
      if (it == parents.end()) break;
      p = it->second;
    }
    if (p == self) out.push_back(pid);
  }
  return out;
}

std::optional<int> reap_children(pid_t watched) {
  std::optional<int> code;
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == watched) code = exit_code_of(status);
  }
  return code;
}

void end_descendants(double grace_s) {
  for (pid_t pid : descendants()) kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (std::chrono::steady_clock::now() < deadline) {
    reap_children(-1);
    if (descendants().empty()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (pid_t pid : descendants()) kill(pid, SIGKILL);
  for (int i = 0; i < 50 && !descendants().empty(); ++i) {
    reap_children(-1);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  reap_children(-1);
}

std::vector<std::string> environment_with(const std::vector<std::string>& unset,
                                          const std::vector<std::string>& set) {
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    bool drop = false;
    for (const std::string& u : unset) drop = drop || u == name;
    for (const std::string& s : set) drop = drop || s.substr(0, s.find('=')) == name;
    if (!drop) out.push_back(entry);
  }
  out.insert(out.end(), set.begin(), set.end());
  return out;
}

}  // namespace mindspeed::launch
