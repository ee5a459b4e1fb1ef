# Shared by the accuracy benches (run_o2_accuracy_bench.sh, run_fp16_accuracy_bench.sh): the
# release binaries, the demo corpus tokenised with GPT-2's BPE as scripts/run_demo.sh does, the
# demo model trained for $STEPS steps on 2 data-parallel ranks with the distributed optimizer
# (same weights, data and dropout masks in every run), and the logged losses. Sourced from the
# repository root with BUILD set.
for tool in apps/pretrain_gpt tools/preprocess_data; do
  if [ ! -x "$BUILD/$tool" ]; then
    echo "no $BUILD/$tool (cmake --preset release && cmake --build --preset release --target pretrain_gpt preprocess_data)" >&2
    exit 1
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/accuracy-bench.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file data/gpt2/gpt2-vocab.json --merge-file data/gpt2/gpt2-merges.txt)
DATA=$BUILD/data/kjv
if [ ! -f "${DATA}_text_document.idx" ]; then
  mkdir -p "$BUILD/data"
  "$BUILD/tools/preprocess_data" --input data/corpus/kjv.jsonl.gz --output-prefix "$DATA" "${GPT2[@]}" \
    --append-eod --log-interval 400 >/dev/null
fi
STEPS=200
# train [flags...]: the demo model for $STEPS steps; the flags add the precision and features.
train() {
  mpirun --oversubscribe --allow-run-as-root --bind-to none -np 2 -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE \
    "$BUILD/apps/pretrain_gpt" --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 \
    --max-position-embeddings 128 --openai-gelu --micro-batch-size 4 --global-batch-size 16 --train-iters $STEPS \
    --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
    --use-flash-attn --use-distributed-optimizer --data-path "${DATA}_text_document" --split 98,2,0 \
    "${GPT2[@]}" --log-interval 10 --eval-iters 0 --seed 1234 "$@"
}
# run NAME [flags...]: train into $WORK/NAME.log, or show its tail and stop.
run() {
  local name=$1
  shift
  train "$@" >"$WORK/$name.log" 2>&1 || { tail -20 "$WORK/$name.log" >&2; exit 1; }
}
# losses LOG: "iteration loss" per logged line.
losses() { grep -o 'iteration *[0-9]*/\|lm loss: [0-9.E+-]*' "$1" | paste - - | awk '{ gsub("/", "", $2); print $2, $NF }'; }
