/* program.c - ic_llvmgen over an ic_program (the Lower layer's container); kept apart from
 * gen.c so that code generating from explicit kernels does not pull in the Lower layer. */
#include "llvmgen-impl.h"

ic_status ic__program_arrays(ic_ctx *c, const ic_program *p, const char *who, ic_kernel **ks,
                             ic_buffer **bs)
{
    *ks = NULL;
    *bs = NULL;
    if (!p)
        return ic__error(c, IC_EINVAL, "%s: no program", who);
    int nk = ic_program_num_kernels(p), nb = ic_program_num_buffers(p);
    *ks = ic__calloc(c, (size_t)nk + 1, sizeof **ks);
    *bs = ic__calloc(c, (size_t)nb + 1, sizeof **bs);
    if (!*ks || !*bs)
        return ic__error(c, IC_ENOMEM, "%s: out of memory", who);
    for (int i = 0; i < nk; i++)
        (*ks)[i] = *ic_program_kernel(p, i);
    for (int i = 0; i < nb; i++)
        (*bs)[i] = *ic_program_buffer(p, i);
    return IC_OK;
}

ic_status ic_llvmgen(ic_ctx *c, const ic_program *p, const ic_codegen_target *t,
                     const ic_codegen_params *params, ic_llvm_module **out)
{
    *out = NULL;
    ic_kernel *ks;
    ic_buffer *bs;
    ic_status s = ic__program_arrays(c, p, "codegen", &ks, &bs);
    if (!s)
        s = ic_llvmgen_kernels(c, ic_program_num_kernels(p), ks, ic_program_num_buffers(p), bs, t,
                               params, out);
    ic__free(c, ks);
    ic__free(c, bs);
    return s;
}
