#!/usr/bin/env bash
# The main job: installs what is missing, builds, tokenises the embedded public-domain corpus
# (the King James Bible, data/corpus) with the GPT-2 tokenizer once, then trains a small
# GPT on 4 MPI ranks -- tensor parallel 2 with sequence parallelism x pipeline parallel 2
# with Megatron's interleaved 1F1B schedule (two model chunks of one layer per rank) --
# printing Megatron's iteration lines, with the validation loss every 25 iterations; then
# draws the run's metrics (build/release/runs/demo/loss.png: loss, learning rate, grad norm,
# throughput) and generates a few lines of text from the checkpoint it saved. Extra
# arguments go to pretrain_gpt (e.g. --train-iters 50).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install_deps.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cmake --preset release >/dev/null
cmake --build --preset release -j "$(nproc)" --target pretrain_gpt preprocess_data generate_text
BUILD=build/release
DATA=$BUILD/data/kjv
if [ ! -f "${DATA}_text_document.idx" ]; then
  mkdir -p "$BUILD/data"
  "$BUILD/tools/preprocess_data" --input data/corpus/kjv.jsonl.gz --output-prefix "$DATA" \
    --tokenizer-type GPT2BPETokenizer --vocab-file data/gpt2/gpt2-vocab.json \
    --merge-file data/gpt2/gpt2-merges.txt --append-eod --log-interval 400
fi
NP=${NP:-4}
RUN=$BUILD/runs/demo
rm -rf "$RUN"
GPT2_TOKENIZER=(--tokenizer-type GPT2BPETokenizer --vocab-file data/gpt2/gpt2-vocab.json
                --merge-file data/gpt2/gpt2-merges.txt)
mpirun --oversubscribe --bind-to none -np "$NP" -x OMP_WAIT_POLICY=PASSIVE \
  "$BUILD/apps/pretrain_gpt" \
  --tensor-model-parallel-size 2 --sequence-parallel \
  --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1 \
  --num-layers 4 --hidden-size 128 --num-attention-heads 4 --seq-length 128 --max-position-embeddings 128 \
  --openai-gelu --micro-batch-size 4 --global-batch-size 16 --train-iters 100 \
  --lr 2e-3 --min-lr 2e-4 --lr-decay-style cosine --lr-warmup-iters 10 --weight-decay 0.1 --clip-grad 1.0 \
  --attention-dropout 0.0 --hidden-dropout 0.0 --use-flash-attn \
  --data-path "${DATA}_text_document" --split 98,2,0 \
  "${GPT2_TOKENIZER[@]}" --log-interval 10 --eval-interval 25 --eval-iters 5 \
  --tensorboard-dir "$RUN" --log-validation-ppl-to-tensorboard --save "$RUN/checkpoint" "$@"
tools/plot_metrics.sh "$RUN/metrics.jsonl" "$RUN/loss.png" "mindspeed-cpp demo: TP2 x PP2 interleaved, 4 ranks"
echo "metrics drawn in $RUN/loss.png (TensorBoard: tensorboard --logdir $RUN)"
# The checkpoint, saved at TP2 x PP2, loads on one rank: two prompts continued by sampling
# (top-k 40, temperature 0.8; the same --seed gives the same text).
"$BUILD/tools/generate_text" --load "$RUN/checkpoint" "${GPT2_TOKENIZER[@]}" --out-seq-length 24 \
  --top-k 40 --temperature 0.8 --seed 1234 --prompt "In the beginning" --prompt "And the LORD said unto Moses"
