"""The generated hostile cases (:mod:`tests.hostile.generated`): every output option of
every subcommand against the hostile targets, every input option against the hostile
sources, every typed option against the values its own type refuses, and the script
text of ``slurm``; generated from the parser, so a new command is covered without a new
case. In process, each a refusal before any work (status 2, one line), with the
inputs' sha256 unchanged and nothing left behind; a case that hangs fails by its timeout.

``test_a_new_command_is_covered`` adds a dummy subcommand with an ``--out`` option:
written without the shared output path (:func:`starchol.files.check_output`), its
generated cases fail; written with it, they pass."""
import os
import stat
import types

import pytest

from starchol.cli import build_parser

from .conftest import call_main, snapshot
from .data import make_inputs
from .generated import case_paths_ok, generate_cases, make_generated_inputs

#: seconds after which a generated case counts as hung (pytest-timeout; the machine is
#: shared)
HANG_S = 60

CASES = generate_cases(build_parser())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile-generated")
    make_inputs(str(d))
    make_generated_inputs(str(d))
    yield str(d)
    os.chmod(f"{d}/ro", 0o755)          # so that pytest can remove it


def fill(argv, d, t):
    return [w.replace("{d}", d).replace("{t}", t) for w in argv]


def check_case(case, d, tmp_path):
    """Run one generated case; return the list of what it broke (empty: it held)."""
    name, argv, words = case
    argv = fill(argv, d, str(tmp_path))
    before = snapshot(d)
    null = os.stat("/dev/null")
    status, out, err = call_main(argv)
    broken = []
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if status != 2:
        broken.append(f"status {status}, not 2: {err[-300:]!r}")
    elif len(lines) != 1 or not lines[0].startswith(f"starchol {argv[0]}: error: "):
        broken.append(f"not one error line: {err[-300:]!r}")
    elif words and words not in lines[0]:
        broken.append(f"{words!r} not in {lines[0]!r}")
    if "Traceback" in err:
        broken.append("a traceback")
    if snapshot(d) != before:
        broken.append("an input changed")
    if not stat.S_ISCHR(os.stat("/dev/null").st_mode) or \
            os.stat("/dev/null").st_rdev != null.st_rdev:
        broken.append("/dev/null replaced")
    if not case_paths_ok(d):
        broken.append("the read-only folder's mode changed")
    left = os.listdir(tmp_path)
    if left:
        broken.append(f"left behind: {left}")
    return broken


@pytest.mark.timeout(HANG_S)
@pytest.mark.parametrize("case", CASES, ids=[c[0].replace("\0", "\\0") for c in CASES])
def test_generated_case(case, inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STARPU_SILENT", "1")
    broken = check_case(case, inputs, tmp_path)
    assert not broken, broken


def test_every_command_has_generated_cases():
    """Each subcommand with an output or input option gets cases of that class."""
    names = {c[1][0] for c in CASES}
    assert set(build_parser().command_parsers) <= names | {"info"}
    assert len(CASES) >= 400, len(CASES)


def _dummy_module(checked):
    """A subcommand ``dummy --out FILE`` that writes FILE: ``checked`` through the shared
    output path, else with a bare ``open``."""
    def register(sub):
        p = sub.add_parser("dummy", help="a command added by a test")
        p.add_argument("--out", metavar="FILE", required=True)
        p.set_defaults(func=run)

    def run(args):
        if checked:
            from starchol.files import check_output, write_atomic

            check_output(args.out, "--out")
            write_atomic(args.out, "dummy\n")
        else:
            # (non-blocking: a FIFO without a reader fails instead of hanging the test)
            fd = os.open(args.out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NONBLOCK)
            os.write(fd, b"dummy\n")
            os.close(fd)
        return 0

    return types.SimpleNamespace(register=register)


@pytest.mark.parametrize("checked", [False, True], ids=["bare open", "shared path"])
def test_a_new_command_is_covered(checked, inputs, tmp_path_factory, monkeypatch):
    """A dummy subcommand with ``--out`` is found by the generator; its cases fail when
    it writes with a bare ``open`` and pass through the shared output path."""
    import starchol.jobs

    real = starchol.jobs.command_modules
    monkeypatch.setattr(starchol.jobs, "command_modules",
                        lambda: [*real(), _dummy_module(checked)])
    cases = [c for c in generate_cases(build_parser()) if c[1][0] == "dummy"]
    assert len(cases) >= 10 and all("--out" in c[1] for c in cases), cases
    monkeypatch.setenv("STARPU_SILENT", "1")
    failed = []
    for k, case in enumerate(cases):
        t = tmp_path_factory.mktemp(f"dummy{k}")
        monkeypatch.chdir(t)
        try:
            if check_case(case, inputs, t):
                failed.append(case[0])
        finally:
            for name in os.listdir(t):      # what a bare open left
                os.remove(os.path.join(t, name))
            _restore(inputs)
    if checked:
        assert failed == [], failed
    else:
        assert {"dummy --out existing file", "dummy --out device",
                "dummy --out link out of its folder"} <= set(failed), failed


def _restore(d):
    """Put back what the unchecked dummy overwrote in the inputs' folder."""
    with open(f"{d}/exists.json", "w") as fh:
        fh.write('{"kept": true}\n')
