#!/usr/bin/env bash
# The whole test suite: installs dependencies, builds with -Werror (preset "ci"), runs ctest
# (unit, golden, MPI and end-to-end tests) and prints its summary.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake --preset ci
cmake --build --preset ci -j "$(nproc)"
ctest --preset ci
