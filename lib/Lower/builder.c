/* builder.c - builds the instructions of a kernel stage by stage: common subexpressions are
 * shared (loads included: a kernel never loads a buffer it stores), casts that round-trip
 * exactly are dropped, constants are folded through casts, index expressions are emitted
 * once per stage. */
#include <math.h>
#include <string.h>
#include "gen.h"

double ic__round_fp(ic_dtype t, double f)
{
    switch (t) {
    case IC_F32: return (double)(float)f;
    case IC_F16: return ic_f16_to_f32(ic_f32_to_f16((float)f));
    case IC_BF16: return ic_bf16_to_f32(ic_f32_to_bf16((float)f));
    default: return f;
    }
}

/* float -> int64 truncating toward zero, saturating, NaN -> 0; narrower integers wrap from
 * there (as the reference executor converts). */
static int64_t to_int(double f)
{
    if (isnan(f))
        return 0;
    if (f >= 9223372036854775807.0)
        return INT64_MAX;
    if (f <= -9223372036854775808.0)
        return INT64_MIN;
    return (int64_t)f;
}

ic__val ic__convert(ic__val v, ic_dtype from, ic_dtype to)
{
    ic__val r;
    if (ic__is_fp(from)) {
        if (ic__is_fp(to))
            r.f = ic__round_fp(to, v.f);
        else if (to == IC_BOOL)
            r.i = v.f != 0 || isnan(v.f);
        else
            r.i = ic__wrap_int(to_int(v.f), to);
        return r;
    }
    if (to == IC_F64)
        r.f = (double)v.i;
    else if (ic__is_fp(to)) /* int -> f32 rounds once (not through double) */
        r.f = ic__round_fp(to, (double)(float)v.i);
    else
        r.i = ic__wrap_int(v.i, to);
    return r;
}

void ic__kb_init(ic__kb *b, ic_ctx *c, ic_arena *ar)
{
    memset(b, 0, sizeof *b);
    b->c = c;
    b->ar = ar;
    b->cur = -1;
    ic__tab_init(&b->ixmemo, c);
}

void ic__kb_free(ic__kb *b)
{
    for (int i = 0; i < b->nstages; i++) {
        ic__free(b->c, b->st[i].ins);
        ic__tab_free(&b->st[i].cse);
    }
    ic__free(b->c, b->st);
    ic__tab_free(&b->ixmemo);
    memset(b, 0, sizeof *b);
}

int ic__kb_stage(ic__kb *b, ic_stage_kind kind)
{
    if (b->nstages == b->capstages) {
        int cap = b->capstages ? b->capstages * 2 : 4;
        ic__kbstage *st = ic__realloc(b->c, b->st, sizeof *st * (size_t)cap);
        if (!st) {
            b->oom = true;
            return b->cur;
        }
        b->st = st;
        b->capstages = cap;
    }
    ic__kbstage *s = &b->st[b->nstages];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    ic__tab_init(&s->cse, b->c);
    b->cur = b->nstages++;
    return b->cur;
}

ic_dtype ic__kb_type(const ic__kb *b, int i)
{
    const ic__kbstage *s = &b->st[b->cur];
    return i >= 0 && i < s->n ? s->ins[i].type : IC_I64;
}

/* ---- CSE ---- */

typedef struct {
    const ic__kbstage *st;
    const ic_linstr *in;
} cse_key;

static bool same_instr(const ic_linstr *x, const ic_linstr *y)
{
    return x->op == y->op && x->type == y->type && x->a == y->a && x->b == y->b && x->c == y->c &&
           x->buf == y->buf && x->cmp == y->cmp && x->red == y->red && x->flags == y->flags &&
           x->imm.i == y->imm.i &&
           x->imm.is_int == y->imm.is_int && memcmp(&x->imm.f, &y->imm.f, sizeof(double)) == 0;
}

static bool cse_eq(const void *item, const void *key)
{
    const cse_key *k = key;
    int idx = (int)((intptr_t)item - 1);
    return same_instr(&k->st->ins[idx], k->in);
}

static uint64_t instr_hash(const ic_linstr *in)
{
    uint64_t h = ic__mix((uint64_t)in->op, (uint64_t)in->type);
    h = ic__mix(h, (uint64_t)(uint32_t)in->a);
    h = ic__mix(h, (uint64_t)(uint32_t)in->b);
    h = ic__mix(h, (uint64_t)(uint32_t)in->c);
    h = ic__mix(h, (uint64_t)(uint32_t)in->buf);
    h = ic__mix(h, (uint64_t)in->cmp * 8 + (uint64_t)in->red);
    h = ic__mix(h, (uint64_t)in->flags);
    uint64_t fb;
    memcpy(&fb, &in->imm.f, sizeof fb);
    return ic__mix(ic__mix(h, (uint64_t)in->imm.i), fb);
}

static int append(ic__kb *b, const ic_linstr *in)
{
    ic__kbstage *s = &b->st[b->cur];
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 64;
        ic_linstr *ins = ic__realloc(b->c, s->ins, sizeof *ins * (size_t)cap);
        if (!ins) {
            b->oom = true;
            return -1;
        }
        s->ins = ins;
        s->cap = cap;
    }
    s->ins[s->n] = *in;
    return s->n++;
}

/* ---- peepholes ---- */

static bool exact_widening(ic_dtype from, ic_dtype mid)
{
    switch (from) {
    case IC_F16: case IC_BF16: return mid == IC_F32 || mid == IC_F64;
    case IC_F32: return mid == IC_F64;
    case IC_I32: return mid == IC_I64 || mid == IC_F64;
    case IC_U8: case IC_I8: case IC_I16: return !ic__narrow_int(mid) && mid != IC_BOOL && mid != IC_F16;
    case IC_BOOL: return true;
    default: return false;
    }
}

static const ic_linstr *at(const ic__kb *b, int i) { return &b->st[b->cur].ins[i]; }

static int peephole(ic__kb *b, ic_linstr *in)
{
    if (in->op == IC_L_CAST) {
        const ic_linstr *a = at(b, in->a);
        if (a->type == in->type)
            return in->a;
        if (a->op == IC_L_CAST && ic__kb_type(b, a->a) == in->type &&
            exact_widening(in->type, a->type))
            return a->a;
        bool mem_only = in->type == IC_F16 || in->type == IC_BF16 || ic__narrow_int(in->type);
        /* a constant wrapped to a narrow int, widened again: the wrapped constant */
        const ic_linstr *k = a->op == IC_L_CAST && ic__narrow_int(a->type) ? at(b, a->a) : a;
        if (k->op == IC_L_CONST && !mem_only) {
            ic__val v = { .f = k->imm.f };
            if (!ic__is_fp(k->type))
                v.i = k->imm.i;
            if (k != a)
                v = ic__convert(v, k->type, a->type);
            v = ic__convert(v, a->type, in->type);
            return ic__is_fp(in->type) ? ic__kb_const_f(b, in->type, v.f)
                                       : ic__kb_const_i(b, in->type, v.i);
        }
    }
    if ((in->op == IC_L_ADD || in->op == IC_L_MUL) && !ic__is_fp(in->type) && in->type != IC_BOOL) {
        const ic_linstr *y = at(b, in->b);
        int64_t unit = in->op == IC_L_ADD ? 0 : 1;
        if (y->op == IC_L_CONST && y->imm.i == unit)
            return in->a;
    }
    return -1;
}

int ic__kb_emit(ic__kb *b, ic_linstr in)
{
    if (b->oom || b->cur < 0)
        return -1;
    int r = peephole(b, &in);
    if (r >= 0)
        return r;
    bool pure = in.op != IC_L_STORE && in.op != IC_L_REDUCE;
    ic__kbstage *s = &b->st[b->cur];
    cse_key key = { s, &in };
    uint64_t h = instr_hash(&in);
    if (pure) {
        void *hit = ic__tab_find(&s->cse, h, cse_eq, &key);
        if (hit)
            return (int)((intptr_t)hit - 1);
    }
    int idx = append(b, &in);
    if (idx >= 0 && pure && !ic__tab_put(&b->st[b->cur].cse, h, (void *)(intptr_t)(idx + 1)))
        b->oom = true;
    return idx;
}

static ic_linstr mk(ic_lop op, ic_dtype t)
{
    ic_linstr in;
    memset(&in, 0, sizeof in);
    in.op = op;
    in.type = t;
    in.a = in.b = in.c = in.buf = -1;
    return in;
}

static int *operand_ptr(ic_linstr *in, int j) { return j == 0 ? &in->a : j == 1 ? &in->b : &in->c; }

/* in with its first n operands ops[..], or -1 if one is negative: an earlier builder call
 * failed, and the failure carries on to what uses it. */
static int emit_ops(ic__kb *b, ic_linstr in, int n, const int *ops)
{
    for (int j = 0; j < n; j++) {
        if (ops[j] < 0)
            return -1;
        *operand_ptr(&in, j) = ops[j];
    }
    return ic__kb_emit(b, in);
}

int ic__kb_const_f(ic__kb *b, ic_dtype t, double f)
{
    ic_linstr in = mk(IC_L_CONST, t);
    if (!ic__is_fp(t))
        return ic__kb_const_i(b, t, (int64_t)f);
    in.imm.f = ic__round_fp(t, f);
    in.imm.i = 0;
    in.imm.is_int = false;
    return ic__kb_emit(b, in);
}

int ic__kb_const_i(ic__kb *b, ic_dtype t, int64_t i)
{
    if (ic__is_fp(t))
        return ic__kb_const_f(b, t, (double)i);
    ic__val v = { .i = i };
    v = ic__convert(v, IC_I64, t);
    ic_linstr in = mk(IC_L_CONST, t);
    in.imm.i = v.i;
    in.imm.f = (double)v.i;
    in.imm.is_int = true;
    return ic__kb_emit(b, in);
}

int ic__kb_un(ic__kb *b, ic_lop op, ic_dtype t, int a)
{
    return emit_ops(b, mk(op, t), 1, &a);
}

int ic__kb_bin(ic__kb *b, ic_lop op, ic_dtype t, int a, int c)
{
    return emit_ops(b, mk(op, t), 2, (int[]){ a, c });
}

int ic__kb_cast(ic__kb *b, ic_dtype t, int a) { return ic__kb_un(b, IC_L_CAST, t, a); }

int ic__kb_exp_le0(ic__kb *b, ic_dtype t, int a)
{
    ic_linstr in = mk(IC_L_EXP, t);
    in.flags = IC_LF_EXP_LE0;
    return emit_ops(b, in, 1, &a);
}

int ic__kb_cmp(ic__kb *b, ic_cmp cmp, int a, int c)
{
    ic_linstr in = mk(IC_L_CMP, IC_BOOL);
    in.cmp = cmp;
    return emit_ops(b, in, 2, (int[]){ a, c });
}

int ic__kb_select(ic__kb *b, int cond, int a, int c)
{
    if (cond < 0 || a < 0 || c < 0)
        return -1;
    if (a == c)
        return a;
    return emit_ops(b, mk(IC_L_SELECT, ic__kb_type(b, a)), 3, (int[]){ cond, a, c });
}

int ic__kb_var(ic__kb *b, int var)
{
    ic_linstr in = mk(IC_L_VAR, IC_I64);
    in.a = var;
    return ic__kb_emit(b, in);
}

int ic__kb_load(ic__kb *b, int buf, ic_dtype t, int off)
{
    ic_linstr in = mk(IC_L_LOAD, t);
    in.buf = buf;
    return emit_ops(b, in, 1, &off);
}

void ic__kb_store(ic__kb *b, int buf, int off, int val)
{
    if (off < 0 || val < 0)
        return;
    ic_linstr in = mk(IC_L_STORE, ic__kb_type(b, val));
    in.buf = buf;
    emit_ops(b, in, 2, (int[]){ off, val });
}

int ic__kb_max_nan_free(ic__kb *b, ic_dtype t, int val)
{
    ic_linstr in = mk(IC_L_REDUCE, t);
    in.red = IC_RED_MAX;
    in.flags = IC_LF_NAN_FREE;
    return emit_ops(b, in, 1, &val);
}

int ic__kb_reduce(ic__kb *b, ic_red red, ic_dtype t, int val, int index)
{
    bool arg = red == IC_RED_ARGMAX; /* the index of the max is its second operand */
    ic_linstr in = mk(IC_L_REDUCE, arg ? IC_I64 : t);
    in.red = red;
    return emit_ops(b, in, arg ? 2 : 1, (int[]){ val, index });
}

int ic__kb_acc(ic__kb *b, int stage, int instr)
{
    if (stage < 0 || stage >= b->cur || instr < 0)
        return -1;
    ic_linstr in = mk(IC_L_ACC, b->st[stage].ins[instr].type);
    in.a = stage;
    in.b = instr;
    return ic__kb_emit(b, in);
}

/* ---- dead code ---- */

/* keep[s][i] = 1 for what a store (or a reduce an ACC reads) needs, walking backwards. */
static void mark_live(ic__kb *b, int **keep)
{
    for (int s = b->nstages - 1; s >= 0; s--) {
        ic__kbstage *st = &b->st[s];
        for (int i = st->n - 1; i >= 0; i--) {
            ic_linstr *in = &st->ins[i];
            if (in->op == IC_L_STORE)
                keep[s][i] = 1;
            if (!keep[s][i])
                continue;
            if (in->op == IC_L_ACC)
                keep[in->a][in->b] = 1;
            for (int j = 0; j < ic_linstr_arity(in); j++)
                keep[s][*operand_ptr(in, j)] = 1;
        }
    }
}

/* Drops instructions nothing needs (e.g. the f32 side of a rounding cast whose f16 value is
 * only stored) and renumbers the rest, ACC references included. */
void ic__kb_dce(ic__kb *b)
{
    int **keep = ic__calloc(b->c, (size_t)b->nstages + 1, sizeof(int *));
    if (!keep)
        return;
    for (int s = 0; s < b->nstages; s++)
        if (!(keep[s] = ic__calloc(b->c, (size_t)b->st[s].n + 1, sizeof(int))))
            goto done;
    mark_live(b, keep);
    for (int s = 0; s < b->nstages; s++) /* keep[s][i] becomes the new index + 1 */
        for (int i = 0, k = 0; i < b->st[s].n; i++)
            if (keep[s][i])
                keep[s][i] = ++k;
    for (int s = 0; s < b->nstages; s++) {
        ic__kbstage *st = &b->st[s];
        int k = 0;
        for (int i = 0; i < st->n; i++) {
            if (!keep[s][i])
                continue;
            ic_linstr in = st->ins[i];
            for (int j = 0; j < ic_linstr_arity(&in); j++)
                *operand_ptr(&in, j) = keep[s][*operand_ptr(&in, j)] - 1;
            if (in.op == IC_L_ACC)
                in.b = keep[in.a][in.b] - 1;
            st->ins[k++] = in;
        }
        st->n = k;
        ic__tab_clear(&st->cse);
    }
done:
    for (int s = 0; s < b->nstages; s++)
        ic__free(b->c, keep[s]);
    ic__free(b->c, keep);
}

/* ---- index expressions ---- */

typedef struct {
    int stage, id, instr;
} ixmemo;

static bool ixmemo_eq(const void *item, const void *key)
{
    const ixmemo *a = item, *b = key;
    return a->stage == b->stage && a->id == b->id;
}

static int emit_ix(ic__kb *b, const ic__ix *e);

static int emit_atom(ic__kb *b, const ic__ixatom *a)
{
    switch (a->kind) {
    case IC__IXA_VAR:
        return ic__kb_var(b, a->var);
    case IC__IXA_VAL:
        return a->stage == b->cur ? a->instr : -1;
    case IC__IXA_DIV:
        return ic__kb_bin(b, IC_L_IDIV, IC_I64, emit_ix(b, a->e), ic__kb_const_i(b, IC_I64, a->k));
    case IC__IXA_MOD:
        return ic__kb_bin(b, IC_L_MOD, IC_I64, emit_ix(b, a->e), ic__kb_const_i(b, IC_I64, a->k));
    default: { /* CLAMP */
        int v = emit_ix(b, a->e);
        if (a->e->lo < a->lo)
            v = ic__kb_bin(b, IC_L_MAX, IC_I64, v, ic__kb_const_i(b, IC_I64, a->lo));
        if (a->e->hi > a->hi)
            v = ic__kb_bin(b, IC_L_MIN, IC_I64, v, ic__kb_const_i(b, IC_I64, a->hi));
        return v;
    }
    }
}

static int emit_ix(ic__kb *b, const ic__ix *e)
{
    if (!e)
        return -1;
    ixmemo key = { b->cur, e->id, -1 };
    uint64_t h = ic__mix((uint64_t)b->cur, (uint64_t)e->id);
    ixmemo *m = ic__tab_find(&b->ixmemo, h, ixmemo_eq, &key);
    if (m)
        return m->instr;
    int acc = -1;
    for (int i = 0; i < e->n; i++) {
        int t = emit_atom(b, e->atom[i]);
        if (e->coef[i] != 1)
            t = ic__kb_bin(b, IC_L_MUL, IC_I64, t, ic__kb_const_i(b, IC_I64, e->coef[i]));
        acc = acc < 0 ? t : ic__kb_bin(b, IC_L_ADD, IC_I64, acc, t);
        if (t < 0)
            return -1;
    }
    if (acc < 0)
        acc = ic__kb_const_i(b, IC_I64, e->c0);
    else if (e->c0)
        acc = ic__kb_bin(b, IC_L_ADD, IC_I64, acc, ic__kb_const_i(b, IC_I64, e->c0));
    m = ic__arena_alloc(b->ar, sizeof *m);
    if (!m || !ic__tab_put(&b->ixmemo, h, m)) {
        b->oom = true;
        return -1;
    }
    *m = key;
    m->instr = acc;
    return acc;
}

int ic__kb_ix(ic__kb *b, const ic__ix *e) { return emit_ix(b, e); }
