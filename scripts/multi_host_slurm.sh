# Slurm cases of scripts/multi_host_test.sh (sourced by it; uses its hosts, logs and helpers).
# A Slurm cluster of the test's hosts: slurmctld on the bridge (host name "ctl") and one slurmd
# per host namespace (Debian's slurm-wlm; no munge: auth/none), started here and stopped when
# the test ends. Jobs are submitted from host 0 as from a login node:
#   * srun --nodes=2 --ntasks-per-node=1 torchrun --nproc_per_node 4 pretrain_gpt.py <model>:
#     one launcher per node, node count, node rank and master taken from SLURM_NNODES,
#     SLURM_NODEID and SLURM_JOB_NODELIST;
#   * srun --nodes=2 --ntasks=8 --mpi=pmix pretrain_gpt <model>: MPI bootstrapped by Slurm.
# Both at TP2 x PP2 x DP2, compared with the single-process run.

slurm_start() {
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null || {
    log "SKIP slurm: slurm-wlm is not installed (scripts/install_deps.sh installs it)"
    return 2
  }
  mountpoint -q /sys/fs/cgroup || {
    log "SKIP slurm: no cgroup file system at /sys/fs/cgroup (slurmd needs one)"
    return 2
  }
  local s="$WORK/slurm" port=$((16817 + ID % 1000))
  mkdir -p "$s/state" "$s/spool" "$s/cgroup"
  mount --rbind /sys/fs/cgroup "$s/cgroup" || return 1
  export SLURM_CONF="$s/slurm.conf"
  {
    echo "ClusterName=mstest$ID"
    echo "SlurmctldHost=ctl($PREFIX.1)"
    echo "SlurmctldPort=$port"
    echo "SlurmdPort=6818"
    echo "AuthType=auth/none"
    echo "CredType=cred/none"
    echo "SlurmUser=root"
    echo "SlurmdUser=root"
    echo "StateSaveLocation=$s/state"
    echo "SlurmdSpoolDir=$s/spool/%n"
    echo "SlurmctldPidFile=$s/slurmctld.pid"
    echo "SlurmdPidFile=$s/slurmd.%n.pid"
    echo "SlurmctldLogFile=$s/slurmctld.log"
    echo "SlurmdLogFile=$s/slurmd.%n.log"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "JobAcctGatherType=jobacct_gather/none"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SlurmdParameters=config_overrides"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "InactiveLimit=0"
    echo "KillWait=5"
    for ((i = 0; i < ${#HOSTS[@]}; i++)); do
      echo "NodeName=host$i NodeAddr=$(addr "$i") CPUs=8 State=UNKNOWN"
    done
    echo "PartitionName=ms Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
  } >"$SLURM_CONF"
  printf 'CgroupPlugin=autodetect\nIgnoreSystemd=yes\n' >"$s/cgroup.conf"
  unshare --uts bash -c "hostname ctl; exec slurmctld -D -i -f $SLURM_CONF" >"$s/slurmctld.out" 2>&1 &
  SLURM_PIDS="$!"
  for ((i = 0; i < ${#HOSTS[@]}; i++)); do
    mkdir -p "$s/spool/host$i"
    # The namespace's fresh /sys hides the cgroup file systems slurmd needs: the host's, bound again.
    on_host "$i" bash -c "mount --rbind $s/cgroup /sys/fs/cgroup && exec slurmd -D -N host$i -f $SLURM_CONF" \
      >"$s/slurmd.$i.out" 2>&1 &
    SLURM_PIDS="$SLURM_PIDS $!"
  done
  # Every node idle within 30 s.
  for ((k = 0; k < 300; k++)); do
    if [ "$(on_host 0 sinfo -h -o '%T %D' 2>/dev/null)" = "idle ${#HOSTS[@]}" ]; then return 0; fi
    sleep 0.1
  done
  log "slurm did not come up: $(on_host 0 sinfo 2>&1 | tail -3); $(tail -3 "$s/slurmctld.log" 2>/dev/null)"
  return 1
}

# slurm_equivalence NAME WHAT COMMAND...: COMMAND (an srun line, from host 0) with the model
# flags at TP2 x PP2 x DP2 logs the single-process run's losses and grad norms.
slurm_equivalence() {
  local name=$1 what=$2 t0=$SECONDS
  shift 2
  on_host 0 timeout 300 "$@" $MODEL --train-iters 6 $LAYOUT >"$WORK/$name.log" 2>&1
  if [ $? -ne 0 ]; then
    fail "$name" "$(tail -5 "$WORK/$name.log")"
  elif ! same_metrics "$WORK/single.log" "$WORK/$name.log"; then
    fail "$name" "losses differ from the single-process run"
  else
    pass "$name: $what, TP2 x PP2 x DP2 over 2 hosts equals the single-process run" $((SECONDS - t0))
  fi
}

slurm_cases() {
  local t0=$SECONDS
  slurm_start
  case $? in
    0) ;;
    2) return ;;  # skipped: this machine cannot run slurmd
    *)
      fail slurm "the test's Slurm cluster did not start"
      return
      ;;
  esac
  pass "slurm: slurmctld and ${#HOSTS[@]} slurmd up" $((SECONDS - t0))
  slurm_equivalence slurm_torchrun "srun, one launcher per node" \
    srun --nodes=2 --ntasks-per-node=1 --time=10 "$TORCHRUN" --nproc_per_node 4 pretrain_gpt.py
  slurm_equivalence slurm_pmix "srun --mpi=pmix -n 8" \
    srun --nodes=2 --ntasks-per-node=4 --mpi=pmix --time=10 "$PRETRAIN"
  # Without PMIx each task would be a world of one: Open MPI itself stops them, naming PMIx.
  t0=$SECONDS
  on_host 0 timeout 60 srun --nodes=2 --ntasks=2 --time=10 "$PRETRAIN" $MODEL --train-iters 6 >"$WORK/slurm_nopmi.log" 2>&1
  if [ $? -ne 0 ] && grep -q 'direct launched using "srun"' "$WORK/slurm_nopmi.log" &&
    ! grep -q "lm loss" "$WORK/slurm_nopmi.log"; then
    pass "slurm without PMIx: the tasks stop before training, naming Slurm's PMIx support" $((SECONDS - t0))
  else
    fail slurm_nopmi "the singleton tasks were not stopped: $(tail -3 "$WORK/slurm_nopmi.log")"
  fi
}
