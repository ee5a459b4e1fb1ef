// The single-process ParallelState (the MPI one is built in initialize.cpp).
#include "parallel/parallel_state.h"

#include "core/str_cat.h"

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
  for (std::unique_ptr<ProcessGroup>* g :
       {&world_, &tp_, &pp_, &cp_, &cp_ulysses_, &cp_ring_, &dp_, &dp_cp_, &mp_, &embedding_,
        &tp_cp_, &tp_dp_cp_, &ep_, &expert_tp_, &tp_ep_, &tp_ep_pp_, &expert_dp_, &tp_x_, &tp_y_}) {
    if (*g) *g = make_staged_process_group(std::move(*g), transfers);
  }
  for (std::unique_ptr<ParallelState>* view : {&attention_2d_, &tp_x_as_tp_, &tp_y_as_tp_}) {
    if (*view) (*view)->stage_collectives_through_host(transfers);
  }
}

std::vector<std::string> ParallelState::set_group_buffers(
    const std::map<std::string, int64_t>& megabytes) {
  // MindSpeed's keys and this engine's groups (Megatron's pg names; MindSpeed's older expert
  // names).
  const std::map<std::string, ProcessGroup*> groups = {
      {"dp", dp_.get()},
      {"dp_cp", dp_cp_.get()},
      {"cp", cp_.get()},
      {"mp", mp_.get()},
      {"tp", tp_.get()},
      {"pp", pp_.get()},
      {"embd", embedding_.get()},
      {"tp_dp_cp", tp_dp_cp_.get()},
      {"tp_cp", tp_cp_.get()},
      {"exp", ep_.get()},
      {"ep", ep_.get()},
      {"tp_exp", tp_ep_.get()},
      {"tp_ep_mp", tp_ep_pp_.get()},
      {"mp_exp", tp_ep_pp_.get()},
      {"dp_modulo_exp", expert_dp_.get()},
      {"cp_ulysses", cp_ulysses_.get()},
      {"cp_ring", cp_ring_.get()},
      {"nd1_dim1", tp_x_.get()},
      {"nd1_dim2", tp_y_.get()},
      {"tp-y-cp", attention_2d_ ? attention_2d_->cp_ulysses_.get() : nullptr}};
  std::vector<std::string> lines;
  for (const auto& [key, mb] : megabytes) {
    const auto it = groups.find(key);
    if (it == groups.end() || it->second == nullptr) {
      lines.push_back(str_cat(key, ": ", mb, " MB, no such group in this engine (not applied)"));
      continue;
    }
    ProcessGroup& g = *it->second;
    g.set_buffer_bytes(mb << 20);
    // The X and Y axes also run as one-axis tensor-parallel views (the 2D overlap's chunked ops).
    if (key == "nd1_dim1" && tp_x_as_tp_) tp_x_as_tp_->tp_->set_buffer_bytes(mb << 20);
    if (key == "nd1_dim2" && tp_y_as_tp_) tp_y_as_tp_->tp_->set_buffer_bytes(mb << 20);
    lines.push_back(str_cat(key, ": ", mb, " MB on group ", g.name(), " (", g.size(),
                            g.size() == 1 ? " rank" : " ranks",
                            g.size() == 1 ? ", moves nothing" : "", ")"));
  }
  return lines;
}

}  // namespace mindspeed
