#!/usr/bin/env bash
# Set up starchol on a fresh Debian/Ubuntu machine; safe to run again (idempotent).
#   1. system packages with apt-get, only those missing: StarPU 1.3 + StarPU-MPI, Open MPI,
#      OpenBLAS, LAPACKE, FxT, hwloc, pkg-config, a C compiler, Python headers and venv,
#      SimGrid's C++ library (libsimgrid-dev, for `starchol simulate`);
#   2. StarPU built by the project (scripts/build-starpu.sh: Debian's 1.3.10 source with
#      256 CPU workers per process, StarPU-MPI, FxT traces, CUDA when nvcc + cuBLAS are
#      found), cached under build/starpu or $STARCHOL_STARPU_CACHE. Instead:
#        STARCHOL_STARPU=system     Debian's libstarpu-dev (4 CPU workers per process)
#        STARPU_PREFIX=DIR          a StarPU already installed under DIR (module, spack)
#      The choice is recorded in build/starpu-choice (later `pip install -e .` reuse it);
#   3. a project virtual environment in .venv (override with STARCHOL_VENV);
#   4. mpi4py built from source against the system Open MPI (the one StarPU-MPI uses);
#   5. starchol itself, editable, with its Cython runtime layer compiled (rpath to StarPU).
set -euo pipefail
# -h/--help: the comment above; any other argument is refused (nothing starts)
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
check_arguments "" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${STARCHOL_VENV:-.venv}
PYTHON=${PYTHON:-python3}

say() { printf 'setup: %s\n' "$*" >&2; }

SYSTEM_PACKAGES=(libstarpu-dev openmpi-bin libopenmpi-dev libopenblas-dev liblapacke-dev
                 pkg-config gcc g++ make libfxt-dev libhwloc-dev hwloc patch libsimgrid-dev)
if ! command -v "$PYTHON" >/dev/null 2>&1 || [ "$(command -v "$PYTHON")" = /usr/bin/python3 ]; then
    SYSTEM_PACKAGES+=(python3 python3-venv python3-dev)
fi
missing=()
for pkg in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    say "installing system packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "system packages present"
fi

# Which StarPU the extension builds against (build_flags.py reads build/starpu-choice).
mkdir -p build
user_prefix=""
[ "${STARCHOL_STARPU:-}" = system ] || user_prefix=$("$PYTHON" build_flags.py starpu-user)
if [ "${STARCHOL_STARPU:-}" = system ]; then
    say "using Debian's StarPU (STARCHOL_STARPU=system)"
    choice="system"
elif [ -n "$user_prefix" ]; then
    say "using the StarPU installed in $user_prefix"
    choice="user $user_prefix"
else
    say "building StarPU (cached; a few minutes the first time)"
    prefix=$(bash scripts/build-starpu.sh)
    choice="build $prefix"
fi
printf '%s\n' "$choice" > build/starpu-choice.tmp && mv build/starpu-choice.tmp build/starpu-choice

if [ ! -x "$VENV/bin/python" ]; then
    say "creating virtual environment $VENV"
    "$PYTHON" -m venv "$VENV"
fi
PIP=("$VENV/bin/python" -m pip -q --disable-pip-version-check)
"${PIP[@]}" install -U "pip>=23" "setuptools>=77" wheel
"${PIP[@]}" install -r requirements/build.txt

# mpi4py must use the same Open MPI as StarPU-MPI: build it from source with mpicc.
if ! "$VENV/bin/python" -c "import mpi4py, sys; from mpi4py import MPI; sys.exit('Open MPI' not in MPI.Get_library_version())" 2>/dev/null; then
    say "building mpi4py against the system Open MPI (a few minutes)"
    MPICC=mpicc "${PIP[@]}" install --no-binary mpi4py --no-cache-dir -r requirements/mpi4py.txt
fi

say "installing starchol (editable; compiles the Cython runtime layer)"
"${PIP[@]}" install --no-build-isolation -e ".[test]"
"$VENV/bin/starchol" --version >&2
