/* interp.c - a plain C interpreter of the loop IR, one instruction at a time: the oracle of
 * the Lower/Fuse tests before code generation, and a debugging backend. F32 results are
 * rounded to float after every instruction, F64 stays double, integers wrap, every load and
 * store is bounds-checked. TEMPs live in one arena laid out by the program's plan, so a
 * wrong reuse plan shows up as wrong results. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gen.h"

typedef struct {
    ic__val v;
    int64_t idx;   /* argmax: position of the best value */
    bool has;
} accum;

typedef struct {
    ic_ctx *c;
    const ic_program *p;
    const ic_kernel *k;
    void **base;                 /* per buffer */
    int64_t var[2 * IC_MAX_RANK];
    ic__val *vals;               /* current stage's values */
    accum **acc;                 /* per stage, per instr */
    int kidx, stage;
} icx;

static double rnd(ic_dtype t, double f) { return t == IC_F32 ? (double)(float)f : f; }

static int64_t wrap(ic_dtype t, uint64_t v) { return ic__wrap_int((int64_t)v, t); }

static ic_status oob(icx *x, int i, const char *what, int64_t off)
{
    const ic_buffer *b = &x->p->bufs[x->k->stages[x->stage].instr[i].buf];
    return ic__error(x->c, IC_EINVAL, "kernel %d '%s' stage %d %%%d: %s '%s' at offset %lld, "
                     "outside its %lld elements", x->kidx, x->k->name, x->stage, i, what, b->name,
                     (long long)off, (long long)b->numel);
}

static ic__val load(const void *base, ic_dtype t, int64_t off)
{
    ic__val r;
    switch (t) {
    case IC_F32: r.f = ((const float *)base)[off]; break;
    case IC_F64: r.f = ((const double *)base)[off]; break;
    case IC_F16: r.f = ic_f16_to_f32(((const uint16_t *)base)[off]); break;
    case IC_BF16: r.f = ic_bf16_to_f32(((const uint16_t *)base)[off]); break;
    case IC_I32: r.i = ((const int32_t *)base)[off]; break;
    case IC_I64: r.i = ((const int64_t *)base)[off]; break;
    case IC_U8: r.i = ((const uint8_t *)base)[off]; break;
    case IC_I8: r.i = ((const int8_t *)base)[off]; break;
    case IC_I16: r.i = ((const int16_t *)base)[off]; break;
    default: r.i = ((const uint8_t *)base)[off] != 0; break;
    }
    return r;
}

static void store(void *base, ic_dtype t, int64_t off, ic__val v)
{
    switch (t) {
    case IC_F32: ((float *)base)[off] = (float)v.f; break;
    case IC_F64: ((double *)base)[off] = v.f; break;
    case IC_F16: ((uint16_t *)base)[off] = ic_f32_to_f16((float)v.f); break;
    case IC_BF16: ((uint16_t *)base)[off] = ic_f32_to_bf16((float)v.f); break;
    case IC_I32: ((int32_t *)base)[off] = (int32_t)v.i; break;
    case IC_I64: ((int64_t *)base)[off] = v.i; break;
    case IC_U8: ((uint8_t *)base)[off] = (uint8_t)v.i; break;
    case IC_I8: ((int8_t *)base)[off] = (int8_t)v.i; break;
    case IC_I16: ((int16_t *)base)[off] = (int16_t)v.i; break;
    default: ((uint8_t *)base)[off] = v.i != 0; break;
    }
}

static double funary(ic_lop op, double a)
{
    switch (op) {
    case IC_L_NEG: return -a;
    case IC_L_ABS: return fabs(a);
    case IC_L_EXP: return exp(a);
    case IC_L_LOG: return log(a);
    case IC_L_SQRT: return sqrt(a);
    case IC_L_RSQRT: return 1.0 / sqrt(a);
    case IC_L_SIN: return sin(a);
    case IC_L_COS: return cos(a);
    case IC_L_TANH: return tanh(a);
    case IC_L_SIGMOID: return 1.0 / (1.0 + exp(-a));
    case IC_L_ERF: return erf(a);
    case IC_L_RECIP: return 1.0 / a;
    case IC_L_FLOOR: return floor(a);
    case IC_L_ROUND: return nearbyint(a); /* the default rounding mode: halves to even */
    default: return ceil(a);
    }
}

static double fbinary(ic_lop op, double a, double b)
{
    switch (op) {
    case IC_L_ADD: return a + b;
    case IC_L_SUB: return a - b;
    case IC_L_MUL: return a * b;
    case IC_L_DIV: return a / b;
    case IC_L_POW: return pow(a, b);
    case IC_L_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    default: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    }
}

static int64_t ipow(int64_t a, int64_t e)
{
    if (e < 0) /* PyTorch's integer pow with a negative exponent: only 1 and -1 survive */
        return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)a;
    for (; e; e >>= 1, b *= b)
        if (e & 1)
            r *= b;
    return (int64_t)r;
}

static int64_t fdiv(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static bool ibinary(ic_lop op, ic_dtype t, int64_t a, int64_t b, int64_t *r)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case IC_L_ADD: *r = wrap(t, ua + ub); return true;
    case IC_L_SUB: *r = wrap(t, ua - ub); return true;
    case IC_L_MUL: *r = wrap(t, ua * ub); return true;
    case IC_L_POW: *r = wrap(t, (uint64_t)ipow(a, b)); return true;
    case IC_L_MAX: *r = a > b ? a : b; return true;
    case IC_L_MIN: *r = a < b ? a : b; return true;
    case IC_L_AND: *r = a && b; return true;
    case IC_L_OR: *r = a || b; return true;
    case IC_L_IDIV: case IC_L_MOD:
        if (b == 0 || (a == INT64_MIN && b == -1))
            return false;
        *r = op == IC_L_IDIV ? fdiv(a, b) : a - fdiv(a, b) * b;
        return true;
    default: return false;
    }
}

/* pred from the three relations of its operands; a NaN operand makes all three false, so
 * that only NE holds, as IEEE 754 says. */
static bool holds(int pred, bool lt, bool eq, bool gt)
{
    switch (pred) {
    case IC_CMP_EQ: return eq;
    case IC_CMP_NE: return !eq;
    case IC_CMP_LT: return lt;
    case IC_CMP_LE: return lt || eq;
    case IC_CMP_GT: return gt;
    default: return gt || eq;
    }
}

static bool compare(int pred, ic_dtype t, ic__val a, ic__val b)
{
    if (ic__is_fp(t))
        return holds(pred, a.f < b.f, a.f == b.f, a.f > b.f);
    return holds(pred, a.i < b.i, a.i == b.i, a.i > b.i);
}

/* ---- reductions ---- */

static void acc_init(accum *a, int red, ic_dtype t)
{
    memset(a, 0, sizeof *a);
    bool f = ic__is_fp(t);
    switch (red) {
    case IC_RED_PROD:
        if (f) a->v.f = 1; else a->v.i = 1;
        break;
    case IC_RED_MAX:
        if (f) a->v.f = -INFINITY; else a->v.i = t == IC_I32 ? INT32_MIN : INT64_MIN;
        break;
    case IC_RED_MIN:
        if (f) a->v.f = INFINITY; else a->v.i = t == IC_I32 ? INT32_MAX : INT64_MAX;
        break;
    default:
        break;
    }
}

static void argmax_step(accum *a, ic_dtype t, ic__val v, int64_t pos)
{
    bool better;
    if (!a->has)
        better = true;
    else if (ic__is_fp(t))
        better = !isnan(a->v.f) && (isnan(v.f) || v.f > a->v.f);
    else
        better = v.i > a->v.i;
    if (better) {
        a->v = v;
        a->idx = pos;
    }
    a->has = true;
}

static void acc_step(accum *a, int red, ic_dtype t, ic__val v)
{
    if (ic__is_fp(t)) {
        double x = a->v.f;
        switch (red) {
        case IC_RED_SUM: a->v.f = rnd(t, x + v.f); break;
        case IC_RED_PROD: a->v.f = rnd(t, x * v.f); break;
        case IC_RED_MAX: a->v.f = fbinary(IC_L_MAX, x, v.f); break;
        default: a->v.f = fbinary(IC_L_MIN, x, v.f); break;
        }
        return;
    }
    int64_t r = 0;
    ibinary(red == IC_RED_SUM ? IC_L_ADD : red == IC_RED_PROD ? IC_L_MUL : red == IC_RED_MAX ? IC_L_MAX : IC_L_MIN,
            t, a->v.i, v.i, &r);
    a->v.i = r;
}

/* ---- one instruction ---- */

static ic_status step_mem(icx *x, int i, const ic_linstr *in)
{
    const ic_buffer *b = &x->p->bufs[in->buf];
    int64_t off = x->vals[in->a].i;
    if (off < 0 || off >= b->numel)
        return oob(x, i, in->op == IC_L_LOAD ? "load from" : "store to", off);
    if (in->op == IC_L_LOAD)
        x->vals[i] = load(x->base[in->buf], b->dtype, off);
    else
        store(x->base[in->buf], b->dtype, off, x->vals[in->b]);
    return IC_OK;
}

static ic_status step(icx *x, int i)
{
    const ic_linstr *in = &x->k->stages[x->stage].instr[i];
    ic__val *v = x->vals, r = { 0 };
    ic_dtype t = in->type, ta = ic_linstr_arity(in) > 0 ? x->k->stages[x->stage].instr[in->a].type : t;
    switch (in->op) {
    case IC_L_VAR: r.i = x->var[in->a]; break;
    case IC_L_CONST: if (ic__is_fp(t)) r.f = in->imm.f; else r.i = in->imm.i; break;
    case IC_L_LOAD: case IC_L_STORE: return step_mem(x, i, in);
    case IC_L_ACC: {
        const accum *a = &x->acc[in->a][in->b];
        r = x->k->stages[in->a].instr[in->b].red == IC_RED_ARGMAX ? (ic__val){ .i = a->idx } : a->v;
        break;
    }
    case IC_L_REDUCE:
        if (in->red == IC_RED_ARGMAX)
            argmax_step(&x->acc[x->stage][i], ta, v[in->a], v[in->b].i);
        else
            acc_step(&x->acc[x->stage][i], in->red, t, v[in->a]);
        return IC_OK;
    case IC_L_CAST: r = ic__convert(v[in->a], ta, t); break;
    case IC_L_NOT: r.i = !v[in->a].i; break;
    case IC_L_CMP: r.i = compare(in->cmp, ta, v[in->a], v[in->b]); break;
    case IC_L_SELECT: r = v[in->a].i ? v[in->b] : v[in->c]; break;
    default:
        if (ic_lop_is_unary(in->op) && ic__is_fp(t)) {
            r.f = rnd(t, funary(in->op, v[in->a].f));
        } else if (ic_lop_is_unary(in->op)) { /* integer neg / abs */
            int64_t a = v[in->a].i;
            r.i = in->op == IC_L_NEG || a < 0 ? wrap(t, 0 - (uint64_t)a) : a;
        } else if (ic__is_fp(t)) {
            r.f = rnd(t, fbinary(in->op, v[in->a].f, v[in->b].f));
        } else if (!ibinary(in->op, t, v[in->a].i, v[in->b].i, &r.i)) {
            return ic__error(x->c, IC_EINVAL, "kernel %d '%s': integer division by zero",
                             x->kidx, x->k->name);
        }
    }
    v[i] = r;
    return IC_OK;
}

/* ---- loops ---- */

static ic_status run_stage_once(icx *x)
{
    const ic_stage *s = &x->k->stages[x->stage];
    for (int i = 0; i < s->ninstr; i++) {
        ic_status st = step(x, i);
        if (st)
            return st;
    }
    return IC_OK;
}

/* fn(x) at each point of the loop nest dims[0..n), its index in var[0..n) (row-major, the
 * last dim fastest): the outer and the inner loops of a kernel, each run as one flat loop. */
static ic_status for_each_point(icx *x, const int64_t *dims, int n, int64_t *var, ic_status (*fn)(icx *))
{
    int64_t total = 1;
    for (int j = 0; j < n; j++)
        total *= dims[j];
    for (int64_t f = 0; f < total; f++) {
        int64_t r = f;
        for (int j = n - 1; j >= 0; j--) {
            var[j] = r % dims[j];
            r /= dims[j];
        }
        ic_status st = fn(x);
        if (st)
            return st;
    }
    return IC_OK;
}

static ic_status run_stage(icx *x)
{
    const ic_kernel *k = x->k;
    const ic_stage *s = &k->stages[x->stage];
    if (s->kind == IC_STAGE_REDUCE)
        for (int i = 0; i < s->ninstr; i++)
            if (s->instr[i].op == IC_L_REDUCE)
                acc_init(&x->acc[x->stage][i], s->instr[i].red, s->instr[i].type);
    if (s->kind == IC_STAGE_BODY)
        return run_stage_once(x);
    return for_each_point(x, k->inner, k->ninner, x->var + k->nouter, run_stage_once);
}

/* The stages of the kernel at one outer point. */
static ic_status run_stages(icx *x)
{
    for (x->stage = 0; x->stage < x->k->nstages; x->stage++) {
        ic_status st = run_stage(x);
        if (st)
            return st;
    }
    return IC_OK;
}

/* An attention kernel (ic_kernel.attn) in double, as its definition in lower.h reads. */
static ic_status run_attention(icx *x)
{
    const ic_attention *a = x->k->attn;
    int64_t nb = 1;
    for (int i = 0; i < a->nb; i++)
        nb *= a->batch[i];
    double *p = ic__malloc(x->c, sizeof(double) * (size_t)(a->S + 1));
    if (!p)
        return ic__error(x->c, IC_ENOMEM, "out of memory");
    const ic_attn_operand *ops[5];
    ic_attention_operands(a, ops);
    ic_dtype mt = a->mask.buf >= 0 ? x->p->bufs[a->mask.buf].dtype : IC_F32;
    for (int64_t bi = 0; bi < nb; bi++) {
        int64_t base[5] = { 0 }, rest = bi;
        for (int i = a->nb - 1; i >= 0; i--) {
            for (int w = 0; w < 5; w++)
                base[w] += (rest % a->batch[i]) * ops[w]->sb[i];
            rest /= a->batch[i];
        }
        for (int w = 0; w < 5; w++)
            base[w] += ops[w]->c0;
        for (int64_t l = 0; l < a->L; l++) {
            double mx = -INFINITY, den = 0;
            for (int64_t s = 0; s < a->S; s++) {
                double acc = 0;
                for (int64_t e = 0; e < a->E; e++)
                    acc += load(x->base[a->q.buf], x->p->bufs[a->q.buf].dtype, base[0] + a->q.sr * l + a->q.sc * e).f *
                           load(x->base[a->k.buf], x->p->bufs[a->k.buf].dtype, base[1] + a->k.sr * s + a->k.sc * e).f;
                ic_dtype rt = a->round ? x->p->bufs[a->q.buf].dtype : IC_F64;
                acc = ic__round_fp(rt, ic__round_fp(rt, acc) * a->scale);
                if (a->mask.buf >= 0) {
                    ic__val m = load(x->base[a->mask.buf], mt, base[3] + a->mask.sr * l + a->mask.sc * s);
                    acc = mt == IC_BOOL ? (m.i ? acc : -INFINITY) : ic__round_fp(rt, acc + m.f);
                }
                if (a->causal && s > l)
                    acc = -INFINITY;
                p[s] = acc;
                mx = acc > mx ? acc : mx;
            }
            for (int64_t s = 0; s < a->S; s++)
                den += p[s] = exp(p[s] - mx);
            for (int64_t e = 0; e < a->E; e++) {
                double acc = 0;
                for (int64_t s = 0; s < a->S; s++)
                    acc += p[s] / den * load(x->base[a->v.buf], x->p->bufs[a->v.buf].dtype, base[2] + a->v.sr * s + a->v.sc * e).f;
                store(x->base[a->out.buf], x->p->bufs[a->out.buf].dtype, base[4] + a->out.sr * l + a->out.sc * e,
                      (ic__val){ .f = acc });
            }
        }
    }
    ic__free(x->c, p);
    return IC_OK;
}

static ic_status run_kernel(icx *x)
{
    if (x->k->attn)
        return run_attention(x);
    return for_each_point(x, x->k->outer, x->k->nouter, x->var, run_stages);
}

static ic_status alloc_kernel_state(icx *x)
{
    const ic_kernel *k = x->k;
    int maxn = 1;
    for (int s = 0; s < k->nstages; s++)
        maxn = k->stages[s].ninstr > maxn ? k->stages[s].ninstr : maxn;
    x->vals = ic__calloc(x->c, (size_t)maxn, sizeof(ic__val));
    x->acc = ic__calloc(x->c, (size_t)k->nstages + 1, sizeof(accum *));
    if (!x->vals || !x->acc)
        return ic__error(x->c, IC_ENOMEM, "out of memory");
    for (int s = 0; s < k->nstages; s++)
        if (!(x->acc[s] = ic__calloc(x->c, (size_t)k->stages[s].ninstr + 1, sizeof(accum))))
            return ic__error(x->c, IC_ENOMEM, "out of memory");
    return IC_OK;
}

static void free_kernel_state(icx *x)
{
    for (int s = 0; x->acc && s < x->k->nstages; s++)
        ic__free(x->c, x->acc[s]);
    ic__free(x->c, x->acc);
    ic__free(x->c, x->vals);
    x->acc = NULL;
    x->vals = NULL;
}

/* ---- arguments ---- */

static ic_status check_tensor(icx *x, const ic_tensor *t, const ic_buffer *b, const char *what)
{
    int64_t n = ic_tensor_numel(t);
    if (t->dtype != b->dtype || n != b->numel)
        return ic__error(x->c, IC_EINVAL, "%s %d '%s': got %s with %lld elements, expected %s with %lld",
                         what, b->index, b->name, ic_dtype_name(t->dtype), (long long)n,
                         ic_dtype_name(b->dtype), (long long)b->numel);
    if (n && !t->data)
        return ic__error(x->c, IC_EINVAL, "%s %d '%s' has no data", what, b->index, b->name);
    return IC_OK;
}

static void copy_strided(ic_tensor *dst, const ic_tensor *src)
{
    size_t es = ic_dtype_size(src->dtype);
    int64_t n = ic_tensor_numel(src);
    for (int64_t i = 0; i < n; i++) {
        int64_t off = 0, r = i;
        for (int d = src->rank - 1; d >= 0; d--) {
            off += (r % src->shape[d]) * src->strides[d];
            r /= src->shape[d];
        }
        memcpy((char *)dst->data + (size_t)i * es, (const char *)src->data + (size_t)off * es, es);
    }
}

/* Arguments with strides are copied contiguous into copies[b]. */
static ic_status bind(icx *x, const ic_tensor *args, int nargs, ic_tensor *outs, int nouts,
                      void **copies, void *arena)
{
    const ic_program *p = x->p;
    for (int b = 0; b < p->nbufs; b++) {
        const ic_buffer *bf = &p->bufs[b];
        ic_status st;
        if (bf->kind == IC_BUF_PARAM) {
            x->base[b] = (void *)bf->data;
        } else if (bf->kind == IC_BUF_TEMP) {
            x->base[b] = (char *)arena + (bf->arena_offset > 0 ? bf->arena_offset : 0);
        } else if (bf->kind == IC_BUF_OUTPUT) {
            if (bf->index >= nouts)
                return ic__error(x->c, IC_EINVAL, "%d outputs given, the graph has more", nouts);
            if ((st = check_tensor(x, &outs[bf->index], bf, "output")))
                return st;
            if (bf->numel > 0 && !ic_tensor_is_contiguous(&outs[bf->index]))
                return ic__error(x->c, IC_EINVAL, "output %d '%s' must be contiguous", bf->index, bf->name);
            x->base[b] = outs[bf->index].data;
        } else {
            if (bf->index >= nargs)
                return ic__error(x->c, IC_EINVAL, "%d arguments given, the graph takes more", nargs);
            const ic_tensor *t = &args[bf->index];
            if ((st = check_tensor(x, t, bf, "argument")))
                return st;
            x->base[b] = t->data;
            if (bf->numel > 0 && !ic_tensor_is_contiguous(t)) {
                ic_tensor cp;
                ic_tensor_init(&cp, t->dtype, t->rank, t->shape, NULL);
                if ((st = ic_tensor_alloc(x->c, &cp)))
                    return st;
                copy_strided(&cp, t);
                copies[b] = cp.data;
                x->base[b] = cp.data;
            }
        }
    }
    return IC_OK;
}

ic_status ic_program_interpret(ic_ctx *c, const ic_program *p, const ic_tensor *args, int nargs,
                               ic_tensor *outs, int nouts)
{
    icx x;
    memset(&x, 0, sizeof x);
    x.c = c;
    x.p = p;
    if (nargs != ic_graph_num_args(p->g) || nouts != ic_graph_num_outputs(p->g))
        return ic__error(c, IC_EINVAL, "graph '%s' takes %d arguments and %d outputs, got %d and %d",
                         ic_graph_name(p->g), ic_graph_num_args(p->g), ic_graph_num_outputs(p->g),
                         nargs, nouts);
    x.base = ic__calloc(c, (size_t)p->nbufs + 1, sizeof(void *));
    void **copies = ic__calloc(c, (size_t)p->nbufs + 1, sizeof(void *));
    void *arena = ic__calloc(c, (size_t)p->arena_bytes + 64, 1);
    ic_status st = !x.base || !copies || !arena ? ic__error(c, IC_ENOMEM, "out of memory") : IC_OK;
    if (!st)
        st = bind(&x, args, nargs, outs, nouts, copies, arena);
    for (int k = 0; !st && k < p->nkernels; k++) {
        x.k = &p->kernels[k];
        x.kidx = k;
        if (!(st = alloc_kernel_state(&x)))
            st = run_kernel(&x);
        free_kernel_state(&x);
    }
    for (int b = 0; copies && b < p->nbufs; b++)
        if (copies[b]) {
            ic_tensor t = { .data = copies[b] };
            ic_tensor_free(c, &t);
        }
    ic__free(c, copies);
    ic__free(c, arena);
    ic__free(c, x.base);
    return st;
}
