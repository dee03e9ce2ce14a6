#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for testing launches, time limits, requeues and lost
# nodes (docs/multi-host.md, "A Slurm lab"). It stands on the network lab (scripts/netlab.sh): one
# slurmd per lab host, each in its host's network namespace under its host's name, so that Slurm
# sees N nodes with addresses of their own; slurmctld on the lab's head node; munge with a key
# of the lab's own. Debian's slurmctld, slurmd, slurm-client and munge (scripts/setup.sh).
#
#   scripts/slurm-lab.sh up N [--cpus C]     N nodes NAME-h0 .. NAME-h(N-1) of C CPUs each
#                                            (default 4: they oversubscribe this machine's cores)
#                                            in the partition "lab", JobRequeue on
#   scripts/slurm-lab.sh down                stops the daemons and removes everything `up` made
#   scripts/slurm-lab.sh exec -- CMD...      runs CMD (sbatch, srun, squeue, scontrol, ...) on
#                                            the head node, talking to the lab's slurmctld
#   scripts/slurm-lab.sh fail NODE           takes node NODE (h1 or NAME-h1) away as a failure
#                                            would: its slurmd and everything running on it are
#                                            killed, and Slurm is told it is down
#   scripts/slurm-lab.sh env                 the SLURM_CONF line that points a shell at the lab
#   scripts/slurm-lab.sh status              sinfo of the lab
#   scripts/slurm-lab.sh check               exits 0 where a lab can be made (else says why)
# Option for every command: --name NAME (default: $SLURMLAB_NAME or slurmlab) picks the lab; the
# network lab underneath has the same name.
#
# Everything it makes is the lab's own: the network lab's namespaces (NAME-br, NAME-h*), and
# /run/slurmlab/NAME (slurm.conf, mpi.conf, the munge key and socket, state, spool, PMIx's
# directories and logs). The daemons
# run as root from that directory and listen only inside the lab's namespaces; nothing else on
# the machine is touched (no /etc/slurm, no system munge). `up` removes what it made when it
# fails; `down` also kills whatever the lab's jobs left running in its namespaces.
set -euo pipefail

script_dir=$(dirname "$(readlink -f "$0")")
netlab=$script_dir/netlab.sh
name=${SLURMLAB_NAME:-slurmlab}
subnet=10.77.0
head_address=$subnet.254
# How long `up` waits for its nodes while their daemons run (SLURM_LAB_READY_TIMEOUT_S).
ready_timeout_s=${SLURM_LAB_READY_TIMEOUT_S:-300}

die() {
  echo "slurm-lab: error: $*" >&2
  exit 1
}

state_dir() { echo "/run/slurmlab/$name"; }
conf() { echo "$(state_dir)/slurm.conf"; }

check_can_run() {
  [[ $(id -u) -eq 0 ]] ||
    die "needs root (network namespaces and the Slurm daemons): run it as root"
  local tool
  for tool in slurmctld slurmd sinfo munged mungekey; do
    command -v "$tool" >/dev/null ||
      die "'$tool' not found: apt-get install slurmctld slurmd slurm-client munge" \
        "(scripts/setup.sh)"
  done
  "$netlab" check >/dev/null || "$netlab" check
}

lab_nodes() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-h[0-9]+$" | sed "s/^${name}-//" |
    sort -t h -k 2 -n
}

# Runs argv in the lab host $1 (head, h0, ...) with the lab's SLURM_CONF.
in_lab() {
  local host=$1
  shift
  SLURM_CONF=$(conf) "$netlab" exec --name "$name" "$host" -- "$@"
}

write_conf() {
  local n=$1 cpus=$2 dir i
  dir=$(state_dir)
  cat <<EOF
# The Slurm lab '$name' (scripts/slurm-lab.sh): $n nodes on the network lab's hosts.
ClusterName=$name
SlurmctldHost=$name-head($head_address)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# cred_expire: also how long Slurm holds a requeued job back (default 120 s; a job started while
# a node still refuses the old credential fails). 10 s keeps the tests short.
AuthInfo=socket=$dir/munge.socket,cred_expire=10
CredType=cred/munge
# Debian's default: the sbatch template must choose --mpi=pmix itself.
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# The nodes' CPUs are declared, not this machine's 2 cores.
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
KillWait=5
InactiveLimit=0
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
MessageTimeout=10
StateSaveLocation=$dir/ctld
SlurmdSpoolDir=$dir/spool-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
EOF
  for ((i = 0; i < n; i++)); do
    echo "NodeName=$name-h$i NodeAddr=$subnet.$((i + 1)) CPUs=$cpus RealMemory=1024 State=UNKNOWN"
  done
  echo "PartitionName=lab Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
}

# Shell commands that mount, at /sys/fs/cgroup of the current mount namespace, the cgroup v1
# hierarchies the machine has (each with its own options, as the kernel requires for a second
# mount of a hierarchy), or its cgroup2 hierarchy.
cgroup_mounts() {
  local cmds="mount -t tmpfs -o mode=755 cgroup_root /sys/fs/cgroup" dir opts
  while read -r _ dir type opts _; do
    [[ $dir == /sys/fs/cgroup/* ]] || continue
    case $type in
      cgroup) opts=$(tr ',' '\n' <<<"$opts" | grep -vE '^(rw|ro|relatime|nosuid|nodev|noexec)$' |
        paste -sd, -) ;;
      cgroup2) opts="" ;;
      *) continue ;;
    esac
    cmds+=" && mkdir -p $dir && mount -t $type ${opts:+-o $opts} $type $dir"
  done </proc/self/mounts
  if ! grep -q " /sys/fs/cgroup/" /proc/self/mounts &&
    grep -q " /sys/fs/cgroup cgroup2 " /proc/self/mounts; then
    cmds="mount -t cgroup2 cgroup2 /sys/fs/cgroup"
  fi
  echo "$cmds"
}

# Kills a daemon by its pid file and waits for it (at most 10 s) to go.
stop_pid_file() {
  local file=$1 pid i
  [[ -f $file ]] || return 0
  pid=$(cat "$file" 2>/dev/null || true)
  if [[ $pid =~ ^[0-9]+$ ]] && kill "$pid" 2>/dev/null; then
    for ((i = 0; i < 100; i++)); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}

cmd_down() {
  local dir node ns pids
  dir=$(state_dir)
  for node in $(lab_nodes); do stop_pid_file "$dir/slurmd-$name-$node.pid"; done
  stop_pid_file "$dir/slurmctld.pid"
  stop_pid_file "$dir/munged.pid"
  # What the lab's jobs left (slurmstepd, tasks) dies with its namespaces' processes.
  for ns in "$name-br" $(lab_nodes | sed "s/^/$name-/"); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  done
  "$netlab" down --name "$name" >/dev/null 2>&1 || true
  rm -rf "$dir"
  rmdir /run/slurmlab 2>/dev/null || true
}

failed_up() {
  local log
  echo "slurm-lab: lab '$name' did not come up; its daemons' last words:" >&2
  for log in "$(state_dir)"/*.log; do
    [[ -f $log ]] && { echo "== $log" >&2; tail -n 8 "$log" >&2; }
  done
  cmd_down
}

# The lab's daemons that are still running, of those it started (by their pid files).
daemons_alive() {
  local file
  for file in "$(state_dir)"/*.pid; do
    [[ -f $file ]] && ! kill -0 "$(cat "$file")" 2>/dev/null && return 1
  done
  return 0
}

# Waits until every node is idle, as long as the daemons run (a slow machine only takes longer;
# ready_timeout_s bounds a lab that never settles); says what the logs say when they are not.
wait_ready() {
  local n=$1 idle start=$SECONDS
  while ((SECONDS - start < ready_timeout_s)); do
    idle=$(in_lab head sinfo --noheader --states=idle --format=%D 2>/dev/null |
      awk '{s += $1} END {print s + 0}')
    ((idle == n)) && return 0
    daemons_alive || { echo "slurm-lab: a daemon of the lab exited" >&2; break; }
    sleep 0.25
  done
  echo "slurm-lab: the nodes were not idle after $((SECONDS - start)) s:" >&2
  in_lab head sinfo -N >&2 || true
  return 1
}

cmd_up() {
  local n=$1 cpus=$2 dir i
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 32 ]] || die "up N: N must be 1 to 32 nodes"
  [[ $cpus =~ ^[0-9]+$ && $cpus -ge 1 ]] || die "--cpus must be a positive number of CPUs per node"
  check_can_run
  dir=$(state_dir)
  [[ ! -e $dir ]] ||
    die "lab '$name' is up already (or half made: scripts/slurm-lab.sh down --name $name)"
  # Whatever fails from here takes the lab down again, after showing what the daemons said.
  trap 'failed_up' EXIT
  "$netlab" up "$n" --name "$name" >/dev/null
  mkdir -p "$dir/ctld"
  mungekey --create --keyfile="$dir/munge.key" --force >/dev/null
  chmod 600 "$dir/munge.key"
  # --force: munged refuses to run as root otherwise.
  munged --force --key-file="$dir/munge.key" --socket="$dir/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge.seed"
  write_conf "$n" "$cpus" >"$(conf)"
  echo "PMIxCliTmpDirBase=$dir/pmix" >"$dir/mpi.conf"
  in_lab head slurmctld -f "$(conf)" -c -i
  for ((i = 0; i < n; i++)); do
    mkdir -p "$dir/spool-$name-h$i"
    # `ip netns exec` mounts a fresh /sys in the host's own mount namespace, without the cgroup
    # hierarchies that slurmd's cgroup plugin must find: mount the machine's there again (in that
    # namespace only). proctrack/linuxproc and task/none create nothing in them.
    # The nodes share this machine's /tmp, where PMIx would make the same directory for a job
    # step on every node: each node gets a private one of its own at the path mpi.conf names.
    mkdir -p "$dir/pmix" "$dir/pmix-$name-h$i"
    in_lab "h$i" sh -c "$(cgroup_mounts) && mount --bind '$dir/pmix-$name-h$i' '$dir/pmix' &&
      exec slurmd -f '$(conf)'"
  done
  wait_ready "$n"
  trap - EXIT
  echo "slurm-lab: lab '$name' up: $n nodes $name-h0..$((n - 1)) of $cpus CPUs, partition lab;" \
    "run Slurm's commands with: scripts/slurm-lab.sh exec -- sbatch ..."
}

cmd_fail() {
  local node=${1#"$name"-}
  [[ $node =~ ^h[0-9]+$ ]] && ip netns list | awk '{print $1}' | grep -qx "$name-$node" ||
    die "fail NODE: no node '$1' in lab '$name' (nodes: $(lab_nodes | tr '\n' ' '))"
  stop_pid_file "$(state_dir)/slurmd-$name-$node.pid"
  local pids
  pids=$(ip netns pids "$name-$node" 2>/dev/null || true)
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  # Without its slurmd the node would be found dead only after SlurmdTimeout (30 s).
  in_lab head scontrol update nodename="$name-$node" state=down reason="taken down by slurm-lab.sh"
  echo "slurm-lab: node $name-$node is down (its slurmd and processes killed)"
}

require_up() {
  [[ -f $(conf) ]] || die "lab '$name' is not up: scripts/slurm-lab.sh up N"
}

main() {
  local verb=${1:-}
  [[ -n $verb ]] || die "no command: up, down, exec, env, status, check (see the top of $0)"
  shift
  local -a rest=()
  local cpus=4
  while [[ $# -gt 0 ]]; do
    case $1 in
      --name) name=$2; shift 2 ;;
      --cpus) cpus=$2; shift 2 ;;
      --) rest+=("$@"); break ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  set -- "${rest[@]+"${rest[@]}"}"
  case $verb in
    up) [[ $# -eq 1 ]] || die "up N [--cpus C]"; cmd_up "$1" "$cpus" ;;
    down) [[ $(id -u) -eq 0 ]] || die "needs root"; cmd_down ;;
    check) check_can_run ;;
    env) require_up; echo "export SLURM_CONF=$(conf)" ;;
    fail) require_up; [[ $# -eq 1 ]] || die "fail NODE"; cmd_fail "$1" ;;
    status) require_up; in_lab head sinfo -N -l ;;
    exec)
      require_up
      [[ ${1:-} == -- ]] && shift
      [[ $# -gt 0 ]] || die "exec -- CMD: no command"
      in_lab head "$@"
      ;;
    *) die "unknown command '$verb': up, down, exec, fail, env, status, check" ;;
  esac
}

main "$@"
