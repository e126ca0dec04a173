/* starchol's GPU and scheduler layer (C side of starchol.runtime._gpu).
 *
 * Three things, none of which touches Python:
 *
 * 1. CUDA implementations of the Cholesky codelets' kernels (POTRF with cuSOLVER;
 *    TRSM, SYRK, GEMM, their beta = 0 first-update variants and the 2.5D ADD with
 *    cuBLAS), float64 and float32 in one function each (the tile's element size picks
 *    the precision). They run asynchronously on StarPU's per-worker CUDA stream
 *    (STARPU_CUDA_ASYNC) with cuBLAS/cuSOLVER handles and a POTRF workspace created
 *    once per CUDA worker. Compiled only when StarPU has CUDA (STARPU_USE_CUDA).
 * 2. History-based performance models, one per kernel and precision, shared by the CPU
 *    and CUDA variants of a codelet (symbols "starchol_<kernel>_<d|s>").
 * 3. A HeteroPrio configuration for the tiled Cholesky graph: one bucket per kernel
 *    type, an order of buckets per architecture (GPUs: GEMM, SYRK first; CPUs: POTRF,
 *    TRSM first), and per-bucket slow factors. The bucket of a task is taken from its
 *    codelet's name when it is pushed, so the task graph keeps its own priorities.
 *
 * Conventions: tiles are column-major, lower triangle; the kernels mirror the CPU
 * kernels of pyx/_starpu.pyx exactly (same BLAS calls, same operands).
 */
#ifndef STARCHOL_GPU_H
#define STARCHOL_GPU_H

#include <stdint.h>
#include <starpu.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kernel kinds: index of the kernel tables (names in starchol_kernel_name) */
enum starchol_kernel {
    STARCHOL_POTRF = 0,
    STARCHOL_TRSM,
    STARCHOL_SYRK,
    STARCHOL_GEMM,
    STARCHOL_SYRK0,
    STARCHOL_GEMM0,
    STARCHOL_ADD,
    STARCHOL_TRIL,
    STARCHOL_NKERNELS
};

const char *starchol_kernel_name(int kernel);

/* 1 when this module was compiled with CUDA kernels */
int starchol_cuda_built(void);

/* CUDA devices the CUDA runtime sees (0 without CUDA, or on error) */
int starchol_cuda_device_count(void);

/* the CUDA function of a kernel (NULL when none: no CUDA, or a CPU-only kernel) */
starpu_cuda_func_t starchol_cuda_func(int kernel);

/* Create the cuBLAS/cuSOLVER handles, device info word and a POTRF workspace for
 * tiles up to nb x nb on every CUDA worker (StarPU must be started). Returns 0, or a
 * negative value when a worker failed (its message is on stderr). */
int starchol_cuda_setup(int nb);
/* Destroy what starchol_cuda_setup created (before StarPU shuts down). Idempotent. */
void starchol_cuda_teardown(void);

/* The history-based performance model of a kernel in one precision ('d' or 's'). */
struct starpu_perfmodel *starchol_perfmodel(int kernel, char precision);

/* --- HeteroPrio ------------------------------------------------------------------- */
#define STARCHOL_HP_MAX_BUCKETS 16
#define STARCHOL_HP_MAX_NAMES 64

/* Reset the configuration: no names, no orders. */
void starchol_hp_reset(void);
/* Tasks of codelets called `name` go to `bucket`. */
int starchol_hp_name(const char *name, int bucket);
/* The order in which CPU (arch 0) or CUDA (arch 1) workers visit buckets. */
int starchol_hp_order(int arch, int n, const int *buckets);
/* For `bucket`, the faster arch (0 CPU, 1 CUDA, -1 none) and the slow factor of the
 * other one (its time / the faster arch's time). */
int starchol_hp_factor(int bucket, int faster, float slow);
/* Buckets for tasks of codelets not named: runnable on CPU and CUDA / CPU only / CUDA only */
int starchol_hp_fallback(int both, int cpu_only, int cuda_only);
/* A copy of StarPU's heteroprio policy whose push puts each task in its bucket, and
 * the init callback that installs the configuration above (NULL if StarPU has no
 * heteroprio). Give both to starpu_conf (sched_policy, sched_policy_init). */
struct starpu_sched_policy *starchol_hp_policy(void);
void starchol_hp_init(unsigned sched_ctx_id);
/* tasks pushed so far into each bucket (for tests and reports) */
unsigned long starchol_hp_pushed(int bucket);

#ifdef __cplusplus
}
#endif
#endif
