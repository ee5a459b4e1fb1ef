#!/usr/bin/env bash
# --fp16 against fp32 and --bf16 over a real run: the demo model trained for 200 steps on the
# demo corpus (the King James Bible, tokenised with GPT-2's BPE as scripts/run_demo.sh does),
# same weights, data and dropout masks, on 2 data-parallel ranks with the distributed optimizer.
# fp16 runs twice: from --initial-loss-scale 4096 (as MindSpeed's example script; no overflow
# expected) and from Megatron's default 2^32 (the first iterations overflow and are skipped
# while the scale halves; the learning rate waits for them). Prints the logged losses side by
# side, each run's largest relative gap to fp32 over the second half (the first half of the 2^32
# run trails by its skipped iterations), the skipped iterations and the final loss scale.
# About 17 minutes on 2 cores.
#   bench/run_fp16_accuracy_bench.sh [build dir]   (default build/release, with pretrain_gpt and preprocess_data)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
source bench/accuracy_bench_common.sh
skipped() { grep -o 'number of skipped iterations: *[0-9]*' "$1" | awk '{ s += $NF } END { print s + 0 }'; }
last_scale() { grep -o 'loss scale: [0-9.]*' "$1" | tail -1 | awk '{ print $NF }'; }
run fp32
run bf16 --bf16
run fp16 --fp16 --initial-loss-scale 4096
run fp16_default --fp16
echo "## fp16 and bf16 against fp32, $STEPS steps on the demo corpus"
echo
echo "| iteration | lm loss, fp32 | --bf16 | gap | --fp16 (scale 4096) | gap | --fp16 (Megatron's 2^32) | gap |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
join <(losses "$WORK/fp32.log") <(losses "$WORK/bf16.log") | join - <(losses "$WORK/fp16.log") |
  join - <(losses "$WORK/fp16_default.log") |
  awk -v steps=$STEPS '
       function gap(x, k) { g = (x - $2) / $2; a = g < 0 ? -g : g; if ($1 > steps / 2 && a > worst[k]) worst[k] = a; return 100 * g }
       { printf "| %d | %.4f | %.4f | %+.3f%% | %.4f | %+.3f%% | %.4f | %+.3f%% |\n", $1, $2, $3, gap($3, 1), $4, gap($4, 2),
                $5, gap($5, 3) }
       END { split("--bf16,--fp16 (scale 4096),--fp16 (2^32)", name, ",")
             for (k = 1; k <= 3; k++) printf "\nlargest gap of %s over iterations %d-%d: %.3f%%", name[k], steps / 2, steps, 100 * worst[k]
             print "" }'
echo
echo "skipped iterations: fp16 (scale 4096) $(skipped "$WORK/fp16.log"), fp16 (2^32) $(skipped "$WORK/fp16_default.log");" \
     "final loss scale: $(last_scale "$WORK/fp16.log") and $(last_scale "$WORK/fp16_default.log")"
