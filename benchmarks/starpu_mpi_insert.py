"""What starpu_mpi_task_insert costs a rank per task, for a task it runs and for one it
takes no part in, and how long StarPU-MPI takes to start.

Builds ``benchmarks/starpu_mpi_insert.c`` against the project's StarPU and runs it under
``mpirun -np 2``: both ranks insert the same ``--tasks`` tasks (two tiles read, one
written, all three owned by rank 1, an empty kernel), each timing its insertion loop.
Rank 1 runs them: its time per task is the **insert** cost of a task a rank runs (task
creation and submission included, one worker running them beside it). Rank 0 takes no
part: its time per task is the **walk** of a Chameleon-like runtime, where every rank
calls ``starpu_mpi_task_insert`` for every task of the graph (argument decoding, owner
lookups). Also printed: ``starpu_mpi_init_conf``'s time on each rank (the start of StarPU
and its MPI layer, MPI already initialised). The runtime descriptions' ``insert``,
``walk`` and ``startup`` (docs/simulation.md, "The runtime's costs") are compared with
these figures there.

Usage: python benchmarks/starpu_mpi_insert.py [--tasks 100000] [--tiles 1000]
           [--rounds 5] [--json FILE]
"""
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from common import (ArgumentParser, at_least, positive_int, run_main,  # noqa: E402
                    temporary_folder, write_json)
from starpu_mpi_messages import bench_env, build, run_two_ranks  # noqa: E402

SOURCE = os.path.join(HERE, "starpu_mpi_insert.c")


def main(argv=None):
    ap = ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=positive_int, default=100000,
                    help="tasks inserted per round (default 100,000)")
    ap.add_argument("--tiles", type=at_least(3), default=1000,
                    help="distinct tiles the tasks use (default 1000)")
    ap.add_argument("--rounds", type=positive_int, default=5, help="rounds (default 5)")
    ap.add_json("the rounds and the medians")
    args = ap.parse_args(argv)
    with temporary_folder("starpu_mpi_insert.") as work:
        exe = build(work, SOURCE, "starpu_mpi_insert")
        out = run_two_ranks([exe, str(args.tiles), str(args.tasks), str(args.rounds)],
                            bench_env(), timeout=max(120, 60 * args.rounds))
    init, loops = {0: None, 1: None}, {0: [], 1: []}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 5 and words[2] == "init":
            init[int(words[1])] = float(words[4])
        elif len(words) == 6 and words[2] == "round":
            loops[int(words[1])].append(float(words[5]))
    if any(v is None for v in init.values()) or any(len(v) != args.rounds
                                                    for v in loops.values()):
        raise SystemExit(f"starpu_mpi_insert: unexpected output:\n{out}")
    doc = {"tasks": args.tasks, "tiles": args.tiles, "init_s": init,
           "rounds_s": loops,
           "walk_s_per_task": statistics.median(loops[0]) / args.tasks,
           "insert_s_per_task": statistics.median(loops[1]) / args.tasks}
    print(f"StarPU-MPI, 2 local ranks, {args.tasks} tasks per round, {args.rounds} rounds "
          f"(medians):")
    print(f"  insert, a task the rank runs:        {doc['insert_s_per_task'] * 1e6:8.2f} us")
    print(f"  walk, a task it takes no part in:    {doc['walk_s_per_task'] * 1e6:8.2f} us")
    print(f"  starpu_mpi_init_conf: rank 0 {init[0] * 1e3:.0f} ms, rank 1 "
          f"{init[1] * 1e3:.0f} ms")
    if args.json:
        write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    run_main(main)
