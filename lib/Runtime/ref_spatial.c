/* ref_spatial.c - the reference executor's spatial ops (issue 12): pad, unfold, flip, roll,
 * conv, max/avg pooling, adaptive pooling and interpolate, written from PyTorch's CPU kernels
 * in plain loops over doubles (the oracle; the compiled path expands them into other ops).
 * Windowed ops see every input as [N, C, D, H, W]: 1-d and 2-d ones get leading spatial dims
 * of size 1, unbatched ones a batch of 1. */
#include <float.h>
#include <stdio.h>
#include <string.h>
#include "ref-impl.h"
#include "spatial-impl.h"

#define FAIL(g, n, code, ...) \
    ic__node_error((g), (n)->info.name, ic_op_name((n)->info.op), (code), __VA_ARGS__)

static void strides_of(int rank, const int64_t *shape, int64_t *st)
{
    int64_t s = 1;
    for (int i = rank - 1; i >= 0; i--) {
        st[i] = s;
        s *= shape[i];
    }
}

/* Steps idx (row-major over shape); false after the last index. */
static bool next_index(int rank, const int64_t *shape, int64_t *idx)
{
    for (int i = rank - 1; i >= 0; i--) {
        if (++idx[i] < shape[i])
            return true;
        idx[i] = 0;
    }
    return false;
}

static bool is_int_like(ic_dtype t) { return !ic_dtype_is_float(t); }

/* Copies element si of x to element oi of out (same dtype: exact for every dtype). */
static void copy_elem(const ic_tensor *x, int64_t si, ic_tensor *out, int64_t oi)
{
    size_t es = ic_dtype_size(x->dtype);
    memcpy((char *)out->data + (size_t)oi * es, (const char *)x->data + (size_t)si * es, es);
}

/* ---- index maps: pad, unfold, flip, roll ---- */

/* Every output element is one input element (or pad's constant): src(out index) -> source
 * flat index, -1 for the constant. */
typedef int64_t (*src_fn)(const ic_node *n, const ic_tensor *x, const int64_t *idx);

static int64_t src_pad(const ic_node *n, const ic_tensor *x, const int64_t *idx)
{
    const ic_attrs *a = &n->attrs;
    int64_t st[IC_MAX_RANK], off = 0;
    strides_of(x->rank, x->shape, st);
    for (int d = 0; d < x->rank; d++) {
        int p = x->rank - 1 - d; /* F.pad order: last dim first */
        int64_t before = p < a->npad / 2 ? a->pad[2 * p] : 0, after = p < a->npad / 2 ? a->pad[2 * p + 1] : 0;
        int64_t i = ic__pad_source(idx[d], before, after, x->shape[d], a->mode);
        if (i < 0)
            return -1;
        off += i * st[d];
    }
    return off;
}

static int64_t src_unfold(const ic_node *n, const ic_tensor *x, const int64_t *idx)
{
    int64_t st[IC_MAX_RANK], off = 0;
    strides_of(x->rank, x->shape, st);
    for (int d = 0; d < x->rank; d++)
        off += (d == n->axis ? idx[d] * n->attrs.step + idx[x->rank] : idx[d]) * st[d];
    return off;
}

static int64_t src_flip(const ic_node *n, const ic_tensor *x, const int64_t *idx)
{
    int64_t st[IC_MAX_RANK], off = 0;
    strides_of(x->rank, x->shape, st);
    for (int d = 0; d < x->rank; d++)
        off += ((n->axes & (1u << d)) ? x->shape[d] - 1 - idx[d] : idx[d]) * st[d];
    return off;
}

static int64_t wrap(int64_t i, int64_t shift, int64_t len)
{
    int64_t s = shift % len;
    return ((i - s) % len + len) % len;
}

/* roll: out[i] = x[(i - shift) mod n] along each dim; without dims over the flat order. */
static int64_t src_roll(const ic_node *n, const ic_tensor *x, const int64_t *idx)
{
    const ic_attrs *a = &n->attrs;
    int64_t st[IC_MAX_RANK], off = 0, j[IC_MAX_RANK];
    strides_of(x->rank, x->shape, st);
    if (!a->has_dims) {
        int64_t flat = 0;
        for (int d = 0; d < x->rank; d++)
            flat += idx[d] * st[d];
        return wrap(flat, a->shifts[0], ic_tensor_numel(x));
    }
    memcpy(j, idx, sizeof(int64_t) * (size_t)x->rank);
    for (int i = 0; i < a->ndims; i++) {
        int d = (int)(a->dims[i] < 0 ? a->dims[i] + x->rank : a->dims[i]);
        if (x->rank)
            j[d] = wrap(j[d], a->shifts[i], x->shape[d]);
    }
    for (int d = 0; d < x->rank; d++)
        off += j[d] * st[d];
    return off;
}

static ic_status index_map(const ic_node *n, const ic_tensor *x, ic_tensor *out, src_fn f)
{
    int64_t idx[IC_MAX_RANK] = { 0 };
    if (ic_tensor_numel(out) == 0)
        return IC_OK;
    int64_t oi = 0;
    do {
        int64_t si = f(n, x, idx);
        if (si >= 0)
            copy_elem(x, si, out, oi);
        else if (is_int_like(out->dtype))
            ic__ref_seti(out, oi, n->attrs.value.is_int ? n->attrs.value.i : (int64_t)n->attrs.value.f);
        else
            ic__ref_setf(out, oi, n->attrs.value.is_int ? (double)n->attrs.value.i : n->attrs.value.f);
        oi++;
    } while (next_index(out->rank, out->shape, idx));
    return IC_OK;
}

/* ---- windowed ops: geometry lifted to [N, C, D, H, W] ---- */

typedef struct {
    int64_t n, c, co, groups;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
} geom3;

static ic_status geom_of(const ic_graph *g, const ic_node *n, const ic_tensor *x, const ic_tensor *w,
                         ic__sgeom *sg, geom3 *G)
{
    char why[512];
    if (!ic__spatial_geom(n->info.op, &n->attrs, x->rank, x->shape, w ? w->rank : 0,
                          w ? w->shape : NULL, sg, why, sizeof why))
        return FAIL(g, n, IC_ESHAPE, "%s", why);
    G->n = sg->n;
    G->c = sg->c;
    G->co = n->info.op == IC_OP_CONV || n->info.op == IC_OP_CONV_TRANSPOSE ? sg->cout : sg->c;
    G->groups = sg->groups;
    for (int i = 0; i < 3; i++) {
        int j = i - (3 - sg->k);
        bool real = j >= 0;
        G->in[i] = real ? sg->in[j] : 1;
        G->out[i] = real ? sg->out[j] : 1;
        G->k[i] = real ? sg->kernel[j] : 1;
        G->s[i] = real ? sg->stride[j] : 1;
        G->p[i] = real ? sg->pad_lo[j] : 0;
        G->d[i] = real ? sg->dil[j] : 1;
    }
    return IC_OK;
}

static int64_t at5(const geom3 *G, int64_t n, int64_t c, int64_t C, int64_t z, int64_t y, int64_t x)
{
    return (((n * C + c) * G->in[0] + z) * G->in[1] + y) * G->in[2] + x;
}

static int64_t out5(const geom3 *G, int64_t n, int64_t c, int64_t C, const int64_t *o)
{
    return (((n * C + c) * G->out[0] + o[0]) * G->out[1] + o[1]) * G->out[2] + o[2];
}

/* Steps the 3-d output index o over G->out; false after the last. */
static bool next_out(const geom3 *G, int64_t *o)
{
    return next_index(3, G->out, o);
}

static double conv_point(const geom3 *G, const ic_tensor *x, const ic_tensor *w, int64_t b,
                         int64_t co, const int64_t *o)
{
    int64_t cg = G->c / G->groups, per = G->co / G->groups, g0 = (co / per) * cg;
    double acc = 0;
    for (int64_t ci = 0; ci < cg; ci++)
        for (int64_t kz = 0; kz < G->k[0]; kz++)
            for (int64_t ky = 0; ky < G->k[1]; ky++)
                for (int64_t kx = 0; kx < G->k[2]; kx++) {
                    int64_t z = o[0] * G->s[0] - G->p[0] + kz * G->d[0];
                    int64_t y = o[1] * G->s[1] - G->p[1] + ky * G->d[1];
                    int64_t xx = o[2] * G->s[2] - G->p[2] + kx * G->d[2];
                    if (z < 0 || z >= G->in[0] || y < 0 || y >= G->in[1] || xx < 0 || xx >= G->in[2])
                        continue;
                    int64_t wi = (((co * cg + ci) * G->k[0] + kz) * G->k[1] + ky) * G->k[2] + kx;
                    acc += ic__ref_getf(x, at5(G, b, g0 + ci, G->c, z, y, xx)) * ic__ref_getf(w, wi);
                }
    return acc;
}

/* conv_transpose output o gathers input i and tap kk where i * s = o + p - kk * d (PyTorch's
 * scatter written as a gather); weight [Cin, Cout/groups, *k]. */
static bool convt_tap(const geom3 *G, int i, int64_t o, int64_t kk, int64_t *src)
{
    int64_t t = o + G->p[i] - kk * G->d[i];
    if (t < 0 || t % G->s[i])
        return false;
    *src = t / G->s[i];
    return *src < G->in[i];
}

static double convt_point(const geom3 *G, const ic_tensor *x, const ic_tensor *w, int64_t b,
                          int64_t co, const int64_t *o)
{
    int64_t cg = G->c / G->groups, per = G->co / G->groups, grp = co / per, c0 = co % per;
    double acc = 0;
    for (int64_t ci = grp * cg; ci < (grp + 1) * cg; ci++)
        for (int64_t kz = 0; kz < G->k[0]; kz++)
            for (int64_t ky = 0; ky < G->k[1]; ky++)
                for (int64_t kx = 0; kx < G->k[2]; kx++) {
                    int64_t z, y, xx;
                    if (!convt_tap(G, 0, o[0], kz, &z) || !convt_tap(G, 1, o[1], ky, &y) ||
                        !convt_tap(G, 2, o[2], kx, &xx))
                        continue;
                    int64_t wi = (((ci * per + c0) * G->k[0] + kz) * G->k[1] + ky) * G->k[2] + kx;
                    acc += ic__ref_getf(x, at5(G, b, ci, G->c, z, y, xx)) * ic__ref_getf(w, wi);
                }
    return acc;
}

static ic_status ref_conv(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out)
{
    bool tr = n->info.op == IC_OP_CONV_TRANSPOSE;
    ic__sgeom sg;
    geom3 G;
    ic_status s = geom_of(g, n, ins[0], ins[1], &sg, &G);
    if (s)
        return s;
    const ic_tensor *bias = n->info.ninputs > 2 ? ins[2] : NULL;
    for (int64_t b = 0; b < G.n; b++)
        for (int64_t co = 0; co < G.co; co++) {
            int64_t o[3] = { 0, 0, 0 };
            do {
                double v = tr ? convt_point(&G, ins[0], ins[1], b, co, o)
                              : conv_point(&G, ins[0], ins[1], b, co, o);
                if (bias)
                    v += ic__ref_getf(bias, co);
                ic__ref_setf(out, out5(&G, b, co, G.co, o), v);
            } while (next_out(&G, o));
        }
    return IC_OK;
}

/* max over the window (NaN propagates, as PyTorch's `val > max || isnan(val)`); padding and
 * dilation holes are never read. */
static double max_window(const geom3 *G, const ic_tensor *x, int64_t b, int64_t c,
                         const int64_t *lo, const int64_t *hi, const int64_t *step)
{
    double m = -INFINITY;
    for (int64_t z = lo[0]; z < hi[0]; z += step[0])
        for (int64_t y = lo[1]; y < hi[1]; y += step[1])
            for (int64_t xx = lo[2]; xx < hi[2]; xx += step[2]) {
                if (z < 0 || y < 0 || xx < 0)
                    continue;
                double v = ic__ref_getf(x, at5(G, b, c, G->c, z, y, xx));
                if (v > m || isnan(v))
                    m = v;
                if (isnan(m))
                    return m;
            }
    return m;
}

static double sum_window(const geom3 *G, const ic_tensor *x, int64_t b, int64_t c,
                         const int64_t *lo, const int64_t *hi)
{
    double acc = 0;
    for (int64_t z = lo[0]; z < hi[0]; z++)
        for (int64_t y = lo[1]; y < hi[1]; y++)
            for (int64_t xx = lo[2]; xx < hi[2]; xx++)
                acc += ic__ref_getf(x, at5(G, b, c, G->c, z, y, xx));
    return acc;
}

/* One pooled value (PyTorch's max_pool and avg_pool CPU kernels). */
static double pool_point(const ic_node *n, const geom3 *G, const ic_tensor *x, int64_t b,
                         int64_t c, const int64_t *o)
{
    const ic_attrs *a = &n->attrs;
    int64_t lo[3], hi[3], area = 1;
    if (n->info.op == IC_OP_MAX_POOL) {
        for (int i = 0; i < 3; i++) {
            lo[i] = o[i] * G->s[i] - G->p[i];
            hi[i] = lo[i] + (G->k[i] - 1) * G->d[i] + 1;
            if (hi[i] > G->in[i])
                hi[i] = G->in[i];
            while (lo[i] < 0) /* first tap inside the input */
                lo[i] += G->d[i];
        }
        return max_window(G, x, b, c, lo, hi, G->d);
    }
    for (int i = 0; i < 3; i++) {
        lo[i] = o[i] * G->s[i] - G->p[i];
        hi[i] = lo[i] + G->k[i];
        if (hi[i] > G->in[i] + G->p[i])
            hi[i] = G->in[i] + G->p[i];
        area *= hi[i] - lo[i];
        if (lo[i] < 0)
            lo[i] = 0;
        if (hi[i] > G->in[i])
            hi[i] = G->in[i];
    }
    int64_t div = area;
    if (a->has_divisor)
        div = a->divisor_override;
    else if (!a->count_include_pad)
        div = (hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]);
    return sum_window(G, x, b, c, lo, hi) / (double)div;
}

/* PyTorch's adaptive windows: [floor(o * in / out), ceil((o + 1) * in / out)). */
static double adaptive_point(const ic_node *n, const geom3 *G, const ic_tensor *x, int64_t b,
                             int64_t c, const int64_t *o)
{
    int64_t lo[3], hi[3], one[3] = { 1, 1, 1 };
    for (int i = 0; i < 3; i++) {
        lo[i] = o[i] * G->in[i] / G->out[i];
        hi[i] = ((o[i] + 1) * G->in[i] + G->out[i] - 1) / G->out[i];
    }
    if (n->info.op == IC_OP_ADAPTIVE_MAX_POOL)
        return max_window(G, x, b, c, lo, hi, one);
    double cnt = (double)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
    return sum_window(G, x, b, c, lo, hi) / cnt;
}

/* ---- interpolate ---- */

/* PyTorch's area_pixel_compute_scale / compute_scales_value for spatial dim i (real dims
 * only; lifted dims have in = out = 1). */
static double interp_scale(const ic_attrs *a, int k, int i, int64_t in, int64_t out, bool align)
{
    if (align)
        return out > 1 ? (double)(in - 1) / (double)(out - 1) : 0.0;
    if (a->nscale)
        return 1.0 / a->scale_factor[a->nscale == 1 ? 0 : i - (3 - k)];
    return (double)in / (double)out;
}

/* Source index of nearest / nearest-exact (float arithmetic, as PyTorch's nearest_idx). */
static int64_t nearest_src(const ic_attrs *a, int k, int i, int64_t o, int64_t in, int64_t out)
{
    if (out == in && !a->nscale)
        return o;
    float sc = (float)interp_scale(a, k, i, in, out, false);
    float f = a->mode == IC_INTERP_NEAREST_EXACT ? floorf(((float)o + 0.5f) * sc) : floorf((float)o * sc);
    int64_t s = (int64_t)f;
    return s < in - 1 ? s : in - 1;
}

/* Linear taps i0, i1 and weights (area_pixel_compute_source_index, PyTorch's opmath: float
 * for f32 and the half types, double for f64). */
static void linear_taps(const ic_attrs *a, int k, int i, int64_t o, int64_t in, int64_t out,
                        bool dbl, int64_t *i0, int64_t *i1, double *w1)
{
    double sc = interp_scale(a, k, i, in, out, a->align_corners), src;
    if (dbl) {
        src = a->align_corners ? sc * (double)o : sc * ((double)o + 0.5) - 0.5;
        if (src < 0)
            src = 0;
    } else {
        float fs = (float)sc;
        float f = a->align_corners ? fs * (float)o : fs * ((float)o + 0.5f) - 0.5f;
        src = f < 0 ? 0 : f;
    }
    *i0 = (int64_t)src;
    *i1 = *i0 + (*i0 < in - 1 ? 1 : 0);
    *w1 = dbl ? src - (double)*i0 : (double)((float)src - (float)*i0);
}

static double interp_point(const ic_node *n, const geom3 *G, int k, const ic_tensor *x,
                           int64_t b, int64_t c, const int64_t *o)
{
    const ic_attrs *a = &n->attrs;
    if (a->mode <= IC_INTERP_NEAREST_EXACT) {
        int64_t s[3];
        for (int i = 0; i < 3; i++)
            s[i] = i < 3 - k ? 0 : nearest_src(a, k, i, o[i], G->in[i], G->out[i]);
        return ic__ref_getf(x, at5(G, b, c, G->c, s[0], s[1], s[2]));
    }
    int64_t t[3][2];
    double w[3][2];
    bool dbl = x->dtype == IC_F64;
    for (int i = 0; i < 3; i++) {
        if (i < 3 - k) {
            t[i][0] = t[i][1] = 0, w[i][0] = 1, w[i][1] = 0;
            continue;
        }
        linear_taps(a, k, i, o[i], G->in[i], G->out[i], dbl, &t[i][0], &t[i][1], &w[i][1]);
        w[i][0] = 1 - w[i][1];
    }
    double acc = 0;
    for (int q = 0; q < 8; q++) {
        int z = (q >> 2) & 1, y = (q >> 1) & 1, xx = q & 1;
        double wt = w[0][z] * w[1][y] * w[2][xx];
        if (wt != 0)
            acc += wt * ic__ref_getf(x, at5(G, b, c, G->c, t[0][z], t[1][y], t[2][xx]));
    }
    return acc;
}

static ic_status ref_windowed(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins,
                              ic_tensor *out)
{
    ic__sgeom sg;
    geom3 G;
    ic_status s = geom_of(g, n, ins[0], NULL, &sg, &G);
    if (s)
        return s;
    for (int64_t b = 0; b < G.n; b++)
        for (int64_t c = 0; c < G.c; c++) {
            int64_t o[3] = { 0, 0, 0 };
            do {
                double v;
                switch (n->info.op) {
                case IC_OP_MAX_POOL: case IC_OP_AVG_POOL: v = pool_point(n, &G, ins[0], b, c, o); break;
                case IC_OP_INTERPOLATE: v = interp_point(n, &G, sg.k, ins[0], b, c, o); break;
                default: v = adaptive_point(n, &G, ins[0], b, c, o); break;
                }
                ic__ref_setf(out, out5(&G, b, c, G.c, o), v);
            } while (next_out(&G, o));
        }
    return IC_OK;
}

ic_status ic__ref_spatial(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins,
                          ic_tensor *out)
{
    int need = n->info.op == IC_OP_CONV || n->info.op == IC_OP_CONV_TRANSPOSE ? 2 : 1;
    for (int i = 0; i < need; i++)
        if (!ins[i] || (!ins[i]->data && ic_tensor_numel(ins[i]) != 0))
            return FAIL(g, n, IC_EINVAL, "input %d is missing", i);
    if (ic_tensor_numel(out) == 0)
        return IC_OK;
    switch (n->info.op) {
    case IC_OP_PAD: return index_map(n, ins[0], out, src_pad);
    case IC_OP_UNFOLD: return index_map(n, ins[0], out, src_unfold);
    case IC_OP_FLIP: return index_map(n, ins[0], out, src_flip);
    case IC_OP_ROLL: return index_map(n, ins[0], out, src_roll);
    case IC_OP_CONV: case IC_OP_CONV_TRANSPOSE: return ref_conv(g, n, ins, out);
    case IC_OP_MAX_POOL: case IC_OP_AVG_POOL: case IC_OP_ADAPTIVE_AVG_POOL:
    case IC_OP_ADAPTIVE_MAX_POOL: case IC_OP_INTERPOLATE:
        return ref_windowed(g, n, ins, out);
    default: return FAIL(g, n, IC_EINVAL, "is not a spatial op");
    }
}
