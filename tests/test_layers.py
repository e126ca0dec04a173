"""The layers point one way, with no import cycle, and no module takes another's private names.

    core (starchol/*.py) <- distributions <- model (starchol/model/) <- runtime (+ pyx/)
    <- linalg <- reports <- command line

The source folders are mapped into ``starchol.*`` by ``setup.py``'s ``package_dir``
(``PACKAGE_DIRS``), which this test reads; every import counts, at module level or inside
a function (an import inside a function still ties the two modules together: it only
hides the cycle from Python). docs/architecture.md describes the layers.

The model layer imports neither StarPU, mpi4py nor h5py: it sits below the runtime, and
:func:`test_the_model_layer_imports_without_the_runtime` imports all of it with those
blocked.

Flag names live in the command line: no string of a module below it names one of the
flags its parsers define (:func:`flag_problems`); the library names its parameters and
the command line passes its flags (``role="--output"``) or translates
(:func:`starchol.cli.flag_message`).
"""
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: the layers, lowest first; a module may import its own layer and those below
LAYERS = ("core", "distributions", "model", "runtime", "linalg", "reports", "command line")

#: modules of the root folder that belong to the command line (the rest are core)
COMMAND_LINE_ROOT = ("starchol", "starchol.cli", "starchol.__main__")


def package_dirs(root):
    """``PACKAGE_DIRS`` of ``root/setup.py`` (package -> folder), read without running it."""
    tree = ast.parse(open(os.path.join(root, "setup.py")).read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "PACKAGE_DIRS" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError("setup.py has no PACKAGE_DIRS = {...}: the test reads package_dir "
                         "from it")


def layer_of(module):
    """The index in :data:`LAYERS` of a ``starchol.*`` module."""
    if module in COMMAND_LINE_ROOT or module.startswith("starchol.jobs"):
        return LAYERS.index("command line")
    for name in ("distributions", "model", "runtime", "linalg", "reports"):
        if module == f"starchol.{name}" or module.startswith(f"starchol.{name}."):
            return LAYERS.index(name)
    return LAYERS.index("core")


def modules(root):
    """``{module name: (source path, is package)}`` of the mapped folders and ``pyx/``."""
    out = {}
    for pkg, folder in package_dirs(root).items():
        for f in sorted(os.listdir(os.path.join(root, folder))):
            path = os.path.join(root, folder, f)
            if f.endswith(".py"):
                out[pkg if f == "__init__.py" else f"{pkg}.{f[:-3]}"] = (path, f == "__init__.py")
    pyx = os.path.join(root, "pyx")
    for f in sorted(os.listdir(pyx)) if os.path.isdir(pyx) else ():
        if f.endswith(".pyx"):   # compiled into starchol.runtime (build_flags.py)
            out[f"starchol.runtime.{f[:-4]}"] = (os.path.join(pyx, f), False)
    return out


#: the start of an import statement in Cython: ``import``/``cimport`` X, or ``from X
#: import``/``cimport`` ..., at any indentation (inside a def, a cdef or a ``with`` block)
_PYX_IMPORT = re.compile(r"\s*(from\s+\S+\s+c?import\b|c?import\s)")


def _statements(text):
    """``[(line, statement)]`` of the import statements of a Cython source, at any
    indentation, with the lines a parenthesis or a trailing backslash continues joined
    (comments dropped)."""
    lines = [line.split("#", 1)[0].rstrip() for line in text.splitlines()]
    out, k = [], 0
    while k < len(lines):
        if _PYX_IMPORT.match(lines[k]):
            first, buf = k + 1, lines[k]
            depth = buf.count("(") - buf.count(")")
            while (depth > 0 or buf.endswith("\\")) and k + 1 < len(lines):
                k += 1
                buf = buf.rstrip("\\") + " " + lines[k].strip()
                depth += lines[k].count("(") - lines[k].count(")")
            out.append((first, buf.strip()))
        k += 1
    return out


def _pyx_tree(*paths):
    """The ``import`` and ``cimport`` statements of Cython sources (``.pyx``, and the
    ``.pxd`` that declares the same module) as one AST, each at its line: a ``cimport``
    ties two modules as an ``import`` does, and so does an indented import."""
    body = []
    for path in paths:
        for number, statement in _statements(open(path).read()):
            statement = re.sub(r"\bcimport\b", "import", statement)
            try:
                nodes = ast.parse(statement).body
            except SyntaxError:      # prose in a docstring that reads like an import
                continue
            for node in nodes:
                node.lineno = number
                body.append(node)
    return ast.Module(body=body, type_ignores=[])


def _pxd_of(root, module):
    """The ``.pxd`` of a compiled module (``pyx/starchol/runtime/_x.pxd``), if any."""
    path = os.path.join(root, "pyx", *module.split(".")) + ".pxd"
    return (path,) if os.path.isfile(path) else ()


def imports(root):
    """``[(module, line, imported module, name or None)]`` for every starchol import.

    ``from pkg import name`` is an import of ``pkg.name`` when that is a module, else of
    ``pkg`` (taking ``name``)."""
    mods = modules(root)
    out = []
    for mod, (path, is_pkg) in mods.items():
        tree = (_pyx_tree(path, *_pxd_of(root, mod)) if path.endswith(".pyx")
                else ast.parse(open(path).read()))
        base = mod if is_pkg else mod.rsplit(".", 1)[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out += [(mod, node.lineno, a.name, None) for a in node.names
                        if a.name.split(".")[0] == "starchol"]
            elif isinstance(node, ast.ImportFrom):
                target = node.module or ""
                if node.level:
                    target = ".".join(base.split(".")[:len(base.split(".")) - node.level + 1]
                                      + ([node.module] if node.module else []))
                if target.split(".")[0] != "starchol":
                    continue
                for a in node.names:
                    sub = f"{target}.{a.name}"
                    if sub in mods:
                        out.append((mod, node.lineno, sub, None))   # a (compiled) module
                    else:
                        out.append((mod, node.lineno, target, a.name))
    return out


def problems(root):
    """Every upward import, import cycle and private name taken across modules, as text."""
    mods = modules(root)
    found = []
    graph = {m: set() for m in mods}
    for mod, line, target, name in imports(root):
        where = f"{os.path.relpath(mods[mod][0], root)}:{line}"
        if target not in mods and target.rsplit(".", 1)[0] in mods:
            target = target.rsplit(".", 1)[0]
        if layer_of(target) > layer_of(mod):
            found.append(f"{where}: {mod} ({LAYERS[layer_of(mod)]}) imports {target} "
                         f"({LAYERS[layer_of(target)]}), a layer above it")
        if name and name.startswith("_") and not name.startswith("__"):
            found.append(f"{where}: {mod} takes the private name {name} of {target}")
        if target != mod and target in mods:
            graph[mod].add(target)
    found += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    return found


def cycles(graph):
    """One cycle (a list of modules, first repeated last) per strongly connected group of
    ``graph`` (module -> imported modules) that has more than one module."""
    index, low, stack, on, out, count = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = count[0]
        count[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(_cycle_in(graph, group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _cycle_in(graph, group):
    """A path through ``group`` from its first module back to it (breadth first)."""
    start = min(group)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & group):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    return sorted(group)  # pragma: no cover - a strongly connected group has a cycle


def test_layers_point_one_way_without_cycles():
    assert problems(ROOT) == []


def test_every_mapped_folder_is_read():
    mods = modules(ROOT)
    assert {"starchol.distributions.factory", "starchol.runtime.session",
            "starchol.linalg.cholesky", "starchol.jobs.run_cmd", "starchol.collective",
            "starchol.reports.model", "starchol.model.volume", "starchol.model.counts",
            "starchol.runtime._graphs"} <= set(mods)
    assert layer_of("starchol.model.volume") == LAYERS.index("model")
    assert layer_of("starchol.runtime._binding") == LAYERS.index("runtime")


@pytest.fixture
def tree(tmp_path):
    """A copy of the sources the test reads (setup.py and the mapped folders)."""
    shutil.copy(os.path.join(ROOT, "setup.py"), tmp_path)
    for folder in list(package_dirs(ROOT).values()) + ["pyx"]:
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("*.so", "*.c", "*.cpp", "*.h",
                                                      "__pycache__"))
    return tmp_path


def _plant(path, line):
    text = path.read_text()
    path.write_text(text + "\n\ndef planted():\n    " + line + "\n")


def test_a_planted_cycle_fails(tree):
    """An import inside a function still closes the cycle factory -> sliced -> factory."""
    _plant(tree / "distributions" / "sliced.py", "from .factory import get_map")
    found = problems(str(tree))
    assert found == ["import cycle: starchol.distributions.factory -> "
                     "starchol.distributions.sliced -> starchol.distributions.factory"]


def test_a_planted_upward_import_fails(tree):
    _plant(tree / "runtime" / "traces.py", "from ..jobs.output import write_atomic")
    found = problems(str(tree))
    assert len(found) == 1 and found[0].startswith("runtime/traces.py:")
    assert found[0].endswith("starchol.runtime.traces (runtime) imports starchol.jobs.output "
                             "(command line), a layer above it")


def test_a_planted_private_import_fails(tree):
    _plant(tree / "linalg" / "hdf5_io.py", "from ..collective import _equal")
    found = problems(str(tree))
    assert len(found) == 1
    assert "starchol.linalg.hdf5_io takes the private name _equal of starchol.collective" \
        in found[0]


#: run in a fresh interpreter: mpi4py and h5py blocked, and any module of the runtime
#: (its compiled part included) refused, then every module of the model layer imported
_BLOCKED_IMPORT = textwrap.dedent("""
    import importlib, json, os, sys
    sys.modules["mpi4py"] = sys.modules["h5py"] = None

    class Refuse:
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if top in ("mpi4py", "h5py") or name.split(".")[:2] == ["starchol", "runtime"]:
                raise ImportError(f"blocked for the test: {name}")
            return None

    sys.meta_path.insert(0, Refuse())
    import starchol.model
    folder = os.path.dirname(starchol.model.__file__)
    names = sorted(f[:-3] for f in os.listdir(folder)
                   if f.endswith(".py") and f != "__init__.py")
    for name in names:
        importlib.import_module("starchol.model." + name)
    heavy = sorted(m for m in sys.modules if sys.modules[m] is not None and (
        m.split(".")[0] in ("mpi4py", "h5py") or m.startswith("starchol.runtime")
        or m.startswith("starchol.linalg") or m.startswith("starchol.jobs")))
    print(json.dumps({"names": names, "heavy": heavy}))
""")


def test_the_model_layer_imports_without_the_runtime():
    """The whole model layer imports with mpi4py and h5py blocked and the runtime (its
    compiled modules included) refused, and loads none of them, nor linalg or jobs."""
    out = subprocess.run([sys.executable, "-c", _BLOCKED_IMPORT], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert {"volume", "mixed_volume", "memory", "plan", "volume_summary", "platform",
            "counts", "operations", "link_load", "load"} <= set(got["names"])
    assert got["heavy"] == []


def test_the_model_layer_sits_below_the_runtime(tree):
    """An import of the runtime (or of linalg) from the model layer is an upward import."""
    _plant(tree / "starchol" / "model" / "volume.py", "from ..runtime import backend")
    found = problems(str(tree))
    assert len(found) == 1 and found[0].startswith("starchol/model/volume.py:")
    assert found[0].endswith("starchol.model.volume (model) imports starchol.runtime.backend "
                             "(runtime), a layer above it")


def test_cimports_and_indented_imports_of_pyx_are_read():
    """The compiled modules' ``cimport`` statements (a parenthesised list over several
    lines included) count as imports."""
    found = {(mod, target) for mod, _, target, _ in imports(ROOT)}
    assert ("starchol.runtime._graphs", "starchol.runtime._binding") in found
    assert ("starchol.runtime._graphs", "starchol.runtime._kernels") in found


@pytest.mark.parametrize("line", [
    "    from starchol.linalg.record cimport RunRecord",
    "        cimport starchol.linalg.record",
    "    from starchol.linalg.record import (  # a comment\\n        RunRecord,\\n    )",
])
def test_a_planted_cimport_or_indented_import_in_pyx_fails(tree, line):
    """A cimport, or an import indented inside a function, of the library from the
    compiled runtime is an upward import."""
    path = tree / "pyx" / "_graphs.pyx"
    path.write_text(path.read_text() + "\n\ndef planted():\n" + line.replace("\\n", "\n")
                    + "\n")
    found = problems(str(tree))
    assert len(found) == 1 and found[0].startswith("pyx/_graphs.pyx:"), found
    assert found[0].endswith("starchol.runtime._graphs (runtime) imports "
                             "starchol.linalg.record (linalg), a layer above it")


def command_line_flags(root):
    """Every option string (``--output``, ``-o``) that the command line's parsers define:
    the string arguments of its ``add_argument`` calls, read without running it."""
    flags = set()
    for mod, (path, _) in modules(root).items():
        if layer_of(mod) != LAYERS.index("command line") or not path.endswith(".py"):
            continue
        for node in ast.walk(ast.parse(open(path).read())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "add_argument":
                flags.update(a.value for a in node.args if isinstance(a, ast.Constant)
                             and isinstance(a.value, str) and a.value.startswith("-"))
    return flags


def _strings(tree):
    """``[(line, text)]`` of the string literals of a module that are not docstrings (an
    f-string's literal parts joined, ``{}`` for each value)."""
    docs = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            docs.add(id(body[0].value))          # a docstring
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            docs.add(id(node.value))             # an attribute's docstring
    out, parts = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts.update(id(v) for v in node.values)
            out.append((node.lineno, "".join(v.value if isinstance(v, ast.Constant) else "{}"
                                             for v in node.values)))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs and id(node) not in parts):
            out.append((node.lineno, node.value))
    return sorted(out)


#: a command line of the tool written out (``starchol run ... --json``): where a file
#: comes from, which a library message may say
_COMMAND = re.compile(r"\bstarchol [a-z]+\b")


def flag_problems(root):
    """Every string literal (docstrings aside) of a module below the command line that
    names one of its flags (:func:`command_line_flags`), as ``path:line: text``; a flag
    after ``starchol COMMAND`` in the same string (a command line written out) is
    allowed."""
    flags = command_line_flags(root)
    pattern = re.compile(r"(?<![\w-])(%s)(?![\w-])" % "|".join(
        re.escape(f) for f in sorted(flags, key=len, reverse=True)))
    found = []
    for mod, (path, _) in sorted(modules(root).items()):
        if layer_of(mod) == LAYERS.index("command line") or not path.endswith(".py"):
            continue
        for line, text in _strings(ast.parse(open(path).read())):
            for m in pattern.finditer(text):
                if not _COMMAND.search(text, 0, m.start()):
                    found.append(f"{os.path.relpath(path, root)}:{line}: {m.group(1)} in "
                                 f"{text!r}")
    return found


def test_flag_names_live_in_the_command_line():
    assert {"--output", "--input", "--overwrite", "--json", "-o"} <= command_line_flags(ROOT)
    assert flag_problems(ROOT) == []


@pytest.mark.parametrize("folder, line", [
    ("starchol/paths.py", 'ROLES = ("--input", "RUN.json")'),
    ("linalg/hdf5_write.py", 'raise ValueError(f"{path} exists; pass --overwrite")'),
    ("starchol/writes.py", 'return dict(role="-o")'),
])
def test_a_planted_flag_below_the_command_line_fails(tree, folder, line):
    """A flag name in a library string (a default, a table, a message) is found; one in a
    docstring, or after ``starchol COMMAND``, is not."""
    _plant(tree / folder, line)
    found = flag_problems(str(tree))
    assert len(found) == 1 and found[0].startswith(f"{folder}:"), found
    _plant(tree / "starchol" / "units.py",
           '"""Like ``--output``."""\n    return "written by starchol run --output"')
    assert flag_problems(str(tree)) == found
