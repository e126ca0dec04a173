#!/usr/bin/env bash
# The main job: a small 6-rank Cholesky factorization under the SBC map on StarPU-MPI,
# with its residual, its measured bytes checked against the exact model, and a report.
# Outputs go to out/main-job/ (run.json, report.md, PNG figures).
set -euo pipefail
# -h/--help: the comment above; any other argument is refused (nothing starts)
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
check_arguments "" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${STARCHOL_VENV:-.venv}
OUT=${STARCHOL_OUT:-out/main-job}
mkdir -p "$OUT"
export PATH="$PWD/$VENV/bin:$PATH"
export STARPU_HOME=${STARPU_HOME:-$PWD/out/.starpu} STARPU_SILENT=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$STARPU_HOME"

echo "== predicted traffic of the maps that fit 6 nodes (N = 3000, NB = 200)"
starchol compare --nodes 6 --n 3000 --nb 200

echo
echo "== 6-rank factorization, sbc map (extended SBC, r = 4)"
mpirun --oversubscribe -np 6 starchol run --dist sbc --n 3000 --nb 200 --check \
    --json "$OUT/run.json"

echo
echo "== report"
starchol report "$OUT/run.json" -o "$OUT"
echo "report written to $OUT/report.md"
