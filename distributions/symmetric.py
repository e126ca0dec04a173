"""The symmetric maps built from block designs: ``pplane``, ``aplane`` and ``sym``.

- ``pplane``: the projective plane PG(2, q), P = r = q^2 + q + 1 nodes; node p owns every
  pair of the q + 1 points of line p; D/S -> q.
- ``aplane``: the affine plane AG(2, q), r = q^2 points, P = q^2 + q nodes; D/S -> q.
- ``sym``: a symmetric map for any P >= 2. It builds the known constructions that fit P
  (extended or basic SBC, a plane) and, from every plane and from SBC's pairs near P, a
  pattern with lines added, removed or reshaped by :func:`.cover.cover`, and keeps the one
  with the least D/S whose long-run load stays balanced; optionally only patterns small
  enough for a given NT (at least :data:`MIN_PERIODS` periods).

Every map here is a :class:`.symmetric_pattern.SymmetricPattern`; its diagonal is given
by a maximum flow over the rows (see :func:`.symmetric_pattern.diagonal_by_flow`).
"""
import math
from functools import lru_cache

import numpy as np

from .base import MIN_PERIODS, count_text
from .cover import cover
from .designs import affine_plane, plane_orders, prime_power, projective_plane
from .symmetric_pattern import SymmetricPattern, pattern_from_blocks, pattern_from_cells

#: the cover search runs on patterns of at most this size (r (r-1)/2 pairs)
COVER_MAX_R = 200

#: a candidate's long-run cells max / mean must stay within this
UNIT_BALANCE = 1.03


def pplane_order(nodes):
    """q with q^2 + q + 1 == nodes and q a prime power, or None."""
    q = int(round((-1 + math.sqrt(max(0, 4 * nodes - 3))) / 2))
    return q if q >= 2 and q * q + q + 1 == nodes and prime_power(q) else None


def aplane_order(nodes):
    """q with q^2 + q == nodes and q a prime power, or None."""
    q = int(round((-1 + math.sqrt(1 + 4 * nodes)) / 2))
    return q if q >= 2 and q * q + q == nodes and prime_power(q) else None


def plane_counts(kind, upto):
    """Node counts of the planes (``pplane`` or ``aplane``) up to ``upto`` and one above."""
    out = []
    for q in plane_orders(64):
        v = q * q + q + (1 if kind == "pplane" else 0)
        out.append(v)
        if v > upto:
            break
    return out


def projective_plane_map(q, offset=0):
    """The ``pplane`` map of order q (prime power): P = r = q^2 + q + 1."""
    return _plane_map("pplane", q).with_offset(offset)


def affine_plane_map(q, offset=0):
    """The ``aplane`` map of order q (prime power): P = q^2 + q, r = q^2."""
    return _plane_map("aplane", q).with_offset(offset)


@lru_cache(maxsize=64)
def _plane_map(kind, q):
    if kind == "pplane":
        return pattern_from_blocks(projective_plane(q), q * q + q + 1, name="pplane",
                                   label=f"PG(2,{q})")
    return pattern_from_blocks(affine_plane(q), q * q, name="aplane", label=f"AG(2,{q})")


def _sbc_pairs(r):
    iu = np.triu_indices(r, 1)
    return [np.array([a, b]) for a, b in zip(*iu)]


def basic_sbc_pattern(r):
    """Basic SBC (r even, P = r^2/2) as a pattern: diagonal cells x and x + r/2 share a node."""
    pairs = _sbc_pairs(r)
    cells = np.zeros((r, r), dtype=np.int64)
    for p, (a, b) in enumerate(pairs):
        cells[a, b] = cells[b, a] = p
    diag = len(pairs) + np.arange(r) % (r // 2)
    return SymmetricPattern(cells, diag[None, :], nodes=r * r // 2, name="sym",
                            label=f"basic SBC r={r}")


def _base_designs(nodes, r_limit):
    """(label, r, blocks) of the linear spaces the cover search starts from.

    Every plane with between P / 2.2 and 2.2 P lines, on all its points and on all but
    one (a different r changes how evenly r(r-1)/2 pairs split over P nodes), cut to
    ``r_limit`` points if larger (planes over twice that are skipped); and SBC's pairs
    for the four smallest r that give every node a pair.
    """
    out = []
    for q in plane_orders(64):
        for kind, r_full, lines in (("PG", q * q + q + 1, q * q + q + 1),
                                    ("AG", q * q, q * q + q)):
            if not nodes / 2.2 <= lines <= 2.2 * nodes or r_full > 2 * r_limit:
                continue
            plane = projective_plane(q) if kind == "PG" else affine_plane(q)
            sizes = {min(r_full, r_limit), min(r_full - 1, r_limit)}
            for r in sorted((r for r in sizes if r >= _sbc_r(nodes)), reverse=True):
                blocks = [b[b < r] for b in plane]
                blocks = [b for b in blocks if len(b) >= 2]
                label = f"{kind}(2,{q})" + (f" on {r} points" if r < r_full else "")
                out.append((label, r, blocks))
    r0 = _sbc_r(nodes)
    for r in range(r0, r0 + 4):
        if r <= r_limit:
            out.append((f"SBC pairs r={r}", r, _sbc_pairs(r)))
    return out


def _sbc_r(nodes):
    """Smallest r with r(r-1)/2 >= nodes (so every node can own a pair)."""
    r = 2
    while r * (r - 1) // 2 < nodes:
        r += 1
    return r


def _describe(label, lines, nodes):
    if lines == nodes:
        return label + " reshaped"
    if lines < nodes:
        return f"{label} + {count_text(nodes - lines, 'node')}"
    return f"{label} - {count_text(lines - nodes, 'line')}"


class Draft:
    """A candidate pattern before its diagonal: cells, label, and its cheap scores.

    ``lead`` is exact (the diagonal goes to nodes already in the row, so it changes no
    colrow set); ``pair_balance`` is the largest node's off-diagonal cells over the mean
    cells per node, r^2 / P: the diagonal can only add to it.
    """

    def __init__(self, cells, nodes, label, diagonal=None):
        self.cells, self.nodes, self.label, self.diagonal = cells, nodes, label, diagonal
        self.r = cells.shape[0]
        r = self.r
        off = ~np.eye(r, dtype=bool)
        rows = np.zeros((nodes, r), dtype=bool)
        xs = np.broadcast_to(np.arange(r)[:, None], (r, r))[off]
        rows[cells[off], xs] = True
        if diagonal is not None:
            rows[diagonal.ravel(), np.tile(np.arange(r), diagonal.shape[0])] = True
        self.lead = rows.sum() / r - 1.0
        units = np.bincount(cells[off], minlength=nodes).astype(float)
        if diagonal is not None:
            units += np.bincount(diagonal.ravel(), minlength=nodes) / diagonal.shape[0]
        self.pair_balance = units.max() / (r * r / nodes)

    def finish(self):
        """The :class:`SymmetricPattern` (diagonal by flow unless given)."""
        if self.diagonal is not None:
            return SymmetricPattern(self.cells, self.diagonal, nodes=self.nodes, name="sym",
                                    label=self.label)
        return pattern_from_cells(self.cells, self.nodes, name="sym", label=self.label)


def pattern_limit(nodes, nt=None):
    """Largest pattern size ``sym`` weighs for NT tile rows: NT / MIN_PERIODS, at least the
    r that SBC needs for P nodes; None (no limit) without NT."""
    return None if nt is None else max(_sbc_r(int(nodes)), int(nt) // MIN_PERIODS)


def symmetric_candidates(nodes, r_max=None):
    """Every pattern :func:`symmetric_map` weighs for ``nodes`` nodes and patterns of at most
    ``r_max`` indices: list of :class:`Draft`."""
    nodes = int(nodes)
    fits = (lambda r: True) if r_max is None else (lambda r: r <= r_max)
    out = []
    q = pplane_order(nodes)
    if q and fits(nodes):
        m = _plane_map("pplane", q)
        out.append(Draft(m.cells, nodes, m.label, m.diagonal))
    q = aplane_order(nodes)
    if q and fits(q * q):
        m = _plane_map("aplane", q)
        out.append(Draft(m.cells, nodes, m.label, m.diagonal))
    r = int(round(math.sqrt(2 * nodes)))
    if r >= 2 and r % 2 == 0 and r * r // 2 == nodes and fits(r):
        m = basic_sbc_pattern(r)
        out.append(Draft(m.cells, nodes, m.label, m.diagonal))
    r_limit = COVER_MAX_R if r_max is None else min(COVER_MAX_R, r_max)
    r_limit = max(r_limit, _sbc_r(nodes))
    for label, r, blocks in _base_designs(nodes, r_limit):
        st = cover(r, nodes, blocks)
        out.append(Draft(st.cells(), nodes, _describe(label, len(blocks), nodes)))
    return out


def _as_sym(m):
    return SymmetricPattern(m.cells, m.diagonal, nodes=m.nodes, name="sym", label=m.label)


def symmetric_map(nodes, nt=None):
    """The ``sym`` map for ``nodes`` nodes (see the module docstring).

    Parameters
    ----------
    nodes : int
        P >= 2.
    nt : int, optional
        Tile rows of the matrix: if given, only patterns with r <= NT / MIN_PERIODS are
        weighed (but never fewer indices than an SBC pattern of P nodes needs).

    Returns the candidate with the least leading factor among those whose long-run cell
    count per node is within :data:`UNIT_BALANCE` of the mean (else the best balanced).
    Deterministic: the same (nodes, nt) always gives the same map.
    """
    nodes = int(nodes)
    if nodes < 2:
        raise ValueError(f"a symmetric map needs nodes >= 2, got {nodes}")
    m = _symmetric_map(nodes, pattern_limit(nodes, nt))   # shared: a copy keeps its nt
    return SymmetricPattern(m.cells, m.diagonal, nodes=m.nodes, name=m.name, label=m.label,
                            reverse=m.reverse, offset=m.offset, nt=nt)


@lru_cache(maxsize=64)
def _symmetric_map(nodes, r_max):
    drafts = symmetric_candidates(nodes, r_max)
    drafts.sort(key=lambda d: (round(d.lead, 9), d.r))
    fallback = None
    for d in drafts:
        if d.pair_balance > UNIT_BALANCE:
            continue
        m = d.finish()
        units = m.pattern_units()
        balance = units.max() / units.mean()
        if balance <= UNIT_BALANCE:
            return m
        if fallback is None or balance < fallback[0]:
            fallback = (balance, m)
    if fallback is not None:
        return fallback[1]
    d = min(drafts, key=lambda d: (d.pair_balance, d.lead))
    return d.finish()
