#!/usr/bin/env bash
# Throughput of tools/preprocess_data on the embedded corpus (data/corpus/kjv.jsonl.gz,
# GPT-2 BPE, --append-eod) with 1 and 2 worker threads; prints MB/s and docs/s.
#
#   bench/data/preprocess_throughput.sh [build-dir] [repeat]
#
# build-dir defaults to build/; the corpus is concatenated `repeat` times (default 10,
# about 42 MB uncompressed) into a temporary .jsonl so that the run is long enough to time.
# Each configuration runs 3 times and the best run is reported. MB are MiB of input JSONL.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${root}/build}"
repeat="${2:-10}"
tool="${build}/tools/preprocess_data"
[[ -x "${tool}" ]] || { echo "error: ${tool} not found (build the preprocess_data target)" >&2; exit 1; }

tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
for ((i = 0; i < repeat; i++)); do gzip -dc "${root}/data/corpus/kjv.jsonl.gz"; done > "${tmp}/corpus.jsonl"
bytes=$(stat -c %s "${tmp}/corpus.jsonl")
docs=$(wc -l < "${tmp}/corpus.jsonl")
echo "corpus: KJV x${repeat}: ${docs} documents, ${bytes} bytes; $(nproc) cores; $(uname -m)"

for workers in 1 2; do
  best=""
  for run in 1 2 3; do
    start=$(date +%s.%N)
    "${tool}" --input "${tmp}/corpus.jsonl" --output-prefix "${tmp}/out" \
      --tokenizer-type GPT2BPETokenizer --vocab-file "${root}/data/gpt2/gpt2-vocab.json" \
      --merge-file "${root}/data/gpt2/gpt2-merges.txt" --append-eod --workers "${workers}" \
      --log-interval 1000000000 > /dev/null
    end=$(date +%s.%N)
    seconds=$(echo "${end} - ${start}" | bc -l)
    if [[ -z "${best}" ]] || (( $(echo "${seconds} < ${best}" | bc -l) )); then best="${seconds}"; fi
  done
  printf "workers=%d  %.2f s  %.1f MB/s  %.0f docs/s  (wall clock incl. start-up, best of 3)\n" \
    "${workers}" "${best}" "$(echo "${bytes} / ${best} / 1048576" | bc -l)" \
    "$(echo "${docs} / ${best}" | bc -l)"
done
