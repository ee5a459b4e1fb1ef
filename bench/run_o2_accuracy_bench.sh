#!/usr/bin/env bash
# --o2-optimizer's accuracy (issue 14, MindSpeed-LLM's O2 acceptance): the demo model trained
# for 200 steps on the demo corpus (the King James Bible, tokenised with GPT-2's BPE as
# scripts/run_demo.sh does) with fp32 Adam moments and with O2's bf16 moments, same weights,
# data and dropout masks; the logged losses side by side and their largest relative gap,
# which must stay within 1 %. bf16, distributed optimizer over 2 data-parallel ranks. About 4
# minutes on 2 cores.
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
train >"$WORK/fp32.log" 2>&1 || { tail -20 "$WORK/fp32.log" >&2; exit 1; }
train --o2-optimizer >"$WORK/o2.log" 2>&1 || { tail -20 "$WORK/o2.log" >&2; exit 1; }
echo "## --o2-optimizer against fp32 moments, $STEPS steps on the demo corpus"
echo
echo "| iteration | lm loss, fp32 moments | lm loss, O2 (bf16 moments) | relative gap |"
echo "|---:|---:|---:|---:|"
join <(losses "$WORK/fp32.log") <(losses "$WORK/o2.log") |
  awk '{ gap = ($3 - $2) / $2; if (gap < 0) g = -gap; else g = gap; if (g > worst) worst = g
         printf "| %d | %.4f | %.4f | %+.3f%% |\n", $1, $2, $3, 100 * gap; n++ }
       END { printf "\nlargest gap over %d logged iterations: %.3f%% (limit 1%%): %s\n", n, 100 * worst,
                    (worst <= 0.01 && n > 0) ? "within" : "OUTSIDE"; exit !(worst <= 0.01 && n > 0) }'
