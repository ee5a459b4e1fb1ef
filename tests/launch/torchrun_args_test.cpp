// torchrun's command line (launch/torchrun_args.h): Megatron's and MindSpeed's
// DISTRIBUTED_ARGS spellings, torchrun's PET_ variables, Slurm's variables, the refusals, and
// Slurm's host lists.
#include "launch/torchrun_args.h"

#include <gtest/gtest.h>

#include <map>

namespace mindspeed::launch {
namespace {

Environment env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

StatusOr<LaunchSpec> parse(const std::vector<std::string>& args,
                           std::map<std::string, std::string> vars = {}) {
  return parse_torchrun_args(args, env_of(std::move(vars)));
}

TEST(TorchrunArgs, MegatronDistributedArgs) {
  // Megatron-LM's examples/gpt3/train_gpt3_175b_distributed.sh: underscores, separate values.
  StatusOr<LaunchSpec> s =
      parse({"--nproc_per_node", "8", "--nnodes", "2", "--node_rank", "1", "--master_addr",
             "10.0.0.5", "--master_port", "6000", "pretrain_gpt.py", "--num-layers", "2"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->nproc_per_node, 8);
  EXPECT_EQ(s->nnodes, 2);
  EXPECT_EQ(s->node_rank, 1);
  EXPECT_EQ(s->master_addr, "10.0.0.5");
  EXPECT_EQ(s->master_port, 6000);
  EXPECT_EQ(s->world_size(), 16);
  EXPECT_EQ(s->program, (std::vector<std::string>{"pretrain_gpt.py", "--num-layers", "2"}));
}

TEST(TorchrunArgs, DashesEqualsAndDefaults) {
  StatusOr<LaunchSpec> s = parse({"--nproc-per-node=4", "--nnodes=3:3", "--node-rank=2", "train"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->nproc_per_node, 4);
  EXPECT_EQ(s->nnodes, 3);
  EXPECT_EQ(s->node_rank, 2);
  EXPECT_EQ(s->master_addr, "127.0.0.1");  // torchrun's defaults
  EXPECT_EQ(s->master_port, 29500);
  EXPECT_DOUBLE_EQ(s->join_timeout_s, 600.0);
  // "--" ends the launcher's flags.
  s = parse({"--nnodes", "1", "--", "--odd-program-name"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->program.front(), "--odd-program-name");
}

TEST(TorchrunArgs, RendezvousEndpointAndConf) {
  StatusOr<LaunchSpec> s =
      parse({"--nnodes", "2", "--rdzv_backend", "c10d", "--rdzv_endpoint", "head:29400",
             "--rdzv_id", "job7", "--rdzv_conf",
             "join_timeout=30,keep_alive_interval=2,keep_alive_max_attempt=4", "pretrain_gpt.py"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->master_addr, "head");
  EXPECT_EQ(s->master_port, 29400);
  EXPECT_EQ(s->node_rank, -1);  // c10d without --node-rank: assigned at the rendezvous
  EXPECT_EQ(s->run_id, "job7");
  EXPECT_DOUBLE_EQ(s->join_timeout_s, 30.0);
  EXPECT_DOUBLE_EQ(s->keep_alive_interval_s, 2.0);
  EXPECT_EQ(s->keep_alive_max_attempt, 4);
  s = parse({"--rdzv-endpoint", "[fe80::1]:1234", "x"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->master_addr, "fe80::1");
  EXPECT_EQ(s->master_port, 1234);
}

TEST(TorchrunArgs, PetVariablesStandInForFlags) {
  StatusOr<LaunchSpec> s = parse({"--nnodes", "2", "x"}, {{"PET_NNODES", "4"},
                                                          {"PET_NPROC_PER_NODE", "3"},
                                                          {"PET_NODE_RANK", "1"},
                                                          {"PET_MASTER_ADDR", "m"}});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->nnodes, 2);  // the line wins
  EXPECT_EQ(s->nproc_per_node, 3);
  EXPECT_EQ(s->node_rank, 1);
  EXPECT_EQ(s->master_addr, "m");
}

TEST(TorchrunArgs, SlurmVariablesStandInForFlags) {
  // srun --ntasks-per-node=1 torchrun --nproc_per_node 4 pretrain_gpt.py ...
  const std::map<std::string, std::string> slurm = {
      {"SLURM_NNODES", "3"}, {"SLURM_NODEID", "2"}, {"SLURM_JOB_NODELIST", "gpu[07-09]"}};
  StatusOr<LaunchSpec> s = parse({"--nproc_per_node", "4", "pretrain_gpt.py"}, slurm);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->nnodes, 3);
  EXPECT_EQ(s->node_rank, 2);
  EXPECT_EQ(s->master_addr, "gpu07");
  // Flags given win over Slurm's variables.
  s = parse({"--nnodes", "2", "--node_rank", "0", "--master_addr", "10.1.1.1", "x"}, slurm);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->nnodes, 2);
  EXPECT_EQ(s->node_rank, 0);
  EXPECT_EQ(s->master_addr, "10.1.1.1");
}

TEST(TorchrunArgs, StandaloneIsOneNodeOnAFreePort) {
  StatusOr<LaunchSpec> s = parse({"--standalone", "--nproc_per_node", "2", "x"});
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->node_rank, 0);
  EXPECT_EQ(s->master_port, 0);
  EXPECT_FALSE(parse({"--standalone", "--nnodes", "2", "x"}).ok());
}

TEST(TorchrunArgs, RefusedByName) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--max-restarts", "3", "x"}, "--max-restarts 3 is not supported"},
      {{"--nnodes", "1:4", "x"}, "elastic --nnodes 1:4"},
      {{"--log-dir", "/tmp/l", "x"}, "--log-dir is not supported"},
      {{"-m", "pkg"}, "-m is not supported"},
      {{"--tee", "3", "x"}, "--tee is not supported"},
      {{"--rdzv-backend", "etcd", "x"}, "--rdzv-backend etcd is not supported"},
      {{"--rdzv-conf", "read_timeout=5", "x"}, "--rdzv-conf key 'read_timeout'"},
      {{"--rdzv-conf", "join_timeout=-1", "x"}, "join_timeout expects a positive"},
      {{"--nproc_per_node", "gpu", "x"}, "--nproc-per-node expects an integer"},
      {{"--nnodes", "2", "--node_rank", "2", "x"}, "--node-rank 2 is out of range for --nnodes 2"},
      {{"--bogus", "x"}, "unknown flag --bogus"},
      {{"--nnodes", "2"}, "no training program"},
      {{"--standalone=1", "x"}, "--standalone takes no value"},
      {{"--master_port", "70000", "x"}, "is not a port"},
  };
  for (const Case& c : cases) {
    StatusOr<LaunchSpec> s = parse(c.args);
    ASSERT_FALSE(s.ok()) << c.needle;
    EXPECT_NE(s.status().message().find(c.needle), std::string::npos) << s.status().message();
  }
  EXPECT_TRUE(parse({"--max_restarts", "0", "x"}).ok());
}

TEST(SlurmHostlist, Expands) {
  auto hosts = [](const std::string& list) {
    StatusOr<std::vector<std::string>> h = expand_slurm_hostlist(list);
    EXPECT_TRUE(h.ok()) << list;
    return h.ok() ? *h : std::vector<std::string>{};
  };
  EXPECT_EQ(hosts("node1"), (std::vector<std::string>{"node1"}));
  EXPECT_EQ(hosts("node[01-03,7],gpu5"),
            (std::vector<std::string>{"node01", "node02", "node03", "node7", "gpu5"}));
  EXPECT_EQ(hosts("a[8-10]-ib"), (std::vector<std::string>{"a8-ib", "a9-ib", "a10-ib"}));
  EXPECT_FALSE(expand_slurm_hostlist("node[3-1]").ok());
  EXPECT_FALSE(expand_slurm_hostlist("node[1-2").ok());
  EXPECT_FALSE(expand_slurm_hostlist("").ok());
}

}  // namespace
}  // namespace mindspeed::launch
