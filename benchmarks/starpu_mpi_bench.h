/* What the StarPU-MPI benchmarks (starpu_mpi_messages.c, starpu_mpi_insert.c) share:
 * one error path and the start of MPI and StarPU-MPI on exactly two ranks.
 * Each program defines BENCH_NAME (its name in messages) before including this file. */
#ifndef STARPU_MPI_BENCH_H
#define STARPU_MPI_BENCH_H

#include <starpu_mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* Say what failed (and its code) and end the job on every rank. */
static void die(const char *what, int rc)
{
    fprintf(stderr, BENCH_NAME ": %s failed (%d)\n", what, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

/* MPI (serialized threads, as StarPU-MPI needs) then StarPU-MPI on MPI_COMM_WORLD, which
 * must have two ranks; returns this rank, and in *init_s (unless NULL) the seconds
 * starpu_mpi_init_conf took (StarPU and its MPI layer started, MPI already initialised). */
static int bench_start(int *argc, char ***argv, double *init_s)
{
    int provided, rank, size, rc;
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED)
        die("MPI_THREAD_SERIALIZED", provided);
    double t0 = MPI_Wtime();
    if ((rc = starpu_mpi_init_conf(argc, argv, 0, MPI_COMM_WORLD, NULL)) != 0)
        die("starpu_mpi_init_conf", rc);
    if (init_s != NULL)
        *init_s = MPI_Wtime() - t0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2)
        die("2 ranks", size);
    return rank;
}

/* StarPU-MPI, then MPI, shut down. */
static void bench_end(void)
{
    starpu_mpi_shutdown();
    MPI_Finalize();
}

#endif
