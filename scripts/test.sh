#!/usr/bin/env bash
# Run starchol's test suite: the fast cases of tests/ by default. Arguments go to pytest:
#   scripts/test.sh -m slow              the slow cases
#   scripts/test.sh -m ""                every case
#   scripts/test.sh tests/test_cli.py -x one file (still without the slow cases)
#   scripts/test.sh --fast               what a developer runs between changes (3 min 40 s
#                                        here, quiet): neither the slow cases nor those that
#                                        start a Slurm (slurm), the emulated cluster
#                                        (cluster) or the API suite under mpirun at 1-6
#                                        ranks (mpi); CI (.ci/run) runs them (no --fast)
# Without an -m of its own the run keeps -m "not slow"; without a test path it runs tests/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${STARCHOL_VENV:-.venv}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
marker=(-m "not slow")
paths=(tests)
args=()
for arg in "$@"; do
    case "$arg" in
        --fast) marker=(-m "not slow and not slurm and not cluster and not mpi"); continue ;;
        -m|-m*) marker=() ;;
        tests|tests/*) paths=() ;;
    esac
    args+=("$arg")
done
exec "$VENV/bin/python" -m pytest -q -ra "${marker[@]}" "${args[@]}" "${paths[@]}"
