# Shared pieces of scripts/slurm-local.sh and scripts/cluster.sh (sourced, not run):
# Debian packages, pid files, munged, the node's hardware line and the slurm.conf settings
# both Slurms use. The sourcing script defines say, die and cannot first.
# shellcheck shell=bash

# packages of "$@" that dpkg does not list as installed, one a line
missing_packages() {
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || printf '%s\n' "$pkg"
    done
}

# install_packages LOG PKG...: apt-get the missing ones (exit 77 through `cannot` if impossible)
install_packages() {
    local log=$1 missing
    shift
    command -v dpkg-query >/dev/null 2>&1 || cannot "no dpkg/apt-get (not Debian or Ubuntu)"
    missing=$(missing_packages "$@" | tr '\n' ' ')
    [ -z "$missing" ] && return 0
    command -v apt-get >/dev/null 2>&1 || cannot "apt-get not found; install: $missing"
    say "installing $missing"
    export DEBIAN_FRONTEND=noninteractive
    mkdir -p "$(dirname "$log")"
    # the package lists may be recent enough already: update only if the install fails
    if ! apt-get install -y -qq --no-install-recommends $missing >"$log" 2>&1; then
        say "install failed; running apt-get update and trying again"
        if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing; } \
                >>"$log" 2>&1; then
            tail -n 20 "$log" >&2
            cannot "apt-get could not install $missing (log: $log)"
        fi
    fi
    [ -z "$(missing_packages "$@")" ] \
        || cannot "packages still missing after apt-get: $(missing_packages "$@" | tr '\n' ' ')"
}

# the pid in FILE if that process is alive and runs program NAME
live_pid() {
    local file=$1 name=$2 pid
    [ -f "$file" ] || return 1
    pid=$(tr -dc '0-9' <"$file")
    [ -n "$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$name" ] || return 1
    printf '%s\n' "$pid"
}

# wait up to 10 s for FILE to exist and be non-empty
wait_for_file() {
    local i
    for i in $(seq 1 100); do
        [ -s "$1" ] && return 0
        sleep 0.1
    done
    return 1
}

# stop_pid_file FILE NAME: SIGTERM the program NAME whose pid is in FILE, SIGKILL after 10 s
stop_pid_file() {
    local file=$1 name=$2 pid i
    pid=$(live_pid "$file" "$name") || { rm -f "$file"; return 0; }
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || { rm -f "$file"; return 0; }
        sleep 0.1
    done
    say "$name (pid $pid) ignored SIGTERM for 10 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$file"
}

# show_log_tails LINES FILE...: the last LINES lines of each FILE that exists, on stderr
show_log_tails() {
    local lines=$1 f
    shift
    for f in "$@"; do
        [ -f "$f" ] || continue
        say "--- last lines of $f"
        tail -n "$lines" "$f" >&2
    done
}

# start_munged DIR: munged as user munge with a key of its own under DIR (nothing under
# /etc is needed or changed); socket DIR/munge.socket, pid file DIR/munged.pid
start_munged() {
    local d=$1
    mkdir -p "$d"
    chown munge:munge "$d"
    chmod 755 "$d"   # munged wants its socket folder traversable by all
    if [ ! -s "$d/munge.key" ]; then
        (umask 077; head -c 1024 /dev/urandom >"$d/munge.key")
        chown munge:munge "$d/munge.key"
        chmod 400 "$d/munge.key"
    fi
    runuser -u munge -- munged \
        --socket="$d/munge.socket" --pid-file="$d/munged.pid" \
        --log-file="$d/munged.log" --seed-file="$d/munged.seed" \
        --key-file="$d/munge.key" || die "munged did not start"
    wait_for_file "$d/munged.pid" || die "munged wrote no pid file"
}

# the node as slurmd sees it, for a NodeName line: " CPUs=... Boards=... RealMemory=..."
slurm_node_hardware() {
    local hw field value line=""
    hw=$(slurmd -C 2>/dev/null | head -n 1) || die "slurmd -C failed"
    for field in CPUs Boards SocketsPerBoard CoresPerSocket ThreadsPerCore RealMemory; do
        value=$(printf '%s\n' "$hw" | tr ' ' '\n' | sed -n "s/^$field=//p")
        [ -n "$value" ] && line+=" $field=$value"
    done
    [ -n "$line" ] || die "could not read the CPUs and memory from 'slurmd -C': $hw"
    printf '%s\n' "$line"
}

# slurm.conf settings both Slurms share (FACTS section 5): root daemons, munge on the
# socket MUNGE_SOCKET, no cgroups, no accounting, cores as resources, PMIx, no mail, and
# a job that no node or partition can ever hold (more nodes, or more cores per node, than
# there are) refused by sbatch at once instead of left PENDING forever (EnforcePartLimits)
slurm_conf_common() {
    cat <<EOF
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$1
CredType=cred/munge
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=batch_sched_delay=0
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=600
EnforcePartLimits=ALL
EOF
}
