#!/bin/bash
# Multi-host launch across real network hops, on this machine: each "host" is a network
# namespace with its own address on a virtual bridge (and its own host name), and the job is
# launched the way users launch Megatron / MindSpeed across nodes — one tools/torchrun per
# host with torchrun's flags, or under Slurm (a slurmctld and one slurmd per host, started here
# and stopped after; `srun` starts one launcher per node). What it checks:
#   * TP2 x PP2 x DP2 over 2 hosts x 4 ranks and 4 hosts x 2 ranks (static rendezvous with node
#     ranks, and c10d at an endpoint with node ranks given in join order): every iteration's loss
#     and grad norm equal the single-process run's (same weights and data) within 1e-5 relative;
#   * start-up failures end every launcher within a bounded time with the node and the cause
#     named: a node missing, the master port taken, a wrong node count, no master;
#   * MindSpeed-LLM's --no-shared-storage with a data cache in each host's own /tmp;
#   * a host's link cut mid-step (its interface set down): the job ends on every host with the
#     lost host named, no rank is left running, and the last checkpoint is intact: the job
#     resumes from it across the hosts once the link is back;
#   * Slurm: `srun --ntasks-per-node=1 torchrun pretrain_gpt.py ...` with nothing but the
#     model flags (the node count, node rank and master come from Slurm's variables), and a
#     direct `srun --mpi=pmix -n 8 pretrain_gpt ...` launch (MPI bootstrapped by Slurm's PMIx).
# Needs root (network namespaces, a bridge); exits 77 (skipped) where they cannot be created.
#
# usage: scripts/multi_host_test.sh [BUILD_DIR]   (default build/ci; MULTI_HOST_ONLY below)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build/ci}" && pwd)
TORCHRUN=$BUILD/tools/torchrun
PRETRAIN=$BUILD/apps/pretrain_gpt
ID=$$
NET="10.$((ID % 200 + 20)).$((ID / 200 % 250)).0"  # a /24 of this run's own
PREFIX=${NET%.0}
WORK=$(mktemp -d /var/tmp/ms_multi_host.XXXXXX)  # shared by the hosts; each has its own /tmp
BRIDGE="msbr$ID"
HOSTS=()  # namespace names
FAILED=0
export OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS=1

log() { echo "[multi_host] $*"; }
pass() { log "PASS $1 (${2}s)"; }
fail() {
  log "FAIL $1: $2"
  FAILED=1
}

cleanup() {
  [ -n "${SLURM_PIDS:-}" ] && kill $SLURM_PIDS 2>/dev/null
  for h in "${HOSTS[@]}"; do
    ip netns pids "$h" 2>/dev/null | xargs -r kill -9 2>/dev/null
    ip netns del "$h" 2>/dev/null
  done
  ip link del "$BRIDGE" 2>/dev/null
  mountpoint -q "$WORK/slurm/cgroup" && umount -R "$WORK/slurm/cgroup"
  if [ $FAILED -eq 0 ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT

# host i: namespace ms<ID>h<i>, address PREFIX.(10+i), host name host<i>.
make_hosts() {
  local n=$1
  ip link add "$BRIDGE" type bridge || return 1
  ip addr add "$PREFIX.1/24" dev "$BRIDGE" && ip link set "$BRIDGE" up || return 1
  printf '127.0.0.1 localhost\n%s ctl\n' "$PREFIX.1" >"$WORK/hosts"
  for ((i = 0; i < n; i++)); do
    local h="ms${ID}h$i"
    ip netns add "$h" || return 1
    mkdir -p "$WORK/tmp$i" && chmod 1777 "$WORK/tmp$i"
    HOSTS+=("$h")
    ip link add "ms${ID}v$i" type veth peer name eth0 netns "$h" || return 1
    ip link set "ms${ID}v$i" master "$BRIDGE" up
    ip -n "$h" addr add "$PREFIX.$((10 + i))/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$h" link set lo up
    echo "$PREFIX.$((10 + i)) host$i" >>"$WORK/hosts"
  done
}
addr() { echo "$PREFIX.$((10 + $1))"; }

# on_host I COMMAND...: runs COMMAND in host I's namespace under its own host name, the hosts
# resolving through WORK/hosts (bound over /etc/hosts in the host's own mount namespace), with
# a /tmp of its own as a separate machine has (WORK/tmp<I>, so the test can look into it).
on_host() {
  local i=$1
  shift
  ip netns exec "ms${ID}h$i" unshare --uts --mount bash -c \
    "hostname host$i; mount --bind $WORK/hosts /etc/hosts; mount --bind $WORK/tmp$i /tmp; exec \"\$@\"" bash "$@"
}

MODEL="--mock-data --tokenizer-type NullTokenizer --vocab-size 4095 --num-layers 4 --hidden-size 64
  --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 8
  --lr 1e-3 --log-interval 1 --eval-interval 1000 --eval-iters 0 --seed 1234 --num-threads 1"
LAYOUT="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2"

# The "iteration | lm loss | grad norm" triples of a log.
metrics() { grep -o 'iteration *[0-9]*/.*lm loss: [0-9.E+-]*\|grad norm: [0-9.]*' "$1" | sed 's/|.*lm loss:/ /;s/iteration *//;s/\/ *[0-9]*//' | paste -d' ' - - | sed 's/grad norm://'; }

# same_metrics A B: the same iterations, losses and grad norms within 1e-5 relative.
same_metrics() {
  local a b
  a=$(metrics "$1")
  b=$(metrics "$2")
  [ -n "$a" ] || return 1
  paste <(echo "$a") <(echo "$b") | awk '
    function rel(x, y) { d = x - y; if (d < 0) d = -d; m = (x < 0 ? -x : x); return m > 0 ? d / m : d }
    NF != 6 || $1 != $4 || rel($2, $5) > 1e-5 || rel($3, $6) > 1e-5 { bad = 1; print "differs: " $0 }
    END { exit bad }'
}

# launch_job NAME NNODES NPROC ITERS EXTRA...: one torchrun per host; logs in WORK/NAME.<i>.log.
# Keep-alives every second; a node silent for KEEP_ALIVE_ATTEMPTS of them (10; the link-cut case
# 3) ends the job. Eight ranks building dataset indices on two cores once starved a launcher's
# keep-alive thread for 3 s.
launch_job() {
  local name=$1 nnodes=$2 nproc=$3 iters=$4
  shift 4
  local pids=()
  for ((i = nnodes - 1; i >= 0; i--)); do
    # RDZV=c10d: torchrun's c10d rendezvous at host 0's endpoint, node ranks in join order.
    local where=(--node_rank "$i" --master_addr "$(addr 0)" --master_port 29500)
    [ "${RDZV:-static}" = c10d ] && where=(--rdzv_backend c10d --rdzv_endpoint "$(addr 0):29500" --rdzv_id "$name")
    on_host "$i" timeout 300 "$TORCHRUN" --nnodes "$nnodes" --nproc_per_node "$nproc" "${where[@]}" \
      --rdzv_conf "join_timeout=60,keep_alive_interval=1,keep_alive_max_attempt=${KEEP_ALIVE_ATTEMPTS:-10}" \
      pretrain_gpt.py ${JOB_MODEL:-$MODEL} --train-iters "$iters" "$@" >"$WORK/$name.$i.log" 2>&1 &
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  return $rc
}

equivalence_case() {
  local name=$1 nnodes=$2 nproc=$3
  local t0=$SECONDS
  if ! launch_job "$name" "$nnodes" "$nproc" 6 $LAYOUT; then
    fail "$name" "a launcher failed: $(tail -5 "$WORK/$name.0.log")"
    return
  fi
  if ! same_metrics "$WORK/single.log" "$WORK/$name.0.log"; then
    fail "$name" "losses differ from the single-process run"
    return
  fi
  if [ "${RDZV:-static}" = c10d ]; then  # the other hosts got node ranks 1 .. n-1, each once
    local ranks
    ranks=$(cat "$WORK/$name".[1-9].log | grep -o "as node [0-9]* of" | awk '{print $3}' | sort -n | tr '\n' ' ')
    [ "$ranks" = "$(seq -s ' ' 1 $((nnodes - 1))) " ] || {
      fail "$name" "c10d node ranks assigned: '$ranks'"
      return
    }
  fi
  pass "$name: TP2 x PP2 x DP2 over $nnodes hosts x $nproc ranks (${RDZV:-static} rendezvous) equals the single-process run" \
    $((SECONDS - t0))
}

# expect_failure NAME LOG PATTERN SECONDS_TAKEN LIMIT
expect_message() {
  if ! grep -q "$3" "$2"; then
    fail "$1" "no '$3' in $2: $(tail -3 "$2")"
    return 1
  fi
  if [ "$4" -gt "$5" ]; then
    fail "$1" "took $4 s (bound $5 s)"
    return 1
  fi
  return 0
}

startup_failures() {
  local t0 rc
  local conf="--rdzv_conf join_timeout=3"
  # A node missing: node 0 alone for a 2-node job.
  t0=$SECONDS
  on_host 0 timeout 60 "$TORCHRUN" --nnodes 2 --nproc_per_node 1 --node_rank 0 --master_addr "$(addr 0)" \
    --master_port 29501 $conf --no-python /bin/true >"$WORK/missing.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && expect_message missing_node "$WORK/missing.log" "node(s) 1 of 2 did not join" $((SECONDS - t0)) 10 &&
    pass "missing node: node 0 names node 1 and ends" $((SECONDS - t0))
  # No master: node 1 alone.
  t0=$SECONDS
  on_host 1 timeout 60 "$TORCHRUN" --nnodes 2 --nproc_per_node 1 --node_rank 1 --master_addr "$(addr 0)" \
    --master_port 29502 $conf --no-python /bin/true >"$WORK/nomaster.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && expect_message no_master "$WORK/nomaster.log" "node 1 (host1): cannot reach the master at $(addr 0):29502" \
    $((SECONDS - t0)) 10 && pass "no master: node 1 names the master it could not reach" $((SECONDS - t0))
  # The master port taken (by another job's node 0).
  t0=$SECONDS
  on_host 0 timeout 60 "$TORCHRUN" --nnodes 2 --nproc_per_node 1 --node_rank 0 --master_addr "$(addr 0)" \
    --master_port 29503 --rdzv_conf join_timeout=20 --no-python /bin/true >"$WORK/holder.log" 2>&1 &
  local holder=$!
  sleep 1
  on_host 0 timeout 60 "$TORCHRUN" --nnodes 2 --nproc_per_node 1 --node_rank 0 --master_addr "$(addr 0)" \
    --master_port 29503 $conf --no-python /bin/true >"$WORK/taken.log" 2>&1
  rc=$?
  kill $holder 2>/dev/null
  wait $holder 2>/dev/null
  [ $rc -ne 0 ] && expect_message port_taken "$WORK/taken.log" "port 29503 on $(addr 0) is in use" $((SECONDS - t0)) 10 &&
    pass "master port taken: node 0 says the port is in use" $((SECONDS - t0))
  # A wrong node count on node 1: both launchers end naming it.
  t0=$SECONDS
  on_host 1 timeout 60 "$TORCHRUN" --nnodes 3 --nproc_per_node 1 --node_rank 1 --master_addr "$(addr 0)" \
    --master_port 29504 $conf --no-python /bin/true >"$WORK/wrong.1.log" 2>&1 &
  local n1=$!
  on_host 0 timeout 60 "$TORCHRUN" --nnodes 2 --nproc_per_node 1 --node_rank 0 --master_addr "$(addr 0)" \
    --master_port 29504 $conf --no-python /bin/true >"$WORK/wrong.0.log" 2>&1
  rc=$?
  wait $n1
  local rc1=$?
  [ $rc -ne 0 ] && [ $rc1 -ne 0 ] &&
    expect_message wrong_nnodes "$WORK/wrong.0.log" "host1 ($(addr 1)) was started with --nnodes 3" $((SECONDS - t0)) 10 &&
    expect_message wrong_nnodes "$WORK/wrong.1.log" "was started with --nnodes 3" $((SECONDS - t0)) 10 &&
    pass "wrong node count: both launchers end naming host1's --nnodes 3" $((SECONDS - t0))
}

# MindSpeed-LLM's --no-shared-storage: the hosts share no file system for the index cache
# (--data-cache-path in each host's own /tmp). Without the flag only global rank 0 (host 0)
# writes the cache and host 1's ranks build the indices in memory with a warning; with it each
# host's first rank builds and writes its own cache. Both train the same losses.
no_shared_storage() {
  local t0=$SECONDS gpt2="$ROOT/data/gpt2"
  zcat "$ROOT/data/corpus/kjv.jsonl.gz" | head -300 >"$WORK/docs.jsonl"
  "$BUILD/tools/preprocess_data" --input "$WORK/docs.jsonl" --output-prefix "$WORK/kjv" --tokenizer-type GPT2BPETokenizer \
    --vocab-file "$gpt2/gpt2-vocab.json" --merge-file "$gpt2/gpt2-merges.txt" --append-eod >"$WORK/preprocess.log" 2>&1 || {
    fail no_shared_storage "preprocess_data: $(tail -3 "$WORK/preprocess.log")"
    return
  }
  local JOB_MODEL="--data-path $WORK/kjv_text_document --split 100,0,0 --data-cache-path /tmp/index_cache
    --tokenizer-type GPT2BPETokenizer --vocab-file $gpt2/gpt2-vocab.json --merge-file $gpt2/gpt2-merges.txt
    --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --max-position-embeddings 64
    --micro-batch-size 2 --global-batch-size 8 --lr 1e-3 --log-interval 1 --eval-interval 1000 --eval-iters 0
    --seed 1234 --num-threads 1"
  rm -rf "$WORK"/tmp*/index_cache
  JOB_MODEL=$JOB_MODEL launch_job shared 2 4 4 $LAYOUT || {
    fail no_shared_storage "$(tail -3 "$WORK/shared.0.log")"
    return
  }
  local host1_files
  host1_files=$(find "$WORK/tmp1/index_cache" -name '*.npy' 2>/dev/null | wc -l)
  if [ "$host1_files" -ne 0 ] || ! grep -q "building them in memory" "$WORK/shared.0.log"; then
    fail no_shared_storage "without the flag host 1 has $host1_files cached index files (expected 0 and a warning)"
    return
  fi
  rm -rf "$WORK"/tmp*/index_cache
  JOB_MODEL=$JOB_MODEL launch_job private 2 4 4 $LAYOUT --no-shared-storage || {
    fail no_shared_storage "$(tail -3 "$WORK/private.0.log")"
    return
  }
  local files0 files1
  files0=$(find "$WORK/tmp0/index_cache" -name '*.npy' 2>/dev/null | wc -l)
  files1=$(find "$WORK/tmp1/index_cache" -name '*.npy' 2>/dev/null | wc -l)
  if [ "$files1" -eq 0 ] || [ "$files1" -ne "$files0" ] || grep -q "building them in memory" "$WORK/private.0.log"; then
    fail no_shared_storage "with --no-shared-storage host 0 cached $files0 and host 1 $files1 index files"
    return
  fi
  if ! same_metrics "$WORK/shared.0.log" "$WORK/private.0.log"; then
    fail no_shared_storage "the losses differ with --no-shared-storage"
    return
  fi
  pass "--no-shared-storage: each host caches its own indices ($files1 files on host 1), same losses" $((SECONDS - t0))
}

link_cut() {
  local t0=$SECONDS save="$WORK/ckpt"
  local flags="$LAYOUT --save $save --save-interval 2"
  KEEP_ALIVE_ATTEMPTS=3 launch_job cut 2 4 400 $flags &
  local job=$!
  # Wait for the checkpoint of iteration 4, then cut host 1's link in the middle of a later step.
  for ((k = 0; k < 600; k++)); do
    [ "$(cat "$save/latest_checkpointed_iteration.txt" 2>/dev/null)" = "4" ] && break
    sleep 0.1
  done
  sleep 0.5
  ip -n "ms${ID}h1" link set eth0 down
  local cut=$SECONDS
  wait $job
  local took=$((SECONDS - cut))
  local left
  left=$(pgrep -f "$PRETRAIN .*--save $save" | wc -l)
  ip -n "ms${ID}h1" link set eth0 up
  if ! grep -q "node 1 (host1, $(addr 1)) has been silent" "$WORK/cut.0.log"; then
    fail link_cut "node 0 did not name host1: $(tail -3 "$WORK/cut.0.log")"
    return
  fi
  if ! grep -q "node 1 (host1): the master (node 0 at $(addr 0)) has been silent" "$WORK/cut.1.log"; then
    fail link_cut "node 1 did not end on the lost master: $(tail -3 "$WORK/cut.1.log")"
    return
  fi
  [ "$left" -eq 0 ] || {
    fail link_cut "$left rank(s) left running"
    return
  }
  [ "$took" -le 30 ] || {
    fail link_cut "the job took $took s to end after the cut (bound 30 s)"
    return
  }
  local last
  last=$(cat "$save/latest_checkpointed_iteration.txt")
  pass "link cut: host1 named on both sides, no rank left, ended $took s after the cut (checkpoint $last)" $((SECONDS - t0))
  # Resume across the hosts from the last checkpoint.
  t0=$SECONDS
  if ! launch_job resume 2 4 $((last + 2)) $flags --load "$save"; then
    fail resume "the resumed job failed: $(tail -5 "$WORK/resume.0.log")"
    return
  fi
  if ! grep -q "iteration *$((last + 1))/" "$WORK/resume.0.log" || grep -q "iteration *1/" "$WORK/resume.0.log"; then
    fail resume "the resumed job did not continue at iteration $((last + 1))"
    return
  fi
  pass "resume: the job continues at iteration $((last + 1)) from the checkpoint left by the cut" $((SECONDS - t0))
}

# Network namespaces, and inside them a UTS and mount namespace of their own (bind mounts):
# where a container withholds either, the test is skipped, saying why.
if [ "$(id -u)" != 0 ] || ! make_hosts 4 2>"$WORK/setup.err" || ! on_host 0 true 2>>"$WORK/setup.err"; then
  log "SKIP: cannot create network, UTS and mount namespaces here ($(head -1 "$WORK/setup.err" 2>/dev/null)); needs root"
  exit 77
fi
[ -x "$TORCHRUN" ] && [ -x "$PRETRAIN" ] || {
  log "build $TORCHRUN and $PRETRAIN first"
  exit 1
}

t0=$SECONDS
"$PRETRAIN" $MODEL --train-iters 6 >"$WORK/single.log" 2>&1 || fail single "$(tail -3 "$WORK/single.log")"
log "single-process reference run (${SECONDS}s)"
# MULTI_HOST_ONLY="slurm link_cut ...": only those groups (for debugging one).
want() { [ -z "${MULTI_HOST_ONLY:-}" ] || [[ " $MULTI_HOST_ONLY " == *" $1 "* ]]; }
want two_hosts && equivalence_case two_hosts 2 4
want four_hosts && equivalence_case four_hosts 4 2
want c10d && RDZV=c10d equivalence_case c10d_rendezvous 4 2
want startup && startup_failures
want no_shared_storage && no_shared_storage
want link_cut && link_cut
want slurm && . "$ROOT/scripts/multi_host_slurm.sh" && slurm_cases

if [ $FAILED -ne 0 ]; then
  log "FAILED (logs were in $WORK)"
  exit 1
fi
log "all cases passed in $((SECONDS - t0)) s"
