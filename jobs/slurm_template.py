"""The sbatch script ``starchol slurm`` writes, as a template.

``$name`` fields are filled by :func:`starchol.jobs.slurm_script.render_script` from a
:class:`~starchol.jobs.slurm_plan.JobPlan`; each field is one line or a block of lines,
already shell-quoted. ``$$`` is a literal ``$`` (shell variables of the job).
"""
from string import Template

SCRIPT = Template("""\
#!/bin/bash
# starchol $version: distributed Cholesky, map $map, N = $n, NB = $nb
# $ranks MPI rank(s) (one per map node) on $slurm_nodes Slurm node(s), $ranks_per_node rank(s) per node.
# Written by `starchol slurm`; submit with `sbatch THIS_FILE`.
#
$sbatch

set -euo pipefail

# --- the run ----------------------------------------------------------------
# the map is for exactly $ranks ranks (starchol run takes the rank count as the map's
# node count): a job resized at submission (sbatch --ntasks/--nodes on the command
# line) would otherwise run another map without a word
if [ "$${SLURM_NTASKS:-$ranks}" -ne $ranks ]; then
    printf 'starchol: this job has %s tasks, but %s\\n' "$$SLURM_NTASKS" $ranks_mismatch >&2
    exit 2
fi
if [ "$${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then
    echo "starchol: job $${SLURM_JOB_ID:-} starts again from the beginning (requeued, restart $$SLURM_RESTART_COUNT)" >&2
fi
STARCHOL=$${STARCHOL:-$starchol}
RANKS_PER_NODE=$ranks_per_node
$cores
$workers
$json_dir
JSON="$$JSON_DIR/starchol-$${SLURM_JOB_ID}.json"   # the report of this job
mkdir -p "$$JSON_DIR"

# --- environment ------------------------------------------------------------
# one BLAS thread per StarPU worker: the workers are the parallelism
export OPENBLAS_NUM_THREADS=1
export OMP_NUM_THREADS=1
export MKL_NUM_THREADS=1
# StarPU: starchol run passes --sched (and --workers) to StarPU itself; the variables
# below say the same for any StarPU tool started in this job
export STARPU_SCHED=$sched
$ncpu
$gpus
export STARPU_SILENT=1          # no calibration chatter in the job log
export STARPU_COMM_STATS=1      # count the bytes sent between ranks (the report)
$nobind
export STARPU_MPI_NOBIND=1      # the MPI thread floats on the rank's cores
# STARPU_HOME (bus calibration, performance models) on node-local storage, per job,
# and below it one folder per rank (see RANK_HOME)
export STARPU_HOME="$${TMPDIR:-/tmp}/starpu-$${SLURM_JOB_ID}"
mkdir -p "$$STARPU_HOME"
$models
# a job that fails or is ended names its nodes that Slurm marks down or not responding
say_bad_nodes() {   # say_bad_nodes WHAT-HAPPENED
    local bad
    bad=$$(sinfo -h -N -n "$${SLURM_JOB_NODELIST:-}" -t down,fail,no_respond,drain \
           -o '%N (%T, %E)' 2>/dev/null | sort -u | paste -sd ';' -) || true
    if [ -n "$$bad" ]; then
        echo "starchol: job $${SLURM_JOB_ID:-} $$1; its nodes that Slurm marks down or not responding: $$bad" >&2
    fi
}
cleanup() {
    local rc=$$?
    [ "$$rc" -eq 0 ] || say_bad_nodes "failed (status $$rc)"
    rm -rf "$$STARPU_HOME"
    if [ "$${SLURM_JOB_NUM_NODES:-1}" -gt 1 ]; then   # the other nodes' copies
        # (bounded: a node that cannot be reached must not hold the job's end)
        timeout 10 srun --ntasks="$$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 --overcommit rm -rf "$$STARPU_HOME" 2>/dev/null || true
    fi
}
trap cleanup EXIT
# Open MPI refuses root unless told (containers, test clusters)
if [ "$$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
$setup
# --- launch -----------------------------------------------------------------
$launch_comment
# RANK_HOME gives each rank its own STARPU_HOME: ranks that calibrate the bus in one
# folder at the same time read each other's half-written files, and StarPU 1.3 aborts
# (assertion in check_bus_affinity_file)
RANK_HOME='export STARPU_HOME="$$STARPU_HOME/rank-$${OMPI_COMM_WORLD_RANK:-$${PMIX_RANK:-$${SLURM_PROCID:-0}}}"; mkdir -p "$$STARPU_HOME"; exec "$$@"'
# Slurm ends a job (scancel, the time limit, a node failure) with SIGTERM, then SIGKILL
# KillWait seconds later: the launch runs in the background so that the script says so
# at once, naming a failed node, while the ranks end
ENDING=
on_term() {
    ENDING=1
    echo "starchol: job $${SLURM_JOB_ID:-} received SIGTERM (scancel, time limit or node failure); the ranks end" >&2
    say_bad_nodes "is being ended"
}
trap on_term TERM
launch_once() {   # the launch's status at its end
    $launch &
    LAUNCH_PID=$$!
    local rc
    while :; do   # wait returns early when a signal arrives
        rc=0
        wait "$$LAUNCH_PID" || rc=$$?
        kill -0 "$$LAUNCH_PID" 2>/dev/null || return "$$rc"
    done
}
ranks_started() {   # did a rank of this node start (its RANK_HOME folder exists)?
    compgen -G "$$STARPU_HOME/rank-*" >/dev/null
}
# A launch that fails before any rank has started (mpirun's daemon or srun's step could
# not start on a node, for example on one whose slurmd has just come back after a
# requeue) is tried again: nothing has run, nothing is lost. A run whose ranks started is
# never run again here (its failure is the job's), nor is a job being ended.
LAUNCH_TRIES=$${STARCHOL_LAUNCH_TRIES:-3}   # launches tried at most
LAUNCH_RETRY_S=$${STARCHOL_LAUNCH_RETRY_S:-10}   # seconds between two tries
# both are whole numbers (tries 1..1000, seconds 0..86400): a word or 1e3 is refused here,
# before any launch, instead of retrying without limit or not waiting
case "$$LAUNCH_TRIES" in
    ''|*[!0-9]*) LAUNCH_TRIES_OK= ;;
    *) LAUNCH_TRIES_OK=$$([ "$${#LAUNCH_TRIES}" -le 4 ] && [ "$$((10#$$LAUNCH_TRIES))" -ge 1 ] \
           && [ "$$((10#$$LAUNCH_TRIES))" -le 1000 ] && echo 1) ;;
esac
if [ -z "$$LAUNCH_TRIES_OK" ]; then
    echo "starchol: STARCHOL_LAUNCH_TRIES='$$LAUNCH_TRIES' must be a whole number from 1 to 1000" >&2
    exit 2
fi
case "$$LAUNCH_RETRY_S" in
    ''|*[!0-9]*) LAUNCH_RETRY_OK= ;;
    *) LAUNCH_RETRY_OK=$$([ "$${#LAUNCH_RETRY_S}" -le 5 ] && [ "$$((10#$$LAUNCH_RETRY_S))" -le 86400 ] \
           && echo 1) ;;
esac
if [ -z "$$LAUNCH_RETRY_OK" ]; then
    echo "starchol: STARCHOL_LAUNCH_RETRY_S='$$LAUNCH_RETRY_S' must be a whole number of seconds from 0 to 86400" >&2
    exit 2
fi
LAUNCH_TRIES=$$((10#$$LAUNCH_TRIES)); LAUNCH_RETRY_S=$$((10#$$LAUNCH_RETRY_S))
try=1
while :; do
    rm -rf "$$STARPU_HOME"/rank-*   # (a requeued job's first run may have left its own)
    rc=0
    launch_once || rc=$$?
    [ "$$rc" -ne 0 ] || break
    if [ -n "$$ENDING" ] || ranks_started || [ "$$rc" -eq 126 ] || [ "$$rc" -eq 127 ] \
        || [ "$$try" -ge "$$LAUNCH_TRIES" ]; then
        exit "$$rc"
    fi
    echo "starchol: job $${SLURM_JOB_ID:-}: the launch failed (status $$rc) before any rank started (try $$try of $$LAUNCH_TRIES); trying again in $$LAUNCH_RETRY_S s" >&2
    say_bad_nodes "could not launch its ranks"
    sleep "$$LAUNCH_RETRY_S" &
    SLEEP_PID=$$!
    wait "$$SLEEP_PID" || true   # (returns at once on SIGTERM)
    kill "$$SLEEP_PID" 2>/dev/null || true
    [ -z "$$ENDING" ] || exit "$$rc"
    try=$$((try + 1))
done

test -s "$$JSON" || { echo "starchol: no report written to $$JSON" >&2; exit 1; }
echo "report: $$JSON"
""")
