// Shared state of the MPI tests.
#pragma once

#include "parallel/initialize.h"

namespace mindspeed::testing {
/// This process's MPI world (set by mpi_test_main.cpp).
MpiWorld& mpi_world();
}  // namespace mindspeed::testing
