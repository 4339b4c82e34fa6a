/* pool.c - parallel code generation of one program: a job per distinct kernel (loop IR ->
 * LLVM IR -> optimised -> object code, each in its own LLVM context) on IC_COMPILE_THREADS
 * threads taking jobs in order, GEMM kernels first. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "pipeline-impl.h"

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* One job: loop IR of kernel -> LLVM IR -> optimised (ic_llvm_module_optimize) -> object code
 * (+ dumps). */
static ic_status build_job(ic__build *B, int j, const ic_codegen_target *t, double cpu[3])
{
    ic_ctx *c = B->c;
    int k = B->kernel[j];
    ic_kernel kern = *ic_program_kernel(B->prog, k);
    ic_llvm_module *m = NULL;
    double t0 = thread_cpu_ms();
    ic_status s = ic_llvmgen_kernels(c, 1, &kern, B->nbufs, B->bufs, t, &B->params[k], &m);
    double t1 = thread_cpu_ms();
    if (!s)
        s = ic_llvm_module_optimize(m);
    double t2 = thread_cpu_ms();
    if (!s && !(B->sym[j] = ic__strdup(c, ic_llvm_module_kernel_symbol(m, 0))))
        s = ic__error(c, IC_ENOMEM, "compile: out of memory");
    if (!s && B->want_ir)
        B->ir[j] = ic_llvm_module_ir_string(m);
    if (!s && B->want_as)
        B->as[j] = ic_llvm_module_asm_string(m);
    double t3 = thread_cpu_ms();
    if (!s && B->want_obj)
        s = ic__jit_emit_object(c, m, &B->obj[j]);
    cpu[0] += t1 - t0, cpu[1] += t2 - t1, cpu[2] += thread_cpu_ms() - t3;
    ic_llvm_module_destroy(m);
    return s;
}

static void *build_worker(void *arg)
{
    ic__build *B = arg;
    double cpu[3] = { 0, 0, 0 };
    /* a target (and its target machine) per thread: LLVM's target machines cache per-function
     * subtargets without locks */
    ic_codegen_target *t = NULL;
    ic_status s = ic_codegen_target_create(B->c, &t);
    for (;;) {
        pthread_mutex_lock(&B->lock);
        if (s && !B->status)
            B->status = s;
        int j = B->status ? B->njobs : B->next++;
        pthread_mutex_unlock(&B->lock);
        if (j >= B->njobs)
            break;
        s = build_job(B, j, t, cpu);
    }
    ic_codegen_target_destroy(t);
    pthread_mutex_lock(&B->lock);
    B->cpu_gen += cpu[0], B->cpu_opt += cpu[1], B->cpu_obj += cpu[2];
    pthread_mutex_unlock(&B->lock);
    return NULL;
}

/* Threads for code generation: IC_COMPILE_THREADS, else the cores online; at most one per job. */
static int build_threads(const ic_ctx *c, int njobs)
{
    long n = c->sw.compile_threads > 0 ? c->sw.compile_threads : sysconf(_SC_NPROCESSORS_ONLN);
    n = n < 1 ? 1 : n > 64 ? 64 : n;
    return (int)(n < njobs ? n : njobs);
}

/* Runs the jobs on build_threads() threads, the calling one included. */
ic_status ic__build_run(ic__build *B)
{
    int n = build_threads(B->c, B->njobs);
    pthread_t tids[64];
    int started = 0;
    for (int i = 1; i < n; i++)
        if (pthread_create(&tids[started], NULL, build_worker, B) == 0)
            started++;
    build_worker(B); /* even if no thread could start, every job gets done here */
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    B->nthreads = started + 1;
    return B->status;
}

void ic__build_free(ic__build *B)
{
    for (int j = 0; j < B->njobs; j++) {
        if (B->obj)
            ic__jit_object_free(B->c, B->obj[j]);
        if (B->sym)
            ic__free(B->c, B->sym[j]);
        if (B->ir)
            free(B->ir[j]);
        if (B->as)
            free(B->as[j]);
    }
    ic__free(B->c, B->obj);
    ic__free(B->c, B->sym);
    ic__free(B->c, B->ir);
    ic__free(B->c, B->as);
    ic__free(B->c, B->kernel);
    ic__free(B->c, B->job_of);
    ic__free(B->c, B->bufs);
    pthread_mutex_destroy(&B->lock);
}

char *ic__build_text(const ic__build *B, char **text)
{
    const ic_program *p = B->prog;
    size_t n = 1;
    for (int j = 0; j < B->njobs; j++)
        n += text[j] ? strlen(text[j]) : 0;
    for (int k = 0; k < B->nkernels; k++) {
        const char *name = ic_program_kernel(p, k)->name;
        n += 2 * (name ? strlen(name) : 1) + 128;
    }
    char *out = malloc(n), *q = out, *end = out + n;
    if (!out)
        return NULL;
    *q = 0;
    for (int k = 0; k < B->nkernels; k++) {
        int code = B->code[k];
        const char *name = ic_program_kernel(p, k)->name, *orig = ic_program_kernel(p, code)->name;
        if (code == k)
            snprintf(q, (size_t)(end - q), "; ---- kernel %d '%s' ----\n%s", k, name ? name : "?",
                     text[B->job_of[k]] ? text[B->job_of[k]] : "");
        else
            snprintf(q, (size_t)(end - q), "; ---- kernel %d '%s': the code of kernel %d '%s', on its own buffers ----\n",
                     k, name ? name : "?", code, orig ? orig : "?");
        q += strlen(q);
    }
    return out;
}

static bool alloc_jobs(ic_ctx *c, ic__build *B)
{
    B->bufs = ic__calloc(c, (size_t)B->nbufs + 1, sizeof *B->bufs);
    B->kernel = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->kernel);
    B->obj = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->obj);
    B->sym = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->sym);
    B->ir = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->ir);
    B->as = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->as);
    B->job_of = ic__calloc(c, (size_t)B->nkernels + 1, sizeof *B->job_of);
    return B->bufs && B->kernel && B->obj && B->sym && B->ir && B->as && B->job_of;
}

ic_status ic__build_init(ic_ctx *c, const ic_program *prog, const int *code, const ic_codegen_params *params,
                         ic__build *B)
{
    memset(B, 0, sizeof *B);
    pthread_mutex_init(&B->lock, NULL);
    B->c = c, B->prog = prog, B->code = code, B->params = params;
    B->nbufs = ic_program_num_buffers(prog);
    B->nkernels = ic_program_num_kernels(prog);
    for (int k = 0; k < B->nkernels; k++)
        B->njobs += code[k] == k;
    if (!alloc_jobs(c, B))
        return ic__error(c, IC_ENOMEM, "compile: out of memory");
    for (int i = 0; i < B->nbufs; i++)
        B->bufs[i] = *ic_program_buffer(prog, i);
    /* GEMM kernels first: they take 3-5 times as long to compile as loop nests, and the
     * threads take jobs in order, so the small jobs fill the gaps at the end */
    for (int pass = 0, j = 0; pass < 2; pass++)
        for (int k = 0; k < B->nkernels; k++)
            if (code[k] == k && ic_kernel_is_gemm(ic_program_kernel(prog, k), B->bufs) == (pass == 0))
                B->job_of[k] = j, B->kernel[j++] = k;
    return IC_OK;
}
