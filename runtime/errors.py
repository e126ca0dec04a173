"""Exceptions of the runtime layer (all derive from :class:`starchol.StarcholError`)."""
import errno
import os

from ..collective import agree, describe
from ..errors import StarcholError


class StarPUError(StarcholError):
    """A StarPU / StarPU-MPI call returned a negative error code.

    Attributes
    ----------
    code : int
        The C status (negative errno), e.g. -19.
    errno_name : str
        Its symbolic name, e.g. ``"ENODEV"``.
    call : str
        The StarPU function that failed.
    """

    def __init__(self, code, call):
        if isinstance(call, bytes):
            call = call.decode()
        self.code = int(code)
        self.call = call
        self.errno_name = errno.errorcode.get(-self.code, f"E{-self.code}")
        hint = _HINTS.get(self.errno_name, "")
        super().__init__(f"{call} failed with {self.errno_name} ({os.strerror(-self.code)})"
                         + (f": {hint}" if hint else ""))

    def __reduce__(self):
        return (type(self), (self.code, self.call))


_HINTS = {
    "ENODEV": "no worker can run the task or StarPU found no processing unit; "
              "check the worker count and the STARPU_NCPU / STARPU_NCUDA environment",
    "EINVAL": "invalid argument given to StarPU (this is a bug in starchol)",
}


class RuntimeUnavailableError(StarcholError):
    """The runtime layer cannot run here: a library or feature is missing."""


class SessionError(StarcholError):
    """A Session used out of order: not started, already running, or already stopped."""


class CallbackError(StarcholError):
    """A callback given to starchol (``progress``) raised an exception on some rank.

    The callback is not called again on that rank; the computation runs to its end on
    every rank, then every rank raises this error with the same message (the lowest
    failing rank's), so no rank waits for another and the session stays usable. On the
    rank where the callback raised, ``__cause__`` is the original exception (with its
    traceback); elsewhere only its description travels.

    Attributes
    ----------
    callback : str
        The parameter that held the callback (``"progress"``).
    name : str
        The callback's qualified name (or repr).
    rank : int
        The rank where it raised (the lowest one if several did).
    error : str
        The original exception as text, ``"RuntimeError: boom"``.
    """

    def __init__(self, callback, name, rank, error):
        self.callback, self.name, self.rank, self.error = callback, name, int(rank), error
        super().__init__(f"the {callback} callback {name} raised on rank {self.rank}: "
                         f"{error}; it was not called again, the computation finished on "
                         f"every rank and the session is still usable")

    @classmethod
    def wrap(cls, callback, function, exc, rank):
        """The error for ``exc``, raised by ``function`` (given as ``callback``) on
        ``rank``; its ``__cause__`` is ``exc``."""
        name = getattr(function, "__qualname__", None) or repr(function)
        err = cls(callback, name, rank, describe(exc))
        err.__cause__ = exc
        return err

    def __reduce__(self):  # travels between ranks (collective agreement)
        return (type(self), (self.callback, self.name, self.rank, self.error))


def agree_callback_error(comm, error):
    """Raise on every rank the :class:`CallbackError` of the lowest rank whose callback
    raised (``error``: this rank's, or None); return if none did. Collective. On the
    rank where the callback raised, the error raised keeps the original as its cause."""
    try:
        agree(comm, error)
    except CallbackError as exc:
        if error is not None and exc is not error and exc.rank == error.rank:
            exc.__cause__ = error.__cause__
        raise
