#!/usr/bin/env bash
# Crash-safety of checkpoints: TRIALS times (default 20), start pretrain_gpt saving after every
# iteration, kill it with SIGKILL at a random moment (most land inside a save), then check that
# whatever latest_checkpointed_iteration.txt names loads and trains on. Exits non-zero on the
# first checkpoint that does not load. The test suite runs a shorter version
# (tests/e2e/checkpoint_test.cpp, KilledSavesLeaveALoadableLatest).
#   scripts/checkpoint_kill_test.sh [TRIALS]      (BIN=path/to/pretrain_gpt, default build/ci)
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-20}
BIN=${BIN:-build/ci/apps/pretrain_gpt}
[ -x "$BIN" ] || { cmake --preset ci >/dev/null && cmake --build --preset ci -j "$(nproc)" --target pretrain_gpt >/dev/null; }
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
ARGS=(--num-layers 4 --hidden-size 64 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
      --micro-batch-size 2 --global-batch-size 16 --lr 3e-3 --lr-warmup-iters 2 --mock-data
      --tokenizer-type NullTokenizer --vocab-size 4095 --seed 1234 --log-interval 1000 --eval-iters 0)
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
loaded=0
for trial in $(seq 1 "$TRIALS"); do
  "$BIN" "${ARGS[@]}" --train-iters 100000 --save-interval 1 --save "$DIR/ckpt" >/dev/null 2>&1 &
  pid=$!
  sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.2f", 0.3 + 1.5 * rand() }')"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [ -f "$DIR/ckpt/latest_checkpointed_iteration.txt" ] || { echo "trial $trial: killed before the first save"; continue; }
  latest=$(cat "$DIR/ckpt/latest_checkpointed_iteration.txt")
  if ! out=$("$BIN" "${ARGS[@]}" --train-iters $((latest + 3)) --load "$DIR/ckpt" 2>&1); then
    echo "trial $trial: the checkpoint of iteration $latest does not load:"; echo "$out" | tail -5; exit 1
  fi
  echo "trial $trial: killed after iteration $latest was saved; it loads and trains on"
  loaded=$((loaded + 1))
done
echo "$loaded of $TRIALS trials left a checkpoint; every one of them loaded"
