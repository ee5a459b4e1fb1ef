#!/usr/bin/env bash
# plot_metrics.sh: draws a training run's metrics file (pretrain_gpt --metrics-file, by default
# <tensorboard-dir>/metrics.jsonl: one JSON object per logged iteration and per evaluation)
# as one picture of four panels against iterations: the training and validation lm loss,
# the learning rate, the gradient norm, and the throughput (tokens/s and TFLOP/s per GPU).
# The drawing is gnuplot's (Debian package gnuplot-nox); awk only turns the JSON lines into
# columns. The output format follows the name: .png (cairo) or .svg.
#
#   tools/plot_metrics.sh METRICS.jsonl OUT.png|OUT.svg [TITLE]
#
# Exit codes: 0 done, 2 usage or an input without iteration lines, 3 gnuplot is missing.
set -euo pipefail

usage() {
  echo "usage: $0 METRICS.jsonl OUT.png|OUT.svg [TITLE]" >&2
  exit 2
}
[ $# -ge 2 ] && [ $# -le 3 ] || usage
metrics=$1
out=$2
title=${3:-$(basename "$metrics")}
[ -r "$metrics" ] || { echo "plot_metrics: cannot read $metrics" >&2; exit 2; }
case "$out" in
  *.png) terminal='pngcairo size 1400,900 font "sans,11"' ;;
  *.svg) terminal='svg size 1400,900 dynamic font "sans,11"' ;;
  *) echo "plot_metrics: $out: the output name must end in .png or .svg" >&2; exit 2 ;;
esac
command -v gnuplot >/dev/null || { echo "plot_metrics: gnuplot is not installed (apt-get install gnuplot-nox)" >&2; exit 3; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The metrics file's objects are flat (numbers, null and plain strings), written by
# training_metrics.cpp: a field is the text after "key": up to the next ',' or '}'. A
# missing field or null becomes NaN, which gnuplot leaves out.
awk -v train="$work/train.tsv" -v valid="$work/valid.tsv" '
  function field(key,   at, rest) {
    at = index($0, "\"" key "\":")
    if (at == 0) return "NaN"
    rest = substr($0, at + length(key) + 3)
    sub(/[,}].*/, "", rest)
    gsub(/"/, "", rest)
    return rest == "null" ? "NaN" : rest
  }
  field("type") == "iteration" {
    print field("iteration"), field("lm_loss"), field("learning_rate"), field("grad_norm"),
          field("tokens_per_second_per_gpu"), field("throughput_tflops_per_gpu") > train
  }
  field("type") == "evaluation" && field("set") == "validation" {
    print field("iteration"), field("lm_loss") > valid
  }
' "$metrics"
touch "$work/train.tsv" "$work/valid.tsv"
if [ ! -s "$work/train.tsv" ]; then
  echo "plot_metrics: $metrics has no iteration lines" >&2
  exit 2
fi
valid_plot=""
if [ -s "$work/valid.tsv" ]; then
  valid_plot=", '$work/valid.tsv' using 1:2 with linespoints pointtype 7 pointsize 0.8 linewidth 2 title 'validation'"
fi

gnuplot <<EOF
set terminal $terminal
set output '$out'
set datafile separator whitespace
set grid
set key top right
set multiplot layout 2,2 title "$title" font ",13"
set xlabel 'iteration'

set title 'lm loss'
plot '$work/train.tsv' using 1:2 with lines linewidth 2 title 'train' $valid_plot

set title 'learning rate'
set format y '%.1e'
plot '$work/train.tsv' using 1:3 with lines linewidth 2 notitle
set format y '% h'

set title 'grad norm'
plot '$work/train.tsv' using 1:4 with lines linewidth 2 notitle

set title 'throughput per GPU'
set ylabel 'tokens/s'
set y2label 'TFLOP/s'
set ytics nomirror
set y2tics
plot '$work/train.tsv' using 1:5 with lines linewidth 2 title 'tokens/s', \
     '$work/train.tsv' using 1:6 axes x1y2 with lines linewidth 1 dashtype 2 title 'TFLOP/s'
unset multiplot
EOF
echo "plot_metrics: wrote $out"
