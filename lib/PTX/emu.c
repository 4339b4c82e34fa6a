/* emu.c - runs the GPU kernels on the CPU, for tests on machines without a GPU: the module
 * is generated exactly as for NVPTX (same plan, lanes, vector accesses, unrolling, shared
 * memory layout) except that thread ids, warp shuffles, barriers, f16 conversions and the
 * tensor-core instructions are calls into this file, and it is JIT-compiled for the host: the
 * math library (lib/LLVMGen/math.c) is IEEE-exact IR, the same on both. Each block's threads are host threads (blocks
 * run one after another); a warp's shuffle is an exchange between two warp barriers. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm-c/Analysis.h>
#include "ptx-impl.h"

typedef void (*emu_fn)(void *const *bufs);

typedef struct {
    emu_fn fn;
    void *const *bufs;
    int block;
    int64_t grid;
    pthread_barrier_t bar;
    pthread_barrier_t *wbar;   /* one per warp */
    uint32_t *slot;            /* one per thread */
    uint32_t *xslot;           /* 8 per thread: mma fragments */
    void **pslot;              /* one per thread: ldmatrix row addresses */
} emu_launch;

typedef struct {
    emu_launch *L;
    int tid;
    int ctaid;
} emu_thread;

static __thread emu_thread *emu_cur;

/* The functions generated code calls (by absolute address, see define_symbols). */
static int32_t emu_tid(void) { return emu_cur->tid; }
static int32_t emu_ctaid(void) { return emu_cur->ctaid; }
static void emu_barrier(void) { pthread_barrier_wait(&emu_cur->L->bar); }
static float emu_h2f(uint16_t h) { return ic_f16_to_f32(h); }
static uint16_t emu_f2h(float f) { return ic_f32_to_f16(f); }
static uint16_t emu_d2h(double d) { return ic_f32_to_f16((float)d); }

static uint32_t emu_shfl(uint32_t v, int32_t off)
{
    emu_launch *L = emu_cur->L;
    int t = emu_cur->tid, w = t / 32;
    L->slot[t] = v;
    pthread_barrier_wait(&L->wbar[w]);
    uint32_t r = L->slot[w * 32 + ((t % 32) ^ (off & 31))];
    pthread_barrier_wait(&L->wbar[w]);
    return r;
}

/* cp.async: `srcbytes` bytes copied, the rest of `bytes` zero-filled (synchronously: the
 * barrier after the wait orders it as on the GPU). */
static void emu_cpasync(void *dst, const void *src, int32_t bytes, int32_t srcbytes)
{
    if (srcbytes > bytes)
        srcbytes = bytes;
    if (srcbytes > 0)
        memcpy(dst, src, (size_t)srcbytes);
    if (srcbytes < bytes)
        memset((char *)dst + (srcbytes > 0 ? srcbytes : 0), 0, (size_t)(bytes - (srcbytes > 0 ? srcbytes : 0)));
}

/* ldmatrix.sync.aligned.m8n8.x4[.trans].b16: lanes 8i..8i+7 give the row addresses of matrix
 * i; lane l receives in out[i] the elements (l/4, 2(l%4)) and (l/4, 2(l%4)+1) of matrix i, or
 * with trans (2(l%4), l/4) and (2(l%4)+1, l/4). */
static void emu_ldmatrix(void *addr, int32_t trans, uint32_t *out)
{
    emu_launch *L = emu_cur->L;
    int t = emu_cur->tid, w = t / 32, lane = t % 32;
    L->pslot[t] = addr;
    pthread_barrier_wait(&L->wbar[w]);
    for (int i = 0; i < 4; i++) {
        uint16_t lo, hi;
        if (!trans) {
            const uint16_t *row = L->pslot[w * 32 + i * 8 + lane / 4];
            lo = row[(lane % 4) * 2];
            hi = row[(lane % 4) * 2 + 1];
        } else {
            const uint16_t *r0 = L->pslot[w * 32 + i * 8 + (lane % 4) * 2];
            const uint16_t *r1 = L->pslot[w * 32 + i * 8 + (lane % 4) * 2 + 1];
            lo = r0[lane / 4];
            hi = r1[lane / 4];
        }
        out[i] = (uint32_t)lo | (uint32_t)hi << 16;
    }
    pthread_barrier_wait(&L->wbar[w]);
}

static float emu_h16(uint32_t reg, int half, int32_t bf16)
{
    uint16_t h = (uint16_t)(reg >> (16 * half));
    return bf16 ? ic_bf16_to_f32(h) : ic_f16_to_f32(h);
}

/* cvt.rna.tf32.f32: to the nearest number with a 10-bit mantissa, ties away from zero (add
 * half of the dropped 13 bits to the magnitude, then drop them; a carry into the exponent is
 * right, and rounds the largest finite values to infinity as the hardware does). NaN and
 * infinity pass unchanged. */
static uint32_t emu_cvt_tf32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u)
        return u;
    return (u + 0x1000u) & 0xffffe000u;
}

/* What an mma .tf32 operand register means: its top 19 bits (the tensor core ignores the low
 * 13 mantissa bits, so unrounded input is truncated). */
static float emu_tf32(uint32_t reg)
{
    float f;
    reg &= 0xffffe000u;
    memcpy(&f, &reg, sizeof f);
    return f;
}

/* mma.sync.aligned with f32 accumulators; kind 0: m16n8k16 .f16, 1: m16n8k16 .bf16, 2:
 * m16n8k8 .tf32. ab[0..3] this lane's A fragment, ab[4..5] its B fragment; c[0..3] its
 * accumulators (rows l/4 and l/4+8, columns 2(l%4) and +1). 16-bit: A(row, k) is half k%2
 * of register (row>=8) + 2(k>=8) of lane (row%8)*4 + (k%8)/2, B(k, col) half k%2 of register
 * 4 + (k>=8) of lane col*4 + (k%8)/2. TF32: A(row, k) is register (row>=8) + 2(k>=4) of lane
 * (row%8)*4 + k%4, B(k, col) register 4 + (k>=4) of lane col*4 + k%4. Products of TF32 values
 * are exact in f32; the sum is accumulated in f32 in k order. */
static void emu_mma(int32_t kind, const uint32_t *ab, float *c)
{
    emu_launch *L = emu_cur->L;
    int t = emu_cur->tid, w = t / 32, lane = t % 32;
    memcpy(&L->xslot[t * 8], ab, 6 * sizeof *ab);
    pthread_barrier_wait(&L->wbar[w]);
    const uint32_t *x = &L->xslot[w * 32 * 8];
    float d[4];
    for (int r = 0; r < 4; r++) {
        int row = lane / 4 + (r >= 2 ? 8 : 0), col = (lane % 4) * 2 + (r & 1);
        float s = c[r];
        if (kind == 2) {
            for (int k = 0; k < 8; k++) {
                int ta = (row % 8) * 4 + k % 4, ra = (row >= 8) + 2 * (k >= 4);
                int tb = col * 4 + k % 4, rb = 4 + (k >= 4);
                s += emu_tf32(x[ta * 8 + ra]) * emu_tf32(x[tb * 8 + rb]);
            }
            d[r] = s;
            continue;
        }
        for (int k = 0; k < 16; k++) {
            int ta = (row % 8) * 4 + (k % 8) / 2, ra = (row >= 8) + 2 * (k >= 8);
            int tb = col * 4 + (k % 8) / 2, rb = 4 + (k >= 8);
            s += emu_h16(x[ta * 8 + ra], k % 2, kind) * emu_h16(x[tb * 8 + rb], k % 2, kind);
        }
        d[r] = s;
    }
    pthread_barrier_wait(&L->wbar[w]);
    memcpy(c, d, sizeof d);
}

static void *worker(void *arg)
{
    emu_thread *t = arg;
    emu_cur = t;
    for (int64_t b = 0; b < t->L->grid; b++) {
        t->ctaid = (int)b;
        t->L->fn(t->L->bufs);
        pthread_barrier_wait(&t->L->bar); /* the block is done before shared memory is reused */
    }
    return NULL;
}

static ic_status launch(ic_ctx *c, emu_fn fn, int64_t grid, int block, void *const *bufs)
{
    if (grid <= 0)
        return IC_OK;
    emu_launch L;
    memset(&L, 0, sizeof L);
    L.fn = fn;
    L.bufs = bufs;
    L.block = block;
    L.grid = grid;
    int nw = (block + 31) / 32;
    L.wbar = ic__calloc(c, (size_t)nw, sizeof *L.wbar);
    L.slot = ic__calloc(c, (size_t)block, sizeof *L.slot);
    L.xslot = ic__calloc(c, (size_t)block * 8, sizeof *L.xslot);
    L.pslot = ic__calloc(c, (size_t)block, sizeof *L.pslot);
    emu_thread *ts = ic__calloc(c, (size_t)block, sizeof *ts);
    pthread_t *th = ic__calloc(c, (size_t)block, sizeof *th);
    ic_status s = IC_OK;
    if (!L.wbar || !L.slot || !L.xslot || !L.pslot || !ts || !th) {
        s = ic__error(c, IC_ENOMEM, "ptx emulator: out of memory");
        goto done;
    }
    pthread_barrier_init(&L.bar, NULL, (unsigned)block);
    for (int w = 0; w < nw; w++)
        pthread_barrier_init(&L.wbar[w], NULL, 32);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 1 << 20);
    int started = 0;
    for (int t = 0; t < block; t++) {
        ts[t].L = &L;
        ts[t].tid = t;
        if (pthread_create(&th[t], &attr, worker, &ts[t]))
            break;
        started++;
    }
    pthread_attr_destroy(&attr);
    if (started < block) { /* cannot run a partial block: its barriers would never open */
        IC_ASSERT(started == 0 && "could not start every emulated thread");
        s = ic__error(c, IC_ENOMEM, "ptx emulator: cannot start %d threads", block);
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&L.bar);
    for (int w = 0; w < nw; w++)
        pthread_barrier_destroy(&L.wbar[w]);
done:
    ic__free(c, L.wbar);
    ic__free(c, L.slot);
    ic__free(c, L.xslot);
    ic__free(c, L.pslot);
    ic__free(c, ts);
    ic__free(c, th);
    return s;
}

static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void host_init_once(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
}

static ic_status llvm_err(ic_ctx *c, LLVMErrorRef e, const char *what)
{
    char *m = LLVMGetErrorMessage(e);
    ic__error(c, IC_ELLVM, "ptx emulator: %s: %s", what, m ? m : "?");
    LLVMDisposeErrorMessage(m);
    return IC_ELLVM;
}

static ic_status define_symbols(ic_ctx *c, LLVMOrcLLJITRef j)
{
    static const struct { const char *name; void *addr; } syms[] = {
        { "ic__emu_tid", (void *)emu_tid },     { "ic__emu_ctaid", (void *)emu_ctaid },
        { "ic__emu_barrier", (void *)emu_barrier }, { "ic__emu_shfl", (void *)emu_shfl },
        { "ic__emu_h2f", (void *)emu_h2f },
        { "ic__emu_f2h", (void *)emu_f2h },     { "ic__emu_d2h", (void *)emu_d2h },
        { "ic__emu_cpasync", (void *)emu_cpasync }, { "ic__emu_ldmatrix", (void *)emu_ldmatrix },
        { "ic__emu_mma", (void *)emu_mma }, { "ic__emu_cvt_tf32", (void *)emu_cvt_tf32 },
        { "ic__emu_mbar_init", (void *)ic__emu_mbar_init }, { "ic__emu_mbar_arrive", (void *)ic__emu_mbar_arrive },
        { "ic__emu_mbar_test", (void *)ic__emu_mbar_test }, { "ic__emu_wgmma", (void *)ic__emu_wgmma },
        { "ic__emu_wgsync", (void *)ic__emu_wgsync },
    };
    enum { N = sizeof syms / sizeof *syms };
    LLVMOrcCSymbolMapPair pairs[N];
    LLVMOrcExecutionSessionRef es = LLVMOrcLLJITGetExecutionSession(j);
    for (int i = 0; i < N; i++) {
        pairs[i].Name = LLVMOrcExecutionSessionIntern(es, syms[i].name);
        pairs[i].Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)syms[i].addr;
        pairs[i].Sym.Flags.GenericFlags = LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
        pairs[i].Sym.Flags.TargetFlags = 0;
    }
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(pairs, N);
    LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(j), mu);
    return e ? llvm_err(c, e, "defining the emulator's symbols") : IC_OK;
}

/* `void <name>_emu(ptr bufs)`: calls the kernel with the buffers it takes (k->args). */
static void add_wrapper(ic__pg *G, const ic_ptx_kernel *pk)
{
    const char *name = pk->name;
    char wname[300];
    snprintf(wname, sizeof wname, "%s_emu", name);
    LLVMValueRef k = LLVMGetNamedFunction(G->mod, name);
    LLVMTypeRef pt = LLVMPointerTypeInContext(G->ctx, 0);
    LLVMValueRef fn = LLVMAddFunction(G->mod, wname, LLVMFunctionType(G->t_void, &pt, 1, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(G->ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(G->ctx, fn, "entry"));
    int n = pk->nargs;
    LLVMValueRef *args = ic__calloc(G->c, (size_t)n + 1, sizeof *args);
    IC_ASSERT(args);
    for (int i = 0; i < n; i++) {
        LLVMValueRef idx = LLVMConstInt(G->t_i64, (unsigned)pk->args[i], 0);
        LLVMValueRef p = LLVMBuildGEP2(b, pt, LLVMGetParam(fn, 0), &idx, 1, "");
        args[i] = LLVMBuildLoad2(b, pt, p, "");
    }
    LLVMBuildCall2(b, LLVMGlobalGetValueType(k), k, args, (unsigned)n, "");
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);
    ic__free(G->c, args);
}

ic_status ic_ptx_emulate_kernels(ic_ctx *c, int nk, const ic_kernel *ks, int nbufs,
                                 const ic_buffer *bufs, const ic_ptx_params *params,
                                 void *const *mem)
{
    return ic_ptx_emulate_kernels_opts(c, nk, ks, nbufs, bufs, NULL, params, mem);
}

ic_status ic_ptx_emulate_kernels_opts(ic_ctx *c, int nk, const ic_kernel *ks, int nbufs,
                                      const ic_buffer *bufs, const ic_ptx_options *opts,
                                      const ic_ptx_params *params, void *const *mem)
{
    if (nk < 0 || nbufs < 0 || (nk && !ks) || (nbufs && (!bufs || !mem)))
        return ic__error(c, IC_EINVAL, "ptx emulator: bad kernel or buffer list");
    pthread_once(&host_once, host_init_once);
    ic_ptx_module *m = ic__ptx_module_new(c, nk);
    if (!m)
        return ic__error(c, IC_ENOMEM, "ptx emulator: out of memory");
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    ic__pg G;
    memset(&G, 0, sizeof G);
    G.c = c;
    G.sm = 70;   /* portable paths: no bf16 cvt, no max.NaN */
    G.emu = true;
    G.ctx = LLVMOrcThreadSafeContextGetContext(tsc);
    G.mod = LLVMModuleCreateWithNameInContext("ic_ptx_emu", G.ctx);
    G.b = LLVMCreateBuilderInContext(G.ctx);
    G.nbufs = nbufs;
    G.bufs = bufs;
    ic__pg_init_types(&G);
    char *triple = LLVMGetDefaultTargetTriple();
    LLVMSetTarget(G.mod, triple);
    LLVMDisposeMessage(triple);
    ic_ptx_options o = { .sm = 70 };
    if (opts) {
        o.num_sms = opts->num_sms;
        o.allow_tf32 = opts->allow_tf32;
    }
    ic_status s = ic__ptx_gen_all(&G, m, nk, ks, NULL, &o, params);
    for (int i = 0; !s && i < nk; i++)
        add_wrapper(&G, &m->kernels[i]);
    LLVMDisposeBuilder(G.b);
    char *msg = NULL;
    if (!s && LLVMVerifyModule(G.mod, LLVMReturnStatusAction, &msg))
        s = ic__error(c, IC_ELLVM, "ptx emulator: generated IR does not verify: %.1500s", msg ? msg : "?");
    LLVMDisposeMessage(msg);
    if (!s) {
        LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
        LLVMErrorRef e = LLVMRunPasses(G.mod, "default<O1>", NULL, po);
        LLVMDisposePassBuilderOptions(po);
        if (e)
            s = llvm_err(c, e, "optimising");
    }
    LLVMOrcLLJITRef j = NULL;
    if (!s) {
        LLVMErrorRef e = LLVMOrcCreateLLJIT(&j, NULL);
        if (e)
            s = llvm_err(c, e, "creating LLJIT");
    }
    if (!s)
        s = define_symbols(c, j);
    if (!s) {
        LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(G.mod, tsc);
        G.mod = NULL;
        LLVMErrorRef e = LLVMOrcLLJITAddLLVMIRModule(j, LLVMOrcLLJITGetMainJITDylib(j), tsm);
        if (e)
            s = llvm_err(c, e, "adding the module");
    }
    for (int i = 0; !s && i < nk; i++) {
        char wname[300];
        snprintf(wname, sizeof wname, "%s_emu", m->kernels[i].name);
        LLVMOrcExecutorAddress addr = 0;
        LLVMErrorRef e = LLVMOrcLLJITLookup(j, &addr, wname);
        if (e) {
            s = llvm_err(c, e, "looking up a kernel");
            break;
        }
        s = launch(c, (emu_fn)(uintptr_t)addr, m->kernels[i].grid, m->kernels[i].block, mem);
    }
    if (G.mod)
        LLVMDisposeModule(G.mod);
    if (j) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(j);
        if (e)
            LLVMConsumeError(e);
    }
    LLVMOrcDisposeThreadSafeContext(tsc);
    ic_ptx_module_destroy(m);
    return s;
}

ic_status ic_ptx_emulate(ic_ctx *c, const ic_program *p, const ic_ptx_params *params,
                         const ic_tensor *args, int nargs, ic_tensor *outs, int nouts)
{
    return ic_ptx_emulate_opts(c, p, NULL, params, args, nargs, outs, nouts);
}

ic_status ic_ptx_emulate_opts(ic_ctx *c, const ic_program *p, const ic_ptx_options *o,
                              const ic_ptx_params *params, const ic_tensor *args, int nargs,
                              ic_tensor *outs, int nouts)
{
    int nb = ic_program_num_buffers(p), nk = ic_program_num_kernels(p);
    void **mem = ic__calloc(c, (size_t)nb + 1, sizeof *mem);
    void **copies = ic__calloc(c, (size_t)nb + 1, sizeof *copies);
    ic_kernel *ks = ic__calloc(c, (size_t)nk + 1, sizeof *ks);
    ic_buffer *bs = ic__calloc(c, (size_t)nb + 1, sizeof *bs);
    int64_t arena_bytes = ic_program_arena_size(p);
    void *arena = arena_bytes > 0 ? ic__calloc(c, (size_t)arena_bytes, 1) : NULL;
    ic_status s = IC_OK;
    if (!mem || !copies || !ks || !bs || (arena_bytes > 0 && !arena)) {
        s = ic__error(c, IC_ENOMEM, "ptx emulator: out of memory");
        goto done;
    }
    for (int i = 0; i < nk; i++)
        ks[i] = *ic_program_kernel(p, i);
    for (int i = 0; i < nb && !s; i++) {
        const ic_buffer *b = ic_program_buffer(p, i);
        bs[i] = *b;
        size_t bytes = (size_t)b->numel * ic_dtype_size(b->dtype);
        switch (b->kind) {
        case IC_BUF_ARG: {
            if (b->index < 0 || b->index >= nargs) {
                s = ic__error(c, IC_EINVAL, "ptx emulator: argument %d of %d missing", b->index, nargs);
                break;
            }
            const ic_tensor *t = &args[b->index];
            if (ic_tensor_numel(t) != b->numel || t->dtype != b->dtype) {
                s = ic__error(c, IC_EINVAL, "ptx emulator: argument %d ('%s') has the wrong dtype or size",
                              b->index, b->name ? b->name : "?");
                break;
            }
            if (ic_tensor_is_contiguous(t)) {
                mem[i] = t->data;
                break;
            }
            copies[i] = ic__malloc(c, bytes + 1);
            if (!copies[i]) {
                s = ic__error(c, IC_ENOMEM, "ptx emulator: out of memory");
                break;
            }
            size_t es = ic_dtype_size(t->dtype);
            for (int64_t e = 0; e < b->numel; e++) { /* gather the strided elements */
                int64_t off = 0, rem = e;
                for (int d = t->rank - 1; d >= 0; d--) {
                    off += (rem % t->shape[d]) * t->strides[d];
                    rem /= t->shape[d];
                }
                memcpy((char *)copies[i] + (size_t)e * es, (const char *)t->data + off * (int64_t)es, es);
            }
            mem[i] = copies[i];
            break;
        }
        case IC_BUF_PARAM:
            mem[i] = (void *)b->data;
            break;
        case IC_BUF_OUTPUT:
            if (b->index < 0 || b->index >= nouts || !outs[b->index].data ||
                ic_tensor_numel(&outs[b->index]) != b->numel || outs[b->index].dtype != b->dtype) {
                s = ic__error(c, IC_EINVAL, "ptx emulator: output %d must be allocated with dtype %s and %lld elements",
                              b->index, ic_dtype_name(b->dtype), (long long)b->numel);
                break;
            }
            mem[i] = outs[b->index].data;
            break;
        case IC_BUF_TEMP:
            if (b->arena_offset >= 0 && arena)
                mem[i] = (char *)arena + b->arena_offset;
            else if (!(mem[i] = copies[i] = ic__calloc(c, bytes + 1, 1)))
                s = ic__error(c, IC_ENOMEM, "ptx emulator: out of memory");
            break;
        }
    }
    if (!s)
        s = ic_ptx_emulate_kernels_opts(c, nk, ks, nb, bs, o, params, mem);
done:
    for (int i = 0; copies && i < nb; i++)
        ic__free(c, copies[i]);
    ic__free(c, copies);
    ic__free(c, mem);
    ic__free(c, ks);
    ic__free(c, bs);
    ic__free(c, arena);
    return s;
}
