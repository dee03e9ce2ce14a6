#!/usr/bin/env bash
# The network lab: several hosts on this one machine, for running autoloco across a real TCP
# network whose links are shaped to a given bandwidth (docs/multi-host.md).
#
#   scripts/netlab.sh up N [--rate RATE]     N hosts NAME-h0 .. NAME-h(N-1), 10.77.0.1 .. N, on a
#                                            bridge; each host's egress shaped to RATE by tbf
#   scripts/netlab.sh shape --rate RATE      changes the shaping of a lab that is up (none: off)
#   scripts/netlab.sh down                   removes everything `up` made
#   scripts/netlab.sh status                 hosts, addresses and shaping
#   scripts/netlab.sh exec HOST -- CMD...    runs CMD inside HOST (h0, NAME-h0, 0 or 10.77.0.1)
#   scripts/netlab.sh cut HOST               partitions HOST from the lab: its link goes down at
#                                            the bridge, so its packets vanish without a reset
#   scripts/netlab.sh mend HOST              brings a cut HOST's link back up
#   scripts/netlab.sh run --dcs G --ranks-per-dc R [--ranks-per-host K] [--no-tree-spawn]
#                        [--open-mpi-defaults] [--mpi ARG]... -- CMD...
#                                            mpirun from the lab's head node, dc d on host d
#                                            (K < R spreads a dc over several hosts;
#                                            --open-mpi-defaults leaves out the TCP tuning)
#   scripts/netlab.sh with N [--rate RATE] -- CMD...
#                                            a lab for one command, removed afterwards
#   scripts/netlab.sh check                  exits 0 where a lab can be made (else says why)
#   scripts/netlab.sh agent HOST CMD...      mpirun's launch agent (plm_rsh_agent); internal
# Options for every command: --name NAME (default: $NETLAB_NAME or allab) picks the lab, so that
# several labs can be up at once. RATE is tc's syntax: 50mbit, 800mbit, 1gbit.
#
# What it makes, all of it named after the lab: network namespaces NAME-br (the bridge and the
# head node 10.77.0.254, where mpirun runs) and NAME-h0 ...; veth pairs created directly inside
# them (no interface ever appears outside them); hosts files in /etc/netns/NAME-*/ so that the
# host names resolve inside the lab only (ip netns exec mounts them); /run/netlab/NAME. The
# addresses exist only inside these namespaces and nothing routes out of them. Each host also
# gets a UTS namespace of its own when a command runs in it, so that its hostname is its name.
# tbf shapes bandwidth only: the kernel here has no netem, so propagation latency is not added
# (autoloco's wan.latency_ms stays a model; see docs/multi-host.md).
set -euo pipefail

subnet=10.77.0
prefix=24
head_octet=254
script=$(readlink -f "$0")
name=${NETLAB_NAME:-allab}

die() {
  echo "netlab: error: $*" >&2
  exit 1
}

ns_bridge() { echo "$name-br"; }
ns_host() { echo "$name-h$1"; }
state_dir() { echo "/run/netlab/$name"; }

# Hosts of the lab that is up (from its namespaces, so that a half-made lab is found too).
lab_hosts() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-h[0-9]+$" | sed "s/^${name}-h//" |
    sort -n
}

lab_is_up() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$(ns_bridge)"; }

check_can_run() {
  [[ $(id -u) -eq 0 ]] || die "needs root (network namespaces, veth pairs and tc): run it as root"
  command -v ip >/dev/null || die "'ip' (iproute2) not found: apt-get install iproute2"
  command -v tc >/dev/null || die "'tc' (iproute2) not found: apt-get install iproute2"
  command -v unshare >/dev/null || die "'unshare' (util-linux) not found"
  [[ $name =~ ^[a-z][a-z0-9]{0,11}$ ]] ||
    die "lab name '$name' must be 1-12 lower-case letters and digits, starting with a letter"
  # A namespace that cannot be made or entered means no netns support (or a sandbox without it).
  local probe="$name-probe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    die "cannot create network namespaces here (ip netns add failed): the lab needs a kernel" \
      "with netns and CAP_SYS_ADMIN"
  fi
  ip netns del "$probe"
}

# Bits per second of a tc rate (50mbit, 1gbit, 800kbit).
rate_bits() {
  local r=$1 num unit
  [[ $r =~ ^([0-9]+(\.[0-9]+)?)([kmg]?)(bit|bps)$ ]] ||
    die "--rate '$r': give tc's bit rate, e.g. 50mbit, 800mbit, 1gbit"
  num=${BASH_REMATCH[1]}
  unit=${BASH_REMATCH[3]}
  local scale=1
  case $unit in k) scale=1000 ;; m) scale=1000000 ;; g) scale=1000000000 ;; esac
  [[ ${BASH_REMATCH[4]} == bps ]] && scale=$((scale * 8))
  awk -v n="$num" -v s="$scale" 'BEGIN { printf "%.0f", n * s }'
}

# tbf on a host's egress toward the bridge. The bucket holds 4 ms of the rate and at least one
# 64 KiB segmentation-offload packet (veth hands tbf whole GSO packets); the queue holds 100 ms.
shape_host() {
  local i=$1 rate=$2 ns
  ns=$(ns_host "$i")
  ip netns exec "$ns" tc qdisc del dev eth0 root 2>/dev/null || true
  [[ $rate == none ]] && return 0
  local bits burst
  bits=$(rate_bits "$rate")
  burst=$((bits / 8 / 250))
  ((burst < 65536 + 1514)) && burst=$((65536 + 1514))
  ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$bits" burst "$burst" latency 100ms ||
    die "tc could not shape $ns to $rate (is sch_tbf available?)"
}

hosts_file() {
  local n=$1 i
  echo "127.0.0.1 localhost"
  echo "$subnet.$head_octet $name-head"
  for ((i = 0; i < n; i++)); do
    echo "$subnet.$((i + 1)) $name-h$i"
  done
}

cmd_down() {
  local i
  for i in $(lab_hosts); do
    ip netns del "$(ns_host "$i")" 2>/dev/null || true
    rm -rf "/etc/netns/$(ns_host "$i")"
  done
  ip netns del "$(ns_bridge)" 2>/dev/null || true
  rm -rf "/etc/netns/$(ns_bridge)" "$(state_dir)"
}

cmd_up() {
  local n=$1 rate=$2 i
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 64 ]] || die "up N: N must be 1 to 64 hosts"
  [[ $rate == none ]] || rate_bits "$rate" >/dev/null
  check_can_run
  lab_is_up && die "lab '$name' is up already: 'scripts/netlab.sh down --name $name' first"
  # A failure (set -e, die) or a signal half-way removes what was made (`with` has its own
  # traps).
  if [[ -z ${in_with:-} ]]; then
    trap 'cmd_down' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
  fi
  local br
  br=$(ns_bridge)
  ip netns add "$br"
  ip -n "$br" link set lo up
  ip -n "$br" link add br0 type bridge
  ip -n "$br" addr add "$subnet.$head_octet/$prefix" dev br0
  ip -n "$br" link set br0 up
  for ((i = 0; i < n; i++)); do
    local ns
    ns=$(ns_host "$i")
    ip netns add "$ns"
    # Both ends are created inside the lab's namespaces: nothing appears in the root namespace.
    ip -n "$br" link add "h$i" type veth peer name eth0 netns "$ns"
    ip -n "$br" link set "h$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$((i + 1))/$prefix" dev eth0
    ip -n "$ns" link set eth0 up
    shape_host "$i" "$rate"
  done
  for ns in "$br" $(for ((i = 0; i < n; i++)); do ns_host "$i"; done); do
    mkdir -p "/etc/netns/$ns"
    hosts_file "$n" >"/etc/netns/$ns/hosts"
  done
  mkdir -p "$(state_dir)"
  echo "$rate" >"$(state_dir)/rate"
  [[ -n ${in_with:-} ]] || trap - EXIT INT TERM
  local shaped="egress shaped to $rate"
  [[ $rate == none ]] && shaped="unshaped"
  echo "netlab: lab '$name' up: $n hosts ${name}-h0..$((n - 1)) ($subnet.1..$n)," \
    "head $subnet.$head_octet, $shaped"
}

require_up() {
  lab_is_up || die "no lab '$name' is up: 'scripts/netlab.sh up N --rate RATE --name $name' first"
}

cmd_shape() {
  local rate=$1 i
  check_can_run
  require_up
  for i in $(lab_hosts); do shape_host "$i" "$rate"; done
  echo "$rate" >"$(state_dir)/rate"
}

cmd_status() {
  require_up
  echo "lab '$name': egress $(cat "$(state_dir)/rate" 2>/dev/null || echo '?')"
  local i
  for i in $(lab_hosts); do
    echo "  $name-h$i $subnet.$((i + 1)) $(ip netns exec "$(ns_host "$i")" tc qdisc show dev eth0 | head -1)"
  done
}

# The namespace of a host given as index, short name, full name or address.
host_ns() {
  local h=$1 i=""
  case $h in
    "$name-head" | head | "$subnet.$head_octet") ns_bridge; return ;;
    "$name"-h[0-9]*) i=${h#"$name"-h} ;;
    h[0-9]*) i=${h#h} ;;
    "$subnet".[0-9]*) i=$((${h##*.} - 1)) ;;
    [0-9]*) i=$h ;;
  esac
  [[ $i =~ ^[0-9]+$ ]] && ip netns list | awk '{print $1}' | grep -qx "$(ns_host "$i")" ||
    die "no host '$h' in lab '$name' (hosts: $(lab_hosts | sed "s/^/$name-h/" | tr '\n' ' '))"
  ns_host "$i"
}

# Runs argv inside the namespace with the host's name in a UTS namespace of its own.
in_host() {
  local ns=$1
  shift
  local host=${ns/%-br/-head}
  exec ip netns exec "$ns" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

# A partition: the bridge's end of the host's link goes down. Nothing is refused or reset; the
# host's connections simply stop carrying bytes, as when a site's uplink fails.
cmd_link() {
  local state=$1 ns
  check_can_run
  require_up
  ns=$(host_ns "$2")
  [[ $ns != "$(ns_bridge)" ]] || die "the head node has no link of its own to cut"
  ip -n "$(ns_bridge)" link set "h${ns#"$name"-h}" "$state"
}

cmd_exec() {
  local ns
  ns=$(host_ns "$1")
  shift
  [[ ${1:-} == -- ]] && shift
  [[ $# -gt 0 ]] || die "exec HOST -- CMD: no command"
  in_host "$ns" "$@"
}

# Open MPI's rsh launcher calls AGENT HOST COMMAND..., COMMAND being words for a remote shell
# (as ssh would join them); tree spawn calls it again from inside a host, which works the same.
cmd_agent() {
  local ns
  ns=$(host_ns "$1")
  shift
  in_host "$ns" sh -c "$*"
}

cmd_run() {
  local dcs="" rpd="" rph="" tree=1 tuned=1
  local -a mpi_extra=()
  while [[ $# -gt 0 ]]; do
    case $1 in
      --dcs) dcs=$2; shift 2 ;;
      --ranks-per-dc) rpd=$2; shift 2 ;;
      --ranks-per-host) rph=$2; shift 2 ;;
      --no-tree-spawn) tree=0; shift ;;
      --open-mpi-defaults) tuned=0; shift ;;
      --mpi) mpi_extra+=("$2"); shift 2 ;;
      --) shift; break ;;
      *) die "run: unknown option '$1' (see the top of scripts/netlab.sh)" ;;
    esac
  done
  [[ $dcs =~ ^[1-9][0-9]*$ ]] || die "run: --dcs G is required (a positive integer)"
  [[ $rpd =~ ^[1-9][0-9]*$ ]] || die "run: --ranks-per-dc R is required (a positive integer)"
  rph=${rph:-$rpd}
  [[ $rph =~ ^[1-9][0-9]*$ ]] || die "run: --ranks-per-host must be a positive integer"
  [[ $# -gt 0 ]] || die "run: no command after --"
  require_up
  local np=$((dcs * rpd)) nhosts i
  nhosts=$(((np + rph - 1) / rph))
  local have
  have=$(lab_hosts | wc -l)
  ((nhosts <= have)) ||
    die "run: $dcs dcs of $rpd ranks at $rph per host need $nhosts hosts; lab '$name' has $have"
  local hostfile
  # One per run, so that runs in the same lab do not race (removed with the lab).
  hostfile="$(state_dir)/hostfile.$$"
  for ((i = 0; i < nhosts; i++)); do echo "$name-h$i slots=$rph"; done >"$hostfile"
  local cmd=(mpirun --hostfile "$hostfile" -np "$np" --map-by slot --bind-to none
    --mca plm_rsh_agent "$script agent"
    --mca pml ob1 --mca btl tcp,self
    --mca btl_tcp_if_include "$subnet.0/$prefix" --mca oob_tcp_if_include "$subnet.0/$prefix"
    # The lab's hosts share this machine's cores: a rank that waits yields its core.
    --mca mpi_yield_when_idle 1
    -x OMP_NUM_THREADS -x NETLAB_NAME)
  if ((tuned)); then
    cmd+=(
      # Large messages as pipelined sends, not the RDMA-put protocol, whose control messages
      # queue behind the opposite direction's data (docs/multi-host.md; measured against the
      # defaults in docs/results.md).
      --mca btl_tcp_flags send,inplace,need-ack,need-csum,hetero-rdma
      # Messages up to 4 MiB eagerly: the rendezvous handshake of a larger message waits in the
      # link's queue behind the other direction's data at every ring step.
      --mca btl_tcp_eager_limit 4194304 --mca btl_tcp_rndv_eager_limit 4194304
      --mca btl_tcp_max_send_size 4194304)
  fi
  ((tree)) || cmd+=(--mca plm_rsh_no_tree_spawn 1)
  cmd+=("${mpi_extra[@]}" "$@")
  export NETLAB_NAME=$name OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  in_host "$(ns_bridge)" "${cmd[@]}"
}

cmd_with() {
  local n=$1 rate=$2
  shift 2
  [[ ${1:-} == -- ]] && shift
  [[ $# -gt 0 ]] || die "with N -- CMD: no command"
  # Removed however this ends: an error, the command's end, or a signal at any point (before
  # the lab is complete too). The command runs in the background so that a signal reaches this
  # shell at once (bash runs traps only between foreground commands); it is passed on to the
  # command and waited for before the lab goes.
  child=""
  trap 'cmd_down' EXIT
  trap 'forward TERM 143' TERM
  trap 'forward INT 130' INT
  in_with=1 cmd_up "$n" "$rate"
  NETLAB_NAME=$name "$@" &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  return "$rc"
}

forward() {
  if [[ -n $child ]]; then
    kill -"$1" "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  exit "$2"
}

main() {
  local verb=${1:-}
  [[ -n $verb ]] || die "no command: up, down, status, shape, exec, cut, mend, run, with (see the top of $0)"
  shift
  # The agent's words are Open MPI's, passed on untouched.
  if [[ $verb == agent ]]; then
    [[ $# -ge 2 ]] || die "agent HOST CMD"
    cmd_agent "$@"
  fi
  local -a rest=()
  local rate=none
  # --name and --rate may come anywhere before a '--'.
  while [[ $# -gt 0 ]]; do
    case $1 in
      --name) name=$2; shift 2 ;;
      --rate) rate=$2; shift 2 ;;
      --) rest+=("$@"); break ;;
      *) rest+=("$1"); shift ;;
    esac
  done
  set -- "${rest[@]+"${rest[@]}"}"
  case $verb in
    up) [[ $# -eq 1 ]] || die "up N [--rate RATE]"; cmd_up "$1" "$rate" ;;
    down) check_can_run; cmd_down ;;
    check) check_can_run ;;
    status) cmd_status ;;
    shape) cmd_shape "$rate" ;;
    exec) [[ $# -ge 1 ]] || die "exec HOST -- CMD"; cmd_exec "$@" ;;
    cut) [[ $# -eq 1 ]] || die "cut HOST"; cmd_link down "$1" ;;
    mend) [[ $# -eq 1 ]] || die "mend HOST"; cmd_link up "$1" ;;
    run) cmd_run "$@" ;;
    with) [[ $# -ge 2 ]] || die "with N [--rate RATE] -- CMD"; cmd_with "$1" "$rate" "${@:2}" ;;
    *) die "unknown command '$verb': up, down, status, shape, exec, run, with, check" ;;
  esac
}

main "$@"
