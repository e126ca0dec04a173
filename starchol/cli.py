"""Entry point of the ``starchol`` command line.

Each subcommand lives in its own module of :mod:`starchol.jobs` and exposes
``register(subparsers)``; the module list is :data:`starchol.jobs.COMMANDS`.

Errors: a :class:`UsageError` exits with status 2, any other error with status 1, each
with one line ``starchol CMD: error: ...`` and no traceback (``-v`` adds it to unexpected
errors, ``-vv`` to every error). Argument errors are one line too, from the command's
own parser (:class:`Parser`), also for unknown options (status 2). Signals are handled
by :mod:`starchol.faults` (temporary files removed, the MPI job ended).
"""
import argparse
import logging
import math
import os
import re
import sys

from .version import VERSION
from .distributions.base import MAP_PARAMS
from .errors import StarcholError, UsageError

log = logging.getLogger("starchol")


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line,
    ``starchol CMD: error: MESSAGE (see starchol CMD --help)``, exit status 2.

    ``hints`` maps an option this command does not have to the sentence that says what
    to use instead (``run``: ``--nodes`` -> mpirun -np); it is added to the message when
    the option is among the unrecognized arguments. The subcommands' parsers are of this
    class too (argparse makes them with their parent's class).
    """

    def __init__(self, *args, hints=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.hints = dict(hints or {})

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {self.explain(message)} "
                     f"(see {self.prog} --help)\n")

    def explain(self, message):
        """``message`` with the hint for an option this command lacks, or the integer
        an ``invalid int value: '1e4'`` meant."""
        if message.startswith(UNRECOGNIZED):
            words = message[len(UNRECOGNIZED):].split()
            given = {w.split("=", 1)[0] for w in words}
            found = [text for opt, text in self.hints.items() if opt in given]
            if found:
                message += "; " + "; ".join(found)
        bad = re.search(r"invalid int value: '([^']*)'", message)
        if bad:
            try:
                value = float(bad.group(1))
            except ValueError:
                value = None
            if value is not None and math.isfinite(value) and value == int(value):
                message += f"; write it as an integer: {int(value)}"
        return message


#: argparse's words for arguments no option takes
UNRECOGNIZED = "unrecognized arguments: "


class _Commands:
    """The subparsers action, remembering each command's parser by name."""

    def __init__(self, sub):
        self.sub = sub
        self.parsers = {}

    def add_parser(self, name, **kwargs):
        p = self.sub.add_parser(name, **kwargs)
        self.parsers[name] = p
        return p


def _add_verbose(parser, default):
    parser.add_argument("-v", "--verbose", action="count", default=default,
                        help="more log output on stderr (-v: steps and checks, -vv: debug, "
                             "tracebacks of errors)")


def build_parser():
    """Return the top-level argument parser with every subcommand registered.

    The parser's ``command_parsers`` attribute maps each command name to its parser.
    """
    from .jobs import command_modules

    parser = Parser(
        prog="starchol",
        description="Communication-avoiding distributed Cholesky: tile maps, exact "
                    "communication volumes, and runs on StarPU-MPI.",
    )
    parser.add_argument("--version", action="version", version=f"starchol {VERSION}")
    _add_verbose(parser, 0)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    commands = _Commands(sub)
    for module in command_modules():
        module.register(commands)
    for p in commands.parsers.values():
        _add_verbose(p, argparse.SUPPRESS)  # -v also after the command name
    parser.command_parsers = commands.parsers
    return parser


#: library parameter names whose command-line flag is not ``--NAME``
FLAG_NAMES = {"scheduler": "--sched", "tile_map": "--dist", "slices": "--slices",
              "path": "--map-file"}


def flag_of(param, flags=None):
    """The command-line flag of a library parameter: ``--sched`` for ``scheduler``, else
    ``--name-with-dashes`` (``flags``: a command's own spellings, which win)."""
    if flags and param in flags:
        return flags[param]
    return FLAG_NAMES.get(param, "--" + param.replace("_", "-"))


def flag_text(text, params=(), flags=None):
    """The one translation of library wording into this command line's flags.

    ``name=value`` (the map library's wording: ``use nodes=15 or dist=sym``) becomes
    ``--name value``; the bare parameter names listed in ``params`` (a
    :class:`UsageError`'s ``params``: ``n must be positive``) become their flags, and
    ``name=True`` of a switch among them (``pass overwrite=True``) the bare flag (then
    only that form: a file named ``overwrite`` stays). A name
    inside a file name (``/data/output/x.h5``, ``trace.h5``) is left alone. ``flags``
    names the parameters a command spells otherwise (``{"nodes": "mpirun -np"}``: ``run``
    has no ``--nodes``).
    """
    names = "|".join(MAP_PARAMS)     # the map library's name=value words
    text = re.sub(rf"\b({names})=(?=\S)", lambda m: flag_of(m.group(1), flags) + " ", text)
    text = re.sub(rf"\b({names})=", lambda m: flag_of(m.group(1), flags), text)
    for param in params or ():
        word = rf"(?<![\w/.-]){re.escape(param)}"
        text, switch = re.subn(rf"{word}=True\b", flag_of(param, flags), text)
        if not switch:   # a switch said as name=True is said so only (a file "overwrite")
            text = re.sub(rf"{word}(?![\w/-]|\.\w)", flag_of(param, flags), text)
    return text


def flag_message(exc, flags=None):
    """The message of a library :class:`UsageError` in flags (see :func:`flag_text`)."""
    return flag_text(str(exc), getattr(exc, "params", ()), flags)


def command_parser(name):
    """The argument parser of one subcommand (e.g. ``"run"``), or None if there is none."""
    return build_parser().command_parsers.get(name)


def check_command_argv(name, argv):
    """Parse ``argv`` (the words after the command name) with the ``name`` command's
    parser. Returns None when it parses, else the parser's one-line message; ``"no NAME
    command"`` when this installation has no such command."""
    import contextlib
    import io

    parser = command_parser(name)
    if parser is None:
        return f"no {name} command"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parser.parse_args(list(argv))
    except SystemExit as exc:
        if exc.code:
            lines = [ln for ln in err.getvalue().strip().splitlines() if ln.strip()]
            return lines[-1] if lines else f"exit status {exc.code}"
    return None


def _setup_logging(verbose):
    level = logging.WARNING - 10 * min(verbose, 2)
    root = logging.getLogger("starchol")
    root.setLevel(level)
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("starchol: %(levelname)s: %(message)s"))
        root.addHandler(handler)
    root.propagate = False


def main(argv=None):
    """Run the command line; return the process exit status."""
    from . import faults

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's parser, with its hints (not the top-level usage)
        parser.command_parsers[args.command].error(UNRECOGNIZED + " ".join(extra))
    _setup_logging(args.verbose)
    label = f"starchol {args.command}"
    if argv is None:  # the real command line (not a test calling main([...]))
        faults.install_signal_watcher(label)
    # the end of the signal window: a signal before it ends the command, after it the
    # status stands (faults.finish)
    return faults.finish(_run_command(args, label))


def _run_command(args, label):
    """``args.func(args)`` -> exit status, each error as its one line."""
    from . import faults
    from .collective import describe

    try:
        try:
            if getattr(args, "one_process", False):
                check_one_process(args.command)
            return args.func(args) or 0
        except BaseException:
            if faults.stopping():  # a signal is ending the process: its watcher speaks
                faults.wait_for_end()
            raise
    except UsageError as exc:
        _traceback(args.verbose, 2)
        say(f"{label}: error: {flag_message(exc)}")
        return 2
    except StarcholError as exc:
        _traceback(args.verbose, 2)
        say(f"{label}: error: {exc}")
        return 1
    except KeyboardInterrupt:
        say(f"{label}: interrupted")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - no traceback for users; -v shows it
        _traceback(args.verbose, 1)
        say(f"{label}: error: {describe(exc)}")
        return 1


#: environment variables in which MPI launchers give the number of processes started
LAUNCHER_SIZE_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                           "MPI_LOCALNRANKS")


def check_one_process(command, environ=None):
    """Refuse a one-process command (``generate``, ``map``, ``volume``, ...) started as
    several processes by a launcher (``mpirun -np 2 starchol generate``): every process
    would write the same files. Read from the launchers' environment variables
    (:data:`LAUNCHER_SIZE_VARIABLES`); every process raises the same
    :class:`UsageError`."""
    env = os.environ if environ is None else environ
    for name in LAUNCHER_SIZE_VARIABLES:
        try:
            size = int(env.get(name, "1"))
        except ValueError:
            continue
        if size > 1:
            raise UsageError(f"starchol {command} is one process, but it was started as "
                             f"{size} processes ({name}={size}: mpirun -np or srun): each "
                             f"would write the same files; run it once, without mpirun or "
                             f"srun")


def say(line):
    """Write one line to stderr in a single write.

    ``print(line, file=sys.stderr)`` writes the text and its newline separately, and
    mpirun forwards the ranks' output in the pieces they were written in: two ranks
    printing their errors at once then came out as ``error: Aerror: A`` on one line and
    an empty one.
    """
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed or gone: nothing more to say
        pass


def _traceback(verbose, level):
    """Print the traceback of the error being handled when ``-v`` was given ``level``
    times or more (unexpected errors: -v; starchol's own, whose one line says it all:
    -vv)."""
    if verbose >= level:
        import traceback

        traceback.print_exc()
