"""Entry point of the ``starchol`` command line.

Each subcommand lives in its own module of :mod:`starchol.jobs` and exposes
``register(subparsers)``; the module list is :data:`starchol.jobs.COMMANDS`.
"""
import argparse
import logging
import sys

from . import __version__
from .errors import StarcholError, UsageError

log = logging.getLogger("starchol")


def build_parser():
    """Return the top-level argument parser with every subcommand registered."""
    from .jobs import command_modules

    parser = argparse.ArgumentParser(
        prog="starchol",
        description="Communication-avoiding distributed Cholesky: tile maps, exact "
                    "communication volumes, and runs on StarPU-MPI.",
    )
    parser.add_argument("--version", action="version", version=f"starchol {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0,
                        help="more log output (repeat for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in command_modules():
        module.register(sub)
    return parser


#: library parameter names whose command-line flag is not ``--NAME``
FLAG_NAMES = {"scheduler": "--sched", "tile_map": "--dist", "slices": "--slices"}


def flag_message(exc):
    """The message of a library :class:`UsageError` with its parameter names written as
    this command line's flags (``n must be positive`` -> ``--n must be positive``)."""
    import re

    text = str(exc)
    for param in getattr(exc, "params", ()):
        flag = FLAG_NAMES.get(param, "--" + param.replace("_", "-"))
        text = re.sub(rf"(?<![\w-]){re.escape(param)}(?![\w-])", flag, text)
    return text


def main(argv=None):
    """Run the command line; return the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING - 10 * min(args.verbose, 2),
        format="starchol: %(levelname)s: %(message)s",
    )
    try:
        return args.func(args) or 0
    except UsageError as exc:
        print(f"starchol {args.command}: error: {flag_message(exc)}", file=sys.stderr)
        return 2
    except StarcholError as exc:
        print(f"starchol {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("starchol: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
