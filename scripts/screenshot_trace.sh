#!/usr/bin/env bash
# Picture of a merged multi-rank trace as a real trace viewer draws it (docs/images/trace_4ranks.png).
#
# What it does: unless TRACE names a merged trace already, runs pretrain_gpt on 4 ranks
# (TP 2 x PP 2, sequence parallel, profiling iteration 3 at level1 with CPU and memory), merges the
# ranks' traces with tools/merge_traces, then opens the merged file in the Performance panel of
# the Chrome DevTools front end that Debian's chromium ships (served by headless Chromium itself,
# offline; Chromium 156 no longer ships the legacy chrome://tracing viewer) and saves a PNG with
# scripts/screenshot_trace.js.
#
# What it needs: Debian's chromium (apt-get install -y chromium), node and npm, and puppeteer-core,
# which this script installs with npm into a temporary folder ($SHOT_NPM_DIR, default
# ${TMPDIR:-/tmp}/mindspeed-screenshot-npm), never into the repository: it is documentation tooling,
# not a dependency of the project. To make the trace: a build (BUILD, default build/release) and mpirun.
#
# How to run (from the repository root):
#   scripts/screenshot_trace.sh                              # -> docs/images/trace_4ranks.png
#   TRACE=merged_trace.json scripts/screenshot_trace.sh out.png --window 0,1   # whole trace
# Arguments after the output path go to screenshot_trace.js (--width, --height, --window A,B
# as fractions of the trace's span, default 0.1,0.45; --chromium PATH).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/docs/images/trace_4ranks.png}"
shift || true
build="${BUILD:-$root/build/release}"
chromium="${CHROMIUM:-$(command -v chromium || true)}"
npm_dir="${SHOT_NPM_DIR:-${TMPDIR:-/tmp}/mindspeed-screenshot-npm}"

if [[ -z "$chromium" ]]; then
  echo "screenshot_trace.sh: needs Debian's chromium: apt-get install -y chromium" >&2
  exit 1
fi
command -v node >/dev/null || { echo "screenshot_trace.sh: needs node and npm" >&2; exit 1; }

if [[ ! -d "$npm_dir/node_modules/puppeteer-core" ]]; then
  mkdir -p "$npm_dir"
  # No browser download: puppeteer-core drives the chromium above.
  (cd "$npm_dir" && npm install --no-audit --no-fund --silent puppeteer-core >/dev/null)
fi

trace="${TRACE:-}"
if [[ -z "$trace" ]]; then
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=PASSIVE
  mpirun --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY -np 4 \
    "$build/apps/pretrain_gpt" --num-layers 4 --hidden-size 128 --num-attention-heads 4 \
    --seq-length 128 --max-position-embeddings 128 --micro-batch-size 2 --global-batch-size 16 \
    --lr 1e-3 --train-iters 4 --mock-data --tokenizer-type NullTokenizer --vocab-size 4095 \
    --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel \
    --profile --profile-step-start 2 --profile-step-end 3 --profile-level level1 \
    --profile-with-cpu --profile-with-memory --profile-save-path "$work/profile" >"$work/run.log" 2>&1 ||
    { tail -n 30 "$work/run.log" >&2; exit 1; }
  "$build/tools/merge_traces" --input "$work/profile" --output "$work/merged_trace.json"
  trace="$work/merged_trace.json"
fi

# Default view: about 100 ms of the profiled iteration (warm-up and steady 1F1B), where the slice
# names stay readable at 1600 pixels.
(($#)) || set -- --window 0.1,0.45
mkdir -p "$(dirname "$out")"
NODE_PATH="$npm_dir/node_modules" node "$root/scripts/screenshot_trace.js" "$trace" "$out" \
  --chromium "$chromium" "$@"
