"""A handful of command-line runs end to end under mpirun: ``--json -``, the cache option
(new and old spelling), ``-v`` logging, the progress line off a terminal, units, and a
report made from the run document."""
import json
import os

from starchol.cli import main


def test_json_to_stdout_verbose_progress_and_units(mpirun):
    p = mpirun(2, "run", "--dist", "2dbc", "--n", "400", "--nb", "50", "--cache", "off",
               "--json", "-", "-v", "--workers", "1", timeout=120)
    assert p.rank_exits == [0, 0], p.stderr
    doc = json.loads(p.stdout)          # stdout holds the JSON document only
    assert doc["cache"] is False and doc["match"] is True and doc["nodes"] == 2
    assert "pre-flight passed on 2 rank(s)" in p.stderr          # -v after the command
    progress = [ln for ln in p.stderr.splitlines() if ln.startswith("rank 0 tasks")]
    assert progress and "(100%)" in progress[-1] and "\r" not in p.stderr
    assert progress[-1].startswith("rank 0 tasks (2 ranks): ")
    summary = p.stderr[p.stderr.index("starchol run:"):]
    assert " kB (" in summary or " MB (" in summary               # decimal units
    assert "MiB" not in p.stderr


def test_old_cache_spelling_quiet_and_report(mpirun, tmp_path):
    doc_path = tmp_path / "r.json"
    p = mpirun(2, "run", "--dist", "2dbc", "--n", "300", "--nb", "50", "--no-cache",
               "--quiet", "--check", "--json", doc_path, "--workers", "1", timeout=120)
    assert p.rank_exits == [0, 0], p.stderr
    assert "rank 0 tasks" not in p.stderr
    doc = json.loads(doc_path.read_text())
    assert doc["cache"] is False and doc["residual"] < 1e-12
    assert "per-pair match: yes" in p.stdout
    out = tmp_path / "rep"
    assert main(["report", str(doc_path), "-o", str(out), "--quiet"]) == 0
    text = (out / "report.md").read_text()
    assert "2dbc" in text and "Traceback" not in text
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_argument_error_is_one_line_on_every_rank(mpirun):
    p = mpirun(2, "run", "--dist", "sbc", "--nodes", "3", "--n", "300", "--nb", "50",
               timeout=60)
    assert p.rank_exits == [2, 2], p.stderr
    lines = [ln for ln in p.stderr.splitlines() if not ln.startswith("starchol-exit=")]
    assert len(lines) == 2 and "usage:" not in p.stderr, p.stderr
    for line in lines:
        assert line.startswith("starchol run: error: unrecognized arguments: --nodes 3; "
                               "run has no --nodes: the node count is mpirun -np P")


def test_float32_run_check_output_gather(mpirun, tmp_path):
    """--dtype float32: the float32 kernels, a float32 factor in the HDF5 file and the
    .npy, bytes measured = the model's with 4-byte entries (half of float64's)."""
    import h5py
    import numpy as np
    import scipy.linalg

    from starchol.distributions import get_map
    from starchol.linalg import matrices
    from starchol.linalg.volume import transfer_pairs_bytes

    doc_path, out, npy = tmp_path / "r.json", tmp_path / "l.h5", tmp_path / "l.npy"
    p = mpirun(3, "run", "--dist", "sbc", "--n", "300", "--nb", "50", "--dtype", "float32",
               "--check", "--output", f"{out}:/L", "--gather", npy, "--json", doc_path,
               "--workers", "1", "--quiet", timeout=120)
    assert p.rank_exits == [0, 0, 0], p.stderr
    assert "NT = 6 (elements, tiles), float32," in p.stdout
    doc = json.loads(doc_path.read_text())
    assert doc["dtype"] == "float32" and doc["match"] is True
    assert 1e-12 < doc["residual"] < 1e-5                  # single precision, not double
    model = transfer_pairs_bytes(get_map("sbc", 3), 300, 50, cache=True, itemsize=4)
    assert doc["bytes_measured_total"] == int(model.sum()) > 0
    assert 2 * int(model.sum()) == int(transfer_pairs_bytes(get_map("sbc", 3), 300, 50,
                                                            cache=True).sum())
    assert {k: v["cpu"] for k, v in doc["kernels"].items()} == {
        "gemm_s": 20, "potrf_s": 6, "syrk_s": 15, "trsm_s": 15}
    a = matrices.block(matrices.parse_matrix_spec("spd", 300), 300, 0, 0, 300, 0, 300)
    ref = scipy.linalg.cholesky(a, lower=True)
    with h5py.File(out, "r") as f:
        stored = f["L"][...]
    gathered = np.load(npy)
    for lf in (stored, gathered):
        assert lf.dtype == np.float32
        assert np.abs(np.tril(lf) - ref).max() / np.abs(ref).max() < 1e-5
