#!/usr/bin/env bash
# Auto settings (issue 31): the planner's memory and time models against measured runs, and its
# choice against the grid of every legal layout.
#  1. The grid: a black-box search (--auto-settings-type black) runs every layout that fits for
#     --auto-settings-iters iterations and records its exact memory peaks and median step.
#  2. The white box on a fresh work directory: profiling runs of each layer shape, then a
#     prediction for every layout, and its choice (plan 1).
#  3. bench/auto_settings_report.py: per layout, the predicted memory per pipeline stage against
#     the grid run's exact peak and the predicted step against its median iteration; the white
#     box's choice against the grid's best three, re-measured interleaved (medians of ROUNDS);
#     the white search's time (profiling included) against the grid's; twelve layouts re-measured
#     interleaved (medians of ACCURACY_ROUNDS) against the step and memory predictions.
#  4. The mixed search on the white box's profile (its top 3 run in 3 interleaved rounds), then
#     bench/auto_settings_choices.py: the white and mixed choices and the grid's fastest 8 (by
#     their single grid run) re-measured interleaved (medians of ROUNDS).
# Model: GPT, 4 layers, h=128, a=8, s=256, vocab 4096, bf16, flash attention, global batch 8,
# 4 ranks (oversubscribed on this machine's cores). About 40 minutes on 2 cores.
#   bench/run_auto_settings_bench.sh [path/to/pretrain_gpt]   (default build/release/apps/pretrain_gpt)
# Environment: RANKS (4), ROUNDS (3), ACCURACY_ROUNDS (5), WORK (a temporary directory), GRID (reuse
# a grid plan JSON).
set -euo pipefail
cd "$(dirname "$0")/.."
PRETRAIN=$(realpath "${1:-build/release/apps/pretrain_gpt}")
RANKS=${RANKS:-4}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-$(mktemp -d)}
echo "pretrain_gpt: $PRETRAIN; work dir: $WORK; $(nproc) cores; $(date)"
MODEL=(--mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 4 --hidden-size 128
       --num-attention-heads 8 --seq-length 256 --max-position-embeddings 256 --global-batch-size 8 --train-iters 100
       --lr 1e-3 --bf16 --use-flash-attn)
GRID=${GRID:-}
if [ -z "$GRID" ]; then
  "$PRETRAIN" --auto-settings --nproc-per-node "$RANKS" --auto-settings-type black --auto-settings-work-dir "$WORK/grid" \
    "${MODEL[@]}" | grep -v "^auto settings: running"
  GRID=$WORK/grid/auto_settings_plan.json
fi
"$PRETRAIN" --auto-settings --nproc-per-node "$RANKS" --auto-settings-work-dir "$WORK/white" "${MODEL[@]}" |
  grep -v "^auto settings: profiling"
/usr/bin/python3 bench/auto_settings_report.py "$WORK/white/auto_settings_plan.json" --grid "$GRID" --rounds "$ROUNDS" \
  --accuracy-rounds "${ACCURACY_ROUNDS:-5}" --pretrain "$PRETRAIN"
"$PRETRAIN" --auto-settings --nproc-per-node "$RANKS" --auto-settings-type mixed --auto-settings-work-dir "$WORK/mixed" \
  --prof-file "$WORK/white/auto_settings_profile.json" "${MODEL[@]}" | grep -v "^auto settings: running"
/usr/bin/python3 bench/auto_settings_choices.py "$WORK/white/auto_settings_plan.json" "$WORK/mixed/auto_settings_plan.json" \
  --grid "$GRID" --top 8 --rounds "$ROUNDS" --pretrain "$PRETRAIN"
