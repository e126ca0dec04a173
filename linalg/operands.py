"""The collective checks of a computation's operands: a DistributedMatrix laid out by the
map as expected, on the session's ranks in the session's order, writable where the
result goes; every rank raises the same UsageError (:func:`starchol.collective.agree`)."""
import numpy as np

from ..collective import agree
from ..errors import UsageError
from ..model.memory import check_window
from ..runtime.backend import mpi
from .distributed import DistributedMatrix, check_map, map_key


def ranks_error(M, name, comm):
    """The UsageError (naming ``name``) when the DistributedMatrix ``M`` does not live on
    the session's ranks in the session's order (``comm``: the session's communicator),
    else None. Local (``MPI_Comm_compare``). A matrix made on a communicator of the same
    size but of other processes, or of the same processes in another rank order, would
    have its tiles registered on the wrong ranks."""
    size = comm.Get_size()
    if M.comm.Get_size() != size:
        return UsageError(f"{name} lives on {M.comm.Get_size()} rank(s), the session on "
                          f"{size}", param=name)
    MPI = mpi()
    if isinstance(M.comm, MPI.Comm) and isinstance(comm, MPI.Comm) and \
            MPI.Comm.Compare(M.comm, comm) not in (MPI.IDENT, MPI.CONGRUENT):
        return UsageError(
            f"{name} lives on a communicator that is not the session's: its rank "
            f"{M.comm.Get_rank()} is the session's rank {comm.Get_rank()} (other processes, "
            f"or the same ones in another order); make it with comm= the communicator "
            f"the session was started on", param=name)
    return None


def check_operand(comm, M, name, tile_map, overwrite=None, factor=None, **expect):
    """UsageError on every rank unless ``M`` (the argument ``name``) is a
    DistributedMatrix laid out by ``tile_map`` as ``expect`` says (kind, n, nb, dtype)
    on every rank, with writable tiles when ``overwrite`` (the name of the overwrite
    parameter given True) says the result goes into them, and is not ``factor`` (the
    factor L itself, which an in-place factorization leaves in A). Collective."""
    error = None
    try:
        if not isinstance(M, DistributedMatrix):
            raise UsageError(f"{name} must be a DistributedMatrix, got {type(M).__name__}",
                             param=name)
        if M is factor:
            raise UsageError(f"{name} is the factor L itself (cholesky with overwrite_a=True "
                             f"wrote L into its tiles); pass the original matrix: keep a "
                             f"copy, {name}.copy(), before factoring in place", param=name)
        error = ranks_error(M, name, comm)
        if error is not None:
            raise error
        error = M.local_error(tile_map, **expect)
        if isinstance(error, UsageError):
            error = UsageError(f"{name} does not match the factor: {error}",
                               params=(name,) + error.params)
        if error is None and overwrite:
            error = M.read_only_error(overwrite)
    except Exception as exc:  # noqa: BLE001
        error = exc
    agree(comm, error, same=M.signature() if isinstance(M, DistributedMatrix) else {})


def check_cholesky_input(comm, A, tile_map, overwrite_a, flush, window=None):
    """:func:`~starchol.linalg.cholesky.cholesky`'s checks: the same UsageError on every
    rank, else the slices' owners (c, nt, nt), int64, and the submission window
    (iterations, 0: none; :func:`starchol.model.memory.check_window`). Collective."""
    error, so = None, None
    try:
        try:
            window = check_window(window, getattr(A, "nt", 1), comm.Get_size())
        except ValueError as exc:
            raise UsageError(str(exc), param="window") from None
        check_map(tile_map, comm.Get_size())
        if not isinstance(A, DistributedMatrix):
            raise UsageError(f"A must be a DistributedMatrix, got {type(A).__name__}",
                             param="A")
        error = ranks_error(A, "A", comm) or A.local_error(tile_map, kind="symmetric")
        if error is None and overwrite_a:
            error = A.read_only_error("overwrite_a")
        if error is None:       # the slices' owners, once: for the agreement and the graph
            so = np.ascontiguousarray(tile_map.owner_maps(A.nt), dtype=np.int64)
    except Exception as exc:  # noqa: BLE001
        error = exc
    signature = A.signature() if isinstance(A, DistributedMatrix) else {}
    # the map by its owners, not only its description (two custom maps may share one)
    # flush too: StarPU-MPI's cache flush must happen on every rank or on none
    agree(comm, error, same={**signature,
                             "tile_map": map_key(tile_map, getattr(A, "nt", 0), so),
                             "flush": flush if isinstance(flush, bool) else repr(flush),
                             "window": window if isinstance(window, int) else repr(window)})
    return so, window
