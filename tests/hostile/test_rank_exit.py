"""No hang when a rank exits (issue 47, High 7; docs/reliability.md, "the rank-exit
rule"): a rank that calls ``sys.exit("...")`` (a non-zero status) while the other ranks
wait for it in a collective ends the job on every rank promptly, as an uncaught
exception does; ``sys.exit(0)`` on every rank is a normal end. Under mpirun, 2 ranks,
with a timeout (a hang fails the case)."""

import pytest
from conftest import SPD_PROGRAM

PROGRAM = SPD_PROGRAM + """import sys
{setup}
F = cholesky(A, tm)
if comm.rank == 1:
    {exit}
print("logdet", F.logdet(), flush=True)      # rank 0 waits here for rank 1
{teardown}
"""

CASES = [
    # (id, how the session runs, the exit on rank 1, status, words)
    ("sys.exit message, session started", "s = Session(comm, workers=1).start()",
     'sys.exit("rank 1 gives up")', 1, "exited with status 1 (rank 1 gives up) (sys.exit)"),
    ("sys.exit 3, session started", "s = Session(comm, workers=1).start()",
     "sys.exit(3)", 3, "exited with status 3 (sys.exit)"),
    ("sys.exit message inside with", "with Session(comm, workers=1) as s:\n  if True:",
     'sys.exit("inside the block")', 1, "exited with status 1 (inside the block)"),
]


def _source(setup, exit_):
    if setup.startswith("with"):   # the body indented under the with block
        body = PROGRAM.split("{setup}\n", 1)[1].replace("{teardown}\n", "")
        body = body.replace("{exit}", exit_)
        head = PROGRAM.split("{setup}\n", 1)[0]
        return head + setup + "\n" + "\n".join("    " + ln for ln in body.splitlines()) + "\n"
    return PROGRAM.format(setup=setup, exit=exit_, teardown="")


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_rank_that_exits_ends_the_job(case, mpi_python):
    name, setup, exit_, status, words = case
    proc = mpi_python(2, _source(setup, exit_), timeout=60, what=name)
    assert proc.returncode == status, proc.stderr
    assert f"rank 1: {words}" in proc.stderr, proc.stderr
    assert "ending the job on every rank" in proc.stderr


def test_exit_0_on_every_rank_is_a_normal_end(mpi_python):
    """``sys.exit(0)`` everywhere after the work: the session shuts down together."""
    source = PROGRAM.format(setup="s = Session(comm, workers=1).start()", exit="pass",
                            teardown="sys.exit(0)")
    proc = mpi_python(2, source, timeout=60, what="sys.exit(0) on every rank")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("logdet") == 2
