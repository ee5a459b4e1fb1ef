// pretrain_gpt with fault injection, for the failure tests (e2e_test.cpp): the environment
// variable MS_FAULT_INJECT="<rank>:<iteration>" makes that rank fail at the start of that
// iteration, after the other ranks started communicating; "<rank>:<iteration>:<step>" makes
// it fail before its forward step <step> of that iteration, in the middle of the pipeline
// schedule while its neighbours wait for its activations or gradients. The library itself reads no such variable;
// the hook is passed in through PretrainHooks.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/check.h"
#include "core/str_cat.h"
#include "training/pretrain_gpt_main.h"

int main(int argc, char** argv) {
  int fault_rank = -1;
  long long fault_iteration = -1, fault_step = -1;
  if (const char* f = std::getenv("MS_FAULT_INJECT")) {
    if (std::sscanf(f, "%d:%lld:%lld", &fault_rank, &fault_iteration, &fault_step) < 2) {
      std::fprintf(stderr, "MS_FAULT_INJECT must be <rank>:<iteration>[:<forward step>], got '%s'\n", f);
      return 2;
    }
  }
  mindspeed::PretrainHooks hooks;
  hooks.on_iteration = [=](int rank, int64_t iteration) {
    if (fault_step < 0 && rank == fault_rank && iteration == fault_iteration) {
      mindspeed::fatal(mindspeed::str_cat("fault injected by MS_FAULT_INJECT at iteration ", iteration));
    }
  };
  hooks.on_forward_step = [=](int rank, int64_t iteration, int64_t step) {
    if (rank == fault_rank && iteration == fault_iteration && step == fault_step) {
      mindspeed::fatal(mindspeed::str_cat("fault injected by MS_FAULT_INJECT at iteration ", iteration,
                                          ", forward step ", step));
    }
  };
  return mindspeed::pretrain_gpt_main(argc, argv, hooks);
}
