/* program.c - ic_llvmgen over an ic_program (the Lower layer's container); kept apart from
 * gen.c so that code generating from explicit kernels does not pull in the Lower layer. */
#include "llvmgen-impl.h"

ic_status ic_llvmgen(ic_ctx *c, const ic_program *p, const ic_codegen_target *t,
                     const ic_codegen_params *params, ic_llvm_module **out)
{
    *out = NULL;
    if (!p)
        return ic__error(c, IC_EINVAL, "codegen: no program");
    int nk = ic_program_num_kernels(p), nb = ic_program_num_buffers(p);
    ic_kernel *ks = ic__calloc(c, (size_t)nk + 1, sizeof *ks);
    ic_buffer *bs = ic__calloc(c, (size_t)nb + 1, sizeof *bs);
    ic_status s = IC_OK;
    if (!ks || !bs) {
        s = ic__error(c, IC_ENOMEM, "codegen: out of memory");
    } else {
        for (int i = 0; i < nk; i++)
            ks[i] = *ic_program_kernel(p, i);
        for (int i = 0; i < nb; i++)
            bs[i] = *ic_program_buffer(p, i);
        s = ic_llvmgen_kernels(c, nk, ks, nb, bs, t, params, out);
    }
    ic__free(c, ks);
    ic__free(c, bs);
    return s;
}
