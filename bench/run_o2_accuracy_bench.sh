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
for tool in apps/pretrain_gpt tools/preprocess_data; do
  if [ ! -x "$BUILD/$tool" ]; then
    echo "no $BUILD/$tool (cmake --preset release && cmake --build --preset release --target pretrain_gpt preprocess_data)" >&2
    exit 1
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/o2-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file data/gpt2/gpt2-vocab.json --merge-file data/gpt2/gpt2-merges.txt)
DATA=$BUILD/data/kjv
if [ ! -f "${DATA}_text_document.idx" ]; then
  mkdir -p "$BUILD/data"
  "$BUILD/tools/preprocess_data" --input data/corpus/kjv.jsonl.gz --output-prefix "$DATA" "${GPT2[@]}" \
    --append-eod --log-interval 400 >/dev/null
fi
STEPS=200
train() {
  mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE \
    "$BUILD/apps/pretrain_gpt" --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 \
    --max-position-embeddings 128 --openai-gelu --micro-batch-size 4 --global-batch-size 16 --train-iters $STEPS \
    --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
    --use-flash-attn --bf16 --use-distributed-optimizer --data-path "${DATA}_text_document" --split 98,2,0 \
    "${GPT2[@]}" --log-interval 10 --eval-iters 0 --seed 1234 "$@"
}
losses() { grep -o 'iteration *[0-9]*/\|lm loss: [0-9.E+-]*' "$1" | paste - - | awk '{ gsub("/", "", $2); print $2, $NF }'; }
O2_GRAD=(--no-gradient-accumulation-fusion --o2-gradient)
train >"$WORK/fp32.log" 2>&1 || { tail -20 "$WORK/fp32.log" >&2; exit 1; }
train --o2-optimizer >"$WORK/o2.log" 2>&1 || { tail -20 "$WORK/o2.log" >&2; exit 1; }
train "${O2_GRAD[@]}" >"$WORK/o2g.log" 2>&1 || { tail -20 "$WORK/o2g.log" >&2; exit 1; }
train --o2-optimizer "${O2_GRAD[@]}" >"$WORK/o2both.log" 2>&1 || { tail -20 "$WORK/o2both.log" >&2; exit 1; }
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
