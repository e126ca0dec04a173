"""What every benchmark script shares: checked arguments, atomic JSON output, Ctrl-C.

    from common import ArgumentParser, positive_int, run_main, write_json

- argument types that refuse bad values with a clear argparse error (exit status 2,
  ``SCRIPT: error: argument --repeat: must be an integer >= 1, got '0'``), never a
  traceback later in the run: :func:`positive_int`, :func:`nonnegative_int`, :func:`at_least`,
  :func:`nonnegative_float`, :func:`int_list` (``1024,2048``), :func:`int_ranges`
  (``2-16,21``); :meth:`ArgumentParser.add_json` adds ``--json FILE`` and checks,
  before any work, that its folder exists and is writable;
- :func:`write_json`: the document is written to a temporary file in the same folder,
  then renamed over FILE, so FILE is either the old file or the whole new one;
- :func:`run_main`: Ctrl-C (SIGINT) ends the script with exit status 130 and one line
  on stderr (``SCRIPT: interrupted``), no traceback; ``--json`` is then not written;
- :func:`temporary_folder`: a private folder removed at the end of its block, and also
  when SIGTERM or SIGHUP ends the script (:func:`starchol.faults.track`).

The scripts run as ``python benchmarks/X.py``, so this folder is on ``sys.path``.
"""
import argparse
import contextlib
import json
import numbers
import os
import shutil
import sys
import tempfile

#: exit status of a program ended by SIGINT (128 + 2), as shells report it
INTERRUPTED = 130


def _int(text, low):
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = None
    if value is None or value < low:
        raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
    return value


def positive_int(text):
    """argparse type: an integer >= 1."""
    return _int(text, 1)


def nonnegative_int(text):
    """argparse type: an integer >= 0."""
    return _int(text, 0)


def at_least(low):
    """argparse type: an integer >= ``low`` (``at_least(2)``: node counts of a map)."""
    def check(text):
        return _int(text, low)

    check.__name__ = f"integer >= {low}"
    return check


def nonnegative_float(text):
    """argparse type: a finite number >= 0 (seconds, for instance)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = None
    if value is None or not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
    return value


def int_list(text, low=1):
    """argparse type: comma-separated integers >= ``low`` (``1024,2048``), at least one."""
    parts = [p.strip() for p in str(text).split(",")]
    if not all(parts):
        raise argparse.ArgumentTypeError(f"must be comma-separated integers, got {text!r}")
    try:
        return [_int(p, low) for p in parts]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"must be comma-separated integers >= {low}, "
                                         f"got {text!r}") from None


def int_ranges(text, low=1):
    """argparse type: comma-separated integers or ranges ``A-B`` (A <= B), each >= ``low``
    (``2-16,21,28``), as one list in the order given."""
    out = []
    for part in str(text).split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            a = _int(lo, low)
            b = _int(hi, low) if dash else a
        except argparse.ArgumentTypeError:
            a = b = None
        if a is None or b < a:
            raise argparse.ArgumentTypeError(
                f"must be comma-separated integers >= {low} or ranges A-B with A <= B, "
                f"got {text!r}")
        out += range(a, b + 1)
    return out


def check_output_path(path):
    """argparse type: a file name whose folder exists and is writable (checked before the
    run, so that a long run does not end in an error while writing its result)."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise argparse.ArgumentTypeError(f"{path} is a folder, not a file name")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{path}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{path}: folder {folder} is not writable")
    return path


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser plus the shared ``--json FILE`` option and :meth:`fail`."""

    def add_json(self, what="the results"):
        """``--json FILE``: write ``what`` to FILE (atomically, see :func:`write_json`),
        and ``--overwrite``. After parsing, FILE passes the command line's one check of
        a ``--json`` file (:func:`starchol.jobs.output.check_json_file`: a regular file,
        never a device, FIFO or socket; an existing one only with ``--overwrite``)."""
        self.add_argument("--json", metavar="FILE", type=check_output_path,
                          help=f"write {what} as JSON to FILE (written whole or not at all; "
                               f"an existing FILE only with --overwrite)")
        self.add_argument("--overwrite", action="store_true",
                          help="replace the --json file if it exists")
        self._json_checked = True

    def parse_args(self, args=None, namespace=None):
        """argparse's, then the ``--json`` file's check (:meth:`add_json`)."""
        parsed = super().parse_args(args, namespace)
        if getattr(self, "_json_checked", False) and parsed.json is not None:
            from starchol.errors import UsageError
            from starchol.jobs.output import check_json_file

            try:
                check_json_file(parsed.json, parsed.overwrite)
            except UsageError as exc:
                self.error(str(exc))
        return parsed

    def fail(self, message):
        """A usage error found after parsing (values that depend on each other): the same
        one-line error and exit status 2 as argparse's own."""
        self.error(message)

    def check_runtime(self, scheduler=None, workers=None, n=None, nb=None):
        """Check against starchol's own rules, before StarPU starts: ``scheduler`` a
        policy of the installed StarPU, ``workers`` within its STARPU_MAXCPUS, ``n`` and
        ``nb`` valid sizes (those given); :meth:`fail` with starchol's message if not."""
        from starchol.errors import UsageError

        try:
            if n is not None or nb is not None:
                from starchol.linalg.tiled import check_sizes

                check_sizes(n, nb)
            if scheduler is not None:
                from starchol.runtime.backend import check_scheduler

                check_scheduler(scheduler)
            if workers is not None:
                from starchol.runtime.workers import check_workers

                check_workers(workers)
        except UsageError as exc:
            self.fail(str(exc))


def write_json(path, doc, indent=1):
    """Write ``doc`` as JSON to ``path`` atomically, by starchol's one write path
    (:func:`starchol.files.write_atomic`: a temporary file beside it, removed on any
    failure or signal, renamed over ``path``; never over a device, FIFO or socket).
    numpy numbers and other real numbers (fractions) are written as plain numbers."""
    from starchol.files import write_atomic

    write_atomic(path, json.dumps(doc, indent=indent, default=_plain) + "\n", role="--json")


def _plain(value):
    if hasattr(value, "tolist"):       # numpy scalars and arrays
        return value.tolist()
    if isinstance(value, numbers.Real):   # fractions.Fraction, ...
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def run_main(main, argv=None):
    """Run ``main(argv)`` and exit with its status (0 for None); Ctrl-C exits with 130
    and one line on stderr instead of a traceback."""
    name = os.path.basename(sys.argv[0]) or "benchmark"
    try:
        status = main(argv)
    except KeyboardInterrupt:
        sys.stdout.flush()
        print(f"{name}: interrupted", file=sys.stderr, flush=True)
        sys.exit(INTERRUPTED)
    sys.exit(status or 0)


@contextlib.contextmanager
def temporary_folder(prefix):
    """A new private folder (its path) for the block, removed after it, whatever ends
    it: an exception, Ctrl-C, or SIGTERM / SIGHUP at their default action, which would
    otherwise end the script and leave the folder behind (:mod:`starchol.faults`
    removes the folders it tracks, then ends the process by the same signal)."""
    from starchol import faults

    with faults.creating():
        path = tempfile.mkdtemp(prefix=prefix)
        faults.track(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        faults.untrack(path)
