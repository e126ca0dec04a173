"""``starchol report``: the 'Time against bytes' table (times beside busiest-link bytes)."""
import numpy as np

from starchol.cli import main
from starchol.distributions import get_map
from starchol.model.link_load import busiest_link, node_link_bytes
from starchol.model.volume import transfer_pairs_bytes
from starchol.units import format_bytes

from test_report import model_run_doc, write


def test_busiest_link_by_hand():
    pairs = np.array([[7, 5, 1], [2, 7, 0], [9, 0, 7]])   # diagonal ignored
    sent, received = node_link_bytes(pairs)
    assert sent.tolist() == [6, 2, 9] and received.tolist() == [11, 5, 1]
    assert busiest_link(pairs) == {"node": 0, "bytes": 11, "sent": 6, "received": 11}


def test_time_beside_busiest_link_bytes(tmp_path):
    n, nb = 3072, 128
    sbc = write(tmp_path / "sbc.json", model_run_doc("sbc", 6, n, nb, time_s=10.0))
    twod = write(tmp_path / "2d.json", model_run_doc("2dbc", 6, n, nb, grid=(2, 3), time_s=13.0))
    other = write(tmp_path / "o.json", model_run_doc("sbc", 3, 600, 100, time_s=1.0))
    out = tmp_path / "out"
    assert main(["report", sbc, twod, other, "-o", str(out)]) == 0
    md = (out / "report.md").read_text()
    section = md.split("## Time against bytes", 1)[1].split("\n## ", 1)[0]
    b_sbc = busiest_link(transfer_pairs_bytes(get_map("sbc", 6), n, nb))
    b_2d = busiest_link(transfer_pairs_bytes(get_map("2dbc", 6, grid=(2, 3)), n, nb))
    rows = [line for line in section.splitlines() if line.startswith("| ") and "map" not in line]
    assert len(rows) == 2   # the 3-node run has no partner of the same size
    assert "| 1.000 |" in rows[0] and f"{format_bytes(b_sbc['sent'])} sent" in rows[0]
    assert f"| 1.300 |" in rows[1] and f"| {b_2d['bytes'] / b_sbc['bytes']:.3f} |" in rows[1]


def test_no_time_bytes_section_without_pairs_of_runs(tmp_path):
    a = write(tmp_path / "a.json", model_run_doc("sbc", 6, 1000, 96))
    b = write(tmp_path / "b.json", model_run_doc("sbc", 3, 1000, 96))
    out = tmp_path / "out"
    assert main(["report", a, b, "-o", str(out)]) == 0
    assert "Time against bytes" not in (out / "report.md").read_text()
