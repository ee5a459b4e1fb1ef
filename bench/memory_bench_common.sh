# Shared by bench/run_memory_bench.sh and bench/run_memory_time_bench.sh (sourced, not run):
# the pretrain_gpt binary and a scratch directory, and the parse of the memory line that
# pretrain_gpt logs.

# memory_bench_setup NAME [path/to/pretrain_gpt]: sets BIN (absolute) and WORK (a temporary
# directory removed on exit); allows mpirun as root.
memory_bench_setup() {
  BIN=${2:-build/release/apps/pretrain_gpt}
  if [ ! -x "$BIN" ]; then
    echo "no pretrain_gpt at $BIN (cmake --preset release && cmake --build --preset release --target pretrain_gpt)" >&2
    exit 1
  fi
  BIN=$(realpath "$BIN")
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  trap 'rm -rf "$WORK"' EXIT
}

# memory_line_fields LOG RANK: the last "[Rank RANK] memory (MiB)" line of LOG as lines
# "log_<category>_cur MiB" and "log_<category>_peak MiB" (total included), and
# "log_swapped_peak MiB" (the swap tier's total peak; absent without a tier).
memory_line_fields() {
  grep "\[Rank $2\] memory (MiB)" "$1" | tail -1 |
    awk '{ n = split($0, f, "|");
           for (i = 2; i <= n; i++) {
             m = split(f[i], w, " ");
             if (w[1] == "swapped") {  # swapped (current/peak MiB): activations c/p, total c/p
               t = f[i]; sub(/.*total /, "", t); split(t, cp, "/"); print "log_swapped_peak", cp[2] + 0
             } else if (m >= 2 && w[2] ~ /\//) {
               split(w[2], cp, "/"); print "log_" w[1] "_cur", cp[1] + 0; print "log_" w[1] "_peak", cp[2] + 0
             } } }'
}
