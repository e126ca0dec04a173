"""The typed record of one distributed computation (a factorization or a solve).

A :class:`RunRecord` is what ``Factor.record`` and ``Factor.solve`` return, what
``starchol run --json`` writes (rank 0) and what ``starchol report`` reads back: one
dataclass, one :meth:`RunRecord.to_json`, one :meth:`RunRecord.from_json`.

Units: seconds for times, bytes for volumes (``*_pairs`` are P x P lists, sender row,
receiver column), tiles only where a name says so.
"""
import json
import math
import typing
from dataclasses import dataclass, field, fields, replace
from typing import Dict, Optional

from ..integers import is_int
from .run_parts import (KernelCount, MemoryRecord, MixedRecord, TraceRecord, dataclass_schema,
                        parse, plain)

#: keys of the nested ``runtime`` object of the JSON document (kept for old readers)
RUNTIME_KEYS = ("scheduler", "workers_per_rank", "starpu_version", "starpu_build")

#: keys every run document has (the others keep their defaults when absent)
REQUIRED = ("dist", "nodes", "n", "nb")

#: the P x P byte matrices of a document (sender row, receiver column)
PAIR_KEYS = ("bytes_measured_pairs", "bytes_predicted_pairs")

#: keys that are numbers (or null) in a document and in its ``solve`` object
NUMBER_KEYS = ("time_s", "gflops", "residual", "bytes_measured_total",
               "bytes_predicted_total")

#: the typed parts of a document (:mod:`.run_parts`): null when the run had none
TYPED = ("solve", "mixed", "memory", "trace", "kernels")

#: integer fields (counts and sizes)
_INT_FIELDS = ("nodes", "slices", "n", "nb", "nt", "nrhs", "tasks", "ranks",
               "ranks_per_host", "workers")


@dataclass
class RunRecord:
    """What one collective computation did; identical on every rank.

    Attributes
    ----------
    operation : str
        ``"cholesky"``, ``"solve"`` (L L^T X = B), ``"forward_solve"`` (L Y = B) or
        ``"backward_solve"`` (L^T Y = B).
    dist, map : str
        The map's name (``sbc``) and its description (``sbc r=4 (extended, 6 nodes)``).
    map_params : dict or None
        The map's :meth:`~starchol.distributions.base.TileMap.params`:
        ``get_map(**map_params)`` builds it again; None in documents from before it was
        recorded.
    nodes, slices : int
        Nodes P of the map (one MPI rank each) and its slices c (1 for 2D maps).
    n, nb, nt : int
        Matrix order, tile size and tiles per side (NT = ceil(N / NB)).
    nrhs : int
        Columns K of the right-hand sides (0 for a factorization).
    dtype : str
        ``float64`` or ``float32``.
    time_s, submit_s : float
        Wall time from a barrier to the last rank's end (registration, submission,
        execution) and the longest submission, in seconds.
    tasks : int
        Tasks of the graph, each counted once (on the rank that runs it), summed over
        the ranks.
    bytes_measured_pairs, bytes_predicted_pairs : list of list of int, or None
        Bytes sent from rank (row) to rank (column): measured by StarPU-MPI
        (``STARPU_COMM_STATS``; None when statistics are off) and counted by the model.
    cache : bool
        StarPU-MPI's receive cache on or off.
    ranks, ranks_per_host, workers, scheduler, hosts
        The runtime: MPI ranks, the most ranks on one host, CPU workers per rank,
        StarPU scheduler, host names (one per rank).
    date, command_line, starchol_version, starpu_version : str
        When (UTC, ISO 8601), how (``sys.argv`` of rank 0) and with what it ran.
    starpu_build : str
        Which StarPU build ran, in words (:func:`starchol.runtime.starpu_build.label`),
        e.g. ``"StarPU 1.3.10 (system package)"`` or ``"StarPU 1.3.10 (built from
        Debian bookworm source, PREFIX)"``; every distinct one, joined by "; ", when the
        ranks loaded different ones; ``""`` in documents from before it was recorded.
    kernel_blas : str
        The BLAS/LAPACK the tile kernels called (:mod:`starchol.runtime.kernel_blas`):
        version, OpenBLAS core, source and file (``"OpenBLAS 0.3.21 Zen (system:
        PATH)"``; no core in documents from before 2026-12-04); every distinct one, joined by "; ", when the ranks
        chose differently; ``""`` in documents from before it was recorded.
    solve : RunRecord or None
        ``starchol run`` with right-hand sides: the solve's own record, its ``extra``
        holding ``rhs`` (where B came from), ``residual`` (the backward error, or None)
        and ``solution`` (where X went, or None).
    mixed : MixedRecord or None
        A mixed-precision solve (:class:`~starchol.linalg.run_parts.MixedRecord`).
    memory : MemoryRecord or None
        ``starchol run``'s memory figures, bytes
        (:class:`~starchol.linalg.run_parts.MemoryRecord`).
    trace : TraceRecord or None
        ``starchol run --trace``'s summary (:class:`~starchol.linalg.run_parts.TraceRecord`).
    kernels : dict of str to KernelCount, or None
        Tasks per kernel, by CPU and CUDA workers, summed over the ranks.
    extra : dict
        Other keys of a JSON document (e.g. ``residual``, ``seed``), kept as they are;
        an ``extra["runtime"]`` object adds its keys to the document's ``runtime``.
    """

    operation: str = "cholesky"
    dist: str = ""
    map: str = ""
    map_params: dict = None
    nodes: int = 1
    slices: int = 1
    n: int = 0
    nb: int = 0
    nt: int = 0
    nrhs: int = 0
    dtype: str = "float64"
    time_s: float = 0.0
    submit_s: float = 0.0
    tasks: int = 0
    bytes_measured_pairs: list = None
    bytes_predicted_pairs: list = None
    cache: bool = True
    ranks: int = 1
    ranks_per_host: int = 1
    workers: int = 1
    scheduler: str = ""
    hosts: list = field(default_factory=list)
    date: str = ""
    command_line: list = field(default_factory=list)
    starchol_version: str = ""
    starpu_version: str = ""
    starpu_build: str = ""
    kernel_blas: str = ""
    solve: Optional["RunRecord"] = None
    mixed: Optional[MixedRecord] = None
    memory: Optional[MemoryRecord] = None
    trace: Optional[TraceRecord] = None
    kernels: Optional[Dict[str, KernelCount]] = None
    extra: dict = field(default_factory=dict)

    @staticmethod
    def map_fields(tile_map):
        """The fields that describe ``tile_map`` (``dist``, ``map``, ``map_params``,
        ``nodes``, ``slices``), as keyword arguments of the record."""
        return dict(dist=tile_map.name, map=str(tile_map), map_params=tile_map.params(),
                    nodes=int(tile_map.nodes), slices=int(tile_map.slices))

    # -- derived figures -------------------------------------------------------------
    @property
    def flops(self):
        """Floating-point operations of the computation: N^3/3 for a factorization,
        2 N^2 K for a solve (forward and backward), N^2 K for one of its passes."""
        from ..model.counts import operation_flops

        return operation_flops(self.operation, self.n, self.nrhs)

    @property
    def gflops(self):
        """GFlop/s (10^9 flops per second)."""
        return self.flops / self.time_s / 1e9 if self.time_s > 0 else 0.0

    @property
    def bytes_measured_total(self):
        return None if self.bytes_measured_pairs is None else \
            int(sum(map(sum, self.bytes_measured_pairs)))

    @property
    def bytes_predicted_total(self):
        return None if self.bytes_predicted_pairs is None else \
            int(sum(map(sum, self.bytes_predicted_pairs)))

    @property
    def match(self):
        """Measured bytes equal the model's, pair by pair (None when not measured)."""
        if self.bytes_measured_pairs is None or self.bytes_predicted_pairs is None:
            return None
        return _as_lists(self.bytes_measured_pairs) == _as_lists(self.bytes_predicted_pairs)

    def output_attrs(self, residual, source, nrhs=None):
        """The attributes of an HDF5 output of this run (``starchol run --output`` and
        ``--solution``), derived from the record: the map (``map``, ``dist``), ``n``,
        ``nb``, ``starchol_version`` and ``date``, with ``residual`` (NaN when it was
        not computed), ``source`` (where the data came from) and ``nrhs`` (right-hand
        sides: their columns)."""
        attrs = {"map": self.map, "dist": self.dist, "n": self.n, "nb": self.nb,
                 "residual": float("nan") if residual is None else residual,
                 "starchol_version": self.starchol_version, "date": self.date,
                 "source": source}
        return attrs if nrhs is None else {**attrs, "nrhs": int(nrhs)}

    # -- JSON ------------------------------------------------------------------------
    def with_extra(self, **keys):
        """A copy of the record with ``keys`` added: the typed parts (:data:`TYPED`:
        ``solve``, ``mixed``, ``memory``, ``trace``, ``kernels``) to their fields, read
        by their types (a part given as a plain object is parsed; ValueError naming
        the key when it does not fit), the others to :attr:`extra` (replacing those
        already there): how ``starchol run`` adds the rest of its document."""
        typed = {k: _typed(k, v) for k, v in keys.items() if k in TYPED}
        rest = {k: v for k, v in keys.items() if k not in TYPED}
        return replace(self, **typed, extra={**self.extra, **rest})

    def to_dict(self):
        """The JSON document: every field, the derived figures, and the nested
        ``runtime`` object of older documents (with ``extra["runtime"]``'s keys);
        ``extra`` keys at the top level."""
        doc = dict(self.extra)
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in TYPED:
                doc[f.name] = plain(value)  # null when the run had none
            elif f.name != "extra":
                doc[f.name] = _plain(value)
        more = self.extra.get("runtime")
        doc.update(flops=self.flops, gflops=self.gflops, bytes_measured_total=self.bytes_measured_total,
                   bytes_predicted_total=self.bytes_predicted_total, match=self.match,
                   runtime={**(more if isinstance(more, dict) else {}),
                            "scheduler": self.scheduler, "workers_per_rank": self.workers,
                            "starpu_version": self.starpu_version,
                            "starpu_build": self.starpu_build})
        return doc

    def to_json(self, indent=1):
        """The record as JSON text (see :meth:`to_dict`)."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, doc):
        """A record from a document of :meth:`to_dict` (or an older ``starchol run``
        document: missing fields keep their defaults, the nested ``runtime`` object is
        read); the one validator of run documents.

        Raises
        ------
        ValueError
            ``doc`` is not an object, lacks a key of :data:`REQUIRED`, or a key that is
            present has the wrong type or shape (``nodes``, ``n``, ``nb`` positive
            integers, ``nt`` = ceil(N / NB), the byte matrices P x P of finite
            non-negative numbers, the ``solve`` and ``mixed`` objects checked alike); the
            message names the key (``solve.nrhs`` for a nested one).
        """
        if not isinstance(doc, dict):
            raise ValueError(f"a run document is a JSON object, got {type(doc).__name__}")
        check_document(doc)
        known = {f.name: f for f in fields(cls)}
        derived = {"flops", "gflops", "bytes_measured_total", "bytes_predicted_total", "match",
                   "runtime"}
        values, extra = {}, dict(doc.get("extra") or {})
        for key, value in doc.items():
            if key == "solve" and isinstance(value, dict):
                # a solve runs on the run's map and matrix: what it leaves out is theirs
                value = {**{k: doc[k] for k in (*REQUIRED, "map", "map_params", "slices")
                            if k in doc}, **value}
            if key in TYPED:
                values[key] = _typed(key, value)
            elif key in known and key != "extra":
                values[key] = value
            elif key not in derived and key != "extra":
                extra[key] = value
        rt = doc.get("runtime") or {}
        values.setdefault("scheduler", rt.get("scheduler", ""))
        values.setdefault("workers", rt.get("workers_per_rank", 1))
        values.setdefault("starpu_version", rt.get("starpu_version", ""))
        values.setdefault("starpu_build", rt.get("starpu_build", ""))
        more = {k: v for k, v in rt.items() if k not in RUNTIME_KEYS}
        if more:   # the runtime's other keys (GPUs, kernel_blas, ...) round-trip
            extra["runtime"] = more
        for key in _INT_FIELDS:
            if key in values and not is_int(values[key]):
                raise ValueError(f"key {key!r} must be an integer, got {values[key]!r}")
        if "nt" not in values:
            values["nt"] = math.ceil(values["n"] / values["nb"])
        return cls(**values, extra=extra)

    @classmethod
    def from_json(cls, text):
        """A record from JSON text (or an already parsed dict)."""
        return cls.from_dict(json.loads(text) if isinstance(text, (str, bytes)) else text)


def check_document(doc):
    """Check the keys of a run document (a dict) that :meth:`RunRecord.from_dict` reads;
    raise ValueError naming the first wrong one (see there)."""
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ValueError(f"missing required key{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(repr(k) for k in missing)} (is this a `starchol run "
                         f"--json` document?)")
    if not isinstance(doc["dist"], str) or not doc["dist"]:
        raise ValueError(f"key 'dist' must be a map name, got {doc['dist']!r}")
    for key in ("nodes", "n", "nb"):
        if not is_int(doc[key]) or doc[key] < 1:
            raise ValueError(f"key {key!r} must be a positive integer, got {doc[key]!r}")
    nt = math.ceil(doc["n"] / doc["nb"])
    if "nt" in doc and doc["nt"] != nt:
        raise ValueError(f"key 'nt' is {doc['nt']!r} but N = {doc['n']} and NB = "
                         f"{doc['nb']} give NT = {nt}")
    for key in ("time_s", "submit_s"):
        if key in doc and not _is_number(doc[key]):
            raise ValueError(f"key {key!r} must be a number, got {doc[key]!r}")
    _check_figures(doc, doc["nodes"], "")
    runtime = doc.get("runtime")
    if runtime is not None and not isinstance(runtime, dict):
        raise ValueError(f"key 'runtime' must be an object, got {runtime!r}")
    params = doc.get("map_params")
    if params is not None and not isinstance(params, dict):
        raise ValueError(f"key 'map_params' must be an object (the map's parameters) or "
                         f"null, got {params!r}")
    solve = doc.get("solve")
    if solve is not None:
        if not isinstance(solve, dict):
            raise ValueError(f"key 'solve' must be an object or null, got {solve!r}")
        nrhs = solve.get("nrhs")
        if not is_int(nrhs) or nrhs < 1:
            raise ValueError(f"key 'solve.nrhs' must be a positive integer, got {nrhs!r}")
        if solve.get("tasks") is not None and not _is_number(solve["tasks"]):
            raise ValueError(f"key 'solve.tasks' must be a number, got {solve['tasks']!r}")
        _check_figures(solve, doc["nodes"], "solve.")


def _check_figures(doc, nodes, prefix):
    """The numbers, ``match`` and byte matrices of a document or of its ``solve``."""
    for key in NUMBER_KEYS:
        if doc.get(key) is not None and not _is_number(doc[key]):
            raise ValueError(f"key '{prefix}{key}' must be a number, got {doc[key]!r}")
    if doc.get("match") is not None and not isinstance(doc["match"], bool):
        raise ValueError(f"key '{prefix}match' must be true or false, got {doc['match']!r}")
    for key in PAIR_KEYS:
        if doc.get(key) is not None:
            pair_matrix(doc[key], nodes, prefix + key)


def pair_matrix(value, nodes, key="bytes_measured_pairs"):
    """A document's P x P byte matrix (sender row) as a float64 array, checked: raise
    ValueError naming ``key`` unless it is ``nodes`` x ``nodes`` finite numbers >= 0."""
    import numpy as np

    try:
        arr = np.array(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"key {key!r} must be a {nodes} x {nodes} list of numbers "
                         f"(bytes sent, sender row)") from None
    if arr.shape != (nodes, nodes):
        raise ValueError(f"key {key!r} must be {nodes} x {nodes} (nodes = {nodes}), got "
                         f"shape {'x'.join(map(str, arr.shape)) or 'scalar'}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise ValueError(f"key {key!r} has negative or non-finite byte counts")
    return arr


def _typed(key, value):
    """The typed part ``key`` (:data:`TYPED`) of a document, read from ``value`` (a
    plain object, or the part itself); ValueError naming the key when it does not fit."""
    return parse(typing.get_type_hints(RunRecord)[key], value, key, _nested)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _nested(name, value, key):
    """A nested run document (``solve``), read by :meth:`RunRecord.from_dict`, its
    errors naming the key."""
    assert name == "RunRecord", name
    if isinstance(value, RunRecord):
        return value
    try:
        return RunRecord.from_dict(value)
    except ValueError as exc:
        raise ValueError(f"key {key!r}: {exc}") from None


def document_schema():
    """The JSON Schema of a run document (:meth:`RunRecord.to_dict`), generated from
    the record's type hints and its parts' (:mod:`.run_parts`): the fields, the derived
    figures and the ``runtime`` object; other keys (``extra``) are free. The ``solve``
    part is a run document itself (``$ref: #``)."""
    schema = dataclass_schema(RunRecord, refs={"RunRecord": "#"}, closed=False,
                              skip=("extra",))
    number = {"type": "number"}
    optional_int = {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    schema["properties"].update(
        flops=number, gflops=number, bytes_measured_total=optional_int,
        bytes_predicted_total=optional_int,
        match={"anyOf": [{"type": "boolean"}, {"type": "null"}]},
        runtime={"type": "object", "required": list(RUNTIME_KEYS),
                 "properties": {"scheduler": {"type": "string"},
                                "workers_per_rank": {"type": "integer"},
                                "starpu_version": {"type": "string"},
                                "starpu_build": {"type": "string"}}})
    schema["required"] = list(REQUIRED)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "starchol run document", **schema}


def _as_lists(v):
    return [[int(x) for x in row] for row in v]


def _plain(v):
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


__all__ = ["NUMBER_KEYS", "PAIR_KEYS", "REQUIRED", "RUNTIME_KEYS", "RunRecord", "TYPED",
           "check_document", "document_schema", "pair_matrix"]
