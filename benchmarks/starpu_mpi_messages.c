/* StarPU-MPI's cost per message between two ranks: rank 0 posts COUNT detached sends of
 * BYTES bytes each to rank 1 at once (starpu_mpi_isend_detached, one registered buffer
 * per message), rank 1 the matching detached receives; both wait until all are done
 * (each request's callback counts down; starpu_mpi_wait_for_all, tried first, hung
 * here with messages above Open MPI's 4 kB shared-memory eager limit). ROUNDS rounds,
 * each timed on rank 1 from a barrier to the last message received. How many sends
 * StarPU-MPI keeps in flight is its own setting, STARPU_MPI_NDETACHED_SEND, read from
 * the environment.
 *
 * Usage: mpirun -np 2 starpu_mpi_messages BYTES COUNT ROUNDS
 * Prints, on rank 1, one line per round: "round R seconds S" (S: the round's time).
 * Built and run by benchmarks/starpu_mpi_messages.py.
 */
#include <unistd.h>

#define BENCH_NAME "starpu_mpi_messages"
#include "starpu_mpi_bench.h"

/* messages of the round not yet done on this rank (the detached requests' callback) */
static volatile int pending;

static void one_done(void *arg)
{
    (void)arg;
    __atomic_sub_fetch(&pending, 1, __ATOMIC_SEQ_CST);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s BYTES COUNT ROUNDS\n", argv[0]);
        return 2;
    }
    size_t bytes = (size_t)atoll(argv[1]);
    int count = atoi(argv[2]), rounds = atoi(argv[3]);
    if (bytes < 1 || count < 1 || rounds < 1) {
        fprintf(stderr, "starpu_mpi_messages: BYTES, COUNT and ROUNDS must be >= 1\n");
        return 2;
    }
    int rc, rank = bench_start(&argc, &argv, NULL);

    char *buf = malloc(bytes * (size_t)count);
    starpu_data_handle_t *h = malloc(sizeof(*h) * (size_t)count);
    if (buf == NULL || h == NULL)
        die("malloc", 0);
    for (size_t i = 0; i < bytes * (size_t)count; i++)
        buf[i] = (char)(i * 7 + rank);
    for (int i = 0; i < count; i++)
        starpu_vector_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)(buf + bytes * i),
                                    bytes, 1);

    for (int r = 0; r < rounds; r++) {
        starpu_mpi_barrier(MPI_COMM_WORLD);
        double t0 = starpu_timing_now();
        __atomic_store_n(&pending, count, __ATOMIC_SEQ_CST);
        for (int i = 0; i < count; i++) {
            starpu_mpi_tag_t tag = (starpu_mpi_tag_t)r * count + i;
            rc = rank == 0
                ? starpu_mpi_isend_detached(h[i], 1, tag, MPI_COMM_WORLD, one_done, NULL)
                : starpu_mpi_irecv_detached(h[i], 0, tag, MPI_COMM_WORLD, one_done, NULL);
            if (rc != 0)
                die(rank == 0 ? "starpu_mpi_isend_detached" : "starpu_mpi_irecv_detached", rc);
        }
        while (__atomic_load_n(&pending, __ATOMIC_SEQ_CST) > 0)
            usleep(10);
        double t1 = starpu_timing_now();
        if (rank == 1) {
            printf("round %d seconds %.9f\n", r, (t1 - t0) / 1e6);
            fflush(stdout);
        }
    }
    for (int i = 0; i < count; i++)
        starpu_data_unregister(h[i]);
    free(h);
    free(buf);
    bench_end();
    return 0;
}
