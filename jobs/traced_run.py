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
    own = folder is None
    folder = folder or tempfile.mkdtemp(prefix="starchol-calibrate-")
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
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise RuntimeError(f"the calibration run failed ({proc.returncode}): "
                               f"{' '.join(cmd)}\n{(proc.stderr or proc.stdout)[-2000:]}")
        with open(os.path.join(trace, "trace.json")) as f:
            return json.load(f)
    finally:
        if own:
            shutil.rmtree(folder, ignore_errors=True)


def runtime_calibration(nbs, dtypes=("float64",), workers=1, ranks=1, progress=None,
                        launcher=None):
    """:func:`~starchol.linalg.calibrate.calibrate_runtime` with :func:`traced_run`
    (``workers`` workers on each of ``ranks`` ranks, ``launcher`` as there): the node
    description of this machine."""
    run = functools.partial(traced_run, workers=workers, ranks=ranks, launcher=launcher)
    return calibrate_runtime(nbs, run, dtypes, workers, ranks, progress)
