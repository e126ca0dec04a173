"""The documents against the code (README.md and docs/*.md), so that a command copied
from them works:

- every ``starchol CMD ...`` line of a code block parses with the installed command's
  parser, and every option an inline ```starchol CMD ...``` span names is an option of
  CMD; the options shown for ``python benchmarks|examples/X.py`` and ``scripts/X.sh`` are
  options of that program;
- docs/api.md names every exported name, with the signatures the code has;
- the JSON keys the documents list are written by ``compare``, ``plan``, ``bench``,
  ``info`` and held by ``RunRecord`` (``volume``'s: tests/test_cli_model.py).

Only ``bench`` and ``info`` start a process (one each, 1 rank); the rest is parsing.
"""
import ast
import inspect
import json
import os
import re
import shlex

import numpy as np
import pytest

import starchol
from conftest import _starchol_exe, run_or_fail
from starchol.cli import build_parser, check_command_argv, main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(
    os.path.join(ROOT, "docs")) if f.endswith(".md"))
COMMANDS = build_parser().command_parsers
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _text(doc):
    with open(os.path.join(ROOT, doc)) as f:
        return f.read()


def _code_lines(doc):
    """(line, text) of every line in a fenced code block, continuation lines joined."""
    out = []
    text = _text(doc)
    for block in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M):
        start = text[:block.start()].count("\n") + 2
        joined, first = "", None
        for k, line in enumerate(block.group(1).splitlines()):
            first = start + k if first is None else first
            if line.rstrip().endswith("\\"):
                joined += line.rstrip()[:-1] + " "
                continue
            out.append((first, joined + line))
            joined, first = "", None
    return out


def _inline_spans(doc):
    """The inline code spans of ``doc`` outside code blocks (one may wrap a line)."""
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", _text(doc), flags=re.S | re.M)
    return [s.replace("\n", " ") for s in re.findall(r"`([^`]{1,300})`", prose)]


def _starchol_argv(text):
    """(command, argv) of a shown ``starchol CMD ...`` line, or None. Comments are
    dropped, ``[...]`` optional parts kept, ``a|b`` alternatives take ``a``, ``...``
    dropped."""
    text = re.sub(r"(^|\s)#\s.*$", "", text)
    m = re.search(r"(?:^|[\s/])(?:starchol|python -m starchol)\s+([a-z]+)(?=\s|$)(.*)", text)
    if not m or m.group(1) not in COMMANDS:
        return None
    rest = m.group(2)
    words = []
    for w in shlex.split(rest):
        w = w.strip("[]")
        if w and w != "...":
            words.append(w.split("|")[0] if "|" in w and not w.startswith("-") else w)
    return m.group(1), words


def _shown_command_lines():
    for doc in DOCS:
        for line, text in _code_lines(doc):
            found = _starchol_argv(text.lstrip("$ "))
            if found:
                yield pytest.param(*found, id=f"{doc}:{line}")


@pytest.mark.parametrize("command, argv", list(_shown_command_lines()))
def test_shown_command_lines_parse(command, argv):
    assert check_command_argv(command, argv) is None


def _options(command):
    return {o for a in COMMANDS[command]._actions for o in a.option_strings}


def test_every_option_says_what_it_does():
    """``starchol CMD --help`` explains every option (compare's --cache had no text)."""
    assert not [f"starchol {c} {'/'.join(a.option_strings)}" for c, p in COMMANDS.items()
                for a in p._actions if a.option_strings and not a.help]


def test_inline_commands_name_only_their_options():
    """(An option that was removed is named without ``starchol CMD`` before it, with
    what replaced it.)"""
    wrong = []
    for doc in DOCS:
        for span in _inline_spans(doc):
            m = re.search(r"(?:^|[\s/])starchol ([a-z]+)(?=\s|$)(.*)", span)
            if not m or m.group(1) not in COMMANDS:
                continue
            rest = m.group(2).split("--run-arg")[0]   # a slurm --run-arg is run's
            for flag in FLAG.findall(rest):
                if flag not in _options(m.group(1)):
                    wrong.append(f"{doc}: `{span}`: starchol {m.group(1)} has no {flag}")
    assert not wrong, "\n".join(wrong)


def _program_flags(text):
    """(program path, flags) for ``python benchmarks|examples/X.py ...`` and
    ``scripts/X.sh ...`` (the flags up to a program it launches)."""
    m = re.search(r"\b((?:benchmarks|examples)/\w+\.py|scripts/[\w-]+\.sh)\b(.*)", text)
    if not m:
        return None
    rest = re.split(r"\s(?:mpirun|exec|sbatch|&&|\|)\s|\S*starchol\s", m.group(2) + " ")[0]
    return m.group(1), FLAG.findall(rest)


def test_shown_script_options_exist():
    wrong = []
    for doc in DOCS:
        shown = [t for _, t in _code_lines(doc)] + _inline_spans(doc)
        for text in shown:
            found = _program_flags(text)
            if not found:
                continue
            path, flags = found
            with open(os.path.join(ROOT, path)) as f:
                source = f.read()
            wrong += [f"{doc}: {text.strip()}: {path} has no {flag}" for flag in flags
                      if f'"{flag}"' not in source and f"'{flag}'" not in source
                      and f"{flag})" not in source and f"{flag}|" not in source]
    assert not wrong, "\n".join(wrong)


def test_named_modules_and_functions_exist():
    """Every `starchol.a.b` the documents name imports or is an attribute (a renamed
    function left `starchol.collective.agree` in docs/reliability.md)."""
    import importlib

    missing = []
    for doc in DOCS:
        for name in set(re.findall(r"`(starchol(?:\.\w+)+)", _text(doc))):
            parts = name.split(".")
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for attr in parts[i:]:
                    obj = getattr(obj, attr, None)
                break
            if obj is None:
                missing.append(f"{doc}: {name}")
    assert not missing, "\n".join(missing)


# -- docs/api.md ---------------------------------------------------------------------------
def _documented_signatures():
    """{qualified name: [(param, default text or None)]} of every ``name(params)`` code
    span of docs/api.md whose name is an exported callable or a method of one."""
    from starchol import DistributedMatrix, Factor, Session

    owners = {"DistributedMatrix": DistributedMatrix, "Factor": Factor, "Session": Session}
    found = {}
    for span in re.findall(r"`([^`\n]+)`", _text("docs/api.md")):
        m = re.fullmatch(r"(?:(\w+)\.)?(\w+)\((.*)\)", span.strip())
        if not m:
            continue
        owner, name, params = m.groups()
        if owner is None and name in starchol.__all__:
            obj = getattr(starchol, name)
        else:
            cls = owners.get(owner) or next((c for c in owners.values()
                                             if hasattr(c, name)), None)
            if cls is None or not hasattr(cls, name):
                continue
            obj, name = getattr(cls, name), f"{cls.__name__}.{name}"
        if not callable(obj) or not params.strip() and "(" not in span:
            continue
        parsed = []
        for p in (q.strip() for q in params.split(",") if q.strip()):
            key, _, default = p.partition("=")
            parsed.append((key.strip(), default.strip() or None))
        found.setdefault(name, []).append((obj, parsed))
    return found


def _same_default(text, value):
    if text == "float64":
        return value in (np.float64, "float64")
    try:
        return ast.literal_eval(text) == value
    except ValueError:
        return False


def test_api_md_names_every_export_with_its_signature():
    text = _text("docs/api.md")
    assert not [n for n in starchol.__all__ if n != "__version__" and f"`{n}" not in text]
    documented = _documented_signatures()
    for must in ("Session", "DistributedMatrix", "cholesky", "DistributedMatrix.from_hdf5",
                 "DistributedMatrix.to_hdf5", "Factor.solve"):
        assert must in documented, f"docs/api.md shows no signature of {must}"
    wrong = []
    for name, shown in documented.items():
        for obj, params in shown:
            real = [p for p in inspect.signature(obj).parameters.values()
                    if p.name not in ("self", "cls")]
            if not params and real and all(p.default is not p.empty for p in real):
                continue        # a call shown without its (all defaulted) arguments
            names = [p for p, _ in params if not p.startswith("*")]
            if names != [p.name for p in real if p.kind not in (p.VAR_POSITIONAL,
                                                                p.VAR_KEYWORD)]:
                wrong.append(f"{name}: docs/api.md shows ({', '.join(names)}), the code "
                             f"has {inspect.signature(obj)}")
                continue
            by_name = {p.name: p for p in real}
            wrong += [f"{name}: {p} defaults to {by_name[p].default!r}, not {d}"
                      for p, d in params if d is not None and p in by_name
                      and not _same_default(d, by_name[p].default)]
    assert not wrong, "\n".join(wrong)


def test_api_md_lists_every_run_record_field():
    import dataclasses

    from starchol import RunRecord

    section = _text("docs/api.md").split("## `RunRecord`", 1)[1].split("\n## ", 1)[0]
    shown = set(re.findall(r"`(\w+)`", section))
    fields = {f.name for f in dataclasses.fields(RunRecord)}
    derived = {"flops", "gflops", "bytes_measured_total", "bytes_predicted_total", "match"}
    assert not (fields | derived) - shown
    assert all(isinstance(getattr(RunRecord, d), property) for d in derived)


# -- JSON keys the documents list ----------------------------------------------------------
def _keys(doc, prefix=""):
    """Every key of a JSON document, nested ones as ``parent.key``."""
    out = set()
    for k, v in doc.items():
        out.add(prefix + k)
        if isinstance(v, dict):
            out |= _keys(v, prefix + k + ".")
    return out


def _shown(doc, keys):
    """The keys ``doc`` (or every document, for None) does not show: a key counts as
    shown as `a.b.c`, `.b.c`, `.c`, `c` (listed under its parent) or `c[]` (a list)."""
    spans = {s for d in ([doc] if doc else DOCS) for s in _inline_spans(d)}
    missing = []
    for key in keys:
        parts = key.split(".")
        forms = {key, parts[-1], parts[-1] + "[]", key + "[]"}
        forms |= {"." + ".".join(parts[i:]) for i in range(1, len(parts))}
        if not forms & spans:
            missing.append(key)
    return missing


#: keys docs/volume-model.md lists for compare's and plan's documents (a row's "map
#: keys" are dist, nodes, slices and map)
COMPARE_KEYS = {"nodes", "nt", "n", "nb", "dtype", "cache", "rows"}
COMPARE_ROW = {"dist", "nodes", "slices", "map", "transfers_tiles", "bytes", "ratio",
               "leading_term_tiles", "leading_ratio", "flops_max_over_avg",
               "tiles_per_node_max"}
PLAN_KEYS = {"nodes", "n", "nb", "dtype", "memory_per_node", "node_gflops", "node_bandwidth", "step_latency_s", "rows",
             "pick", "explanation", "commands"}
PLAN_ROW = {"dist", "nodes", "slices", "map", "pattern_size", "periods", "bytes", "ratio",
            "memory_per_node_bytes", "memory_parts", "tile_bytes_per_node",
            "busiest_node_traffic_bytes", "flops_max_over_avg",
            "tiles_max_over_avg", "compute_s", "comm_s", "overhead_s", "estimate_s", "fits"}


VOLUME_KEYS = {"dist", "nodes", "slices", "r", "map", "nt", "nb", "n", "dtype", "cache",
               "stored_tiles", "transfers_tiles", "bytes", "ratio", "leading_term_tiles",
               "per_node.sent_tiles", "per_node.received_tiles", "per_node.sent_bytes",
               "per_node.received_bytes", "load.tiles", "load.flops",
               "load.tiles_max_over_avg", "load.flops_max_over_avg", "pairs_tiles"}


def test_model_commands_write_the_documented_keys(capsys):
    assert not _shown("docs/volume-model.md", VOLUME_KEYS | COMPARE_KEYS | COMPARE_ROW
                      | PLAN_KEYS | (PLAN_ROW - {"dist", "nodes", "slices", "map"}))
    assert main(["volume", "--dist", "sbc", "--nodes", "6", "--nt", "8", "--json"]) == 0
    assert VOLUME_KEYS <= _keys(json.loads(capsys.readouterr().out))
    assert main(["compare", "--nodes", "6", "--nt", "8", "--quiet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert COMPARE_KEYS <= set(doc) and all(COMPARE_ROW <= set(r) for r in doc["rows"])
    assert main(["plan", "--nodes", "6", "--n", "2000", "--nb", "200", "--memory-per-node",
                 "1e9", "--quiet", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert PLAN_KEYS <= set(doc) and all(PLAN_ROW <= set(r) for r in doc["rows"])
    assert doc["pick"] in doc["rows"]


#: keys docs/engine.md lists for bench's and info's documents
BENCH_KEYS = {"n", "nb", "nt", "dtype", "lapack", "repeat", "cores", "starchol_gflops", "lapack_gflops",
              "starchol_median_gflops", "lapack_median_gflops", "ratio_median", "submit_s",
              "tasks", "runtime", "runtime.scheduler", "runtime.workers_per_rank",
              "runtime.starpu_version", "runtime.starpu_build", "runtime.kernel_blas"}
INFO_KEYS = {"starchol", "starpu.version", "starpu.prefix", "starpu.kind", "starpu.maxcpus",
             "starpu.fxt", "starpu.mpi", "starpu.cuda.built", "starpu.cuda.devices",
             "starpu.schedulers", "starpu.build", "mpi.library", "kernel_blas", "blas",
             "ranks"}


def _run_starchol(starpu_home, *argv):
    env = dict(os.environ, STARPU_HOME=starpu_home, STARPU_SILENT="1")
    proc = run_or_fail(_starchol_exe() + list(argv), env, 120, f"starchol {argv[0]}")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_bench_and_info_write_the_documented_keys(starpu_home):
    pytest.importorskip("starchol.runtime._binding")
    assert not _shown("docs/engine.md", BENCH_KEYS | INFO_KEYS)
    doc = _run_starchol(starpu_home, "bench", "--n", "256", "--nb", "128", "--repeat", "1",
                        "--no-lapack", "--json")
    assert BENCH_KEYS <= _keys(doc)
    assert doc["lapack_gflops"] == [] and doc["ratio_median"] is None   # --no-lapack
    assert doc["tasks"] == 4 and len(doc["starchol_gflops"]) == 1
    assert INFO_KEYS <= _keys(_run_starchol(starpu_home, "info", "--json"))


def test_bench_float32_times_spotrf(starpu_home):
    pytest.importorskip("starchol.runtime._binding")
    doc = _run_starchol(starpu_home, "bench", "--n", "256", "--nb", "128", "--repeat", "1",
                        "--dtype", "float32", "--json")
    assert doc["dtype"] == "float32" and doc["lapack"] == "spotrf"
    assert len(doc["lapack_gflops"]) == 1 and doc["ratio_median"] > 0


#: keys of ``starchol run --json`` beyond RunRecord's fields that the documents name
#: (docs/api.md: runtime; docs/runtime.md: memory; docs/gpu.md: kernels, device bytes)
RUN_KEYS = {"runtime.scheduler", "runtime.workers_per_rank", "runtime.starpu_version",
            "runtime.starpu_build", "runtime.kernel_blas", "runtime.gpus_per_rank",
            "runtime.cuda_workers_per_gpu",
            "memory.tile_bytes_per_node",
            "memory.peak_rss_bytes_per_rank", "memory.model_peak_bytes_per_rank",
            "kernels", "kernels_per_rank", "device_bytes",
            "device_bytes_per_rank", "residual", "logdet", "solve"}


def test_run_writes_the_documented_keys(starpu_home):
    """One rank without mpirun (as the README says run may be started)."""
    pytest.importorskip("starchol.runtime._binding")
    import dataclasses

    from starchol import RunRecord

    assert not _shown(None, RUN_KEYS)
    doc = _run_starchol(starpu_home, "run", "--dist", "2dbc", "--n", "200", "--nb", "100",
                        "--check", "--workers", "1", "--quiet", "--json")
    fields = {f.name for f in dataclasses.fields(RunRecord)} - {"extra"}
    assert RUN_KEYS | fields <= _keys(doc)
    assert doc["nodes"] == 1 and doc["match"] is True and doc["residual"] < 1e-12


def test_readme_names_every_command_and_its_documents():
    readme = _text("README.md")
    assert not [c for c in COMMANDS if f"starchol {c}" not in readme]
    linked = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme))
    named = {os.path.join("docs", d) for d in re.findall(r"`([\w-]+\.md)`", readme)}
    assert not [d for d in DOCS[1:] if d not in linked | named]
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", _text(doc)):
            if not re.match(r"\w+://", target):
                path = os.path.join(ROOT, os.path.dirname(doc), target)
                assert os.path.exists(path), f"{doc} links to {target}, which is missing"


@pytest.mark.parametrize("script, bad", [("cluster.sh", ["bogus"]),
                                         ("cluster.sh", ["--bogus", "up"]),
                                         ("slurm-local.sh", ["bogus", "/tmp/x"]),
                                         ("slurm-local.sh", ["start"])])
def test_command_scripts_answer_help_and_refuse_bad_command_lines(script, bad):
    """The two scripts with commands of their own: ``--help`` prints the header comment
    on stdout (exit 0), a wrong command line one line on stderr (exit 2), before any
    work (no root needed for either)."""
    path = os.path.join(ROOT, "scripts", script)
    ok = run_or_fail(["bash", path, "--help"], os.environ, 20, f"{script} --help")
    with open(path) as f:
        first = f.read().splitlines()[1].lstrip("# ")
    assert ok.returncode == 0 and ok.stdout.splitlines()[0] == first, ok.stderr
    res = run_or_fail(["bash", path, *bad], os.environ, 20, f"{script} {' '.join(bad)}")
    assert res.returncode == 2 and not res.stdout, res.stdout + res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "error: " in lines[0] and "(see --help)" in lines[0], lines


@pytest.mark.parametrize("script", ["setup.sh", "build-starpu.sh", "main-job.sh",
                                    "gpu-check.sh", "gpu-compile-check.sh", "cuda-home.sh"])
def test_scripts_answer_help_and_refuse_unknown_options_before_any_work(script, tmp_path):
    """``--help`` prints the script's header comment (its usage) and starts nothing:
    before, ``build-starpu.sh --help`` fetched StarPU and configured a build, and
    ``setup.sh --help`` ran the whole set-up."""
    path = os.path.join(ROOT, "scripts", script)
    env = dict(os.environ, STARCHOL_STARPU_CACHE=str(tmp_path / "cache"))
    ok = run_or_fail(["bash", path, "--help"], env, 20, f"{script} --help")
    with open(path) as f:
        first = f.read().splitlines()[1].lstrip("# ")
    assert ok.returncode == 0 and ok.stdout.splitlines()[0] == first, ok.stderr
    bad = run_or_fail(["bash", path, "--bogus"], env, 20, f"{script} --bogus")
    assert bad.returncode != 0 and "--bogus" in bad.stderr and not bad.stdout
    assert not os.path.exists(tmp_path / "cache")
    if script == "cuda-home.sh":  # takes OUT [TOOLKIT [NVIDIA_DIR...]]
        return
    # A second argument was silently ignored (only $1 was looked at).
    two = run_or_fail(["bash", path, "--help", "extra"], env, 20, f"{script} --help extra")
    assert two.returncode == 2 and "at most one argument" in two.stderr and not two.stdout


def test_run_documents_are_checked_against_the_schema_generated_from_their_types():
    """The run document's JSON Schema comes from RunRecord's type hints and its typed
    parts' (solve, mixed, memory, trace, kernels); every document `starchol run` writes
    under the test suite is checked against it (conftest sets the variable), and a
    document that breaks it is refused, saying where."""
    from starchol.errors import StarcholError
    from starchol.jobs import run_cmd
    from starchol.linalg.record import RunRecord, document_schema
    from starchol.linalg.run_parts import validate

    assert os.environ.get(run_cmd.CHECK_DOCUMENTS)
    schema = document_schema()
    props = schema["properties"]
    assert props["solve"] == {"anyOf": [{"$ref": "#"}, {"type": "null"}]}
    assert set(props["kernels"]["anyOf"][0]["additionalProperties"]["properties"]) == \
        {"cpu", "cuda"}
    assert {"iterations", "fallback", "time_s"} <= set(props["mixed"]["anyOf"][0]["required"])
    assert schema["required"] == ["dist", "nodes", "n", "nb"]
    doc = RunRecord(dist="sbc", nodes=3, n=100, nb=10, nt=10).with_extra(
        memory={"tile_bytes_per_node": [1, 2, 3], "tile_bytes_max": 3,
                "peak_rss_bytes_per_rank": [4, 5, 6], "model_peak_bytes_per_rank": [7, 8, 9]},
        kernels={"potrf": {"cpu": 10, "cuda": 0}}).to_dict()
    assert validate(schema, doc) is None
    run_cmd._check_document(doc)
    bad = {**doc, "memory": {**doc["memory"], "tile_bytes_max": "3 MB"}}
    assert validate(schema, bad) == "$.memory.tile_bytes_max: '3 MB' is not of type integer"
    with pytest.raises(StarcholError, match="does not match its schema"):
        run_cmd._check_document(bad)
    assert validate(schema, {**doc, "solve": {"dist": "sbc", "nodes": 3, "n": 0.5,
                                              "nb": 10}}) == \
        "$.solve.n: 0.5 is not of type integer"
