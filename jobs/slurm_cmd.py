"""``starchol slurm``: sbatch scripts that run ``starchol run`` on a Slurm cluster.

    starchol slurm --dist D --nodes P [--grid PxQ] [--slices C] --n N --nb NB
        [--time HH:MM:SS] [--partition NAME] [--cpus-per-node K] [--ranks-per-node R]
        [--launcher mpirun|srun] [--requeue] [--input F.h5:/A] [--output F.h5:/L] [--json-dir DIR]
        [--mem auto|SIZE|0|none] [--gpus-per-node G] [--perf-model-dir DIR] [-o FILE]
    starchol slurm --sweep --dist sbc,2dbc --nodes 28 --n 20000,40000 --nb 500 -o DIR

The ranks start with Open MPI's ``mpirun`` inside the allocation (default) or ``srun
--mpi=pmix`` (``--launcher srun``, with ``SLURM_PMIX_FENCE=tree``): under srun with
Slurm's default fences, Open MPI 4.1 lost a rank to SIGSEGV in MPI_Init in about 1 job in
4 on the emulated cluster (docs/slurm.md, "Launchers"). ``--requeue`` lets Slurm rerun
the job after a node failure; by default the script says ``--no-requeue``.

``--nodes P`` is the map's node count, i.e. the number of MPI ranks. The script puts R
ranks on each Slurm node (``--ranks-per-node``; by default derived from
``--cpus-per-node``, see :func:`~starchol.runtime.workers.plan_ranks`), so it asks Slurm for ceil(P / R) nodes.

``--gpus-per-node G`` asks Slurm for G GPUs on each node (``--gres=gpu:G``, for the job
and for the srun step that starts mpirun's daemons or the ranks) and runs ``starchol run --gpus G`` on every rank: the ranks of a
node share its GPUs, each GPU run by CUDA workers that each keep a core (docs/gpu.md).
Without it the run line says ``--gpus 0``, so a CPU job never uses GPUs it was not
given. GPU jobs default to the ``dmdas`` scheduler (``--sched`` otherwise);
``--perf-model-dir`` keeps StarPU's calibrated models across jobs.

``--mem auto`` asks Slurm for the memory the job's ranks need on one node: R times the
peak of the rank that needs the most under the model of ``starchol plan`` and ``starchol
run``'s pre-flight check (:func:`starchol.model.memory.node_memory`; N read from
``--input`` when ``--n`` is not given), plus :data:`MEM_HEADROOM`.

Everything is checked before anything is written: the map (so a node count the map
cannot use fails now, not in the queue), the sizes, the time limit, the files (no output
on an input, an input that exists here is inspected), and the ``starchol run`` command
line itself against this installation's ``run`` parser.
"""
import os
import shlex
import sys

from ..errors import UsageError
from ..files import OutputFolder
from .output import check_command_outputs, command_inputs, write_atomic
from .slurm_args import register as register_parser
from .slurm_memory import MEM_HEADROOM, RunSettings, memory_request, run_settings
from .slurm_options import (JobOptions, check_options, check_run_arg_conflicts,
                            parse_time)
from .slurm_plan import (JobPlan, check_run_argv, default_starchol,
                         plans_from_args, run_argv)
from .slurm_script import render_script

# the command's parts, by job: the parser (slurm_args), the options as checked
# (slurm_options), each job's plan and run line (slurm_plan), --mem auto (slurm_memory)
# and the script's text (slurm_script); the names above are their public front


def register(sub):
    """Add ``starchol slurm``'s parser (:mod:`.slurm_args`) to the subparsers ``sub``."""
    return register_parser(sub, run)


def run(args):
    plans = plans_from_args(args)
    starchol = args.starchol or default_starchol()
    if not args.sweep:
        json_dir = None if args.json_dir is None else os.path.abspath(args.json_dir)
        text = render_script(args, plans[0], json_dir, starchol)
        if args.out in (None, "-"):
            sys.stdout.write(text)
            return 0
        if os.path.isdir(args.out):
            raise UsageError(f"-o {args.out} is a folder; give a file name (folders are "
                             f"for --sweep)")
        check_command_outputs(args, [("-o", args.out)])    # the one output check
        write_atomic(args.out, text, role="-o")
        os.chmod(args.out, 0o755)
        print(f"wrote {args.out}: {plans[0].slurm_nodes} node(s), {plans[0].nodes} rank(s); "
              f"submit with: sbatch {args.out}", file=sys.stderr)
        return 0
    if args.out is None:
        raise UsageError("--sweep writes one script per job: give the folder with -o DIR")
    with OutputFolder(args.out, "-o", overwrite=args.overwrite,
                      inputs=command_inputs(args)) as out:   # made at the first write
        folder = os.path.abspath(args.out)
        json_dir = os.path.abspath(args.json_dir) if args.json_dir else \
            os.path.join(folder, "results")
        names = []
        for plan in plans:
            name = f"{plan.tag}.sbatch"
            path = out.path(name)
            write_atomic(path, render_script(args, plan, json_dir, starchol), role="-o")
            os.chmod(path, 0o755)
            names.append(name)
        submit = ["#!/bin/bash",
                  f"# Submit the {len(names)} jobs of this sweep (written by `starchol "
                  f"slurm --sweep`).",
                  f"# Reports: {json_dir}/starchol-JOBID.json; compare them with "
                  f"`starchol report {json_dir}/*.json -o report`.",
                  "set -euo pipefail",
                  'cd "$(dirname "${BASH_SOURCE[0]}")"']
        submit += [f"sbatch {shlex.quote(n)}" for n in names]
        path = out.path("submit_all.sh")
        write_atomic(path, "\n".join(submit) + "\n", role="-o")
        os.chmod(path, 0o755)
    print(f"wrote {len(names)} scripts and submit_all.sh to {args.out}:", file=sys.stderr)
    for name in names:
        print(f"  {name}", file=sys.stderr)
    return 0


__all__ = ["JobOptions", "JobPlan", "MEM_HEADROOM", "RunSettings", "check_options",
           "check_run_arg_conflicts", "check_run_argv", "memory_request", "parse_time",
           "plans_from_args", "register", "render_script", "run", "run_argv", "run_settings"]
