/* target.c - the host target (CPU name and features detected at run time), the O3
 * pipeline, default codegen parameters and the IR / assembly dumps. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include "llvmgen-impl.h"

static pthread_once_t llvm_once = PTHREAD_ONCE_INIT;

static void llvm_init_once(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    LLVMInitializeNativeAsmParser();
}

void ic__llvm_init(void)
{
    pthread_once(&llvm_once, llvm_init_once);
}

ic_status ic__llvm_error(ic_ctx *c, LLVMErrorRef e, const char *what)
{
    char *msg = LLVMGetErrorMessage(e);
    ic__error(c, IC_ELLVM, "%s: %s", what, msg ? msg : "unknown LLVM error");
    LLVMDisposeErrorMessage(msg);
    return IC_ELLVM;
}

/* "+avx512f" present (and not "-avx512f") in a comma-separated feature list. */
bool ic__has_feature(const char *features, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = features; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n + 1 && p[0] == '+' && memcmp(p + 1, name, n) == 0)
            return true;
        p = end ? end + 1 : NULL;
    }
    return false;
}

LLVMTargetMachineRef ic__codegen_target_machine(const ic_codegen_target *t)
{
    /* small code model, position independent: constants are rip-relative loads the loops keep
     * in registers (the JIT's default large model materialises each address with a movabs,
     * reloaded inside loops); PIC because JITLink may place code and data more than 2 GB
     * apart, which the small model's absolute 32-bit fixups cannot reach */
    return LLVMCreateTargetMachine(t->target, t->triple, t->cpu, t->features,
                                   LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                   LLVMCodeModelSmall);
}

static char *dup_llvm(ic_ctx *c, char *s)
{
    char *r = ic__strdup(c, s ? s : "");
    LLVMDisposeMessage(s);
    return r;
}

/* Outputs larger than a quarter of the last-level cache are written around it (gen.c,
 * nt_plan): like glibc's memcpy, which turns to non-temporal stores at a fraction of the
 * shared cache, an output that large is evicted before a consumer could read it back.
 * x86 only (the kernels end such writes with sfence). */
static int64_t stream_threshold(const char *triple)
{
    if (strncmp(triple, "x86_64", 6) != 0)
        return 0;
    long llc = -1;
#ifdef _SC_LEVEL3_CACHE_SIZE
    llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (llc <= 0)
        llc = 32L << 20;
    return (int64_t)llc / 4;
}

ic_status ic_codegen_target_create(ic_ctx *c, ic_codegen_target **out)
{
    *out = NULL;
    ic__llvm_init();
    ic_codegen_target *t = ic__calloc(c, 1, sizeof *t);
    if (!t)
        return ic__error(c, IC_ENOMEM, "codegen: out of memory for the target");
    t->c = c;
    t->triple = dup_llvm(c, LLVMGetDefaultTargetTriple());
    t->cpu = dup_llvm(c, LLVMGetHostCPUName());
    t->features = dup_llvm(c, LLVMGetHostCPUFeatures());
    if (!t->triple || !t->cpu || !t->features) {
        ic_codegen_target_destroy(t);
        return ic__error(c, IC_ENOMEM, "codegen: out of memory for the target");
    }
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(t->triple, &t->target, &msg)) {
        ic_status s = ic__error(c, IC_ELLVM, "codegen: no LLVM target for '%s': %s", t->triple,
                                msg ? msg : "?");
        LLVMDisposeMessage(msg);
        ic_codegen_target_destroy(t);
        return s;
    }
    t->tm = ic__codegen_target_machine(t);
    if (!t->tm) {
        ic_codegen_target_destroy(t);
        return ic__error(c, IC_ELLVM, "codegen: cannot create a target machine for %s (%s)",
                         t->triple, t->cpu);
    }
    t->vector_bits = ic__has_feature(t->features, "avx512f") ? 512
                     : ic__has_feature(t->features, "avx") ? 256 : 128;
    t->stream_bytes = stream_threshold(t->triple);
    *out = t;
    return IC_OK;
}

void ic_codegen_target_destroy(ic_codegen_target *t)
{
    if (!t)
        return;
    if (t->tm)
        LLVMDisposeTargetMachine(t->tm);
    ic__free(t->c, t->triple);
    ic__free(t->c, t->cpu);
    ic__free(t->c, t->features);
    ic__free(t->c, t);
}

const char *ic_codegen_target_cpu(const ic_codegen_target *t) { return t->cpu; }
const char *ic_codegen_target_features(const ic_codegen_target *t) { return t->features; }
const char *ic_codegen_target_triple(const ic_codegen_target *t) { return t->triple; }
int ic_codegen_target_vector_bits(const ic_codegen_target *t) { return t->vector_bits; }

/* ---- parameters ---- */

static int64_t prod(int n, const int64_t *d)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        p *= d[i];
    return p;
}

/* Widest element a kernel touches in memory, to size strips in bytes. */
static size_t widest_elem(const ic_kernel *k, const ic_buffer *bufs)
{
    size_t w = 4;
    for (int s = 0; s < k->nstages; s++)
        for (int i = 0; i < k->stages[s].ninstr; i++) {
            const ic_linstr *in = &k->stages[s].instr[i];
            if (in->op == IC_L_REDUCE && ic_dtype_size(in->type) > w)
                w = ic_dtype_size(in->type);
        }
    (void)bufs;
    return w;
}

void ic_codegen_params_default(const ic_codegen_target *t, const ic_kernel *k,
                               const ic_buffer *bufs, ic_codegen_params *out)
{
    memset(out, 0, sizeof *out);
    int bits = t ? t->vector_bits : 256;
    out->vector_width = bits / 32;
    out->unroll = 0;
    out->threads = 0;
    out->parallel_depth = 1;
    /* A fork/join of a warm libomp team costs a few microseconds: about the time to
     * stream 32K floats on one core. */
    out->serial_threshold = 32768;
    out->grain = 64;
    out->prefer_vector_bits = bits;
    out->prefetch_bytes = 0;
    out->stream_bytes = 0;
    if (k && ic_kernel_mode_of(k) != IC_KMODE_COLUMN) {
        /* prefetch.c. Pointwise chains: 512 B (of 512 B, 1, 2 and 4 KB, the best on the CPU
         * benchmarks; the seed pattern lost 6% with 2 KB). Row kernels: 2 KB, measured in
         * three alternating runs of the benchmarks against 512 B: the row sum 88 -> 100% of
         * a copy, softmax 91 -> 94%, layer_norm and the attention softmax unchanged. A column
         * walk (the strip of each reduced row in turn) lost a fifth with prefetches: off. */
        out->prefetch_bytes = ic_kernel_mode_of(k) == IC_KMODE_ROW ? 2048 : 512;
        out->stream_bytes = t ? t->stream_bytes : 0;
    }
    out->strip = 0;
    if (k && ic_kernel_mode_of(k) == IC_KMODE_COLUMN && k->nouter > 0) {
        /* Walk the reduced rows with a strip of columns: long contiguous runs for the
         * prefetcher, accumulators in L1 (<= 16 KB each), and enough strips for the
         * threads. */
        int64_t cols = k->outer[k->nouter - 1];
        int64_t rest = prod(k->nouter - 1, k->outer);
        /* strips per row of outer (an empty outer dim: nothing to split) */
        int64_t want = rest >= 8 || rest <= 0 ? 1 : (8 + rest - 1) / rest;
        int64_t s = (cols + want - 1) / want;
        int64_t cap = (int64_t)(16384 / widest_elem(k, bufs));
        s = s > cap ? cap : s;
        s = (s + 63) / 64 * 64;
        out->strip = s < 64 ? 64 : s;
    }
}

/* ---- index analysis and the choice of loop arrangement ---- */

/* Forward pass over stage s (operands precede their users): known[i] and stride[i] of
 * each instruction's value along loop variable var, when affine with a constant step. */
static void stage_strides(const ic_kernel *k, int s, int var, int64_t *stride, bool *known)
{
    const ic_stage *st = &k->stages[s];
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        int ops[3] = { in->a, in->b, in->c }, n;
        known[i] = false;
        stride[i] = 0;
        bool ok = true;
        int64_t sa = 0, sb = 0, cv = 0;
        switch (in->op) {
        case IC_L_VAR: known[i] = true; stride[i] = in->a == var; continue;
        case IC_L_CONST: known[i] = true; continue;
        case IC_L_ACC: case IC_L_REDUCE: case IC_L_STORE: continue;
        default: n = ic_linstr_arity(in); break;
        }
        for (int j = 0; j < n; j++)
            ok &= ops[j] >= 0 && ops[j] < i && known[ops[j]];
        if (!ok)
            continue;
        sa = stride[ops[0]];
        sb = n > 1 ? stride[ops[1]] : 0;
        switch (in->op) {
        case IC_L_ADD: known[i] = true; stride[i] = sa + sb; break;
        case IC_L_SUB: known[i] = true; stride[i] = sa - sb; break;
        case IC_L_MUL:
            if (sa == 0 && sb == 0) {
                known[i] = true;
            } else if (sb == 0 && st->instr[in->b].op == IC_L_CONST) {
                cv = st->instr[in->b].imm.is_int ? st->instr[in->b].imm.i : (int64_t)st->instr[in->b].imm.f;
                known[i] = true, stride[i] = sa * cv;
            } else if (sa == 0 && st->instr[in->a].op == IC_L_CONST) {
                cv = st->instr[in->a].imm.is_int ? st->instr[in->a].imm.i : (int64_t)st->instr[in->a].imm.f;
                known[i] = true, stride[i] = sb * cv;
            }
            break;
        case IC_L_CAST:
            if (in->type == IC_I64 || in->type == IC_I32)
                known[i] = true, stride[i] = sa;
            else
                known[i] = sa == 0;
            break;
        default: {
            /* anything else is uniform when all its operands are */
            bool uni = true;
            for (int j = 0; j < n; j++)
                uni &= stride[ops[j]] == 0;
            known[i] = uni;
            break;
        }
        }
    }
}

/* How the loads and stores of loop stages (REDUCE, INNER) behave if the loop along var is
 * vectorised: unit stride (vector access), stride 0 (a broadcast) or anything else (a
 * gather or scatter). */
typedef struct { int unit, gather; } access_count;

static access_count count_accesses(const ic_kernel *k, int var)
{
    access_count n = { 0, 0 };
    for (int s = 0; s < k->nstages; s++) {
        const ic_stage *st = &k->stages[s];
        if (st->kind == IC_STAGE_BODY || st->ninstr <= 0)
            continue;
        int64_t *stride = malloc(sizeof *stride * (size_t)st->ninstr);
        bool *known = malloc(sizeof *known * (size_t)st->ninstr);
        if (stride && known) {
            stage_strides(k, s, var, stride, known);
            for (int i = 0; i < st->ninstr; i++) {
                int a = st->instr[i].a;
                if ((st->instr[i].op != IC_L_LOAD && st->instr[i].op != IC_L_STORE) || a < 0 || a >= i)
                    continue;
                if (known[a] && stride[a] == 1)
                    n.unit++;
                else if (!known[a] || stride[a] != 0)
                    n.gather++;
            }
        }
        free(stride);
        free(known);
    }
    return n;
}

ic_kernel_mode ic_kernel_mode_of(const ic_kernel *k)
{
    bool reduce = false;
    for (int s = 0; s < k->nstages; s++)
        reduce |= k->stages[s].kind == IC_STAGE_REDUCE;
    if (k->ninner == 0 && !reduce)
        return IC_KMODE_POINTWISE;
    if (k->ninner == 0 || k->nouter == 0)
        return IC_KMODE_ROW;
    int inner_var = k->nouter + k->ninner - 1, outer_var = k->nouter - 1;
    /* A strip only pays when the rows it walks are long enough to vectorise over. */
    if (k->outer[outer_var] < 16)
        return IC_KMODE_ROW;
    /* Vectorise along whichever dim leaves fewer gathers: a column sum or a matmul's
     * b[k, n] walk rows with a strip of columns, a row softmax runs along the row. */
    access_count row = count_accesses(k, inner_var), col = count_accesses(k, outer_var);
    if (col.gather != row.gather)
        return col.gather < row.gather ? IC_KMODE_COLUMN : IC_KMODE_ROW;
    return col.unit > row.unit ? IC_KMODE_COLUMN : IC_KMODE_ROW;
}

/* ---- modules: verify, optimise, print ---- */

ic_status ic_llvm_module_verify(ic_llvm_module *m)
{
    char *msg = NULL;
    if (!m->mod)
        return ic__error(m->c, IC_EINVAL, "codegen: the module was handed to the JIT");
    if (LLVMVerifyModule(m->mod, LLVMReturnStatusAction, &msg)) {
        ic_status s = ic__error(m->c, IC_ELLVM, "codegen: generated module is invalid: %s",
                                msg ? msg : "?");
        LLVMDisposeMessage(msg);
        return s;
    }
    LLVMDisposeMessage(msg);
    return IC_OK;
}

ic_status ic_llvm_module_optimize(ic_llvm_module *m)
{
    if (!m->mod)
        return ic__error(m->c, IC_EINVAL, "codegen: the module was handed to the JIT");
    LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(o, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(o, 1);
    LLVMPassBuilderOptionsSetLoopInterleaving(o, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(o, 1);
    /* GEMM kernels are vector code already (the micro-kernel's fmas, the packing's block
     * transposes); the loop vectorizer only has their epilogue loop left to do, and O1 still
     * runs it (and honours the micro-kernel's unroll count). On the BERT layer O1 made the
     * same code speed as O3 (single-thread CPU time of every GEMM within noise, 1-2%) and
     * optimised these modules in about half of O3's time. Loop nests keep O3. */
    bool all_gemm = m->nkernels > 0 && m->ngemm == m->nkernels;
    LLVMErrorRef e = LLVMRunPasses(m->mod, all_gemm ? "default<O1>" : "default<O3>", m->t->tm, o);
    LLVMDisposePassBuilderOptions(o);
    if (e)
        return ic__llvm_error(m->c, e, "codegen: O3 pipeline");
    ic__after_o3(m->mod);
    return IC_OK;
}

int ic_llvm_module_num_kernels(const ic_llvm_module *m) { return m->nkernels; }

const char *ic_llvm_module_kernel_symbol(const ic_llvm_module *m, int i)
{
    return i >= 0 && i < m->nkernels ? m->syms[i] : NULL;
}

char *ic_llvm_module_ir_string(const ic_llvm_module *m)
{
    if (!m->mod)
        return NULL;
    char *s = LLVMPrintModuleToString(m->mod);
    char *r = s ? strdup(s) : NULL;
    LLVMDisposeMessage(s);
    return r;
}

ic_status ic_llvm_module_print(FILE *f, const ic_llvm_module *m)
{
    char *s = ic_llvm_module_ir_string(m);
    if (!s)
        return ic__error(m->c, IC_EINVAL, "codegen: no module to print");
    fputs(s, f);
    free(s);
    return IC_OK;
}

char *ic_llvm_module_asm_string(ic_llvm_module *m)
{
    if (!m->mod)
        return NULL;
    /* Code generation rewrites IR (CodeGenPrepare): work on a copy. */
    LLVMModuleRef copy = LLVMCloneModule(m->mod);
    LLVMMemoryBufferRef buf = NULL;
    char *msg = NULL, *r = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(m->t->tm, copy, LLVMAssemblyFile, &msg, &buf)) {
        ic__error(m->c, IC_ELLVM, "codegen: assembly: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
    } else {
        size_t n = LLVMGetBufferSize(buf);
        r = malloc(n + 1);
        if (r) {
            memcpy(r, LLVMGetBufferStart(buf), n);
            r[n] = 0;
        }
        LLVMDisposeMemoryBuffer(buf);
    }
    LLVMDisposeModule(copy);
    return r;
}

ic_status ic_llvm_module_print_asm(FILE *f, ic_llvm_module *m)
{
    char *s = ic_llvm_module_asm_string(m);
    if (!s)
        return m->mod ? IC_ELLVM : ic__error(m->c, IC_EINVAL, "codegen: no module to print");
    fputs(s, f);
    free(s);
    return IC_OK;
}
