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
for tool in apps/pretrain_gpt tools/preprocess_data; do
  if [ ! -x "$BUILD/$tool" ]; then
    echo "no $BUILD/$tool (cmake --preset release && cmake --build --preset release --target pretrain_gpt preprocess_data)" >&2
    exit 1
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fp16-bench.XXXXXX")
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
    --use-flash-attn --use-distributed-optimizer --data-path "${DATA}_text_document" --split 98,2,0 \
    "${GPT2[@]}" --log-interval 10 --eval-iters 0 --seed 1234 "$@"
}
losses() { grep -o 'iteration *[0-9]*/\|lm loss: [0-9.E+-]*' "$1" | paste - - | awk '{ gsub("/", "", $2); print $2, $NF }'; }
skipped() { grep -o 'number of skipped iterations: *[0-9]*' "$1" | awk '{ s += $NF } END { print s + 0 }'; }
last_scale() { grep -o 'loss scale: [0-9.]*' "$1" | tail -1 | awk '{ print $NF }'; }
train >"$WORK/fp32.log" 2>&1 || { tail -20 "$WORK/fp32.log" >&2; exit 1; }
train --bf16 >"$WORK/bf16.log" 2>&1 || { tail -20 "$WORK/bf16.log" >&2; exit 1; }
train --fp16 --initial-loss-scale 4096 >"$WORK/fp16.log" 2>&1 || { tail -20 "$WORK/fp16.log" >&2; exit 1; }
train --fp16 >"$WORK/fp16_default.log" 2>&1 || { tail -20 "$WORK/fp16_default.log" >&2; exit 1; }
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
