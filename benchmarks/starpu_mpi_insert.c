/* What starpu_mpi_task_insert costs the submitting thread, per task: every rank inserts
 * the same TASKS tasks, each reading two tiles and writing a third (a GEMM's operands),
 * all three owned by rank 1. Rank 1 runs them (an empty kernel); for rank 0 each call
 * only decodes the arguments and looks up the owners: the "walk" of a rank that takes
 * no part in the task, as every rank of a Chameleon-like runtime does for every task of
 * the graph. No data moves. Each rank times its own insertion loop.
 *
 * Usage: mpirun -np 2 starpu_mpi_insert TILES TASKS ROUNDS
 * Prints on each rank "rank R init seconds S" (starpu_mpi_init_conf: StarPU and its MPI
 * layer started, MPI itself already initialised), then one line per round:
 * "rank R round K seconds S" (S: its insertion loop).
 * Built and run by benchmarks/starpu_mpi_insert.py.
 */
#define BENCH_NAME "starpu_mpi_insert"
#include "starpu_mpi_bench.h"

static void nothing(void *buffers[], void *arg)
{
    (void)buffers;
    (void)arg;
}

static struct starpu_codelet gemm_like = {
    .cpu_funcs = {nothing},
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_RW},
    .name = "gemm_like",
};

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s TILES TASKS ROUNDS\n", argv[0]);
        return 2;
    }
    int tiles = atoi(argv[1]), tasks = atoi(argv[2]), rounds = atoi(argv[3]);
    if (tiles < 3 || tasks < 1 || rounds < 1) {
        fprintf(stderr, "starpu_mpi_insert: TILES >= 3, TASKS and ROUNDS >= 1\n");
        return 2;
    }
    double init_s;
    int rc, rank = bench_start(&argc, &argv, &init_s);
    printf("rank %d init seconds %.9f\n", rank, init_s);
    fflush(stdout);

    double *buf = calloc((size_t)tiles, sizeof(double));
    starpu_data_handle_t *h = malloc(sizeof(*h) * (size_t)tiles);
    if (buf == NULL || h == NULL)
        die("malloc", 0);
    for (int i = 0; i < tiles; i++) {
        if (rank == 1)
            starpu_vector_data_register(&h[i], STARPU_MAIN_RAM, (uintptr_t)&buf[i], 1,
                                        sizeof(double));
        else
            starpu_vector_data_register(&h[i], -1, (uintptr_t)NULL, 1, sizeof(double));
        starpu_mpi_data_register(h[i], i, 1);
    }
    for (int r = 0; r < rounds; r++) {
        starpu_mpi_barrier(MPI_COMM_WORLD);
        double t0 = starpu_timing_now();
        for (int t = 0; t < tasks; t++) {
            int a = t % tiles, b = (t / tiles + a + 1) % tiles, c = (a + b + 1) % tiles;
            if (b == a || c == a || c == b) {
                b = (a + 1) % tiles;
                c = (a + 2) % tiles;
            }
            rc = starpu_mpi_task_insert(MPI_COMM_WORLD, &gemm_like, STARPU_R, h[a],
                                        STARPU_R, h[b], STARPU_RW, h[c],
                                        STARPU_PRIORITY, tasks - t, 0);
            if (rc != 0)
                die("starpu_mpi_task_insert", rc);
        }
        double t1 = starpu_timing_now();
        starpu_task_wait_for_all();
        printf("rank %d round %d seconds %.9f\n", rank, r, (t1 - t0) / 1e6);
        fflush(stdout);
    }
    for (int i = 0; i < tiles; i++)
        starpu_data_unregister(h[i]);
    free(h);
    free(buf);
    bench_end();
    return 0;
}
