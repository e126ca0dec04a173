#!/usr/bin/env bash
# A real Slurm on localhost (munged + slurmctld + slurmd), for tests and trials.
#
#   scripts/slurm-local.sh start DIR    install Debian's Slurm if missing, write DIR/slurm.conf,
#                                       start the daemons, wait until the node is idle;
#                                       prints "export SLURM_CONF=DIR/slurm.conf" on stdout
#   scripts/slurm-local.sh stop DIR     cancel the jobs left, stop the daemons (SIGTERM via
#                                       their pid files: slurmd, slurmctld, munged)
#   scripts/slurm-local.sh status DIR   which daemons run, and sinfo
#
# DIR holds everything (configuration, state, spool, logs, pid files, munge key and
# socket); it is created if missing and made world-traversable (munged runs as user
# munge). Use a fresh DIR per start: a drained node state would persist in DIR/state.
# Every Slurm client command needs SLURM_CONF=DIR/slurm.conf in its environment.
#
# Needs root (slurmd, and munged started as user munge). Exit status 77 means "cannot
# run here" (not root, or apt-get cannot install the packages): callers may skip.
# If start fails after starting something, it stops what it started.
#
# Environment: SLURM_LOCAL_TIMEOUT  seconds to wait for the node to become idle (30)
#              SLURM_LOCAL_PORT     first slurmctld port to try (6817; slurmd uses +1)
set -euo pipefail

PACKAGES=(slurmctld slurmd slurm-client munge)
TIMEOUT=${SLURM_LOCAL_TIMEOUT:-30}

say() { printf 'slurm-local: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
cannot() { say "cannot run here: $*"; exit 77; }

source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/usage.sh"
usage() {  # usage WHAT: a wrong command line, one line on stderr, exit 2
    say "error: $1; usage: $0 start|stop|status DIR (see --help)"
    exit 2
}

. "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/slurm-common.sh"

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

show_logs() { show_log_tails 15 "$DIR"/log/*.log "$DIR"/munge/munged.log; }

# --- start ----------------------------------------------------------------------------
start() {
    [ "$(id -u)" -eq 0 ] || cannot "must run as root (slurmd runs as root; munged as user munge)"
    mkdir -p "$DIR"
    DIR=$(cd "$DIR" && pwd)
    install_packages "$DIR/apt.log" "${PACKAGES[@]}"
    for cmd in munged slurmctld slurmd sinfo runuser; do
        command -v "$cmd" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
        command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found after installing ${PACKAGES[*]}"
    done
    id munge >/dev/null 2>&1 || die "user munge does not exist (the munge package creates it)"
    if live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null; then
        die "a Slurm from $DIR is already running; stop it first"
    fi

    # from here on, a failure stops whatever was started
    trap 'rc=$?; if [ $rc -ne 0 ]; then show_logs; say "start failed; stopping what was started"; stop_daemons; fi' EXIT

    chmod 755 "$DIR"
    mkdir -p "$DIR"/{state,spool,log,run,tmp}
    start_munged "$DIR/munge"
    local node_line
    node_line=$(slurm_node_hardware)

    local port=${SLURM_LOCAL_PORT:-6817}
    while port_in_use "$port" || port_in_use $((port + 1)); do
        port=$((port + 2))
        [ "$port" -lt 7817 ] || die "no free pair of ports from ${SLURM_LOCAL_PORT:-6817}"
    done

    cat >"$DIR/slurm.conf" <<EOF
# Written by scripts/slurm-local.sh: a one-node Slurm on localhost for tests.
ClusterName=starchol-local
SlurmctldHost=localhost
SlurmctldPort=$port
SlurmdPort=$((port + 1))
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
TmpFS=$DIR/tmp
$(slurm_conf_common "$DIR/munge/munge.socket")
SlurmdTimeout=60
NodeName=localhost NodeAddr=127.0.0.1$node_line State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
    export SLURM_CONF=$DIR/slurm.conf

    slurmctld -f "$SLURM_CONF" || die "slurmctld did not start"
    wait_for_file "$DIR/run/slurmctld.pid" || die "slurmctld wrote no pid file"
    slurmd -f "$SLURM_CONF" -N localhost || die "slurmd did not start"
    wait_for_file "$DIR/run/slurmd.pid" || die "slurmd wrote no pid file"

    local deadline=$((SECONDS + TIMEOUT)) state=""
    while :; do
        state=$(sinfo -h -n localhost -o %T 2>/dev/null || true)
        case "$state" in idle|idle*) break ;; esac
        if [ $SECONDS -ge $deadline ]; then
            die "node not idle after ${TIMEOUT}s (state: ${state:-no answer from slurmctld})"
        fi
        live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null || die "slurmctld exited"
        live_pid "$DIR/run/slurmd.pid" slurmd >/dev/null || die "slurmd exited"
        sleep 0.2
    done
    trap - EXIT
    say "Slurm up on localhost:$port ($node_line ), node idle"
    printf 'export SLURM_CONF=%s\n' "$SLURM_CONF"
}

# --- stop -----------------------------------------------------------------------------
stop_daemons() {
    local jobs i
    if [ -f "$DIR/slurm.conf" ] && live_pid "$DIR/run/slurmctld.pid" slurmctld >/dev/null; then
        export SLURM_CONF=$DIR/slurm.conf
        jobs=$(timeout 10 squeue -h -o %i 2>/dev/null || true)
        if [ -n "$jobs" ]; then
            say "cancelling jobs left: $(echo $jobs)"
            timeout 10 scancel $jobs 2>/dev/null || true
            for i in $(seq 1 50); do
                [ -z "$(timeout 10 squeue -h -o %i 2>/dev/null || true)" ] && break
                sleep 0.2
            done
        fi
    fi
    stop_pid_file "$DIR/run/slurmd.pid" slurmd
    stop_pid_file "$DIR/run/slurmctld.pid" slurmctld
    stop_pid_file "$DIR/munge/munged.pid" munged
}

stop() {
    [ -d "$DIR" ] || { say "no such folder: $DIR"; return 0; }
    DIR=$(cd "$DIR" && pwd)
    stop_daemons
    say "stopped"
}

status() {
    local name file
    for name in slurmd slurmctld munged; do
        file=$DIR/run/$name.pid
        [ $name = munged ] && file=$DIR/munge/munged.pid
        if pid=$(live_pid "$file" $name); then echo "$name: running (pid $pid)"; else echo "$name: stopped"; fi
    done
    if [ -f "$DIR/slurm.conf" ]; then
        SLURM_CONF=$DIR/slurm.conf timeout 10 sinfo 2>&1 || true
    fi
}

case "${1:-}" in
    -h|--help) print_help "$(readlink -f "${BASH_SOURCE[0]}")"; exit 0 ;;
    start|stop|status) ;;
    "") usage "no command given" ;;
    *) usage "unknown command '$1'" ;;
esac
[ $# -eq 2 ] || usage "$1 takes one folder, got $(( $# - 1 )) argument(s)"
DIR=$2
case "$1" in
    start) start ;;
    stop) stop ;;
    status) status ;;
esac
