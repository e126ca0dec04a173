"""Exception types shared by every layer of starchol."""


class StarcholError(Exception):
    """Base class of the errors starchol reports to its users."""


class UsageError(StarcholError, ValueError):
    """Bad input from the user (sizes, node counts, map names, files).

    The message names the problem and how to fix it.
    """
