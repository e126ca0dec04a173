#!/usr/bin/env bash
# Build starchol's StarPU (with StarPU-MPI, FxT, and CUDA when nvcc + cuBLAS are found)
# from Debian's own source package, into a cached prefix; print the prefix on stdout.
#
#   bash scripts/build-starpu.sh            # -> /path/to/build/starpu/starpu-1.3.10-<key>
#
# Version, source suite and configure flags come from build_flags.py (the one home of
# the build flags); the prefix name carries a hash of them, so a change of version, flags,
# MPI or compiler builds a new prefix and an unchanged one is reused at once.
# STARCHOL_STARPU_CACHE=DIR puts the builds in DIR, so several checkouts on one machine
# share one build (a lock serialises concurrent builds of the same prefix).
#
# The source is fetched with `apt-get source --download-only` through a private sources
# list and state folder inside the cache: the machine's apt configuration is never
# changed, and the URI/keyring are copied from the machine's own Debian sources.
set -euo pipefail
# -h/--help: the comment above; any other argument is refused (nothing starts)
source "$(dirname "${BASH_SOURCE[0]}")/usage.sh"
check_arguments "" "$@"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${STARCHOL_BUILD_PYTHON:-python3}
JOBS=${STARCHOL_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}

say() { printf 'build-starpu: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

plan=$("$PYTHON" build_flags.py starpu-plan) || die "build_flags.py starpu-plan failed"
eval "$plan"
prefix=$STARPU_BUILD_PREFIX
stamp="$prefix/.starchol-build"
if [ -f "$stamp" ] && [ -f "$prefix/lib/pkgconfig/starpumpi-1.3.pc" ]; then
    say "StarPU $STARPU_VERSION already built in $prefix"
    echo "$prefix"
    exit 0
fi

mkdir -p "$STARPU_CACHE"
exec 9>"$STARPU_CACHE/.lock"
say "waiting for the build lock $STARPU_CACHE/.lock" && flock 9
if [ -f "$stamp" ]; then   # another checkout built it while we waited
    say "StarPU $STARPU_VERSION built meanwhile in $prefix"
    echo "$prefix"
    exit 0
fi

work="$STARPU_CACHE/work-$$"
rm -rf "$work"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)

# --- the source: Debian's source package, through a private apt setup -----------------
src_dir="$STARPU_CACHE/source"
tarball=$(ls "$src_dir"/"${STARPU_SOURCE_PACKAGE}_${STARPU_VERSION}"*.orig.tar.* 2>/dev/null | head -1 || true)
if [ -z "$tarball" ]; then
    apt_dir="$work/apt"
    mkdir -p "$apt_dir/sources" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
    # copy URIs and Signed-By from the machine's Debian sources (deb822 or one-line form)
    uri="" keyring=""
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        u=$(awk '/^URIs:/ {print $2; exit}' "$f")
        case "$u" in */debian|*/debian/) uri=$u; keyring=$(awk '/^Signed-By:/ {print $2; exit}' "$f"); break ;; esac
    done
    if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
        uri=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; exit}}' /etc/apt/sources.list)
    fi
    [ -n "$uri" ] || die "no Debian mirror found in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"
    [ -n "$keyring" ] || keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    cat > "$apt_dir/sources/starchol-starpu.sources" <<EOF
Types: deb-src
URIs: $uri
Suites: $STARPU_SOURCE_SUITE
Components: main
Signed-By: $keyring
EOF
    apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$apt_dir/sources"
              -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache"
              -o Debug::NoLocking=1 -o APT::Sandbox::User=root -qq)
    say "fetching Debian's $STARPU_SOURCE_PACKAGE source ($STARPU_SOURCE_SUITE) from $uri"
    apt-get "${apt_opts[@]}" update || die "apt-get update (private sources list) failed"
    (cd "$work" && apt-get "${apt_opts[@]}" source --download-only \
        "$STARPU_SOURCE_PACKAGE/$STARPU_SOURCE_SUITE") || die "apt-get source $STARPU_SOURCE_PACKAGE failed"
    tarball=$(ls "$work"/"${STARPU_SOURCE_PACKAGE}_${STARPU_VERSION}"*.orig.tar.* 2>/dev/null | head -1 || true)
    [ -n "$tarball" ] || die "$STARPU_SOURCE_SUITE's $STARPU_SOURCE_PACKAGE source is not version $STARPU_VERSION: $(ls "$work")"
    mkdir -p "$src_dir"
    cp "$tarball" "$src_dir/.$(basename "$tarball").part"
    mv "$src_dir/.$(basename "$tarball").part" "$src_dir/$(basename "$tarball")"
    tarball="$src_dir/$(basename "$tarball")"
fi
say "unpacking $(basename "$tarball")"
tar -xf "$tarball" -C "$work"
srcdir=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name "${STARPU_SOURCE_PACKAGE}-*" | head -1)
[ -n "$srcdir" ] || die "no source folder in $tarball"
# starchol's patches (scripts/starpu-patches/README.md says what each does and why);
# their contents are part of the build key, so a changed patch builds a new prefix
applied=()
for p in scripts/starpu-patches/*.patch; do
    [ -f "$p" ] || continue
    say "applying $(basename "$p")"
    patch -d "$srcdir" -p1 -s < "$p" || die "patch $(basename "$p") does not apply"
    applied+=("$(basename "$p")")
done

# --- configure, build, install into a temporary prefix, then rename --------------------
staging="$prefix.part-$$"
rm -rf "$staging"
failed() {  # $1: step, $2: log
    tail -30 "$2" >&2
    if [ -n "$STARPU_CUDA" ]; then
        # a CUDA toolkit StarPU 1.3 cannot build with must not stop the set-up
        say "$1 failed with CUDA ($STARPU_CUDA, log above): building without CUDA instead"
        rm -rf "$work" "$staging"
        exec 9>&-
        STARCHOL_CUDA=0 exec bash "${BASH_SOURCE[0]}"
    fi
    die "$1 failed (log above)"
}
say "configuring: ${STARPU_CONFIGURE_ARGS[*]}"
(cd "$srcdir" && CC=${CC:-gcc} ./configure "${STARPU_CONFIGURE_ARGS[@]}" \
    > "$work/configure.log" 2>&1) || failed configure "$work/configure.log"
say "compiling with $JOBS jobs"
(cd "$srcdir" && make -j"$JOBS" > "$work/make.log" 2>&1) || failed make "$work/make.log"
# install under the final prefix name (libtool and .pc files record it), via DESTDIR
(cd "$srcdir" && make install DESTDIR="$staging" > "$work/install.log" 2>&1) || { tail -30 "$work/install.log" >&2; die "make install failed"; }
rm -rf "$prefix"
mkdir -p "$(dirname "$prefix")"
mv "$staging$prefix" "$prefix"
rm -rf "$staging"
cp "$work/configure.log" "$prefix/.starchol-configure.log"
grep -E '^#define STARPU_(MAXCPUS|MAXNUMANODES|MAXNODES|USE_FXT|USE_MPI|USE_CUDA|HAVE_HWLOC)\b' \
    "$prefix"/include/starpu/*/starpu_config.h >&2 || true
printf 'version=%s\nsuite=%s\nseconds=%s\nconfigure=%s\npatches=%s\n' "$STARPU_VERSION" \
    "$STARPU_SOURCE_SUITE" "$(( $(date +%s) - t0 ))" "${STARPU_CONFIGURE_ARGS[*]}" \
    "${applied[*]}" > "$stamp"
say "StarPU $STARPU_VERSION installed in $prefix ($(( $(date +%s) - t0 )) s)"
echo "$prefix"
