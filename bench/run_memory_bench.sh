#!/usr/bin/env bash
# Memory bench (issue 14): what the allocator counts, per rank, against the formulas.
#  1. Activations saved per transformer layer between forward and backward, for no
#     recompute, selective (core_attn), full (uniform, 1 layer per unit),
#     --recompute-activation-function, --recompute-norm, --swap-attention (resident and
#     swapped bytes apart) and activation-function + norm; at TP1, TP2 and TP2 with
#     --sequence-parallel. Per layer = (peak with L_HI layers - peak with L_LO layers) /
#     (L_HI - L_LO), so the embedding, head and loss cancel. Beside it: Korthikanti et al.
#     2022 ("Reducing Activation Recomputation in Large Transformer Models") adapted to this
#     engine: bf16 saved activations (--bf16), fp32 norm statistics, flash attention (no s x s
#     term; the fp32 log-sum-exp, a*s*b*4 bytes, instead), counter-based dropout (no masks).
#  2. Parameter, gradient, optimizer-state and communication bytes per rank for plain DDP,
#     --use-distributed-optimizer and --use-custom-fsdp with each
#     --data-parallel-sharding-strategy, at DP 2 and DP 4 (oversubscribed), beside
#     2N / 4N / 12N (/dp where sharded) and the transient units of ZeRO-2/3.
#  3. ZeRO-3 (optim_grads_params): the parameter units gathered at once during a step, for
#     learned positions + tied embeddings, RoPE + tied, RoPE + untied (design: 2 units).
#  4. Optimizer state bytes per rank for --reuse-fp32-param, --o2-optimizer, both, and
#     --swap-optimizer, at DP 1 and DP 2 with the distributed optimizer, beside 12/10/8/6 x N.
#  5. Gradient bytes per rank with --o2-gradient (bf16 buffer, 2N) against fp32 gradients (4N),
#     at DP 1 and DP 2 with the distributed optimizer, and the step's transient fp32 units.
# Two sources per run: the "[Rank R] memory (MiB)" line pretrain_gpt logs (current/peak since
# start, 0.1 MiB resolution; the peak includes set-up), and the exact bytes of the
# allocator's per-category counters over train step 2 alone (--profile-with-memory trace,
# every allocation and free sampled). The tables use the step-2 bytes; the log peak is shown
# beside them as a cross-check.
# Model: GPT, LayerNorm, GELU, ffn 4h, learned positions, tied embeddings, s=1024, b=1,
# h=512, a=8, vocab 4096 (NullTokenizer 4095 + EOD), bf16, flash attention, default dropout
# 0.1; 2 train steps per run; about 5 minutes on 2 cores.
#   bench/run_memory_bench.sh [path/to/pretrain_gpt]    (default build/release/apps/pretrain_gpt)
# Environment: SKIP_DP4=1 skips the DP 4 runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/memory_bench_common.sh
source bench/memory_bench_common.sh
memory_bench_setup memory-bench "${1:-}"
CORES=$(nproc)

S=1024 B=1 H=512 A=8 V=4096
F=$((4 * H))
L_LO=2 L_HI=4
COMMON=(--hidden-size "$H" --num-attention-heads "$A" --seq-length "$S" --max-position-embeddings "$S"
        --micro-batch-size "$B" --lr 1e-4 --train-iters 2 --log-interval 1 --eval-iters 0
        --mock-data --tokenizer-type NullTokenizer --vocab-size $((V - 1)) --bf16 --use-flash-attn
        --seed 1234)

# run NAME NP ARGS...: trains, keeps $WORK/NAME.log and writes $WORK/NAME.mem, lines "key value":
#   log_<cat>_cur / log_<cat>_peak (MiB, last rank's last memory line; log_swapped_peak)
#   step_<cat> (bytes, max over train step 2 of the last rank's counter; step_swapped)
run() {
  local name=$1 np=$2
  shift 2
  local threads=$((CORES / np))
  ((threads >= 1)) || threads=1
  local last=$((np - 1))
  rm -rf "$WORK/prof"
  if ! mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS="$threads" \
      -x OMP_WAIT_POLICY=PASSIVE -np "$np" "$BIN" "${COMMON[@]}" "$@" \
      --profile --profile-step-start 1 --profile-step-end 2 --profile-with-cpu --profile-with-memory \
      --profile-ranks "$last" --profile-save-path "$WORK/prof" >"$WORK/$name.log" 2>&1; then
    echo "run $name failed:" >&2
    tail -20 "$WORK/$name.log" >&2
    exit 1
  fi
  {
    memory_line_fields "$WORK/$name.log" "$last"
    grep -ho '"name":"memory (bytes)"[^}]*}' "$WORK"/prof/*.json |
      awk -F'[{}:,"]+' '{ for (i = 1; i < NF; i++) if ($i == "args") break;
                          for (i++; i < NF; i += 2) if (!($i in m) || $(i + 1) + 0 > m[$i]) m[$i] = $(i + 1) + 0 }
                        END { for (k in m) printf "step_%s %.0f\n", k, m[k] }'
    grep -o 'number of parameters on (tensor, pipeline) model parallel rank (0, 0): [0-9]*' "$WORK/$name.log" |
      head -1 | awk '{ print "nparams", $NF }'
  } >"$WORK/$name.mem"
}
# get NAME KEY: a value from NAME.mem (0 when absent)
get() { awk -v k="$2" '$1 == k { v = $2 } END { print v + 0 }' "$WORK/$1.mem"; }

# --- 1. Activations per layer --------------------------------------------------------------
MODES=(none selective full actfn norm swap actfn+norm)
declare -A MODE_FLAGS=(
  [none]=""
  [selective]="--recompute-granularity selective"
  [full]="--recompute-granularity full --recompute-method uniform --recompute-num-layers 1"
  [actfn]="--recompute-activation-function"
  [norm]="--recompute-norm"
  [swap]="--swap-attention --swap-dir $WORK"
  [actfn+norm]="--recompute-activation-function --recompute-norm"
)
PARS=("1|1|" "2|2|" "2+SP|2|--sequence-parallel")
ACT_ROWS=$WORK/act.rows
: >"$ACT_ROWS"
for par in "${PARS[@]}"; do
  IFS='|' read -r pname tp pflags <<<"$par"
  for mode in "${MODES[@]}"; do
    for L in $L_LO $L_HI; do
      # shellcheck disable=SC2086
      run "act-$pname-$mode-$L" "$tp" --num-layers "$L" --global-batch-size "$B" \
        --tensor-model-parallel-size "$tp" $pflags ${MODE_FLAGS[$mode]}
    done
    lo=act-$pname-$mode-$L_LO hi=act-$pname-$mode-$L_HI
    sp=0
    [ -n "$pflags" ] && sp=1
    echo "$pname $mode $tp $sp $(get "$hi" step_activations) $(get "$lo" step_activations)" \
      "$(get "$hi" log_activations_peak) $(get "$lo" log_activations_peak)" \
      "$(get "$hi" step_swapped) $(get "$lo" step_swapped) $(get "$hi" log_swapped_peak)" \
      "$(get "$lo" log_swapped_peak)" >>"$ACT_ROWS"
  done
done

echo "## Activations per transformer layer, per rank"
echo
echo "s=$S b=$B h=$H a=$A ffn=$F, bf16, flash attention, LayerNorm, GELU; per layer = (L=$L_HI - L=$L_LO) / $((L_HI - L_LO))."
echo "t = TP size; t' = t with --sequence-parallel, else 1 (the norms, residuals and layer input are split"
echo "only under SP). Measured = exact allocator bytes (activations category), max over train step 2;"
echo "log = the same from the logged peak (MiB, since start, 0.1 MiB resolution)."
echo
echo "| TP | mode | measured (MiB/layer) | log (MiB/layer) | formula (this engine) | formula (MiB) | measured - formula (bytes) | ratio | paper (16-bit, unfused, masks) (MiB) |"
echo "|---|---|---:|---:|---|---:|---:|---:|---:|"
awk -v s="$S" -v b="$B" -v h="$H" -v a="$A" -v F="$F" -v dl=$((L_HI - L_LO)) '
  function mib(x) { return x / 1048576 }
  {
    tp = $1; mode = $2; t = $3; sp = ($4 == "1"); tq = sp ? t : 1
    sh = s * b * h; n = s * b / tq; N = s * b
    # Saved per layer by TransformerLayer::Saved (bf16 tensors 2 bytes, statistics fp32):
    X = 2 * n * h                       # input (the previous layer output), [n, h]
    LN1 = 2 * n * h + 8 * n             # input_layernorm out + mean + rstd
    QKV = 3 * 2 * N * h / t             # q, k, v after rotary/split, heads/t
    LSE = 4 * a * N / t                 # flash log-sum-exp, fp32 [b, a/t, s]
    CTX = 2 * N * h / t                 # core-attention output (linear_proj input)
    MID = 2 * n * h                     # residual after attention
    LN2 = 2 * n * h + 8 * n             # pre_mlp_layernorm out + mean + rstd
    FC1 = 2 * N * F / t                 # fc1 output (GELU input)
    ACT = 2 * N * F / t                 # GELU output (fc2 input)
    all = X + LN1 + QKV + LSE + CTX + MID + LN2 + FC1 + ACT
    swapped = 0; paper = ""
    if (mode == "none") {
      f = all; expr = "sbh(8/t'"'"'+24/t)+4asb/t+16sb/t'"'"'"
      paper = sp ? sh / t * (34 + 5 * a * s / h) : sh * (10 + 24 / t + 5 * a * s / (h * t))
    } else if (mode == "selective") {
      f = all - CTX - LSE; expr = "sbh(8/t'"'"'+22/t)+16sb/t'"'"'"
      paper = sp ? 34 * sh / t : sh * (10 + 24 / t)
    } else if (mode == "full") {
      f = X; expr = "2sbh/t'"'"'"; paper = sp ? 2 * sh / t : 2 * sh
    } else if (mode == "actfn") {
      f = all - ACT; expr = "sbh(8/t'"'"'+16/t)+4asb/t+16sb/t'"'"'"
    } else if (mode == "norm") {
      f = all - LN1 - LN2; expr = "sbh(4/t'"'"'+24/t)+4asb/t"
    } else if (mode == "actfn+norm") {
      f = all - ACT - LN1 - LN2; expr = "sbh(4/t'"'"'+16/t)+4asb/t"
    } else if (mode == "swap") {
      f = X + MID + FC1 + ACT; expr = "resident: sbh(4/t'"'"'+16/t)"
      swapped = LN1 + QKV + LSE + CTX + LN2
      sexpr = "swapped: sbh(4/t'"'"'+8/t)+4asb/t+16sb/t'"'"'"
    }
    meas = ($5 - $6) / dl; logm = ($7 - $8) / dl
    ptext = "-"
    if (paper != "") ptext = sprintf("%.3f", mib(paper))
    printf("| %s | %s | %.3f | %.2f | %s | %.3f | %.0f | %.4f | %s |\n", tp, mode, mib(meas), logm, expr, mib(f),
           meas - f, meas / f, ptext)
    if (mode == "swap") {
      smeas = ($9 - $10) / dl; slog = ($11 - $12) / dl
      printf("| %s | swap (swapped) | %.3f | %.2f | %s | %.3f | %.0f | %.4f | - |\n", tp, mib(smeas), slog, sexpr,
             mib(swapped), smeas - swapped, smeas / swapped)
    }
  }' "$ACT_ROWS"
echo

# --- 2. Parameters, gradients, optimizer state per rank -----------------------------------
LF=4  # layers of the FSDP model
STRATS=(
  "DDP|"
  "distributed optimizer|--use-distributed-optimizer"
  "FSDP no_shard|--use-distributed-optimizer --use-custom-fsdp --data-parallel-sharding-strategy no_shard"
  "FSDP optim|--use-distributed-optimizer --use-custom-fsdp --data-parallel-sharding-strategy optim"
  "FSDP optim_grads|--use-distributed-optimizer --use-custom-fsdp --data-parallel-sharding-strategy optim_grads --no-gradient-accumulation-fusion"
  "FSDP optim_grads_params|--use-distributed-optimizer --use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params --no-gradient-accumulation-fusion"
)
DPS=(2 4)
[ "${SKIP_DP4:-0}" = 1 ] && DPS=(2)
FSDP_ROWS=$WORK/fsdp.rows
: >"$FSDP_ROWS"
for dp in "${DPS[@]}"; do
  i=0
  for entry in "${STRATS[@]}"; do
    sname=${entry%%|*} sflags=${entry#*|}
    # shellcheck disable=SC2086
    run "dp$dp-$i" "$dp" --num-layers "$LF" --global-batch-size $((B * dp)) $sflags
    for cat in params grads optimizer comm; do
      echo "$dp|$sname|$cat|$(get "dp$dp-$i" "log_${cat}_cur")|$(get "dp$dp-$i" "log_${cat}_peak")|$(get "dp$dp-$i" "step_$cat")|$(get "dp$dp-$i" nparams)" >>"$FSDP_ROWS"
    done
    i=$((i + 1))
  done
done

UL=$((12 * H * H + 13 * H))                  # one layer's parameters (an FSDP unit)
NF=$((V * H + S * H + LF * UL + 2 * H))      # word + position embeddings, layers, final norm
echo "## Parameters, gradients, optimizer state per rank (FSDP strategies)"
echo
echo "GPT of $LF layers, TP1, N = V*h + s*h + L*(12h^2+13h) + 2h = $NF parameters" \
  "(pretrain_gpt reports $(awk -F'|' 'NR == 1 { print $7 }' "$FSDP_ROWS")); bf16 parameters, fp32 gradients, fp32 Adam"
echo "(main copy + m + v). U = one layer's parameters ($UL); E = the word embedding's ($((V * H)))."
echo "current = after the step (log); log peak = since start, set-up included; step-2 peak = exact bytes over train"
echo "step 2 (trace). Steady formula vs current; peak formula vs step-2 peak."
echo
echo "| DP | strategy | bytes | current (MiB) | log peak (MiB) | step-2 peak (MiB) | formula steady | (MiB) | formula peak | (MiB) | ratio current | ratio step peak |"
echo "|---|---|---|---:|---:|---:|---|---:|---|---:|---:|---:|"
awk -F'|' -v N="$NF" -v U="$UL" -v E=$((V * H)) '
  function mib(x) { return x / 1048576 }
  {
    dp = $1; st = $2; cat = $3; cur = $4; lpeak = $5; speak = $6 / 1048576
    dist = (st != "DDP" && st != "FSDP no_shard")   # no_shard turns the distributed optimizer off
    zg = (st ~ /optim_grads/); zp = (st ~ /optim_grads_params/)
    if (cat == "params") {
      if (zp) { f = 2 * N / dp; e = "2N/dp"; p = f + 2 * 2 * U; pe = "2N/dp+2*2U" } else { f = 2 * N; e = "2N"; p = f; pe = e }
    } else if (cat == "grads") {
      if (zg) { f = 4 * N / dp; e = "4N/dp"; p = f + 4 * E + 2 * 4 * U; pe = "4N/dp+4E+2*4U" } else { f = 4 * N; e = "4N"; p = f; pe = e }
    } else if (cat == "optimizer") {
      if (dist) { f = 12 * N / dp; e = "12N/dp" } else { f = 12 * N; e = "12N" }
      p = f; pe = e
    } else {  # reduce-scatters run in place in the gradient buffer: no communication buffer
      f = 0; e = "0"; p = f; pe = e
    }
    rc = f > 0 ? sprintf("%.3f", cur / mib(f)) : (cur == 0 ? "-" : "inf")
    rp = p > 0 ? sprintf("%.3f", speak / mib(p)) : (speak == 0 ? "-" : "inf")
    printf "| %s | %s | %s | %.1f | %.1f | %.2f | %s | %.2f | %s | %.2f | %s | %s |\n", dp, st, cat, cur, lpeak, speak,
           e, mib(f), pe, mib(p), rc, rp
  }' "$FSDP_ROWS"
echo
# --- 3. ZeRO-3 gathered units by embedding layout -----------------------------------------
# optim_grads_params keeps a unit's full parameters only while a module uses it, plus the one
# prefetched next: by design 2 units (2 x 2U bytes) at most. With tied embeddings the output
# layer re-uses the word embedding's unit after the final norm; this shows what its prefetch
# keeps gathered during backward (the unit just below the word embedding in the buffer).
ZERO3="--use-distributed-optimizer --use-custom-fsdp --data-parallel-sharding-strategy optim_grads_params --no-gradient-accumulation-fusion"
LAYOUTS=(
  "learned positions, tied|$((V * H + S * H + LF * UL + 2 * H))|"
  "RoPE, tied|$((V * H + LF * UL + 2 * H))|--position-embedding-type rope"
  "RoPE, untied|$((2 * V * H + LF * UL + 2 * H))|--position-embedding-type rope --untie-embeddings-and-output-weights"
)
echo "## ZeRO-3 (optim_grads_params) gathered parameters during step 2, DP 2, by embedding layout"
echo
echo "transient = step-2 peak of params - 2N/dp; by design at most 2 units (the one in use + the prefetched next), 2 x 2U = $((4 * UL)) bytes."
echo
echo "| embedding layout | N | step-2 params peak (bytes) | 2N/dp (bytes) | transient (bytes) | transient / 2U (units) | design (units) |"
echo "|---|---:|---:|---:|---:|---:|---:|"
i=0
for entry in "${LAYOUTS[@]}"; do
  IFS='|' read -r lname lN lflags <<<"$entry"
  # shellcheck disable=SC2086
  run "zero3-$i" 2 --num-layers "$LF" --global-batch-size $((B * 2)) $ZERO3 $lflags
  peak=$(get "zero3-$i" step_params)
  awk -v name="$lname" -v N="$lN" -v peak="$peak" -v U="$UL" -v rep="$(get "zero3-$i" nparams)" 'BEGIN {
    sh = 2 * N / 2; tr = peak - sh
    printf("| %s | %.0f (reported %.0f) | %.0f | %.0f | %.0f | %.3f | 2 |\n", name, N, rep, peak, sh, tr, tr / (2 * U)) }'
  i=$((i + 1))
done
echo

# --- 4. Optimizer state bytes --------------------------------------------------------------
# bf16 parameters: fp32 master (4) + exp_avg (4) + exp_avg_sq (4) = 12 bytes per element;
# --reuse-fp32-param: a 2-byte residual instead of the master (10); --o2-optimizer: bf16
# moments (8); both (6); /dp with the distributed optimizer. --swap-optimizer: all 12 in the
# swap tier, at most 3 of its T slices resident during the step.
echo "## Optimizer state bytes per rank (reuse-fp32-param, O2, swap optimizer)"
echo
echo "GPT of $LF layers (N below), bf16. Measured = the optimizer category's step-2 peak (exact bytes; the"
echo "fp32 workspace of reuse/O2 is the separate workspace category, 768 KiB); swapped = the tier's peak from the log."
echo
echo "| DP | flags | measured (MiB) | formula | formula (MiB) | ratio | swapped (log, MiB) |"
echo "|---|---|---:|---|---:|---:|---:|"
T=4
OPT_CASES=(
  "1|12|-|"
  "1|10|--reuse-fp32-param|--reuse-fp32-param"
  "1|8|--o2-optimizer|--o2-optimizer"
  "1|6|--reuse-fp32-param --o2-optimizer|--reuse-fp32-param --o2-optimizer"
  "2|12|distopt (--use-distributed-optimizer)|--use-distributed-optimizer"
  "2|10|distopt + --reuse-fp32-param|--use-distributed-optimizer --reuse-fp32-param"
  "2|8|distopt + --o2-optimizer|--use-distributed-optimizer --o2-optimizer"
  "2|swap|distopt + --swap-optimizer --swap-optimizer-times $T|--use-distributed-optimizer --swap-optimizer --swap-optimizer-times $T --swap-dir $WORK"
)
i=0
for entry in "${OPT_CASES[@]}"; do
  IFS='|' read -r dp per label oflags <<<"$entry"
  # shellcheck disable=SC2086
  run "opt-$i" "$dp" --num-layers "$LF" --global-batch-size $((B * dp)) $oflags
  awk -v dp="$dp" -v per="$per" -v label="$label" -v flags="$oflags" -v N="$(get "opt-$i" nparams)" -v T="$T" \
      -v got="$(get "opt-$i" step_optimizer)" -v swapped="$(get "opt-$i" log_swapped_peak)" 'BEGIN {
    sharded = (flags ~ /--use-distributed-optimizer/) ? dp : 1
    if (per == "swap") { f = 3 * 12 * N / sharded / T; expr = sprintf("at most 3/T x 12N/%d", sharded) }
    else { f = per * N / sharded; expr = sprintf("%dN/%d", per, sharded) }
    printf("| %d | %s | %.2f | %s | %.2f | %.3f | %s |\n", dp, label, got / 1048576, expr, f / 1048576, got / f,
           per == "swap" ? sprintf("%.1f (12N/%d = %.1f)", swapped, sharded, 12 * N / sharded / 1048576) : "-") }'
  i=$((i + 1))
done
echo

# --- 5. Gradient bytes with --o2-gradient ---------------------------------------------------
# fp32 gradients: 4N bytes for the whole step. --o2-gradient: a bf16 buffer (2N) between steps;
# during the step a module's backward writes a transient fp32 gradient (4 x its elements) that
# is added into the buffer when the module is done. With tied embeddings the word embedding's
# unit lives from the output layer's forward (the fused loss writes its gradient) to the
# embedding's backward, so the step peak is 2N + 4 x (E + U): the word embedding's unit and a
# layer's (E and U as in section 2).
echo "## Gradient bytes per rank with --o2-gradient"
echo
echo "GPT of $LF layers (N below), bf16, --no-gradient-accumulation-fusion (which --o2-gradient needs) in every row."
echo "Between steps = the gradient category's current value in the log after step 2; step-2 peak = exact bytes."
echo
echo "| DP | flags | between steps (MiB) | formula (MiB) | step-2 peak (MiB) | 2N + 4(E + U) (MiB) |"
echo "|---|---|---:|---:|---:|---:|"
GRAD_CASES=(
  "1|4|-|"
  "1|2|--o2-gradient|--o2-gradient"
  "2|2|distopt + --o2-gradient|--use-distributed-optimizer --o2-gradient"
)
i=0
for entry in "${GRAD_CASES[@]}"; do
  IFS='|' read -r dp per label oflags <<<"$entry"
  # shellcheck disable=SC2086
  run "grad-$i" "$dp" --num-layers "$LF" --global-batch-size $((B * dp)) --no-gradient-accumulation-fusion $oflags
  awk -v dp="$dp" -v per="$per" -v label="$label" -v N="$(get "grad-$i" nparams)" -v cur="$(get "grad-$i" log_grads_cur)" \
      -v peak="$(get "grad-$i" step_grads)" -v emb=$((V * H)) -v layer="$UL" 'BEGIN {
    transient = per == 2 ? sprintf("%.2f", (2 * N + 4 * (emb + layer)) / 1048576) : "-"
    printf("| %d | %s | %.1f | %dN = %.2f | %.2f | %s |\n", dp, label, cur, per, per * N / 1048576, peak / 1048576,
           transient) }'
  i=$((i + 1))
done
echo
