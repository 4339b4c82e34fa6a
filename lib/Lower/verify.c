/* verify.c - checks a program's invariants: operands defined before use within their stage,
 * types, loop variables in range, ACC reading a REDUCE of an earlier stage, stores only to
 * outputs and temps, temps written by an earlier kernel before they are read, every output
 * written, and arena sharing only between temps whose lifetimes are disjoint. */
#include <limits.h>
#include <stdio.h>
#include "lower-impl.h"

typedef struct {
    const ic_kernel *k;
    int nbufs;
    const ic_buffer *bufs;
    const ic_stage *st;
    int si, nvars;
} vcx;

static ic_dtype ty(const vcx *x, int i) { return x->st->instr[i].type; }
static bool arith(ic_dtype t) { return t == IC_F32 || t == IC_F64 || t == IC_I32 || t == IC_I64; }
static bool fp(ic_dtype t) { return t == IC_F32 || t == IC_F64; }
static bool integer(ic_dtype t) { return t == IC_I32 || t == IC_I64; }
/* A type values are computed in: f16/bf16 and u8/i8/i16 exist only in memory (loads cast
 * them to f32 and i32). */
static bool computed(ic_dtype t) { return arith(t) || t == IC_BOOL; }

static const char *operands(const vcx *x, int i, const ic_linstr *in)
{
    int ops[3] = { in->a, in->b, in->c };
    for (int j = 0; j < ic_linstr_arity(in); j++)
        if (ops[j] < 0 || ops[j] >= i || x->st->instr[ops[j]].op == IC_L_STORE)
            return "operand is not an earlier value of the stage";
    return NULL;
}

static const char *check_mem(const vcx *x, const ic_linstr *in)
{
    if (in->buf < 0 || in->buf >= x->nbufs)
        return "no such buffer";
    if (ty(x, in->a) != IC_I64)
        return "offset is not i64";
    const ic_buffer *b = &x->bufs[in->buf];
    if ((unsigned)b->dtype >= IC_DTYPE_COUNT)
        return "buffer of unknown dtype";
    if (in->op == IC_L_LOAD)
        return in->type == b->dtype ? NULL : "load type differs from the buffer's dtype";
    if (b->kind == IC_BUF_ARG || b->kind == IC_BUF_PARAM)
        return "store into an argument or a parameter";
    return ty(x, in->b) == b->dtype ? NULL : "stored value's type differs from the buffer's dtype";
}

static const char *check_acc(const vcx *x, const ic_linstr *in)
{
    if (in->a < 0 || in->a >= x->si || x->k->stages[in->a].kind != IC_STAGE_REDUCE)
        return "acc does not name an earlier reduce stage";
    const ic_stage *s = &x->k->stages[in->a];
    if (in->b < 0 || in->b >= s->ninstr || s->instr[in->b].op != IC_L_REDUCE)
        return "acc does not name a reduce";
    return s->instr[in->b].type == in->type ? NULL : "acc type differs from its reduce";
}

static const char *check_reduce(const vcx *x, const ic_linstr *in)
{
    if (x->st->kind != IC_STAGE_REDUCE)
        return "reduce outside a reduce stage";
    if ((unsigned)in->red > IC_RED_ARGMAX)
        return "bad reduction kind";
    if ((in->flags & IC_LF_NAN_FREE) && in->red != IC_RED_MAX)
        return "nan_free on a reduction other than max";
    if (in->red == IC_RED_ARGMAX)
        return in->type == IC_I64 && ty(x, in->b) == IC_I64 && arith(ty(x, in->a)) ? NULL
                                                                               : "argmax types";
    /* bool max/min are any/all */
    bool bl = in->type == IC_BOOL && (in->red == IC_RED_MAX || in->red == IC_RED_MIN);
    return (arith(in->type) || bl) && ty(x, in->a) == in->type ? NULL : "reduce type differs from its value";
}

/* VAR CONST LOAD STORE ACC REDUCE: each its own rule. */
static const char *check_special(const vcx *x, const ic_linstr *in)
{
    switch (in->op) {
    case IC_L_VAR:
        return in->a >= 0 && in->a < x->nvars && in->type == IC_I64 ? NULL : "loop variable out of range";
    case IC_L_CONST:
        return computed(in->type) ? NULL : "constant of a memory-only type";
    case IC_L_LOAD: case IC_L_STORE:
        return check_mem(x, in);
    case IC_L_ACC:
        return check_acc(x, in);
    default:
        return check_reduce(x, in);
    }
}

/* The op's type rule (lops.def) on the result type t and the operand types. */
static const char *check_rule(const vcx *x, const ic_linstr *in, ic_lrule rule)
{
    if (rule == IC_LR_SPECIAL) /* VAR, CONST and ACC's a and b are not values */
        return check_special(x, in);
    ic_dtype t = in->type;
    int n = ic_linstr_arity(in);
    bool same = ty(x, in->a) == t && (n < 2 || ty(x, in->b) == t);
    switch (rule) {
    case IC_LR_ARITH: return arith(t) && same ? NULL : "operand types: one arithmetic type";
    case IC_LR_FLOAT: return fp(t) && same ? NULL : "operand types: one float type";
    case IC_LR_INT: return integer(t) && same ? NULL : "operand types: one integer type";
    case IC_LR_BOOL: return t == IC_BOOL && same ? NULL : "operand types: bools";
    case IC_LR_CAST: return computed(t) || ty(x, in->a) != t ? NULL : "cast to its own memory type";
    case IC_LR_CMP:
        return t == IC_BOOL && ty(x, in->a) == ty(x, in->b) && (unsigned)in->cmp <= IC_CMP_GE &&
                       computed(ty(x, in->a)) ? NULL : "cmp operands";
    case IC_LR_SELECT:
        return computed(t) && ty(x, in->a) == IC_BOOL && ty(x, in->b) == t && ty(x, in->c) == t
                   ? NULL : "select types";
    default:
        return "no such type rule";
    }
}

static const char *check_instr(const vcx *x, int i)
{
    const ic_linstr *in = &x->st->instr[i];
    const ic_lop_info *op = ic_lop_get(in->op);
    if (!op || (unsigned)in->type >= IC_DTYPE_COUNT)
        return "bad opcode or type";
    if (in->flags & ~op->flags)
        return "a flag its op does not take";
    const char *e = operands(x, i, in);
    if (e)
        return e;
    bool narrow = in->type == IC_F16 || in->type == IC_BF16;
    if (narrow && in->op != IC_L_LOAD && in->op != IC_L_STORE && in->op != IC_L_CAST)
        return "f16/bf16 exist only in memory: arithmetic must be in f32";
    if (ic__narrow_int(in->type) && in->op != IC_L_LOAD && in->op != IC_L_STORE && in->op != IC_L_CAST)
        return "u8/i8/i16 exist only in memory: arithmetic must be in i32";
    /* backends widen and truncate narrow integers only from and to i32 */
    if (in->op == IC_L_CAST && (ic__narrow_int(in->type) || ic__narrow_int(ty(x, in->a))) &&
        (in->type != IC_I32 && ty(x, in->a) != IC_I32))
        return "u8/i8/i16 are cast only from and to i32";
    return check_rule(x, in, op->rule);
}

/* Runs check_instr on every instruction of k; on a failure, *si / *ii locate it. */
static const char *check_stages(vcx *x, int *ii)
{
    const ic_kernel *k = x->k;
    if (k->nouter < 0 || k->nouter > IC_MAX_RANK || k->ninner < 0 || k->ninner > IC_MAX_RANK)
        return "bad loop count";
    for (int d = 0; d < k->nouter + k->ninner; d++)
        if ((d < k->nouter ? k->outer[d] : k->inner[d - k->nouter]) < 0)
            return "negative loop size";
    if (k->nstages < 0 || (k->nstages > 0 && !k->stages))
        return "bad stage list";
    for (x->si = 0; x->si < k->nstages; x->si++) {
        x->st = &k->stages[x->si];
        if ((unsigned)x->st->kind > IC_STAGE_INNER || x->st->ninstr < 0 || (x->st->ninstr && !x->st->instr))
            return "malformed stage";
        x->nvars = k->nouter + (x->st->kind == IC_STAGE_BODY ? 0 : k->ninner);
        for (*ii = 0; *ii < x->st->ninstr; (*ii)++) {
            const char *e = check_instr(x, *ii);
            if (e)
                return e;
        }
    }
    return NULL;
}

/* Every element an attention operand addresses lies in its buffer; operand o is w (0..4:
 * q k v mask out) of a, its rows and columns of sizes R and C. */
static const char *check_attn_operand(const ic_attention *a, const ic_attn_operand *o, int w, int nbufs,
                                      const ic_buffer *bufs)
{
    if (o->buf < 0)
        return w == 3 ? NULL : "attention operand without a buffer";
    if (o->buf >= nbufs)
        return "attention operand: no such buffer";
    const ic_buffer *b = &bufs[o->buf];
    if (w == 4 && (b->kind == IC_BUF_ARG || b->kind == IC_BUF_PARAM))
        return "attention stores into an argument or param";
    if (w != 3 && b->dtype != IC_F16 && b->dtype != IC_BF16 && b->dtype != IC_F32)
        return "attention q, k, v and out must be f16, bf16 or f32";
    int64_t R = w == 0 || w == 3 || w == 4 ? a->L : a->S, C = w == 3 ? a->S : a->E;
    int64_t lo = o->c0, hi = o->c0, sz[IC_MAX_RANK + 2], st[IC_MAX_RANK + 2];
    int n = 0;
    for (int i = 0; i < a->nb; i++)
        sz[n] = a->batch[i], st[n++] = o->sb[i];
    sz[n] = R, st[n++] = o->sr;
    sz[n] = C, st[n++] = o->sc;
    for (int i = 0; i < n; i++) {
        if (sz[i] == 0)
            return NULL; /* no element */
        int64_t ext = st[i] * (sz[i] - 1);
        if (ext < 0)
            lo += ext;
        else
            hi += ext;
    }
    return lo < 0 || hi >= b->numel ? "attention operand addresses elements outside its buffer" : NULL;
}

static ic_status verify_attention(ic_ctx *c, const char *who, const ic_kernel *k, int nbufs,
                                  const ic_buffer *bufs)
{
    const ic_attention *a = k->attn;
    const char *e = NULL;
    if (k->nstages != 0)
        e = "an attention kernel has no stages";
    else if (a->nb < 0 || a->nb > IC_MAX_RANK || a->L < 0 || a->S < 0 || a->E < 0)
        e = "bad attention sizes";
    const ic_attn_operand *ops[5];
    ic_attention_operands(a, ops);
    for (int w = 0; w < 5 && !e; w++)
        e = check_attn_operand(a, ops[w], w, nbufs, bufs);
    if (!e)
        return IC_OK;
    return ic__error(c, IC_EINVAL, "%s: kernel '%s': %s", who, k->name ? k->name : "?", e);
}

ic_status ic_kernel_verify(ic_ctx *c, const char *who, const ic_kernel *k, int nbufs,
                           const ic_buffer *bufs)
{
    if (k->attn)
        return verify_attention(c, who, k, nbufs, bufs);
    vcx x = { k, nbufs, bufs, NULL, 0, 0 };
    int i = -1;
    const char *e = check_stages(&x, &i);
    if (!e)
        return IC_OK;
    if (x.si >= k->nstages || i < 0 || i >= x.st->ninstr)
        return ic__error(c, IC_EINVAL, "%s: kernel '%s': %s", who, k->name ? k->name : "?", e);
    const ic_linstr *in = &x.st->instr[i];
    return ic__error(c, IC_EINVAL, "%s: kernel '%s' stage %d instr %d (%s %s): %s", who,
                     k->name ? k->name : "?", x.si, i, ic_lop_name(in->op),
                     (unsigned)in->type < IC_DTYPE_COUNT ? ic_dtype_name(in->type) : "?", e);
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

/* The temps k reads were written by an earlier kernel (or an earlier stage of k); records
 * the first kernel to store and the last to touch each buffer for check_arena. */
static ic_status check_order(const ic_program *p, int k, int *first_store, int *last_use)
{
    const ic_kernel *kn = &p->kernels[k];
    if (kn->attn) { /* reads q k v mask, then stores out */
        const ic_attn_operand *ops[5];
        ic_attention_operands(kn->attn, ops);
        for (int w = 0; w < 5; w++) {
            int b = ops[w]->buf;
            if (b < 0)
                continue;
            if (w < 4 && p->bufs[b].kind == IC_BUF_TEMP && first_store[b] >= k)
                return ic__error(p->c, IC_EINVAL, "program '%s' kernel %d '%s': temp read before an "
                                 "earlier kernel wrote it (internal error)", ic_graph_name(p->g), k, kn->name);
            if (w == 4 && first_store[b] == INT_MAX)
                first_store[b] = k;
            last_use[b] = k;
        }
        return IC_OK;
    }
    for (int s = 0; s < kn->nstages; s++)
        for (int i = 0; i < kn->stages[s].ninstr; i++) {
            const ic_linstr *in = &kn->stages[s].instr[i];
            if (in->op == IC_L_STORE && first_store[in->buf] == INT_MAX)
                first_store[in->buf] = k;
            if (in->op == IC_L_LOAD && p->bufs[in->buf].kind == IC_BUF_TEMP && first_store[in->buf] >= k &&
                !(first_store[in->buf] == k && stored_earlier(kn, s, in->buf)))
                return ic__error(p->c, IC_EINVAL, "program '%s' kernel %d '%s' stage %d %%%d: temp "
                                 "read before an earlier kernel wrote it (internal error)",
                                 ic_graph_name(p->g), k, kn->name, s, i);
            if (in->op == IC_L_LOAD || in->op == IC_L_STORE)
                last_use[in->buf] = k;
        }
    return IC_OK;
}

static ic_status check_kernel(const ic_program *p, int k, int *first_store, int *last_use)
{
    const ic_kernel *kn = &p->kernels[k];
    char who[300];
    snprintf(who, sizeof who, "program '%s' kernel %d", ic_graph_name(p->g), k);
    if (kn->nouter < 1)
        return ic__error(p->c, IC_EINVAL, "%s '%s': no outer loop (internal error)", who, kn->name);
    ic_status st = ic_kernel_verify(p->c, who, kn, p->nbufs, p->bufs);
    return st ? st : check_order(p, k, first_store, last_use);
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
