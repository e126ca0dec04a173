#!/usr/bin/env bash
# Assemble one CUDA home folder from a CUDA toolkit (nvcc, cudart) and NVIDIA's
# library wheels (cuBLAS, cuSOLVER, cuSPARSE, nvJitLink), for StarPU's
# `configure --with-cuda-dir` and starchol's CUDA extension, which both expect
# cuBLAS beside cudart. Nothing is downloaded or copied: the folder holds symbolic links.
#
#   bash scripts/cuda-home.sh OUT [TOOLKIT [NVIDIA_DIR...]]
#
# TOOLKIT: the folder holding bin/nvcc (default: $CUDA_HOME, else the one above nvcc on
# PATH, else /usr/local/cuda). NVIDIA_DIR: folders holding the wheels' `nvidia/` package
# (default: every site-packages of python3 that has one, i.e. pip-installed
# nvidia-cublas / nvidia-cusolver / ... wheels). Each NVIDIA_DIR may also be a folder of
# .whl files, which are unpacked once into OUT/.wheels.
# Prints OUT on stdout; use it as CUDA_HOME.
set -euo pipefail
say() { printf 'cuda-home: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
case "${1:-}" in
    -h|--help) print_help "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) die "unknown option '$1'; usage: $0 OUT [TOOLKIT [NVIDIA_DIR...]]" ;;
esac
[ $# -ge 1 ] || die "usage: $0 OUT [TOOLKIT [NVIDIA_DIR...]]"
out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
toolkit=${1:-${CUDA_HOME:-}}
[ $# -ge 1 ] && shift
if [ -z "$toolkit" ]; then
    if command -v nvcc >/dev/null 2>&1; then
        toolkit=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    else
        toolkit=/usr/local/cuda
    fi
fi
[ -x "$toolkit/bin/nvcc" ] || die "no nvcc in $toolkit/bin"
toolkit=$(cd "$toolkit" && pwd -P)
roots=("$@")
if [ ${#roots[@]} -eq 0 ]; then
    while IFS= read -r d; do roots+=("$d"); done < <(python3 - <<'PY'
import site, sys, os
for d in site.getsitepackages() + [site.getusersitepackages()] + sys.path:
    if d and os.path.isdir(os.path.join(d, "nvidia")):
        print(d)
PY
)
fi
# wheel folders: unpack the .whl files once
dirs=()
for r in "${roots[@]}"; do
    if compgen -G "$r/*.whl" >/dev/null; then
        dest="$out/.wheels/$(basename "$r")"
        if [ ! -f "$dest/.unpacked" ]; then
            mkdir -p "$dest"
            for w in "$r"/*.whl; do python3 -m zipfile -e "$w" "$dest" || die "cannot unpack $w"; done
            touch "$dest/.unpacked"
        fi
        dirs+=("$dest")
    else
        dirs+=("$r")
    fi
done
rm -rf "$out/include" "$out/lib64"
mkdir -p "$out/include" "$out/lib64"
# the toolkit's own folders (nvcc finds nvvm, crt, targets relative to itself)
for e in "$toolkit"/*; do
    n=$(basename "$e")
    case "$n" in include|lib|lib64) continue ;; esac
    ln -sfn "$e" "$out/$n"
done
link_all() {  # link_all SRC_DIR DEST_DIR: link each entry, first one wins
    local f
    [ -d "$1" ] || return 0
    for f in "$1"/*; do
        [ -e "$f" ] || continue
        [ -e "$2/$(basename "$f")" ] || ln -s "$(readlink -f "$f")" "$2/$(basename "$f")"
    done
}
link_all "$toolkit/include" "$out/include"
for l in lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib; do link_all "$toolkit/$l" "$out/lib64"; done
for d in "${dirs[@]}"; do
    for pkg in "$d"/nvidia/*/; do
        link_all "$pkg/include" "$out/include"
        link_all "$pkg/lib" "$out/lib64"
    done
done
# unversioned names for the linker (libcublas.so -> libcublas.so.13)
for f in "$out"/lib64/lib*.so.*; do
    [ -e "$f" ] || continue
    base=${f%%.so.*}.so
    [ -e "$base" ] || ln -s "$(basename "$f")" "$base"
done
for need in include/cuda_runtime.h include/cublas_v2.h include/cusolverDn.h lib64/libcudart.so lib64/libcublas.so lib64/libcusolver.so; do
    [ -e "$out/$need" ] || say "warning: $need not found (toolkit $toolkit, wheels: ${dirs[*]:-none})"
done
say "CUDA home $out (toolkit $toolkit; libraries from ${dirs[*]:-the toolkit only})"
echo "$out"
