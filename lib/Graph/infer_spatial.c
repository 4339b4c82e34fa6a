/* infer_spatial.c - shape and dtype inference of the spatial ops (issue 12), with PyTorch's
 * rules and messages: pad, unfold, flip, roll, conv, max/avg pooling, adaptive pooling and
 * interpolate. The geometry (ic__spatial_geom) is shared with the reference and the
 * composite expansion. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "infer-impl.h"
#include "spatial-impl.h"

/* ---- geometry ---- */

static bool why_f(char *why, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool why_f(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

/* A shape for messages; a symbolic dim (-1) shows as "?". */
static const char *list_str(int n, const int64_t *v, char *buf, size_t cap)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < n && k < cap; i++) {
        if (v[i] < 0)
            k += (size_t)snprintf(buf + k, cap - k, "%s?", i ? ", " : "");
        else
            k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? ", " : "", (long long)v[i]);
    }
    if (k < cap)
        snprintf(buf + k, cap - k, "]");
    return buf;
}

/* A per-spatial-dim attr: absent (dflt, or dflts when not NULL), one entry for every dim
 * (PyTorch's int form) or one per dim. */
static bool per_dim(const char *name, int cnt, const int64_t *v, int k, int64_t dflt,
                    const int64_t *dflts, int64_t *out, char *why, size_t nwhy)
{
    if (cnt != 0 && cnt != 1 && cnt != k)
        return why_f(why, nwhy, "%s has %d entries, expected 1 or %d (one per spatial dim)", name,
                     cnt, k);
    for (int i = 0; i < k; i++)
        out[i] = cnt == 0 ? (dflts ? dflts[i] : dflt) : v[cnt == 1 ? 0 : i];
    return true;
}

static const char *op_word(ic_op op, int k, char *buf, size_t n)
{
    const char *base = op == IC_OP_CONV ? "conv" : op == IC_OP_CONV_TRANSPOSE ? "conv_transpose"
                     : op == IC_OP_MAX_POOL ? "max_pool" : op == IC_OP_AVG_POOL ? "avg_pool" : op == IC_OP_ADAPTIVE_AVG_POOL
                     ? "adaptive_avg_pool" : op == IC_OP_ADAPTIVE_MAX_POOL ? "adaptive_max_pool"
                     : "interpolate";
    snprintf(buf, n, "%s%dd", base, k);
    return buf;
}

/* Input rank: k + 1 (unbatched) or k + 2 (batched; the only form interpolate takes). */
static bool input_rank(ic_op op, int k, int xr, const int64_t *xs, ic__sgeom *g, char *why, size_t nwhy)
{
    char w[40], b[200];
    bool unb_ok = op != IC_OP_INTERPOLATE;
    if (xr != k + 2 && !(unb_ok && xr == k + 1)) {
        if (!unb_ok)
            return why_f(why, nwhy, "expected %dD input (N, C and %d spatial dims) for %d output "
                         "sizes, but got input of size: %s", k + 2, k, k, list_str(xr, xs, b, sizeof b));
        return why_f(why, nwhy, "Expected %dD (unbatched) or %dD (batched) input to %s, but got "
                     "input of size: %s", k + 1, k + 2, op_word(op, k, w, sizeof w),
                     list_str(xr, xs, b, sizeof b));
    }
    g->k = k;
    g->batched = xr == k + 2;
    g->n = g->batched ? xs[0] : 1;
    g->c = xs[g->batched ? 1 : 0];
    for (int i = 0; i < k; i++)
        g->in[i] = xs[xr - k + i];
    for (int i = 0; i < k; i++)
        if (g->in[i] < 0)
            return why_f(why, nwhy, "spatial dim %d is symbolic; it needs a fixed size", i);
    return true;
}

static bool conv_geom(const ic_attrs *a, int xr, const int64_t *xs, int wr, const int64_t *ws,
                      ic__sgeom *g, char *why, size_t nwhy)
{
    char b1[200], b2[200];
    int k = wr - 2;
    if (k < 1 || k > IC_SPATIAL_MAX)
        return why_f(why, nwhy, "weight %s must have 3, 4 or 5 dims (1-d, 2-d or 3-d conv)",
                     list_str(wr, ws, b1, sizeof b1));
    if (!input_rank(IC_OP_CONV, k, xr, xs, g, why, nwhy))
        return false;
    g->groups = a->groups;
    g->cout = ws[0];
    if (g->groups <= 0)
        return why_f(why, nwhy, "non-positive groups is not supported");
    if (g->cout % g->groups)
        return why_f(why, nwhy, "Given groups=%lld, expected weight to be divisible by %lld at "
                     "dimension 0, but got weight of size %s instead", (long long)g->groups,
                     (long long)g->groups, list_str(wr, ws, b1, sizeof b1));
    if (g->c != ws[1] * g->groups)
        return why_f(why, nwhy, "Given groups=%lld, weight of size %s, expected input%s to have "
                     "%lld channels, but got %lld channels instead", (long long)g->groups,
                     list_str(wr, ws, b1, sizeof b1), list_str(xr, xs, b2, sizeof b2),
                     (long long)(ws[1] * g->groups), (long long)g->c);
    for (int i = 0; i < k; i++)
        g->kernel[i] = ws[2 + i];
    if (!per_dim("stride", a->nstride, a->stride, k, 1, NULL, g->stride, why, nwhy) ||
        !per_dim("padding", a->npadding, a->padding, k, 0, NULL, g->pad_lo, why, nwhy) ||
        !per_dim("dilation", a->ndilation, a->dilation, k, 1, NULL, g->dil, why, nwhy))
        return false;
    for (int i = 0; i < k; i++) {
        if (g->stride[i] <= 0)
            return why_f(why, nwhy, "non-positive stride is not supported");
        if (g->pad_lo[i] < 0)
            return why_f(why, nwhy, "negative padding is not supported");
        if (g->dil[i] <= 0)
            return why_f(why, nwhy, "dilation should be greater than zero");
        if (a->padding_str == IC_PADDING_SAME && g->stride[i] != 1)
            return why_f(why, nwhy, "padding='same' is not supported for strided convolutions");
        int64_t span = g->dil[i] * (g->kernel[i] - 1);
        if (a->padding_str == IC_PADDING_SAME) /* PyTorch puts the odd one on the right */
            g->pad_lo[i] = span / 2, g->pad_hi[i] = span - span / 2;
        else if (a->padding_str == IC_PADDING_VALID)
            g->pad_lo[i] = g->pad_hi[i] = 0;
        else
            g->pad_hi[i] = g->pad_lo[i];
        int64_t padded = g->in[i] + g->pad_lo[i] + g->pad_hi[i];
        if (padded < span + 1)
            return why_f(why, nwhy, "Calculated padded input size per channel: %lld at spatial dim "
                         "%d. Kernel size: %lld (dilated). Kernel size can't be greater than "
                         "actual input size", (long long)padded, i, (long long)(span + 1));
        g->out[i] = (padded - span - 1) / g->stride[i] + 1;
    }
    return true;
}

/* conv_transpose: weight [Cin, Cout/groups, *k]; out = (in-1)*s - 2p + d*(k-1) + op + 1. */
static bool convt_geom(const ic_attrs *a, int xr, const int64_t *xs, int wr, const int64_t *ws,
                       ic__sgeom *g, char *why, size_t nwhy)
{
    char b1[200], b2[200];
    int k = wr - 2;
    if (k < 1 || k > IC_SPATIAL_MAX)
        return why_f(why, nwhy, "weight %s must have 3, 4 or 5 dims (1-d, 2-d or 3-d conv_transpose)",
                     list_str(wr, ws, b1, sizeof b1));
    if (!input_rank(IC_OP_CONV_TRANSPOSE, k, xr, xs, g, why, nwhy))
        return false;
    g->groups = a->groups;
    if (g->groups <= 0)
        return why_f(why, nwhy, "non-positive groups is not supported");
    if (a->padding_str != IC_PADDING_INTS)
        return why_f(why, nwhy, "padding must be integers for conv_transpose");
    if (g->c != ws[0] || ws[0] % g->groups)
        return why_f(why, nwhy, "Given transposed=1, groups=%lld, weight of size %s, expected input%s "
                     "to have %lld channels (divisible by groups), but got %lld channels instead",
                     (long long)g->groups, list_str(wr, ws, b1, sizeof b1),
                     list_str(xr, xs, b2, sizeof b2), (long long)ws[0], (long long)g->c);
    g->cout = ws[1] * g->groups;
    for (int i = 0; i < k; i++)
        g->kernel[i] = ws[2 + i];
    int64_t op[IC_SPATIAL_MAX];
    if (!per_dim("stride", a->nstride, a->stride, k, 1, NULL, g->stride, why, nwhy) ||
        !per_dim("padding", a->npadding, a->padding, k, 0, NULL, g->pad_lo, why, nwhy) ||
        !per_dim("output_padding", a->noutput_padding, a->output_padding, k, 0, NULL, op, why, nwhy) ||
        !per_dim("dilation", a->ndilation, a->dilation, k, 1, NULL, g->dil, why, nwhy))
        return false;
    for (int i = 0; i < k; i++) {
        if (g->stride[i] <= 0)
            return why_f(why, nwhy, "non-positive stride is not supported");
        if (g->pad_lo[i] < 0 || op[i] < 0)
            return why_f(why, nwhy, "negative padding is not supported");
        if (g->dil[i] <= 0)
            return why_f(why, nwhy, "dilation should be greater than zero");
        if (op[i] >= g->stride[i] && op[i] >= g->dil[i])
            return why_f(why, nwhy, "output padding must be smaller than either stride or dilation, "
                         "but got output_padding %lld, stride %lld, dilation %lld at spatial dim %d",
                         (long long)op[i], (long long)g->stride[i], (long long)g->dil[i], i);
        g->pad_hi[i] = op[i]; /* output_padding, for the expansion and the reference */
        g->out[i] = (g->in[i] - 1) * g->stride[i] - 2 * g->pad_lo[i] + g->dil[i] * (g->kernel[i] - 1) + op[i] + 1;
        if (g->out[i] <= 0)
            return why_f(why, nwhy, "Given input size %lld at spatial dim %d, the calculated output size "
                         "is %lld. Output size is too small", (long long)g->in[i], i, (long long)g->out[i]);
    }
    return true;
}

/* PyTorch's pooling_output_shape. */
static int64_t pool_out(int64_t in, int64_t k, int64_t pad, int64_t s, int64_t d, bool ceil_mode)
{
    int64_t num = in + 2 * pad - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t o = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (o - 1) * s >= in + pad)
        o--;
    return o;
}

static bool pool_geom(ic_op op, const ic_attrs *a, int xr, const int64_t *xs, ic__sgeom *g,
                      char *why, size_t nwhy)
{
    int k = a->nkernel;
    char w[40];
    if (k < 1 || k > IC_SPATIAL_MAX)
        return why_f(why, nwhy, "kernel_size must have 1, 2 or 3 entries (the spatial dims), not %d", k);
    if (!input_rank(op, k, xr, xs, g, why, nwhy))
        return false;
    for (int i = 0; i < k; i++)
        g->kernel[i] = a->kernel_size[i];
    int nd = op == IC_OP_MAX_POOL ? a->ndilation : 0;
    if (!per_dim("stride", a->nstride, a->stride, k, 0, g->kernel, g->stride, why, nwhy) ||
        !per_dim("padding", a->npadding, a->padding, k, 0, NULL, g->pad_lo, why, nwhy) ||
        !per_dim("dilation", nd, a->dilation, k, 1, NULL, g->dil, why, nwhy))
        return false;
    if (op == IC_OP_AVG_POOL && a->has_divisor && a->divisor_override == 0)
        return why_f(why, nwhy, "divisor must be not zero");
    for (int i = 0; i < k; i++) {
        if (g->kernel[i] <= 0)
            return why_f(why, nwhy, "kernel size should be greater than zero, but got %lld",
                         (long long)g->kernel[i]);
        if (g->stride[i] <= 0)
            return why_f(why, nwhy, "stride should be greater than zero, but got %lld", (long long)g->stride[i]);
        if (g->dil[i] <= 0)
            return why_f(why, nwhy, "dilation should be greater than zero, but got %lld", (long long)g->dil[i]);
        if (g->pad_lo[i] < 0 || g->pad_lo[i] > g->kernel[i] / 2)
            return why_f(why, nwhy, "pad should be at most half of kernel size, but got pad=%lld and "
                         "kernel_size=%lld", (long long)g->pad_lo[i], (long long)g->kernel[i]);
        if (g->in[i] <= 0 || g->c == 0)
            return why_f(why, nwhy, "%s: expected non-zero sizes for non-batch dims",
                         op_word(op, k, w, sizeof w));
        g->pad_hi[i] = g->pad_lo[i];
        g->out[i] = pool_out(g->in[i], g->kernel[i], g->pad_lo[i], g->stride[i], g->dil[i], a->ceil_mode);
        if (g->out[i] < 1)
            return why_f(why, nwhy, "Given input size %lld at spatial dim %d, the calculated output "
                         "size is %lld. Output size is too small", (long long)g->in[i], i,
                         (long long)g->out[i]);
    }
    return true;
}

static bool adaptive_geom(ic_op op, const ic_attrs *a, int xr, const int64_t *xs, ic__sgeom *g,
                          char *why, size_t nwhy)
{
    int k = a->noutput_size;
    char w[40];
    if (k < 1 || k > IC_SPATIAL_MAX)
        return why_f(why, nwhy, "output_size must have 1, 2 or 3 entries (the spatial dims), not %d", k);
    if (!input_rank(op, k, xr, xs, g, why, nwhy))
        return false;
    for (int i = 0; i < k; i++) {
        g->out[i] = a->output_size[i];
        if (g->out[i] <= 0)
            return why_f(why, nwhy, "output_size entry %d is %lld; it must be positive", i,
                         (long long)g->out[i]);
        if (g->in[i] == 0 || g->c == 0)
            return why_f(why, nwhy, "%s(): Expected input to have non-zero size for non-batch "
                         "dimensions", op_word(op, k, w, sizeof w));
    }
    return true;
}

static bool interp_geom(const ic_attrs *a, int xr, const int64_t *xs, ic__sgeom *g, char *why,
                        size_t nwhy)
{
    int k = a->nsize;
    static const char *const names[] = { "nearest", "nearest-exact", "linear", "bilinear", "trilinear" };
    if (k < 1 || k > IC_SPATIAL_MAX)
        return why_f(why, nwhy, "size must have 1, 2 or 3 entries (the spatial dims), not %d", k);
    if (!input_rank(IC_OP_INTERPOLATE, k, xr, xs, g, why, nwhy))
        return false;
    if (a->mode < 0 || a->mode > IC_INTERP_TRILINEAR)
        return why_f(why, nwhy, "unknown mode %d", a->mode);
    if (a->mode >= IC_INTERP_LINEAR && a->mode - IC_INTERP_LINEAR + 1 != k)
        return why_f(why, nwhy, "Got %dD input, but %s mode needs %dD input", xr, names[a->mode],
                     a->mode - IC_INTERP_LINEAR + 3);
    if (a->align_corners && a->mode < IC_INTERP_LINEAR)
        return why_f(why, nwhy, "align_corners option can only be set with the interpolating modes: "
                     "linear | bilinear | trilinear");
    if (a->nscale != 0 && a->nscale != 1 && a->nscale != k)
        return why_f(why, nwhy, "scale_factor has %d entries, expected 1 or %d", a->nscale, k);
    for (int i = 0; i < a->nscale; i++)
        if (!(a->scale_factor[i] > 0))
            return why_f(why, nwhy, "scale_factor entries must be positive, got %g", a->scale_factor[i]);
    for (int i = 0; i < k; i++) {
        g->out[i] = a->size[i];
        if (g->in[i] <= 0 || g->out[i] <= 0)
            return why_f(why, nwhy, "Input and output sizes should be greater than 0, but got input "
                         "size %lld and output size %lld at spatial dim %d", (long long)g->in[i],
                         (long long)g->out[i], i);
    }
    return true;
}

bool ic__spatial_geom(ic_op op, const ic_attrs *a, int xr, const int64_t *xs, int wr,
                      const int64_t *ws, ic__sgeom *g, char *why, size_t nwhy)
{
    memset(g, 0, sizeof *g);
    switch (op) {
    case IC_OP_CONV: return conv_geom(a, xr, xs, wr, ws, g, why, nwhy);
    case IC_OP_CONV_TRANSPOSE: return convt_geom(a, xr, xs, wr, ws, g, why, nwhy);
    case IC_OP_MAX_POOL: case IC_OP_AVG_POOL: return pool_geom(op, a, xr, xs, g, why, nwhy);
    case IC_OP_ADAPTIVE_AVG_POOL: case IC_OP_ADAPTIVE_MAX_POOL:
        return adaptive_geom(op, a, xr, xs, g, why, nwhy);
    case IC_OP_INTERPOLATE: return interp_geom(a, xr, xs, g, why, nwhy);
    default: return why_f(why, nwhy, "not a spatial op with a geometry");
    }
}

/* ---- inference ---- */

typedef struct {
    ic_graph *g;
    ic_node *n;
    const char *name, *op;
} cx;

#define FAIL(x, code, ...) ic__node_error((x)->g, (x)->name, (x)->op, code, __VA_ARGS__)

static const ic_node *arg(const cx *x, int i) { return x->g->nodes[x->n->in[i].node]; }

static ic_status need_tensor(const cx *x, int i)
{
    if (i >= x->n->info.ninputs || x->n->in[i].node < 0)
        return FAIL(x, IC_EINVAL, "input %d must be a tensor, not a %s", i,
                    i < x->n->info.ninputs && x->n->in[i].node == IC_SCALAR ? "number" : "null");
    return IC_OK;
}

static ic_status need_float(const cx *x, ic_dtype t)
{
    if (!ic_dtype_is_float(t))
        return FAIL(x, IC_EDTYPE, "takes floating-point tensors, not %s", ic_dtype_name(t));
    return IC_OK;
}

static ic_status norm_dim(const cx *x, int64_t d, int rank, int *out)
{
    int r = rank ? rank : 1;
    if (d < -r || d >= r)
        return FAIL(x, IC_EINVAL, "dim %lld is out of range for rank %d (expected %d..%d)",
                    (long long)d, rank, -r, r - 1);
    *out = (int)(d < 0 ? d + r : d);
    return IC_OK;
}

/* Sizes as int64 (-1 for a symbolic dim). */
static void sizes(const ic_node *t, int64_t *out)
{
    for (int i = 0; i < t->info.rank; i++)
        out[i] = t->shape[i].nsym ? -1 : t->shape[i].coef;
}

static void set_out(cx *x, ic_dtype t, int rank, const ic_dim *s)
{
    x->n->info.dtype = x->n->compute = t;
    x->n->info.rank = rank;
    memmove(x->n->shape, s, sizeof(ic_dim) * (size_t)rank);
}

/* F.pad (PyTorch 1.13's rules for the non-constant modes: 1-3 padded dims of a batched or
 * unbatched input, circular only batched; pads below the size, circular at most the size). */
static ic_status infer_pad(cx *x, const ic_node *a)
{
    const ic_attrs *at = &x->n->attrs;
    int r = a->info.rank, np = at->npad / 2;
    ic_dim out[IC_MAX_RANK];
    memcpy(out, a->shape, sizeof(ic_dim) * (size_t)r);
    if (at->npad % 2)
        return FAIL(x, IC_EINVAL, "Padding length must be divisible by 2");
    if (np > r)
        return FAIL(x, IC_EINVAL, "Padding length too large: %d pads for rank %d", at->npad, r);
    if (at->mode < IC_PAD_CONSTANT || at->mode > IC_PAD_CIRCULAR)
        return FAIL(x, IC_EINVAL, "unknown mode %d", at->mode);
    if (at->mode != IC_PAD_CONSTANT) {
        bool batched_only = at->mode == IC_PAD_CIRCULAR;
        if (np < 1 || np > 3 || r > np + 2 || r < np + (batched_only ? 2 : 1))
            return FAIL(x, IC_EINVAL, "%s padding of %d dims takes a %s%dD input, got %dD",
                        at->mode == IC_PAD_REFLECT ? "reflect" : at->mode == IC_PAD_REPLICATE
                        ? "replicate" : "circular", np, batched_only ? "" : "(unbatched) or ",
                        np + 2, r);
        if (at->mode != IC_PAD_CIRCULAR && (a->info.dtype == IC_BOOL || !ic_dtype_is_float(a->info.dtype)))
            return FAIL(x, IC_EDTYPE, "%s padding takes floating-point tensors, not %s",
                        at->mode == IC_PAD_REFLECT ? "reflect" : "replicate", ic_dtype_name(a->info.dtype));
        for (int d = r - np - (r == np + 2 ? 1 : 0); d < r; d++)
            if (a->shape[d].nsym == 0 && a->shape[d].coef == 0)
                return FAIL(x, IC_ESHAPE, "non-batch dim %d has size 0", d);
    }
    for (int p = 0; p < np; p++) {
        int d = r - 1 - p;
        int64_t lo = at->pad[2 * p], hi = at->pad[2 * p + 1];
        if (a->shape[d].nsym) {
            if (lo || hi)
                return FAIL(x, IC_EUNSUPPORTED, "padding symbolic dim %d needs a fixed size", d);
            continue;
        }
        int64_t n = a->shape[d].coef;
        if (at->mode == IC_PAD_REFLECT && (lo >= n || hi >= n))
            return FAIL(x, IC_EINVAL, "Padding size should be less than the corresponding input "
                        "dimension, but got: padding (%lld, %lld) at dimension %d of input %d",
                        (long long)lo, (long long)hi, d, r);
        if (at->mode == IC_PAD_CIRCULAR && n - (lo < 0 ? -lo : 0) - (hi < 0 ? -hi : 0) < 1)
            return FAIL(x, IC_ESHAPE, "circular padding (%lld, %lld) crops all of dimension %d",
                        (long long)lo, (long long)hi, d);
        if (at->mode == IC_PAD_CIRCULAR && (lo > n || hi > n))
            return FAIL(x, IC_EINVAL, "Padding value causes wrapping around more than once: "
                        "padding (%lld, %lld) at dimension %d of size %lld", (long long)lo,
                        (long long)hi, d, (long long)n);
        if (n + lo + hi < 0 || (at->mode != IC_PAD_CONSTANT && n + lo + hi < 1))
            return FAIL(x, IC_ESHAPE, "The input size %lld, plus negative padding (%lld, %lld) "
                        "resulted in a %s output size at dim %d", (long long)n, (long long)lo,
                        (long long)hi, n + lo + hi < 0 ? "negative" : "zero", d);
        out[d] = ic_dim_const(n + lo + hi);
    }
    set_out(x, a->info.dtype, r, out);
    return IC_OK;
}

static ic_status infer_unfold(cx *x, const ic_node *a)
{
    const ic_attrs *at = &x->n->attrs;
    int r = a->info.rank, d = 0;
    ic_status s;
    if (r + 1 > IC_MAX_RANK)
        return FAIL(x, IC_ESHAPE, "rank would exceed %d", IC_MAX_RANK);
    if ((s = norm_dim(x, at->dim, r, &d)))
        return s;
    ic_dim len = r ? a->shape[d] : ic_dim_const(1), out[IC_MAX_RANK];
    if (len.nsym)
        return FAIL(x, IC_EUNSUPPORTED, "unfolding symbolic dim %d needs a fixed size", d);
    if (at->unfold_size < 0)
        return FAIL(x, IC_EINVAL, "size is %lld, must be non-negative", (long long)at->unfold_size);
    if (at->step <= 0)
        return FAIL(x, IC_EINVAL, "step is %lld, must be positive", (long long)at->step);
    if (at->unfold_size > len.coef)
        return FAIL(x, IC_ESHAPE, "maximum size for tensor at dimension %d is %lld but size is %lld",
                    d, (long long)len.coef, (long long)at->unfold_size);
    memcpy(out, a->shape, sizeof(ic_dim) * (size_t)r);
    x->n->axis = d;
    if (r)
        out[d] = ic_dim_const((len.coef - at->unfold_size) / at->step + 1);
    out[r] = ic_dim_const(at->unfold_size);
    set_out(x, a->info.dtype, r + 1, out);
    return IC_OK;
}

/* flip (dims, a bitmask in axes) and roll (dims and shifts checked; no dims: flattened). */
static ic_status infer_flip_roll(cx *x, const ic_node *a)
{
    const ic_attrs *at = &x->n->attrs;
    int r = a->info.rank;
    bool roll = x->n->info.op == IC_OP_ROLL;
    x->n->axes = 0;
    if (roll && !at->has_dims && at->nshifts != 1)
        return FAIL(x, IC_EINVAL, "shifts has %d entries; without dims it takes one", at->nshifts);
    if (roll && at->has_dims && at->ndims != at->nshifts)
        return FAIL(x, IC_EINVAL, "shifts and dimensions must align. shifts: %d, dims:%d",
                    at->nshifts, at->ndims);
    if (roll && at->has_dims && at->ndims == 0)
        return FAIL(x, IC_EINVAL, "`shifts` required");
    for (int i = 0; at->has_dims && i < at->ndims; i++) {
        int d = 0;
        ic_status s = norm_dim(x, at->dims[i], r, &d);
        if (s)
            return s;
        if (!roll && r && (x->n->axes & (1u << d)))
            return FAIL(x, IC_EINVAL, "dim %d appears multiple times in the list of dims", d);
        if (r && a->shape[d].nsym && roll)
            return FAIL(x, IC_EUNSUPPORTED, "rolling symbolic dim %d needs a fixed size", d);
        x->n->axes |= r ? 1u << d : 0;
    }
    for (int d = 0; roll && !at->has_dims && d < r; d++)
        if (a->shape[d].nsym)
            return FAIL(x, IC_EUNSUPPORTED, "a flattened roll needs fixed sizes");
    set_out(x, a->info.dtype, r, a->shape);
    return IC_OK;
}

static ic_status check_conv_operands(cx *x, const ic_node *a, const ic__sgeom *g)
{
    ic_status s;
    const ic_node *w = arg(x, 1);
    char b1[160];
    if (w->info.dtype != a->info.dtype)
        return FAIL(x, IC_EDTYPE, "Input type (%s) and weight type (%s) should be the same",
                    ic_dtype_name(a->info.dtype), ic_dtype_name(w->info.dtype));
    for (int i = 0; i < w->info.rank; i++)
        if (w->shape[i].nsym)
            return FAIL(x, IC_EUNSUPPORTED, "weight dim %d is symbolic; it needs a fixed size", i);
    if (x->n->info.ninputs < 3 || x->n->in[2].node == IC_NONE)
        return IC_OK;
    if ((s = need_tensor(x, 2)))
        return s;
    const ic_node *b = arg(x, 2);
    if (b->info.dtype != a->info.dtype)
        return FAIL(x, IC_EDTYPE, "Input type (%s) and bias type (%s) should be the same",
                    ic_dtype_name(a->info.dtype), ic_dtype_name(b->info.dtype));
    if (b->info.rank != 1 || b->shape[0].nsym || b->shape[0].coef != g->cout)
        return FAIL(x, IC_ESHAPE, "expected bias to be 1-dimensional with %lld elements, but got "
                    "bias of size %s instead", (long long)g->cout,
                    ic_graph_shape_str(x->g, b->info.rank, b->shape, b1, sizeof b1));
    return IC_OK;
}

/* conv, pools, adaptive pools, interpolate: [N, C, *in] -> [N, C or Cout, *out]. */
static ic_status infer_windowed(cx *x, const ic_node *a)
{
    ic_op op = x->n->info.op;
    ic_status s;
    if ((s = need_float(x, a->info.dtype)))
        return s;
    bool conv = op == IC_OP_CONV || op == IC_OP_CONV_TRANSPOSE;
    if (conv && (s = need_tensor(x, 1)))
        return s;
    int64_t xs[IC_MAX_RANK], ws[IC_MAX_RANK] = { 0 };
    const ic_node *w = conv ? arg(x, 1) : NULL;
    sizes(a, xs);
    if (w)
        sizes(w, ws);
    ic__sgeom g;
    char why[512];
    if (!ic__spatial_geom(op, &x->n->attrs, a->info.rank, xs, w ? w->info.rank : 0, ws, &g, why, sizeof why))
        return FAIL(x, IC_ESHAPE, "%s", why);
    if (w && (s = check_conv_operands(x, a, &g)))
        return s;
    ic_dim out[IC_MAX_RANK];
    int r = a->info.rank, c = g.batched ? 1 : 0;
    memcpy(out, a->shape, sizeof(ic_dim) * (size_t)r);
    if (w)
        out[c] = ic_dim_const(g.cout);
    for (int i = 0; i < g.k; i++)
        out[c + 1 + i] = ic_dim_const(g.out[i]);
    set_out(x, a->info.dtype, r, out);
    return IC_OK;
}

ic_status ic__infer_spatial(ic_graph *g, ic_node *n)
{
    cx x = { g, n, n->info.name, ic_op_name(n->info.op) };
    ic_status s;
    if ((s = need_tensor(&x, 0)))
        return s;
    const ic_node *a = arg(&x, 0);
    switch (n->info.op) {
    case IC_OP_PAD: return infer_pad(&x, a);
    case IC_OP_UNFOLD: return infer_unfold(&x, a);
    case IC_OP_FLIP: case IC_OP_ROLL: return infer_flip_roll(&x, a);
    default: return infer_windowed(&x, a);
    }
}
