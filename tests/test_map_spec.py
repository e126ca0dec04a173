"""One map specification: a map's parameters (``TileMap.params()``, a run document's
``map_params``), its command-line words (``jobs.options.map_argv``) and its agreement key
(``linalg.distributed.map_key``) convert into one another, for every map of the catalogue
and every parameter, ``slice_block`` included."""
import argparse
import json

import numpy as np
import pytest

from starchol.cli import build_parser
from starchol.distributions import candidate_maps, get_map, write_chameleon_text
from starchol.distributions.base import DEFAULT_SLICE_BLOCK, MAP_PARAMS
from starchol.jobs.options import add_map_args, map_argv, map_params_from_args
from starchol.jobs.slurm_plan import job_map
from starchol.linalg.distributed import map_key
from starchol.linalg.record import RunRecord

NT = 30


def _maps(tmp_path):
    """Every catalogue map on 1 to 13 nodes, each 2.5D family with several slice blocks,
    a sym map chosen for a small NT, and a custom map."""
    maps = []
    for nodes in (1, 2, 3, 4, 6, 7, 8, 12, 13):
        maps += candidate_maps(nodes, nt=NT)
    for dist, nodes in (("sbc25d", 12), ("2dbc25d", 8), ("sym25d", 14)):
        for block in (1, 2, 5):
            maps.append(get_map(dist, nodes, slices=2, slice_block=block, nt=NT))
    maps.append(get_map("sym", 31, nt=NT))
    path = tmp_path / "m.txt"
    write_chameleon_text(str(path), [[0, 1], [1, 2]])
    maps.append(get_map("custom", 5, path=str(path)))
    return maps


def _same(a, b):
    assert type(a) is type(b) and str(a) == str(b) and a.params() == b.params()
    np.testing.assert_array_equal(a.owner_maps(NT), b.owner_maps(NT))
    np.testing.assert_array_equal(a.iteration_slices(NT), b.iteration_slices(NT))
    assert map_key(a, NT) == map_key(b, NT)


def _parser():
    p = argparse.ArgumentParser()
    add_map_args(p)
    return p


def test_every_map_round_trips_through_flags_json_and_key(tmp_path):
    maps = _maps(tmp_path)
    assert {m.name for m in maps} >= {"2dbc", "sbc", "sbc-basic", "sym", "2dbc25d", "sbc25d",
                                      "sym25d", "custom"}
    assert any(m.slice_block != DEFAULT_SLICE_BLOCK for m in maps)
    for m in maps:
        params = m.params()
        assert set(params) <= set(MAP_PARAMS)
        # JSON map_params (what a run document holds) -> the same map
        doc = json.loads(json.dumps(RunRecord.map_fields(m)))
        assert doc["map_params"] == params
        _same(get_map(**doc["map_params"]), m)
        # flags -> parsed options -> the same parameters and map
        words = map_argv(params)
        ns = _parser().parse_args(words)
        again = map_params_from_args(ns, nt=params.get("nt"))
        _same(get_map(**again), m)
        # every parameter is in the words, but the matrix's nt and a default block
        for key, value in params.items():
            if key == "nt" or (key == "slice_block" and value == DEFAULT_SLICE_BLOCK) or (
                    key == "slices" and m.name not in ("2dbc25d", "sbc25d", "sym25d")):
                continue
            flag = {"path": "--map-file"}.get(key, "--" + key.replace("_", "-"))
            assert words[words.index(flag) + 1] == str(value), (m, words)


def test_run_and_slurm_take_the_words(tmp_path):
    """``starchol run`` (no --nodes: mpirun's) and ``starchol slurm`` (no --slice-block)
    parse the words of every map."""
    parsers = build_parser().command_parsers
    for m in _maps(tmp_path):
        params = m.params()
        run = parsers["run"].parse_args(map_argv(params, nodes=False)
                                        + ["--n", "300", "--nb", "10"])
        assert "--nodes" not in map_argv(params, nodes=False)
        again = {**map_params_from_args(run, nt=params.get("nt")), "nodes": m.nodes}
        if again["slices"] is None:             # run's --slices: None unless given
            again["slices"] = 1
        _same(get_map(**again), m)
        if params.get("slice_block", DEFAULT_SLICE_BLOCK) == DEFAULT_SLICE_BLOCK:
            slurm = parsers["slurm"].parse_args(map_argv(params) + ["--n", "300", "--nb",
                                                                    "10"])
            assert slurm.nodes == str(m.nodes)            # a count, or a sweep's list
            _same(job_map(slurm, slurm.dist, m.nodes, nt=params.get("nt")), m)


@pytest.mark.parametrize("params, words", [
    ({"dist": "2dbc", "nodes": 6, "slices": 1, "grid": "2x3"},
     ["--dist", "2dbc", "--nodes", "6", "--grid", "2x3"]),
    ({"dist": "sbc25d", "nodes": 12, "slices": 2, "slice_block": 4},
     ["--dist", "sbc25d", "--nodes", "12", "--slices", "2", "--slice-block", "4"]),
    ({"dist": "sbc25d", "nodes": 12, "slices": 2, "slice_block": 1},
     ["--dist", "sbc25d", "--nodes", "12", "--slices", "2"]),
    ({"dist": "sym", "nodes": 7, "slices": 1, "nt": 30}, ["--dist", "sym", "--nodes", "7"]),
])
def test_map_argv_words(params, words):
    assert map_argv(params) == words
