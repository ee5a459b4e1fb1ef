#!/usr/bin/env bash
# The prepared device check of the CUDA backend, for a session that is lent a GPU (device time
# is scarce: one call, well under 9 minutes). Two steps:
#
#   scripts/gpu_check.sh prepare   # here, no GPU needed (about 25 minutes on 2 cores): builds
#                                  # build/gpu-check/ (sm_90a + compute_90 PTX, OpenBLAS linked
#                                  # in) and gathers what runs on the GPU machine into
#                                  # build/gpu-check/payload/: the CUDA kernel tests, pretrain_gpt,
#                                  # generate_text, the golden fixture, the shared libraries that
#                                  # are neither the C runtime nor CUDA's, and Open MPI itself
#                                  # (mpirun, its plugins and PMIx; the GPU machine has no MPI),
#                                  # packed as build/gpu-check/payload.tar.xz (about 25 MB)
#                                  # GPU_CHECK_BUILD=build/ci takes the binaries of the CI build
#                                  # instead (it has the CUDA backend wherever nvcc is): a minute
#   scripts/gpu_check.sh run       # on the GPU machine, through the device tool:
#       run(command="scripts/gpu_check.sh run", carry=["build/gpu-check/payload.tar.xz"], timeout_s=560)
#   scripts/gpu_check.sh bench     # a second call: bench/gpu/run_gpu_bench.sh (ours vs PyTorch)
#
# `run` records the GPU (nvidia-smi) and writes into $OUT (or build/gpu-check/out), summary
# first (gpu_check_summary.txt: read it first), each step's log beside it:
#   1. the CUDA kernel tests against the reference kernels (tests/kernels/cuda/);
#   2. training on the GPU against the CPU, 20 steps, one rank: GPT-2- and LLaMA-style fp32
#      (losses within 1e-4 relative) and LLaMA bf16 (within 1e-2, the bf16 bar);
#   3. the parallel layouts on the one GPU (collectives staged through host memory) against the
#      single-rank GPU run: TP2+SP (plain, CoC 4 chunks, MC2, unaligned linear), 2D TP 2x2 on 4 ranks, PP2
#      interleaved, DP2 distributed optimizer, CP2 ring, EP2;
#   4. a checkpoint saved on the GPU resumed there (bit-exact), and resumed on the CPU;
#   5. generate_text on the GPU against the CPU (greedy tokens equal);
#   6. throughput of a GPT-2 124M-shaped bf16 run (s 1024) on the GPU, from its log line.
# Each training check prints PASS/FAIL with the largest difference (scripts/gpu_check_compare.py).
# Exit code: 0 when every step passed. GPU_CHECK_DEVICE=cpu-fenced runs steps 2-5 here without a
# GPU (the fenced device in place of cuda): a check of the script itself.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${GPU_CHECK_BUILD:-build/gpu-check}
PAYLOAD=build/gpu-check/payload
PACKED=build/gpu-check/payload.tar.xz
mode=${1:-run}

# The shared libraries of the given binaries that neither the C runtime nor CUDA provides (the
# GPU machine has its own CUDA 13 runtime and cuBLASLt), into $PAYLOAD/lib.
copy_libraries() {
  ldd "$@" 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
    grep -v -E '/(libc|libm|libdl|librt|libpthread|ld-linux|libstdc\+\+|libgcc_s)[.-]|/cuda|libcu' |
    while read -r lib; do cp -L -n "$lib" "$PAYLOAD/lib/"; done
}

# Open MPI relocated under $PAYLOAD/mpi/usr (OPAL_PREFIX): mpirun, orted, the MCA plugins, PMIx
# and the help texts, laid out as Debian installs them below /usr.
copy_open_mpi() {
  local root="$PAYLOAD/mpi/usr" multiarch
  multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  mkdir -p "$root/bin" "$root/lib/$multiarch" "$root/share"
  cp -L /usr/bin/orterun /usr/bin/orted "$root/bin/" || return 1
  ln -sf orterun "$root/bin/mpirun"
  cp -rL "/usr/lib/$multiarch/openmpi" "$root/lib/$multiarch/" || return 1
  [ -d "/usr/lib/$multiarch/pmix2" ] && cp -rL "/usr/lib/$multiarch/pmix2" "$root/lib/$multiarch/"
  cp -rL /usr/share/openmpi "$root/share/" || return 1
  rm -rf "$root/lib/$multiarch/openmpi/include"
  copy_libraries "$root/bin/orterun" "$root/bin/orted" $(find "$root/lib" -name '*.so*' -type f)
}

prepare() {
  if [ -z "${GPU_CHECK_BUILD:-}" ]; then  # GPU_CHECK_BUILD=DIR: take the binaries of a CUDA build there
    cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMS_CUDA=ON -DMS_WERROR=ON -DMS_BUILD_BENCH=OFF \
      -DMS_TEST_AREAS=kernels -DMS_STATIC_BLAS=ON || return 1
    cmake --build "$BUILD" --target cuda_kernels_test pretrain_gpt generate_text -j "$(nproc)" || return 1
  fi
  rm -rf "$PAYLOAD"
  mkdir -p "$PAYLOAD/bin" "$PAYLOAD/lib" "$PAYLOAD/golden"
  cp "$BUILD/tests/kernels/cuda_kernels_test" "$BUILD/apps/pretrain_gpt" "$BUILD/tools/generate_text" "$PAYLOAD/bin/"
  cp -r tests/golden/gpt2_tiny "$PAYLOAD/golden/"
  copy_libraries "$PAYLOAD"/bin/*
  # This machine's C++ runtime, for a GPU machine whose own is older (used only there and then).
  mkdir -p "$PAYLOAD/lib/compat"
  cp -L "$(g++ -print-file-name=libstdc++.so.6)" "$(g++ -print-file-name=libgcc_s.so.1)" "$PAYLOAD/lib/compat/"
  copy_open_mpi || { echo "could not gather Open MPI (openmpi-bin installed?)"; return 1; }
  tar -cf - -C "$PAYLOAD" . | xz -T0 -6 > "$PACKED" || return 1
  du -sh "$PAYLOAD" "$PACKED"
  echo "prepared $PACKED: carry it to the GPU machine and call scripts/gpu_check.sh run"
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

# The carried Open MPI, unless the machine has its own.
use_open_mpi() {
  if [ -d "$PAYLOAD/mpi/usr" ]; then
    export OPAL_PREFIX="$PWD/$PAYLOAD/mpi/usr"
    export PMIX_INSTALL_PREFIX="$OPAL_PREFIX/lib/$(ls "$OPAL_PREFIX/lib")/pmix2"
    export PATH="$OPAL_PREFIX/bin:$PATH"
    export OMPI_MCA_mca_base_component_show_load_errors=0  # plugins for fabrics the machine lacks
  fi
  MPIRUN="mpirun --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS -x LD_LIBRARY_PATH"
  [ -n "${OPAL_PREFIX:-}" ] && MPIRUN="$MPIRUN -x OPAL_PREFIX -x PMIX_INSTALL_PREFIX"
}

# The training checks (steps 2-6). $1: the folder of logs. Appends PASS/FAIL lines to $2.
training_checks() {
  local logs=$1 summary=$2 failed=0
  local pt="$PAYLOAD/bin/pretrain_gpt" gen="$PAYLOAD/bin/generate_text"
  local cmp="python3 scripts/gpu_check_compare.py" dev=${GPU_CHECK_DEVICE:-cuda}
  local h=256 s=256 threads=8
  [ "$dev" = cuda ] || { h=64; s=64; threads=1; }  # the script's own check on a small CPU machine
  export OMP_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE
  local tiny="--num-layers 4 --hidden-size $h --num-attention-heads 8 --seq-length $s --max-position-embeddings $s"
  tiny="$tiny --micro-batch-size 4 --global-batch-size 16 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine"
  tiny="$tiny --lr-warmup-iters 2 --mock-data --tokenizer-type NullTokenizer --vocab-size 8191 --use-flash-attn"
  tiny="$tiny --seed 1234 --log-interval 1 --eval-iters 0 --train-iters 20"  # 8191 + EOD: no TP padding
  local llama="--swiglu --normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights"
  llama="$llama --disable-bias-linear --group-query-attention --num-query-groups 4"
  check() {  # name, tolerance, want log, got log
    if $cmp "$1" "$logs/$3" "$logs/$4" "$2" >> "$summary"; then :; else failed=1; fi
  }
  train() {  # log name, launch prefix ("" for one rank), flags...
    local log=$1 launch=$2 left
    shift 2
    left=$(( DEADLINE - $(date +%s) ))
    if [ "$left" -lt 10 ]; then echo "FAIL $log: not run, out of time" >> "$summary"; failed=1; return; fi
    timeout $(( left < 90 ? left : 90 )) $launch "$pt" $tiny "$@" > "$logs/$log" 2>&1 ||
      echo "exit $? in $log" >> "$summary"
  }
  # 2. one rank, the GPU against the CPU
  train gpt_cpu.log "" --device cpu
  train gpt_cuda.log "" --device $dev
  check "gpt fp32: cuda vs cpu" 1e-4 gpt_cpu.log gpt_cuda.log
  train llama_cpu.log "" $llama --device cpu
  train llama_cuda.log "" $llama --device $dev
  check "llama fp32: cuda vs cpu" 1e-4 llama_cpu.log llama_cuda.log
  train llama_bf16_cpu.log "" $llama --bf16 --device cpu
  train llama_bf16_cuda.log "" $llama --bf16 --device $dev
  check "llama bf16: cuda vs cpu" 1e-2 llama_bf16_cpu.log llama_bf16_cuda.log
  # 3. layouts on the one GPU against its single-rank run
  export OMP_NUM_THREADS=$(( (threads + 1) / 2 ))
  local two="$MPIRUN -np 2"
  train tp2_sp.log "$two" $llama --device $dev --tensor-model-parallel-size 2 --sequence-parallel
  check "TP2+SP on one GPU vs one rank" 1e-4 llama_cuda.log tp2_sp.log
  train tp2_sp_coc4.log "$two" $llama --device $dev --tensor-model-parallel-size 2 --sequence-parallel \
    --use-ascend-coc --coc-parallel-num 4
  check "TP2+SP+CoC4 on one GPU vs one rank" 1e-4 llama_cuda.log tp2_sp_coc4.log
  train tp2_sp_mc2.log "$two" $llama --device $dev --tensor-model-parallel-size 2 --sequence-parallel --use-ascend-mc2
  check "TP2+SP+MC2 on one GPU vs one rank" 1e-4 llama_cuda.log tp2_sp_mc2.log
  train tp2d_2x2.log "$MPIRUN -np 4" $llama --device $dev --tensor-model-parallel-size 4 --tp-2d --tp-x 2 --tp-y 2 \
    --enable-overlap-matmul-with-rs --enable-overlap-ag-with-matmul --enable-backward-overlap-ag-with-matmul
  check "2D TP 2x2 (the overlap flags on) on one GPU vs one rank" 1e-4 llama_cuda.log tp2d_2x2.log
  local unaligned="$llama --num-attention-heads 6 --num-query-groups 3 --kv-channels 32 --ffn-hidden-size 683"
  unaligned="$unaligned --seq-length $((s - 1)) --max-position-embeddings $((s - 1)) --unaligned-linear"
  train unaligned_cuda.log "" $unaligned --device $dev
  train tp2_sp_unaligned.log "$two" $unaligned --device $dev --tensor-model-parallel-size 2 --sequence-parallel
  check "TP2+SP unaligned linear (groups 2/1, an odd sequence) on one GPU vs one rank" 1e-4 unaligned_cuda.log \
    tp2_sp_unaligned.log
  train pp2_vpp.log "$two" $llama --device $dev --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
  check "PP2 interleaved on one GPU vs one rank" 1e-4 llama_cuda.log pp2_vpp.log
  train dp2_distopt.log "$two" $llama --device $dev --use-distributed-optimizer --overlap-grad-reduce
  check "DP2 distributed optimizer on one GPU vs one rank" 1e-4 llama_cuda.log dp2_distopt.log
  train cp2_ring.log "$two" $llama --device $dev --context-parallel-size 2
  check "CP2 ring on one GPU vs one rank" 1e-4 llama_cuda.log cp2_ring.log
  local moe="--num-experts 4 --moe-router-topk 2 --moe-token-dispatcher-type alltoall --moe-grouped-gemm"
  train moe_cuda.log "" $llama $moe --device $dev
  train ep2.log "$two" $llama $moe --device $dev --expert-model-parallel-size 2
  check "EP2 all-to-all on one GPU vs one rank" 1e-4 moe_cuda.log ep2.log
  # 4. resume on the GPU (bit-exact) and on the CPU
  export OMP_NUM_THREADS=$threads
  local ckpt="$logs/ckpt"
  rm -rf "$ckpt"
  train first_half.log "" $llama --device $dev --exit-interval 10 --save "$ckpt" --save-interval 10
  train resumed_cuda.log "" $llama --device $dev --load "$ckpt"
  check_resume() {  # name, tolerance, the uninterrupted run's log, the resumed run's log
    if $cmp --skip-want 10 "$1" "$logs/$3" "$logs/$4" "$2" >> "$summary"; then :; else failed=1; fi
  }
  check_resume "resume on the GPU, bit-exact" 0 llama_cuda.log resumed_cuda.log
  train resumed_cpu.log "" $llama --device cpu --load "$ckpt"
  check_resume "GPU checkpoint resumed on the CPU vs the CPU's own run" 1e-4 llama_cpu.log resumed_cpu.log
  # 5. generation
  local prompt="--load $PAYLOAD/golden/gpt2_tiny --tokenizer-type NullTokenizer --vocab-size 99 --prompt '5 17 3 42'"
  eval timeout 30 "$gen" $prompt --out-seq-length 12 --device cpu > "$logs/generate_cpu.log" 2>&1
  eval timeout 30 "$gen" $prompt --out-seq-length 12 --device $dev > "$logs/generate_cuda.log" 2>&1
  local want got
  want=$(grep '^generated' "$logs/generate_cpu.log"); got=$(grep '^generated' "$logs/generate_cuda.log")
  if [ -n "$want" ] && [ "$want" = "$got" ]; then echo "PASS generate_text on the GPU = CPU: $got" >> "$summary"
  else echo "FAIL generate_text: cpu '$want' vs cuda '$got'" >> "$summary"; failed=1; fi
  # 6. throughput of a GPT-2 124M-shaped model (s 1024, bf16) on the GPU
  [ "$dev" = cuda ] || return $failed
  local left=$(( DEADLINE - $(date +%s) ))
  [ "$left" -ge 20 ] || { echo "FAIL gpt2-124m throughput: not run, out of time" >> "$summary"; return 1; }
  timeout $(( left < 150 ? left : 150 )) "$pt" --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 \
    --max-position-embeddings 1024 --micro-batch-size 8 --global-batch-size 32 --lr 6e-4 --train-iters 8 \
    --mock-data --tokenizer-type NullTokenizer --vocab-size 50257 --use-flash-attn --bf16 --log-interval 1 \
    --eval-iters 0 --device $dev > "$logs/gpt2_124m_bf16.log" 2>&1 || { echo "exit $? in gpt2_124m_bf16.log" >> "$summary"; failed=1; }
  grep -E '> MFU against| iteration ' "$logs/gpt2_124m_bf16.log" | tail -2 | sed 's/^/gpt2-124m bf16 s1024 b8 on the GPU: /' >> "$summary"
  return $failed
}

# Unpacks the carried payload (or builds one here) and sets the library paths and Open MPI.
# $1: the output folder, $2: the summary file.
setup_payload() {
  local out=$1 summary=$2
  if [ ! -x "$PAYLOAD/bin/cuda_kernels_test" ] && [ -f "$PACKED" ]; then
    mkdir -p "$PAYLOAD" && xz -dc "$PACKED" | tar -xf - -C "$PAYLOAD"
  fi
  if [ ! -x "$PAYLOAD/bin/cuda_kernels_test" ]; then
    echo "no prepared payload: building here" | tee -a "$summary"
    prepare > "$out/build.log" 2>&1 || { echo "build failed (tail of build.log):" >> "$summary"; tail -20 "$out/build.log" >> "$summary"; cat "$summary"; return 1; }
  fi
  export LD_LIBRARY_PATH="$PWD/$PAYLOAD/lib:$(cuda_library_path):${LD_LIBRARY_PATH:-}"
  # The payload was built against Debian 12 (glibc 2.36, GCC 12's libstdc++): take the carried C++
  # runtime if this one is older, and say what is still missing.
  if ldd "$PAYLOAD/bin/pretrain_gpt" 2>&1 | grep -q "GLIBCXX.*not found"; then
    export LD_LIBRARY_PATH="$PWD/$PAYLOAD/lib/compat:$LD_LIBRARY_PATH"
    echo "using the carried libstdc++ (this machine's is older)" >> "$summary"
  fi
  { echo "glibc here: $(ldd --version 2>&1 | head -1)"
    ldd "$PAYLOAD/bin/pretrain_gpt" "$PAYLOAD/bin/cuda_kernels_test" 2>&1 | grep -E "not found" | sort -u | sed 's/^/MISSING: /'
  } >> "$summary"
  use_open_mpi
}

run() {
  local out=${OUT:-build/gpu-check/out}
  mkdir -p "$out"
  local summary="$out/gpu_check_summary.txt"
  {
    echo "# gpu_check $(date -u +%Y-%m-%dT%H:%M:%SZ) commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | sed 's/^/gpu: /'
  } > "$summary"
  nvidia-smi > "$out/nvidia_smi.txt" 2>&1
  setup_payload "$out" "$summary" || return 1
  local status=0
  # Everything ends by DEADLINE (each step's timeout is cut to what is left), so the summary and
  # the logs' archive are written inside the device call's limit (timeout_s=560).
  DEADLINE=$(( $(date +%s) + ${GPU_CHECK_SECONDS:-500} ))
  timeout 200 "$PAYLOAD/bin/cuda_kernels_test" --gtest_output="xml:$out/cuda_kernels_test.xml" > "$out/cuda_kernels_test.log" 2>&1 || status=$?
  {
    echo "cuda_kernels_test exit $status"
    grep -E '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]' "$out/cuda_kernels_test.log"
    grep -E '^\[  FAILED  \]' "$out/cuda_kernels_test.log" | sort -u
    grep -B2 -A6 'Failure$' "$out/cuda_kernels_test.log" | head -60
  } >> "$summary"
  local logs=build/gpu-check/logs
  rm -rf "$logs" && mkdir -p "$logs"
  echo "## training on the GPU" >> "$summary"
  training_checks "$logs" "$summary" || status=1
  # The logs come back as one archive (the device tool returns at most 8 files).
  tar -czf "$out/training_logs.tar.gz" -C "$logs" --exclude ckpt . 2>/dev/null
  cat "$summary"
  return $status
}

# The GPU benchmark against PyTorch (bench/gpu/run_gpu_bench.sh), a call of its own:
#   run(command="scripts/gpu_check.sh bench", carry=["build/gpu-check/payload.tar.xz"], timeout_s=560)
bench() {
  local out=${OUT:-build/gpu-check/out}
  mkdir -p "$out"
  setup_payload "$out" "$out/gpu_bench_setup.txt" || return 1
  export OMP_NUM_THREADS=8
  timeout 540 bench/gpu/run_gpu_bench.sh "$PAYLOAD/bin/pretrain_gpt" 10 2>&1 | tee "$out/gpu_bench.md"
}

case "$mode" in
  prepare) prepare ;;
  run) run ;;
  bench) bench ;;
  *) echo "usage: $0 prepare|run|bench" >&2; exit 2 ;;
esac
