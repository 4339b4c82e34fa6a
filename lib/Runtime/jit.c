/* jit.c - OrcJIT: one LLJIT per compiled object owns its kernels' code; process symbols
 * (libomp's __kmpc_*, libm) are visible to the generated code. Object code is made ahead of
 * the JIT (on several threads) and travels as bytes (ic__jit_object_pack): the persistent
 * cache and saved compiled models hold it that way. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include "llvmgen-impl.h"
#include "compile-impl.h"

/* A block the JIT maps for an object (ic__jit_add_object), unmapped with the JIT. */
typedef struct jit_map {
    void *p;
    size_t bytes;
} jit_map;

struct ic__jit {
    ic_ctx *c;
    LLVMOrcLLJITRef j;
    struct jit_map *maps;     /* zero blocks of its objects (define_zero_blocks) */
    int nmaps;
};

ic_status ic__jit_create(ic_ctx *c, ic_codegen_target *t, ic__jit **out)
{
    *out = NULL;
    ic__llvm_init();
    ic__jit *jit = ic__calloc(c, 1, sizeof *jit);
    if (!jit)
        return ic__error(c, IC_ENOMEM, "jit: out of memory");
    jit->c = c;
    /* the builder only copies the machine's settings: t's own serves (making one costs as
     * much as a tenth of a warm start) */
    LLVMTargetMachineRef tm = t->tm ? t->tm : ic__codegen_target_machine(t);
    t->tm = NULL;
    if (!tm) {
        ic__free(c, jit);
        return ic__error(c, IC_ELLVM, "jit: cannot create a target machine for %s",
                         ic_codegen_target_cpu(t));
    }
    LLVMOrcLLJITBuilderRef b = LLVMOrcCreateLLJITBuilder();
    /* the builder takes the JTMB, which takes the target machine */
    LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(b, LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(tm));
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&jit->j, b);
    if (e) {
        ic__free(c, jit);
        return ic__llvm_error(c, e, "jit: creating LLJIT");
    }
    LLVMOrcDefinitionGeneratorRef gen;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(jit->j),
                                                             NULL, NULL);
    if (e) {
        ic__jit_destroy(jit);
        return ic__llvm_error(c, e, "jit: process symbol generator");
    }
    LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(jit->j), gen);
    *out = jit;
    return IC_OK;
}

ic_status ic__jit_add(ic__jit *jit, ic_llvm_module *m)
{
    LLVMOrcThreadSafeModuleRef tsm = ic__llvm_module_take(m);
    if (!tsm)
        return ic__error(jit->c, IC_EINVAL, "jit: the module was already added");
    LLVMErrorRef e = LLVMOrcLLJITAddLLVMIRModule(jit->j, LLVMOrcLLJITGetMainJITDylib(jit->j), tsm);
    return e ? ic__llvm_error(jit->c, e, "jit: adding the module") : IC_OK;
}

/* Machine code of one module, compiled ahead of the JIT (ic__jit_emit_object), and the
 * zero-initialised blocks it uses that live outside it (move_zero_blocks). */
typedef struct {
    char *name;
    uint64_t bytes;
} zero_block;

struct ic__object {
    LLVMMemoryBufferRef buf;
    int nzero;
    zero_block *zero;
};

enum { ZERO_BLOCK_MIN = 64 << 10 };

static ic__object *object_new(ic_ctx *c)
{
    return ic__calloc(c, 1, sizeof(ic__object));
}

static bool object_add_zero(ic_ctx *c, ic__object *o, const char *name, uint64_t bytes)
{
    zero_block *z = ic__realloc(c, o->zero, sizeof *z * (size_t)(o->nzero + 1));
    if (!z)
        return false;
    o->zero = z;
    if (!(z[o->nzero].name = ic__strdup(c, name)))
        return false;
    z[o->nzero++].bytes = bytes;
    return true;
}

/* Large zero-initialised globals (a GEMM's scratch block: megabytes) become external
 * declarations that the JIT defines as fresh anonymous mappings: in the object they would be
 * zero-fill sections, which the linker clears page by page when it links the object (some
 * 5 ms per GEMM kernel, mostly page faults, on every start), while a mapping is zero already
 * and its pages are faulted in only when a run touches them. A new global replaces the old
 * one because a local's dso_local mark would survive a change of linkage, and the code must
 * reach the block through the GOT (it may be mapped more than 2 GB away). */
static bool move_zero_blocks(ic_ctx *c, LLVMModuleRef mod, ic__object *o)
{
    LLVMTargetDataRef td = LLVMGetModuleDataLayout(mod);
    LLVMValueRef next;
    for (LLVMValueRef gv = LLVMGetFirstGlobal(mod); gv; gv = next) {
        next = LLVMGetNextGlobal(gv);
        LLVMValueRef init = LLVMGetInitializer(gv);
        LLVMTypeRef ty = LLVMGlobalGetValueType(gv);
        LLVMLinkage l = LLVMGetLinkage(gv);
        if (!init || !LLVMIsNull(init) || LLVMIsGlobalConstant(gv) || LLVMIsThreadLocal(gv) ||
            (l != LLVMInternalLinkage && l != LLVMPrivateLinkage) || LLVMABISizeOfType(td, ty) < ZERO_BLOCK_MIN)
            continue;
        size_t len;
        const char *nm = LLVMGetValueName2(gv, &len);
        char *name = ic__strdup(c, nm);
        if (!name || !object_add_zero(c, o, name, LLVMABISizeOfType(td, ty))) {
            ic__free(c, name);
            return false;
        }
        LLVMSetValueName2(gv, "", 0);
        LLVMValueRef ext = LLVMAddGlobal(mod, ty, name);
        ic__free(c, name);
        LLVMSetAlignment(ext, LLVMGetAlignment(gv));
        LLVMReplaceAllUsesWith(gv, ext);
        LLVMDeleteGlobal(gv);
    }
    return true;
}

ic_status ic__jit_emit_object(ic_ctx *c, ic_llvm_module *m, ic__object **out)
{
    *out = NULL;
    if (!m->mod)
        return ic__error(c, IC_EINVAL, "jit: the module was already handed over");
    /* a target machine per call: codegen mutates per-function state (subtarget caches) of
     * its target machine, so threads compiling at once must not share one */
    LLVMTargetMachineRef tm = ic__codegen_target_machine(m->t);
    ic__object *o = object_new(c);
    if (!tm || !o || !move_zero_blocks(c, m->mod, o)) {
        if (tm)
            LLVMDisposeTargetMachine(tm);
        ic__jit_object_free(c, o);
        return ic__error(c, IC_ENOMEM, "jit: out of memory for a target machine");
    }
    char *msg = NULL;
    LLVMBool bad = LLVMTargetMachineEmitToMemoryBuffer(tm, m->mod, LLVMObjectFile, &msg, &o->buf);
    LLVMDisposeTargetMachine(tm);
    if (bad) {
        ic_status s = ic__error(c, IC_ELLVM, "jit: code generation: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        ic__jit_object_free(c, o);
        return s;
    }
    *out = o;
    return IC_OK;
}

void ic__jit_object_free(ic_ctx *c, ic__object *o)
{
    if (!o)
        return;
    if (o->buf)
        LLVMDisposeMemoryBuffer(o->buf);
    for (int i = 0; i < o->nzero; i++)
        ic__free(c, o->zero[i].name);
    ic__free(c, o->zero);
    ic__free(c, o);
}

/* ---- objects as bytes (the persistent cache's values, the artifact's kernels) ----
 * "ICOB" u32 1, u32 n + the kernel symbol, u32 blocks, per block u32 n + name and u64 bytes,
 * u64 n + the object file (at a multiple of 16 from the start). All little-endian. */

static const char obj_magic[4] = { 'I', 'C', 'O', 'B' };

static void put_bytes(char **p, const void *v, size_t n)
{
    if (*p)
        memcpy(*p, v, n);
    *p = *p ? *p + n : NULL;
}

/* The layout into out (NULL: only its size, returned). */
static size_t pack_into(const ic__object *o, const char *sym, const char *obj, size_t nobj, char *out)
{
    char *p = out;
    size_t n = 0;
    uint32_t ver = 1, ls = (uint32_t)strlen(sym), nz = (uint32_t)o->nzero;
#define PUT(v, k) (put_bytes(&p, (v), (k)), n += (k))
    PUT(obj_magic, 4);
    PUT(&ver, 4);
    PUT(&ls, 4);
    PUT(sym, ls);
    PUT(&nz, 4);
    for (int i = 0; i < o->nzero; i++) {
        uint32_t ln = (uint32_t)strlen(o->zero[i].name);
        PUT(&ln, 4);
        PUT(o->zero[i].name, ln);
        PUT(&o->zero[i].bytes, 8);
    }
    uint64_t lo = nobj;
    PUT(&lo, 8);
    static const char pad[16];
    size_t fill = (16 - n % 16) % 16;
    PUT(pad, fill);
    PUT(obj, nobj);
#undef PUT
    return n;
}

ic_status ic__jit_object_pack(ic_ctx *c, const ic__object *o, const char *sym, void **data, size_t *n)
{
    const char *obj = LLVMGetBufferStart(o->buf);
    size_t nobj = LLVMGetBufferSize(o->buf);
    *n = pack_into(o, sym, obj, nobj, NULL);
    if (!(*data = malloc(*n)))
        return ic__error(c, IC_ENOMEM, "jit: out of memory");
    pack_into(o, sym, obj, nobj, *data);
    return IC_OK;
}

typedef struct {
    const char *p, *end;
} reader;

static bool take(reader *r, void *v, size_t n)
{
    if ((size_t)(r->end - r->p) < n)
        return false;
    if (v)
        memcpy(v, r->p, n);
    r->p += n;
    return true;
}

/* A string of n bytes as a NUL-terminated copy (no NUL inside). */
static char *take_str(ic_ctx *c, reader *r, uint32_t n)
{
    if ((size_t)(r->end - r->p) < n || memchr(r->p, 0, n))
        return NULL;
    char *s = ic__malloc(c, (size_t)n + 1);
    if (s) {
        memcpy(s, r->p, n);
        s[n] = 0;
        r->p += n;
    }
    return s;
}

static bool unpack(ic_ctx *c, reader *r, const char *start, bool copy, ic__object *o, char **sym)
{
    char magic[4];
    uint32_t ver, ls, nz;
    if (!take(r, magic, 4) || memcmp(magic, obj_magic, 4) || !take(r, &ver, 4) || ver != 1 ||
        !take(r, &ls, 4) || !(*sym = take_str(c, r, ls)) || !take(r, &nz, 4) || nz > 4096)
        return false;
    for (uint32_t i = 0; i < nz; i++) {
        uint32_t ln;
        uint64_t bytes;
        char *name = take(r, &ln, 4) ? take_str(c, r, ln) : NULL;
        bool ok = name && take(r, &bytes, 8) && bytes > 0 && bytes < ((uint64_t)1 << 40) &&
                  object_add_zero(c, o, name, bytes);
        ic__free(c, name);
        if (!ok)
            return false;
    }
    uint64_t lo;
    size_t fill;
    if (!take(r, &lo, 8))
        return false;
    fill = (16 - (size_t)(r->p - start) % 16) % 16;
    if (!take(r, NULL, fill) || lo != (uint64_t)(r->end - r->p) || lo < 64 || memcmp(r->p, "\177ELF", 4))
        return false;
    o->buf = copy ? LLVMCreateMemoryBufferWithMemoryRangeCopy(r->p, (size_t)lo, "ic-kernel")
                  : LLVMCreateMemoryBufferWithMemoryRange(r->p, (size_t)lo, "ic-kernel", 0);
    return o->buf != NULL;
}

bool ic__jit_object_unpack(ic_ctx *c, const void *data, size_t n, bool copy, ic__object **out, char **sym)
{
    reader r = { data, (const char *)data + n };
    ic__object *o = object_new(c);
    *out = NULL;
    *sym = NULL;
    if (o && unpack(c, &r, data, copy, o, sym)) {
        *out = o;
        return true;
    }
    ic__jit_object_free(c, o);
    ic__free(c, *sym);
    *sym = NULL;
    return false;
}

/* Fresh zero pages for each of o's blocks, defined in the JIT under the block's name. */
static ic_status define_zero_blocks(ic__jit *jit, const ic__object *o)
{
    for (int i = 0; i < o->nzero; i++) {
        jit_map *m = ic__realloc(jit->c, jit->maps, sizeof *m * (size_t)(jit->nmaps + 1));
        if (!m)
            return ic__error(jit->c, IC_ENOMEM, "jit: out of memory");
        jit->maps = m;
        size_t bytes = (size_t)o->zero[i].bytes;
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return ic__error(jit->c, IC_ENOMEM, "jit: cannot map %zu bytes for '%s'", bytes, o->zero[i].name);
        m[jit->nmaps++] = (jit_map){ p, bytes };
        LLVMOrcCSymbolMapPair pair = {
            LLVMOrcLLJITMangleAndIntern(jit->j, o->zero[i].name),
            { (LLVMOrcExecutorAddress)(uintptr_t)p, { LLVMJITSymbolGenericFlagsExported, 0 } },
        };
        LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(&pair, 1);
        LLVMErrorRef e = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(jit->j), mu);
        if (e) {
            LLVMOrcDisposeMaterializationUnit(mu);
            return ic__llvm_error(jit->c, e, "jit: defining a zero block");
        }
    }
    return IC_OK;
}

ic_status ic__jit_add_object(ic__jit *jit, ic__object *o)
{
    ic_status s = define_zero_blocks(jit, o);
    LLVMMemoryBufferRef buf = o->buf;
    o->buf = NULL; /* the JIT owns it now, even on failure */
    ic__jit_object_free(jit->c, o);
    if (s) {
        LLVMDisposeMemoryBuffer(buf);
        return s;
    }
    LLVMErrorRef e = LLVMOrcLLJITAddObjectFile(jit->j, LLVMOrcLLJITGetMainJITDylib(jit->j), buf);
    return e ? ic__llvm_error(jit->c, e, "jit: adding object code") : IC_OK;
}

ic_status ic__jit_lookup(ic__jit *jit, const char *sym, void **fn)
{
    LLVMOrcExecutorAddress addr = 0;
    LLVMErrorRef e = LLVMOrcLLJITLookup(jit->j, &addr, sym);
    *fn = NULL;
    if (e) {
        char what[300];
        snprintf(what, sizeof what, "jit: looking up kernel '%s'", sym);
        return ic__llvm_error(jit->c, e, what);
    }
    *fn = (void *)(uintptr_t)addr;
    return IC_OK;
}

/* One lookup of many symbols: the session links every object they need in one pass (a lookup
 * per kernel costs about 0.1 ms each). The callback may run on another thread: wait for it. */
typedef struct {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool done;
    LLVMErrorRef err;
    int n;
    const char *const *syms;
    void **fns;
} lookup_wait;

static void lookup_done(LLVMErrorRef e, LLVMOrcCSymbolMapPairs r, size_t n, void *arg)
{
    lookup_wait *L = arg;
    for (size_t i = 0; !e && i < n; i++) {
        const char *name = LLVMOrcSymbolStringPoolEntryStr(r[i].Name);
        for (int k = 0; k < L->n; k++)
            if (strcmp(name, L->syms[k]) == 0)
                L->fns[k] = (void *)(uintptr_t)r[i].Sym.Address;
    }
    pthread_mutex_lock(&L->lock);
    L->err = e;
    L->done = true;
    pthread_cond_signal(&L->cond);
    pthread_mutex_unlock(&L->lock);
}

ic_status ic__jit_lookup_all(ic__jit *jit, int n, const char *const *syms, void **fns)
{
    LLVMOrcCLookupSetElement *set = ic__calloc(jit->c, (size_t)n + 1, sizeof *set);
    if (!set)
        return ic__error(jit->c, IC_ENOMEM, "jit: out of memory");
    for (int i = 0; i < n; i++) {
        set[i].Name = LLVMOrcLLJITMangleAndIntern(jit->j, syms[i]);
        set[i].LookupFlags = LLVMOrcSymbolLookupFlagsRequiredSymbol;
        fns[i] = NULL;
    }
    lookup_wait L = { .n = n, .syms = syms, .fns = fns };
    pthread_mutex_init(&L.lock, NULL);
    pthread_cond_init(&L.cond, NULL);
    LLVMOrcCJITDylibSearchOrderElement order = { LLVMOrcLLJITGetMainJITDylib(jit->j),
                                                 LLVMOrcJITDylibLookupFlagsMatchExportedSymbolsOnly };
    /* the lookup takes the names' references */
    LLVMOrcExecutionSessionLookup(LLVMOrcLLJITGetExecutionSession(jit->j), LLVMOrcLookupKindStatic, &order, 1,
                                  set, (size_t)n, lookup_done, &L);
    pthread_mutex_lock(&L.lock);
    while (!L.done)
        pthread_cond_wait(&L.cond, &L.lock);
    pthread_mutex_unlock(&L.lock);
    pthread_mutex_destroy(&L.lock);
    pthread_cond_destroy(&L.cond);
    ic__free(jit->c, set);
    if (L.err)
        return ic__llvm_error(jit->c, L.err, "jit: looking up the kernels");
    for (int i = 0; i < n; i++)
        if (!fns[i])
            return ic__error(jit->c, IC_ELLVM, "jit: kernel '%s' was not found", syms[i]);
    return IC_OK;
}

void ic__jit_destroy(ic__jit *jit)
{
    if (!jit)
        return;
    if (jit->j) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(jit->j);
        if (e)
            LLVMConsumeError(e);
    }
    for (int i = 0; i < jit->nmaps; i++)
        munmap(jit->maps[i].p, jit->maps[i].bytes);
    ic__free(jit->c, jit->maps);
    ic__free(jit->c, jit);
}

ic_status ic__jit_kernels(ic_ctx *c, int nk, const ic_kernel *k, int nb, const ic_buffer *b,
                          const ic_codegen_params *params, ic__jit **out, ic__kernel_fn *fns)
{
    ic_codegen_target *t = NULL;
    ic_llvm_module *m = NULL;
    ic__jit *jit = NULL;
    ic_status s;
    *out = NULL;
    if ((s = ic_codegen_target_create(c, &t)))
        return s;
    if (!(s = ic_llvmgen_kernels(c, nk, k, nb, b, t, params, &m)) &&
        !(s = ic_llvm_module_optimize(m)) && !(s = ic__jit_create(c, t, &jit)) &&
        !(s = ic__jit_add(jit, m))) {
        for (int i = 0; i < nk && !s; i++)
            s = ic__jit_lookup(jit, ic_llvm_module_kernel_symbol(m, i), (void **)&fns[i]);
    }
    ic_llvm_module_destroy(m);
    ic_codegen_target_destroy(t);
    if (s) {
        ic__jit_destroy(jit);
        return s;
    }
    *out = jit;
    return IC_OK;
}
