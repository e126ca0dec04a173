"""Build a map from its name, with fix-it messages for wrong node counts.

Messages name the parameters of :func:`get_map` as ``name=value`` (``nodes=20``,
``grid=4x5``, ``slices=2``, ``path=FILE``, ``dist=sym``); the command line turns them
into its flags (:func:`starchol.jobs.options.cli_message`).
"""
import math

from ..errors import UsageError
from ..integers import check_int
from .block_cyclic import BlockCyclic2D
from .custom import load_custom_map
from .base import DEFAULT_SLICE_BLOCK
from .sliced import Sliced25D, check_block
from .symmetric import (affine_plane_map, aplane_order, plane_counts, pplane_order,
                        projective_plane_map, symmetric_map)
from .symmetric_block_cyclic import SymmetricBlockCyclic

#: the 2.5D maps (c slices of a 2D map)
MAPS_25D = ("2dbc25d", "sbc25d", "sym25d")

#: map names as used on the command line
MAP_NAMES = ("2dbc", "sbc", "sbc-basic", "pplane", "aplane", "sym") + MAPS_25D + ("custom",)


# -- valid node counts -------------------------------------------------------------------
def sbc_extended_r(p):
    """r with r(r-1)/2 == p and r >= 3, or None."""
    r = int(round((1 + math.sqrt(1 + 8 * p)) / 2))
    return r if r >= 3 and r * (r - 1) // 2 == p else None


def sbc_basic_r(p):
    """Even r with r^2/2 == p, or None."""
    r = int(round(math.sqrt(2 * p)))
    return r if r >= 2 and r % 2 == 0 and r * r // 2 == p else None


def square_grid(p):
    """The most square grid p_rows x q_cols with p_rows <= q_cols and p_rows * q_cols == p."""
    best = 1
    for d in range(1, math.isqrt(p) + 1):
        if p % d == 0:
            best = d
    return best, p // best


def parse_grid(text):
    """'7x4' -> (7, 4)."""
    try:
        a, b = str(text).lower().split("x")
        p, q = int(a), int(b)
    except ValueError:
        raise UsageError(f"grid= must look like PxQ (e.g. 4x7), got {text!r}") from None
    if p < 1 or q < 1:
        raise UsageError(f"grid= needs positive sizes, got {text!r}")
    return p, q


def _neighbours(values, p):
    below = [v for v in values if v < p][-2:]
    above = [v for v in values if v > p][:2]
    return below, above


def _sbc_counts(extended, upto):
    out, r = [], 3 if extended else 2
    while True:
        v = r * (r - 1) // 2 if extended else r * r // 2
        if v > upto:
            out.append(v)
            return out
        out.append(v)
        r += 1 if extended else 2


def _count_list(values, p):
    below, above = _neighbours(values, p)
    parts = (["..."] if values and values[0] < (below or [p])[0] else []) + \
        [str(v) for v in below + above] + ["..."]
    return ", ".join(parts)


def _bad_count(name, p, values, formula, what="nodes"):
    below, above = _neighbours(values, p)
    near = [f"nodes={v}" for v in (below[-1:] + above[:1])]
    msg = (f"{name} needs P = {formula} {what} ({_count_list(values, p)}): {p} is not one; "
           f"use {' or '.join(near)}")
    if p >= 2 and what == "nodes":
        pr, qr = square_grid(p)
        msg += (f", or dist=sym (a symmetric map for any node count) or dist=2dbc "
                f"grid={pr}x{qr} for all {p} nodes")
    return UsageError(msg)


def _bad_sbc_count(name, p, extended, what="nodes"):
    formula = "r(r-1)/2" if extended else "r^2/2 (r even)"
    return _bad_count(name, p, _sbc_counts(extended, max(p, 3) * 2 + 10), formula, what)


# -- construction --------------------------------------------------------------------------
def _check_nodes(nodes):
    return check_int(nodes, "nodes=", 1)


def _grid_for(nodes, grid, what="nodes", slices=1):
    if grid is None:
        return square_grid(nodes)
    p, q = parse_grid(grid) if isinstance(grid, str) else (int(grid[0]), int(grid[1]))
    if p * q != nodes:
        pr, qr = square_grid(nodes)
        total = "" if slices == 1 else f" (nodes / slices = {nodes * slices}/{slices})"
        raise UsageError(f"grid={p}x{q} has {p * q} nodes but {what}{total} is {nodes}; "
                         f"use a grid with P x Q = {nodes} (e.g. grid={pr}x{qr}) or "
                         f"nodes={p * q * slices}")
    return p, q


def _sbc_2d(name, p, offset=0, what="nodes"):
    """An SBC map over p nodes: extended if p = r(r-1)/2, basic if p = r^2/2."""
    if name == "sbc":
        r = sbc_extended_r(p)
        if r is None:
            raise _bad_sbc_count("sbc", p, True, what)
        return SymmetricBlockCyclic(r, extended=True, offset=offset)
    r = sbc_basic_r(p)
    if r is None:
        raise _bad_sbc_count("sbc-basic", p, False, what)
    return SymmetricBlockCyclic(r, extended=False, offset=offset)


def _plane(name, nodes, offset=0, what="nodes"):
    if name == "pplane":
        q = pplane_order(nodes)
        if q is None:
            raise _bad_count("pplane", nodes, plane_counts("pplane", 2 * nodes + 10),
                             "q^2+q+1 (q a prime power)", what)
        return projective_plane_map(q, offset)
    q = aplane_order(nodes)
    if q is None:
        raise _bad_count("aplane", nodes, plane_counts("aplane", 2 * nodes + 10),
                         "q^2+q (q a prime power)", what)
    return affine_plane_map(q, offset)


def _sym(nodes, nt, offset=0, what="nodes"):
    if nodes < 2:
        raise UsageError(f"sym needs at least 2 {what}, got {nodes} (one node moves nothing: "
                         f"use dist=2dbc)")
    return symmetric_map(nodes, nt).with_offset(offset)


def get_map(dist, nodes=None, grid=None, slices=1, path=None, nt=None, slice_block=None):
    """Build the map called ``dist`` for ``nodes`` nodes.

    ``get_map(**m.params())`` builds a map equal to ``m`` again
    (:meth:`.base.TileMap.params`).

    Parameters
    ----------
    dist : str
        The map's name, one of :data:`MAP_NAMES`.
    nodes : int
        Total number of nodes P (all slices); optional for ``custom``.
    grid : str or (int, int)
        ``"PxQ"`` or (p, q) for 2dbc (the grid of one slice for 2dbc25d).
    slices : int
        c, for the 2.5D maps (``2dbc25d``, ``sbc25d``, ``sym25d``).
    path : str
        Map file for ``custom`` (Chameleon text or ``.npy``).
    nt : int, optional
        Tile rows of the matrix, for ``sym``/``sym25d``: the pattern is chosen small enough
        to balance the load over NT rows (see :func:`.symmetric.symmetric_map`); the
        other maps do not depend on it.
    slice_block : int, optional
        b, for the 2.5D maps: iterations per slice turn (:func:`~.base.iteration_slices`;
        default :data:`~.base.DEFAULT_SLICE_BLOCK`); a 2D map takes only 1 (or None).

    Raises
    ------
    UsageError
        The name, node count, grid, slice count or block does not fit; the message lists
        valid values near the one given and a map that fits, naming these parameters.
    """
    name = dist
    if name not in MAP_NAMES:
        raise UsageError(f"unknown map {name!r}; choose one of {', '.join(MAP_NAMES)}")
    if slice_block is not None and name not in MAPS_25D and str(slice_block).strip() != "1":
        raise UsageError(f"slice_block={slice_block} (iterations per slice turn) applies to "
                         f"the 2.5D maps only ({', '.join(MAPS_25D)}), not {name}")
    block = check_block(DEFAULT_SLICE_BLOCK if slice_block is None else slice_block)
    if name == "custom":
        if grid is not None:
            raise UsageError(f"grid={grid if isinstance(grid, str) else 'x'.join(map(str, grid))}"
                             f" does not apply to dist=custom: a custom map's owners come "
                             f"from its file (path=...); drop grid=")
        if str(slices).strip() != "1":
            raise UsageError(f"slices={slices} does not apply to dist=custom: a custom map is "
                             f"2D, its owners come from its file (path=...); drop slices=, or "
                             f"use dist={', dist='.join(MAPS_25D)} for a 2.5D map")
        return load_custom_map(path, None if nodes is None else _check_nodes(nodes))
    if nodes is None:
        raise UsageError(f"{name} needs nodes=P")
    nodes = _check_nodes(nodes)
    slices = check_int(slices, "slices=", 1)
    if grid is not None and name not in ("2dbc", "2dbc25d"):
        raise UsageError(f"grid= applies to 2dbc and 2dbc25d only, not {name}")
    if name not in MAPS_25D:
        if slices != 1:
            raise UsageError(f"{name} is a 2D map; slices={slices} needs "
                             f"{', '.join(MAPS_25D)}")
        if name == "2dbc":
            return BlockCyclic2D(*_grid_for(nodes, grid))
        if name in ("pplane", "aplane"):
            return _plane(name, nodes)
        if name == "sym":
            return _sym(nodes, nt)
        return _sbc_2d(name, nodes)
    # 2.5D maps
    if nodes % slices:
        valid = _slice_counts(name, nodes)
        raise UsageError(f"{name} with slices={slices} needs a node count divisible by "
                         f"{slices}; nodes={nodes} is not (valid slice counts for {name} on "
                         f"{nodes} nodes: {', '.join(map(str, valid)) or 'none'})")
    per = nodes // slices
    what = f"nodes per slice (nodes / slices = {nodes}/{slices})"
    if name == "2dbc25d":
        p, q = _grid_for(per, grid, what="nodes per slice", slices=slices)
        return Sliced25D("2dbc25d", [BlockCyclic2D(p, q, offset=s * per)
                                     for s in range(slices)], block)
    if name == "sym25d":
        return Sliced25D("sym25d", [_sym(per, nt, s * per, what) for s in range(slices)],
                         block)
    kind = "sbc" if sbc_extended_r(per) else "sbc-basic" if sbc_basic_r(per) else None
    if kind is None:
        ext = _sbc_counts(True, 2 * per + 10)
        bas = _sbc_counts(False, 2 * per + 10)
        hints = sorted({v * slices for v in _neighbours(ext, per)[0][-1:]
                        + _neighbours(ext, per)[1][:1] + _neighbours(bas, per)[0][-1:]
                        + _neighbours(bas, per)[1][:1]})
        fixes = [" or ".join(f"nodes={h}" for h in hints)]
        other = [c for c in _slice_counts(name, nodes) if c != slices]
        if other:   # the slice counts that fit these nodes
            fixes.append(" or ".join(f"slices={c}" for c in other))
        raise UsageError(
            f"sbc25d needs P/c nodes per slice equal to r(r-1)/2 (extended SBC: "
            f"{_count_list(ext, per)}) or r^2/2, r even (basic SBC: {_count_list(bas, per)}); "
            f"{nodes}/{slices} = {per} is neither; with slices={slices} use "
            f"{', '.join(fixes)}, or dist=sym25d (any node count per slice)")
    return Sliced25D("sbc25d", [_sbc_2d(kind, per, offset=s * per) for s in range(slices)],
                     block)


def _slice_counts(name, nodes):
    """The slice counts c of the 2.5D map ``name`` on ``nodes`` nodes: c divides P and,
    for sbc25d, P/c is an SBC node count."""
    return [d for d in range(1, nodes + 1) if nodes % d == 0 and (
        name != "sbc25d" or sbc_extended_r(nodes // d) or sbc_basic_r(nodes // d))]


# -- the candidates of each family (the one home of "which maps fit P nodes") ------------
def block_cyclic_candidates(nodes):
    """Every 2dbc grid p x q of exactly ``nodes`` nodes (1 x P only when P has no other)."""
    grids = [(p, nodes // p) for p in range(1, nodes + 1) if nodes % p == 0]
    proper = [g for g in grids if min(g) >= 2]
    return [BlockCyclic2D(p, q) for p, q in (proper or grids)]


def sbc_candidates(nodes, exact=False):
    """The largest extended and basic SBC on at most ``nodes`` nodes (exactly, if
    ``exact``)."""
    out = []
    for extended, first, step in ((True, 3, 1), (False, 2, 2)):
        count = (lambda r: r * (r - 1) // 2) if extended else (lambda r: r * r // 2)
        best, r = None, first
        while count(r) <= nodes:
            best, r = r, r + step
        if best is not None and (not exact or count(best) == nodes):
            out.append(SymmetricBlockCyclic(best, extended=extended))
    return out


def pattern_candidates(nodes, exact=False, nt=None):
    """The largest ``pplane`` and ``aplane`` on at most ``nodes`` nodes (exactly, if
    ``exact``) and the ``sym`` map of ``nodes`` nodes for ``nt`` tile rows."""
    out = []
    for kind, build in (("pplane", projective_plane_map), ("aplane", affine_plane_map)):
        fit = [v for v in plane_counts(kind, nodes) if v <= nodes]
        if fit and (not exact or fit[-1] == nodes):
            v = fit[-1]
            q = int(round((-1 + (1 + 4 * v) ** 0.5) / 2))
            out.append(build(q))
    if nodes >= 2:
        out.append(symmetric_map(nodes, nt).with_offset(0))
    return out


def sliced_candidates(nodes, family="sbc25d", exact=False, max_c=None, nt=None):
    """2.5D maps of ``family`` on ``nodes`` nodes, one per slice count c >= 2.

    c runs over 2 .. P/2, and at most ``max_c`` (:func:`candidate_maps` passes NT).
    ``2dbc25d`` and ``sym25d``: c divides P, slices of P/c nodes (the most square grid
    for 2dbc). ``sbc25d``: slices of the largest SBC that fits P/c nodes (exactly P/c,
    dividing P, if ``exact``).
    """
    out = []
    for c in range(2, nodes // 2 + 1):
        if max_c is not None and c > max_c:
            break
        per = nodes // c
        if family in ("2dbc25d", "sym25d"):
            if nodes % c == 0:
                out.append(get_map(family, nodes, slices=c, nt=nt))
            continue
        if exact:
            fits = [per] if nodes % c == 0 and (sbc_extended_r(per) or sbc_basic_r(per)) \
                else []
        else:
            fits = [v for v in range(3, per + 1) if sbc_extended_r(v) or sbc_basic_r(v)]
        if fits:
            out.append(get_map("sbc25d", max(fits) * c, slices=c))
    return out


def candidate_maps(nodes, exact=False, nt=None, families=None):
    """The maps that fit ``nodes`` nodes, one per family member: the one home of this rule.

    Parameters
    ----------
    nodes : int
        Node count P.
    exact : bool
        Only maps on exactly P nodes (``compare`` and ``plan`` also weigh the largest SBC
        and planes on fewer nodes).
    nt : int, optional
        Tile rows, for the ``sym`` maps (their pattern is chosen for NT).
    families : iterable of str, optional
        Map names to include (default: every name but ``custom``).

    Returns every 2dbc grid of P (1 x P only if P is prime); the largest sbc and
    sbc-basic, pplane and aplane that fit; sym on P; and for every slice count
    2 <= c <= P/2 (and c <= NT when ``nt`` is given: a slice s >= NT would run no
    iteration and factor no column, so it only idles): 2dbc25d and sym25d when c divides
    P, sbc25d with the largest SBC slice that fits P/c.
    """
    nodes = _check_nodes(nodes)
    want = set(MAP_NAMES[:-1] if families is None else families)
    out = block_cyclic_candidates(nodes)
    out += sbc_candidates(nodes, exact=exact)
    out += pattern_candidates(nodes, exact=exact, nt=nt)
    for fam in MAPS_25D:
        if fam in want:
            out += sliced_candidates(nodes, fam, exact=exact, nt=nt, max_c=nt)
    return [m for m in out if m.name in want]


def maps_for_nodes(nodes, nt=None):
    """Every map on exactly ``nodes`` nodes: :func:`candidate_maps` with ``exact=True``."""
    return candidate_maps(nodes, exact=True, nt=nt)
