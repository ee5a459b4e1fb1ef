#!/usr/bin/env bash
# The prepared device check of the CUDA backend, for a session that is lent a GPU (device time
# is scarce: one call, well under 9 minutes). Two steps:
#
#   scripts/gpu_check.sh prepare   # here, no GPU needed: builds build/gpu-check/ (the CUDA test
#                                  # binaries, sm_90a + compute_90 PTX, OpenBLAS linked in) and
#                                  # copies the non-CUDA shared libraries they need beside them
#   scripts/gpu_check.sh run       # on the GPU machine, through the device tool:
#       run(command="scripts/gpu_check.sh run", carry=["build/gpu-check"], timeout_s=540)
#
# `run` records the GPU (nvidia-smi), runs the CUDA kernel tests against the reference kernels
# and writes into $OUT (or build/gpu-check/out): gpu_check_summary.txt (read it first), the
# full test log and its JUnit XML. Without a prepared build it configures and builds one
# there, if that machine has the build's dependencies. Exit code: 0 when every test passed.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=build/gpu-check
mode=${1:-run}

prepare() {
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMS_CUDA=ON -DMS_WERROR=ON -DMS_BUILD_BENCH=OFF \
    -DMS_TEST_AREAS=kernels -DMS_STATIC_BLAS=ON || return 1
  cmake --build "$BUILD" --target cuda_kernels_test -j "$(nproc)" || return 1
  # The shared libraries that are neither the C runtime nor CUDA's (the GPU machine has its own
  # CUDA 13 runtime and cuBLASLt).
  mkdir -p "$BUILD/lib"
  ldd "$BUILD/tests/kernels/cuda_kernels_test" | awk '/=> \// {print $3}' |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux|libstdc\+\+|libgcc_s)[.-]|/cuda|libcu' |
    while read -r lib; do cp -L "$lib" "$BUILD/lib/"; done
  du -sh "$BUILD/tests/kernels/cuda_kernels_test" "$BUILD/lib"
  echo "prepared $BUILD: carry it to the GPU machine and call scripts/gpu_check.sh run"
}

# Where the GPU machine keeps CUDA's libraries: the toolkit, or the NVIDIA wheels of its PyTorch.
cuda_library_path() {
  local dirs=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && dirs="$dirs:$d"
  done
  local wheels
  wheels=$(python3 - 2>/dev/null <<'EOF'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
print(":".join(sorted({os.path.dirname(p) for r in roots for p in glob.glob(os.path.join(r, "nvidia", "*", "lib", "*.so*"))})))
EOF
)
  [ -n "$wheels" ] && dirs="$dirs:$wheels"
  echo "${dirs#:}"
}

run() {
  local out=${OUT:-$BUILD/out}
  mkdir -p "$out"
  local summary="$out/gpu_check_summary.txt"
  {
    echo "# gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  } > "$summary"
  nvidia-smi > "$out/nvidia_smi.txt" 2>&1
  local test_bin="$BUILD/tests/kernels/cuda_kernels_test"
  if [ ! -x "$test_bin" ]; then
    echo "no prepared build: building here" | tee -a "$summary"
    prepare > "$out/build.log" 2>&1 || { echo "build failed (tail of build.log):" >> "$summary"; tail -20 "$out/build.log" >> "$summary"; cat "$summary"; return 1; }
  fi
  export LD_LIBRARY_PATH="$PWD/$BUILD/lib:$(cuda_library_path):${LD_LIBRARY_PATH:-}"
  local status=0
  timeout 420 "$test_bin" --gtest_output="xml:$out/cuda_kernels_test.xml" > "$out/cuda_kernels_test.log" 2>&1 || status=$?
  {
    echo "cuda_kernels_test exit $status"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]' "$out/cuda_kernels_test.log"
    grep -E '^\[  FAILED  \]' "$out/cuda_kernels_test.log" | sort -u
    grep -B2 -A6 'Failure$' "$out/cuda_kernels_test.log" | head -120
  } >> "$summary"
  cat "$summary"
  return $status
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  *) echo "usage: $0 prepare|run" >&2; exit 2 ;;
esac
