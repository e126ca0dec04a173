"""The traced factorization that ``starchol calibrate`` times the kernels from: a
``starchol run --trace`` command line (one rank, or R ranks under ``mpirun``) run in a
child process, its trace summary read back. The library's side
(:func:`starchol.linalg.calibrate.calibrate_runtime`) takes it as a callable, so that
the library builds no command line."""
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile

from ..distributions import get_map
from ..errors import UsageError
from ..linalg.calibrate import calibrate_runtime


def runtime_map_args(ranks):
    """``starchol run`` map arguments for a calibration on ``ranks`` ranks: a 2.5D map
    when there is one (its graph has ADD tasks), else 2DBC."""
    if ranks >= 2 and ranks % 2 == 0:
        for name in ("sbc25d", "2dbc25d"):
            try:
                get_map(name, ranks, slices=2)
                return ["--dist", name, "--slices", "2"]
            except UsageError:
                continue
    return ["--dist", "2dbc"]


def traced_run(n, nb, dtype, workers=1, ranks=1, folder=None, timeout=900, launcher=None):
    """Run one traced factorization (``starchol run --trace``) of order ``n`` in NB x NB
    tiles (entries) with ``workers`` workers per rank on ``ranks`` ranks (``mpirun -np R
    --oversubscribe --bind-to none`` unless ``launcher`` gives the command prefix);
    returns the trace summary (``trace.json``). RuntimeError with the run's error output
    when it fails. The trace folder is a temporary one (removed) unless ``folder``."""
    from .. import faults

    own = folder is None
    if own:
        with faults.creating():  # a signal either finds it tracked (and removes it) or stops this
            folder = tempfile.mkdtemp(prefix="starchol-calibrate-")
            faults.track(folder)
    try:
        trace = os.path.join(folder, "trace")
        cmd = [sys.executable, "-m", "starchol", "run", *runtime_map_args(ranks), "--n",
               str(n), "--nb", str(nb), "--dtype", dtype, "--workers",
               str(workers), "--quiet", "--trace", trace]
        if launcher is not None:
            cmd = [*launcher, *cmd]
        elif ranks > 1:
            cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(ranks), *cmd]
        env = dict(os.environ, STARPU_SILENT="1", STARPU_WORKERS_NOBIND="1",
                   STARPU_MPI_NOBIND="1")
        env.setdefault("STARPU_HOME", folder)
        if os.geteuid() == 0:
            env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        proc = run_tracked(cmd, env, timeout)
        if proc.returncode != 0:
            lines = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
            if proc.returncode == 2 and lines and ": error: " in lines[-1]:
                # the run refused its arguments (a size, a worker count): a usage error
                raise UsageError("the calibration run refused its arguments: "
                                 + lines[-1].split(": error: ", 1)[1])
            raise RuntimeError(f"the calibration run failed ({proc.returncode}): "
                               f"{' '.join(cmd)}\n{(proc.stderr or proc.stdout)[-2000:]}")
        with open(os.path.join(trace, "trace.json")) as f:
            return json.load(f)
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)
            faults.untrack(folder)


def run_tracked(cmd, env, timeout):
    """``subprocess.run(cmd)`` whose process group (mpirun and its ranks) ends with this
    process: started in a session of its own, tracked by :mod:`starchol.faults` (a
    signal to this process SIGKILLs the group and every process below it) and sent
    SIGTERM by the kernel if this process dies (``kill -9``:
    :func:`starchol.faults.die_with_parent`). Returns the CompletedProcess (text)."""
    from .. import faults

    with faults.creating():
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True,
                                preexec_fn=lambda: faults.die_with_parent(15))
        faults.track_child(proc.pid, group=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(proc.pid, 9)
        except OSError:
            pass
        proc.wait()
        raise
    finally:
        faults.untrack_child(proc.pid)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def runtime_calibration(nbs, dtypes=("float64",), workers=1, ranks=1, progress=None,
                        launcher=None):
    """:func:`~starchol.linalg.calibrate.calibrate_runtime` with :func:`traced_run`
    (``workers`` workers on each of ``ranks`` ranks, ``launcher`` as there): the node
    description of this machine."""
    run = functools.partial(traced_run, workers=workers, ranks=ranks, launcher=launcher)
    return calibrate_runtime(nbs, run, dtypes, workers, ranks, progress)
