// tools/torchrun on one host (the multi-host cases are scripts/multi_host_test.sh): a
// standalone TP2 job equals the single-process run; start-up failures end within a bounded
// time naming the node and the cause; refused flags and programs; pretrain_gpt under a
// launcher that did not bootstrap MPI stops instead of training as a world of one.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "e2e/run_command.h"

namespace mindspeed::testing {
namespace {

const std::string kTorchrun = MS_TORCHRUN;
const std::string kPretrain = MS_PRETRAIN_GPT;
const std::string kModel =
    " --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 2 --hidden-size 64"
    " --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 2"
    " --global-batch-size 4 --train-iters 4 --lr 1e-3 --log-interval 1 --eval-interval 1000 "
    "--eval-iters 0"
    " --seed 1234 --num-threads 1";

// A port nothing listens on now (bound to 0, read, released).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  const std::regex re(R"(\| lm loss: ([0-9.]+E[+-][0-9]+) \|)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator();
       ++it) {
    v.push_back(std::stod((*it)[1]));
  }
  return v;
}

TEST(Launcher, StandaloneTensorParallelEqualsOneProcess) {
  const CommandResult one = run_command(kPretrain + kModel);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const CommandResult two = run_command("OMP_WAIT_POLICY=PASSIVE " + kTorchrun +
                                        " --standalone --nproc_per_node 2 pretrain_gpt.py" +
                                        kModel + " --tensor-model-parallel-size 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find("started 2 rank(s) on 1 node(s)"), std::string::npos) << two.output;
  const std::vector<double> a = losses(one.output), b = losses(two.output);
  ASSERT_EQ(a.size(), 4u) << one.output;
  ASSERT_EQ(b.size(), a.size()) << two.output;
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_NEAR(b[i], a[i], 1e-5 * a[i]) << "iteration " << i + 1;
}

TEST(Launcher, MissingNodeEndsTheMasterNamingIt) {
  const CommandResult r = run_command(
      kTorchrun + " --nnodes 3 --node_rank 0 --master_addr 127.0.0.1 --master_port " +
      std::to_string(free_port()) + " --rdzv_conf join_timeout=1 --no-python /bin/true");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("node(s) 1, 2 of 3 did not join"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, NodeWithoutMasterEndsNamingTheAddress) {
  const int port = free_port();
  const CommandResult r =
      run_command(kTorchrun + " --nnodes 2 --node_rank 1 --master_addr 127.0.0.1 --master_port " +
                  std::to_string(port) + " --rdzv_conf join_timeout=1 --no-python /bin/true");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot reach the master at 127.0.0.1:" + std::to_string(port)),
            std::string::npos)
      << r.output;
  EXPECT_LT(r.seconds, 10.0);
}

TEST(Launcher, TwoNodesOnOneAddressAreRefused) {
  // mpirun tells nodes apart by address: two launchers of one job on one address are refused.
  const std::string port = std::to_string(free_port());
  const std::string common = " --nnodes 2 --master_addr 127.0.0.1 --master_port " + port +
                             " --rdzv_conf join_timeout=20 --no-python /bin/true";
  const CommandResult r =
      run_command("(" + kTorchrun + " --node_rank 1" + common + " & " + kTorchrun +
                  " --node_rank 0" + common + "; echo master=$?; wait)");
  EXPECT_NE(r.output.find("master=1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("share the address 127.0.0.1: run one launcher per host"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("node 1 ("), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 15.0);
}

TEST(Launcher, RefusesWhatItCannotHonour) {
  CommandResult r = run_command(kTorchrun + " --max-restarts 3 pretrain_gpt.py");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--max-restarts 3 is not supported"), std::string::npos) << r.output;
  r = run_command(kTorchrun + " --standalone no_such_script.py");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("runs the engine's binary 'no_such_script'"), std::string::npos)
      << r.output;
}

TEST(Launcher, PretrainStopsWhenTheLauncherDidNotBootstrapMpi) {
  // PyTorch's own torchrun sets WORLD_SIZE per process; srun without PMIx starts tasks apart.
  CommandResult r = run_command("WORLD_SIZE=4 RANK=1 " + kPretrain + kModel);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("WORLD_SIZE=4 (set by PyTorch's torchrun or another launcher), but MPI "
                          "sees a world of 1"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(losses(r.output).size(), 0u);
  r = run_command("SLURM_STEP_NUM_TASKS=3 " + kPretrain + kModel);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("srun started 3 tasks, but MPI sees a world of 1 process"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace mindspeed::testing
