"""Descriptions of the machines a run is simulated on: nodes and their network.

A **node description** (JSON; ``starchol calibrate`` writes one, ``docs/simulation.md``
shows the fields, ``examples/nodes/`` has examples) gives:

- ``workers``: the workers per node (StarPU CPU workers, or GPUs);
- ``gflops``: GFlop/s of one worker per kernel (``potrf``, ``trsm``, ``syrk``, ``gemm``,
  ``add``), per dtype (``float64``, ``float32``); ``gflops_by_nb`` (optional, from
  ``calibrate``) the same per tile size NB, used when it has the run's NB;
- optional: ``memory`` (bytes, or a string such as ``"192GB"``), ``bandwidth`` and
  ``latency`` of the node's link (``"100Gbit"``, ``"1.2GB/s"``, ``"5us"``),
  ``comm_throughput`` (bytes/s that the node's communication moves, sends and receives
  together: its NIC driven by the runtime's one communication thread; absent: only the
  link limits), ``name``, ``source`` (where the figures come from).

A :class:`Platform` is P such nodes, each with one full-duplex link of that bandwidth
and latency to a switch, optionally through one shared backbone link. Units: bytes,
bytes per second, seconds, flop/s.
"""
import math
import re
from dataclasses import dataclass, field

from ..errors import UsageError
from ..integers import check_int
from .counts import KERNELS
from .operations import BYTES_PER_ENTRY

DTYPES = tuple(BYTES_PER_ENTRY)

_BANDWIDTH_UNITS = {  # bytes per second
    "b/s": 1, "bps": 1 / 8, "bit": 1 / 8, "kbit": 1e3 / 8, "mbit": 1e6 / 8, "gbit": 1e9 / 8,
    "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "kib/s": 1024, "mib/s": 1024 ** 2,
    "gib/s": 1024 ** 3, "kbps": 1e3 / 8, "mbps": 1e6 / 8, "gbps": 1e9 / 8}
_TIME_UNITS = {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_SIZE_UNITS = {"b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 1024,
               "mib": 1024 ** 2, "gib": 1024 ** 3, "tib": 1024 ** 4}


def _parse(value, units, what, default_unit):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number, unit = float(value), default_unit
    elif isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*", value)
        if not m:
            raise UsageError(f"{what}: cannot read {value!r}; write a number and a unit "
                             f"({', '.join(sorted(units))})")
        number, unit = float(m.group(1)), (m.group(2) or default_unit).lower()
        if unit not in units:
            raise UsageError(f"{what}: unknown unit {m.group(2)!r} in {value!r}; use one "
                             f"of {', '.join(sorted(units))}")
    else:
        raise UsageError(f"{what} must be a number or a string with a unit, got {value!r}")
    out = number * units[unit]
    if not math.isfinite(out) or out < 0:
        raise UsageError(f"{what} must be a finite number >= 0, got {value!r}")
    return out


def parse_bandwidth(value, what="bandwidth"):
    """Bytes per second from ``"10mbit"``, ``"100Gbit"``, ``"1.25GB/s"`` or a number
    (bytes per second). UsageError for anything else or a value <= 0."""
    out = _parse(value, _BANDWIDTH_UNITS, what, "b/s")
    if out <= 0:
        raise UsageError(f"{what} must be > 0, got {value!r}")
    if not BANDWIDTH_RANGE[0] <= out <= BANDWIDTH_RANGE[1]:
        raise UsageError(f"{what} must be from {BANDWIDTH_RANGE[0]:g} to "
                         f"{BANDWIDTH_RANGE[1]:g} bytes/s, got {value!r}")
    return out


#: the simulator's range of figures: a kernel from 1e-6 to 1e9 GFlop/s per worker, a
#: latency up to a day, a bandwidth from 1 byte/s to 1e18 bytes/s; beyond, simulated times
#: leave SimGrid's clock range (a speed of 1e-308 stopped the simulation midway)
GFLOPS_RANGE = (1e-6, 1e9)
MAX_LATENCY_S = 86400.0
BANDWIDTH_RANGE = (1.0, 1e18)


def parse_latency(value, what="latency"):
    """Seconds from ``"5us"``, ``"0.1ms"`` or a number (seconds), from 0 to
    :data:`MAX_LATENCY_S`."""
    out = _parse(value, _TIME_UNITS, what, "s")
    if not 0 <= out <= MAX_LATENCY_S:
        raise UsageError(f"{what} must be from 0 to {MAX_LATENCY_S:g} s (a day), got "
                         f"{value!r}")
    return out


def parse_size(value, what="memory"):
    """Bytes from ``"192GB"``, ``"64GiB"`` or a number (bytes)."""
    return _parse(value, _SIZE_UNITS, what, "b")


@dataclass
class NodeSpec:
    """One node: workers, GFlop/s per worker per kernel and dtype, memory, link."""
    workers: int
    gflops: dict                        # {dtype: {kernel: GFlop/s per worker}}
    gflops_by_nb: dict = field(default_factory=dict)   # {dtype: {nb: {kernel: GFlop/s}}}
    memory: float = None                # bytes
    bandwidth: float = None             # bytes/s of the node's link
    latency: float = None               # s
    comm_throughput: float = None       # bytes/s, sends and receives together
    name: str = "node"
    source: str = ""

    def kernel_gflops(self, dtype, nb):
        """``{kernel: GFlop/s per worker}`` for tiles of NB x NB in ``dtype``: the
        calibrated figures at that NB when there are some, else ``gflops[dtype]``.
        UsageError when the description has neither."""
        by_nb = self.gflops_by_nb.get(dtype, {})
        if str(nb) in by_nb:
            return dict(by_nb[str(nb)])
        if dtype in self.gflops:
            return dict(self.gflops[dtype])
        if by_nb:
            near = min(by_nb, key=lambda k: abs(int(k) - nb))
            return dict(by_nb[near])
        raise UsageError(f"node {self.name!r} gives no kernel speeds for {dtype}; add "
                         f"gflops.{dtype} to its description", param="node")

    def to_dict(self):
        out = {"name": self.name, "workers": self.workers, "gflops": self.gflops}
        if self.gflops_by_nb:
            out["gflops_by_nb"] = self.gflops_by_nb
        for key in ("memory", "bandwidth", "latency", "comm_throughput"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.source:
            out["source"] = self.source
        return out


def _check_speeds(table, where):
    if not isinstance(table, dict) or not table:
        raise UsageError(f"{where} must be an object {{kernel: GFlop/s}}")
    missing = [k for k in KERNELS if k not in table]
    if missing:
        raise UsageError(f"{where} lacks {', '.join(missing)} (needs {', '.join(KERNELS)})")
    out = {}
    for k in KERNELS:
        v = table[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v <= 0:
            raise UsageError(f"{where}.{k} must be a number of GFlop/s > 0, got {v!r}")
        if not GFLOPS_RANGE[0] <= v <= GFLOPS_RANGE[1]:
            raise UsageError(f"{where}.{k} must be from {GFLOPS_RANGE[0]:g} to "
                             f"{GFLOPS_RANGE[1]:g} GFlop/s per worker, got {v!r}")
        out[k] = float(v)
    unknown = sorted(set(table) - set(KERNELS))
    if unknown:
        raise UsageError(f"{where} has unknown kernel(s) {', '.join(unknown)} (known: "
                         f"{', '.join(KERNELS)})")
    return out


#: the most workers a node description may give (a node of 2^20 cores is far beyond
#: any machine; a larger figure is a typo that would allocate per worker)
MAX_WORKERS = 2 ** 20


def check_fields(doc, known, where):
    """Refuse a parsed JSON description that is not an object, or holds a field not in
    ``known``: the one check of the fields of node and runtime descriptions;
    UsageError naming ``where``."""
    if not isinstance(doc, dict):
        raise UsageError(f"{where} must be a JSON object")
    unknown = sorted(set(doc) - set(known))
    if unknown:
        raise UsageError(f"{where}: unknown field(s) {', '.join(unknown)} (known: "
                         f"{', '.join(sorted(known))})")


def node_from_dict(doc, where="node description"):
    """A :class:`NodeSpec` from a parsed JSON object; UsageError naming the field."""
    check_fields(doc, {"name", "workers", "gflops", "gflops_by_nb", "memory", "bandwidth",
                       "latency", "comm_throughput", "source", "calibration", "comment"},
                 where)
    w = check_int(doc.get("workers"), f"{where}: workers", 1, MAX_WORKERS, exact=False,
                  param=None)
    for field in ("gflops", "gflops_by_nb"):
        if doc.get(field) is not None and not isinstance(doc[field], dict):
            raise UsageError(f"{where}: {field} must be an object {{dtype: ...}}, got "
                             f"{type(doc[field]).__name__} {str(doc[field])[:40]!r}")
    gflops = {}
    for dt, table in (doc.get("gflops") or {}).items():
        if dt not in DTYPES:
            raise UsageError(f"{where}: gflops has dtype {dt!r}; use {' or '.join(DTYPES)}")
        gflops[dt] = _check_speeds(table, f"{where}: gflops.{dt}")
    by_nb = {}
    for dt, per_nb in (doc.get("gflops_by_nb") or {}).items():
        if dt not in DTYPES or not isinstance(per_nb, dict):
            raise UsageError(f"{where}: gflops_by_nb must be {{dtype: {{NB: {{kernel: "
                             f"GFlop/s}}}}}}, got key {dt!r}")
        by_nb[dt] = {}
        for nb, table in per_nb.items():
            if not str(nb).isdigit() or int(nb) < 1:
                raise UsageError(f"{where}: gflops_by_nb.{dt} has tile size {nb!r}; use "
                                 f"an integer NB >= 1")
            by_nb[dt][str(int(nb))] = _check_speeds(table, f"{where}: gflops_by_nb.{dt}.{nb}")
    if not gflops and not by_nb:
        raise UsageError(f"{where}: give gflops (GFlop/s per worker per kernel) for "
                         f"float64 and/or float32")
    return NodeSpec(
        workers=w, gflops=gflops, gflops_by_nb=by_nb,
        memory=None if doc.get("memory") is None else parse_size(doc["memory"],
                                                                  f"{where}: memory"),
        bandwidth=None if doc.get("bandwidth") is None else parse_bandwidth(
            doc["bandwidth"], f"{where}: bandwidth"),
        latency=None if doc.get("latency") is None else parse_latency(
            doc["latency"], f"{where}: latency"),
        comm_throughput=None if doc.get("comm_throughput") is None else parse_bandwidth(
            doc["comm_throughput"], f"{where}: comm_throughput"),
        name=str(doc.get("name", "node")), source=str(doc.get("source", "")))


def load_node(path, role="node description"):
    """Read a node description from a JSON file; UsageError naming the file (as
    ``role``: the command line passes its flag) and the problem (missing, not a regular
    file, too large, not JSON, a bad field): the one readable-input rule,
    :func:`starchol.files.read_json_input`."""
    from ..files import read_json_input

    doc = read_json_input(path, role)
    return node_from_dict(doc, f"node description {path}")


@dataclass
class Platform:
    """P identical nodes; each has a full-duplex link of ``bandwidth`` (bytes/s, each
    direction) and ``latency`` (s) to a switch, and, with ``backbone_bandwidth``, the
    switches are joined by one shared link of that bandwidth and ``backbone_latency``."""
    node: NodeSpec
    nodes: int
    bandwidth: float
    latency: float = 0.0
    backbone_bandwidth: float = 0.0
    backbone_latency: float = 0.0

    def __post_init__(self):
        check_int(self.nodes, "nodes", 1, exact=False, param=None)
        if not (self.bandwidth > 0 and math.isfinite(self.bandwidth)):
            raise UsageError(f"bandwidth must be > 0 bytes/s, got {self.bandwidth!r}")
        if not (self.latency >= 0 and math.isfinite(self.latency)):
            raise UsageError(f"latency must be >= 0 s, got {self.latency!r}")
        if self.backbone_bandwidth and not self.backbone_bandwidth > 0:
            raise UsageError(f"backbone bandwidth must be > 0, got {self.backbone_bandwidth!r}")

    def to_dict(self):
        return {"nodes": self.nodes, "node": self.node.to_dict(),
                "bandwidth_bytes_per_s": self.bandwidth, "latency_s": self.latency,
                "backbone_bandwidth_bytes_per_s": self.backbone_bandwidth or None,
                "backbone_latency_s": self.backbone_latency}
