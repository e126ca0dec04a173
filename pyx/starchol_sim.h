/* starchol_sim: replay a recorded starchol task graph on SimGrid (C++ S4U API).
 *
 * The graph is what the compiled graph loops (_graphs.pyx) inserted, recorded by the
 * binding instead of StarPU (one record per task or cache flush, in submission order,
 * see _binding.pyx, "recording"). This file derives the dependencies the way StarPU's
 * sequential consistency and StarPU-MPI's receive cache do, then runs them on a SimGrid
 * platform built in code: one host per node with W cores, one split-duplex link per
 * node (and an optional shared backbone), list scheduling per node by priority.
 * Units: seconds, bytes, bytes per second.
 */
#ifndef STARCHOL_SIM_H
#define STARCHOL_SIM_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* one record of the graph recorder: REC_WIDTH int64 */
#define STARCHOL_REC_WIDTH 12
/* record[0]: 0 = cache flush of data record[2]; else the task's kernel (codelet) key */
/* record[1]: priority; record[2 + 3 k .. 4 + 3 k]: data id, access mode, owner node */
/* record[11]: the task's iteration (the graph loop's panel_begin(k)), for the window */
#define STARCHOL_MODE_R 1
#define STARCHOL_MODE_W 2

typedef struct {
    /* graph */
    int64_t nrec;                 /* records */
    const int64_t *rec;           /* nrec x STARCHOL_REC_WIDTH */
    int64_t ntasks;               /* task records (the others are flushes) */
    const double *duration;       /* per task (in record order, flushes skipped): seconds */
    const int64_t *data_bytes;    /* per data id: bytes of one transfer */
    int64_t ndata;
    int cache;                    /* StarPU-MPI receive cache on (1) or off (0) */
    /* platform */
    int nodes;
    const int *cores;             /* per node: workers */
    const double *bandwidth;      /* per node link (each direction): bytes/s */
    const double *latency;        /* per node link: s */
    double backbone_bandwidth;    /* <= 0: no backbone */
    double backbone_latency;
    /* sends a node keeps in flight, the others wait in priority order (StarPU-MPI's
       STARPU_MPI_NDETACHED_SEND, default 10); 0: no limit */
    int sends_in_flight;
    /* 1: one send at a time from a node to each other node (0: any number, sharing) */
    int pair_serial;
    /* the runtime's costs (0 = free; docs/simulation.md, "The runtime's costs"):
       comm_throughput: per node, bytes/s its communication moves, sends and receives
       together (one shared resource per node on every route through it; <= 0: no limit);
       message_overhead: s of the node's communication thread per message, on the
       sender before the bytes leave and on the receiver after they arrive, one message
       at a time per node (FIFO); receive_overhead: s more of the receiver's
       communication thread per message it receives (matching, the rendezvous
       handshake, the copy on receive), in the same FIFO; sent_overhead: s of the
       sender's communication thread per message once its bytes have left (testing the
       send to completion, releasing the tile), in the same FIFO: it delays the messages
       behind it on that thread, not this one; submission: a node submits the records in order, a task
       it takes part in (runs it, or owns one of its operands) costs insert_s, any other
       walk_s when submit_every_task is 1 (every rank walks every task, as Chameleon) and
       nothing when 0 (the graph loops prune it); the first submission at startup_s. A task
       is not started before its node has submitted it, a transfer not before both its
       sender and its receiver have submitted the task that reads it. */
    const double *comm_throughput;
    double message_overhead;
    double receive_overhead;
    double sent_overhead;
    /* 1: a node's sends start in the order they became ready (0: by priority) */
    int sends_fifo;
    /* 1: a node's workers take its ready tasks in the order they became ready (0: by
       priority, as StarPU's prio scheduler) */
    int tasks_fifo;
    int submit_every_task;
    double insert_s;
    double walk_s;
    double startup_s;
    /* the submission window (docs/runtime.md): a node submits iteration k (record[11])
       once its own tasks (those it runs) of iteration k - window are done, and
       iteration k - 1 is submitted; iterations 0..window-1 at the start. A task is not
       started before its node has submitted its iteration, a transfer not before its
       sender and its receiver have submitted the iteration of the task that reads it
       (as with the submission clock above; both apply). 0: the whole graph at once. */
    int window;
    /* progress: called every progress_every completed tasks (may be NULL) */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;
    int64_t progress_every;
} starchol_sim_input;

typedef struct {
    double makespan;              /* s */
    double critical_path;         /* s: longest chain of task durations, transfers free */
    double critical_path_comm;    /* s: the same with each transfer's uncontended time */
    int64_t ntransfers;
    double *start;                /* per task: s (caller allocates ntasks) */
    double *end;                  /* per task: s */
    int32_t *worker;              /* per task: worker index on its node */
    int32_t *node;                /* per task: node that ran it */
    int64_t *pair_bytes;          /* nodes x nodes: bytes sent from row to column */
    double *busy;                 /* per node: sum of task durations, s */
} starchol_sim_output;

/* Returns 0, or non-zero with a message in err (bad graph, deadlock). */
int starchol_simulate(const starchol_sim_input *in, starchol_sim_output *out, char *err,
                      int errlen);

#ifdef __cplusplus
}
#endif
#endif
