/* StarPU 1.3 / 1.4 differences the binding meets, as one set of names.
 *
 * starchol compiles against the starpu_config.h of the StarPU it links (build_flags.py);
 * these macros pick the call or value of that version:
 *   - bytes sent per rank: starpu_mpi_comm_amounts_retrieve (1.3) became
 *     starpu_mpi_comm_stats_retrieve (1.4; the old name is gone);
 *   - the scheduler-policy callback of struct starpu_conf: sched_policy_init (1.3)
 *     became sched_policy_callback (1.4);
 *   - heteroprio's architecture index: STARPU_CPU_IDX / STARPU_CUDA_IDX (1.3) became
 *     STARPU_CPU_WORKER / STARPU_CUDA_WORKER (1.4).
 */
#ifndef STARCHOL_STARPU_COMPAT_H
#define STARCHOL_STARPU_COMPAT_H
#include <starpu.h>
#include <starpu_mpi.h>

#if STARPU_MAJOR_VERSION > 1 || (STARPU_MAJOR_VERSION == 1 && STARPU_MINOR_VERSION >= 4)
#define STARCHOL_STARPU_14 1
#define starchol_mpi_comm_stats_retrieve(amounts) starpu_mpi_comm_stats_retrieve(amounts)
#define STARCHOL_CONF_SCHED_CALLBACK sched_policy_callback
#define STARCHOL_HETEROPRIO_CPU STARPU_CPU_WORKER
#define STARCHOL_HETEROPRIO_CUDA STARPU_CUDA_WORKER
#else
#define STARCHOL_STARPU_14 0
#define starchol_mpi_comm_stats_retrieve(amounts) starpu_mpi_comm_amounts_retrieve(amounts)
#define STARCHOL_CONF_SCHED_CALLBACK sched_policy_init
#define STARCHOL_HETEROPRIO_CPU STARPU_CPU_IDX
#define STARCHOL_HETEROPRIO_CUDA STARPU_CUDA_IDX
#endif

#endif
