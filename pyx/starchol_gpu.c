/* starchol's GPU and scheduler layer: see starchol_gpu.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>
#include <starpu_heteroprio.h>

#include "starchol_gpu.h"

#if defined(STARPU_USE_CUDA) && !defined(STARCHOL_NO_CUDA)
#define STARCHOL_WITH_CUDA 1
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <cusolverDn.h>
#include <starpu_cuda.h>
#endif

/* heteroprio's architecture indices (renamed in StarPU 1.4): pyx/starpu_compat.h */
#include "starpu_compat.h"
#define STARCHOL_HP_CPU STARCHOL_HETEROPRIO_CPU
#define STARCHOL_HP_CUDA STARCHOL_HETEROPRIO_CUDA

static const char *kernel_names[STARCHOL_NKERNELS] = {
    "potrf", "trsm", "syrk", "gemm", "syrk0", "gemm0", "add", "tril"
};

const char *starchol_kernel_name(int kernel)
{
    if (kernel < 0 || kernel >= STARCHOL_NKERNELS)
        return NULL;
    return kernel_names[kernel];
}

/* ------------------------------------------------------------------------------------
 * performance models: one per kernel and precision, shared by the CPU and CUDA variants
 * ------------------------------------------------------------------------------------ */
static struct starpu_perfmodel models[2][STARCHOL_NKERNELS];
static char model_symbols[2][STARCHOL_NKERNELS][32];

struct starpu_perfmodel *starchol_perfmodel(int kernel, char precision)
{
    int p = precision == 's' ? 1 : 0;
    if (kernel < 0 || kernel >= STARCHOL_NKERNELS || (precision != 'd' && precision != 's'))
        return NULL;
    if (models[p][kernel].symbol == NULL) {
        snprintf(model_symbols[p][kernel], sizeof(model_symbols[p][kernel]), "starchol_%s_%c",
                 kernel_names[kernel], precision);
        models[p][kernel].type = STARPU_HISTORY_BASED;
        models[p][kernel].symbol = model_symbols[p][kernel];
    }
    return &models[p][kernel];
}

/* ------------------------------------------------------------------------------------
 * CUDA kernels
 * ------------------------------------------------------------------------------------ */
#ifdef STARCHOL_WITH_CUDA

struct worker_state {
    int ready;
    cublasHandle_t blas;
    cusolverDnHandle_t solver;
    void *work;          /* POTRF workspace (device) */
    size_t work_bytes;
    int *dev_info;       /* POTRF's info (device) */
    int *host_info;      /* its copy in pinned host memory */
    int status;          /* 0, or what setup failed on */
};

static struct worker_state workers[STARPU_NMAXWORKERS];

static const double d_one = 1.0, d_mone = -1.0, d_zero = 0.0;
static const float s_one = 1.0f, s_mone = -1.0f, s_zero = 0.0f;

static inline struct worker_state *me(void)
{
    struct worker_state *w = &workers[starpu_worker_get_id_check()];
    STARPU_ASSERT_MSG(w->ready, "starchol: CUDA worker without handles "
                      "(starchol_cuda_setup was not called)");
    return w;
}

#define CUBLAS_CHECK(call) do { cublasStatus_t st_ = (call); \
    if (STARPU_UNLIKELY(st_ != CUBLAS_STATUS_SUCCESS)) STARPU_CUBLAS_REPORT_ERROR(st_); } while (0)
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); \
    if (STARPU_UNLIKELY(e_ != cudaSuccess)) STARPU_CUDA_REPORT_ERROR(e_); } while (0)
#define CUSOLVER_CHECK(call) do { cusolverStatus_t st_ = (call); \
    if (STARPU_UNLIKELY(st_ != CUSOLVER_STATUS_SUCCESS)) \
        STARPU_ABORT_MSG("starchol: cuSOLVER error %d in %s (%s:%d)", (int)st_, __func__, \
                         __FILE__, __LINE__); } while (0)

/* make the worker's POTRF workspace at least `bytes` (rare: setup sizes it for NB) */
static void ensure_workspace(struct worker_state *w, size_t bytes, cudaStream_t stream)
{
    if (bytes <= w->work_bytes)
        return;
    CUDA_CHECK(cudaStreamSynchronize(stream));
    if (w->work)
        CUDA_CHECK(cudaFree(w->work));
    w->work = NULL;
    w->work_bytes = 0;
    CUDA_CHECK(cudaMalloc(&w->work, bytes));
    w->work_bytes = bytes;
}

/* POTRF's info travels device -> pinned word -> the task's int64 slot, in stream order,
 * so the task stays asynchronous and the slot is written before StarPU sees the task end */
struct info_copy {
    const int *src;
    int64_t *dst;
};

static void CUDART_CB copy_info(void *data)
{
    struct info_copy *c = (struct info_copy *)data;
    if (*c->src != 0)
        *c->dst = *c->src;
    free(c);
}

static void cuda_potrf(void *buffers[], void *arg)
{
    /* A[k][k] = chol(A[k][k]) (lower); a failure is stored in the task's slot */
    struct worker_state *w = me();
    cudaStream_t stream = starpu_cuda_get_local_stream();
    void *a = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
    int n = (int)STARPU_MATRIX_GET_NX(buffers[0]);
    int ld = (int)STARPU_MATRIX_GET_LD(buffers[0]);
    size_t es = STARPU_MATRIX_GET_ELEMSIZE(buffers[0]);
    int lwork = 0;
    if (es == sizeof(double)) {
        CUSOLVER_CHECK(cusolverDnDpotrf_bufferSize(w->solver, CUBLAS_FILL_MODE_LOWER, n,
                                                   (double *)a, ld, &lwork));
        ensure_workspace(w, (size_t)lwork * sizeof(double), stream);
        CUSOLVER_CHECK(cusolverDnDpotrf(w->solver, CUBLAS_FILL_MODE_LOWER, n, (double *)a, ld,
                                        (double *)w->work, lwork, w->dev_info));
    } else {
        CUSOLVER_CHECK(cusolverDnSpotrf_bufferSize(w->solver, CUBLAS_FILL_MODE_LOWER, n,
                                                   (float *)a, ld, &lwork));
        ensure_workspace(w, (size_t)lwork * sizeof(float), stream);
        CUSOLVER_CHECK(cusolverDnSpotrf(w->solver, CUBLAS_FILL_MODE_LOWER, n, (float *)a, ld,
                                        (float *)w->work, lwork, w->dev_info));
    }
    CUDA_CHECK(cudaMemcpyAsync(w->host_info, w->dev_info, sizeof(int), cudaMemcpyDeviceToHost,
                               stream));
    if (arg != NULL) {
        struct info_copy *c = (struct info_copy *)malloc(sizeof(*c));
        STARPU_ASSERT(c != NULL);
        c->src = w->host_info;
        c->dst = (int64_t *)arg;
        CUDA_CHECK(cudaLaunchHostFunc(stream, copy_info, c));
    }
}

static void cuda_trsm(void *buffers[], void *arg)
{
    /* A[m][k] = A[m][k] L[k][k]^-T */
    (void)arg;
    cublasHandle_t h = me()->blas;
    void *l = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
    int ldl = (int)STARPU_MATRIX_GET_LD(buffers[0]);
    void *a = (void *)STARPU_MATRIX_GET_PTR(buffers[1]);
    int m = (int)STARPU_MATRIX_GET_NX(buffers[1]);
    int n = (int)STARPU_MATRIX_GET_NY(buffers[1]);
    int lda = (int)STARPU_MATRIX_GET_LD(buffers[1]);
    if (STARPU_MATRIX_GET_ELEMSIZE(buffers[1]) == sizeof(double))
        CUBLAS_CHECK(cublasDtrsm(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T,
                                 CUBLAS_DIAG_NON_UNIT, m, n, &d_one, (const double *)l, ldl,
                                 (double *)a, lda));
    else
        CUBLAS_CHECK(cublasStrsm(h, CUBLAS_SIDE_RIGHT, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T,
                                 CUBLAS_DIAG_NON_UNIT, m, n, &s_one, (const float *)l, ldl,
                                 (float *)a, lda));
}

static void syrk_update(void *buffers[], int first)
{
    /* C[n][n] = beta C[n][n] - A[n][k] A[n][k]^T (lower); beta = 0 for a first update */
    cublasHandle_t h = me()->blas;
    void *a = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
    int k = (int)STARPU_MATRIX_GET_NY(buffers[0]);
    int lda = (int)STARPU_MATRIX_GET_LD(buffers[0]);
    void *c = (void *)STARPU_MATRIX_GET_PTR(buffers[1]);
    int n = (int)STARPU_MATRIX_GET_NX(buffers[1]);
    int ldc = (int)STARPU_MATRIX_GET_LD(buffers[1]);
    size_t es = STARPU_MATRIX_GET_ELEMSIZE(buffers[1]);
    if (first)  /* a fresh (W-mode) buffer: its upper triangle must read as zeros too */
        CUDA_CHECK(cudaMemset2DAsync(c, (size_t)ldc * es, 0, (size_t)n * es, (size_t)n,
                                     starpu_cuda_get_local_stream()));
    if (es == sizeof(double))
        CUBLAS_CHECK(cublasDsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, k, &d_mone,
                                 (const double *)a, lda, first ? &d_zero : &d_one,
                                 (double *)c, ldc));
    else
        CUBLAS_CHECK(cublasSsyrk(h, CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, n, k, &s_mone,
                                 (const float *)a, lda, first ? &s_zero : &s_one,
                                 (float *)c, ldc));
}

static void gemm_update(void *buffers[], int first)
{
    /* C[m][n] = beta C[m][n] - A[m][k] B[n][k]^T */
    cublasHandle_t h = me()->blas;
    void *a = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
    int m = (int)STARPU_MATRIX_GET_NX(buffers[0]);
    int k = (int)STARPU_MATRIX_GET_NY(buffers[0]);
    int lda = (int)STARPU_MATRIX_GET_LD(buffers[0]);
    void *b = (void *)STARPU_MATRIX_GET_PTR(buffers[1]);
    int n = (int)STARPU_MATRIX_GET_NX(buffers[1]);
    int ldb = (int)STARPU_MATRIX_GET_LD(buffers[1]);
    void *c = (void *)STARPU_MATRIX_GET_PTR(buffers[2]);
    int ldc = (int)STARPU_MATRIX_GET_LD(buffers[2]);
    if (STARPU_MATRIX_GET_ELEMSIZE(buffers[2]) == sizeof(double))
        CUBLAS_CHECK(cublasDgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &d_mone,
                                 (const double *)a, lda, (const double *)b, ldb,
                                 first ? &d_zero : &d_one, (double *)c, ldc));
    else
        CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &s_mone,
                                 (const float *)a, lda, (const float *)b, ldb,
                                 first ? &s_zero : &s_one, (float *)c, ldc));
}

static void cuda_syrk(void *buffers[], void *arg) { (void)arg; syrk_update(buffers, 0); }
static void cuda_syrk0(void *buffers[], void *arg) { (void)arg; syrk_update(buffers, 1); }
static void cuda_gemm(void *buffers[], void *arg) { (void)arg; gemm_update(buffers, 0); }
static void cuda_gemm0(void *buffers[], void *arg) { (void)arg; gemm_update(buffers, 1); }

static void cuda_add(void *buffers[], void *arg)
{
    /* B[i][j] += P[i][j] (cuBLAS geam in place: C = A, ldc = lda, no transpose) */
    (void)arg;
    cublasHandle_t h = me()->blas;
    void *p = (void *)STARPU_MATRIX_GET_PTR(buffers[0]);
    int ldp = (int)STARPU_MATRIX_GET_LD(buffers[0]);
    void *b = (void *)STARPU_MATRIX_GET_PTR(buffers[1]);
    int m = (int)STARPU_MATRIX_GET_NX(buffers[1]);
    int n = (int)STARPU_MATRIX_GET_NY(buffers[1]);
    int ldb = (int)STARPU_MATRIX_GET_LD(buffers[1]);
    if (STARPU_MATRIX_GET_ELEMSIZE(buffers[1]) == sizeof(double))
        CUBLAS_CHECK(cublasDgeam(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, &d_one, (const double *)b,
                                 ldb, &d_one, (const double *)p, ldp, (double *)b, ldb));
    else
        CUBLAS_CHECK(cublasSgeam(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, &s_one, (const float *)b,
                                 ldb, &s_one, (const float *)p, ldp, (float *)b, ldb));
}

static starpu_cuda_func_t cuda_funcs[STARCHOL_NKERNELS] = {
    cuda_potrf, cuda_trsm, cuda_syrk, cuda_gemm, cuda_syrk0, cuda_gemm0, cuda_add,
    NULL /* tril: the residual check's CPU-only step */
};

static void setup_worker(void *arg)
{
    int nb = *(int *)arg;
    int id = starpu_worker_get_id_check();
    struct worker_state *w = &workers[id];
    cudaStream_t stream = starpu_cuda_get_local_stream();
    int ld = nb > 0 ? nb : 1, dl = 0, sl = 0;
    memset(w, 0, sizeof(*w));
    if (cublasCreate(&w->blas) != CUBLAS_STATUS_SUCCESS) { w->status = 1; return; }
    if (cublasSetStream(w->blas, stream) != CUBLAS_STATUS_SUCCESS) { w->status = 2; return; }
    if (cusolverDnCreate(&w->solver) != CUSOLVER_STATUS_SUCCESS) { w->status = 3; return; }
    if (cusolverDnSetStream(w->solver, stream) != CUSOLVER_STATUS_SUCCESS) { w->status = 4; return; }
    if (cudaMalloc((void **)&w->dev_info, sizeof(int)) != cudaSuccess) { w->status = 5; return; }
    if (cudaMallocHost((void **)&w->host_info, sizeof(int)) != cudaSuccess) { w->status = 6; return; }
    *w->host_info = 0;
    if (nb > 0) {  /* POTRF workspace for NB x NB tiles, both precisions */
        if (cusolverDnDpotrf_bufferSize(w->solver, CUBLAS_FILL_MODE_LOWER, nb, NULL, ld, &dl)
                != CUSOLVER_STATUS_SUCCESS ||
            cusolverDnSpotrf_bufferSize(w->solver, CUBLAS_FILL_MODE_LOWER, nb, NULL, ld, &sl)
                != CUSOLVER_STATUS_SUCCESS) { w->status = 7; return; }
        size_t bytes = (size_t)dl * sizeof(double);
        if ((size_t)sl * sizeof(float) > bytes)
            bytes = (size_t)sl * sizeof(float);
        if (bytes > 0 && cudaMalloc(&w->work, bytes) != cudaSuccess) { w->status = 8; return; }
        w->work_bytes = bytes;
    }
    w->ready = 1;
}

static void teardown_worker(void *arg)
{
    (void)arg;
    struct worker_state *w = &workers[starpu_worker_get_id_check()];
    cudaStreamSynchronize(starpu_cuda_get_local_stream());
    if (w->solver) cusolverDnDestroy(w->solver);
    if (w->blas) cublasDestroy(w->blas);
    if (w->work) cudaFree(w->work);
    if (w->dev_info) cudaFree(w->dev_info);
    if (w->host_info) cudaFreeHost(w->host_info);
    memset(w, 0, sizeof(*w));
}

static int setup_done = 0;

int starchol_cuda_setup(int nb)
{
    static const char *what[] = {"", "cublasCreate", "cublasSetStream", "cusolverDnCreate",
                                 "cusolverDnSetStream", "cudaMalloc(info)",
                                 "cudaMallocHost(info)", "cusolverDn?potrf_bufferSize",
                                 "cudaMalloc(workspace)"};
    unsigned i, n = starpu_worker_get_count();
    int rc = 0;
    if (setup_done)
        return 0;
    if (starpu_cuda_worker_get_count() == 0)
        return 0;
    starpu_execute_on_each_worker(setup_worker, &nb, STARPU_CUDA);
    for (i = 0; i < n; i++) {
        if (starpu_worker_get_type((int)i) != STARPU_CUDA_WORKER)
            continue;
        if (!workers[i].ready) {
            int s = workers[i].status;
            fprintf(stderr, "starchol: CUDA worker %u: %s failed\n", i,
                    s > 0 && s < 9 ? what[s] : "setup");
            rc = -1;
        }
    }
    setup_done = 1;
    return rc;
}

void starchol_cuda_teardown(void)
{
    if (!setup_done)
        return;
    if (starpu_cuda_worker_get_count() > 0)
        starpu_execute_on_each_worker(teardown_worker, NULL, STARPU_CUDA);
    setup_done = 0;
}

int starchol_cuda_built(void) { return 1; }

int starchol_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess)
        return 0;
    return n;
}

starpu_cuda_func_t starchol_cuda_func(int kernel)
{
    if (kernel < 0 || kernel >= STARCHOL_NKERNELS)
        return NULL;
    return cuda_funcs[kernel];
}

#else  /* no CUDA */

int starchol_cuda_built(void) { return 0; }
int starchol_cuda_device_count(void) { return 0; }
starpu_cuda_func_t starchol_cuda_func(int kernel) { (void)kernel; return NULL; }
int starchol_cuda_setup(int nb) { (void)nb; return 0; }
void starchol_cuda_teardown(void) { }

#endif

/* ------------------------------------------------------------------------------------
 * HeteroPrio
 * ------------------------------------------------------------------------------------ */
struct hp_name {
    char name[32];
    int bucket;
};

static struct hp_name hp_names[STARCHOL_HP_MAX_NAMES];
static int hp_nnames = 0;
static int hp_orders[2][STARCHOL_HP_MAX_BUCKETS];
static int hp_norders[2] = {0, 0};
static int hp_faster[STARCHOL_HP_MAX_BUCKETS];
static float hp_slow[STARCHOL_HP_MAX_BUCKETS];
static int hp_fb_both = 0, hp_fb_cpu = 0, hp_fb_cuda = 0;
static unsigned hp_archs[STARCHOL_HP_MAX_BUCKETS];   /* STARPU_CPU | STARPU_CUDA per bucket */
static unsigned long hp_count[STARCHOL_HP_MAX_BUCKETS];
static struct starpu_sched_policy hp_policy;
static int (*hp_push_orig)(struct starpu_task *) = NULL;

void starchol_hp_reset(void)
{
    int b;
    hp_nnames = 0;
    hp_norders[0] = hp_norders[1] = 0;
    for (b = 0; b < STARCHOL_HP_MAX_BUCKETS; b++) {
        hp_faster[b] = -1;
        hp_slow[b] = 1.0f;
        hp_archs[b] = 0;
        hp_count[b] = 0;
    }
    hp_fb_both = hp_fb_cpu = hp_fb_cuda = 0;
}

int starchol_hp_name(const char *name, int bucket)
{
    if (name == NULL || strlen(name) >= sizeof(hp_names[0].name) ||
        bucket < 0 || bucket >= STARCHOL_HP_MAX_BUCKETS || hp_nnames >= STARCHOL_HP_MAX_NAMES)
        return -22;
    strcpy(hp_names[hp_nnames].name, name);
    hp_names[hp_nnames].bucket = bucket;
    hp_nnames++;
    return 0;
}

int starchol_hp_order(int arch, int n, const int *buckets)
{
    int i;
    if (arch < 0 || arch > 1 || n < 0 || n > STARCHOL_HP_MAX_BUCKETS)
        return -22;
    for (i = 0; i < n; i++) {
        if (buckets[i] < 0 || buckets[i] >= STARCHOL_HP_MAX_BUCKETS)
            return -22;
        hp_orders[arch][i] = buckets[i];
    }
    hp_norders[arch] = n;
    return 0;
}

int starchol_hp_factor(int bucket, int faster, float slow)
{
    if (bucket < 0 || bucket >= STARCHOL_HP_MAX_BUCKETS || faster < -1 || faster > 1 ||
        !(slow >= 1.0f))
        return -22;
    hp_faster[bucket] = faster;
    hp_slow[bucket] = slow;
    return 0;
}

int starchol_hp_fallback(int both, int cpu_only, int cuda_only)
{
    if (both < 0 || both >= STARCHOL_HP_MAX_BUCKETS || cpu_only < 0 ||
        cpu_only >= STARCHOL_HP_MAX_BUCKETS || cuda_only < 0 || cuda_only >= STARCHOL_HP_MAX_BUCKETS)
        return -22;
    hp_fb_both = both;
    hp_fb_cpu = cpu_only;
    hp_fb_cuda = cuda_only;
    return 0;
}

void starchol_hp_init(unsigned ctx)
{
    int i, b;
    int ncuda = 0;
#ifdef STARPU_USE_CUDA
    ncuda = (int)starpu_cuda_worker_get_count();
#endif
    for (b = 0; b < STARCHOL_HP_MAX_BUCKETS; b++)
        hp_archs[b] = 0;
    if (starpu_cpu_worker_get_count() > 0) {
        starpu_heteroprio_set_nb_prios(ctx, STARCHOL_HP_CPU, (unsigned)hp_norders[0]);
        for (i = 0; i < hp_norders[0]; i++) {
            starpu_heteroprio_set_mapping(ctx, STARCHOL_HP_CPU, (unsigned)i,
                                          (unsigned)hp_orders[0][i]);
            hp_archs[hp_orders[0][i]] |= STARPU_CPU;
        }
    }
#ifdef STARPU_USE_CUDA
    if (ncuda > 0) {
        starpu_heteroprio_set_nb_prios(ctx, STARCHOL_HP_CUDA, (unsigned)hp_norders[1]);
        for (i = 0; i < hp_norders[1]; i++) {
            starpu_heteroprio_set_mapping(ctx, STARCHOL_HP_CUDA, (unsigned)i,
                                          (unsigned)hp_orders[1][i]);
            hp_archs[hp_orders[1][i]] |= STARPU_CUDA;
        }
    }
    for (b = 0; b < STARCHOL_HP_MAX_BUCKETS; b++) {
        if (hp_faster[b] < 0 || hp_archs[b] != (STARPU_CPU | STARPU_CUDA))
            continue;
        starpu_heteroprio_set_faster_arch(ctx, hp_faster[b] == 1 ? STARCHOL_HP_CUDA : STARCHOL_HP_CPU,
                                          (unsigned)b);
        starpu_heteroprio_set_arch_slow_factor(ctx, hp_faster[b] == 1 ? STARCHOL_HP_CPU : STARCHOL_HP_CUDA,
                                               (unsigned)b, hp_slow[b]);
    }
#endif
    (void)ncuda;
}

static int hp_bucket_of(struct starpu_task *task)
{
    struct starpu_codelet *cl = task->cl;
    unsigned where = cl ? cl->where : STARPU_CPU;
    int i, b = -1;
    if (task->where != -1)
        where &= (unsigned)task->where;
    if (cl && cl->name) {
        for (i = 0; i < hp_nnames; i++)
            if (strcmp(hp_names[i].name, cl->name) == 0) {
                b = hp_names[i].bucket;
                break;
            }
    }
    /* a bucket must only be visited by archs that can run the task */
    if (b >= 0 && hp_archs[b] != 0 && (hp_archs[b] & ~where) == 0)
        return b;
    if ((where & STARPU_CPU) && (where & STARPU_CUDA))
        return hp_fb_both;
    if (where & STARPU_CUDA)
        return hp_fb_cuda;
    return hp_fb_cpu;
}

static int hp_push(struct starpu_task *task)
{
    int b = hp_bucket_of(task);
    task->priority = b;
    __atomic_fetch_add(&hp_count[b], 1, __ATOMIC_RELAXED);
    return hp_push_orig(task);
}

struct starpu_sched_policy *starchol_hp_policy(void)
{
    struct starpu_sched_policy **p = starpu_sched_get_predefined_policies();
    for (; p && *p; p++) {
        if ((*p)->policy_name && strcmp((*p)->policy_name, "heteroprio") == 0) {
            hp_policy = **p;
            hp_push_orig = hp_policy.push_task;
            hp_policy.push_task = hp_push;
            return &hp_policy;
        }
    }
    return NULL;
}

unsigned long starchol_hp_pushed(int bucket)
{
    if (bucket < 0 || bucket >= STARCHOL_HP_MAX_BUCKETS)
        return 0;
    return __atomic_load_n(&hp_count[bucket], __ATOMIC_RELAXED);
}
