/* lowertest.h - helpers for the Lower and Fuse tests: graph builders that assert, seeded
 * test data, and lt_check, which runs a graph through the reference executor and through
 * ic_lower (optionally ic_fuse) + ic_program_interpret and compares every output with the
 * spec's tolerances. Header-only (static) so both test executables can include it. */
#ifndef IC_LOWERTEST_H
#define IC_LOWERTEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/fuse.h"

/* ---- building graphs ---- */

static inline ic_value lt_node(ic_graph *g, const char *name, ic_op op, int n, const ic_operand *in,
                               const ic_attrs *at)
{
    ic_value v = -1;
    ic_status s = ic_graph_add_node(g, name, op, n, in, at, &v);
    cr_assert_eq(s, IC_OK, "adding '%s' (%s): %s", name, ic_op_name(op), ic_last_error(ic_graph_ctx(g)));
    return v;
}

static inline ic_value lt_un(ic_graph *g, const char *name, ic_op op, ic_value x)
{
    ic_operand o = ic_val(x);
    return lt_node(g, name, op, 1, &o, NULL);
}

static inline ic_value lt_bin(ic_graph *g, const char *name, ic_op op, ic_operand a, ic_operand b)
{
    ic_operand o[2] = { a, b };
    return lt_node(g, name, op, 2, o, NULL);
}

static inline ic_value lt_at(ic_graph *g, const char *name, ic_op op, ic_value x, const ic_attrs *at)
{
    ic_operand o = ic_val(x);
    return lt_node(g, name, op, 1, &o, at);
}

static inline ic_attrs lt_attrs(ic_op op)
{
    ic_attrs a;
    ic_attrs_init(&a, op);
    return a;
}

static inline ic_attrs lt_dims(ic_op op, int n, const int64_t *dims, bool keepdim)
{
    ic_attrs a = lt_attrs(op);
    a.has_dims = n > 0;
    a.ndims = n;
    for (int i = 0; i < n; i++)
        a.dims[i] = dims[i];
    a.keepdim = keepdim;
    return a;
}

/* attrs.shape from "2,3,-1" (integers only). */
static inline ic_attrs lt_shape(ic_op op, const char *text)
{
    ic_attrs a = lt_attrs(op);
    const char *p = text;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        cr_assert(end != p, "bad shape text '%s'", text);
        a.shape[a.nshape++] = ic_dim_const(v);
        p = *end == ',' ? end + 1 : end;
    }
    return a;
}

static inline void lt_out(ic_graph *g, ic_value v)
{
    cr_assert_eq(ic_graph_add_output(g, v), IC_OK, "output: %s", ic_last_error(ic_graph_ctx(g)));
}

/* ---- data ---- */

static inline uint64_t lt_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Floats uniform in [-2, 2), integers in [-6, 6] (or the input's range), bools 0/1. */
static inline void lt_fill(ic_tensor *t, const ic_node_info *info, uint64_t seed)
{
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = lt_rand(&seed);
        double u = (double)(r >> 11) / 9007199254740992.0;
        if (ic_dtype_is_float(t->dtype))
            ic_tensor_set(t, i, -2.0 + 4.0 * u);
        else if (t->dtype == IC_BOOL)
            ic_tensor_set(t, i, (double)(r & 1));
        else if (info->dtype == IC_U8 || info->dtype == IC_I8 || info->dtype == IC_I16)
            ic_tensor_set(t, i, (double)((int64_t)(r % 512) - 256)); /* wraps: every bit pattern */
        else if (info->has_range)
            ic_tensor_set(t, i, (double)(info->range_lo + (int64_t)(r % (uint64_t)(info->range_hi - info->range_lo))));
        else
            ic_tensor_set(t, i, (double)((int64_t)(r % 13) - 6));
    }
}

static inline void lt_alloc_like(const ic_graph *g, ic_value v, ic_tensor *t)
{
    ic_node_info info;
    ic_graph_node(g, v, &info);
    int64_t shape[IC_MAX_RANK];
    for (int i = 0; i < info.rank; i++)
        shape[i] = info.shape[i].coef;
    ic_tensor_init(t, info.dtype, info.rank, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(NULL, t), IC_OK, "alloc");
}

typedef struct {
    int nargs, nouts;
    ic_tensor args[64], want[16];
} lt_data;

static inline void lt_data_make(ic_ctx *c, const ic_graph *g, uint64_t seed, lt_data *d)
{
    memset(d, 0, sizeof *d);
    d->nargs = ic_graph_num_args(g);
    d->nouts = ic_graph_num_outputs(g);
    cr_assert(d->nargs <= 64 && d->nouts <= 16, "too many args/outputs for the test harness");
    for (int i = 0; i < d->nargs; i++) {
        ic_node_info info;
        ic_graph_node(g, ic_graph_arg(g, i), &info);
        lt_alloc_like(g, ic_graph_arg(g, i), &d->args[i]);
        lt_fill(&d->args[i], &info, seed + 977u * (uint64_t)i);
    }
    ic_status s = ic_ref_run(c, g, NULL, d->nargs, d->args, d->nouts, d->want);
    cr_assert_eq(s, IC_OK, "ic_ref_run on '%s': %s", ic_graph_name(g), ic_last_error(c));
}

static inline void lt_data_free(lt_data *d)
{
    for (int i = 0; i < d->nargs; i++)
        ic_tensor_free(NULL, &d->args[i]);
    for (int i = 0; i < d->nouts; i++)
        ic_tensor_free(NULL, &d->want[i]);
}

/* Interprets p on d's arguments and compares with the reference's outputs. */
static inline void lt_compare(ic_ctx *c, const ic_program *p, const lt_data *d, const char *what)
{
    ic_tensor got[16];
    for (int i = 0; i < d->nouts; i++) {
        ic_tensor_init(&got[i], d->want[i].dtype, d->want[i].rank, d->want[i].shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &got[i]), IC_OK, "alloc");
    }
    ic_status s = ic_program_interpret(c, p, d->args, d->nargs, got, d->nouts);
    cr_assert_eq(s, IC_OK, "%s: interpret '%s': %s", what, ic_graph_name(ic_program_graph(p)), ic_last_error(c));
    for (int i = 0; i < d->nouts; i++) {
        char msg[1024];
        bool ok = ict_allclose(&got[i], &d->want[i], msg, sizeof msg);
        if (!ok) {
            fprintf(stderr, "---- %s program of '%s' ----\n", what, ic_graph_name(ic_program_graph(p)));
            ic_program_print(stderr, p);
        }
        cr_assert(ok, "%s '%s' output %d: %s", what, ic_graph_name(ic_program_graph(p)), i, msg);
        ic_tensor_free(c, &got[i]);
    }
}

/* Lowers g (and fuses it when fused_out is not NULL), checks both against the reference,
 * and hands the programs back (NULL pointers: destroyed here). */
static inline void lt_check2(ic_ctx *c, const ic_graph *g, uint64_t seed, ic_program **unfused_out,
                             ic_program **fused_out)
{
    lt_data d;
    lt_data_make(c, g, seed, &d);
    ic_program *p = NULL, *f = NULL;
    ic_status s = ic_lower(c, g, &p);
    cr_assert_eq(s, IC_OK, "ic_lower '%s': %s", ic_graph_name(g), ic_last_error(c));
    cr_assert_eq(ic_program_verify(p), IC_OK, "verify: %s", ic_last_error(c));
    lt_compare(c, p, &d, "unfused");
    if (fused_out) {
        s = ic_fuse(c, p, NULL, &f);
        cr_assert_eq(s, IC_OK, "ic_fuse '%s': %s", ic_graph_name(g), ic_last_error(c));
        cr_assert_eq(ic_program_verify(f), IC_OK, "verify fused: %s", ic_last_error(c));
        lt_compare(c, f, &d, "fused");
        *fused_out = f;
    }
    if (unfused_out)
        *unfused_out = p;
    else
        ic_program_destroy(p);
    lt_data_free(&d);
}

/* Both the unfused and the fused program must match the reference. */
static inline void lt_check(ic_ctx *c, const ic_graph *g, uint64_t seed)
{
    ic_program *f = NULL;
    lt_check2(c, g, seed, NULL, &f);
    ic_program_destroy(f);
}

/* ---- structure ---- */

static inline int lt_count_op(const ic_program *p, ic_lop op)
{
    int k = 0;
    for (int i = 0; i < ic_program_num_kernels(p); i++) {
        const ic_kernel *kn = ic_program_kernel(p, i);
        for (int s = 0; s < kn->nstages; s++)
            for (int j = 0; j < kn->stages[s].ninstr; j++)
                k += kn->stages[s].instr[j].op == op;
    }
    return k;
}

static inline bool lt_kernel_has_node(const ic_kernel *k, const char *name)
{
    for (int i = 0; i < k->nnodes; i++)
        if (strcmp(k->nodes[i], name) == 0)
            return true;
    return false;
}

#endif
