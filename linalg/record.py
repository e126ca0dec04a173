"""The typed record of one distributed computation (a factorization or a solve).

A :class:`RunRecord` is what ``Factor.record`` and ``Factor.solve`` return, what
``starchol run --json`` writes (rank 0) and what ``starchol report`` reads back: one
dataclass, one :meth:`RunRecord.to_json`, one :meth:`RunRecord.from_json`.

Units: seconds for times, bytes for volumes (``*_pairs`` are P x P lists, sender row,
receiver column), tiles only where a name says so.
"""
import datetime
import json
import math
from dataclasses import asdict, dataclass, field, fields

#: keys of the nested ``runtime`` object of the JSON document (kept for old readers)
RUNTIME_KEYS = ("scheduler", "workers_per_rank", "starpu_version", "starpu_build")


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
    extra : dict
        Other keys of a JSON document (e.g. ``residual``, ``seed``), kept as they are.
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
        if self.operation == "solve":
            return 2.0 * self.n * self.n * self.nrhs
        if self.operation in ("forward_solve", "backward_solve"):
            return 1.0 * self.n * self.n * self.nrhs
        return self.n ** 3 / 3.0

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

    # -- JSON ------------------------------------------------------------------------
    def to_dict(self):
        """The JSON document: every field, the derived figures, and the nested
        ``runtime`` object of older documents; ``extra`` keys at the top level."""
        doc = dict(self.extra)
        for f in fields(self):
            if f.name != "extra":
                doc[f.name] = _plain(getattr(self, f.name))
        doc.update(flops=self.flops, gflops=self.gflops, bytes_measured_total=self.bytes_measured_total,
                   bytes_predicted_total=self.bytes_predicted_total, match=self.match,
                   runtime={"scheduler": self.scheduler, "workers_per_rank": self.workers,
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
        read). Raises ValueError naming the key when a field has the wrong type."""
        if not isinstance(doc, dict):
            raise ValueError(f"a run record is a JSON object, got {type(doc).__name__}")
        known = {f.name: f for f in fields(cls)}
        derived = {"flops", "gflops", "bytes_measured_total", "bytes_predicted_total", "match",
                   "runtime"}
        values, extra = {}, dict(doc.get("extra") or {})
        for key, value in doc.items():
            if key in known and key != "extra":
                values[key] = value
            elif key not in derived and key != "extra":
                extra[key] = value
        rt = doc.get("runtime") or {}
        if isinstance(rt, dict):
            values.setdefault("scheduler", rt.get("scheduler", ""))
            values.setdefault("workers", rt.get("workers_per_rank", 1))
            values.setdefault("starpu_version", rt.get("starpu_version", ""))
            values.setdefault("starpu_build", rt.get("starpu_build", ""))
        for key in ("nodes", "slices", "n", "nb", "nt", "nrhs", "tasks", "ranks",
                    "ranks_per_host", "workers"):
            if key in values and not _is_int(values[key]):
                raise ValueError(f"key {key!r} must be an integer, got {values[key]!r}")
        for key in ("time_s", "submit_s"):
            if key in values and not _is_number(values[key]):
                raise ValueError(f"key {key!r} must be a number, got {values[key]!r}")
        if values.get("map_params") is not None and not isinstance(values["map_params"],
                                                                    dict):
            raise ValueError(f"key 'map_params' must be an object (the map's parameters) or "
                             f"null, got {values['map_params']!r}")
        if "nt" not in values and values.get("n") and values.get("nb"):
            values["nt"] = math.ceil(values["n"] / values["nb"])
        return cls(**values, extra=extra)

    @classmethod
    def from_json(cls, text):
        """A record from JSON text (or an already parsed dict)."""
        return cls.from_dict(json.loads(text) if isinstance(text, (str, bytes)) else text)


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _as_lists(v):
    return [[int(x) for x in row] for row in v]


def _plain(v):
    if hasattr(v, "tolist"):
        return v.tolist()
    return v


def now_utc():
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


__all__ = ["RunRecord", "now_utc"]
