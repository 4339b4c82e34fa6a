/* verify.c - checks a program's invariants: operands defined before use within their stage,
 * types, loop variables in range, ACC reading a REDUCE of an earlier stage, stores only to
 * outputs and temps, temps written by an earlier kernel before they are read, every output
 * written, and arena sharing only between temps whose lifetimes are disjoint. */
#include <limits.h>
#include <stdio.h>
#include "lower-impl.h"

typedef struct {
    const ic_program *p;
    const ic_kernel *k;
    const ic_stage *st;
    int si, nvars;
} vcx;

static ic_dtype ty(const vcx *x, int i) { return x->st->instr[i].type; }
static bool arith(ic_dtype t) { return t == IC_F32 || t == IC_F64 || t == IC_I32 || t == IC_I64; }
static bool fp(ic_dtype t) { return t == IC_F32 || t == IC_F64; }

static const char *operands(const vcx *x, int i, const ic_linstr *in, int n)
{
    int ops[3] = { in->a, in->b, in->c };
    for (int j = 0; j < n; j++)
        if (ops[j] < 0 || ops[j] >= i)
            return "operand is not an earlier instruction of the stage";
    return NULL;
}

static int arity(ic_lop op)
{
    if (op == IC_L_SELECT)
        return 3;
    if (op >= IC_L_ADD)
        return 2;
    if (op >= IC_L_NEG)
        return 1;
    return 0;
}

static const char *check_mem(const vcx *x, const ic_linstr *in)
{
    const ic_program *p = x->p;
    if (in->buf < 0 || in->buf >= p->nbufs)
        return "no such buffer";
    if (ty(x, in->a) != IC_I64)
        return "offset is not i64";
    ic_dtype bt = p->bufs[in->buf].dtype;
    if (in->op == IC_L_LOAD)
        return in->type == bt ? NULL : "load type differs from the buffer's dtype";
    if (p->bufs[in->buf].kind == IC_BUF_ARG || p->bufs[in->buf].kind == IC_BUF_PARAM)
        return "stores into an argument or param";
    return ty(x, in->b) == bt ? NULL : "stored value's type differs from the buffer's dtype";
}

static const char *check_special(const vcx *x, int i, const ic_linstr *in)
{
    switch (in->op) {
    case IC_L_VAR:
        return in->a >= 0 && in->a < x->nvars && in->type == IC_I64 ? NULL : "loop variable out of range";
    case IC_L_CONST:
        return arith(in->type) || in->type == IC_BOOL ? NULL : "constant of a memory-only type";
    case IC_L_LOAD: case IC_L_STORE: {
        const char *e = operands(x, i, in, in->op == IC_L_STORE ? 2 : 1);
        return e ? e : check_mem(x, in);
    }
    case IC_L_ACC: {
        if (in->a < 0 || in->a >= x->si || x->k->stages[in->a].kind != IC_STAGE_REDUCE)
            return "acc does not name an earlier reduce stage";
        const ic_stage *s = &x->k->stages[in->a];
        if (in->b < 0 || in->b >= s->ninstr || s->instr[in->b].op != IC_L_REDUCE)
            return "acc does not name a reduce";
        return s->instr[in->b].type == in->type ? NULL : "acc type differs from its reduce";
    }
    default: { /* REDUCE */
        if (x->st->kind != IC_STAGE_REDUCE)
            return "reduce outside a reduce stage";
        const char *e = operands(x, i, in, in->pred == IC_RED_ARGMAX ? 2 : 1);
        if (e)
            return e;
        if (in->pred < IC_RED_SUM || in->pred > IC_RED_ARGMAX)
            return "bad reduction kind";
        if (in->c == IC_RED_NAN_FREE && in->pred != IC_RED_MAX)
            return "nan_free on a reduction other than max";
        if (in->pred == IC_RED_ARGMAX)
            return in->type == IC_I64 && ty(x, in->b) == IC_I64 && arith(ty(x, in->a)) ? NULL
                                                                                   : "argmax types";
        return arith(in->type) && ty(x, in->a) == in->type ? NULL : "reduce type differs from its value";
    }
    }
}

static const char *check_instr(const vcx *x, int i)
{
    const ic_linstr *in = &x->st->instr[i];
    if ((unsigned)in->op >= IC_L_OP_COUNT || (unsigned)in->type >= IC_DTYPE_COUNT)
        return "bad opcode or type";
    if (in->op <= IC_L_REDUCE)
        return check_special(x, i, in);
    const char *e = operands(x, i, in, arity(in->op));
    if (e)
        return e;
    ic_dtype t = in->type;
    switch (in->op) {
    case IC_L_CAST:
        return NULL;
    case IC_L_NEG: case IC_L_ABS:
        return arith(t) && ty(x, in->a) == t ? NULL : "operand type";
    case IC_L_NOT:
        return t == IC_BOOL && ty(x, in->a) == IC_BOOL ? NULL : "not needs bool";
    case IC_L_ADD: case IC_L_SUB: case IC_L_MUL: case IC_L_POW: case IC_L_MAX: case IC_L_MIN:
        return arith(t) && ty(x, in->a) == t && ty(x, in->b) == t ? NULL : "operand types";
    case IC_L_DIV:
        return fp(t) && ty(x, in->a) == t && ty(x, in->b) == t ? NULL : "div needs floats";
    case IC_L_IDIV: case IC_L_MOD:
        return (t == IC_I64 || t == IC_I32) && ty(x, in->a) == t && ty(x, in->b) == t ? NULL
                                                                                     : "idiv/mod need integers";
    case IC_L_AND: case IC_L_OR:
        return t == IC_BOOL && ty(x, in->a) == t && ty(x, in->b) == t ? NULL : "and/or need bools";
    case IC_L_CMP:
        return t == IC_BOOL && ty(x, in->a) == ty(x, in->b) && in->pred >= 0 && in->pred <= IC_CMP_GE &&
                       (arith(ty(x, in->a)) || ty(x, in->a) == IC_BOOL) ? NULL : "cmp operands";
    case IC_L_SELECT:
        return ty(x, in->a) == IC_BOOL && ty(x, in->b) == t && ty(x, in->c) == t ? NULL : "select types";
    case IC_L_EXP:
        if (in->pred != 0 && in->pred != IC_EXP_LE0)
            return "exp flag";
        /* fallthrough */
    default: /* float unary */
        return fp(t) && ty(x, in->a) == t ? NULL : "needs a float operand of the result type";
    }
}

static ic_status fail(const vcx *x, int k, int i, const char *what)
{
    ic_ctx *c = x->p->c;
    return ic__error(c, IC_EINVAL, "program '%s' kernel %d '%s' stage %d %%%d: %s (internal error)",
                     ic_graph_name(x->p->g), k, x->k->name, x->si, i, what);
}

/* Whether a stage of kn before s stores into buf: a later stage of the kernel may read it
 * back (decompose.c keeps a row's intermediate in the buffer it then overwrites). */
static bool stored_earlier(const ic_kernel *kn, int s, int buf)
{
    for (int a = 0; a < s; a++)
        for (int i = 0; i < kn->stages[a].ninstr; i++)
            if (kn->stages[a].instr[i].op == IC_L_STORE && kn->stages[a].instr[i].buf == buf)
                return true;
    return false;
}

static ic_status check_kernel(const ic_program *p, int k, int *first_store, int *last_use)
{
    vcx x = { p, &p->kernels[k], NULL, 0, 0 };
    const ic_kernel *kn = x.k;
    if (kn->nouter < 1 || kn->nouter > IC_MAX_RANK || kn->ninner < 0 || kn->ninner > IC_MAX_RANK)
        return fail(&x, k, -1, "bad loop count");
    for (int s = 0; s < kn->nstages; s++) {
        x.st = &kn->stages[s];
        x.si = s;
        x.nvars = kn->nouter + (x.st->kind == IC_STAGE_BODY ? 0 : kn->ninner);
        if (x.st->kind != IC_STAGE_BODY && kn->ninner < 1)
            return fail(&x, k, -1, "reduce/inner stage without inner loops");
        for (int i = 0; i < x.st->ninstr; i++) {
            const char *e = check_instr(&x, i);
            if (e)
                return fail(&x, k, i, e);
            const ic_linstr *in = &x.st->instr[i];
            if (in->op == IC_L_STORE && first_store[in->buf] == INT_MAX)
                first_store[in->buf] = k;
            if (in->op == IC_L_LOAD && p->bufs[in->buf].kind == IC_BUF_TEMP && first_store[in->buf] >= k &&
                !(first_store[in->buf] == k && stored_earlier(kn, s, in->buf)))
                return fail(&x, k, i, "temp read before an earlier kernel wrote it");
            if (in->op == IC_L_LOAD || in->op == IC_L_STORE)
                last_use[in->buf] = k;
        }
    }
    return IC_OK;
}

static ic_status check_arena(const ic_program *p, const int *first, const int *last)
{
    for (int a = 0; a < p->nbufs; a++)
        for (int b = a + 1; b < p->nbufs; b++) {
            const ic_buffer *x = &p->bufs[a], *y = &p->bufs[b];
            if (x->kind != IC_BUF_TEMP || y->kind != IC_BUF_TEMP || first[a] == INT_MAX || first[b] == INT_MAX)
                continue;
            int64_t xs = x->numel * (int64_t)ic_dtype_size(x->dtype), ys = y->numel * (int64_t)ic_dtype_size(y->dtype);
            bool bytes = x->arena_offset < y->arena_offset + ys && y->arena_offset < x->arena_offset + xs;
            bool alive = first[a] <= last[b] && first[b] <= last[a];
            if (bytes && alive && xs && ys)
                return ic__error(p->c, IC_EINVAL, "program '%s': temps '%s' and '%s' share arena bytes "
                                 "while both are alive (internal error)", ic_graph_name(p->g), x->name, y->name);
        }
    return IC_OK;
}

ic_status ic_program_verify(const ic_program *p)
{
    int n = p->nbufs;
    int *first = ic__malloc(p->c, sizeof(int) * ((size_t)n + 1));
    int *last = ic__malloc(p->c, sizeof(int) * ((size_t)n + 1));
    ic_status st = IC_OK;
    if (!first || !last)
        st = ic__error(p->c, IC_ENOMEM, "out of memory");
    for (int b = 0; !st && b < n; b++) {
        first[b] = INT_MAX;
        last[b] = -1;
        if ((unsigned)p->bufs[b].dtype >= IC_DTYPE_COUNT || p->bufs[b].numel < 0)
            st = ic__error(p->c, IC_EINVAL, "program '%s': buffer %d has a bad dtype or size",
                           ic_graph_name(p->g), b);
    }
    for (int k = 0; !st && k < p->nkernels; k++)
        st = check_kernel(p, k, first, last);
    for (int b = 0; !st && b < n; b++)
        if (p->bufs[b].kind == IC_BUF_OUTPUT && first[b] == INT_MAX)
            st = ic__error(p->c, IC_EINVAL, "program '%s': output %d '%s' is never written",
                           ic_graph_name(p->g), p->bufs[b].index, p->bufs[b].name);
    if (!st)
        st = check_arena(p, first, last);
    ic__free(p->c, first);
    ic__free(p->c, last);
    return st;
}
