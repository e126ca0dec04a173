"""The hostile suite: the bad inputs a user tries, each with its promised outcome
(docs/reliability.md, "The hostile suite"). Every case asserts the exit status, one
clear line on every rank, the inputs' sha256 unchanged and nothing left behind; a case
that hangs fails by its timeout. The count of cases is printed in the summary, so it can only grow."""
import contextlib
import hashlib
import io
import os
import stat

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_terminal_summary(terminalreporter):
    """``hostile suite: N cases (P passed, F failed, S skipped)`` after the run."""
    counts = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for rep in terminalreporter.stats.get(outcome, []):
            if getattr(rep, "when", "call") not in ("call", "setup"):
                continue
            if os.path.abspath(str(rep.fspath)).startswith(HERE):
                if rep.when == "setup" and outcome == "passed":
                    continue
                counts[outcome] = counts.get(outcome, 0) + 1
    total = sum(counts.values())
    if total:
        parts = ", ".join(f"{v} {k}" for k, v in counts.items())
        terminalreporter.write_line(f"hostile suite: {total} cases ({parts})")


def call_main(argv):
    """``starchol.cli.main(argv)`` in this process -> (status, stdout, stderr); argparse's
    exits are statuses."""
    from starchol.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
    return rc, out.getvalue(), err.getvalue()


def sha(path):
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def snapshot(folder):
    """``{name: what}`` of every entry of ``folder`` (recursively): a regular file's
    sha256, else its kind (a link's target, a device's numbers), so a case sees any
    file changed, added, removed or replaced by another kind."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link -> " + os.readlink(path)
            elif stat.S_ISREG(st.st_mode) and st.st_size > 2 ** 20:
                # a large (sparse) file: its identity, size and times, not its bytes
                out[rel] = (f"file {st.st_ino} {st.st_size} {st.st_mtime_ns} "
                            f"{st.st_ctime_ns} {stat.S_IMODE(st.st_mode):o}")
            elif stat.S_ISREG(st.st_mode):
                out[rel] = sha(path)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = "folder"
            else:
                out[rel] = f"special {stat.S_IFMT(st.st_mode):o} {st.st_rdev}"
    return out
