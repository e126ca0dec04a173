"""The critical path and clock alignment of traces, on hand-made records (pure)."""
import pytest

from starchol.reports.critical_path import clock_offsets, critical_path

T = 1 << 40   # tag of tile (0, 0) of the first matrix


def _task(job, name, rank, start, end, handles="", modes="", deps=""):
    rec = {"Name": name, "JobId": job, "MPIRank": str(rank), "WorkerId": "0",
           "StartTime": str(start), "EndTime": str(end), "Handles": handles, "Modes": modes}
    if deps:
        rec["DependsOn"] = deps
    return rec


def test_clock_offsets_from_the_quickest_transfer_each_way():
    # rank 1's clock reads 5 ms early; 0.1 ms latency each way
    comms = [{"src": 0, "dst": 1, "start": 10.0, "end": 10.1 - 5},
             {"src": 1, "dst": 0, "start": 20.0 - 5, "end": 20.1},
             {"src": 0, "dst": 1, "start": 30.0, "end": 31.0 - 5},   # a slow one
             {"src": 2, "dst": 0, "start": 1.0, "end": 2.0}]          # one way only
    off = clock_offsets(comms, 3)
    assert off == pytest.approx([0.0, -5.0, 0.0], abs=1e-4)
    assert clock_offsets([], 2) == [0.0, 0.0]


def test_path_follows_the_latest_predecessor_across_ranks_through_internal_tasks():
    """Rank 0: POTRF(0,0) then an early TRSM(2,0) (off the path); rank 1 receives (0,0)
    and runs TRSM(1,0) through an internal receive task, then ADD; the path is POTRF ->
    transfer -> TRSM(1,0) -> ADD, and the time adds up to the makespan."""
    tasks = [_task("0_1", "potrf", 0, 0.0, 1.0, "a0", "RW"),
             _task("0_2", "trsm", 0, 1.0, 1.5, "a0 a2", "R RW", "0_1"),
             {"Name": "_starpu_data_acquire_cb_pre", "JobId": "1_1", "MPIRank": "1"},
             _task("1_2", "trsm", 1, 2.0, 3.0, "b0 b1", "R RW", "1_1"),
             _task("1_3", "add", 1, 3.5, 4.0, "b9 b1", "R RW", "1_2")]
    data = [{"Handle": "a0", "MPIRank": "0", "MPITag": str(T), "MPIOwner": "0"},
            {"Handle": "a2", "MPIRank": "0", "MPITag": str(T + 12), "MPIOwner": "0"},
            {"Handle": "b0", "MPIRank": "1", "MPITag": str(T), "MPIOwner": "0"},
            {"Handle": "b1", "MPIRank": "1", "MPITag": str(T + 6), "MPIOwner": "1"},
            {"Handle": "b9", "MPIRank": "1", "MPITag": str(2 * T + 6), "MPIOwner": "1"}]
    comms = [{"src": 0, "dst": 1, "start": 1.2, "end": 1.8, "bytes": 8, "tag": 0}]
    p = critical_path(tasks, data, comms)
    kinds = [(e["kind"], e.get("kernel")) for e in p["elements"]]
    assert kinds == [("task", "potrf"), ("transfer", None), ("task", "trsm"),
                     ("task", "add")]
    assert p["elements"][1]["tag"] == T and p["elements"][1]["comm"] == 0
    assert p["elements"][2]["task"] == 2 and p["elements"][2]["reads"] == [T, T + 6]
    assert p["makespan_ms"] == 4.0
    assert p["split_ms"] == pytest.approx({"kernels": 2.0, "transfers": 0.6,
                                           "reductions": 0.5, "waiting": 0.9})
    assert p["length_ms"] == pytest.approx(3.1)
    assert p["kernels"] == {"add": {"tasks": 1, "ms": 0.5}, "potrf": {"tasks": 1, "ms": 1.0},
                            "trsm": {"tasks": 1, "ms": 1.0}}
    assert critical_path([], [], [])["elements"] == []
