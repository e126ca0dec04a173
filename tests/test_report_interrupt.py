"""``starchol report``: progress when not on a terminal, the output folder made only when
written (none left by an interruption or an error), the single-process SIGTERM message,
and the refusal of a node range whose model cannot fit in memory."""
import os
import signal
import subprocess
import threading

import pytest

from conftest import _starchol_exe
from starchol.cli import main
from starchol.errors import UsageError
from starchol.jobs.preflight import memory_available
from starchol.files import OutputFolder
from starchol.jobs.preflight import max_nodes_in_memory, model_memory_bytes


def test_sigterm_of_a_long_model_report(tmp_path):
    out = tmp_path / "new" / "out"
    proc = subprocess.Popen(_starchol_exe() + ["report", "--model", "--nodes-range",
                                               "3..3000", "--nt", "200", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    guard = threading.Timer(90, os.killpg, (proc.pid, signal.SIGKILL))  # a hang fails
    guard.start()
    try:
        # stderr is a pipe, not a terminal: progress comes as plain lines, the first at once
        seen = []
        while not (seen and seen[-1].startswith("model report:")) and len(seen) < 20:
            seen.append(proc.stderr.readline())   # (a first-run warning may come before)
        assert seen[-1].startswith("model report: 0/2998 node counts (0%)"), seen
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        rc = proc.wait()
    finally:
        guard.cancel()
    assert rc == 128 + signal.SIGTERM, rest
    assert ("starchol report: stopped by SIGTERM (sent by another process: kill, timeout, "
            "or a job manager ending the job); temporary files removed") in rest
    assert "rank" not in rest and "mpirun" not in rest
    assert not (tmp_path / "new").exists()  # nothing was written: no folder made


def test_output_folder_is_made_at_the_first_write_and_removed_on_error(tmp_path):
    target = tmp_path / "a" / "b"
    folder = OutputFolder(str(target))
    assert not (tmp_path / "a").exists()          # checked, not created
    with pytest.raises(RuntimeError):
        with folder:
            with open(folder.path("report.md"), "w") as fh:
                fh.write("half")
            assert (target / "report.md").is_file()
            raise RuntimeError("a figure failed")
    assert not (tmp_path / "a").exists()          # made by it, so removed with its parent
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "old.md").write_text("mine")
    with pytest.raises(RuntimeError):
        with OutputFolder(str(kept), overwrite=True) as folder:
            folder.path("report.md")
            raise RuntimeError("a figure failed")
    assert (kept / "old.md").read_text() == "mine"  # a folder it did not make is kept
    with pytest.raises(UsageError, match="exists and is not a folder"):
        OutputFolder(str(kept / "old.md" / "sub"))


@pytest.mark.skipif(memory_available()[0] is None, reason="no memory figure on this host")
def test_node_range_whose_model_cannot_fit_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / "o"
    assert main(["report", "--model", "--nodes-range", "3..100000000", "--nt", "10",
                 "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert ("starchol report: error: --nodes-range 3..100000000: the exact model holds P x P "
            "matrices of byte counts; at P = 100000000 they need about 160.00 PB of memory "
            "but ") in err
    assert "the largest node count that fits is" in err and not out.exists()
    # 2 P x P matrices of 8-byte counts; the largest P that fits, by hand
    assert model_memory_bytes(1000) == 16 * 10**6
    assert max_nodes_in_memory(16 * 10**6) == 1000
    assert max_nodes_in_memory(16 * 10**6 - 1) == 999
