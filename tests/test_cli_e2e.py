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
    from starchol.model.volume import transfer_pairs_bytes

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


def _dense_spd(n, seed=0):
    import numpy as np

    from starchol.linalg import matrices

    a = matrices.dense(matrices.MatrixSpec(), n, seed)
    return np.tril(a) + np.tril(a, -1).T


def test_solve_generated_rhs_bytes_logdet_and_solution(mpirun, tmp_path):
    """--nrhs K: X of A X = B written to --solution, equal to SciPy's; the solve's bytes
    measured = the model of the variant that ran (rhs: few right-hand sides) per pair;
    log det A as numpy's."""
    import h5py
    import numpy as np
    import scipy.linalg

    from starchol.distributions import get_map
    from starchol.linalg import matrices
    from starchol.model.rhs_volume import rhs_solve_transfer_pairs_bytes

    doc_path, out = tmp_path / "r.json", tmp_path / "x.h5"
    p = mpirun(3, "run", "--dist", "sbc", "--n", "300", "--nb", "50", "--nrhs", "2",
               "--seed", "4", "--solution", f"{out}:/X", "--json", doc_path,
               "--workers", "1", "--quiet", timeout=120)
    assert p.rank_exits == [0, 0, 0], p.stderr
    doc = json.loads(doc_path.read_text())
    a = _dense_spd(300, seed=4)
    b = matrices.rhs_block(4, 0, 300, 0, 2)
    assert abs(doc["logdet"] - np.linalg.slogdet(a)[1]) < 1e-12 * abs(doc["logdet"])
    sol = doc["solve"]
    model = rhs_solve_transfer_pairs_bytes(get_map("sbc", 3), 300, 50, 2, cache=True)
    assert sol["solve_variant"]["variant"] == "rhs"
    assert sol["match"] is True and sol["nrhs"] == 2 and sol["solution"] == f"{out}:/X"
    assert sol["bytes_measured_pairs"] == model.tolist() and model.sum() > 0
    with h5py.File(out, "r") as f:
        x = f["X"][...]
    ref = scipy.linalg.solve(a, b, assume_a="pos")
    assert np.abs(x - ref).max() <= 1e-12 * np.abs(ref).max()
    assert "  solve A X = B: 2 right-hand sides (generated with seed 4), " in p.stdout
    assert f"  solution X written to {out}:/X" in p.stdout and "log det A = " in p.stdout
    assert sol["residual"] is None and ("  solve residual ||B - A X||_F / (||A||_F ||X||_F "
                                        "+ ||B||_F) = not checked (add --check)") in p.stdout
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]


def test_solve_float32_rhs_from_a_file(mpirun, tmp_path):
    """--rhs FILE (float64 on disk) with --dtype float32: X is float32, close to SciPy's;
    --check gives the solve's backward error, at float32's roundoff, in the summary, the
    JSON and the solution file."""
    import h5py
    import numpy as np
    import scipy.linalg

    rng = np.random.default_rng(1)
    b = rng.standard_normal((250, 3))
    with h5py.File(tmp_path / "b.h5", "w") as f:
        f["B"] = b
    out = tmp_path / "x.h5"
    p = mpirun(2, "run", "--dist", "2dbc", "--n", "250", "--nb", "60", "--dtype", "float32",
               "--rhs", f"{tmp_path / 'b.h5'}:/B", "--solution", f"{out}:/X",
               "--check", "--json", tmp_path / "r.json",
               "--workers", "1", "--quiet", timeout=120)
    assert p.rank_exits == [0, 0], p.stderr
    assert "per-pair match: NO" not in p.stdout
    res = json.loads((tmp_path / "r.json").read_text())["solve"]["residual"]
    assert 0 < res < 1e-6
    assert (f"  solve residual ||B - A X||_F / (||A||_F ||X||_F + ||B||_F) = {res:.3e}"
            in p.stdout)
    with h5py.File(out, "r") as f:
        x = f["X"][...]
        assert f["X"].attrs["residual"] == res
    ref = scipy.linalg.solve(_dense_spd(250), b, assume_a="pos")
    assert x.dtype == np.float32 and x.shape == (250, 3)
    assert np.abs(x - ref).max() <= 1e-5 * np.abs(ref).max()


def test_solve_arguments_checked_on_every_rank(mpirun, tmp_path):
    import h5py
    import numpy as np

    with h5py.File(tmp_path / "b.h5", "w") as f:
        f["B"] = np.ones((100, 2))
    with h5py.File(tmp_path / "b2.h5", "w") as f:
        f["B"] = np.ones((200, 2))
    b, b2 = f"{tmp_path / 'b.h5'}:/B", f"{tmp_path / 'b2.h5'}:/B"
    base = ["run", "--dist", "2dbc", "--n", "200", "--nb", "50", "--workers", "1"]
    cases = [
        (["--solution", f"{tmp_path / 'x.h5'}:/X"],
         "--solution writes X of A X = B: give the right-hand sides"),
        (["--rhs", b], f"--rhs {b} has 100 rows but the matrix has 200: B must be N x K"),
        (["--rhs", b, "--nrhs", "2"], "give the right-hand sides once"),
        (["--nrhs", "0"], "argument --nrhs: must be an integer >= 1, got '0'"),
        (["--rhs", b2, "--solution", f"{tmp_path / 'b2.h5'}:/X"],
         f"--solution {tmp_path / 'b2.h5'} is the input file (--rhs "),
    ]
    for extra, words in cases:
        p = mpirun(2, *base, *extra, timeout=60)
        assert p.rank_exits == [2, 2], p.stderr
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("starchol run: error")]
        assert len(lines) == 2 and lines[0] == lines[1], p.stderr
        assert words in lines[0], lines[0]
    assert sorted(os.listdir(tmp_path)) == ["b.h5", "b2.h5"]      # nothing written


def _ill_conditioned(n, cond, seed=12):
    import numpy as np

    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    a = (q * np.logspace(0, -np.log10(cond), n)) @ q.T
    return (a + a.T) / 2


def test_run_dtype_mixed_converges_and_falls_back(mpirun, tmp_path):
    """--dtype mixed --nrhs K --check: X to float64 accuracy (SciPy's), the iterations,
    no fallback, the backward error and the time split in the summary and the JSON,
    bytes measured == the mixed model per pair (and per graph); a cond 1e9 --input falls
    back to float64 and says so; --output with mixed is refused on every rank."""
    import h5py
    import numpy as np
    import scipy.linalg

    from starchol.distributions import get_map
    from starchol.linalg import matrices
    from starchol.model.mixed_volume import mixed_phase_bytes

    doc_path, out = tmp_path / "r.json", tmp_path / "x.h5"
    p = mpirun(3, "run", "--dist", "sbc", "--n", "300", "--nb", "50", "--nrhs", "2",
               "--seed", "4", "--dtype", "mixed", "--check", "--solution", f"{out}:/X",
               "--json", doc_path, "--workers", "1", "--quiet", timeout=120)
    assert p.rank_exits == [0, 0, 0], p.stderr
    doc = json.loads(doc_path.read_text())
    mixed = doc["mixed"]
    assert doc["operation"] == "solve_mixed" and doc["dtype"] == "mixed"
    assert mixed["fallback"] is None and mixed["iterations"] >= 1
    assert mixed["backward_error"] <= np.sqrt(300) * 2.0 ** -53 == mixed["tolerance"]
    assert doc["match"] is True and doc["solve"] is None
    model = mixed_phase_bytes(get_map("sbc", 3), 300, 50, 2, mixed["iterations"])
    assert mixed["bytes_measured_phase_pairs"] == {k: v.tolist() for k, v in model.items()}
    assert set(mixed["time_s"]) == {"factor", "refinement", "fallback", "total"}
    a, b = _dense_spd(300, seed=4), matrices.rhs_block(4, 0, 300, 0, 2)
    with h5py.File(out, "r") as f:
        x = f["X"][...]
    ref = scipy.linalg.solve(a, b, assume_a="pos")
    assert x.dtype == np.float64 and np.abs(x - ref).max() <= 1e-12 * np.abs(ref).max()
    assert ", fallback to float64: no (float32 factor refined" in p.stdout
    assert "  time split: float32 copy + factorization " in p.stdout
    assert "per-pair match: yes" in p.stdout
    # starchol report: the Mixed precision table; without the prediction, the report
    # computes it with the mixed model, and it matches
    del doc["bytes_predicted_pairs"], doc["bytes_predicted_total"]
    (tmp_path / "np.json").write_text(json.dumps(doc))
    assert main(["report", str(doc_path), str(tmp_path / "np.json"), "-o",
                 str(tmp_path / "rep")]) == 0
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "## Mixed precision" in md and "| 1 | sbc r=3" in md
    assert "computed by this report with the exact model" in md and "**" not in md

    with h5py.File(tmp_path / "ill.h5", "w") as f:
        f["A"] = _ill_conditioned(300, 1e9)
    p = mpirun(2, "run", "--dist", "2dbc", "--input", f"{tmp_path / 'ill.h5'}:/A",
               "--nb", "50", "--nrhs", "1", "--dtype", "mixed", "--json",
               tmp_path / "ill.json", "--workers", "1", "--quiet", timeout=120)
    assert p.rank_exits == [0, 0], p.stderr
    mixed = json.loads((tmp_path / "ill.json").read_text())["mixed"]
    assert mixed["fallback"] in ("factorization", "refinement") and mixed["fallback_reason"]
    assert mixed["backward_error"] <= np.sqrt(300) * 2.0 ** -53
    assert f", fallback to float64: YES, {mixed['fallback']}: " in p.stdout
    assert "(from the float64 factor)" in p.stdout and "per-pair match: yes" in p.stdout
    for r in (0, 1):      # said on every rank, one line each
        assert f"starchol: WARNING: rank {r}: solve_mixed fell back to float64: " in p.stderr

    p = mpirun(2, "run", "--dist", "2dbc", "--n", "200", "--nb", "50", "--dtype", "mixed",
               "--workers", "1", timeout=60)
    assert p.rank_exits == [2, 2], p.stderr
    assert "--dtype mixed solves A X = B to float64 accuracy" in p.stderr
    p = mpirun(2, "run", "--dist", "2dbc", "--n", "200", "--nb", "50", "--dtype", "mixed",
               "--nrhs", "1", "--output", f"{tmp_path / 'l.h5'}:/L", "--workers", "1",
               timeout=60)
    assert p.rank_exits == [2, 2], p.stderr
    assert "--output writes the factor L, and --dtype mixed gives a solution" in p.stderr
