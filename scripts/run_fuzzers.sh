#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (the `fuzz` preset: clang, libFuzzer + ASan +
# UBSan) and runs each for SECONDS (default 600) on its committed corpus, one after the
# other. New corpus entries and any crash, leak, timeout or out-of-memory input go to a
# scratch folder (build/fuzz/runs/<date>/<target>/), never into tests/fuzz/corpus. Fails if
# any fuzzer reports a finding. Installs clang and the OpenMP runtime for clang if missing
# (Debian packages; root or sudo).
#
#   scripts/run_fuzzers.sh [SECONDS] [TARGET...]     # default: every target, 600 s each
#   MS_FUZZ_JOBS=N      build jobs (default 1)
#   MS_FUZZ_MAX_LEN=N   longest input libFuzzer makes (default 32768; longer corpus files,
#                       such as the 200 KiB deep-nesting regression inputs, are read
#                       truncated to it, and ctest replays them whole)
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_TARGETS=(safetensors indexed_dataset npy hf_config jsonl gpt2_tokenizer sentencepiece)
SECONDS_EACH=${1:-600}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
if ! [[ "$SECONDS_EACH" =~ ^[0-9]+$ ]] || [ "$SECONDS_EACH" -lt 1 ]; then
  echo "run_fuzzers: SECONDS must be a positive integer, got '$SECONDS_EACH'" >&2
  exit 2
fi
for t in "${TARGETS[@]}"; do
  if [[ ! " ${ALL_TARGETS[*]} " =~ " $t " ]]; then
    echo "run_fuzzers: unknown target '$t' (targets: ${ALL_TARGETS[*]})" >&2
    exit 2
  fi
done

# ---- what the fuzz build needs beyond scripts/install_deps.sh
./scripts/install_deps.sh
missing=()
for p in clang libclang-rt-14-dev libomp-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "run_fuzzers: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# ---- build
cmake --preset fuzz > /dev/null
cmake --build --preset fuzz -j "${MS_FUZZ_JOBS:-1}"

# ---- run, one fuzzer at a time
RUN_DIR=${MS_FUZZ_OUT:-build/fuzz/runs/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RUN_DIR"
SUMMARY="$RUN_DIR/summary.txt"
printf '%-16s %8s %12s %10s %8s  %s\n' target seconds executions exec/s corpus result > "$SUMMARY"
failed=()
for t in "${TARGETS[@]}"; do
  out="$RUN_DIR/$t"
  mkdir -p "$out/new" "$out/artifacts"
  echo "== $t: ${SECONDS_EACH} s (log: $out/fuzz.log)"
  scratch="${TMPDIR:-/tmp}/ms_fuzz_scratch_$$"
  [ -d /dev/shm ] && scratch="/dev/shm/ms_fuzz_scratch_$$"
  mkdir -p "$scratch"
  set +e
  # new/ first: libFuzzer adds new inputs to the first folder; the committed corpus is read.
  MS_FUZZ_SCRATCH="$scratch" "build/fuzz/tests/fuzz/${t}_fuzzer" "$out/new" "tests/fuzz/corpus/$t" \
      -max_total_time="$SECONDS_EACH" -max_len="${MS_FUZZ_MAX_LEN:-32768}" -timeout=30 -rss_limit_mb=2560 \
      -print_final_stats=1 -close_fd_mask=3 -artifact_prefix="$out/artifacts/" > "$out/fuzz.log" 2>&1
  rc=$?
  set -e
  rm -rf "$scratch"
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/fuzz.log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/fuzz.log" | tail -1)
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$out/fuzz.log" | tail -1)
  corpus=$( (grep -o 'corp: [0-9]*/[0-9]*[a-zA-Z]*' "$out/fuzz.log" || true) | tail -1 | cut -d' ' -f2)
  findings=$(find "$out/artifacts" -type f | wc -l)
  if [ "$rc" -ne 0 ] || [ "$findings" -ne 0 ]; then
    result="FAILED (exit $rc, $findings finding(s) in $out/artifacts)"
    failed+=("$t")
    grep -E '^==[0-9]+==ERROR|runtime error|^SUMMARY|deadly signal|Test unit written' "$out/fuzz.log" | head -5 || true
  else
    result="no crash"
  fi
  printf '%-16s %8s %12s %10s %8s  %s\n' "$t" "${secs:-?}" "${execs:-?}" "${rate:-?}" "${corpus:-?}" "$result" \
      | tee -a "$SUMMARY"
done
echo
cat "$SUMMARY"
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_fuzzers: findings in: ${failed[*]} (inputs under $RUN_DIR/<target>/artifacts)" >&2
  exit 1
fi
echo "run_fuzzers: no crash, leak, timeout or sanitizer report in ${#TARGETS[@]} fuzzer(s)"
