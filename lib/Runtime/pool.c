/* pool.c - parallel code generation of one program: a job per distinct kernel (loop IR ->
 * LLVM IR -> optimised -> object code, each in its own LLVM context) on the compile threads
 * (ic__run_jobs: IC_COMPILE_THREADS, jobs taken in order), GEMM kernels first. A kernel whose
 * object code a saved model (the store) or the persistent cache holds under its key is not
 * compiled at all: a warm start does no LLVM work. */
#define _GNU_SOURCE /* asprintf */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cache-impl.h"
#include "key-impl.h"
#include "pipeline-impl.h"

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Whether job j's kernel packs weights into its code (a frozen GEMM). */
static bool packs_weights(const ic__build *B, int j)
{
    int k = B->kernel[j];
    return B->params[k].gemm.prepack == 1 && ic_kernel_is_gemm(ic_program_kernel(B->prog, k), B->bufs);
}

/* The key of job j's kernel: its loop IR and buffers (key.c), the weights it packs into its
 * code (frozen GEMMs only: hashing every weight would cost more than it saves), the target and
 * every codegen parameter. */
static ic_status job_key(ic__build *B, int j)
{
    int k = B->kernel[j];
    const ic_codegen_params *p = &B->params[k];
    char params[1024], *extra = NULL;
    ic__cg_params_format(p, params, sizeof params);
    bool frozen = packs_weights(B, j);
    if (asprintf(&extra, "%s\nparams %s", B->target_text ? B->target_text : "", params) < 0)
        extra = NULL;
    B->key[j] = extra ? ic__kernel_key(B->prog, k, frozen, extra) : NULL;
    free(extra);
    return B->key[j] ? IC_OK : ic__error(B->c, IC_ENOMEM, "compile: out of memory");
}

/* Job j's object from the store or the persistent cache; false on a miss (an unreadable
 * entry is one: it is compiled again and rewritten). */
static bool find_object(ic__build *B, int j)
{
    const void *data = NULL;
    void *owned = NULL;
    size_t n = 0;
    bool in_store = B->store && ic__store_find(B->store, B->key[j], &data, &n);
    if (!in_store && !(B->use_cache && ic__cache_get(B->c, IC__CACHE_CPU_OBJ, B->key[j], &owned, &n)))
        return false;
    if (!ic__jit_object_unpack(B->c, in_store ? data : owned, n, !in_store, &B->obj[j], &B->sym[j])) {
        free(owned);
        return false;
    }
    B->blob[j] = in_store ? (void *)data : owned;
    B->nblob[j] = n;
    B->blob_owned[j] = !in_store;
    return true;
}

/* After a miss: job j's object as bytes, kept and put in the cache. */
static ic_status keep_object(ic__build *B, int j)
{
    ic_status s = ic__jit_object_pack(B->c, B->obj[j], B->sym[j], &B->blob[j], &B->nblob[j]);
    B->blob_owned[j] = true;
    if (!s && B->use_cache)
        ic__cache_put(B->c, IC__CACHE_CPU_OBJ, B->key[j], B->blob[j], B->nblob[j]);
    return s;
}

/* Job j: loop IR of its kernel -> LLVM IR -> optimised (ic_llvm_module_optimize) -> object
 * code (+ dumps), with the target of the thread that runs it: LLVM's target machines cache
 * per-function subtargets without locks, so threads do not share one. */
static ic_status compile_job(ic__build *B, int j, int thread)
{
    ic_ctx *c = B->c;
    ic_status s = B->target[thread] ? IC_OK : ic_codegen_target_create(c, &B->target[thread]);
    if (s)
        return s;
    int k = B->kernel[j];
    ic_kernel kern = *ic_program_kernel(B->prog, k);
    ic_llvm_module *m = NULL;
    double t0 = thread_cpu_ms();
    s = ic_llvmgen_kernels(c, 1, &kern, B->nbufs, B->bufs, B->target[thread], &B->params[k], &m);
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
    if (!s && B->want_obj)
        s = keep_object(B, j);
    double *cpu = B->cpu[thread];
    cpu[0] += t1 - t0, cpu[1] += t2 - t1, cpu[2] += thread_cpu_ms() - t3;
    ic_llvm_module_destroy(m);
    return s;
}

static ic_status compile_todo(void *arg, int i, int thread)
{
    ic__build *B = arg;
    return compile_job(B, B->todo[i], thread);
}

static ic_status key_job(void *arg, int j, int thread)
{
    return job_key(arg, j);
}

/* Every job's key: on the compile threads when some hash frozen weights (megabytes each), else
 * here. */
static ic_status make_keys(ic__build *B)
{
    bool heavy = false;
    for (int j = 0; j < B->njobs && !heavy; j++)
        heavy = packs_weights(B, j);
    int nthreads;
    if (heavy)
        return ic__run_jobs(B->c, B->njobs, key_job, B, &nthreads);
    for (int j = 0; j < B->njobs; j++) {
        ic_status s = job_key(B, j);
        if (s)
            return s;
    }
    return IC_OK;
}

/* The jobs' objects from the store or the cache (object code wanted, no IR or assembly text):
 * in the calling thread, as a lookup costs a fraction of a thread's start; the others go to
 * B->todo. */
static ic_status look_up(ic__build *B)
{
    bool look = B->want_obj && (B->store || B->use_cache) && !B->want_ir && !B->want_as;
    ic_status s = B->want_obj ? make_keys(B) : IC_OK;
    if (s)
        return s;
    for (int j = 0; j < B->njobs; j++) {
        if (look && find_object(B, j)) {
            B->hits++;
            continue;
        }
        B->misses += look;
        if (B->store_only && look) /* (a dump of LLVM text compiles the saved kernels again) */
            return ic__error(B->c, IC_EFORMAT, "kernel '%s' has no object code in the saved model for this "
                             "graph and these options (were the graph or its weights changed since?)",
                             ic_program_kernel(B->prog, B->kernel[j])->name);
        B->todo[B->ntodo++] = j;
    }
    return IC_OK;
}

/* Looks the jobs up, then compiles the rest on the compile threads (ic__run_jobs), the calling
 * one included. */
ic_status ic__build_run(ic__build *B)
{
    ic_status s = look_up(B);
    if (s || B->ntodo == 0)
        return s;
    int n = ic__compile_threads(B->c, B->ntodo);
    B->target = ic__calloc(B->c, (size_t)n, sizeof *B->target);
    B->cpu = ic__calloc(B->c, (size_t)n, sizeof *B->cpu);
    if (!B->target || !B->cpu)
        return ic__error(B->c, IC_ENOMEM, "compile: out of memory");
    s = ic__run_jobs(B->c, B->ntodo, compile_todo, B, &B->nthreads);
    for (int t = 0; t < n; t++) {
        B->cpu_gen += B->cpu[t][0], B->cpu_opt += B->cpu[t][1], B->cpu_obj += B->cpu[t][2];
        ic_codegen_target_destroy(B->target[t]);
        B->target[t] = NULL;
    }
    return s;
}

void ic__build_free(ic__build *B)
{
    for (int j = 0; j < B->njobs; j++) {
        if (B->obj)
            ic__jit_object_free(B->c, B->obj[j]);
        if (B->key)
            free(B->key[j]);
        if (B->blob && B->blob_owned[j])
            free(B->blob[j]);
        if (B->sym)
            ic__free(B->c, B->sym[j]);
        if (B->ir)
            free(B->ir[j]);
        if (B->as)
            free(B->as[j]);
    }
    ic__free(B->c, B->obj);
    ic__free(B->c, B->key);
    ic__free(B->c, B->blob);
    ic__free(B->c, B->nblob);
    ic__free(B->c, B->blob_owned);
    ic__free(B->c, B->todo);
    ic__free(B->c, B->sym);
    ic__free(B->c, B->ir);
    ic__free(B->c, B->as);
    ic__free(B->c, B->kernel);
    ic__free(B->c, B->job_of);
    ic__free(B->c, B->bufs);
    ic__free(B->c, B->target);
    ic__free(B->c, B->cpu);
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
    B->key = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->key);
    B->blob = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->blob);
    B->nblob = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->nblob);
    B->blob_owned = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->blob_owned);
    B->todo = ic__calloc(c, (size_t)B->njobs + 1, sizeof *B->todo);
    return B->bufs && B->kernel && B->obj && B->sym && B->ir && B->as && B->job_of && B->key && B->blob &&
           B->nblob && B->blob_owned && B->todo;
}

ic_status ic__build_init(ic_ctx *c, const ic_program *prog, const int *code, const ic_codegen_params *params,
                         ic__build *B)
{
    memset(B, 0, sizeof *B);
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
