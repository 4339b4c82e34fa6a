/* contract.c - recognises the contraction sum_k f(load A) * g(load B) in stage 0 of a kernel
 * (analysis-impl.h): the part of GEMM matching both code generators share. f and g are
 * producers Fuse left inline (a cast, a scale), walked back to their LOAD. */
#include <string.h>
#include "analysis-impl.h"

static bool is16(ic_dtype t) { return t == IC_F16 || t == IC_BF16; }
static bool is_float(ic_dtype t) { return t == IC_F32 || t == IC_F64 || is16(t); }

/* Instruction i of st as a multiplicand (see ic__contract_opnd); false if it is none. */
static bool operand(const ic_stage *st, int i, ic__contract_opnd *x)
{
    memset(x, 0, sizeof *x);
    if (i < 0 || st->instr[i].type != IC_F32)
        return false;
    x->val = i;
    while (st->instr[i].op != IC_L_LOAD) {
        const ic_linstr *in = &st->instr[i];
        bool epi = ic_lop_has_trait(in->op, IC_LT_EPILOGUE);
        bool unary = epi && ic_lop_is_unary(in->op), binary = epi && ic_lop_is_binary(in->op);
        if (x->nch + 2 > IC__CONTRACT_MAXCHAIN || !is_float(in->type) || (!unary && !binary) ||
            in->a < 0 || in->a >= i)
            return false;
        x->ch[x->nch++] = i;
        x->ninstr++;
        if (binary) { /* one side a constant, the chain continues on the other */
            if (in->b < 0 || in->b >= i)
                return false;
            bool ca = st->instr[in->a].op == IC_L_CONST, cb = st->instr[in->b].op == IC_L_CONST;
            if (ca == cb)
                return false;
            x->ch[x->nch++] = ca ? in->a : in->b;
            i = ca ? in->b : in->a;
        } else {
            i = in->a;
        }
    }
    x->ld = i;
    x->off = st->instr[i].a;
    ic_dtype lt = st->instr[i].type;
    if (!is_float(lt) || st->instr[i].buf < 0 || x->off < 0 || x->off >= i)
        return false;
    for (int a = 1; a < x->nch; a++) /* ascending: operands before users */
        for (int b = a; b > 0 && x->ch[b - 1] > x->ch[b]; b--) {
            int t = x->ch[b];
            x->ch[b] = x->ch[b - 1];
            x->ch[b - 1] = t;
        }
    /* the plain conversions: nothing (f32), or one cast to f32 of a f16/bf16 load */
    x->xform = !(x->ninstr == 0 || (x->ninstr == 1 && is16(lt)));
    const ic_linstr *v = &st->instr[x->val];
    x->vt = !x->xform ? lt : v->op == IC_L_CAST && is16(st->instr[v->a].type) ? st->instr[v->a].type : IC_F32;
    return true;
}

bool ic__contract_match(const ic_kernel *k, ic__contract *m)
{
    memset(m, 0, sizeof *m);
    if (!k || !k->stages || k->nstages < 1 || k->stages[0].kind != IC_STAGE_REDUCE ||
        k->stages[0].ninstr <= 0 || !k->stages[0].instr)
        return false;
    const ic_stage *st = &k->stages[0];
    m->red = -1;
    for (int i = 0; i < st->ninstr; i++) {
        const ic_linstr *in = &st->instr[i];
        if (in->op == IC_L_STORE)
            return false;
        if (in->op == IC_L_REDUCE) {
            if (m->red >= 0)
                return false;
            m->red = i;
        }
    }
    if (m->red < 0)
        return false;
    const ic_linstr *rin = &st->instr[m->red];
    if (rin->red != IC_RED_SUM || rin->type != IC_F32 || rin->a < 0 || rin->a >= m->red)
        return false;
    m->mul = rin->a;
    const ic_linstr *mul = &st->instr[m->mul];
    if (mul->op != IC_L_MUL || mul->type != IC_F32 || mul->a < 0 || mul->b < 0 || mul->a >= m->mul ||
        mul->b >= m->mul)
        return false;
    return operand(st, mul->a, &m->op[0]) && operand(st, mul->b, &m->op[1]);
}
