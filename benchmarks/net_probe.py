"""The network as the simulator sees it, measured between two MPI ranks (mpi4py).

Rank 0 sends ``--messages`` messages of ``--bytes`` bytes to rank 1, all posted at once
(the link kept busy: bytes over time is the bandwidth a long transfer gets, TCP/IP
headers and MPI's protocol included), then ``--pings`` ping-pongs of 8 bytes (half the
median round trip is the one-way latency). Other ranks only take part in the barriers.
Rank 0 prints one JSON line: ``bandwidth_bytes_per_s``, ``latency_s``, and the figures
behind them. Used by benchmarks/simulate_validation.py on the emulated cluster.

Usage: mpirun -np 2 python benchmarks/net_probe.py [--bytes B] [--messages M] [--pings K]
"""
import json
import statistics

import numpy as np
from mpi4py import MPI

from common import ArgumentParser, positive_int, run_main


def main(argv=None):
    ap = ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bytes", type=positive_int, default=131072, help="bytes per message")
    ap.add_argument("--messages", type=positive_int, default=20, help="messages timed")
    ap.add_argument("--pings", type=positive_int, default=20, help="ping-pongs timed")
    opts = ap.parse_args(argv)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    if comm.Get_size() < 2:
        raise SystemExit("net_probe: needs 2 ranks or more")
    count = max(1, opts.bytes // 8)
    out = np.ones(count)
    into = [np.empty(count) for _ in range(opts.messages)]

    def burst():
        if rank == 0:
            MPI.Request.Waitall([comm.Isend(out, 1, tag=i) for i in range(opts.messages)])
        elif rank == 1:
            MPI.Request.Waitall([comm.Irecv(into[i], 0, tag=i) for i in range(opts.messages)])

    burst()                                          # warm-up: connections, buffers
    comm.Barrier()
    t0 = MPI.Wtime()
    burst()
    comm.Barrier()
    seconds = MPI.Wtime() - t0
    small, rtts = np.ones(1), []
    for _ in range(opts.pings):
        comm.Barrier()
        t = MPI.Wtime()
        if rank == 0:
            comm.Send(small, 1)
            comm.Recv(small, 1)
            rtts.append(MPI.Wtime() - t)
        elif rank == 1:
            comm.Recv(small, 0)
            comm.Send(small, 0)
    if rank == 0:
        print(json.dumps({"bandwidth_bytes_per_s": count * 8 * opts.messages / seconds,
                          "latency_s": statistics.median(rtts) / 2,
                          "message_bytes": count * 8, "messages": opts.messages,
                          "burst_s": seconds, "round_trips_s": rtts}), flush=True)


if __name__ == "__main__":
    run_main(main)
