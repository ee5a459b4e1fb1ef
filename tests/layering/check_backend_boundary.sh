#!/usr/bin/env bash
# Fails (and lists the lines) when code outside src/kernels/ uses the CPU backend directly:
# OpenMP pragmas or <omp.h>, cpu:: kernels, cblas, or the backend's own headers
# (kernels/cpu/, kernels/blas/). Such code must call the kernel table through a Backend.
# One reviewed exception: core/rng.cpp fills master weights on the host at initialisation
# (results are independent of the thread count).
set -euo pipefail
src="${1:?usage: check_backend_boundary.sh <src dir>}"
pattern='#pragma omp|#include <omp\.h>|\bcpu::|cblas|#include "kernels/(cpu|blas)/'
hits=$(grep -rnE "$pattern" "$src" --include='*.cpp' --include='*.h' \
         | grep -v "^$src/kernels/" | grep -v "^$src/core/rng.cpp:" || true)
if [ -n "$hits" ]; then
  echo "backend boundary violated (use the kernel table through ForwardContext/Backend):"
  echo "$hits"
  exit 1
fi
echo "backend boundary: no backend internals outside src/kernels/"
