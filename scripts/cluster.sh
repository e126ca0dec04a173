#!/usr/bin/env bash
# An emulated cluster on one machine: K nodes, each in its own Linux network namespace,
# joined by a bridge, with shaped links, Open MPI across them and a multi-node Slurm.
#
#   scripts/cluster.sh up [--nodes K] [--bandwidth RATE] [--latency TIME] [--no-slurm]
#                         [--subnet A.B.C] [--slurmd-timeout S]
#                                              create the cluster (idempotent: an identical
#                                              cluster that is up is checked and re-shaped)
#   scripts/cluster.sh down                   stop everything and delete the namespaces
#   scripts/cluster.sh status                 nodes, addresses, shaping, daemons, processes
#   scripts/cluster.sh shape [--bandwidth RATE] [--latency TIME] [--node NODE]
#                                              change the link shaping without a restart
#   scripts/cluster.sh link NODE up|down       bring one node's link up or down (faults)
#   scripts/cluster.sh slurmd NODE kill|start  SIGKILL one node's slurmd, or start it again
#                                              (faults; its running job steps live on)
#   scripts/cluster.sh exec NODE CMD...        run CMD on NODE (its network, host name,
#                                              /etc/hosts), e.g. sbatch or sinfo on node0
#   scripts/cluster.sh mpirun MPIRUN-ARGS...   run Open MPI's mpirun on node0 with the
#                                              cluster's hostfile, launch agent, TCP only
#   scripts/cluster.sh env                     the environment of the cluster (hostfile,
#                                              SLURM_CONF, OMPI_MCA_*), as export lines
#   scripts/cluster.sh counters                per node: tx_bytes rx_bytes of its link
#
# Global option (before the command), or the environment variable STARCHOL_CLUSTER:
#   --name NAME   several clusters may live side by side (default "starchol"). The
#                 namespaces are NAME-sw (the switch: a bridge) and NAME-n0 .. NAME-n<K-1>;
#                 the state (configuration, hostfile, Slurm, logs) is in
#                 /run/starchol-cluster/NAME.
#
# Layout. Node i has the address A.B.C.(i+1)/24 (default subnet 10.231.0) on its "eth0",
# one end of a veth pair whose other end "p<i>" is a port of the bridge in the switch
# namespace. No address is added to the machine's own namespace and no route leads out:
# all traffic stays on the addresses made here. Host names node0 .. node<K-1> resolve on
# every node (a private /etc/hosts bind-mounted in each node's mount namespace, where the
# node's UTS namespace also carries its host name).
#
# Shaping (tc). --bandwidth RATE (tc units: 200mbit, 1gbit, 50mbit; "none" = unshaped)
# limits each node's link in each direction (token bucket on the node's eth0 for what it
# sends, and on its switch port for what it receives: full duplex). --latency TIME (tc
# units: 100us, 1ms; "none") adds a one-way delay to what each node sends; it needs the
# kernel's sch_netem, and on a kernel without it the latency is NOT emulated (a warning
# says so, and `status` shows "latency: not emulated").
# The token bucket holds 1 ms of the rate (at least 16 KiB): a link that has been idle
# passes at most that much faster than its rate, as a real NIC (a 10 ms bucket let an
# idle 100 mbit/s link pass a whole 128 KiB tile at once; docs/cluster.md).
#
# Open MPI. `cluster.sh mpirun -np P PROGRAM...` runs mpirun inside node0 with a hostfile
# of the nodes (1 slot each, --map-by node: rank i on node i; both are defaults, which your
# own --hostfile, --host or --map-by replace), a launch agent that enters
# each node's namespaces (plm_rsh_agent), and only TCP between processes (pml ob1,
# btl tcp,self on the cluster's /24, oob on the same /24). Lost daemons are detected by
# TCP keepalive within about 10 s, and then mpirun ends the job. The nodes share this
# machine's cores: ranks are not bound (hwloc_base_binding_policy=none; each node's
# mpirun daemon would bind its rank to core 0, so every node's rank shared core 0) and
# StarPU does not pin its workers (STARPU_WORKERS_NOBIND=1); the kernel places them.
#
# Slurm (unless --no-slurm). munged runs in the machine's namespace (its socket is a file,
# reachable from every node), slurmctld on node0, one slurmd per node in that node's
# namespaces with its own spool, pid file and TmpFS. --slurmd-timeout S is slurm.conf's
# SlurmdTimeout (default 30): how long slurmctld waits for a silent node before it marks
# it DOWN and ends (or requeues) its jobs. Client commands must run on a node:
# `cluster.sh exec node0 sbatch job.sh`. Jobs inherit OMPI_MCA_* from `cluster.sh exec`
# (TCP only on the cluster's /24), so scripts written by `starchol slurm` run unchanged.
#
# Needs root (namespaces, tc, mounts, slurmd). Installs iproute2, util-linux, Open MPI
# and Slurm (Debian packages) with apt-get when missing. Exit status 77 = cannot run here
# (not root, no namespaces, apt-get cannot install). If `up` fails, everything it made is
# torn down.
#
# Environment: CLUSTER_TIMEOUT  seconds to wait for the Slurm nodes to become idle (60)
set -euo pipefail

SCRIPT=$(readlink -f "${BASH_SOURCE[0]}")
BASE=/run/starchol-cluster
PACKAGES=(iproute2 util-linux openmpi-bin)
SLURM_PACKAGES=(slurmctld slurmd slurm-client munge)
TIMEOUT=${CLUSTER_TIMEOUT:-60}
NAME=${STARCHOL_CLUSTER:-starchol}

say() { printf 'cluster: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
cannot() { say "cannot run here: $*"; exit 77; }

source "$(dirname "$SCRIPT")/usage.sh"
usage() {  # usage WHAT: a wrong command line, one line on stderr, exit 2
    say "error: $1; usage: $0 [--name NAME] up|down|status|shape|link|slurmd|exec|mpirun|env|counters [ARGS] (see --help)"
    exit 2
}

# --- names ----------------------------------------------------------------------------
set_names() {
    [[ $NAME =~ ^[A-Za-z][A-Za-z0-9_-]{0,30}$ ]] \
        || die "--name $NAME: use a letter then letters, digits, _ or - (31 at most)"
    STATE=$BASE/$NAME
    SW=$NAME-sw
}
node_ns() { printf '%s-n%s\n' "$NAME" "$1"; }

# read the state of a cluster that is up: NODES, SUBNET, SLURM, BANDWIDTH, LATENCY
load_state() {
    [ -f "$STATE/cluster.env" ] || die "cluster $NAME is not up (no $STATE/cluster.env); run: $0 up"
    # shellcheck disable=SC1091
    . "$STATE/cluster.env"
}

node_index() {   # node0 | 0 | A.B.C.1 -> 0
    local host=$1
    case "$host" in
        node[0-9]*) host=${host#node} ;;
        "$SUBNET".*) host=$(( ${host##*.} - 1 )) ;;
    esac
    [[ $host =~ ^[0-9]+$ ]] && [ "$host" -lt "$NODES" ] \
        || die "no node $1 in cluster $NAME (nodes node0..node$((NODES - 1)))"
    printf '%s\n' "$host"
}

# run a command in node I's namespaces: its network, its own UTS (host name nodeI) and
# mount namespace (/etc/hosts of the cluster; with TMPDIR_BIND, a private TmpFS for Slurm)
in_node() {
    local i=$1
    shift
    nsenter --net="/run/netns/$(node_ns "$i")" -- \
        unshare --uts --mount --propagation private -- \
        /bin/sh -c 'hostname "$1" && mount --bind "$2" /etc/hosts || exit 1
                    if [ -n "$3" ]; then mount --bind "$3" "$4" || exit 1; fi
                    shift 4; exec "$@"' \
        in-node "node$i" "$STATE/hosts" "${BIND_SRC:-}" "${BIND_DST:-}" "$@"
}

. "$(dirname "$SCRIPT")/slurm-common.sh"

# --- helpers --------------------------------------------------------------------------
ns_exists() { [ -e "/run/netns/$1" ]; }

# pids of the processes whose network namespace is NS
ns_pids() { ns_exists "$1" && ip netns pids "$1" 2>/dev/null || true; }

# the identity (nsfs inode) of the network namespace named NS
ns_id() { stat -L -c %i "/run/netns/$1"; }

# pids of every process in one of the cluster's network namespaces: those still named,
# and those whose name was deleted (`ip netns del` on a node with processes left in it
# removes the name only), found by the namespace ids recorded by `up` in netns.ids
cluster_pids() {
    local ns ids
    ids=$({ cat "$STATE/netns.ids" 2>/dev/null || true
            for ns in "$SW" $(ip netns list 2>/dev/null | awk '{print $1}' \
                              | grep -E "^$NAME-n[0-9]+$"); do
                ns_exists "$ns" && ns_id "$ns"
            done; } | sort -u | tr '\n' ' ')
    [ -n "${ids// /}" ] || return 0
    find /proc/[0-9]*/ns/net -maxdepth 0 -printf '%h %l\n' 2>/dev/null \
        | awk -v ids="$ids" 'BEGIN { n = split(ids, a, " "); for (i = 1; i <= n; i++) want["net:[" a[i] "]"] = 1 }
                             $2 in want { split($1, p, "/"); print p[3] }' \
        | grep -vx "$$" || true
}

# --- shaping --------------------------------------------------------------------------
rate_ok() { [[ $1 == none || $1 =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]]; }
time_ok() { [[ $1 == none || $1 =~ ^[0-9]+(\.[0-9]+)?(us|ms|s)$ ]]; }

# rate text -> bytes per second (tc units: bit = bits/s, bps = bytes/s)
rate_bytes() {
    local v=$1 num unit mult=1
    num=$(printf '%s' "$v" | sed -E 's/^([0-9.]+).*/\1/')
    unit=$(printf '%s' "$v" | sed -E 's/^[0-9.]+//')
    case "$unit" in
        kbit) mult=125 ;; mbit) mult=125000 ;; gbit) mult=125000000 ;; tbit) mult=125000000000 ;;
        bit) mult=0.125 ;; bps) mult=1 ;; kbps) mult=1000 ;; mbps) mult=1000000 ;;
        gbps) mult=1000000000 ;; tbps) mult=1000000000000 ;;
    esac
    awk -v n="$num" -v m="$mult" 'BEGIN { printf "%d\n", n * m }'
}

have_netem() {
    # a scratch device in the switch namespace tells whether the kernel has sch_netem
    ip -n "$SW" link add netemprobe type dummy 2>/dev/null \
        || ip -n "$SW" link add netemprobe type veth peer name netemprobe1 2>/dev/null \
        || return 1
    local ok=1
    ip netns exec "$SW" tc qdisc add dev netemprobe root netem delay 1us 2>/dev/null && ok=0
    ip -n "$SW" link del netemprobe 2>/dev/null || true
    return $ok
}

# tbf_burst BANDWIDTH: the token bucket's size in bytes: 1 ms at the rate, at least 16 KiB
tbf_burst() {
    local burst=$(( $(rate_bytes "$1") / 1000 ))
    [ "$burst" -ge 16384 ] || burst=16384
    echo "$burst"
}

# shape_dev NS DEV BANDWIDTH DELAY: root qdisc of DEV in NS (delay "none" = no netem)
shape_dev() {
    local ns=$1 dev=$2 bw=$3 delay=$4
    ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
    if [ "$delay" != none ]; then
        ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: netem delay "$delay" limit 100000
        if [ "$bw" != none ]; then
            ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: \
                tbf rate "$bw" burst "$(tbf_burst "$bw")" latency 200ms
        fi
    elif [ "$bw" != none ]; then
        ip netns exec "$ns" tc qdisc add dev "$dev" root tbf rate "$bw" burst "$(tbf_burst "$bw")" \
            latency 200ms
    fi
}

# apply BANDWIDTH/LATENCY to the nodes given (default all)
apply_shaping() {
    local i delay=none
    if [ "$LATENCY" != none ]; then
        if have_netem; then
            delay=$LATENCY
            LATENCY_EMULATED=yes
        else
            LATENCY_EMULATED=no
            say "warning: this kernel has no sch_netem: latency $LATENCY is NOT emulated" \
                "(bandwidth is)"
        fi
    else
        LATENCY_EMULATED=none
    fi
    for i in "$@"; do
        shape_dev "$(node_ns "$i")" eth0 "$BANDWIDTH" "$delay"   # what node i sends
        shape_dev "$SW" "p$i" "$BANDWIDTH" none                   # what node i receives
    done
}

write_state() {
    local tmp="$STATE/cluster.env.tmp"
    {
        printf 'NODES=%s\nSUBNET=%s\nSLURM=%s\nSLURMD_TIMEOUT=%s\n' "$NODES" "$SUBNET" "$SLURM" \
        "$SLURMD_TIMEOUT"
        printf 'BANDWIDTH=%s\nLATENCY=%s\nLATENCY_EMULATED=%s\n' \
            "$BANDWIDTH" "$LATENCY" "$LATENCY_EMULATED"
    } >"$tmp"
    mv "$tmp" "$STATE/cluster.env"
}

# --- up -------------------------------------------------------------------------------
make_network() {
    local i ns addr
    ip netns add "$SW"
    ip netns exec "$SW" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
    ip -n "$SW" link set lo up
    ip -n "$SW" link add br0 type bridge
    ip -n "$SW" link set br0 up
    for ((i = 0; i < NODES; i++)); do
        ns=$(node_ns "$i")
        addr=$SUBNET.$((i + 1))
        ip netns add "$ns"
        # no IPv6 (no router solicitations in the byte counters)
        ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 \
            net.ipv6.conf.default.disable_ipv6=1
        ip -n "$SW" link add "p$i" type veth peer name eth0 netns "$ns"
        ip -n "$SW" link set "p$i" master br0 up
        ip -n "$ns" link set lo up
        ip -n "$ns" addr add "$addr/24" dev eth0
        ip -n "$ns" link set eth0 up
    done
    # the namespaces' ids, for `down` to find processes in a node whose name was deleted
    for ns in "$SW" $(for ((i = 0; i < NODES; i++)); do node_ns "$i"; done); do ns_id "$ns"; done \
        >"$STATE/netns.ids"
}

write_files() {
    local i
    {
        printf '127.0.0.1\tlocalhost\n'
        for ((i = 0; i < NODES; i++)); do printf '%s.%s\tnode%s\n' "$SUBNET" $((i + 1)) "$i"; done
    } >"$STATE/hosts"
    chmod 644 "$STATE/hosts"
    for ((i = 0; i < NODES; i++)); do printf 'node%s slots=1\n' "$i"; done >"$STATE/hostfile"
    # the launch agent of Open MPI: called as AGENT HOST CMD... (like ssh)
    cat >"$STATE/agent" <<EOF
#!/bin/sh
# Open MPI launch agent of cluster $NAME (plm_rsh_agent): runs CMD on HOST's namespaces.
exec env STARCHOL_CLUSTER=$NAME bash $SCRIPT agent "\$@"
EOF
    chmod 755 "$STATE/agent"
    cat >"$STATE/mpi.env" <<EOF
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_pml=ob1
OMPI_MCA_btl=tcp,self
OMPI_MCA_btl_tcp_if_include=$SUBNET.0/24
OMPI_MCA_oob_tcp_if_include=$SUBNET.0/24
OMPI_MCA_oob_tcp_keepalive_time=2
OMPI_MCA_oob_tcp_keepalive_intvl=1
OMPI_MCA_oob_tcp_keepalive_probes=5
OMPI_MCA_plm_rsh_agent=$STATE/agent
OMPI_MCA_plm_rsh_no_tree_spawn=1
OMPI_MCA_orte_default_hostfile=$STATE/hostfile
OMPI_MCA_rmaps_base_mapping_policy=node
OMPI_MCA_hwloc_base_binding_policy=none
STARPU_WORKERS_NOBIND=1
EOF
}

slurm_conf() {
    local node_line i
    node_line=$(slurm_node_hardware)
    local d=$STATE/slurm
    cat <<EOF
# Written by scripts/cluster.sh: Slurm of the emulated cluster $NAME.
ClusterName=$NAME
SlurmctldHost=node0($SUBNET.1)
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
# each node bind-mounts its own folder here (PMIx wants a per-node TmpFS)
TmpFS=$d/tmp
$(slurm_conf_common "$d/munge/munge.socket")
SlurmdTimeout=$SLURMD_TIMEOUT
EOF
    for ((i = 0; i < NODES; i++)); do
        printf 'NodeName=node%s NodeAddr=%s.%s%s State=UNKNOWN\n' "$i" "$SUBNET" $((i + 1)) "$node_line"
    done
    printf 'PartitionName=cluster Nodes=node[0-%s] Default=YES MaxTime=INFINITE State=UP\n' \
        $((NODES - 1))
}

start_slurm() {
    local d=$STATE/slurm i
    for cmd in munged slurmctld slurmd sinfo runuser; do
        command -v "$cmd" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
        command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found after installing ${SLURM_PACKAGES[*]}"
    done
    id munge >/dev/null 2>&1 || die "user munge does not exist (the munge package creates it)"
    mkdir -p "$d"/{state,spool,log,run,tmp}
    chmod 755 "$BASE" "$STATE" "$d"
    start_munged "$d/munge"
    slurm_conf >"$d/slurm.conf"
    export SLURM_CONF=$d/slurm.conf
    in_node 0 slurmctld -f "$SLURM_CONF" || die "slurmctld did not start"
    wait_for_file "$d/run/slurmctld.pid" || die "slurmctld wrote no pid file"
    for ((i = 0; i < NODES; i++)); do
        start_slurmd "$i"
    done
    for ((i = 0; i < NODES; i++)); do
        wait_for_file "$d/run/slurmd-node$i.pid" || die "slurmd of node$i wrote no pid file"
    done
    wait_slurm_idle
}

start_slurmd() {   # start_slurmd I: slurmd of node I in its namespaces, with its own TmpFS
    local i=$1 d=$STATE/slurm
    mkdir -p "$d/tmp-node$i" "$d/spool/node$i"
    BIND_SRC=$d/tmp-node$i BIND_DST=$d/tmp in_node "$i" slurmd -f "$d/slurm.conf" -N "node$i" \
        || die "slurmd of node$i did not start"
}

wait_slurm_idle() {
    local deadline=$((SECONDS + TIMEOUT)) states
    while :; do
        states=$(in_node 0 sinfo -h -N -o '%N %T' 2>/dev/null || true)
        if [ -n "$states" ] && ! printf '%s\n' "$states" | grep -qv ' idle$'; then
            [ "$(printf '%s\n' "$states" | wc -l)" -eq "$NODES" ] && return 0
        fi
        if [ $SECONDS -ge $deadline ]; then
            die "Slurm nodes not idle after ${TIMEOUT}s: $(echo ${states:-no answer from slurmctld})"
        fi
        live_pid "$d/run/slurmctld.pid" slurmctld >/dev/null || die "slurmctld exited"
        sleep 0.3
    done
}

healthy() {   # the cluster described by cluster.env is complete and its daemons run
    local i d=$STATE/slurm
    ns_exists "$SW" || return 1
    for ((i = 0; i < NODES; i++)); do
        ns_exists "$(node_ns "$i")" || return 1
        ip -n "$(node_ns "$i")" addr show dev eth0 2>/dev/null | grep -q "inet $SUBNET.$((i + 1))/" \
            || return 1
    done
    if [ "$SLURM" = yes ]; then
        live_pid "$d/munge/munged.pid" munged >/dev/null || return 1
        live_pid "$d/run/slurmctld.pid" slurmctld >/dev/null || return 1
        for ((i = 0; i < NODES; i++)); do
            live_pid "$d/run/slurmd-node$i.pid" slurmd >/dev/null || return 1
        done
    fi
}

up() {
    local want_nodes=4 want_bw=none want_lat=none want_subnet=10.231.0 want_slurm=yes
    local want_timeout=30
    while [ $# -gt 0 ]; do
        case "$1" in
            --nodes) want_nodes=${2:?--nodes K}; shift 2 ;;
            --bandwidth) want_bw=${2:?--bandwidth RATE}; shift 2 ;;
            --latency) want_lat=${2:?--latency TIME}; shift 2 ;;
            --subnet) want_subnet=${2:?--subnet A.B.C}; shift 2 ;;
            --no-slurm) want_slurm=no; shift ;;
            --slurmd-timeout) want_timeout=${2:?--slurmd-timeout S}; shift 2 ;;
            *) die "up: unknown option $1 (see $0 --help)" ;;
        esac
    done
    [[ $want_nodes =~ ^[0-9]+$ ]] && [ "$want_nodes" -ge 2 ] && [ "$want_nodes" -le 250 ] \
        || die "--nodes must be an integer from 2 to 250, got $want_nodes"
    rate_ok "$want_bw" || die "--bandwidth $want_bw: give a tc rate such as 200mbit, 1gbit or none"
    time_ok "$want_lat" || die "--latency $want_lat: give a tc time such as 100us, 2ms or none"
    [[ $want_subnet =~ ^10\.([0-9]{1,3})\.([0-9]{1,3})$ ]] && [ "${BASH_REMATCH[1]}" -le 255 ] \
        && [ "${BASH_REMATCH[2]}" -le 255 ] \
        || die "--subnet $want_subnet: give the first three numbers of a private 10.x.y.0/24"
    [[ $want_timeout =~ ^[0-9]+$ ]] && [ "$want_timeout" -ge 3 ] && [ "$want_timeout" -le 3600 ] \
        || die "--slurmd-timeout must be a number of seconds from 3 to 3600, got $want_timeout"
    [ "$(id -u)" -eq 0 ] || cannot "must run as root (network namespaces, tc, mounts, slurmd)"

    if [ -f "$STATE/cluster.env" ]; then
        load_state
        SLURMD_TIMEOUT=${SLURMD_TIMEOUT:-30}
        if [ "$NODES" != "$want_nodes" ] || [ "$SUBNET" != "$want_subnet" ] \
                || [ "$SLURM" != "$want_slurm" ] || [ "$SLURMD_TIMEOUT" != "$want_timeout" ]; then
            die "cluster $NAME is up with $NODES nodes on $SUBNET.0/24 (Slurm: $SLURM," \
                "SlurmdTimeout $SLURMD_TIMEOUT s); run" \
                "'$0 down' first to make a different one"
        fi
        if healthy; then
            BANDWIDTH=$want_bw LATENCY=$want_lat
            apply_shaping $(seq 0 $((NODES - 1)))
            write_state
            say "cluster $NAME already up ($NODES nodes); shaping: bandwidth $BANDWIDTH," \
                "latency $LATENCY"
            return 0
        fi
        say "cluster $NAME is incomplete; tearing it down and making it again"
        teardown
    fi
    for ns in "$SW" $(for i in $(seq 0 $((want_nodes - 1))); do node_ns "$i"; done); do
        ns_exists "$ns" && die "namespace $ns exists but cluster $NAME has no state in" \
            "$STATE; remove it (ip netns del $ns) or choose another --name"
    done

    install_packages "$BASE/apt.log" "${PACKAGES[@]}"
    [ "$want_slurm" = yes ] && install_packages "$BASE/apt.log" "${SLURM_PACKAGES[@]}"
    PATH=$PATH:/usr/sbin:/sbin

    NODES=$want_nodes SUBNET=$want_subnet SLURM=$want_slurm SLURMD_TIMEOUT=$want_timeout
    BANDWIDTH=$want_bw LATENCY=$want_lat LATENCY_EMULATED=none
    mkdir -p "$STATE"
    chmod 755 "$BASE" "$STATE"
    # from here on, a failure tears down whatever was made
    trap 'rc=$?; if [ $rc -ne 0 ]; then show_logs; say "up failed; tearing down"; teardown; fi' EXIT
    ip netns add "$NAME-probe" 2>/dev/null && ip netns del "$NAME-probe" \
        || cannot "cannot create network namespaces (ip netns add failed)"
    write_state
    make_network
    write_files
    apply_shaping $(seq 0 $((NODES - 1)))
    write_state
    [ "$SLURM" = yes ] && start_slurm
    trap - EXIT
    say "cluster $NAME up: $NODES nodes (node0..node$((NODES - 1)) = $SUBNET.1..$SUBNET.$NODES)," \
        "bandwidth $BANDWIDTH, latency $LATENCY$([ "$LATENCY_EMULATED" = no ] && echo ' (not emulated)'), Slurm: $SLURM"
    say "run MPI with: $0 mpirun -np $NODES PROGRAM ARGS..."
}

show_logs() { show_log_tails 10 "$STATE"/slurm/log/*.log "$STATE"/slurm/munge/munged.log; }

# --- down -----------------------------------------------------------------------------
kill_ns_processes() {   # TERM, then KILL, every process left in the cluster's namespaces
    local pids i
    pids=$(cluster_pids)
    [ -z "$pids" ] && return 0
    say "stopping processes left on the nodes: $(echo $pids)"
    kill -TERM $pids 2>/dev/null || true
    for i in $(seq 1 50); do
        [ -z "$(cluster_pids)" ] && return 0
        sleep 0.1
    done
    pids=$(cluster_pids)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null || true
    sleep 0.2
}

teardown() {
    local d=$STATE/slurm ns
    if [ -f "$d/slurm.conf" ] && live_pid "$d/run/slurmctld.pid" slurmctld >/dev/null; then
        export SLURM_CONF=$d/slurm.conf
        local jobs
        jobs=$(timeout 10 nsenter --net="/run/netns/$(node_ns 0)" squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            say "cancelling jobs left: $(echo $jobs)"
            timeout 10 nsenter --net="/run/netns/$(node_ns 0)" scancel $jobs 2>/dev/null || true
        fi
    fi
    # SIGTERM to every slurmd and slurmctld at once, then wait for them all
    local f pid pids="" alive
    for f in "$d"/run/slurmd-*.pid "$d/run/slurmctld.pid"; do
        [ -e "$f" ] || continue
        pid=$(live_pid "$f" "$(basename "$f" | sed -E 's/(-node[0-9]+)?\.pid$//')") \
            && pids+=" $pid"
        rm -f "$f"
    done
    if [ -n "$pids" ]; then
        kill -TERM $pids 2>/dev/null || true
        for f in $(seq 1 100); do
            alive=no
            for pid in $pids; do kill -0 "$pid" 2>/dev/null && alive=yes; done
            [ $alive = no ] && break
            sleep 0.1
        done
        kill -KILL $pids 2>/dev/null || true
    fi
    kill_ns_processes
    stop_pid_file "$d/munge/munged.pid" munged
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$NAME-n[0-9]+$" || true) "$SW"; do
        ns_exists "$ns" && { ip netns del "$ns" || say "could not delete namespace $ns"; }
    done
    [ -n "$STATE" ] && [ -d "$STATE" ] && rm -rf "$STATE"
    return 0
}

down() {
    [ "$(id -u)" -eq 0 ] || cannot "must run as root"
    if [ ! -d "$STATE" ] && ! ns_exists "$SW"; then
        say "cluster $NAME is not up"
        return 0
    fi
    [ -f "$STATE/cluster.env" ] && load_state || true
    NODES=${NODES:-0}
    teardown
    say "cluster $NAME down"
}

# --- status, shape, link, exec, mpirun, agent ------------------------------------------
status() {
    if [ ! -f "$STATE/cluster.env" ]; then
        echo "cluster $NAME: down"
        return 3
    fi
    load_state
    local i ns d=$STATE/slurm health=ok
    healthy || health="INCOMPLETE (run: $0 down; $0 up ...)"
    echo "cluster $NAME: $NODES nodes on $SUBNET.0/24, state $health"
    echo "bandwidth: $BANDWIDTH per node and direction"
    case "$LATENCY_EMULATED" in
        no) echo "latency: $LATENCY requested, not emulated (kernel without sch_netem)" ;;
        *) echo "latency: $LATENCY" ;;
    esac
    echo "hostfile: $STATE/hostfile"
    for ((i = 0; i < NODES; i++)); do
        ns=$(node_ns "$i")
        local link pids
        link=$(ip -n "$ns" -br link show dev eth0 2>/dev/null | awk '{print $2}' || echo missing)
        pids=$(ns_pids "$ns" | wc -l)
        printf 'node%s  %s.%s  ns %s  link %s  processes %s\n' "$i" "$SUBNET" $((i + 1)) "$ns" \
            "${link:-missing}" "$pids"
    done
    if [ "$SLURM" = yes ]; then
        echo "slurm: SLURM_CONF=$d/slurm.conf (client commands: $0 exec node0 sinfo)"
        SLURM_CONF=$d/slurm.conf timeout 10 bash "$SCRIPT" --name "$NAME" exec node0 sinfo 2>&1 || true
    fi
}

shape() {
    load_state
    local only=""
    while [ $# -gt 0 ]; do
        case "$1" in
            --bandwidth) BANDWIDTH=${2:?}; shift 2 ;;
            --latency) LATENCY=${2:?}; shift 2 ;;
            --node) only=$(node_index "${2:?}"); shift 2 ;;
            *) die "shape: unknown option $1" ;;
        esac
    done
    rate_ok "$BANDWIDTH" || die "--bandwidth $BANDWIDTH: give a tc rate such as 200mbit or none"
    time_ok "$LATENCY" || die "--latency $LATENCY: give a tc time such as 100us or none"
    if [ -n "$only" ]; then
        apply_shaping "$only"
        say "node$only: bandwidth $BANDWIDTH, latency $LATENCY (other nodes unchanged)"
    else
        apply_shaping $(seq 0 $((NODES - 1)))
        write_state
        say "all nodes: bandwidth $BANDWIDTH, latency $LATENCY"
    fi
}

link() {
    load_state
    local i
    [ $# -eq 2 ] || die "usage: $0 link NODE up|down"
    i=$(node_index "$1")
    case "$2" in
        up|down) ip -n "$SW" link set "p$i" "$2" ;;
        *) die "link: say up or down, not $2" ;;
    esac
    say "node$i link $2"
}

slurmd_ctl() {   # slurmd NODE kill|start
    load_state
    [ $# -eq 2 ] || die "usage: $0 slurmd NODE kill|start"
    [ "$SLURM" = yes ] || die "cluster $NAME has no Slurm"
    local i pid d=$STATE/slurm
    i=$(node_index "$1")
    case "$2" in
        kill)
            pid=$(live_pid "$d/run/slurmd-node$i.pid" slurmd) \
                || die "slurmd of node$i is not running"
            kill -KILL "$pid"
            while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
            rm -f "$d/run/slurmd-node$i.pid" ;;
        start)
            live_pid "$d/run/slurmd-node$i.pid" slurmd >/dev/null \
                && die "slurmd of node$i is already running"
            start_slurmd "$i"
            wait_for_file "$d/run/slurmd-node$i.pid" || die "slurmd of node$i wrote no pid file" ;;
        *) die "slurmd: say kill or start, not $2" ;;
    esac
    say "node$i slurmd: $2"
}

node_env() {   # the environment of programs run on the nodes
    set -a
    # shellcheck disable=SC1091
    . "$STATE/mpi.env"
    set +a
    export CLUSTER_HOSTFILE=$STATE/hostfile
    [ "$SLURM" = yes ] && export SLURM_CONF=$STATE/slurm/slurm.conf
    PATH=$PATH:/usr/sbin:/sbin
}

exec_node() {
    load_state
    [ $# -ge 2 ] || die "usage: $0 exec NODE CMD..."
    local i
    i=$(node_index "$1")
    shift
    node_env
    in_node "$i" "$@"
}

run_mpirun() {
    load_state
    node_env
    command -v mpirun >/dev/null 2>&1 || die "mpirun not found (install openmpi-bin)"
    # the hostfile and --map-by node are defaults from mpi.env (orte_default_hostfile,
    # rmaps_base_mapping_policy), not options: the caller's own --hostfile, --host or
    # --map-by replace them (mpirun refuses a second --hostfile)
    in_node 0 mpirun "$@"
}

agent() {   # Open MPI's plm_rsh_agent: AGENT HOST CMD... (CMD is shell text, like ssh)
    load_state
    local i link
    i=$(node_index "$1")
    shift
    # Fail at once, with status 255 as ssh does, where the daemon started on the node
    # could never call mpirun back: mpirun would wait for it forever (measured: > 5 min).
    # mpirun outside the nodes (e.g. after `eval "$(cluster.sh env)"` in the machine's
    # own namespace, which has no route to them):
    if [ -f "$STATE/netns.ids" ] \
            && ! grep -qx "$(stat -L -c %i /proc/$$/ns/net)" "$STATE/netns.ids"; then
        say "error: mpirun runs outside cluster $NAME, where node$i cannot reach it; run" \
            "it on a node: $0 mpirun ARGS (or $0 exec node0 mpirun ARGS)"
        exit 255
    fi
    # a node whose link is down (cluster.sh link NODE down) at launch:
    link=$(ip -n "$(node_ns "$i")" -br link show dev eth0 2>/dev/null | awk '{print $2}')
    if [ "$link" != UP ]; then
        say "error: cannot reach node$i: its link is ${link:-missing}" \
            "(bring it up: $0 link node$i up)"
        exit 255
    fi
    in_node "$i" /bin/sh -c "$*"
}

print_env() {
    load_state
    cat "$STATE/mpi.env" | sed 's/^/export /'
    echo "export CLUSTER_HOSTFILE=$STATE/hostfile"
    [ "$SLURM" = yes ] && echo "export SLURM_CONF=$STATE/slurm/slurm.conf"
    return 0
}

counters() {
    load_state
    local i ns
    for ((i = 0; i < NODES; i++)); do
        ns=$(node_ns "$i")
        printf 'node%s %s %s\n' "$i" \
            "$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/tx_bytes)" \
            "$(ip netns exec "$ns" cat /sys/class/net/eth0/statistics/rx_bytes)"
    done
}

# --- main -----------------------------------------------------------------------------
while [ $# -gt 0 ]; do
    case "$1" in
        --name) NAME=${2:?--name NAME}; shift 2 ;;
        -h|--help) print_help "$SCRIPT"; exit 0 ;;
        -*) usage "unknown option '$1'" ;;
        *) break ;;
    esac
done
[ $# -ge 1 ] || usage "no command given"
set_names
cmd=$1
shift
case "$cmd" in
    up) up "$@" ;;
    down) down ;;
    status) status ;;
    shape) shape "$@" ;;
    link) link "$@" ;;
    slurmd) slurmd_ctl "$@" ;;
    exec) exec_node "$@" ;;
    mpirun) run_mpirun "$@" ;;
    agent) agent "$@" ;;
    env) print_env ;;
    counters) counters ;;
    *) usage "unknown command '$cmd'" ;;
esac
