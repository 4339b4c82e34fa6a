/* expand_spatial.c - the spatial composites as existing graph ops (see expand-impl.h):
 *
 *   conv          pad (constant 0) -> unfold per spatial dim (window (k-1)*d+1, step stride)
 *                 -> slice step d (dilation) -> permute to [N, C, k..., out...] -> reshape to
 *                 [N, G, C/G*k, L] -> matmul with the weight as [G, Cout/G, C/G*k] (groups a
 *                 batch dim) -> [N, Cout, out...] (+ bias). 1x1 stride-1 convs skip the windows.
 *                 The columns are materialised (an identity pad) for the GEMM path, over
 *                 [N, C, k..., out...] before the reshape: its loops are the views' own dims
 *                 (affine offsets, no div/mod per element), and the GEMM reads the reshape
 *                 of that contiguous buffer by its flat offset.
 *                 Depthwise convs (one channel per group): a sum of the taps (strided slices
 *                 times a per-channel weight), or windows * weight summed past 25 taps.
 *   conv_transpose  zeros inserted (reshape + pad + reshape), then a stride-1 conv with the
 *                 flipped, channel-swapped weight.
 *   max_pool      pad with -inf (right pad set so that exactly `out` windows fit, ceil_mode
 *                 included; negative = crop) -> the maximum of the taps (strided slices) up to
 *                 25 taps, else unfold -> slice (dilation) -> amax.
 *   avg_pool      the same with 0 and sums (in f32 for half types), divided by PyTorch's
 *                 divisor per output position (a number when uniform, else a constant param).
 *   adaptive      per spatial dim: reshape + reduce when the size divides, else a cat of the
 *                 reduced windows [floor(o*in/out), ceil((o+1)*in/out)); avg divides by counts.
 *   interpolate   nearest: per dim a slice with step, an expand + reshape (integer upscale) or a
 *                 cat of one-element slices; linear modes: a matmul per dim with a constant
 *                 interpolation matrix (PyTorch's source index formula).
 *   roll          per dim a cat of two slices (flattened first when no dims).
 *
 * Every size comes from ic__spatial_geom, the geometry inference and the reference share. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "expand-impl.h"
#include "spatial-impl.h"

/* Element i of a float array of dtype t (the constants made here: small integers, weights). */
static void elem_set(ic_dtype t, void *data, int64_t i, double v)
{
    switch (t) {
    case IC_F64: ((double *)data)[i] = v; break;
    case IC_F16: ((uint16_t *)data)[i] = ic_f32_to_f16((float)v); break;
    case IC_BF16: ((uint16_t *)data)[i] = ic_f32_to_bf16((float)v); break;
    default: ((float *)data)[i] = (float)v; break;
    }
}

typedef struct {
    ic__exp *E;
    int seq;      /* helper counter: names "<node>.<what><seq>" */
} X;

static ic_status node(X *x, const char *what, ic_op op, int nin, const ic_operand *in,
                      const ic_attrs *a, ic_value *out)
{
    char nm[64];
    if (!what)
        return ic__exp_node(x->E, NULL, op, nin, in, a, out);
    snprintf(nm, sizeof nm, "%s%d", what, x->seq++);
    return ic__exp_node(x->E, nm, op, nin, in, a, out);
}

static ic_status constant(X *x, const char *what, ic_dtype dt, int rank, const int64_t *shape,
                         const void *data, ic_value *out)
{
    char nm[64];
    snprintf(nm, sizeof nm, "%s%d", what, x->seq++);
    return ic__exp_const(x->E, nm, dt, rank, shape, data, out);
}

static void shape_of(X *x, ic_value v, int *rank, int64_t *s)
{
    ic_node_info ni;
    ic__exp_info(x->E, v, &ni);
    *rank = ni.rank;
    for (int i = 0; i < ni.rank; i++)
        s[i] = ni.shape[i].coef;
}

static ic_dtype dtype_of(X *x, ic_value v)
{
    ic_node_info ni;
    ic__exp_info(x->E, v, &ni);
    return ni.dtype;
}

static ic_status reshape(X *x, const char *what, ic_value v, int rank, const int64_t *shape, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_RESHAPE);
    a.nshape = rank;
    for (int i = 0; i < rank; i++)
        a.shape[i] = ic_dim_const(shape[i]);
    ic_operand in = ic_val(v);
    return node(x, what, IC_OP_RESHAPE, 1, &in, &a, out);
}

static ic_status permute(X *x, ic_value v, int rank, const int64_t *perm, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_PERMUTE);
    a.has_dims = true;
    a.ndims = rank;
    memcpy(a.dims, perm, sizeof(int64_t) * (size_t)rank);
    ic_operand in = ic_val(v);
    return node(x, "perm", IC_OP_PERMUTE, 1, &in, &a, out);
}

static ic_status slice(X *x, ic_value v, int dim, int64_t start, int64_t end, int64_t step, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_SLICE);
    a.dim = dim;
    a.has_start = a.has_end = true;
    a.start = start;
    a.end = end;
    a.step = step;
    ic_operand in = ic_val(v);
    return node(x, "slice", IC_OP_SLICE, 1, &in, &a, out);
}

static ic_status unfold(X *x, ic_value v, int dim, int64_t size, int64_t step, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_UNFOLD);
    a.dim = dim;
    a.unfold_size = size;
    a.step = step;
    ic_operand in = ic_val(v);
    return node(x, "unfold", IC_OP_UNFOLD, 1, &in, &a, out);
}

/* Constant pad of the last k dims (lo[i], hi[i] for spatial dim i; negative crops). */
static ic_status pad_spatial(X *x, ic_value v, int k, const int64_t *lo, const int64_t *hi,
                             double value, ic_value *out)
{
    bool any = false;
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_PAD);
    a.npad = 2 * k;
    for (int i = 0; i < k; i++) {
        a.pad[2 * i] = lo[k - 1 - i];
        a.pad[2 * i + 1] = hi[k - 1 - i];
        any |= lo[k - 1 - i] != 0 || hi[k - 1 - i] != 0;
    }
    if (!any) {
        *out = v;
        return IC_OK;
    }
    a.value = ic_scalar_f(value).scalar;
    ic_operand in = ic_val(v);
    return node(x, "pad", IC_OP_PAD, 1, &in, &a, out);
}

static ic_status cast(X *x, ic_value v, ic_dtype to, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_CAST);
    a.has_dtype = true;
    a.dtype = to;
    ic_operand in = ic_val(v);
    return node(x, "cast", IC_OP_CAST, 1, &in, &a, out);
}

static ic_status reduce(X *x, const char *what, ic_op op, ic_value v, int ndims, const int64_t *dims,
                        bool keep, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, op);
    a.has_dims = true;
    a.ndims = ndims;
    memcpy(a.dims, dims, sizeof(int64_t) * (size_t)ndims);
    a.keepdim = keep;
    ic_operand in = ic_val(v);
    return node(x, what, op, 1, &in, &a, out);
}

static ic_status binary(X *x, const char *what, ic_op op, ic_operand a, ic_operand b, ic_value *out)
{
    ic_operand in[2] = { a, b };
    return node(x, what, op, 2, in, NULL, out);
}

/* cat of n values along dim, in chunks of at most IC_MAX_INPUTS operands. */
static ic_status cat(X *x, const ic_value *vs, int n, int dim, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_CAT);
    a.dim = dim;
    if (n == 1) {
        *out = vs[0];
        return IC_OK;
    }
    if (n <= IC_MAX_INPUTS) {
        ic_operand in[IC_MAX_INPUTS];
        for (int i = 0; i < n; i++)
            in[i] = ic_val(vs[i]);
        return node(x, "cat", IC_OP_CAT, n, in, &a, out);
    }
    ic_value halves[2];
    ic_status s = cat(x, vs, n / 2, dim, &halves[0]);
    if (!s)
        s = cat(x, vs + n / 2, n - n / 2, dim, &halves[1]);
    return s ? s : cat(x, halves, 2, dim, out);
}

/* The geometry of the composite being expanded. */
static ic_status geom(X *x, const ic_operand *in, ic__sgeom *g)
{
    ic__exp *E = x->E;
    int xr, wr = 0;
    int64_t xs[IC_MAX_RANK], ws[IC_MAX_RANK] = { 0 };
    char why[512];
    shape_of(x, in[0].node, &xr, xs);
    if (E->n.op == IC_OP_CONV || E->n.op == IC_OP_CONV_TRANSPOSE)
        shape_of(x, in[1].node, &wr, ws);
    if (!ic__spatial_geom(E->n.op, E->n.attrs, xr, xs, wr, ws, g, why, sizeof why))
        return ic__exp_fail(E, "%s", why);
    return IC_OK;
}

/* x as [N, C, *in] (an unbatched input gets a batch of 1). */
static ic_status batched(X *x, const ic__sgeom *g, ic_value v, ic_value *out)
{
    if (g->batched) {
        *out = v;
        return IC_OK;
    }
    int64_t s[IC_MAX_RANK] = { 1, g->c };
    for (int i = 0; i < g->k; i++)
        s[2 + i] = g->in[i];
    return reshape(x, "batch", v, g->k + 2, s, out);
}

/* The last node: [N, C', *out] as the node's shape (named as the composite). */
static ic_status finish(X *x, ic_value v, ic_value *out)
{
    ic__exp *E = x->E;
    int64_t s[IC_MAX_RANK];
    for (int i = 0; i < E->n.rank; i++)
        s[i] = E->n.shape[i].coef;
    return reshape(x, NULL, v, E->n.rank, s, out);
}

/* Windows of v ([N, C, *padded]) along the k spatial dims: [N, C, *out, *kernel], window i
 * of dim d starting at o * stride, taps every dil. */
static ic_status windows(X *x, const ic__sgeom *g, ic_value v, ic_value *out)
{
    ic_status s = IC_OK;
    for (int i = 0; !s && i < g->k; i++)
        s = unfold(x, v, 2 + i, (g->kernel[i] - 1) * g->dil[i] + 1, g->stride[i], &v);
    for (int i = 0; !s && i < g->k; i++)
        if (g->dil[i] > 1 && g->kernel[i] > 1)
            s = slice(x, v, 2 + g->k + i, 0, INT64_MAX, g->dil[i], &v);
    *out = v;
    return s;
}

/* An identity pad: a computed copy of v (the im2col buffer), so that the matmul reading it
 * sees a contiguous operand with affine offsets (the GEMM path) instead of the window views'
 * div/mod index math per element. Applied to the permuted windows, not to their reshape into
 * columns: a kernel over the reshaped shape would delinearise its flat index per element. */
static ic_status materialise(X *x, ic_value v, ic_value *out)
{
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_PAD);
    a.npad = 2;
    ic_operand in = ic_val(v);
    return node(x, "im2col", IC_OP_PAD, 1, &in, &a, out);
}

/* ---- conv ---- */

static ic_status add_bias(X *x, const ic__sgeom *g, ic_value y, ic_value bias, ic_value *out)
{
    int64_t L = 1, ys[3], bs[2] = { g->cout, 1 };
    for (int i = 0; i < g->k; i++)
        L *= g->out[i];
    ys[0] = g->n, ys[1] = g->cout, ys[2] = L;
    ic_value b;
    ic_status s;
    if (bias < 0) {
        *out = y;
        return IC_OK;
    }
    if ((s = reshape(x, "y", y, 3, ys, &y)) || (s = reshape(x, "bias", bias, 2, bs, &b)))
        return s;
    return binary(x, "add", IC_OP_ADD, ic_val(y), ic_val(b), out);
}

/* Tap t (row-major over the kernel) of every window of v ([N, C, *padded]): a strided slice
 * [N, C, *out] starting at the tap's offset. */
static ic_status tap_slice(X *x, const ic__sgeom *g, ic_value v, int64_t t, ic_value *out)
{
    ic_status s = IC_OK;
    for (int i = g->k - 1; i >= 0 && !s; i--) {
        int64_t off = (t % g->kernel[i]) * g->dil[i];
        t /= g->kernel[i];
        s = slice(x, v, 2 + i, off, off + (g->out[i] - 1) * g->stride[i] + 1, g->stride[i], &v);
    }
    *out = v;
    return s;
}

static int64_t kernel_taps(const ic__sgeom *g)
{
    int64_t taps = 1;
    for (int i = 0; i < g->k; i++)
        taps *= g->kernel[i];
    return taps;
}

/* Small kernels combine their taps pointwise (one vectorised expression per output, no
 * reduction loop over a window); larger ones reduce over unfolded windows. */
#define MAX_TAPS 25

/* A small depthwise kernel as a sum of its taps, each times its weight per channel
 * ([C, 1..]). */
static ic_status depthwise_taps(X *x, const ic__sgeom *g, ic_value v, ic_value wv, int64_t taps,
                                ic_value *out)
{
    int k = g->k;
    int64_t wflat[2] = { g->c, taps }, wb[IC_MAX_RANK];
    ic_value w, acc = IC_NONE;
    ic_status s = reshape(x, "w", wv, 2, wflat, &w);
    wb[0] = g->c;
    for (int i = 0; i < k; i++)
        wb[1 + i] = 1;
    for (int64_t t = 0; t < taps && !s; t++) {
        ic_value xt, wt;
        if ((s = tap_slice(x, g, v, t, &xt)) || (s = slice(x, w, 1, t, t + 1, 1, &wt)) ||
            (s = reshape(x, "wt", wt, 1 + k, wb, &wt)) ||
            (s = binary(x, "tap", IC_OP_MUL, ic_val(xt), ic_val(wt), &xt)))
            break;
        if (acc == IC_NONE)
            acc = xt;
        else
            s = binary(x, "acc", IC_OP_ADD, ic_val(acc), ic_val(xt), &acc);
    }
    *out = acc;
    return s;
}

/* The taps of a small pooling window combined by op (maximum: NaN propagates, as PyTorch's
 * max_pool; add). */
static ic_status pool_taps(X *x, const ic__sgeom *g, ic_value v, ic_op op, ic_value *out)
{
    ic_value acc = IC_NONE;
    ic_status s = IC_OK;
    for (int64_t t = 0; t < kernel_taps(g) && !s; t++) {
        ic_value xt;
        if ((s = tap_slice(x, g, v, t, &xt)))
            break;
        if (acc == IC_NONE)
            acc = xt;
        else
            s = binary(x, op == IC_OP_MAXIMUM ? "max" : "acc", op, ic_val(acc), ic_val(xt), &acc);
    }
    *out = acc;
    return s;
}

/* Depthwise (one input channel per group, one output channel each): no matmul of depth k
 * per channel but the windows times the weight [C, 1.., *k] summed over the kernel dims,
 * in f32 for the half types (PyTorch accumulates in float). */
static ic_status conv_depthwise(X *x, const ic__sgeom *g, ic_value v, ic_value wv, ic_value bias,
                                ic_value *out)
{
    int k = g->k;
    int64_t ws[IC_MAX_RANK], dims[IC_SPATIAL_MAX];
    ic_dtype dt = dtype_of(x, v);
    bool half = dt == IC_F16 || dt == IC_BF16;
    ic_status s;
    ws[0] = g->c;
    for (int i = 0; i < k; i++)
        ws[1 + i] = 1, ws[1 + k + i] = g->kernel[i], dims[i] = 2 + k + i;
    int64_t taps = kernel_taps(g);
    if ((s = pad_spatial(x, v, k, g->pad_lo, g->pad_hi, 0.0, &v)))
        return s;
    if (half && ((s = cast(x, v, IC_F32, &v)) || (s = cast(x, wv, IC_F32, &wv))))
        return s;
    if (taps <= MAX_TAPS)
        s = depthwise_taps(x, g, v, wv, taps, &v);
    else if (!(s = windows(x, g, v, &v)) && !(s = reshape(x, "w", wv, 1 + 2 * k, ws, &wv)) &&
             !(s = binary(x, "taps", IC_OP_MUL, ic_val(v), ic_val(wv), &v)))
        s = reduce(x, "sum", IC_OP_SUM, v, k, dims, false, &v);
    if (s)
        return s;
    if (half && (s = cast(x, v, dt, &v)))
        return s;
    if ((s = add_bias(x, g, v, bias, &v)))
        return s;
    return finish(x, v, out);
}

/* The convolution of v ([N, C, *in], batched) with weight w ([Cout, C/G, *k]) and bias
 * (IC_NONE: none) under geometry g, as the node's output. */
static ic_status conv_core(X *x, const ic__sgeom *g, ic_value v, ic_value wv, ic_value bias, ic_value *out)
{
    if (g->groups == g->c && g->cout == g->c && g->c > 1)
        return conv_depthwise(x, g, v, wv, bias, out);
    int k = g->k;
    int64_t G = g->groups, cg = g->c / G, kp = 1, L = 1, perm[IC_MAX_RANK];
    bool pointwise = true;
    ic_status s;
    for (int i = 0; i < k; i++) {
        kp *= g->kernel[i];
        L *= g->out[i];
        pointwise &= g->kernel[i] == 1 && g->stride[i] == 1 && g->pad_lo[i] == 0 && g->pad_hi[i] == 0;
    }
    ic_value cols, w, y;
    if (!pointwise) { /* [N, C, *out, *k] -> [N, C, *k, *out] */
        if ((s = pad_spatial(x, v, k, g->pad_lo, g->pad_hi, 0.0, &v)) || (s = windows(x, g, v, &v)))
            return s;
        perm[0] = 0, perm[1] = 1;
        for (int i = 0; i < k; i++)
            perm[2 + i] = 2 + k + i, perm[2 + k + i] = 2 + i;
        if ((s = permute(x, v, 2 + 2 * k, perm, &v)) || (s = materialise(x, v, &v)))
            return s;
    }
    /* cols [N, G, C/G * k, L]; weight [G, Cout/G, C/G * k] (2-d when G = 1) */
    int64_t cs[4] = { g->n, G, cg * kp, L }, wsh[3] = { G, g->cout / G, cg * kp };
    if ((s = reshape(x, "cols", v, G > 1 ? 4 : 3, G > 1 ? cs : (int64_t[]){ g->n, cg * kp, L }, &cols)))
        return s;
    if ((s = reshape(x, "w", wv, G > 1 ? 3 : 2, G > 1 ? wsh : wsh + 1, &w)))
        return s;
    if ((s = binary(x, "mm", IC_OP_MATMUL, ic_val(w), ic_val(cols), &y)) ||
        (s = add_bias(x, g, y, bias, &y)))  /* bias as [Cout, 1] over [N, Cout, L] */
        return s;
    return finish(x, y, out);
}

static ic_value bias_of(const ic__exp *E, const ic_operand *in)
{
    return E->n.ninputs > 2 && in[2].node >= 0 ? in[2].node : IC_NONE;
}

static ic_status expand_conv(ic__exp *E, const ic_operand *in, ic_value *out)
{
    X x = { E, 0 };
    ic__sgeom g;
    ic_value v;
    ic_status s = geom(&x, in, &g);
    if (s || (s = batched(&x, &g, in[0].node, &v)))
        return s;
    return conv_core(&x, &g, v, in[1].node, bias_of(E, in), out);
}

/* x [N, C, *in] with stride-1 zeros after each element along every spatial dim: [N, C,
 * *(in * stride)] (the trailing zeros are cropped by the conv's padding). */
static ic_status zero_insert(X *x, const ic__sgeom *g, ic_value v, ic_value *out)
{
    for (int i = 0; i < g->k; i++) {
        if (g->stride[i] == 1)
            continue;
        int r, d = 2 + i;
        int64_t s[IC_MAX_RANK], e[IC_MAX_RANK] = { 0 };
        shape_of(x, v, &r, s);
        for (int j = 0, q = 0; j < r; j++) { /* [.., in, 1, ..] */
            e[q++] = s[j];
            if (j == d)
                e[q++] = 1;
        }
        ic_attrs a;
        ic_attrs_init(&a, IC_OP_PAD);
        a.npad = 2 * (r - d); /* pads the new dim (d + 1) after by stride - 1 */
        a.pad[2 * (r - d - 1) + 1] = g->stride[i] - 1;
        ic_status st = reshape(x, "zi", v, r + 1, e, &v);
        ic_operand op = ic_val(v);
        if (st || (st = node(x, "zeros", IC_OP_PAD, 1, &op, &a, &v)))
            return st;
        s[d] *= g->stride[i];
        if ((st = reshape(x, "zs", v, r, s, &v)))
            return st;
    }
    *out = v;
    return IC_OK;
}

/* conv_transpose: a stride-1 conv of the zero-inserted input, padded by d*(k-1) - p before
 * and d*(k-1) - p + output_padding after (negative: cropped), with the weight's kernel
 * flipped and its in/out channels swapped per group: [G, Cin/G, Cout/G, *k] ->
 * [G, Cout/G, Cin/G, *k] -> [Cout, Cin/G, *k]. */
static ic_status expand_conv_transpose(ic__exp *E, const ic_operand *in, ic_value *out)
{
    X x = { E, 0 };
    ic__sgeom g, c;
    ic_value v, w;
    ic_status s = geom(&x, in, &g);
    if (s || (s = batched(&x, &g, in[0].node, &v)) || (s = zero_insert(&x, &g, v, &v)))
        return s;
    int k = g.k;
    c = g;
    for (int i = 0; i < k; i++) {
        int64_t span = g.dil[i] * (g.kernel[i] - 1);
        c.in[i] = g.in[i] * g.stride[i];
        c.pad_lo[i] = span - g.pad_lo[i];
        c.pad_hi[i] = span - g.pad_lo[i] + g.pad_hi[i] - (g.stride[i] - 1);
        c.stride[i] = 1;
    }
    int64_t G = g.groups, ws[IC_MAX_RANK], perm[IC_MAX_RANK], flip[IC_MAX_RANK];
    ws[0] = G, ws[1] = g.c / G, ws[2] = g.cout / G;
    perm[0] = 0, perm[1] = 2, perm[2] = 1;
    for (int i = 0; i < k; i++)
        ws[3 + i] = g.kernel[i], perm[3 + i] = 3 + i, flip[i] = 3 + i;
    ic_attrs fa;
    ic_attrs_init(&fa, IC_OP_FLIP);
    fa.has_dims = true;
    fa.ndims = k;
    memcpy(fa.dims, flip, sizeof(int64_t) * (size_t)k);
    if ((s = reshape(&x, "wg", in[1].node, 3 + k, ws, &w)) || (s = permute(&x, w, 3 + k, perm, &w)))
        return s;
    ic_operand op = ic_val(w);
    if ((s = node(&x, "wflip", IC_OP_FLIP, 1, &op, &fa, &w)))
        return s;
    ws[0] = g.cout, ws[1] = g.c / G;
    for (int i = 0; i < k; i++)
        ws[2 + i] = g.kernel[i];
    if ((s = reshape(&x, "wt", w, 2 + k, ws, &w)))
        return s;
    return conv_core(&x, &c, v, w, bias_of(E, in), out);
}

/* ---- pooling ---- */

/* The divisor of output index o along spatial dim i (the divisor of a position is the
 * product over dims, as PyTorch's (hend - hstart) * (wend - wstart)). */
typedef int64_t (*dim_count_fn)(const ic__sgeom *g, const ic_attrs *a, int i, int64_t o);

/* avg_pool: the window clipped to the padded input (count_include_pad) or to the input. */
static int64_t avg_count(const ic__sgeom *g, const ic_attrs *a, int i, int64_t o)
{
    int64_t lo = o * g->stride[i] - g->pad_lo[i], hi = lo + g->kernel[i];
    if (hi > g->in[i] + g->pad_lo[i])
        hi = g->in[i] + g->pad_lo[i];
    if (a->count_include_pad)
        return hi - lo;
    lo = lo < 0 ? 0 : lo;
    hi = hi > g->in[i] ? g->in[i] : hi;
    return hi - lo;
}

/* adaptive_avg_pool: the window [floor(o*in/out), ceil((o+1)*in/out)). */
static int64_t adaptive_count(const ic__sgeom *g, const ic_attrs *a, int i, int64_t o)
{
    (void)a;
    return ((o + 1) * g->in[i] + g->out[i] - 1) / g->out[i] - o * g->in[i] / g->out[i];
}

/* v / the divisor of each output position: a number when they are all equal, else a
 * constant [*out] param (small integers: exact in every float dtype). */
static ic_status divide_by_counts(X *x, const ic__sgeom *g, dim_count_fn f, ic_value v, ic_value *out)
{
    const ic_attrs *a = x->E->n.attrs;
    int64_t n = 1;
    for (int i = 0; i < g->k; i++)
        n *= g->out[i];
    ic_dtype dt = dtype_of(x, v);
    void *buf = ic__calloc(x->E->c, (size_t)(n ? n : 1), ic_dtype_size(dt));
    if (!buf)
        return ic__exp_fail(x->E, "out of memory");
    bool uni = true;
    int64_t first = 0;
    for (int64_t p = 0; p < n; p++) {
        int64_t rem = p, cnt = 1;
        for (int i = g->k - 1; i >= 0; i--) {
            cnt *= f(g, a, i, rem % g->out[i]);
            rem /= g->out[i];
        }
        first = p ? first : cnt;
        uni &= cnt == first;
        elem_set(dt, buf, p, (double)cnt);
    }
    ic_operand d = ic_scalar_i(first);
    ic_status s = IC_OK;
    if (!uni) {
        ic_value c;
        s = constant(x, "divisor", dt, g->k, g->out, buf, &c);
        d = ic_val(c);
    }
    ic__free(x->E->c, buf);
    return s ? s : binary(x, "div", IC_OP_DIV, ic_val(v), d, out);
}

static ic_status expand_pool(ic__exp *E, const ic_operand *in, ic_value *out)
{
    X x = { E, 0 };
    ic__sgeom g;
    ic_status s = geom(&x, in, &g);
    if (s)
        return s;
    bool mx = E->n.op == IC_OP_MAX_POOL;
    int k = g.k;
    int64_t hi[IC_SPATIAL_MAX], dims[IC_SPATIAL_MAX];
    for (int i = 0; i < k; i++) { /* exactly out windows: ceil_mode's last one may overhang */
        hi[i] = (g.out[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dil[i] + 1 - g.in[i] - g.pad_lo[i];
        dims[i] = 2 + k + i;
    }
    ic_value v;
    if ((s = batched(&x, &g, in[0].node, &v)))
        return s;
    ic_dtype dt = dtype_of(&x, v);
    bool half = !mx && (dt == IC_F16 || dt == IC_BF16); /* sums in f32, one rounding */
    if ((half && (s = cast(&x, v, IC_F32, &v))) ||
        (s = pad_spatial(&x, v, k, g.pad_lo, hi, mx ? -INFINITY : 0.0, &v)))
        return s;
    if (kernel_taps(&g) <= MAX_TAPS)
        s = pool_taps(&x, &g, v, mx ? IC_OP_MAXIMUM : IC_OP_ADD, &v);
    else if (!(s = windows(&x, &g, v, &v)))
        s = reduce(&x, mx ? "max" : "sum", mx ? IC_OP_AMAX : IC_OP_SUM, v, k, dims, false, &v);
    if (!s && !mx && E->n.attrs->has_divisor)
        s = binary(&x, "div", IC_OP_DIV, ic_val(v), ic_scalar_i(E->n.attrs->divisor_override), &v);
    else if (!s && !mx)
        s = divide_by_counts(&x, &g, avg_count, v, &v);
    if (!s && half)
        s = cast(&x, v, dt, &v);
    return s ? s : finish(&x, v, out);
}

/* ---- adaptive pooling: separable, one spatial dim at a time ---- */

/* PyTorch's adaptive windows [floor(o*in/out), ceil((o+1)*in/out)) along dim, each reduced
 * (keepdim) and concatenated. */
static ic_status irregular_windows(X *x, ic_value v, int dim, int64_t in, int64_t outn, ic_op red,
                                   ic_value *out)
{
    ic_value *parts = ic__calloc(x->E->c, (size_t)outn, sizeof *parts);
    if (!parts)
        return ic__exp_fail(x->E, "out of memory");
    ic_status st = IC_OK;
    for (int64_t o = 0; o < outn && !st; o++) {
        int64_t lo = o * in / outn, hi = ((o + 1) * in + outn - 1) / outn, dd = dim;
        ic_value p;
        st = slice(x, v, dim, lo, hi, 1, &p);
        if (!st)
            st = reduce(x, "red", red, p, 1, &dd, true, &parts[o]);
    }
    if (!st)
        st = cat(x, parts, (int)outn, dim, out);
    ic__free(x->E->c, parts);
    return st;
}

static ic_status adaptive_dim(X *x, ic_value v, int dim, int64_t in, int64_t outn, ic_op red,
                              ic_value *out)
{
    int r;
    int64_t s[IC_MAX_RANK], d = dim + 1;
    shape_of(x, v, &r, s);
    ic_status st;
    if (in == outn) {
        *out = v;
        return IC_OK;
    }
    if (in % outn == 0) { /* [.., out, in/out, ..] reduced over the window dim */
        int64_t ns[IC_MAX_RANK] = { 0 };
        for (int i = 0, j = 0; i < r; i++) {
            if (i == dim)
                ns[j++] = outn, ns[j++] = in / outn;
            else
                ns[j++] = s[i];
        }
        if ((st = reshape(x, "win", v, r + 1, ns, &v)))
            return st;
        return reduce(x, "red", red, v, 1, &d, false, out);
    }
    return irregular_windows(x, v, dim, in, outn, red, out);
}

static ic_status expand_adaptive(ic__exp *E, const ic_operand *in, ic_value *out)
{
    X x = { E, 0 };
    ic__sgeom g;
    ic_status s = geom(&x, in, &g);
    if (s)
        return s;
    bool mx = E->n.op == IC_OP_ADAPTIVE_MAX_POOL;
    ic_value v;
    if ((s = batched(&x, &g, in[0].node, &v)))
        return s;
    for (int i = 0; i < g.k && !s; i++)
        s = adaptive_dim(&x, v, 2 + i, g.in[i], g.out[i], mx ? IC_OP_AMAX : IC_OP_SUM, &v);
    if (s)
        return s;
    if (!mx && (s = divide_by_counts(&x, &g, adaptive_count, v, &v)))
        return s;
    return finish(&x, v, out);
}

/* ---- roll ---- */

static ic_status roll_dim(X *x, ic_value v, int dim, int64_t len, int64_t shift, ic_value *out)
{
    int64_t sft = len ? ((shift % len) + len) % len : 0;
    if (sft == 0) {
        *out = v;
        return IC_OK;
    }
    ic_value p[2];
    ic_status s;
    if ((s = slice(x, v, dim, len - sft, len, 1, &p[0])) || (s = slice(x, v, dim, 0, len - sft, 1, &p[1])))
        return s;
    return cat(x, p, 2, dim, out);
}

static ic_status expand_roll(ic__exp *E, const ic_operand *in, ic_value *out)
{
    X x = { E, 0 };
    const ic_attrs *a = E->n.attrs;
    int r;
    int64_t s[IC_MAX_RANK];
    ic_value v = in[0].node;
    ic_status st = IC_OK;
    shape_of(&x, v, &r, s);
    if (!a->has_dims) {
        int64_t n = 1;
        for (int i = 0; i < r; i++)
            n *= s[i];
        if ((st = reshape(&x, "flat", v, 1, &n, &v)) || (st = roll_dim(&x, v, 0, n, a->shifts[0], &v)))
            return st;
    } else {
        for (int i = 0; i < a->ndims && !st && r; i++) {
            int d = (int)(a->dims[i] < 0 ? a->dims[i] + r : a->dims[i]);
            st = roll_dim(&x, v, d, s[d], a->shifts[i], &v);
        }
        if (st)
            return st;
    }
    return reshape(&x, NULL, v, r, s, out);
}

/* ---- interpolate: separable, one spatial dim (i of k) at a time ---- */

/* PyTorch's scale for dim i: align_corners (in-1)/(out-1), else 1/scale_factor when given,
 * else in/out (area_pixel_compute_scale, compute_scales_value). */
static double interp_scale(const ic_attrs *a, int i, int64_t in, int64_t out, bool align)
{
    if (align)
        return out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    if (a->nscale)
        return 1.0 / a->scale_factor[a->nscale == 1 ? 0 : i];
    return (double)in / (double)out;
}

/* nearest / nearest-exact source index (float arithmetic, as PyTorch's nearest_idx). */
static int64_t nearest_src(const ic_attrs *a, int i, int64_t o, int64_t in, int64_t out)
{
    if (out == in && !a->nscale)
        return o;
    float sc = (float)interp_scale(a, i, in, out, false);
    float f = a->mode == IC_INTERP_NEAREST_EXACT ? floorf(((float)o + 0.5f) * sc) : floorf((float)o * sc);
    int64_t s = (int64_t)f;
    return s < in - 1 ? s : in - 1;
}

/* v repeated f times along dim: [.., in, 1, ..] -> expand [.., in, f, ..] -> [.., in * f, ..]. */
static ic_status upsample_dim(X *x, ic_value v, int dim, int64_t f, ic_value *out)
{
    int r;
    int64_t s[IC_MAX_RANK], e[IC_MAX_RANK] = { 0 };
    ic_status st;
    shape_of(x, v, &r, s);
    for (int j = 0, q = 0; j < r; j++) {
        e[q++] = s[j];
        if (j == dim)
            e[q++] = 1;
    }
    if ((st = reshape(x, "rep", v, r + 1, e, &v)))
        return st;
    ic_attrs ea;
    ic_attrs_init(&ea, IC_OP_EXPAND);
    e[dim + 1] = f;
    ea.nshape = r + 1;
    for (int j = 0; j <= r; j++)
        ea.shape[j] = ic_dim_const(e[j]);
    ic_operand op = ic_val(v);
    if ((st = node(x, "expand", IC_OP_EXPAND, 1, &op, &ea, &v)))
        return st;
    s[dim] *= f;
    return reshape(x, "up", v, r, s, out);
}

/* The elements src[0..n) of v along dim: a cat of the runs of consecutive sources. */
static ic_status runs_dim(X *x, ic_value v, int dim, const int64_t *src, int64_t n, ic_value *out)
{
    ic_value *parts = ic__calloc(x->E->c, (size_t)n, sizeof *parts);
    if (!parts)
        return ic__exp_fail(x->E, "out of memory");
    int np = 0;
    ic_status st = IC_OK;
    for (int64_t o = 0; o < n && !st;) {
        int64_t len = 1;
        while (o + len < n && src[o + len] == src[o] + len)
            len++;
        st = slice(x, v, dim, src[o], src[o] + len, 1, &parts[np++]);
        o += len;
    }
    if (!st)
        st = cat(x, parts, np, dim, out);
    ic__free(x->E->c, parts);
    return st;
}

/* Nearest along dim: a strided slice (sources o * step + first), an integer upscale
 * (sources o / f) or a cat of the runs of consecutive sources. */
static ic_status nearest_dim(X *x, ic_value v, int dim, int i, int64_t in, int64_t outn, ic_value *out)
{
    const ic_attrs *a = x->E->n.attrs;
    int64_t *src = ic__calloc(x->E->c, (size_t)outn, sizeof *src);
    if (!src)
        return ic__exp_fail(x->E, "out of memory");
    for (int64_t o = 0; o < outn; o++)
        src[o] = nearest_src(a, i, o, in, outn);
    int64_t step = outn > 1 ? src[1] - src[0] : 1, f = outn / in;
    bool arith = step >= 1, up = outn % in == 0 && f > 1;
    for (int64_t o = 0; o < outn; o++) {
        arith &= src[o] == src[0] + step * o;
        up &= src[o] == o / (f ? f : 1);
    }
    ic_status st;
    if (arith)
        st = slice(x, v, dim, src[0], src[0] + step * (outn - 1) + 1, step, out);
    else if (up)
        st = upsample_dim(x, v, dim, f, out);
    else
        st = runs_dim(x, v, dim, src, outn, out);
    ic__free(x->E->c, src);
    return st;
}

/* Linear along dim: v (dim moved last) @ M^T with M^T [in, out] holding PyTorch's two taps
 * per output (area_pixel_compute_source_index; float math as PyTorch's opmath, double for
 * f64). */
static ic_status linear_dim(X *x, ic_value v, int dim, int i, int64_t in, int64_t outn, ic_value *out)
{
    const ic_attrs *a = x->E->n.attrs;
    ic_dtype dt = dtype_of(x, v);
    bool dbl = dt == IC_F64;
    void *m = ic__calloc(x->E->c, (size_t)(in * outn), ic_dtype_size(dt));
    if (!m)
        return ic__exp_fail(x->E, "out of memory");
    double sc = interp_scale(a, i, in, outn, a->align_corners);
    for (int64_t o = 0; o < outn; o++) {
        double src;
        if (dbl) {
            src = a->align_corners ? sc * (double)o : sc * ((double)o + 0.5) - 0.5;
        } else {
            float fs = (float)sc;
            src = a->align_corners ? fs * (float)o : fs * ((float)o + 0.5f) - 0.5f;
        }
        if (src < 0)
            src = 0;
        int64_t i0 = (int64_t)src, i1 = i0 + (i0 < in - 1 ? 1 : 0);
        double w1 = dbl ? src - (double)i0 : (double)((float)src - (float)i0);
        elem_set(dt, m, i0 * outn + o, (i0 == i1 ? 1.0 : 1 - w1));
        if (i1 != i0)
            elem_set(dt, m, i1 * outn + o, w1);
    }
    int r;
    int64_t s[IC_MAX_RANK], perm[IC_MAX_RANK], ms[2] = { in, outn };
    shape_of(x, v, &r, s);
    for (int j = 0; j < r; j++)
        perm[j] = j == dim ? r - 1 : j == r - 1 ? dim : j;
    ic_value mt;
    ic_status st = constant(x, "lerp", dt, 2, ms, m, &mt);
    ic__free(x->E->c, m);
    if (st)
        return st;
    if (dim != r - 1 && (st = permute(x, v, r, perm, &v)))
        return st;
    if ((st = binary(x, "mm", IC_OP_MATMUL, ic_val(v), ic_val(mt), &v)))
        return st;
    if (dim != r - 1)
        return permute(x, v, r, perm, out);
    *out = v;
    return IC_OK;
}

static ic_status expand_interpolate(ic__exp *E, const ic_operand *in, ic_value *out)
{
    X x = { E, 0 };
    ic__sgeom g;
    ic_status s = geom(&x, in, &g);
    if (s)
        return s;
    bool lin = E->n.attrs->mode >= IC_INTERP_LINEAR;
    ic_value v = in[0].node;
    ic_dtype dt = dtype_of(&x, v);
    bool half = lin && (dt == IC_F16 || dt == IC_BF16);
    if (half && (s = cast(&x, v, IC_F32, &v))) /* PyTorch's opmath: one rounding at the end */
        return s;
    for (int i = 0; i < g.k && !s; i++) {
        if (g.in[i] == g.out[i] && !E->n.attrs->nscale)
            continue; /* same size: identity in every mode (source index = o) */
        s = lin ? linear_dim(&x, v, 2 + i, i, g.in[i], g.out[i], &v)
                : nearest_dim(&x, v, 2 + i, i, g.in[i], g.out[i], &v);
    }
    if (!s && half)
        s = cast(&x, v, dt, &v);
    return s ? s : finish(&x, v, out);
}

ic__expand_fn ic__expand_spatial(ic_op op)
{
    switch (op) {
    case IC_OP_CONV: return expand_conv;
    case IC_OP_CONV_TRANSPOSE: return expand_conv_transpose;
    case IC_OP_MAX_POOL: case IC_OP_AVG_POOL: return expand_pool;
    case IC_OP_ADAPTIVE_AVG_POOL: case IC_OP_ADAPTIVE_MAX_POOL: return expand_adaptive;
    case IC_OP_ROLL: return expand_roll;
    case IC_OP_INTERPOLATE: return expand_interpolate;
    default: return NULL;
    }
}
