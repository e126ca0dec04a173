"""What the StarPU library loaded by this process is: where it lives and how it was built.

Read from the running process, not from the build: the prefix comes from the path of the
``libstarpu`` shared object mapped into this process (``/proc/self/maps``, after the
compiled layer has loaded it), the build options from that prefix's ``starpu_config.h``
(``STARPU_MAXCPUS``, ``STARPU_USE_FXT``, ``STARPU_USE_CUDA``, ...). The stamp that
``scripts/build-starpu.sh`` leaves in its prefix tells a project build apart from a
user's or Debian's StarPU. Starting StarPU is not needed.
"""
import os
import re

#: macros of starpu_config.h that ``starchol info`` reports
CONFIG_MACROS = ("STARPU_MAXCPUS", "STARPU_MAXNUMANODES", "STARPU_MAXNODES",
                 "STARPU_MAXCUDADEVS", "STARPU_USE_FXT", "STARPU_USE_MPI",
                 "STARPU_USE_CUDA", "STARPU_USE_OPENCL", "STARPU_HAVE_HWLOC",
                 "STARPU_QUICK_CHECK")

_DEFINE_RE = re.compile(r"^\s*#\s*define\s+(STARPU_[A-Z0-9_]+)(?:\s+(\S+))?", re.M)


def loaded_libraries(pattern):
    """Paths of the shared objects mapped in this process whose file name matches the
    regular expression ``pattern`` (e.g. ``r"libstarpu-\\d"``), in load order."""
    rx = re.compile(pattern)
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    if path.startswith("/") and rx.search(os.path.basename(path)) \
                            and path not in seen:
                        seen.append(path)
    except OSError:  # pragma: no cover - not Linux
        pass
    return seen


def config_macros(header):
    """``{macro: value}`` of the ``#define``s in a ``starpu_config.h`` (value ``"1"`` for a
    bare define); the macros that are not defined are absent."""
    with open(header) as f:
        text = f.read()
    return {m.group(1): (m.group(2) or "1") for m in _DEFINE_RE.finditer(text)}


def describe(version=None):
    """The loaded StarPU, as a dict (``prefix``, ``library``, ``kind``, ``config``...).

    ``version`` is the ``(major, minor, release)`` of the loaded library (default: asked
    from the compiled layer, which this imports, so that the library is mapped).
    """
    if version is None:
        from .backend import binding

        version = binding().runtime_version()
    libs = loaded_libraries(r"^libstarpu-\d+\.\d+\.so")
    mpi_libs = loaded_libraries(r"^libstarpumpi-\d+\.\d+\.so")
    out = {"version": ".".join(map(str, version)), "library": libs[0] if libs else None,
           "mpi_library": mpi_libs[0] if mpi_libs else None, "prefix": None,
           "kind": None, "config": {}, "header": None, "build": None}
    if not libs:
        return out
    libdir = os.path.dirname(os.path.realpath(libs[0]))
    prefix = os.path.dirname(libdir)
    if os.path.basename(prefix) in ("lib", "lib64"):  # Debian: /usr/lib/<triplet>
        prefix = os.path.dirname(prefix)
    out["prefix"] = prefix
    series = f"{version[0]}.{version[1]}"
    header = os.path.join(prefix, "include", "starpu", series, "starpu_config.h")
    if os.path.isfile(header):
        out["header"] = header
        out["config"] = {k: v for k, v in config_macros(header).items() if k in CONFIG_MACROS}
    stamp = os.path.join(prefix, ".starchol-build")
    if os.path.isfile(stamp):
        out["kind"] = "starchol build"
        with open(stamp) as f:
            out["build"] = dict(line.rstrip("\n").split("=", 1) for line in f if "=" in line)
    elif prefix == "/usr":
        out["kind"] = "system package"
    else:
        out["kind"] = "user install"
    return out


def label(d=None):
    """Which StarPU ran, in words: ``"StarPU 1.3.10 (system package)"``, ``"StarPU 1.3.10
    (built from Debian source, PREFIX)"`` (starchol's build, ``scripts/build-starpu.sh``),
    ``"StarPU 1.3.10 (user install, PREFIX)"``; ``d`` is :func:`describe`'s dict (default:
    the loaded StarPU's). Just ``"StarPU VERSION"`` when the library file is not found."""
    d = describe() if d is None else d
    text = f"StarPU {d['version']}"
    if d.get("kind") == "starchol build":
        suite = (d.get("build") or {}).get("suite")
        source = f"Debian {suite} source" if suite else "Debian source"
        return f"{text} (built from {source}, {d['prefix']})"
    if d.get("kind") == "system package":
        return f"{text} (system package)"
    if d.get("kind"):
        return f"{text} ({d['kind']}, {d['prefix']})"
    return text


def variables_read(names, d=None):
    """The names of ``names`` (environment variables) that the loaded StarPU's libraries
    (``libstarpu`` and ``libstarpumpi``) contain as text, in the order given: a build of
    starchol's current patches reads every variable of
    :data:`starchol.runtime.starpu_env.PATCH_SWITCHES`, a system StarPU or a build of
    older patches none or some. ``d`` is :func:`describe`'s dict (default: the loaded
    StarPU's). Local; reads the library files (a few MB)."""
    d = describe() if d is None else d
    text = b""
    for key in ("library", "mpi_library"):
        if d.get(key):
            with open(d[key], "rb") as f:
                text += f.read()
    return [name for name in names if name.encode() in text]
