/* fuzz_artifact.c - CPU saved models (lib/Runtime/artifact.c): ic_compiled_load's parsing layer
 * (ic__compiled_artifact_open: container, meta, hashes, graph and weights, variants and
 * objects tables) over raw or sealed files (fuzz_artifact.h). It stops before linking: the
 * object code a saved model holds is trusted, as the README says, and is never fed to the JIT
 * here. What opens must find every object and variant its tables list. */
#include "fuzz_artifact.h" /* first: fuzz_common.h defines _GNU_SOURCE */
#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

static void cpu_host(FILE *f)
{
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    fprintf(f, "device cpu\ntriple %s\ncpu %s\nfeatures %s\n", triple, cpu, feat);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
}

static void check_store(ic_ctx *c, const ic__artifact *A)
{
    const ic__store *st = &A->store;
    for (int i = 0; i < st->nobj; i++) {
        const void *p;
        size_t n;
        FZ_CHECK(ic__store_find(st, st->obj[i].key, &p, &n), "object '%s' listed, not found", st->obj[i].key);
    }
    for (int i = 0; i < st->nvar; i++) {
        int nk;
        const char *target;
        FZ_CHECK(ic__store_variant(st, st->var[i].vals, st->nsyms, &nk, &target), "variant %d not found", i);
    }
    FZ_CHECK(ic_graph_verify(A->g) == IC_OK, "the rebuilt graph fails verify: %s", ic_last_error(c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ic_ctx *c = fz_ctx();
    char path[512];
    fz_artifact(c, path, sizeof path, "m.icm", data, size, cpu_host);
    ic__artifact *A = NULL;
    ic_status s = ic__compiled_artifact_open(c, path, &A);
    fz_note(c, s);
    if (s == IC_OK)
        check_store(c, A);
    else
        FZ_CHECK(ic_last_error(c)[0], "status %d without a message", (int)s);
    ic__artifact_free(A);
    ic_ctx_destroy(c);
    return 0;
}
