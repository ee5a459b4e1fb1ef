// The single-process ParallelState (the MPI one is built in initialize.cpp).
#include "parallel/parallel_state.h"

namespace mindspeed {

std::unique_ptr<ParallelState> ParallelState::single_process() {
  auto ps = std::make_unique<ParallelState>();
  ps->world_ = make_single_process_group("world");
  ps->tp_ = make_single_process_group("tp");
  ps->pp_ = make_single_process_group("pp");
  ps->cp_ = make_single_process_group("cp");
  ps->cp_ulysses_ = make_single_process_group("cp-ulysses");
  ps->cp_ring_ = make_single_process_group("cp-ring");
  ps->dp_ = make_single_process_group("dp");
  ps->dp_cp_ = make_single_process_group("dp-cp");
  ps->mp_ = make_single_process_group("mp");
  ps->embedding_ = make_single_process_group("embedding");
  ps->tp_cp_ = make_single_process_group("tp-cp");
  ps->tp_dp_cp_ = make_single_process_group("tp-dp-cp");
  ps->ep_ = make_single_process_group("ep");
  ps->expert_tp_ = make_single_process_group("expert-tp");
  ps->tp_ep_ = make_single_process_group("tp-ep");
  ps->tp_ep_pp_ = make_single_process_group("tp-ep-pp");
  ps->expert_dp_ = make_single_process_group("expert-dp");
  return ps;
}

void ParallelState::stage_collectives_through_host(const DeviceTransfers& transfers) {
  for (std::unique_ptr<ProcessGroup>* g : {&world_, &tp_, &pp_, &cp_, &cp_ulysses_, &cp_ring_, &dp_, &dp_cp_, &mp_,
                                           &embedding_, &tp_cp_, &tp_dp_cp_, &ep_, &expert_tp_, &tp_ep_, &tp_ep_pp_,
                                           &expert_dp_}) {
    if (*g) *g = make_staged_process_group(std::move(*g), transfers);
  }
}

}  // namespace mindspeed
