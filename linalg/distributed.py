"""A matrix distributed over MPI ranks by a tile map: :class:`DistributedMatrix`.

Conventions: tiles are NB x NB (the last tile row/column is smaller when NB does not
divide the size); tile (i, j) = (tile row, tile column); tiles are Fortran-ordered numpy
arrays of float64 or float32, stored on their owner only. The constructors and
:meth:`DistributedMatrix.copy` put a rank's tiles in one arena (views into one 2 MiB-aligned
block, :mod:`~starchol.linalg.tile_arena`); tiles set by hand need not be.

Two kinds, with the map rules:

- ``"symmetric"``: an N x N symmetric matrix, lower triangle stored (tiles i >= j).
  Tile (i, j) lives on the map's owner of (i, j); for a 2.5D map with c slices, on the
  owner of (i, j) in slice j mod c (the slice that factors column j), which is also
  where L[i][j] ends (:func:`~starchol.model.volume.factor_owners`).
- ``"rhs"``: right-hand sides, an N x K matrix, every tile stored. Row tile i lives
  where L's diagonal tile (i, i) lives, for every tile column (so the solve moves only
  L's off-diagonal tiles and the finished B[k]).
"""
import hashlib

import numpy as np

from ..collective import Keyed, agree
from ..errors import UsageError
from .tile_arena import arena_views, packed
from .tile_transfer import gather_dense, scatter_dense
from .norms import block_norm, norm_parts
from .layout import (KINDS, check_dtype, check_map, check_root, check_symmetric, layout,
                     map_error, plain_int)
from .tiled import check_shape, check_sizes
from ..model.volume import tile_extents
from ..runtime.backend import mpi

def _world():
    return mpi().COMM_WORLD


class DistributedMatrix:
    """The local part (this rank's tiles) of a matrix distributed by a tile map.

    Build one with :meth:`from_function`, :meth:`from_numpy` or :meth:`from_hdf5`
    (all collective); the constructor makes an empty one.

    Parameters
    ----------
    shape : (int, int)
        (N, N) for ``symmetric``, (N, K) for ``rhs``.
    nb : int
        Tile size NB (entries).
    tile_map : starchol.distributions.TileMap
        The map (one node per rank of ``comm``).
    kind : {"symmetric", "rhs"}
    dtype : float64 or float32
    comm : mpi4py communicator, optional
        Default ``MPI.COMM_WORLD``.

    Attributes
    ----------
    tiles : dict
        ``{(i, j): array}``: this rank's tiles.
    owners : int64 array (NT, KT)
        Owner rank of every tile.
    rows, cols : int64 arrays
        Entries per tile row / tile column.
    factor : bool
        True when the tiles hold a Cholesky factor L (the ``L`` of a
        :class:`~starchol.linalg.cholesky.Factor`, and A itself after
        ``cholesky(A, overwrite_a=True)``, also a failed one: its tiles then hold a
        partial factor): only its lower triangle means anything. Copies keep it; set it
        to False after refilling the tiles with a symmetric matrix yourself.
    """

    def __init__(self, shape, nb, tile_map, kind="symmetric", dtype=np.float64, comm=None):
        if kind not in KINDS:
            raise UsageError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}",
                             param="kind")
        n, ncols = check_shape(shape, kind)
        self.n, self.nb = check_sizes(n, nb)
        self.ncols = ncols
        self.kind = kind
        self.dtype = check_dtype(dtype)
        self.comm = _world() if comm is None else comm
        self.rank = self.comm.Get_rank()
        self.tile_map = tile_map
        self.rows = tile_extents(self.n, self.nb)
        self.cols = self.rows if kind == "symmetric" else tile_extents(ncols, self.nb)
        self.nt, self.kt = len(self.rows), len(self.cols)
        self.offsets = np.concatenate([[0], np.cumsum(self.rows)])
        self.col_offsets = np.concatenate([[0], np.cumsum(self.cols)])
        self.owners, self.stored = layout(tile_map, self.n, self.nb, kind, ncols)
        self.tiles = {}
        self.factor = False

    # -- shape and layout ---------------------------------------------------------------
    @property
    def shape(self):
        return (self.n, self.ncols)

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def local_keys(self):
        """(i, j) of the stored tiles this rank owns, row by row."""
        ii, jj = np.nonzero(self.stored & (self.owners == self.rank))
        return list(zip(ii.tolist(), jj.tolist()))

    def tile_bounds(self, i, j):
        """(r0, r1, c0, c1): the entries of tile (i, j)."""
        o, oc = self.offsets, self.col_offsets
        return int(o[i]), int(o[i + 1]), int(oc[j]), int(oc[j + 1])

    def _local_arena(self):
        """(keys, bounds, views): this rank's tiles, their :meth:`tile_bounds`, and one
        uninitialised arena view per tile (:mod:`~starchol.linalg.tile_arena`)."""
        keys = self.local_keys()
        bounds = [self.tile_bounds(*key) for key in keys]
        views = arena_views([(r1 - r0, c1 - c0) for r0, r1, c0, c1 in bounds], self.dtype)
        return keys, bounds, views

    def _empty_like(self, dtype=None):
        out = DistributedMatrix(self.shape, self.nb, self.tile_map, self.kind,
                                self.dtype if dtype is None else dtype, self.comm)
        out.factor = self.factor
        return out

    # -- constructors (collective) -------------------------------------------------------
    @classmethod
    def from_function(cls, fn, shape, nb, tile_map, kind="symmetric", dtype=np.float64,
                      comm=None):
        """Make each tile where it lives: ``fn(r0, r1, c0, c1)`` returns the block of
        rows r0..r1-1 and columns c0..c1-1. Called only on the tile's owner. Collective
        (an error on one rank is raised on every rank)."""
        comm = _comm_or_world(comm)
        a, error = None, None
        try:
            check_map(tile_map, comm.Get_size())
            a = cls(shape, nb, tile_map, kind, dtype, comm)
            keys, bounds, views = a._local_arena()
            for key, (r0, r1, c0, c1), view in zip(keys, bounds, views):
                t = np.asarray(fn(r0, r1, c0, c1))
                if t.dtype.kind not in "biuf":
                    raise UsageError(f"fn({r0}, {r1}, {c0}, {c1}) returned {t.dtype} "
                                     f"values, expected real numbers (the matrix is "
                                     f"{a.dtype})", param="fn")
                if t.shape != (r1 - r0, c1 - c0):
                    raise UsageError(f"fn({r0}, {r1}, {c0}, {c1}) returned shape "
                                     f"{t.shape}, expected {(r1 - r0, c1 - c0)}",
                                     param="fn")
                with np.errstate(over="ignore"):    # beyond float32: refused below
                    view[...] = t
                if (t.dtype != view.dtype and not np.isfinite(view).all()
                        and np.isfinite(t).all()):
                    raise UsageError(f"fn({r0}, {r1}, {c0}, {c1}) returned values up to "
                                     f"{float(np.abs(t).max()):.3e}, beyond {a.dtype}'s "
                                     f"largest ({float(np.finfo(a.dtype).max):.3e}); make "
                                     f"the matrix in float64 (dtype)", param="dtype")
                a.tiles[key] = view
        except Exception as exc:  # noqa: BLE001 - shared with every rank below
            error = exc
        agree(comm, error, same=_same(shape, nb, kind, dtype, tile_map))
        return a

    @classmethod
    def from_numpy(cls, array, nb, tile_map, kind="symmetric", root=0, comm=None,
                   symmetry_tol=None):
        """Scatter a dense array held by rank ``root`` (ignored elsewhere). Collective.

        For ``symmetric`` only the lower triangle is read; a whole array that is not
        symmetric within ``symmetry_tol`` (max |A - A^T| <= tol max |A|, default 1e-10,
        as ``from_hdf5``) is refused on every rank, and one whose upper triangle is all
        zeros is taken as the lower triangle. The dtype is the array's
        (float64 or float32). ``root`` (0 <= root < ranks), ``nb``, ``kind`` and the map
        must be the same on every rank (else the same UsageError on every rank)."""
        comm = _comm_or_world(comm)
        error, meta = map_error(tile_map, comm), None
        try:
            root = check_root(root, comm)
            if error is None and kind not in KINDS:
                raise UsageError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}",
                                 param="kind")
            if comm.Get_rank() == root and error is None:
                a = np.asarray(array)
                dt = check_dtype(a.dtype)
                if kind == "symmetric" and a.ndim == 2 and a.shape[0] != a.shape[1]:
                    raise UsageError(f"array of shape {a.shape} is not square: a symmetric "
                                     f"matrix must be; for right-hand sides (N x K) pass "
                                     f"kind=\"rhs\"", param="array")
                if kind == "symmetric" and a.ndim == 1:
                    raise UsageError(f"array of shape {a.shape} is one vector: for "
                                     f"right-hand sides pass it as N x 1 "
                                     f"(array.reshape(-1, 1)) with kind=\"rhs\"",
                                     param="array")
                if a.ndim != 2 or (kind == "symmetric" and a.shape[0] != a.shape[1]):
                    raise UsageError(f"array must be {'square' if kind == 'symmetric' else '2D'}"
                                     f", got shape {a.shape}", param="array")
                if kind == "symmetric":
                    check_symmetric(a, symmetry_tol)
                meta = (a.shape, dt.str)
        except Exception as exc:  # noqa: BLE001
            error = error or exc
        agree(comm, error, same={**_same(None, nb, kind, None, tile_map),
                                 "root": plain_int(root)})
        shape, dtype = comm.bcast(meta, root=root)
        out, error = None, None
        try:
            out = cls(shape, nb, tile_map, kind, np.dtype(dtype), comm)
            # this rank's tiles before the transfer: a MemoryError here must reach the
            # agreement, not leave the root waiting in a send to this rank
            keys, _, views = out._local_arena()
            out.tiles = dict(zip(keys, views))
        except Exception as exc:  # noqa: BLE001 - nb against the size: same everywhere
            error = exc
        # the map's owners, now that the size is known (same description is not enough)
        agree(comm, error, same={"tile_map": map_key(tile_map, out.nt if out else 0)})
        scatter_dense(a if comm.Get_rank() == root else None, out, root)
        return out

    @classmethod
    def from_hdf5(cls, path, dataset, nb, tile_map, dtype=None, comm=None,
                  symmetry_tol=None, kind=None):
        """Read a matrix from ``path:dataset`` (each rank reads its tiles). Collective.

        Checks (every rank, same error): the file, the dataset (float; square for a
        symmetric matrix), finite entries, symmetry within ``symmetry_tol`` (a finite
        number >= 0, default :data:`~starchol.linalg.hdf5_io.SYMMETRY_TOL`; not for
        right-hand sides), and that every rank was given the same path, dataset, nb,
        map, dtype, tolerance and kind. ``dtype`` defaults to the dataset's. ``kind``
        (``"symmetric"`` or ``"rhs"``) defaults to what the dataset's ``content``
        attribute says: right-hand sides or solutions written by :meth:`to_hdf5` come
        back as ``"rhs"``, any other dataset as ``"symmetric"``."""
        from . import hdf5_io

        comm = _comm_or_world(comm)
        error, tol = map_error(tile_map, comm), None
        try:
            if dtype is not None:
                check_dtype(dtype)
            if kind is not None and kind not in KINDS:
                raise UsageError(f"kind must be one of {', '.join(KINDS)} or None (the "
                                 f"file's), got {kind!r}", param="kind")
            tol = hdf5_io.check_symmetry_tol(symmetry_tol)
        except Exception as exc:  # noqa: BLE001
            error = error or exc
        agree(comm, error, same={**hdf5_io.names_compared(path, dataset),
                                 **_same(None, nb, kind, dtype, tile_map),
                                 "symmetry_tol": tol})
        # every rank looks, and the ranks must see the same data under that name
        kind, shape, file_dtype = hdf5_io.inspect_everywhere(path, dataset, kind, comm)
        # file_dtype is a name: "float32", "float64 (big-endian)", ...
        out, error = None, None
        try:
            out = cls(shape, nb, tile_map, kind, dtype or file_dtype.split()[0], comm)
        except Exception as exc:  # noqa: BLE001 - nb against n: the same everywhere
            error = exc
        agree(comm, error, same={"tile_map": map_key(tile_map, out.nt if out else 0)})
        out.input_info = hdf5_io.read_tiles(path, dataset, out, comm, symmetry_tol=tol)
        return out

    # -- output (collective) -------------------------------------------------------------
    def to_hdf5(self, path, dataset, overwrite=False, attrs=None, input_path=None):
        """Write the matrix to ``path:dataset`` in its own dtype (float64 or float32),
        atomically (a temporary file renamed when complete). Collective.

        A symmetric matrix is written whole (both triangles: what :meth:`from_hdf5` and
        any other reader expect); a factor (:attr:`factor`) as its lower triangle, zeros
        above; right-hand sides or solutions (``kind="rhs"``) as they are, N x K, and
        :meth:`from_hdf5` reads them back as ``"rhs"``. The dataset's ``content``
        attribute says which.
        """
        from .hdf5_io import FactorWriter

        # every rank must hold its tiles, each of its shape: a missing one was written as
        # zeros (a wrong file, published), a misshapen one failed on its rank alone (the
        # layout is this matrix's own: checking it against its map would recompute it)
        agree(self.comm, self.local_error())
        writer = FactorWriter(path, dataset, self.n, self.comm, overwrite=overwrite,
                              input_path=input_path, nb=self.nb, dtype=self.dtype,
                              ncols=self.ncols)
        writer.write(self, attrs, whole=not self.factor)

    def gather(self, root=0):
        """The dense matrix on ``root`` (None elsewhere): the lower triangle (zeros
        above) for ``symmetric``, every entry for ``rhs``. Collective: ``root`` (0 <=
        root < ranks) must be the same on every rank (else the same UsageError on every
        rank)."""
        error, out = None, None
        try:
            root = check_root(root, self.comm)
            # every rank must hold its tiles: the transfer pairs them up one by one (the
            # layout is this matrix's own, not recomputed from its map)
            error = self.local_error()
            if error is None and self.rank == root:
                # before the agreement: a MemoryError on the root alone must not leave
                # the owners waiting in their sends
                out = np.zeros(self.shape, dtype=self.dtype, order="F")
        except Exception as exc:  # noqa: BLE001 - shared with every rank below
            error = exc
        agree(self.comm, error, same={"root": plain_int(root)})
        return gather_dense(self, root, out)

    def copy(self):
        """A deep copy (local; no communication), its tiles in one arena."""
        b = self._empty_like()
        if all(getattr(t, "dtype", None) == self.dtype for t in self.tiles.values()):
            b.tiles = packed(self.tiles, self.dtype)
        else:       # a tile of another dtype stays as it is, for the checks to name it
            b.tiles = {k: np.array(t, order="F", copy=True) for k, t in self.tiles.items()}
        return b

    def astype(self, dtype, scale=1.0, each=None):
        """A copy in ``dtype`` (float64 or float32), each tile converted on the rank that
        holds it (no communication), its tiles in one arena: ``scale`` times every
        entry, rounded once. Local.

        An entry beyond the new dtype's range becomes +-inf and one below its smallest
        number 0 or a subnormal: the caller checks (``numpy.isfinite``) when that
        matters. ``scale`` a power of two changes no digit (only the exponent).
        ``each(key, tile)``, if given, is called with each new tile as soon as it is
        made (while it is still in the processor's cache: one pass over the matrix
        for the copy and, say, a norm).
        """
        dt = check_dtype(dtype)
        out = self._empty_like(dt)
        keys = list(self.tiles)
        views = arena_views([np.shape(self.tiles[k]) for k in keys], dt)
        with np.errstate(over="ignore", under="ignore"):
            for k, v in zip(keys, views):
                if scale == 1.0:
                    v[...] = self.tiles[k]
                else:
                    np.multiply(self.tiles[k], scale, out=v, casting="unsafe")
                if each is not None:
                    each(k, v)
        out.tiles = dict(zip(keys, views))
        return out

    # -- checks (local; the callers agree on the verdict) -------------------------------
    def local_error(self, tile_map=None, kind=None, n=None, nb=None, dtype=None,
                    ncols=None):
        """Why this rank's part cannot be used as given (an exception), or None.

        Checks the kind, size (``ncols``: columns), tile size, dtype, that the layout is ``tile_map``'s, and
        that every local tile is present with the right shape and dtype. Local: use
        :func:`starchol.collective.agree` to share the verdict.
        """
        try:
            if kind is not None and self.kind != kind:
                return UsageError(f"expected a {kind} matrix, got a {self.kind} one",
                                  param="kind")
            if n is not None and self.n != n:
                return UsageError(f"the matrix has {self.n} rows, expected {n}", param="n")
            if ncols is not None and self.ncols != ncols:
                return UsageError(f"the matrix has {self.ncols} columns, expected {ncols}",
                                  param="ncols")
            if nb is not None and self.nb != nb:
                return UsageError(f"the tile size nb is {self.nb}, expected {nb}", param="nb")
            if dtype is not None and self.dtype != np.dtype(dtype):
                return UsageError(f"dtype is {self.dtype}, expected {np.dtype(dtype)}",
                                  param="dtype")
            if tile_map is not None:
                owners, _ = layout(tile_map, self.n, self.nb, self.kind, self.ncols)
                if not np.array_equal(owners[self.stored], self.owners[self.stored]):
                    built = ("it was built for another map of the same description, "
                             "with different owners" if str(tile_map) == str(self.tile_map)
                             else f"it was built for {self.tile_map}")
                    return UsageError(f"the matrix is not laid out by the map {tile_map} "
                                      f"({built})", param="tile_map")
            for key in self.local_keys():
                t = self.tiles.get(key)
                r0, r1, c0, c1 = self.tile_bounds(*key)
                if t is None:
                    return UsageError(f"rank {self.rank} lacks its tile {key} (rows "
                                      f"{r0}..{r1 - 1}, columns {c0}..{c1 - 1})",
                                      param="tiles")
                if not isinstance(t, np.ndarray) or t.shape != (r1 - r0, c1 - c0):
                    return UsageError(f"tile {key} on rank {self.rank} has shape "
                                      f"{getattr(t, 'shape', None)}, expected "
                                      f"{(r1 - r0, c1 - c0)}", param="tiles")
                if t.dtype != self.dtype:
                    return UsageError(f"tile {key} on rank {self.rank} has dtype {t.dtype}, "
                                      f"the matrix is {self.dtype}", param="dtype")
                if not t.flags.f_contiguous:
                    self.tiles[key] = np.asfortranarray(t)
        except Exception as exc:  # noqa: BLE001
            return exc
        return None

    def read_only_error(self, param):
        """A UsageError naming ``param`` (``overwrite_a``, ``overwrite_b``) if a tile of
        this rank is read-only (numpy's ``writeable`` flag off: a read-only memory map, a
        broadcast view, ...), for a computation that would write its result into the
        tiles; else None. Local, like :meth:`local_error` (run it after that one, which
        copies tiles that are not Fortran-ordered)."""
        for key, t in self.tiles.items():
            if isinstance(t, np.ndarray) and not t.flags.writeable:
                return UsageError(f"tile {key} on rank {self.rank} is read-only (its numpy "
                                  f"writeable flag is off) and {param}=True would write "
                                  f"the result into it; pass {param}=False (the result "
                                  f"then goes to a copy) or writable tiles", param=param)
        return None

    def signature(self):
        """What every rank must agree on, by name (shape, nb, kind, dtype), for
        :func:`~starchol.collective.agree`."""
        return {"shape": self.shape, "nb": self.nb, "kind": self.kind,
                "dtype": str(self.dtype)}

    def _lower_parts(self):
        """(tile, weight) of every entry block held here that belongs to the matrix:
        for ``symmetric``, the strict lower triangle of a diagonal tile and every
        off-diagonal tile weigh 2 (they stand for their mirror too), the diagonal 1; the
        strict upper triangle of a diagonal tile is not part of the matrix."""
        for (i, j), t in self.tiles.items():
            t = np.asarray(t, dtype=np.float64)
            if self.kind == "symmetric" and i == j:
                yield np.tril(t, -1), 2.0
                yield np.diag(t), 1.0
            else:
                yield t, 2.0 if self.kind == "symmetric" else 1.0

    def frobenius_parts(self, tiles=None):
        """``(scale, ssq)`` with ||M||_F = scale * sqrt(ssq), for the whole symmetric
        matrix when ``symmetric`` (:func:`~starchol.linalg.norms.norm_parts`: scale is
        the largest norm of a block of entries, so that entries near 1e300 or 1e-300
        neither overflow nor underflow, and a ratio of two norms taken from these parts
        stays exact where the norms themselves would not). A NaN or Inf entry gives
        ``(inf, inf)``. ``tiles``: read these tiles instead of M's own (for a symmetric
        M, diagonal tiles that hold both triangles, as
        :func:`~starchol.linalg.cholesky.symmetric_tiles` makes them: no temporary
        copies). Collective (two reductions on :attr:`comm`)."""
        if tiles is None:
            blocks = self._lower_parts()
        else:
            blocks = ((t, 2.0 if self.kind == "symmetric" and i != j else 1.0)
                      for (i, j), t in tiles.items())
        return norm_parts(self.comm, [(block_norm(t), w) for t, w in blocks if t.size])

    def __repr__(self):
        return (f"<DistributedMatrix {self.kind} {self.n} x {self.ncols} {self.dtype}, "
                f"NB {self.nb}, {len(self.tiles)} local tile(s) on rank {self.rank}>")


def _comm_or_world(comm):
    return _world() if comm is None else comm


def _same(shape, nb, kind, dtype, tile_map):
    """The inputs every rank must share, by parameter name, as plain comparable values
    (never raises; for :func:`~starchol.collective.agree`). The map is compared
    by its owners when the size is known (:func:`map_key`), else by its description."""
    try:
        dtype = None if dtype is None else str(np.dtype(dtype))
    except TypeError:
        dtype = repr(dtype)
    nt = None
    try:
        shape = None if shape is None else tuple(int(x) for x in shape)
        nt = -(-shape[0] // int(nb)) if shape and int(nb) > 0 else None
    except (TypeError, ValueError, IndexError):
        shape = repr(shape)
    return {"shape": shape, "nb": plain_int(nb), "kind": kind, "dtype": dtype,
            "tile_map": map_key(tile_map, nt)}


#: tile counts up to which :func:`map_key` digests the owners (beyond: the description)
KEY_MAX_NT = 1 << 14


def map_key(tile_map, nt, owners=None):
    """The map as :func:`~starchol.collective.agree` compares it: shown by its
    description, compared by a digest (SHA-1) of its owners on ``nt`` x ``nt`` tiles too,
    so two custom maps of the same description and different owners differ. Never
    raises (an unusable map, or nt > :data:`KEY_MAX_NT`, is compared by its
    description). ``owners``: ``tile_map.owner_maps(nt)`` when the caller has it
    already (not computed again)."""
    try:
        if not 0 < int(nt) <= KEY_MAX_NT:
            raise ValueError(nt)
        if owners is None:
            owners = tile_map.owner_maps(int(nt))
        owners = np.ascontiguousarray(owners, dtype=np.int64)
        digest = hashlib.sha1(repr(owners.shape).encode() + owners.tobytes()).hexdigest()
    except Exception:  # noqa: BLE001 - not a map, or no tiles: the description only
        digest = None
    return Keyed(str(tile_map), digest, "owners")


__all__ = ["DistributedMatrix", "layout", "check_map", "check_dtype", "check_root", "map_key"]
