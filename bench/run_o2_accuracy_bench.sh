#!/usr/bin/env bash
# MindSpeed-LLM's O2 accuracy (issue 14, its acceptance): the demo model trained for 200
# steps on the demo corpus (the King James Bible, tokenised with GPT-2's BPE as
# scripts/run_demo.sh does) with fp32 Adam moments and gradients, with --o2-optimizer's bf16
# moments, with --o2-gradient's bf16 gradient buffer (and the --no-gradient-accumulation-fusion
# it needs), and with both; same weights, data and dropout masks. The logged losses side by
# side and each O2 run's largest relative gap to the fp32 run, which must stay within 1 %.
# bf16, distributed optimizer over 2 data-parallel ranks. About 8 minutes on 2 cores.
#   bench/run_o2_accuracy_bench.sh [build dir]   (default build/release, with pretrain_gpt and preprocess_data)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
source bench/accuracy_bench_common.sh
O2_GRAD=(--no-gradient-accumulation-fusion --o2-gradient)
run fp32 --bf16
run o2 --bf16 --o2-optimizer
run o2g --bf16 "${O2_GRAD[@]}"
run o2both --bf16 --o2-optimizer "${O2_GRAD[@]}"
echo "## O2 (bf16 moments, bf16 gradients) against fp32 state, $STEPS steps on the demo corpus"
echo
echo "| iteration | lm loss, fp32 | --o2-optimizer | gap | --o2-gradient | gap | both | gap |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
join <(losses "$WORK/fp32.log") <(losses "$WORK/o2.log") | join - <(losses "$WORK/o2g.log") |
  join - <(losses "$WORK/o2both.log") |
  awk 'function gap(x, k) { g = (x - $2) / $2; a = g < 0 ? -g : g; if (a > worst[k]) worst[k] = a; return 100 * g }
       { printf "| %d | %.4f | %.4f | %+.3f%% | %.4f | %+.3f%% | %.4f | %+.3f%% |\n", $1, $2, $3, gap($3, 1), $4, gap($4, 2),
                $5, gap($5, 3); n++ }
       END { split("--o2-optimizer,--o2-gradient,both", name, ","); ok = n > 0
             for (k = 1; k <= 3; k++) {
               printf "\nlargest gap of %s over %d logged iterations: %.3f%% (limit 1%%): %s", name[k], n, 100 * worst[k],
                      worst[k] <= 0.01 ? "within" : "OUTSIDE"
               ok = ok && worst[k] <= 0.01 }
             print ""; exit !ok }'
