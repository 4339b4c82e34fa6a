/* affine.c - affine forms of loop-IR integer values (c0 + sum coef[v] var_v): the index
 * analysis of both code generators (analysis-impl.h). One forward pass, operands first. */
#include <string.h>
#include "analysis-impl.h"

static bool is_int(ic_dtype t) { return t == IC_I32 || t == IC_I64; }

bool ic__affine_is_const(const ic__affine *f)
{
    for (int v = 0; v < IC__NVARS; v++)
        if (f->coef[v])
            return false;
    return true;
}

void ic__affine_instr(const ic_linstr *in, int i, int nvars, const ic__affine *f, ic__affine *out)
{
    memset(out, 0, sizeof *out);
    if (!is_int(in->type) || nvars > IC__NVARS)
        return;
    const ic__affine *a = in->a >= 0 && in->a < i && f[in->a].ok ? &f[in->a] : NULL;
    const ic__affine *b = in->b >= 0 && in->b < i && f[in->b].ok ? &f[in->b] : NULL;
    switch (in->op) {
    case IC_L_VAR:
        if (in->a >= 0 && in->a < nvars)
            out->coef[in->a] = 1, out->ok = true;
        break;
    case IC_L_CONST:
        out->c0 = in->imm.is_int ? in->imm.i : (int64_t)in->imm.f;
        out->ok = true;
        break;
    case IC_L_CAST: /* between integer types: the index math is 64-bit */
        if (a)
            *out = *a;
        break;
    case IC_L_NEG:
        if (a) {
            out->c0 = -a->c0;
            for (int v = 0; v < IC__NVARS; v++)
                out->coef[v] = -a->coef[v];
            out->ok = true;
        }
        break;
    case IC_L_ADD:
    case IC_L_SUB:
        if (a && b) {
            int64_t sg = in->op == IC_L_ADD ? 1 : -1;
            out->c0 = a->c0 + sg * b->c0;
            for (int v = 0; v < IC__NVARS; v++)
                out->coef[v] = a->coef[v] + sg * b->coef[v];
            out->ok = true;
        }
        break;
    case IC_L_MUL:
        if (a && b && (ic__affine_is_const(a) || ic__affine_is_const(b))) {
            const ic__affine *x = ic__affine_is_const(a) ? b : a;
            int64_t s = ic__affine_is_const(a) ? a->c0 : b->c0;
            out->c0 = x->c0 * s;
            for (int v = 0; v < IC__NVARS; v++)
                out->coef[v] = x->coef[v] * s;
            out->ok = true;
        }
        break;
    default:
        break;
    }
}

void ic__affine_stage(const ic_stage *st, int nvars, ic__affine *f)
{
    for (int i = 0; i < st->ninstr; i++)
        ic__affine_instr(&st->instr[i], i, nvars, f, &f[i]);
}
