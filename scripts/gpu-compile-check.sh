#!/usr/bin/env bash
# Compile check of starchol's CUDA layer on a machine WITHOUT a GPU (and without cuBLAS):
# StarPU 1.3.10 is built with CUDA (scripts/build-starpu.sh, patched by
# scripts/starpu-patches/ for CUDA 13), starchol's extensions are built against it with
# the CUDA kernels (cuBLAS, cuSOLVER), and a factorization runs on CPU workers with that
# CUDA-enabled StarPU (it finds no GPU and starts none).
#
#   bash scripts/gpu-compile-check.sh --fetch   # once: NVIDIA wheels into .gpu-deps/wheels
#   bash scripts/gpu-compile-check.sh           # the check (several minutes on 2 cores)
#
# Needs nvcc (a CUDA toolkit with cudart, e.g. /usr/local/cuda) and the project's .venv
# (scripts/setup.sh). The wheels (about 700 MB: cuBLAS, cuSOLVER, cuSPARSE, nvJitLink for
# CUDA 13.0) go into .gpu-deps/, which git ignores; CI never fetches them (the slow test
# tests/test_gpu.py::test_cuda_build_compiles skips without them). Builds go into
# .gpu-deps/ too; nothing else is touched.
set -euo pipefail
# -h/--help: the comment above; any other argument is refused (nothing starts)
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
check_arguments "--fetch" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
DEPS=${STARCHOL_GPU_DEPS:-$ROOT/.gpu-deps}
VENV=${STARCHOL_VENV:-$ROOT/.venv}
PY="$VENV/bin/python"
say() { printf 'gpu-compile-check: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

# CUDA 13.0's libraries (the versions that match nvcc 13.0)
WHEELS=("nvidia-cublas>=13.0,<13.1" "nvidia-cusolver>=12.0,<12.1" "nvidia-cusparse>=12.6,<12.7"
        "nvidia-nvjitlink>=13.0,<13.1")

if [ "${1:-}" = "--fetch" ]; then
    mkdir -p "$DEPS/wheels"
    "$PY" -m pip download --no-deps --only-binary=:all: -d "$DEPS/wheels" "${WHEELS[@]}"
    exit 0
fi
compgen -G "$DEPS/wheels/nvidia_cublas*.whl" >/dev/null || die "no wheels in $DEPS/wheels; run $0 --fetch"
[ -x "$PY" ] || die "no $PY; run scripts/setup.sh first"
toolkit=${CUDA_TOOLKIT:-}
if [ -z "$toolkit" ]; then
    if [ -x /usr/local/cuda/bin/nvcc ]; then toolkit=/usr/local/cuda
    elif command -v nvcc >/dev/null; then toolkit=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    else die "no nvcc (set CUDA_TOOLKIT)"; fi
fi
t0=$(date +%s)

# 1. one CUDA folder: the toolkit + the wheels' cuBLAS/cuSOLVER/cuSPARSE/nvJitLink
CUDA_HOME=$(bash scripts/cuda-home.sh "$DEPS/cuda" "$toolkit" "$DEPS/wheels")
export CUDA_HOME
say "CUDA_HOME=$CUDA_HOME"

# 2. StarPU with CUDA (the project's build script; the source tarball is reused from the
#    project's own build cache when there)
export STARCHOL_STARPU_CACHE="$DEPS/starpu"
if [ -d build/starpu/source ] && [ ! -d "$STARCHOL_STARPU_CACHE/source" ]; then
    mkdir -p "$STARCHOL_STARPU_CACHE" && cp -r build/starpu/source "$STARCHOL_STARPU_CACHE/"
fi
prefix=$(STARCHOL_BUILD_PYTHON="$PY" bash scripts/build-starpu.sh)
config=$(ls "$prefix"/include/starpu/*/starpu_config.h)
grep -q '^#define STARPU_USE_CUDA 1' "$config" || die "StarPU in $prefix was built without CUDA"
say "StarPU with CUDA in $prefix"

# 3. starchol against it, from a copy of the tracked sources, into a scratch folder
work="$DEPS/check"
rm -rf "$work"
mkdir -p "$work/src" "$work/site" "$work/home"
git ls-files -z | tar --null -c -T - | tar -x -C "$work/src"
STARPU_PREFIX="$prefix" "$PY" -m pip install -q --no-build-isolation --no-deps \
    --target "$work/site" "$work/src" > "$work/pip.log" 2>&1 || { tail -40 "$work/pip.log" >&2; die "starchol did not build"; }
so=$(ls "$work"/site/starchol/runtime/_gpu*.so)
syms=$(nm -D "$so")
for sym in cusolverDnDpotrf cusolverDnSpotrf cublasDgemm_v2 cublasSsyrk_v2 cublasDtrsm_v2 cublasDgeam; do
    grep -q " U $sym@" <<<"$syms" || die "$sym is not used by $so"
done
say "the GPU layer calls cuSOLVER/cuBLAS: $(grep -c ' U cu' <<<"$syms") symbols"
# python -S: no site processing, so the checkout's editable install (a .pth import hook
# that would win over PYTHONPATH) is not used; the venv's packages come via PYTHONPATH
vsite=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
export PYTHONPATH="$work/site:$vsite"
PY=("$PY" -S)
cd "$work"   # not the checkout: its starchol/ folder would shadow the built package
"${PY[@]}" - <<'EOF'
from starchol.runtime import _gpu, gpu
assert _gpu.cuda_built(), "the GPU layer was compiled without CUDA"
print("gpu-compile-check: CUDA kernels built; GPUs visible:", gpu.visible_gpus())
EOF

# 4. the CUDA-enabled StarPU runs a factorization on CPU workers (no GPU here)
export STARPU_HOME="$work/home" STARPU_SILENT=1
for sched in dmdas heteroprio; do
    timeout 180 "${PY[@]}" -m starchol run --dist 2dbc --n 1024 --nb 128 --check --quiet \
        --sched "$sched" --gpus 0 --json "$work/run-$sched.json" > "$work/run-$sched.txt" 2>&1 \
        || { cat "$work/run-$sched.txt" >&2; die "run with $sched failed"; }
    "${PY[@]}" - "$work/run-$sched.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["residual"] < 1e-14, d["residual"]
assert {k: v["cpu"] for k, v in d["kernels"].items()} == {"potrf": 8, "trsm": 28, "syrk": 28, "gemm": 56}, d["kernels"]
print("gpu-compile-check:", d["runtime"]["scheduler"], "residual", d["residual"], "kernels", d["kernels"])
EOF
done
say "done in $(( $(date +%s) - t0 )) s"
echo "gpu-compile-check: OK"
