/* jit.c - OrcJIT: one LLJIT per compiled object owns its kernels' code; process symbols
 * (libomp's __kmpc_*, libm) are visible to the generated code. */
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include "llvmgen-impl.h"
#include "compile-impl.h"

struct ic__jit {
    ic_ctx *c;
    LLVMOrcLLJITRef j;
};

ic_status ic__jit_create(ic_ctx *c, const ic_codegen_target *t, ic__jit **out)
{
    *out = NULL;
    ic__llvm_init();
    ic__jit *jit = ic__calloc(c, 1, sizeof *jit);
    if (!jit)
        return ic__error(c, IC_ENOMEM, "jit: out of memory");
    jit->c = c;
    LLVMTargetMachineRef tm = ic__codegen_target_machine(t);
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

/* Machine code of one module, compiled ahead of the JIT (ic__jit_emit_object). */
struct ic__object {
    LLVMMemoryBufferRef buf;
};

ic_status ic__jit_emit_object(ic_ctx *c, ic_llvm_module *m, ic__object **out)
{
    *out = NULL;
    if (!m->mod)
        return ic__error(c, IC_EINVAL, "jit: the module was already handed over");
    /* a target machine per call: codegen mutates per-function state (subtarget caches) of
     * its target machine, so threads compiling at once must not share one */
    LLVMTargetMachineRef tm = ic__codegen_target_machine(m->t);
    ic__object *o = ic__calloc(c, 1, sizeof *o);
    if (!tm || !o) {
        if (tm)
            LLVMDisposeTargetMachine(tm);
        ic__free(c, o);
        return ic__error(c, IC_ENOMEM, "jit: out of memory for a target machine");
    }
    char *msg = NULL;
    LLVMBool bad = LLVMTargetMachineEmitToMemoryBuffer(tm, m->mod, LLVMObjectFile, &msg, &o->buf);
    LLVMDisposeTargetMachine(tm);
    if (bad) {
        ic_status s = ic__error(c, IC_ELLVM, "jit: code generation: %s", msg ? msg : "?");
        LLVMDisposeMessage(msg);
        ic__free(c, o);
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
    ic__free(c, o);
}

ic_status ic__jit_add_object(ic__jit *jit, ic__object *o)
{
    LLVMMemoryBufferRef buf = o->buf;
    o->buf = NULL; /* the JIT owns it now, even on failure */
    ic__jit_object_free(jit->c, o);
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

void ic__jit_destroy(ic__jit *jit)
{
    if (!jit)
        return;
    if (jit->j) {
        LLVMErrorRef e = LLVMOrcDisposeLLJIT(jit->j);
        if (e)
            LLVMConsumeError(e);
    }
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
