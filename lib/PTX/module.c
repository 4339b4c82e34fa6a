/* module.c - the PTX layer's public API: one LLVM module per program (every kernel an entry),
 * verified, optimised with default<O3> for the NVPTX target machine (sm_XX, +ptxNN) and
 * printed as PTX with LLVMTargetMachineEmitToMemoryBuffer. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include "ic/fuse.h"
#include "llvmgen-impl.h" /* ic__program_arrays */
#include "ptx-impl.h"

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
    if (m)
        m->kernels = ic__calloc(c, (size_t)nk + 1, sizeof *m->kernels);
    if (!m || !m->kernels) {
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
    }
    ic__free(c, m->kernels);
    ic__free(c, m->ptx);
    ic__free(c, m->ir);
    ic__free(c, m);
}

const char *ic_ptx_module_text(const ic_ptx_module *m) { return m ? m->ptx : NULL; }
const char *ic_ptx_module_llvm_ir(const ic_ptx_module *m) { return m ? m->ir : NULL; }
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

ic_status ic__ptx_gen_all(ic__pg *G, ic_ptx_module *m, int nk, const ic_kernel *ks,
                         const char *const *names, const ic_ptx_options *o,
                         const ic_ptx_params *params)
{
    ic_ctx *c = G->c;
    for (int i = 0; i < nk; i++) {
        ic__pplan pl;
        ic_status s = ic__pplan_make(c, &ks[i], G->nbufs, G->bufs, o, params ? &params[i] : NULL, &pl);
        ic_ptx_kernel *pk = &m->kernels[i];
        if (!s) {
            pk->name = unique_name(c, m->kernels, i, ks[i].name, names ? names[i] : NULL, i);
            if (!pk->name)
                s = ic__error(c, IC_ENOMEM, "ptx: out of memory");
        }
        if (!s)
            s = kernel_args(c, G->nbufs, &pl, pk);
        if (!s)
            s = ic__pgen_kernel(G, &ks[i], &pl, pk->name);
        if (!s) {
            pk->mode = pl.mode;
            pk->params = pl.prm;
            pk->grid = pl.grid;
            pk->block = pl.block;
            pk->smem_bytes = pl.smem;
            pk->rows_per_block = pl.R;
            pk->in_registers = pl.cache;
            pk->dyn_smem_bytes = pl.gemm ? ic__pgemm_smem_bytes(&pl) : ic__pattn_smem_bytes(&pl);
            m->nkernels = i + 1;
        }
        ic__pplan_free(c, &pl);
        if (s) { /* kernel i is not counted in nkernels: free what it has */
            ic__free(c, (void *)pk->args);
            pk->args = NULL;
            return s;
        }
    }
    return IC_OK;
}

static ic_status optimise_and_emit(ic__pg *G, ic_ptx_module *m, LLVMTargetMachineRef tm,
                                   const ic_ptx_options *o)
{
    ic_ctx *c = G->c;
    char *msg = NULL;
    if (LLVMVerifyModule(G->mod, LLVMReturnStatusAction, &msg)) {
        ic_status s = ic__error(c, IC_ELLVM, "ptx: generated IR does not verify: %.1500s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    LLVMDisposeMessage(msg);
    int level = o && o->opt_level ? o->opt_level : 3;
    if (level > 0) {
        char pipeline[32];
        snprintf(pipeline, sizeof pipeline, "default<O%d>", level > 3 ? 3 : level);
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        LLVMErrorRef e = LLVMRunPasses(G->mod, pipeline, tm, po);
        LLVMDisposePassBuilderOptions(po);
        if (e) {
            char *em = LLVMGetErrorMessage(e);
            ic_status s = ic__error(c, IC_ELLVM, "ptx: LLVM passes failed: %s", em ? em : "?");
            LLVMDisposeErrorMessage(em);
            return s;
        }
    }
    if (o && o->keep_ir && !(m->ir = take_message(c, LLVMPrintModuleToString(G->mod))))
        return ic__error(c, IC_ENOMEM, "ptx: out of memory");
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, G->mod, LLVMAssemblyFile, &msg, &buf)) {
        ic_status s = ic__error(c, IC_ELLVM, "ptx: NVPTX code generation failed: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    size_t n = LLVMGetBufferSize(buf);
    m->ptx = ic__malloc(c, n + 1);
    if (m->ptx) {
        memcpy(m->ptx, LLVMGetBufferStart(buf), n);
        m->ptx[n] = 0;
    }
    LLVMDisposeMemoryBuffer(buf);
    return m->ptx ? IC_OK : ic__error(c, IC_ENOMEM, "ptx: out of memory for the PTX text");
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
    int llvm_sm, ptx;
    target_for(o && o->sm > 0 ? o->sm : 90, &llvm_sm, &ptx);
    if (o && o->ptx_version > 0)
        ptx = o->ptx_version;
    char cpu[16], feat[16];
    snprintf(cpu, sizeof cpu, "sm_%d", llvm_sm);
    snprintf(feat, sizeof feat, "+ptx%d", ptx);
    const char *triple = "nvptx64-nvidia-cuda";
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(triple, &target, &msg)) {
        ic_status s = ic__error(c, IC_ELLVM, "ptx: this LLVM has no NVPTX target: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    ic_ptx_module *m = ic__ptx_module_new(c, nk);
    if (!m)
        return ic__error(c, IC_ENOMEM, "ptx: out of memory");
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, triple, cpu, feat, LLVMCodeGenLevelAggressive,
                                                      LLVMRelocDefault, LLVMCodeModelDefault);
    ic__pg G;
    memset(&G, 0, sizeof G);
    G.c = c;
    G.sm = llvm_sm;
    G.ctx = LLVMContextCreate();
    G.mod = LLVMModuleCreateWithNameInContext("ic_ptx", G.ctx);
    G.b = LLVMCreateBuilderInContext(G.ctx);
    G.nbufs = nbufs;
    G.bufs = bufs;
    ic__pg_init_types(&G);
    LLVMSetTarget(G.mod, triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
    LLVMSetModuleDataLayout(G.mod, dl);
    LLVMDisposeTargetData(dl);
    ic_status s = ic__ptx_gen_all(&G, m, nk, ks, names, o, params);
    if (!s && G.arch_specific) { /* wgmma: same data layout, target sm_90a (PTX ISA 8.0+) */
        LLVMDisposeTargetMachine(tm);
        snprintf(cpu, sizeof cpu, "sm_90a");
        if (ptx < 80)
            snprintf(feat, sizeof feat, "+ptx80");
        tm = LLVMCreateTargetMachine(target, triple, cpu, feat, LLVMCodeGenLevelAggressive,
                                     LLVMRelocDefault, LLVMCodeModelDefault);
    }
    if (!s)
        s = optimise_and_emit(&G, m, tm, o);
    LLVMDisposeBuilder(G.b);
    LLVMDisposeModule(G.mod);
    LLVMContextDispose(G.ctx);
    LLVMDisposeTargetMachine(tm);
    if (s) {
        ic_ptx_module_destroy(m);
        return s;
    }
    m->emit_ms = now_ms() - t0;
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
