#!/usr/bin/env bash
# Run starchol's test suite (fast cases; `scripts/test.sh -m slow` runs the slow ones).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${STARCHOL_VENV:-.venv}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ $# -eq 0 ]; then
    set -- -m "not slow"
fi
exec "$VENV/bin/python" -m pytest -q -ra "$@" tests
