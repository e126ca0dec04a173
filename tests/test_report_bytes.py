"""``starchol report``: the match and totals follow from the pair matrices; predicted bytes
missing from a document are computed with the exact model, or the report says why not."""
import numpy as np
import pytest

from starchol.cli import main
from starchol.distributions import get_map
from starchol.reports.runs import load_run
from starchol.reports.settle import model_pairs, settle_bytes
from starchol.model.volume import solve_transfer_pairs_bytes, transfer_pairs_bytes
from starchol.units import format_bytes

from test_report import model_run_doc, write


def _settled(tmp_path, doc, name="r.json"):
    run = load_run(write(tmp_path / name, doc))
    return run, settle_bytes(run)


def _skew(m):
    m[0, 1] += 10**6
    return m


def test_stored_match_true_is_checked_against_the_matrices(tmp_path, capsys):
    doc = model_run_doc("2dbc", 4, 400, 100, grid=(2, 2), measured=_skew)
    doc["match"] = True                       # an edited document: match left true
    doc["bytes_measured_total"] -= 10**6      # ... and the total left as it was
    path = write(tmp_path / "edited.json", doc)
    out = tmp_path / "out"
    assert main(["report", path, "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "edited.json: the document says match true, but its measured and predicted " \
           "byte matrices differ" in err
    md = (out / "report.md").read_text()
    assert "| **NO** (document says yes) |" in md and "| yes |" not in md
    assert "**The stored `match` of run(s) 1 disagrees with the run's own byte matrices" in md
    assert "they DIFFER" in md and "equal byte for byte" not in md
    total = int(np.sum(doc["bytes_measured_pairs"]))
    assert (f"`bytes_measured_total`, {format_bytes(total - 10**6)} ({total - 10**6} B), is "
            f"not the sum of its `bytes_measured_pairs`, {format_bytes(total)} ({total} B)") in md


def test_stored_match_false_with_equal_matrices(tmp_path):
    run, notes = _settled(tmp_path, model_run_doc("sbc", 3, 300, 100, match=False))
    assert run["match"] is True and run["match_conflict"] and run["match_stored"] is False
    assert any("says `match: false` but its measured and predicted byte matrices are equal"
               in n for n in notes)


@pytest.mark.parametrize("dist, nodes, n, nb, kw, extra", [
    ("2dbc", 6, 1000, 96, {"grid": (2, 3)}, {}),                 # partial last tile
    ("2dbc25d", 8, 800, 100, {"slices": 2}, {"slices": 2}),      # grid from the map text
    ("sbc25d", 6, 600, 100, {"slices": 2}, {"slices": 2}),
    ("sym", 5, 1000, 100, {"nt": 10}, {}),
    ("sbc", 6, 600, 100, {}, {"cache": False}),
    ("sbc", 6, 600, 100, {}, {"dtype": "float32"}),
])
def test_missing_prediction_is_computed_with_the_exact_model(tmp_path, dist, nodes, n, nb,
                                                             kw, extra):
    m = get_map(dist, nodes, **kw)
    cache = extra.get("cache", True)
    itemsize = 4 if extra.get("dtype") == "float32" else 8
    # what `starchol run` measures and records: equal to the model (tests/mpi check it)
    truth = transfer_pairs_bytes(m, n, nb, cache=cache, itemsize=itemsize)
    doc = {"dist": dist, "map": str(m), "nodes": nodes, "n": n, "nb": nb,
           "cache": cache, "dtype": "float64", "bytes_measured_pairs": truth.tolist(),
           **extra}
    run, notes = _settled(tmp_path, doc)
    assert np.array_equal(run["bytes_predicted_pairs"], truth)
    assert run["bytes_predicted_total"] == int(truth.sum()) and run["match"] is True
    assert any("computed by this report with the exact model" in note and str(m) in note
               for note in notes), notes
    # the pair matrix is not enough on its own to make every map differ: check one does
    if dist == "sbc":
        other = transfer_pairs_bytes(m, n, nb, cache=not cache, itemsize=itemsize)
        assert not np.array_equal(other, truth)


def test_missing_prediction_of_a_solve(tmp_path):
    m = get_map("sbc", 6)
    truth = solve_transfer_pairs_bytes(m, 600, 100, 150, cache=True)
    doc = {"dist": "sbc", "map": str(m), "nodes": 6, "n": 600, "nb": 100, "cache": True,
           "operation": "solve", "nrhs": 150, "bytes_measured_pairs": truth.tolist()}
    run, _ = _settled(tmp_path, doc)
    assert np.array_equal(run["bytes_predicted_pairs"], truth) and run["match"] is True


@pytest.mark.parametrize("doc, reason", [
    ({"dist": "sbc", "nodes": 6, "n": 600, "nb": 100},
     "it has no `cache` key (true/false), and the model needs the receive-cache setting"),
    ({"dist": "2dbc", "nodes": 6, "n": 600, "nb": 100, "cache": True},
     "its 2dbc grid is unknown (no `grid` key, and no `map` description naming it)"),
    ({"dist": "custom", "nodes": 4, "n": 600, "nb": 100, "cache": True},
     "its map is a custom map, whose file the document does not hold"),
    ({"dist": "sbc", "nodes": 7, "n": 600, "nb": 100, "cache": True},
     "its map cannot be rebuilt (sbc needs"),
    ({"dist": "sbc", "map": "sbc r=5 (extended, 10 nodes)", "nodes": 6, "n": 600, "nb": 100,
      "cache": True}, "the map rebuilt from its keys, 'sbc r=4 (extended, 6 nodes)', is not "
                      "the one it names, 'sbc r=5 (extended, 10 nodes)'"),
    ({"dist": "sbc", "nodes": 6, "n": 600, "nb": 100, "cache": True, "dtype": "int8"},
     "its dtype 'int8' is neither float64 nor float32"),
    ({"dist": "sbc", "nodes": 6, "n": 600, "nb": 100, "cache": True, "operation": "lu"},
     "its operation 'lu' has no volume model"),
])
def test_why_predicted_bytes_are_not_shown(tmp_path, doc, reason):
    run, notes = _settled(tmp_path, doc)
    assert run["bytes_predicted_pairs"] is None and run.get("match") is None
    assert model_pairs(run)[1].startswith(reason), model_pairs(run)[1]
    assert any(f"the report cannot compute them: {reason}" in n for n in notes), notes


def test_trace_communications_in_decimal_units_with_exact_counts():
    from starchol.jobs.report_trace import trace_markdown

    # hand-made: rank 0 sends two 80 kB tiles and a 512 B one to rank 1, which sends one
    comms = [[0, 1, 0.0, 1.0, 80000], [0, 1, 1.0, 2.0, 80000], [0, 1, 2.0, 3.0, 512],
             [1, 0, 3.0, 4.0, 80000]]
    trace = {"tasks": [], "workers": [], "kernels": {}, "span_ms": 4.0, "ranks": 2,
             "comms": comms, "comm_bytes": 240512}
    md = "\n".join(trace_markdown(trace, "t"))
    assert "MPI communications: 4 transfers, 240.51 kB (240512 B) in all." in md
    assert "| 0 | 1 | 3 | 160.51 kB (160512 B) |" in md
    assert "| 1 | 0 | 1 | 80.00 kB (80000 B) |" in md
    one = dict(trace, comms=comms[2:3], comm_bytes=512)
    assert "MPI communications: 1 transfer, 512 B in all." in "\n".join(trace_markdown(one, "t"))


@pytest.mark.parametrize("dist, nodes, kw", [("2dbc", 6, {"grid": (3, 2)}),
                                             ("2dbc25d", 8, {"slices": 2, "grid": "1x4"}),
                                             ("sym", 7, {"nt": 10})])
def test_the_map_is_rebuilt_from_its_recorded_params(tmp_path, dist, nodes, kw):
    """A document of ``starchol run`` holds the map's params (RunRecord.map_fields):
    the report rebuilds it with get_map(**map_params), no grid key needed."""
    from starchol.reports.settle import document_map
    from starchol.linalg.record import RunRecord

    m = get_map(dist, nodes, **kw)
    doc = {**RunRecord.map_fields(m), "n": 1000, "nb": 100, "cache": True}
    run, _ = _settled(tmp_path, doc)
    rebuilt, reason = document_map(run)
    assert reason is None and str(rebuilt) == str(m) and rebuilt.params() == m.params()
    assert np.array_equal(run["bytes_predicted_pairs"], transfer_pairs_bytes(m, 1000, 100))
    bad = dict(doc, map_params={**m.params(), "slices": 0})
    assert document_map(_settled(tmp_path, bad, "bad.json")[0])[1].startswith(
        "its map cannot be rebuilt (")
