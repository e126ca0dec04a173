"""User maps read from a file.

Two formats:

- Chameleon's text format (its ``--custom=FILE`` option): a first line ``M N``, then M
  lines of N node ids (0-based); used periodically: tile (i, j) -> entry (i mod M, j mod N).
- A ``.npy`` file holding a 2D integer array, used the same way.
"""
import os

import numpy as np

from ..errors import UsageError
from ..files import check_readable_file
from .base import TileMap, nodes_text


class CustomMap(TileMap):
    """A periodic M x N pattern of node ids; ``nodes`` defaults to max id + 1."""

    name = "custom"

    def __init__(self, pattern, nodes=None, source=None):
        pattern = np.asarray(pattern)
        where = f" in {source}" if source else ""
        if pattern.ndim != 2 or pattern.size == 0:
            raise UsageError(f"custom map{where} must be a non-empty 2D array of node ids, "
                             f"got shape {pattern.shape}")
        if not np.issubdtype(pattern.dtype, np.integer):
            raise UsageError(f"custom map{where} must hold integer node ids, got {pattern.dtype}")
        lo, hi = int(pattern.min()), int(pattern.max())
        if lo < 0:
            raise UsageError(f"custom map{where} has a negative node id ({lo}); ids are 0-based")
        if nodes is None:
            nodes = hi + 1
        elif hi >= nodes:
            raise UsageError(f"custom map{where} uses node {hi} but nodes={nodes}; "
                             f"use nodes={hi + 1} or fix the map")
        super().__init__(nodes)
        self.pattern = pattern.astype(np.int64)
        self.source = source

    def _slice_owner_map(self, nt, s):
        m, n = self.pattern.shape
        return self.pattern[np.arange(nt)[:, None] % m, np.arange(nt)[None, :] % n]

    def period(self):
        return self.pattern.shape

    def pattern_size(self):
        return max(self.pattern.shape)

    def leading_factor(self):
        """Mean over pattern indices x of the distinct nodes in pattern row x and column x,
        minus one (the sender); x runs over lcm(M, N) indices."""
        import math

        pat = self.pattern
        m, n = pat.shape
        period = m * n // math.gcd(m, n)
        sizes = [len(set(pat[x % m, :]) | set(pat[:, x % n])) - 1 for x in range(period)]
        return float(np.mean(sizes))

    def params(self):
        return {**super().params(), "path": self.source}

    def summary(self):
        return {**super().summary(), "file": self.source}

    def __str__(self):
        m, n = self.pattern.shape
        return f"custom {m}x{n} pattern ({nodes_text(self.nodes)})"


def read_chameleon_text(path):
    """Read Chameleon's map text format; returns an int64 array (M, N)."""
    from ..files import read_text_input

    tokens = read_text_input(path, "map file").split()   # bounded, text only
    try:
        values = [int(t) for t in tokens]
    except ValueError as exc:
        raise UsageError(f"{path}: not a Chameleon map file (expected integers: "
                         f"'M N' then M rows of N node ids): {exc}") from None
    if len(values) < 2 or values[0] < 1 or values[1] < 1:
        raise UsageError(f"{path}: first line must be 'M N' with M, N >= 1")
    m, n = values[:2]
    body = values[2:]
    if len(body) != m * n:
        raise UsageError(f"{path}: header says {m} x {n} = {m * n} node ids, "
                         f"the file holds {len(body)}")
    try:
        return np.array(body, dtype=np.int64).reshape(m, n)
    except OverflowError:
        raise UsageError(f"{path}: a node id does not fit in 64 bits") from None


def load_custom_map(path, nodes=None):
    """Read a map file (``.npy`` or Chameleon text) into a :class:`CustomMap`."""
    if not path:
        raise UsageError("custom map needs a file: path=FILE (Chameleon text or .npy)")
    if os.path.isdir(path):
        raise UsageError(f"map file {path!r} is a folder; give the map file itself")
    check_readable_file(path, "map file")   # missing, a FIFO, a device, unreadable
    if path.endswith(".npy"):
        from ..files import MAX_TEXT_INPUT_BYTES
        from ..units import format_bytes

        if os.path.getsize(path) > MAX_TEXT_INPUT_BYTES:
            raise UsageError(f"map file {path} is larger than "
                             f"{format_bytes(MAX_TEXT_INPUT_BYTES)}; no map is that large")
        try:
            pattern = np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise UsageError(f"{path}: cannot read as .npy: {exc}") from None
    else:
        pattern = read_chameleon_text(path)
    return CustomMap(pattern, nodes=nodes, source=path)


def write_chameleon_text(path, pattern):
    """Write an int array (M, N) in Chameleon's map text format, atomically."""
    pattern = np.asarray(pattern, dtype=np.int64)
    m, n = pattern.shape
    from ..files import write_atomic

    lines = [f"{m} {n}"] + [" ".join(str(int(v)) for v in row) for row in pattern]
    write_atomic(path, "\n".join(lines) + "\n")


def _lower_period(owners, axis):
    """Smallest shift d >= 1 along ``axis`` (0: rows, 1: columns) with owners[i, j] ==
    owners[i + d, j] (axis 0) or owners[i, j + d] (axis 1) for every pair of tiles of the
    lower triangle (i >= j); the size NT when there is none."""
    nt = owners.shape[0]
    lower = np.tril(np.ones((nt, nt), dtype=bool))
    for d in range(1, nt):
        if axis == 0:
            same = owners[d:, :] == owners[:-d, :]
            mask = lower[:-d, :]           # (i, j) lower, so (i + d, j) is too
        else:
            same = owners[:, d:] == owners[:, :-d]
            mask = lower[:, d:]            # (i, j + d) lower, so (i, j) is too
        if same[mask].all():
            return d
    return nt


def chameleon_pattern(tile_map, nt):
    """The M x N pattern that Chameleon's ``--custom`` file needs for ``tile_map``, and
    whether it holds at every NT. Returns ``(pattern, every_nt)``.

    Chameleon uses the pattern periodically: tile (i, j) -> pattern[i mod M, j mod N].
    A map with a period of its own (:meth:`TileMap.period`: 2dbc, sbc, sbc-basic, custom)
    gives that period, valid for every NT. Other maps (the planes and ``sym``, aligned to
    the last tile row, so their owners depend on NT) give the smallest M and N with which
    the lower triangle of the NT x NT owners repeats: valid for this NT only. Each entry
    is taken from a tile of the lower triangle when the NT x NT matrix has one in its
    class (the upper triangle is never read).
    """
    if tile_map.slices > 1:
        raise UsageError("Chameleon has no 2.5D maps: its --custom file needs a 2D map")
    period = tile_map.period()
    every_nt = period is not None
    size = max(period) if every_nt else int(nt)
    owners = tile_map.owner_map(size)
    if every_nt:
        m, n = period
    else:
        m, n = _lower_period(owners, 0), _lower_period(owners, 1)
    a = np.arange(m)[:, None]
    b = np.arange(n)[None, :]
    rows = a + np.maximum(0, -(-(b - a) // m)) * m     # first row >= b in a's class
    inside = rows < size
    return np.where(inside, owners[np.minimum(rows, size - 1), b], owners[a, b]), every_nt
