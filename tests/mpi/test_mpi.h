// Shared state of the MPI tests.
#pragma once

#include <memory>
#include <string>

#include "core/check.h"
#include "parallel/initialize.h"

namespace mindspeed::testing {
/// This process's MPI world (set by mpi_test_main.cpp).
MpiWorld& mpi_world();

/// The tensor-parallel size a golden fixture (tests/golden/<name>) runs at on this world:
/// every rank for the GPT-2-style one, 2 for the LLaMA-style ones (2 query groups; data
/// parallel over the rest). With the parallel state of that layout.
struct FixtureLayout {
  int tp = 1;
  std::unique_ptr<ParallelState> ps;
};
inline FixtureLayout fixture_layout(const std::string& fixture, const MpiWorld& world) {
  FixtureLayout out;
  out.tp = fixture == "gpt2_tiny" ? world.size : 2;
  ParallelConfig pc;
  pc.tensor_model_parallel_size = out.tp;
  auto ps = initialize_model_parallel(pc, world);
  MS_CHECK_OK(ps.status());
  out.ps = std::move(*ps);
  return out;
}
}  // namespace mindspeed::testing
