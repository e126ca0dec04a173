"""Exception types shared by every layer of starchol."""


class StarcholError(Exception):
    """Base class of the errors starchol reports to its users."""


class UsageError(StarcholError, ValueError):
    """Bad input from the user (sizes, node counts, map names, files).

    The message names the problem and how to fix it. The library names parameters
    (``n must be positive``); ``params`` lists the parameter names the message uses, so
    the command line alone can translate them to its flags (``--n must be positive``).
    """

    def __init__(self, message, param=None, params=()):
        super().__init__(message)
        self.params = tuple(params) + ((param,) if param else ())

    def __reduce__(self):
        return (type(self), (str(self), None, self.params))
