/* module.c - the PTX layer's public API: one LLVM module per kernel (its own LLVM context,
 * made on the compile threads, ic__run_jobs), verified, optimised with default<O3> for the
 * NVPTX target machine (sm_XX, +ptxNN) and printed as PTX with
 * LLVMTargetMachineEmitToMemoryBuffer. A module per kernel rather than one per program: the
 * modules are made, and the driver JITs them, in parallel, and the text does not depend on
 * the number of threads. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include "ic/fuse.h"
#include "llvmgen-impl.h" /* ic__program_arrays */
#include "pgemm-impl.h"

static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;

static void nvptx_init_once(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

void ic__ptx_llvm_init(void)
{
    pthread_once(&nvptx_once, nvptx_init_once);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double thread_cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void ic_ptx_options_init(ic_ptx_options *o)
{
    memset(o, 0, sizeof *o);
}

void ic_ptx_kernel_name(const char *loop_name, char *buf, size_t n)
{
    if (!n)
        return;
    const char *rest = loop_name ? loop_name : "kernel";
    if (!strncmp(rest, "cpu_", 4))
        rest += 4;
    snprintf(buf, n, "gpu_%s", rest);
    for (char *p = buf; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
            *p = '_';
}

/* The sm LLVM 19 can target for a device of compute capability sm, and its PTX version. */
static void target_for(int sm, int *llvm_sm, int *ptx)
{
    static const int known[] = { 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90 };
    int pick = 30;
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (known[i] <= sm)
            pick = known[i];
    *llvm_sm = pick;
    *ptx = pick >= 90 ? 80 : pick >= 89 ? 78 : pick >= 87 ? 74 : pick >= 86 ? 71 : pick >= 80 ? 70
         : pick >= 75 ? 63 : pick >= 72 ? 61 : 60;
}

void ic__pg_init_types(ic__pg *G)
{
    LLVMContextRef x = G->ctx;
    G->t_void = LLVMVoidTypeInContext(x);
    G->t_i1 = LLVMInt1TypeInContext(x);
    G->t_i8 = LLVMInt8TypeInContext(x);
    G->t_i16 = LLVMInt16TypeInContext(x);
    G->t_i32 = LLVMInt32TypeInContext(x);
    G->t_i64 = LLVMInt64TypeInContext(x);
    G->t_f16 = LLVMHalfTypeInContext(x);
    G->t_bf16 = LLVMBFloatTypeInContext(x);
    G->t_f32 = LLVMFloatTypeInContext(x);
    G->t_f64 = LLVMDoubleTypeInContext(x);
    G->t_gptr = LLVMPointerTypeInContext(x, G->emu ? 0 : 1);
}

static char *take_message(ic_ctx *c, char *msg)
{
    char *r = ic__strdup(c, msg ? msg : "");
    LLVMDisposeMessage(msg);
    return r;
}

ic_ptx_module *ic__ptx_module_new(ic_ctx *c, int nk)
{
    ic_ptx_module *m = ic__calloc(c, 1, sizeof *m);
    if (m) {
        m->kernels = ic__calloc(c, (size_t)nk + 1, sizeof *m->kernels);
        m->kptx = ic__calloc(c, (size_t)nk + 1, sizeof *m->kptx);
        m->kir = ic__calloc(c, (size_t)nk + 1, sizeof *m->kir);
    }
    if (!m || !m->kernels || !m->kptx || !m->kir) {
        if (m) {
            ic__free(c, m->kernels);
            ic__free(c, m->kptx);
            ic__free(c, m->kir);
        }
        ic__free(c, m);
        return NULL;
    }
    m->c = c;
    return m;
}

void ic_ptx_module_destroy(ic_ptx_module *m)
{
    if (!m)
        return;
    ic_ctx *c = m->c;
    for (int i = 0; i < m->nkernels; i++) {
        ic__free(c, (void *)m->kernels[i].name);
        ic__free(c, (void *)m->kernels[i].args);
        ic__free(c, m->kptx[i]);
        ic__free(c, m->kir[i]);
    }
    ic__free(c, m->kernels);
    ic__free(c, m->kptx);
    ic__free(c, m->kir);
    ic__free(c, m->ptx);
    ic__free(c, m->ir);
    ic__free(c, m);
}

const char *ic_ptx_module_text(const ic_ptx_module *m) { return m ? m->ptx : NULL; }
const char *ic_ptx_module_llvm_ir(const ic_ptx_module *m) { return m ? m->ir : NULL; }

const char *ic_ptx_module_kernel_text(const ic_ptx_module *m, int i)
{
    return m && m->kptx && i >= 0 && i < m->nkernels ? m->kptx[m->kernels[i].code] : NULL;
}
int ic_ptx_module_num_kernels(const ic_ptx_module *m) { return m ? m->nkernels : 0; }
double ic_ptx_module_emit_ms(const ic_ptx_module *m) { return m ? m->emit_ms : 0; }

const ic_ptx_kernel *ic_ptx_module_kernel(const ic_ptx_module *m, int i)
{
    return m && i >= 0 && i < m->nkernels ? &m->kernels[i] : NULL;
}

ic_status ic_ptx_params_resolve(ic_ctx *c, const ic_kernel *k, int nbufs, const ic_buffer *bufs,
                                const ic_ptx_options *o, const ic_ptx_params *in,
                                ic_ptx_params *out)
{
    ic__pplan pl;
    ic_status s = ic__pplan_make(c, k, nbufs, bufs, o, in, &pl);
    if (!s)
        *out = pl.prm;
    ic__pplan_free(c, &pl);
    return s;
}

/* Unique entry names: a repeated name gets "_<i>" appended. */
static char *unique_name(ic_ctx *c, const ic_ptx_kernel *done, int n, const char *loop_name,
                         const char *given, int i)
{
    char buf[256];
    if (given) {
        snprintf(buf, sizeof buf - 16, "%s", given);
        for (char *q = buf; *q; q++)
            if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_'))
                *q = '_';
    } else {
        ic_ptx_kernel_name(loop_name, buf, sizeof buf - 16);
    }
    for (int j = 0; j < n; j++)
        if (!strcmp(done[j].name, buf)) {
            size_t l = strlen(buf);
            snprintf(buf + l, sizeof buf - l, "_%d", i);
            break;
        }
    return ic__strdup(c, buf);
}

/* The buffers kernel pk takes as parameters: those its plan says it uses. */
static ic_status kernel_args(ic_ctx *c, int nbufs, const ic__pplan *pl, ic_ptx_kernel *pk)
{
    int *a = ic__calloc(c, (size_t)nbufs + 1, sizeof *a), n = 0;
    if (!a)
        return ic__error(c, IC_ENOMEM, "ptx: out of memory");
    for (int b = 0; b < nbufs; b++)
        if (pl->used[b])
            a[n++] = b;
    pk->args = a;
    pk->nargs = n;
    return IC_OK;
}

/* Names every kernel, in order (a repeated name gets "_<i>"): before any code is made, so
 * that names do not depend on which thread makes which kernel. */
static ic_status name_kernels(ic_ctx *c, ic_ptx_module *m, int nk, const ic_kernel *ks,
                              const char *const *names)
{
    for (int i = 0; i < nk; i++) {
        if (!(m->kernels[i].name = unique_name(c, m->kernels, i, ks[i].name, names ? names[i] : NULL, i)))
            return ic__error(c, IC_ENOMEM, "ptx: out of memory");
        m->kernels[i].entry = m->kernels[i].name;
        m->kernels[i].code = i;
        m->nkernels = i + 1;
    }
    return IC_OK;
}

/* The implicit-GEMM convs of ks (iconv.c) whose GEMM the wgmma path takes with B gathered
 * from x: their im2col copies are then not launched. *out: ic__free. */
static ic_status iconv_pairs(ic_ctx *c, int nk, const ic_kernel *ks, int nbufs, const ic_buffer *bufs,
                             const ic_ptx_options *o, const ic_ptx_params *params, ic__iconv **out, int *n)
{
    *out = NULL;
    *n = 0;
    if (nk < 2 || c->sw.no_iconv) /* IC_ICONV=0: keep the im2col copies (A/B timings) */
        return IC_OK;
    ic__iconv *cv = ic__calloc(c, (size_t)nk, sizeof *cv);
    if (!cv)
        return ic__error(c, IC_ENOMEM, "ptx: out of memory");
    int found = ic__iconv_find(nk, ks, nbufs, bufs, cv), kept = 0;
    for (int i = 0; i < found; i++) {
        ic__pplan pl;
        int q = cv[i].gemm;
        ic_status s = ic__pplan_make_cv(c, &ks[q], nbufs, bufs, o, params ? &params[q] : NULL, &cv[i], &pl);
        bool taken = !s && pl.gemm && pl.gemm->B.gather;
        ic__pplan_free(c, &pl);
        if (s)
            ic_clear_error(c);
        if (taken)
            cv[kept++] = cv[i];
    }
    *out = cv;
    *n = kept;
    return IC_OK;
}

/* Kernel i's part in them: the conv whose GEMM it is (NULL: none), or *skip when it is a copy
 * its GEMM reads through. */
static const ic__iconv *iconv_of(const ic__iconv *cvs, int ncv, int i, bool *skip)
{
    const ic__iconv *cv = NULL;
    *skip = false;
    for (int j = 0; j < ncv; j++) {
        cv = cvs[j].gemm == i ? &cvs[j] : cv;
        *skip |= cvs[j].producer == i;
    }
    return cv;
}

/* Kernel i (named already) into G's module: its plan, parameters and IR; fills m->kernels[i].
 * cv: it is the GEMM of that implicit-GEMM conv; skip: an im2col copy not launched (grid 0). */
static ic_status gen_kernel(ic__pg *G, ic_ptx_module *m, int i, const ic_kernel *k,
                            const ic_ptx_options *o, const ic_ptx_params *prm, const ic__iconv *cv, bool skip)
{
    ic_ctx *c = G->c;
    ic__pplan pl;
    ic_ptx_kernel *pk = &m->kernels[i];
    ic_status s = ic__pplan_make_cv(c, k, G->nbufs, G->bufs, o, prm, cv, &pl);
    if (!s)
        s = kernel_args(c, G->nbufs, &pl, pk);
    if (!s)
        s = ic__pgen_kernel(G, k, &pl, pk->name);
    if (!s) {
        pk->mode = pl.mode;
        pk->params = pl.prm;
        pk->grid = skip ? 0 : pl.grid;
        pk->block = pl.block;
        pk->smem_bytes = pl.smem;
        pk->rows_per_block = pl.R;
        pk->in_registers = pl.cache;
        pk->dyn_smem_bytes = pl.gemm ? ic__pgemm_smem_bytes(&pl) : ic__pattn_smem_bytes(&pl);
    }
    ic__pplan_free(c, &pl);
    return s;
}

ic_status ic__ptx_gen_all(ic__pg *G, ic_ptx_module *m, int nk, const ic_kernel *ks,
                         const char *const *names, const ic_ptx_options *o,
                         const ic_ptx_params *params)
{
    ic__iconv *cvs = NULL;
    int ncv = 0;
    ic_status s = name_kernels(G->c, m, nk, ks, names);
    if (!s)
        s = iconv_pairs(G->c, nk, ks, G->nbufs, G->bufs, o, params, &cvs, &ncv);
    for (int i = 0; i < nk && !s; i++) {
        bool skip;
        const ic__iconv *cv = iconv_of(cvs, ncv, i, &skip);
        s = gen_kernel(G, m, i, &ks[i], o, params ? &params[i] : NULL, cv, skip);
    }
    ic__free(G->c, cvs);
    return s;
}

/* G's module verified, optimised (default<O3> unless o says otherwise) and printed as PTX
 * into *ptx (and its optimised IR into *ir when ir is not NULL). Errors name kernel `name`. */
static ic_status optimise_and_emit(ic__pg *G, const char *name, LLVMTargetMachineRef tm,
                                   const ic_ptx_options *o, char **ptx, char **ir, double ms[2])
{
    ic_ctx *c = G->c;
    char *msg = NULL;
    double t0 = thread_cpu_ms();
    if (LLVMVerifyModule(G->mod, LLVMReturnStatusAction, &msg)) {
        ic_status s = ic__error(c, IC_ELLVM, "ptx: kernel '%s': generated IR does not verify: %.1500s", name,
                                msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    LLVMDisposeMessage(msg);
    int level = o && o->opt_level ? o->opt_level : 3;
    if (level > 0) {
        char pipeline[32];
        snprintf(pipeline, sizeof pipeline, "default<O%d>", level > 3 ? 3 : level);
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        /* NVPTX has no f32 vectors (our kernels compute in f32): the vectorizers would only
         * spend time on analysis; our own vector accesses are emitted as such */
        LLVMPassBuilderOptionsSetSLPVectorization(po, 0);
        LLVMPassBuilderOptionsSetLoopVectorization(po, 0);
        LLVMErrorRef e = LLVMRunPasses(G->mod, pipeline, tm, po);
        LLVMDisposePassBuilderOptions(po);
        if (e) {
            char *em = LLVMGetErrorMessage(e);
            ic_status s = ic__error(c, IC_ELLVM, "ptx: kernel '%s': LLVM passes failed: %s", name, em ? em : "?");
            LLVMDisposeErrorMessage(em);
            return s;
        }
    }
    if (ir && !(*ir = take_message(c, LLVMPrintModuleToString(G->mod))))
        return ic__error(c, IC_ENOMEM, "ptx: out of memory");
    double t1 = thread_cpu_ms();
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, G->mod, LLVMAssemblyFile, &msg, &buf)) {
        ic_status s = ic__error(c, IC_ELLVM, "ptx: kernel '%s': NVPTX code generation failed: %s", name,
                                msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    size_t n = LLVMGetBufferSize(buf);
    *ptx = ic__malloc(c, n + 1);
    if (*ptx) {
        memcpy(*ptx, LLVMGetBufferStart(buf), n);
        (*ptx)[n] = 0;
    }
    LLVMDisposeMemoryBuffer(buf);
    ms[0] += t1 - t0, ms[1] += thread_cpu_ms() - t1;
    return *ptx ? IC_OK : ic__error(c, IC_ENOMEM, "ptx: out of memory for the PTX text");
}

/* The kernels of one emission, a module each, made by ic__run_jobs in two rounds: every
 * kernel's IR (gen_job), then O3 and PTX for the kernels whose code no earlier kernel has
 * already (emit_job). */
typedef struct {
    ic_ctx *c;
    ic_ptx_module *m;
    const ic_kernel *ks;
    int nbufs;
    const ic_buffer *bufs;
    const ic_ptx_options *o;
    const ic_ptx_params *params;
    LLVMTargetRef target;
    int llvm_sm, ptx;
    ic__pg *gs;               /* [nk] each kernel's generator: LLVM context, module, builder */
    LLVMTargetMachineRef *tms; /* [nk] */
    char **key;               /* [nk] its IR text with its name replaced (the code's identity) */
    uint64_t *hash;           /* [nk] of key */
    int *distinct;            /* [ndistinct] the kernels whose code is their own: emit_job's */
    ic__iconv *cvs;           /* [ncv] implicit-GEMM convs (iconv_pairs) */
    int ncv;
    double (*cpu)[3];         /* [thread] CPU ms: IR, optimise, PTX */
} emit_jobs;

/* The NVPTX target machine: sm_<llvm_sm> and its PTX version, or sm_90a (wgmma, PTX 8.0+). */
static LLVMTargetMachineRef target_machine(const emit_jobs *J, bool arch_specific)
{
    char cpu[16], feat[16];
    snprintf(cpu, sizeof cpu, arch_specific ? "sm_90a" : "sm_%d", J->llvm_sm);
    snprintf(feat, sizeof feat, "+ptx%d", arch_specific && J->ptx < 80 ? 80 : J->ptx);
    return LLVMCreateTargetMachine(J->target, "nvptx64-nvidia-cuda", cpu, feat, LLVMCodeGenLevelAggressive,
                                   LLVMRelocDefault, LLVMCodeModelDefault);
}

/* text with every `name` replaced by "@K" (malloc'd, NULL when out of memory). */
static char *without_name(const char *text, const char *name)
{
    size_t nl = strlen(name), n = strlen(text) + 1;
    char *out = malloc(n), *q = out;
    for (const char *p = text; out && *p;) {
        if (!strncmp(p, name, nl)) {
            memcpy(q, "@K", 2);
            q += 2, p += nl;
        } else {
            *q++ = *p++;
        }
    }
    if (out)
        *q = 0;
    return out;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Round 1, kernel i: its own LLVM context, module and target machine (none of them may be
 * shared between threads; each stays with the kernel for round 2), its IR, and the key that
 * finds kernels of the same code: the IR before O3 with its name taken out. */
static ic_status gen_job(void *arg, int i, int thread)
{
    emit_jobs *J = arg;
    ic_ptx_module *m = J->m;
    const char *name = m->kernels[i].name;
    double t0 = thread_cpu_ms();
    LLVMTargetMachineRef tm = J->tms[i] = target_machine(J, false);
    ic__pg *G = &J->gs[i];
    G->c = J->c;
    G->sm = J->llvm_sm;
    G->ctx = LLVMContextCreate();
    G->mod = LLVMModuleCreateWithNameInContext(name, G->ctx);
    G->b = LLVMCreateBuilderInContext(G->ctx);
    G->nbufs = J->nbufs;
    G->bufs = J->bufs;
    ic__pg_init_types(G);
    LLVMSetTarget(G->mod, "nvptx64-nvidia-cuda");
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(G->mod, dl);
    LLVMDisposeTargetData(dl);
    bool skip;
    const ic__iconv *cv = iconv_of(J->cvs, J->ncv, i, &skip);
    ic_status s = gen_kernel(G, m, i, &J->ks[i], J->o, J->params ? &J->params[i] : NULL, cv, skip);
    if (!s) {
        char *ir = LLVMPrintModuleToString(G->mod);
        J->key[i] = ir ? without_name(ir, name) : NULL;
        LLVMDisposeMessage(ir);
        if (!J->key[i])
            s = ic__error(J->c, IC_ENOMEM, "ptx: out of memory");
        else
            J->hash[i] = fnv1a(J->key[i]);
    }
    J->cpu[thread][0] += thread_cpu_ms() - t0;
    return s;
}

/* Round 2, the kernel of job t: optimised and printed as PTX. */
static ic_status emit_job(void *arg, int t, int thread)
{
    emit_jobs *J = arg;
    int i = J->distinct[t];
    ic_ptx_module *m = J->m;
    ic__pg *G = &J->gs[i];
    if (G->arch_specific) { /* wgmma: same data layout, target sm_90a */
        LLVMDisposeTargetMachine(J->tms[i]);
        J->tms[i] = target_machine(J, true);
    }
    return optimise_and_emit(G, m->kernels[i].name, J->tms[i], J->o, &m->kptx[i],
                             J->o && J->o->keep_ir ? &m->kir[i] : NULL, &J->cpu[thread][1]);
}

/* Between the rounds: each kernel's code (kernels[i].code) is that of the first kernel with
 * the same key, whose entry it launches; the others go to round 2 (J->distinct). Returns their
 * count. */
static int find_same_code(emit_jobs *J, int nk)
{
    ic_ptx_kernel *ks = J->m->kernels;
    int n = 0;
    for (int i = 0; i < nk; i++) {
        ks[i].code = i;
        for (int j = 0; j < i; j++)
            if (ks[j].code == j && J->hash[j] == J->hash[i] && !strcmp(J->key[j], J->key[i])) {
                ks[i].code = j;
                break;
            }
        ks[i].entry = ks[ks[i].code].name;
        if (ks[i].code == i)
            J->distinct[n++] = i;
    }
    return n;
}

static void free_jobs(emit_jobs *J, int nk)
{
    for (int i = 0; J->gs && i < nk; i++) {
        if (J->gs[i].b)
            LLVMDisposeBuilder(J->gs[i].b);
        if (J->gs[i].mod)
            LLVMDisposeModule(J->gs[i].mod);
        if (J->gs[i].ctx)
            LLVMContextDispose(J->gs[i].ctx);
        if (J->tms[i])
            LLVMDisposeTargetMachine(J->tms[i]);
        free(J->key[i]);
    }
    ic__free(J->c, J->gs);
    ic__free(J->c, J->tms);
    ic__free(J->c, J->key);
    ic__free(J->c, J->hash);
    ic__free(J->c, J->distinct);
    ic__free(J->c, J->cpu);
    ic__free(J->c, J->cvs);
}

/* The texts of the kernels' modules in kernel order, each after a line
 * "<cmt> ---- kernel <i> '<name>' ----"; a kernel that runs an earlier one's code has only a
 * line saying so. NULL when out of memory. */
static char *join_texts(ic_ctx *c, const ic_ptx_module *m, char **texts, const char *cmt)
{
    size_t n = 1;
    for (int i = 0; i < m->nkernels; i++)
        n += (m->kernels[i].code == i ? strlen(texts[i]) : 0) + 2 * strlen(m->kernels[i].name) + 96;
    char *out = ic__malloc(c, n), *q = out;
    for (int i = 0; out && i < m->nkernels; i++) {
        int k = m->kernels[i].code;
        if (k != i) {
            q += snprintf(q, n - (size_t)(q - out), "%s ---- kernel %d '%s': the code of kernel %d '%s' ----\n", cmt,
                          i, m->kernels[i].name, k, m->kernels[k].name);
            continue;
        }
        q += snprintf(q, n - (size_t)(q - out), "%s ---- kernel %d '%s' ----\n", cmt, i, m->kernels[i].name);
        size_t l = strlen(texts[i]);
        memcpy(q, texts[i], l);
        q += l;
    }
    if (out)
        *q = 0;
    return out;
}

static ic_status emit(ic_ctx *c, int nk, const ic_kernel *ks, const char *const *names,
                      int nbufs, const ic_buffer *bufs, const ic_ptx_options *o,
                      const ic_ptx_params *params, ic_ptx_module **out)
{
    *out = NULL;
    if (nk < 0 || nbufs < 0 || (nk && !ks) || (nbufs && !bufs))
        return ic__error(c, IC_EINVAL, "ptx: bad kernel or buffer list");
    double t0 = now_ms();
    ic__ptx_llvm_init();
    emit_jobs J = { .c = c, .ks = ks, .nbufs = nbufs, .bufs = bufs, .o = o, .params = params };
    target_for(o && o->sm > 0 ? o->sm : 90, &J.llvm_sm, &J.ptx);
    if (o && o->ptx_version > 0)
        J.ptx = o->ptx_version;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple("nvptx64-nvidia-cuda", &J.target, &msg)) {
        ic_status s = ic__error(c, IC_ELLVM, "ptx: this LLVM has no NVPTX target: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    ic_ptx_module *m = J.m = ic__ptx_module_new(c, nk);
    int nthreads = ic__compile_threads(c, nk), ndistinct = 0, nt2 = 0;
    J.cpu = ic__calloc(c, (size_t)nthreads, sizeof *J.cpu);
    J.gs = ic__calloc(c, (size_t)nk + 1, sizeof *J.gs);
    J.tms = ic__calloc(c, (size_t)nk + 1, sizeof *J.tms);
    J.key = ic__calloc(c, (size_t)nk + 1, sizeof *J.key);
    J.hash = ic__calloc(c, (size_t)nk + 1, sizeof *J.hash);
    J.distinct = ic__calloc(c, (size_t)nk + 1, sizeof *J.distinct);
    ic_status s = !m || !J.cpu || !J.gs || !J.tms || !J.key || !J.hash || !J.distinct
                      ? ic__error(c, IC_ENOMEM, "ptx: out of memory")
                      : name_kernels(c, m, nk, ks, names);
    if (!s)
        s = iconv_pairs(c, nk, ks, nbufs, bufs, o, params, &J.cvs, &J.ncv);
    if (!s)
        s = ic__run_jobs(c, nk, gen_job, &J, &nthreads);
    if (!s) {
        ndistinct = find_same_code(&J, nk);
        s = ic__run_jobs(c, ndistinct, emit_job, &J, &nt2);
    }
    if (!s && !(m->ptx = join_texts(c, m, m->kptx, "//")))
        s = ic__error(c, IC_ENOMEM, "ptx: out of memory");
    if (!s && o && o->keep_ir && !(m->ir = join_texts(c, m, m->kir, ";")))
        s = ic__error(c, IC_ENOMEM, "ptx: out of memory");
    double cpu[3] = { 0, 0, 0 };
    for (int t = 0; J.cpu && t < ic__compile_threads(c, nk); t++)
        for (int k = 0; k < 3; k++)
            cpu[k] += J.cpu[t][k];
    free_jobs(&J, nk);
    if (s) {
        ic_ptx_module_destroy(m);
        return s;
    }
    m->emit_ms = now_ms() - t0;
    ic__logf(c, 1, "ic: ptx: %d kernels (%d distinct) in %.1f ms on %d thread%s [cpu ms: IR %.1f, optimise %.1f, PTX %.1f]",
             nk, ndistinct, m->emit_ms, nthreads, nthreads > 1 ? "s" : "", cpu[0], cpu[1], cpu[2]);
    *out = m;
    return IC_OK;
}

/* Kernel i of the parts is well formed: a name, an entry naming its code's kernel, a code
 * of its own at or before it (with its PTX), a launch the runtime can make. */
static ic_status check_part(ic_ctx *c, int nk, const ic_ptx_kernel *ks, const char *const *ptx, int i)
{
    const ic_ptx_kernel *k = &ks[i];
    const char *why = NULL;
    if (!k->name || !*k->name || !k->entry)
        why = "no name or entry";
    else if (k->code < 0 || k->code > i || ks[k->code].code != k->code || strcmp(k->entry, ks[k->code].name))
        why = "its code is not that of an earlier kernel of its own code";
    else if (k->code == i && (!ptx || !ptx[i]))
        why = "no PTX";
    else if (k->grid < 0 || k->block < 0 || k->block > 1024 || k->nargs < 0 || (k->nargs && !k->args) ||
             k->smem_bytes < 0 || k->dyn_smem_bytes < 0)
        why = "a bad launch";
    for (int j = 0; !why && j < i; j++)
        if (!strcmp(ks[j].name, k->name))
            why = "its name is taken";
    return why ? ic__error(c, IC_EINVAL, "ptx: kernel %d '%s' of %d: %s", i, k->name ? k->name : "?", nk, why)
               : IC_OK;
}

/* Copies kernel part k into m's kernel i (name, args owned; entry points at its code's name). */
static ic_status copy_part(ic_ctx *c, ic_ptx_module *m, int i, const ic_ptx_kernel *k, const char *ptx)
{
    ic_ptx_kernel *pk = &m->kernels[i];
    *pk = *k;
    pk->name = ic__strdup(c, k->name);
    int *args = ic__calloc(c, (size_t)k->nargs + 1, sizeof *args);
    pk->args = args;
    m->nkernels = i + 1;
    if (!pk->name || !args || (k->code == i && !(m->kptx[i] = ic__strdup(c, ptx))))
        return ic__error(c, IC_ENOMEM, "ptx: out of memory");
    memcpy(args, k->args, sizeof *args * (size_t)k->nargs);
    pk->entry = m->kernels[k->code].name;
    return IC_OK;
}

ic_status ic_ptx_module_from_parts(ic_ctx *c, int nk, const ic_ptx_kernel *kernels,
                                   const char *const *ptx, ic_ptx_module **out)
{
    *out = NULL;
    if (nk < 0 || (nk && !kernels))
        return ic__error(c, IC_EINVAL, "ptx: bad kernel list");
    ic_status s = IC_OK;
    for (int i = 0; i < nk && !s; i++)
        s = check_part(c, nk, kernels, ptx, i);
    ic_ptx_module *m = s ? NULL : ic__ptx_module_new(c, nk);
    if (!s && !m)
        s = ic__error(c, IC_ENOMEM, "ptx: out of memory");
    for (int i = 0; i < nk && !s; i++)
        s = copy_part(c, m, i, &kernels[i], ptx ? ptx[i] : NULL);
    if (!s && !(m->ptx = join_texts(c, m, m->kptx, "//")))
        s = ic__error(c, IC_ENOMEM, "ptx: out of memory");
    if (s) {
        ic_ptx_module_destroy(m);
        return s;
    }
    *out = m;
    return IC_OK;
}

ic_status ic_ptx_emit_kernels(ic_ctx *c, int nk, const ic_kernel *ks, int nbufs,
                              const ic_buffer *bufs, const ic_ptx_options *o,
                              const ic_ptx_params *params, ic_ptx_module **out)
{
    return emit(c, nk, ks, NULL, nbufs, bufs, o, params, out);
}

ic_status ic_ptx_emit(ic_ctx *c, const ic_program *p, const ic_ptx_options *o,
                      const ic_ptx_params *params, ic_ptx_module **out)
{
    *out = NULL;
    ic_kernel *ks;
    ic_buffer *bs;
    char **names = NULL;
    ic_status s = ic__program_arrays(c, p, "ptx", &ks, &bs);
    int nk = p ? ic_program_num_kernels(p) : 0;
    if (!s && !(names = ic__calloc(c, (size_t)nk + 1, sizeof *names)))
        s = ic__error(c, IC_ENOMEM, "ptx: out of memory");
    for (int i = 0; !s && i < nk; i++) {
        if (!(names[i] = ic__malloc(c, 256))) /* "gpu_" + what the kernel computes */
            s = ic__error(c, IC_ENOMEM, "ptx: out of memory");
        else
            ic_kernel_format_name(names[i], 256, "gpu_", p, &ks[i], i);
    }
    if (!s)
        s = emit(c, nk, ks, (const char *const *)names, ic_program_num_buffers(p), bs, o, params, out);
    for (int i = 0; names && i < nk; i++)
        ic__free(c, names[i]);
    ic__free(c, names);
    ic__free(c, ks);
    ic__free(c, bs);
    return s;
}
