"""Build a map from its command-line name, with fix-it messages for wrong node counts."""
import math

from ..errors import UsageError
from .block_cyclic import BlockCyclic2D
from .custom import load_custom_map
from .sliced import Sliced25D
from .symmetric_block_cyclic import SymmetricBlockCyclic

#: map names as used on the command line
MAP_NAMES = ("2dbc", "sbc", "sbc-basic", "2dbc25d", "sbc25d", "custom")


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
        raise UsageError(f"--grid must look like PxQ (e.g. 4x7), got {text!r}") from None
    if p < 1 or q < 1:
        raise UsageError(f"--grid needs positive sizes, got {text!r}")
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


def _bad_sbc_count(name, p, extended, what="nodes", flag="--nodes"):
    formula = "r(r-1)/2" if extended else "r^2/2 (r even)"
    values = _sbc_counts(extended, max(p, 3) * 2 + 10)
    below, above = _neighbours(values, p)
    near = [str(v) for v in (below[-1:] + above[:1])]
    msg = (f"{name} needs P = {formula} {what} ({_count_list(values, p)}): {p} is not one; "
           f"use {' or '.join(near)}")
    if p >= 1 and what == "nodes":
        pr, qr = square_grid(p)
        msg += f", or 2dbc --grid {pr}x{qr} for all {p} nodes"
    return UsageError(msg)


# -- construction --------------------------------------------------------------------------
def _check_nodes(nodes):
    try:
        nodes = int(nodes)
    except (TypeError, ValueError):
        raise UsageError(f"--nodes must be an integer, got {nodes!r}") from None
    if nodes < 1:
        raise UsageError(f"--nodes must be >= 1, got {nodes}")
    return nodes


def _grid_for(nodes, grid, what="--nodes"):
    if grid is None:
        return square_grid(nodes)
    p, q = parse_grid(grid) if isinstance(grid, str) else (int(grid[0]), int(grid[1]))
    if p * q != nodes:
        pr, qr = square_grid(nodes)
        raise UsageError(f"--grid {p}x{q} has {p * q} nodes but {what} is {nodes}; "
                         f"use a grid with P x Q = {nodes} (e.g. {pr}x{qr}) or {what} {p * q}")
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


def get_map(name, nodes=None, grid=None, slices=1, path=None):
    """Build the map called ``name`` for ``nodes`` nodes.

    Args:
        name: one of :data:`MAP_NAMES`.
        nodes: total number of nodes P (all slices); optional for ``custom``.
        grid: ``"PxQ"`` or (p, q) for 2dbc (the grid of one slice for 2dbc25d).
        slices: c, for the 2.5D maps (``2dbc25d``, ``sbc25d``).
        path: map file for ``custom`` (Chameleon text or ``.npy``).

    Raises:
        UsageError: the name, node count, grid or slice count does not fit; the
            message lists valid values near the one given and a map that fits.
    """
    if name not in MAP_NAMES:
        raise UsageError(f"unknown map {name!r}; choose one of {', '.join(MAP_NAMES)}")
    if name == "custom":
        return load_custom_map(path, None if nodes is None else _check_nodes(nodes))
    if nodes is None:
        raise UsageError(f"{name} needs --nodes P")
    nodes = _check_nodes(nodes)
    try:
        slices = int(slices)
    except (TypeError, ValueError):
        raise UsageError(f"--slices must be an integer, got {slices!r}") from None
    if slices < 1:
        raise UsageError(f"--slices must be >= 1, got {slices}")
    if grid is not None and name not in ("2dbc", "2dbc25d"):
        raise UsageError(f"--grid applies to 2dbc and 2dbc25d only, not {name}")
    if name in ("2dbc", "sbc", "sbc-basic"):
        if slices != 1:
            raise UsageError(f"{name} is a 2D map; --slices {slices} needs 2dbc25d or sbc25d")
        if name == "2dbc":
            return BlockCyclic2D(*_grid_for(nodes, grid))
        return _sbc_2d(name, nodes)
    # 2.5D maps
    if nodes % slices:
        divisors = [d for d in range(1, nodes + 1) if nodes % d == 0]
        raise UsageError(f"{name} with {slices} slices needs a node count divisible by "
                         f"{slices}; {nodes} is not (valid slice counts for {nodes} nodes: "
                         f"{', '.join(map(str, divisors))})")
    per = nodes // slices
    if name == "2dbc25d":
        p, q = _grid_for(per, grid, what=f"--nodes / --slices ({nodes}/{slices})")
        maps = [BlockCyclic2D(p, q, offset=s * per) for s in range(slices)]
        return Sliced25D("2dbc25d", maps)
    kind = "sbc" if sbc_extended_r(per) else "sbc-basic" if sbc_basic_r(per) else None
    if kind is None:
        ext = _sbc_counts(True, 2 * per + 10)
        bas = _sbc_counts(False, 2 * per + 10)
        hints = sorted({v * slices for v in _neighbours(ext, per)[0][-1:]
                        + _neighbours(ext, per)[1][:1] + _neighbours(bas, per)[0][-1:]
                        + _neighbours(bas, per)[1][:1]})
        raise UsageError(
            f"sbc25d needs P/c nodes per slice equal to r(r-1)/2 (extended SBC: "
            f"{_count_list(ext, per)}) or r^2/2, r even (basic SBC: {_count_list(bas, per)}); "
            f"{nodes}/{slices} = {per} is neither; with {slices} slices use --nodes "
            f"{' or '.join(map(str, hints))}, or another --slices")
    maps = [_sbc_2d(kind, per, offset=s * per) for s in range(slices)]
    return Sliced25D("sbc25d", maps)


def maps_for_nodes(nodes):
    """Every map that fits ``nodes`` nodes exactly, as (name, kwargs) pairs.

    2dbc: every grid p x q (p*q = nodes); sbc/sbc-basic when the count fits;
    2dbc25d and sbc25d for every slice count c >= 2 that divides ``nodes``.
    """
    out = []
    for p in range(1, nodes + 1):
        if nodes % p == 0:
            out.append(("2dbc", {"grid": (p, nodes // p)}))
    if sbc_extended_r(nodes):
        out.append(("sbc", {}))
    if sbc_basic_r(nodes):
        out.append(("sbc-basic", {}))
    for c in range(2, nodes + 1):
        if nodes % c:
            continue
        per = nodes // c
        for p in range(1, per + 1):
            if per % p == 0:
                out.append(("2dbc25d", {"slices": c, "grid": (p, per // p)}))
        if sbc_extended_r(per) or sbc_basic_r(per):
            out.append(("sbc25d", {"slices": c}))
    return out
