/* json.c - ic-graph JSON v1 (spec/graph-format.md). Loading goes through the public builder,
 * so inference and validation are shared with C-built graphs; saving writes a canonical,
 * diffable text (one entry a line) atomically, with in-memory weights beside it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include "file-impl.h"
#include "graph-impl.h"

#define IC_JSON_VERSION 1
#define IC_JSON_MAX_BYTES (1 << 30) /* largest graph file read */

/* ======================================================================================
 * Attributes: one table says which op takes which attr and which are required.
 * ==================================================================================== */

enum {
    A_DIMS, A_KEEPDIM, A_DIM, A_DIM0, A_DIM1, A_SHAPE, A_NSHAPE, A_START, A_END, A_STEP,
    A_VALUE, A_MIN, A_MAX, A_EPS, A_DTYPE, A_APPROX, A_NEG_SLOPE, A_BETA, A_THRESHOLD,
    /* --- nn ops (issue 12) --- */
    A_NUM_GROUPS, A_IS_CAUSAL, A_SDPA_SCALE, A_DIAGONAL, A_MIN_VAL, A_MAX_VAL, A_ALPHA,
    /* --- spatial ops (issue 12): last, parse_spatial_attr takes ids from A_PAD on --- */
    A_PAD, A_MODE, A_SIZE, A_SHIFTS, A_STRIDE, A_PADDING, A_DILATION, A_GROUPS, A_OUTPUT_PADDING,
    A_KERNEL, A_CEIL, A_CIP, A_DIVISOR, A_OUTPUT_SIZE, A_SCALE, A_ALIGN,
    A_COUNT
};
static const char *const attr_names[A_COUNT] = {
    "dims", "keepdim", "dim", "dim0", "dim1", "shape", "normalized_shape", "start", "end",
    "step", "value", "min", "max", "eps", "dtype", "approximate", "negative_slope", "beta",
    "threshold",
    /* --- nn ops --- */
    "num_groups", "is_causal", "scale", "diagonal", "min_val", "max_val", "alpha",
    /* --- spatial ops --- */
    "pad", "mode", "size", "shifts", "stride", "padding", "dilation", "groups", "output_padding",
    "kernel_size", "ceil_mode", "count_include_pad", "divisor_override", "output_size",
    "scale_factor", "align_corners",
};
typedef uint64_t attr_mask; /* a bit per attr id: more than 32 of them */
#define BIT(a) ((attr_mask)1 << (a))

/* The attrs op takes (allowed) and those it cannot do without (required), per the spec. */
static void op_attrs(ic_op op, attr_mask *allowed, attr_mask *required)
{
    attr_mask al = 0, rq = 0;
    switch (op) {
    case IC_OP_GELU: al = BIT(A_APPROX); break;
    case IC_OP_LEAKY_RELU: al = BIT(A_NEG_SLOPE); break;
    case IC_OP_SOFTPLUS: al = BIT(A_BETA) | BIT(A_THRESHOLD); break;
    case IC_OP_CLAMP: al = BIT(A_MIN) | BIT(A_MAX); break;
    case IC_OP_CAST: al = rq = BIT(A_DTYPE); break;
    case IC_OP_SUM: case IC_OP_MEAN: case IC_OP_AMAX: case IC_OP_AMIN: case IC_OP_PROD:
        al = BIT(A_DIMS) | BIT(A_KEEPDIM);
        break;
    case IC_OP_ARGMAX: al = BIT(A_DIM) | BIT(A_KEEPDIM); rq = BIT(A_DIM); break;
    case IC_OP_SOFTMAX: case IC_OP_LOG_SOFTMAX: al = rq = BIT(A_DIM); break;
    case IC_OP_LAYER_NORM: case IC_OP_RMS_NORM:
        al = BIT(A_NSHAPE) | BIT(A_EPS);
        rq = BIT(A_NSHAPE);
        break;
    case IC_OP_RESHAPE: case IC_OP_EXPAND: al = rq = BIT(A_SHAPE); break;
    case IC_OP_PERMUTE: al = rq = BIT(A_DIMS); break;
    case IC_OP_TRANSPOSE: al = rq = BIT(A_DIM0) | BIT(A_DIM1); break;
    case IC_OP_UNSQUEEZE: al = rq = BIT(A_DIM); break;
    case IC_OP_SQUEEZE: al = BIT(A_DIMS); break;
    case IC_OP_SLICE: al = BIT(A_DIM) | BIT(A_START) | BIT(A_END) | BIT(A_STEP); break;
    case IC_OP_CAT: al = BIT(A_DIM); break;
    case IC_OP_FULL: al = rq = BIT(A_VALUE) | BIT(A_SHAPE) | BIT(A_DTYPE); break;
    case IC_OP_ARANGE:
        al = BIT(A_START) | BIT(A_END) | BIT(A_STEP) | BIT(A_DTYPE);
        rq = BIT(A_END);
        break;
    /* --- spatial ops --- */
    case IC_OP_PAD: al = BIT(A_PAD) | BIT(A_MODE) | BIT(A_VALUE); rq = BIT(A_PAD); break;
    case IC_OP_UNFOLD: al = rq = BIT(A_DIM) | BIT(A_SIZE) | BIT(A_STEP); break;
    case IC_OP_FLIP: al = rq = BIT(A_DIMS); break;
    case IC_OP_ROLL: al = BIT(A_SHIFTS) | BIT(A_DIMS); rq = BIT(A_SHIFTS); break;
    case IC_OP_CONV:
        al = BIT(A_STRIDE) | BIT(A_PADDING) | BIT(A_DILATION) | BIT(A_GROUPS);
        break;
    case IC_OP_CONV_TRANSPOSE:
        al = BIT(A_STRIDE) | BIT(A_PADDING) | BIT(A_OUTPUT_PADDING) | BIT(A_DILATION) | BIT(A_GROUPS);
        break;
    case IC_OP_MAX_POOL:
        al = BIT(A_KERNEL) | BIT(A_STRIDE) | BIT(A_PADDING) | BIT(A_DILATION) | BIT(A_CEIL);
        rq = BIT(A_KERNEL);
        break;
    case IC_OP_AVG_POOL:
        al = BIT(A_KERNEL) | BIT(A_STRIDE) | BIT(A_PADDING) | BIT(A_CEIL) | BIT(A_CIP) | BIT(A_DIVISOR);
        rq = BIT(A_KERNEL);
        break;
    case IC_OP_ADAPTIVE_AVG_POOL: case IC_OP_ADAPTIVE_MAX_POOL: al = rq = BIT(A_OUTPUT_SIZE); break;
    case IC_OP_INTERPOLATE:
        al = BIT(A_SIZE) | BIT(A_SCALE) | BIT(A_MODE) | BIT(A_ALIGN);
        rq = BIT(A_SIZE);
        break;
    /* --- nn ops --- */
    case IC_OP_BATCH_NORM: al = BIT(A_EPS); break;
    case IC_OP_GROUP_NORM: al = BIT(A_NUM_GROUPS) | BIT(A_EPS); rq = BIT(A_NUM_GROUPS); break;
    case IC_OP_SDPA: al = BIT(A_IS_CAUSAL) | BIT(A_SDPA_SCALE); break;
    case IC_OP_GATHER: case IC_OP_INDEX_SELECT: case IC_OP_STACK: al = rq = BIT(A_DIM); break;
    case IC_OP_CUMSUM: al = BIT(A_DIM) | BIT(A_DTYPE); rq = BIT(A_DIM); break;
    case IC_OP_MASKED_FILL: al = rq = BIT(A_VALUE); break;
    case IC_OP_HARDTANH: al = BIT(A_MIN_VAL) | BIT(A_MAX_VAL); break;
    case IC_OP_ELU: al = BIT(A_ALPHA); break;
    case IC_OP_TRIU: case IC_OP_TRIL: al = BIT(A_DIAGONAL); break;
    default: break;
    }
    *allowed = al;
    *required = rq;
}

/* "dims, keepdim" for messages. */
static const char *attr_list(attr_mask mask, char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (int a = 0; a < A_COUNT && k < n; a++)
        if (mask & BIT(a))
            k += snprintf(buf + k, n - k, "%s%s", k ? ", " : "", attr_names[a]);
    return buf;
}

/* ======================================================================================
 * Loading
 * ==================================================================================== */

typedef struct {
    char *path;               /* canonical path (realpath when it resolves) */
    ic_safetensors *st;       /* owned by the graph (ic__graph_keep_file) */
} open_file;

typedef struct {
    ic_ctx *c;
    ic_graph *g;
    const char *where;        /* the graph file's path, or "<string>" */
    const char *dir;          /* folder param files are relative to; NULL = the cwd */
    bool store_joined;        /* string loads record dir/file so saves can resolve it */
    const json_t *nodes;      /* the "nodes" list, to explain forward references */
    open_file *files;
    int nfiles, capfiles;
} loader;

/* Where a message is about: a node, an input or a param (name may be NULL). */
typedef struct {
    loader *L;
    const char *name;
    const char *op;           /* "input", "param" or the op name */
} site;

#define SITE_ERR(s, code, ...) ic__node_error((s)->L->g, (s)->name, (s)->op, code, __VA_ARGS__)

static const char *jtype(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Refuses keys outside `keys` (typo protection: a misspelt "attrs" must not vanish). */
static ic_status check_keys(site *s, const json_t *obj, const char *const *keys, const char *what)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        int i = 0;
        while (keys[i] && strcmp(keys[i], k) != 0)
            i++;
        if (!keys[i]) {
            char list[256];
            size_t n = 0;
            list[0] = 0;
            for (int j = 0; keys[j] && n < sizeof list; j++)
                n += snprintf(list + n, sizeof list - n, "%s%s", j ? ", " : "", keys[j]);
            return SITE_ERR(s, IC_EFORMAT, "unknown key '%s' in %s (expected: %s)", k, what, list);
        }
    }
    return IC_OK;
}

static ic_status get_int(site *s, const json_t *j, const char *what, int64_t *out)
{
    if (!json_is_integer(j))
        return SITE_ERR(s, IC_EFORMAT, "%s must be an integer, not %s", what, jtype(j));
    *out = json_integer_value(j);
    return IC_OK;
}

static ic_status get_scalar(site *s, const json_t *j, const char *what, ic_scalar *out)
{
    if (json_is_integer(j)) {
        *out = ic_scalar_i(json_integer_value(j)).scalar;
        return IC_OK;
    }
    if (json_is_real(j)) {
        *out = ic_scalar_f(json_real_value(j)).scalar;
        return IC_OK;
    }
    if (json_is_boolean(j)) { /* full(value=true, dtype=bool): true is 1, as in Python */
        *out = ic_scalar_i(json_is_true(j)).scalar;
        return IC_OK;
    }
    if (json_is_string(j)) { /* JSON has no infinities: masked_fill(value="-inf") */
        const char *v = json_string_value(j);
        double f = !strcmp(v, "inf") ? INFINITY : !strcmp(v, "-inf") ? -INFINITY : !strcmp(v, "nan") ? NAN : 0;
        if (f == 0)
            return SITE_ERR(s, IC_EFORMAT, "%s must be a number, not a string ('%s'; the strings "
                            "taken are \"inf\", \"-inf\" and \"nan\")", what, v);
        *out = ic_scalar_f(f).scalar;
        return IC_OK;
    }
    return SITE_ERR(s, IC_EFORMAT, "%s must be a number, not %s", what, jtype(j));
}

static ic_status get_bool(site *s, const json_t *j, const char *what, bool *out)
{
    if (!json_is_boolean(j))
        return SITE_ERR(s, IC_EFORMAT, "%s must be true or false, not %s", what, jtype(j));
    *out = json_is_true(j);
    return IC_OK;
}

static ic_status get_dtype(site *s, const json_t *j, const char *what, ic_dtype *out)
{
    if (!json_is_string(j))
        return SITE_ERR(s, IC_EFORMAT, "%s must be a dtype name string, not %s", what, jtype(j));
    if (!ic_dtype_from_name(json_string_value(j), out))
        return SITE_ERR(s, IC_EFORMAT,
                        "%s '%s' is not a dtype (expected f32, f64, f16, bf16, i32, i64, bool, u8, i8 or i16)",
                        what, json_string_value(j));
    return IC_OK;
}

static ic_status get_list(site *s, const json_t *j, const char *what, size_t max)
{
    if (!json_is_array(j))
        return SITE_ERR(s, IC_EFORMAT, "%s must be a list, not %s", what, jtype(j));
    if (json_array_size(j) > max)
        return SITE_ERR(s, IC_EFORMAT, "%s has %zu entries (at most %zu)", what,
                        json_array_size(j), max);
    return IC_OK;
}

/* A list of integers (dims of reductions, permute, squeeze). */
static ic_status get_int_list(site *s, const json_t *j, const char *what, int64_t *out, int *n)
{
    ic_status st;
    if ((st = get_list(s, j, what, IC_MAX_RANK)))
        return st;
    for (size_t i = 0; i < json_array_size(j); i++) {
        const json_t *e = json_array_get(j, i);
        if (!json_is_integer(e))
            return SITE_ERR(s, IC_EFORMAT, "%s must be a list of integers; entry %zu is %s",
                            what, i, jtype(e));
        out[i] = json_integer_value(e);
    }
    *n = (int)json_array_size(j);
    return IC_OK;
}

/* A shape: integers >= min (0 for tensors, -1 for reshape/expand targets) or symbol names. */
static ic_status get_shape(site *s, const json_t *j, const char *what, int64_t min,
                           ic_dim *out, int *rank)
{
    ic_status st;
    if ((st = get_list(s, j, what, IC_MAX_RANK)))
        return st;
    for (size_t i = 0; i < json_array_size(j); i++) {
        const json_t *e = json_array_get(j, i);
        if (json_is_string(e)) {
            if (!*json_string_value(e))
                return SITE_ERR(s, IC_EFORMAT, "%s entry %zu is an empty symbol name", what, i);
            if ((st = ic_graph_symbol(s->L->g, json_string_value(e), &out[i])))
                return st;
        } else if (json_is_integer(e)) {
            int64_t v = json_integer_value(e);
            if (v < min)
                return SITE_ERR(s, IC_EFORMAT, "%s entry %zu is %lld; sizes cannot be negative%s",
                                what, i, (long long)v, min < 0 ? " (only -1 is allowed)" : "");
            out[i] = ic_dim_const(v);
        } else if (json_is_real(e)) {
            return SITE_ERR(s, IC_EFORMAT, "%s entry %zu is %g, not an integer", what, i,
                            json_real_value(e));
        } else {
            return SITE_ERR(s, IC_EFORMAT,
                            "%s entry %zu must be an integer or a symbol name, not %s", what, i,
                            jtype(e));
        }
    }
    *rank = (int)json_array_size(j);
    return IC_OK;
}

/* ---- attrs ---- */

/* Slice bounds: an integer, or null for "absent". */
static ic_status get_bound(site *s, const json_t *j, const char *what, bool *has, int64_t *out)
{
    if (json_is_null(j)) {
        *has = false;
        return IC_OK;
    }
    *has = true;
    return get_int(s, j, what, out);
}

static ic_status get_opt_scalar(site *s, const json_t *j, const char *what, bool *has,
                                ic_scalar *out)
{
    if (json_is_null(j)) {
        *has = false;
        return IC_OK;
    }
    *has = true;
    return get_scalar(s, j, what, out);
}

/* A number attr held as a double (eps, negative_slope, beta, threshold). */
static ic_status get_real(site *s, const json_t *j, const char *what, double *out)
{
    ic_scalar e;
    ic_status st = get_scalar(s, j, what, &e);
    *out = e.f;
    return st;
}

/* ---- spatial attrs (issue 12) ---- */

/* A per-spatial-dim list: an int (PyTorch's single-int form, kept as 1 entry) or a list. */
static ic_status get_dim_list(site *s, const json_t *j, const char *what, int64_t *out, int *n)
{
    if (json_is_integer(j)) {
        out[0] = json_integer_value(j);
        *n = 1;
        return IC_OK;
    }
    return get_int_list(s, j, what, out, n);
}

static ic_status get_enum(site *s, const json_t *j, const char *what, const char *const *names,
                          int count, const char *expect, int *out)
{
    const char *v = json_string_value(j);
    for (int i = 0; v && i < count; i++)
        if (strcmp(v, names[i]) == 0) {
            *out = i;
            return IC_OK;
        }
    if (!v)
        return SITE_ERR(s, IC_EFORMAT, "%s must be one of %s, not %s", what, expect, jtype(j));
    return SITE_ERR(s, IC_EFORMAT, "%s must be one of %s, not '%s'", what, expect, v);
}

static const char *const pad_modes[] = { "constant", "reflect", "replicate", "circular" };
static const char *const interp_modes[] = { "nearest", "nearest-exact", "linear", "bilinear",
                                            "trilinear" };
static const char *const padding_strs[] = { "", "same", "valid" };

static ic_status get_scales(site *s, const json_t *j, const char *what, ic_attrs *a)
{
    ic_status st;
    if (json_is_number(j)) {
        a->scale_factor[0] = json_number_value(j);
        a->nscale = 1;
        return IC_OK;
    }
    if ((st = get_list(s, j, what, IC_MAX_RANK)))
        return st;
    for (size_t i = 0; i < json_array_size(j); i++) {
        const json_t *e = json_array_get(j, i);
        if (!json_is_number(e))
            return SITE_ERR(s, IC_EFORMAT, "%s must be a list of numbers; entry %zu is %s", what, i, jtype(e));
        a->scale_factor[i] = json_number_value(e);
    }
    a->nscale = (int)json_array_size(j);
    return IC_OK;
}

static ic_status parse_spatial_attr(site *s, ic_op op, int id, const json_t *j, const char *what,
                                    ic_attrs *a)
{
    ic_status st;
    switch (id) {
    case A_PAD: {
        if ((st = get_list(s, j, what, 2 * IC_MAX_RANK)))
            return st;
        for (size_t i = 0; i < json_array_size(j); i++) {
            if (!json_is_integer(json_array_get(j, i)))
                return SITE_ERR(s, IC_EFORMAT, "%s must be a list of integers; entry %zu is %s",
                                what, i, jtype(json_array_get(j, i)));
            a->pad[i] = json_integer_value(json_array_get(j, i));
        }
        a->npad = (int)json_array_size(j);
        return IC_OK;
    }
    case A_MODE:
        if (op == IC_OP_PAD)
            return get_enum(s, j, what, pad_modes, 4, "\"constant\", \"reflect\", \"replicate\", \"circular\"", &a->mode);
        return get_enum(s, j, what, interp_modes, 5,
                        "\"nearest\", \"nearest-exact\", \"linear\", \"bilinear\", \"trilinear\"", &a->mode);
    case A_SIZE:
        if (op == IC_OP_UNFOLD)
            return get_int(s, j, what, &a->unfold_size);
        return get_dim_list(s, j, what, a->size, &a->nsize);
    case A_SHIFTS: return get_dim_list(s, j, what, a->shifts, &a->nshifts);
    case A_STRIDE: return get_dim_list(s, j, what, a->stride, &a->nstride);
    case A_PADDING:
        if (json_is_string(j)) {
            if (op != IC_OP_CONV)
                return SITE_ERR(s, IC_EFORMAT, "%s must be integers", what);
            int k = 0;
            if ((st = get_enum(s, j, what, padding_strs + 1, 2, "\"same\", \"valid\" or integers", &k)))
                return st;
            a->npadding = 0;
            a->padding_str = k + 1;
            return IC_OK;
        }
        a->padding_str = IC_PADDING_INTS;
        return get_dim_list(s, j, what, a->padding, &a->npadding);
    case A_DILATION: return get_dim_list(s, j, what, a->dilation, &a->ndilation);
    case A_GROUPS: return get_int(s, j, what, &a->groups);
    case A_OUTPUT_PADDING: return get_dim_list(s, j, what, a->output_padding, &a->noutput_padding);
    case A_KERNEL: return get_dim_list(s, j, what, a->kernel_size, &a->nkernel);
    case A_CEIL: return get_bool(s, j, what, &a->ceil_mode);
    case A_CIP: return get_bool(s, j, what, &a->count_include_pad);
    case A_DIVISOR:
        if (json_is_null(j)) {
            a->has_divisor = false;
            return IC_OK;
        }
        a->has_divisor = true;
        return get_int(s, j, what, &a->divisor_override);
    case A_OUTPUT_SIZE: return get_dim_list(s, j, what, a->output_size, &a->noutput_size);
    case A_SCALE:
        if (json_is_null(j)) {
            a->nscale = 0;
            return IC_OK;
        }
        return get_scales(s, j, what, a);
    case A_ALIGN: return get_bool(s, j, what, &a->align_corners);
    }
    return SITE_ERR(s, IC_EFORMAT, "unhandled attr");
}

static ic_status parse_attr(site *s, ic_op op, int id, const json_t *j, ic_attrs *a)
{
    char what[64];
    snprintf(what, sizeof what, "attr '%s'", attr_names[id]);
    bool slice = op == IC_OP_SLICE || op == IC_OP_UNFOLD;
    if (id >= A_PAD)
        return parse_spatial_attr(s, op, id, j, what, a);
    switch (id) {
    case A_DIMS:
        a->has_dims = true;
        return get_int_list(s, j, what, a->dims, &a->ndims);
    case A_KEEPDIM: return get_bool(s, j, what, &a->keepdim);
    case A_DIM: return get_int(s, j, what, &a->dim);
    case A_DIM0: return get_int(s, j, what, &a->dim0);
    case A_DIM1: return get_int(s, j, what, &a->dim1);
    case A_SHAPE: return get_shape(s, j, what, op == IC_OP_FULL ? 0 : -1, a->shape, &a->nshape);
    case A_NSHAPE: return get_shape(s, j, what, 0, a->shape, &a->nshape);
    case A_START:
        return slice ? get_bound(s, j, what, &a->has_start, &a->start) : get_scalar(s, j, what, &a->astart);
    case A_END:
        return slice ? get_bound(s, j, what, &a->has_end, &a->end) : get_scalar(s, j, what, &a->aend);
    case A_STEP: return slice ? get_int(s, j, what, &a->step) : get_scalar(s, j, what, &a->astep);
    case A_VALUE: return get_scalar(s, j, what, &a->value);
    case A_MIN: return get_opt_scalar(s, j, what, &a->has_min, &a->min);
    case A_MAX: return get_opt_scalar(s, j, what, &a->has_max, &a->max);
    case A_EPS: return get_real(s, j, what, &a->eps);
    case A_NEG_SLOPE: return get_real(s, j, what, &a->negative_slope);
    case A_BETA: return get_real(s, j, what, &a->beta);
    case A_THRESHOLD: return get_real(s, j, what, &a->threshold);
    case A_DTYPE:
        a->has_dtype = true;
        return get_dtype(s, j, what, &a->dtype);
    /* --- nn ops --- */
    case A_NUM_GROUPS: return get_int(s, j, what, &a->num_groups);
    case A_IS_CAUSAL: return get_bool(s, j, what, &a->is_causal);
    case A_SDPA_SCALE:
        a->has_scale = !json_is_null(j);
        return a->has_scale ? get_real(s, j, what, &a->scale) : IC_OK;
    case A_DIAGONAL: return get_int(s, j, what, &a->diagonal);
    case A_MIN_VAL: return get_real(s, j, what, &a->min_val);
    case A_MAX_VAL: return get_real(s, j, what, &a->max_val);
    case A_ALPHA: return get_real(s, j, what, &a->alpha);
    case A_APPROX: {
        const char *v = json_string_value(j);
        if (!v)
            return SITE_ERR(s, IC_EFORMAT, "%s must be \"none\" or \"tanh\", not %s", what, jtype(j));
        if (strcmp(v, "none") != 0 && strcmp(v, "tanh") != 0)
            return SITE_ERR(s, IC_EFORMAT, "%s must be \"none\" or \"tanh\", not '%s'", what, v);
        a->approximate = strcmp(v, "tanh") == 0;
        return IC_OK;
    }
    }
    return SITE_ERR(s, IC_EFORMAT, "unhandled attr");
}

/* Fills a (already at the op's defaults) from the node's "attrs" object (may be NULL). */
static ic_status parse_attrs(site *s, ic_op op, const json_t *j, ic_attrs *a)
{
    attr_mask allowed, required, seen = 0;
    char b[256];
    op_attrs(op, &allowed, &required);
    if (j && !json_is_object(j))
        return SITE_ERR(s, IC_EFORMAT, "\"attrs\" must be an object, not %s", jtype(j));
    const char *k;
    json_t *v;
    if (j)
        json_object_foreach((json_t *)j, k, v) {
            int id = 0;
            while (id < A_COUNT && strcmp(attr_names[id], k) != 0)
                id++;
            if (id == A_COUNT || !(allowed & BIT(id))) {
                if (!allowed)
                    return SITE_ERR(s, IC_EFORMAT, "unknown attr '%s' (%s takes no attrs)", k, s->op);
                return SITE_ERR(s, IC_EFORMAT, "unknown attr '%s' (%s takes: %s)", k, s->op,
                                attr_list(allowed, b, sizeof b));
            }
            ic_status st = parse_attr(s, op, id, v, a);
            if (st)
                return st;
            seen |= BIT(id);
        }
    for (int id = 0; id < A_COUNT; id++)
        if ((required & ~seen) & BIT(id))
            return SITE_ERR(s, IC_EFORMAT, "missing required attr '%s'", attr_names[id]);
    return IC_OK;
}

/* ---- inputs, params, nodes ---- */

static ic_status get_name(site *s, const json_t *obj, const char *what, size_t idx)
{
    const json_t *n = json_object_get(obj, "name");
    if (!n)
        return SITE_ERR(s, IC_EFORMAT, "%s %zu has no \"name\"", what, idx);
    if (!json_is_string(n))
        return SITE_ERR(s, IC_EFORMAT, "%s %zu: \"name\" must be a string, not %s", what, idx,
                        jtype(n));
    if (!*json_string_value(n))
        return SITE_ERR(s, IC_EFORMAT, "%s %zu has an empty \"name\"", what, idx);
    s->name = json_string_value(n);
    return IC_OK;
}

/* The common part of an input or param entry: name, dtype, shape. */
static ic_status get_decl(site *s, const json_t *e, const char *what, size_t idx,
                          const char *const *keys, ic_dtype *dt, ic_dim *shape, int *rank)
{
    ic_status st;
    if (!json_is_object(e))
        return SITE_ERR(s, IC_EFORMAT, "%s %zu must be an object, not %s", what, idx, jtype(e));
    if ((st = get_name(s, e, what, idx)))
        return st;
    s->op = what;
    if ((st = check_keys(s, e, keys, what)))
        return st;
    const json_t *d = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape");
    if (!d)
        return SITE_ERR(s, IC_EFORMAT, "missing \"dtype\"");
    if (!sh)
        return SITE_ERR(s, IC_EFORMAT, "missing \"shape\" ([] for a scalar)");
    if ((st = get_dtype(s, d, "dtype", dt)))
        return st;
    return get_shape(s, sh, "shape", 0, shape, rank);
}

static ic_status load_input(loader *L, const json_t *e, size_t idx)
{
    static const char *const keys[] = { "name", "dtype", "shape", "range", NULL };
    site s = { L, NULL, NULL };
    ic_dtype dt;
    ic_dim shape[IC_MAX_RANK];
    int rank;
    ic_value v;
    ic_status st;
    if ((st = get_decl(&s, e, "input", idx, keys, &dt, shape, &rank)) ||
        (st = ic_graph_add_input(L->g, s.name, dt, rank, shape, &v)))
        return st;
    const json_t *r = json_object_get(e, "range");
    if (!r)
        return IC_OK;
    int64_t lo, hi;
    if (!json_is_array(r))
        return SITE_ERR(&s, IC_EFORMAT, "\"range\" must be a list [lo, hi), not %s", jtype(r));
    if (json_array_size(r) != 2)
        return SITE_ERR(&s, IC_EFORMAT, "\"range\" must be a list [lo, hi) of 2 integers, not "
                        "of %zu entries", json_array_size(r));
    if ((st = get_int(&s, json_array_get(r, 0), "range lo", &lo)) ||
        (st = get_int(&s, json_array_get(r, 1), "range hi", &hi)))
        return st;
    return ic_graph_set_input_range(L->g, v, lo, hi);
}

static char *join_path(ic_ctx *c, const char *dir, const char *file)
{
    if (!dir || !*dir || strcmp(dir, ".") == 0 || file[0] == '/')
        return ic__strdup(c, file);
    size_t nd = strlen(dir), nf = strlen(file);
    char *p = ic__malloc(c, nd + nf + 2);
    if (p) {
        memcpy(p, dir, nd);
        p[nd] = '/';
        memcpy(p + nd + 1, file, nf + 1);
    }
    return p;
}

/* Opens path once per load (the graph keeps and closes it). */
static ic_status open_weights(site *s, const char *path, ic_safetensors **out)
{
    loader *L = s->L;
    char canon[PATH_MAX];
    const char *key = realpath(path, canon) ? canon : path;
    for (int i = 0; i < L->nfiles; i++)
        if (strcmp(L->files[i].path, key) == 0) {
            *out = L->files[i].st;
            return IC_OK;
        }
    if (L->nfiles == L->capfiles) {
        int nc = L->capfiles ? L->capfiles * 2 : 4;
        open_file *f = ic__realloc(L->c, L->files, sizeof *f * (size_t)nc);
        if (!f)
            return ic__error(L->c, IC_ENOMEM, "out of memory");
        L->files = f;
        L->capfiles = nc;
    }
    char *copy = ic__strdup(L->c, key);
    if (!copy)
        return ic__error(L->c, IC_ENOMEM, "out of memory");
    ic_safetensors *st = NULL;
    ic_status r = ic_safetensors_open(L->c, path, &st);
    if (r) {
        char msg[IC_ERRMAX];
        snprintf(msg, sizeof msg, "%s", ic_last_error(L->c));
        ic__free(L->c, copy);
        return SITE_ERR(s, r, "%s", msg);
    }
    if ((r = ic__graph_keep_file(L->g, st))) {
        ic_safetensors_close(st);
        ic__free(L->c, copy);
        return r;
    }
    L->files[L->nfiles++] = (open_file){ copy, st };
    *out = st;
    return IC_OK;
}

static const char *i64_shape_str(int rank, const int64_t *d, char *buf, size_t n)
{
    size_t k = snprintf(buf, n, "[");
    for (int i = 0; i < rank && k < n; i++)
        k += snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)d[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* Checks that tensor key of file matches the declaration (dtype, shape, byte size). */
static ic_status check_weights(site *s, const char *file, const char *key, const ic_tensor *t,
                               ic_dtype dt, int rank, const ic_dim *shape)
{
    char b1[256], b2[256];
    bool same = t->rank == rank;
    for (int i = 0; same && i < rank; i++)
        same = t->shape[i] == shape[i].coef;
    if (t->dtype != dt || !same)
        return SITE_ERR(s, IC_EFORMAT, "tensor '%s' in '%s' is %s %s, the param is declared %s %s",
                        key, file, ic_dtype_name(t->dtype),
                        i64_shape_str(t->rank < IC_MAX_RANK ? t->rank : IC_MAX_RANK, t->shape, b1, sizeof b1),
                        ic_dtype_name(dt), ic_graph_shape_str(s->L->g, rank, shape, b2, sizeof b2));
    int64_t numel = ic_tensor_numel(t), want = ic__shape_numel(rank, shape);
    if (numel < 0 || numel != want || !ic_tensor_is_contiguous(t))
        return SITE_ERR(s, IC_EFORMAT, "tensor '%s' in '%s' has %lld elements, the param needs %lld",
                        key, file, (long long)numel, (long long)want);
    return IC_OK;
}

/* A param read from a safetensors file: mapped, not copied (unless misaligned for its dtype). */
static ic_status load_weights(site *s, const char *file, const char *key, ic_dtype dt, int rank,
                              const ic_dim *shape)
{
    static const unsigned char empty[16];
    loader *L = s->L;
    ic_status st;
    for (int i = 0; i < rank; i++)
        if (shape[i].nsym)
            return SITE_ERR(s, IC_EFORMAT, "a param read from '%s' needs a fixed shape; dim %d is "
                            "the symbol '%s'", file, i, ic_graph_symbol_name(L->g, shape[i].sym[0]));
    char *path = join_path(L->c, L->dir, file);
    if (!path)
        return ic__error(L->c, IC_ENOMEM, "out of memory");
    const char *stored = L->store_joined ? path : file;
    ic_safetensors *sf;
    ic_tensor t;
    ic_value v;
    if ((st = open_weights(s, path, &sf)))
        goto done;
    if ((st = ic_safetensors_get(sf, key, &t))) {
        char msg[IC_ERRMAX];
        snprintf(msg, sizeof msg, "%s", ic_last_error(L->c));
        st = SITE_ERR(s, st, "%s", msg);
        goto done;
    }
    if ((st = check_weights(s, path, key, &t, dt, rank, shape)))
        goto done;
    size_t nbytes = (size_t)ic__shape_numel(rank, shape) * ic_dtype_size(dt);
    if (t.data && (uintptr_t)t.data % ic_dtype_size(dt)) {
        /* misaligned in the file: typed loads from it would be undefined, so copy */
        ic__logf(L->c, 1, "%s: param '%s' is misaligned in '%s'; copied", L->where, s->name, path);
        st = ic_graph_add_param(L->g, s->name, dt, rank, shape, t.data, nbytes, stored, key, &v);
        goto done;
    }
    if ((st = ic_graph_add_param(L->g, s->name, dt, rank, shape, NULL, 0, stored, key, &v)))
        goto done;
    /* an empty tensor still has data: NULL would make it a run-time argument */
    L->g->nodes[v]->info.data = t.data && nbytes ? t.data : (const void *)empty;
done:
    ic__free(L->c, path);
    return st;
}

static ic_status load_param(loader *L, const json_t *e, size_t idx)
{
    static const char *const keys[] = { "name", "dtype", "shape", "file", "key", NULL };
    site s = { L, NULL, NULL };
    ic_dtype dt;
    ic_dim shape[IC_MAX_RANK];
    int rank;
    ic_status st;
    if ((st = get_decl(&s, e, "param", idx, keys, &dt, shape, &rank)))
        return st;
    const json_t *f = json_object_get(e, "file"), *k = json_object_get(e, "key");
    if (f && (!json_is_string(f) || !*json_string_value(f)))
        return SITE_ERR(&s, IC_EFORMAT, "\"file\" must be a non-empty path string, not %s",
                        json_is_string(f) ? "empty" : jtype(f));
    if (k && !json_is_string(k))
        return SITE_ERR(&s, IC_EFORMAT, "\"key\" must be a string, not %s", jtype(k));
    if (k && !f)
        return SITE_ERR(&s, IC_EFORMAT, "\"key\" is given without \"file\"");
    if (!f)
        return ic_graph_add_param(L->g, s.name, dt, rank, shape, NULL, 0, NULL, NULL, NULL);
    return load_weights(&s, json_string_value(f), k ? json_string_value(k) : s.name, dt, rank, shape);
}

/* Explains a name that is not defined (yet): later in the file, the node itself, or nowhere. */
static ic_status undefined_operand(site *s, size_t self, size_t i, const char *ref)
{
    const json_t *n;
    size_t k;
    json_array_foreach(s->L->nodes, k, n) {
        const char *nm = json_string_value(json_object_get(n, "name"));
        if (!nm || strcmp(nm, ref) != 0)
            continue;
        if (k == self)
            return SITE_ERR(s, IC_EFORMAT, "input %zu refers to the node itself (a cycle)", i);
        if (k > self)
            return SITE_ERR(s, IC_EFORMAT, "input %zu '%s' is defined later (node %zu); nodes "
                            "must come after their inputs, so this is a cycle or out of order",
                            i, ref, k);
    }
    return SITE_ERR(s, IC_EFORMAT, "input %zu '%s' is not defined", i, ref);
}

static ic_status get_operand(site *s, size_t self, size_t i, const json_t *j, ic_operand *out)
{
    if (json_is_string(j)) {
        ic_value v;
        if (!ic_graph_find(s->L->g, json_string_value(j), &v))
            return undefined_operand(s, self, i, json_string_value(j));
        *out = ic_val(v);
    } else if (json_is_integer(j)) {
        *out = ic_scalar_i(json_integer_value(j));
    } else if (json_is_real(j)) {
        *out = ic_scalar_f(json_real_value(j));
    } else if (json_is_null(j)) {
        *out = ic_none();
    } else {
        return SITE_ERR(s, IC_EFORMAT, "input %zu must be a name, a number or null, not %s", i,
                        jtype(j));
    }
    return IC_OK;
}

static ic_status load_node(loader *L, const json_t *e, size_t idx)
{
    static const char *const keys[] = { "name", "op", "inputs", "attrs", NULL };
    site s = { L, NULL, NULL };
    ic_status st;
    if (!json_is_object(e))
        return SITE_ERR(&s, IC_EFORMAT, "node %zu must be an object, not %s", idx, jtype(e));
    if ((st = get_name(&s, e, "node", idx)))
        return st;
    const json_t *o = json_object_get(e, "op");
    if (!o)
        return SITE_ERR(&s, IC_EFORMAT, "missing \"op\"");
    if (!json_is_string(o))
        return SITE_ERR(&s, IC_EFORMAT, "\"op\" must be an op name string, not %s", jtype(o));
    ic_op op;
    if (!ic_op_from_name(json_string_value(o), &op))
        return SITE_ERR(&s, IC_EFORMAT, "unknown op '%s'", json_string_value(o));
    s.op = ic_op_name(op);
    if ((st = check_keys(&s, e, keys, "node")))
        return st;
    const json_t *in = json_object_get(e, "inputs");
    ic_operand ops[IC_MAX_INPUTS];
    size_t n = 0;
    if (in) {
        if ((st = get_list(&s, in, "\"inputs\"", IC_MAX_INPUTS)))
            return st;
        n = json_array_size(in);
        for (size_t i = 0; i < n; i++)
            if ((st = get_operand(&s, idx, i, json_array_get(in, i), &ops[i])))
                return st;
    }
    ic_attrs a;
    ic_attrs_init(&a, op);
    if ((st = parse_attrs(&s, op, json_object_get(e, "attrs"), &a)))
        return st;
    return ic_graph_add_node(L->g, s.name, op, (int)n, ops, &a, NULL);
}

/* Runs fn over the list at root[key] (absent = empty). */
static ic_status load_list(loader *L, const json_t *root, const char *key,
                           ic_status (*fn)(loader *, const json_t *, size_t))
{
    const json_t *arr = json_object_get(root, key);
    if (!arr)
        return IC_OK;
    if (!json_is_array(arr))
        return ic__node_error(L->g, NULL, NULL, IC_EFORMAT, "\"%s\" must be a list, not %s", key,
                              jtype(arr));
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e) {
        ic_status st = fn(L, e, i);
        if (st)
            return st;
    }
    return IC_OK;
}

static ic_status load_outputs(loader *L, const json_t *root)
{
    const json_t *arr = json_object_get(root, "outputs");
    site s = { L, NULL, NULL };
    ic_status st;
    if (!arr)
        return SITE_ERR(&s, IC_EFORMAT, "missing \"outputs\" (a list of names)");
    if (!json_is_array(arr))
        return SITE_ERR(&s, IC_EFORMAT, "\"outputs\" must be a list of names, not %s", jtype(arr));
    size_t i;
    const json_t *e;
    json_array_foreach(arr, i, e) {
        ic_value v;
        if (!json_is_string(e))
            return SITE_ERR(&s, IC_EFORMAT, "output %zu must be a name, not %s", i, jtype(e));
        if (!ic_graph_find(L->g, json_string_value(e), &v))
            return SITE_ERR(&s, IC_EFORMAT, "output %zu '%s' is not defined", i, json_string_value(e));
        if ((st = ic_graph_add_output(L->g, v)))
            return st;
    }
    return IC_OK;
}

/* Checks the root object and version, then creates the (named) graph. */
static ic_status load_header(loader *L, const json_t *root, const char *dflt_name)
{
    static const char *const keys[] = { "ic_graph", "name", "inputs", "params", "nodes", "outputs", NULL };
    const char *w = L->where;
    if (!json_is_object(root))
        return ic__error(L->c, IC_EFORMAT, "%s: the top level must be an object, not %s", w, jtype(root));
    const json_t *ver = json_object_get(root, "ic_graph");
    if (!ver)
        return ic__error(L->c, IC_EFORMAT, "%s: missing \"ic_graph\" version (this reader knows "
                         "version %d); is this an ic-graph file?", w, IC_JSON_VERSION);
    if (!json_is_integer(ver))
        return ic__error(L->c, IC_EFORMAT, "%s: \"ic_graph\" version must be an integer, not %s",
                         w, jtype(ver));
    if (json_integer_value(ver) != IC_JSON_VERSION)
        return ic__error(L->c, IC_EFORMAT, "%s: ic_graph version %lld is not supported (this "
                         "reader knows version %d)", w, (long long)json_integer_value(ver),
                         IC_JSON_VERSION);
    const json_t *nm = json_object_get(root, "name");
    if (nm && (!json_is_string(nm) || !*json_string_value(nm)))
        return ic__error(L->c, IC_EFORMAT, "%s: \"name\" must be a non-empty string, not %s", w,
                         json_is_string(nm) ? "empty" : jtype(nm));
    ic_status st = ic_graph_create(L->c, nm ? json_string_value(nm) : dflt_name, &L->g);
    if (st)
        return st;
    if ((st = ic__graph_set_source(L->g, w)))
        return st;
    site s = { L, NULL, NULL };
    return check_keys(&s, root, keys, "the top level");
}

static ic_status load_root(loader *L, const json_t *root, const char *dflt_name)
{
    ic_status st;
    if ((st = load_header(L, root, dflt_name)))
        return st;
    L->nodes = json_object_get(root, "nodes");
    if ((st = load_list(L, root, "inputs", load_input)) ||
        (st = load_list(L, root, "params", load_param)) ||
        (st = load_list(L, root, "nodes", load_node)) || (st = load_outputs(L, root)))
        return st;
    return ic_graph_verify(L->g);
}

/* Parses text (n bytes) and builds the graph; all or nothing. */
static ic_status load_text(loader *L, const char *text, size_t n, const char *dflt_name,
                           ic_graph **out)
{
    size_t k = 0;
    while (k < n && text[k] && strchr(" \t\r\n", text[k]))
        k++;
    if (k == n)
        return ic__error(L->c, IC_EFORMAT, "%s: the file is empty", L->where);
    json_error_t err;
    json_t *root = json_loadb(text, n, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
    if (!root)
        return ic__error(L->c, IC_EFORMAT, "%s:%d:%d: invalid JSON: %s", L->where, err.line,
                         err.column, err.text);
    ic_status st = load_root(L, root, dflt_name);
    json_decref(root);
    for (int i = 0; i < L->nfiles; i++)
        ic__free(L->c, L->files[i].path);
    ic__free(L->c, L->files);
    if (st) {
        ic_graph_destroy(L->g); /* closes the weights files it kept */
        return st;
    }
    *out = L->g;
    return IC_OK;
}

ic_status ic_graph_load_json_string(ic_ctx *c, const char *text, const char *dir, ic_graph **out)
{
    *out = NULL;
    if (!text)
        return ic__error(c, IC_EINVAL, "ic_graph_load_json_string: text is NULL");
    loader L = { .c = c, .where = "<string>", .dir = dir, .store_joined = true };
    return load_text(&L, text, strlen(text), "graph", out);
}

/* Reads the whole file into ic__malloc'd memory. */
static ic_status read_file(ic_ctx *c, const char *path, char **buf, size_t *n)
{
    FILE *f = fopen(path, "rb");
    struct stat sb;
    if (!f)
        return ic__error(c, IC_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(f);
        return ic__error(c, IC_EIO, "%s: is a folder, not a graph file", path);
    }
    size_t cap = 1 << 16, len = 0;
    char *p = ic__malloc(c, cap);
    while (p) {
        len += fread(p + len, 1, cap - len, f);
        if (len < cap)
            break;
        if (cap >= IC_JSON_MAX_BYTES) { /* e.g. /dev/zero: refuse rather than eat memory */
            ic__free(c, p);
            fclose(f);
            return ic__error(c, IC_EFORMAT, "%s: larger than %d MiB; not a graph file", path,
                             IC_JSON_MAX_BYTES >> 20);
        }
        char *q = ic__realloc(c, p, cap * 2);
        if (!q)
            ic__free(c, p);
        p = q;
        cap *= 2;
    }
    bool bad = ferror(f);
    int e = errno;
    fclose(f);
    if (!p)
        return ic__error(c, IC_ENOMEM, "%s: out of memory reading the file", path);
    if (bad) {
        ic__free(c, p);
        return ic__error(c, IC_EIO, "%s: read error: %s", path, strerror(e));
    }
    *buf = p;
    *n = len;
    return IC_OK;
}

/* "dir/model.json" -> "model" (the graph's name when the file gives none). */
static void stem_of(const char *path, char *out, size_t n)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(out, n, "%s", *b ? b : "graph");
    char *dot = strrchr(out, '.');
    if (dot && dot != out)
        *dot = 0;
}

static char *dir_of(ic_ctx *c, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return ic__strdup(c, ".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = ic__malloc(c, n + 1);
    if (d) {
        memcpy(d, path, n);
        d[n] = 0;
    }
    return d;
}

ic_status ic_graph_load_json(ic_ctx *c, const char *path, ic_graph **out)
{
    char *text = NULL, name[256];
    size_t n = 0;
    *out = NULL;
    if (!path)
        return ic__error(c, IC_EINVAL, "ic_graph_load_json: path is NULL");
    ic_status st = read_file(c, path, &text, &n);
    if (st)
        return st;
    char *dir = dir_of(c, path);
    if (!dir) {
        ic__free(c, text);
        return ic__error(c, IC_ENOMEM, "out of memory");
    }
    stem_of(path, name, sizeof name);
    loader L = { .c = c, .where = path, .dir = dir };
    st = load_text(&L, text, n, name, out);
    ic__free(c, dir);
    ic__free(c, text);
    return st;
}

/* ======================================================================================
 * Saving
 * ==================================================================================== */

typedef struct {
    const ic_graph *g;
    ic_ctx *c;
    const char *path;         /* the new graph file */
    char *base;               /* folder the graph's param files are relative to */
    char *newdir;             /* folder of the new file */
    bool same_dir;            /* base and newdir are the same folder */
    const char *st_name;      /* basename of the file in-memory params go to */
    char *st_path;            /* "<path minus .json>.safetensors" */
    bool text_only;           /* ic__graph_json_text: params with data but no "file" written get
                               * none (their caller stores the data) */
    bool keep_files;          /* ic__graph_json_text: params read from a file keep it */
} saver;

#define SAVE_ERR(sv, node, op, code, ...) ic__node_error((sv)->g, node, op, code, __VA_ARGS__)

static ic_status oom(saver *sv) { return ic__error(sv->c, IC_ENOMEM, "out of memory saving graph"); }

/* Whether v1 can write d: a size, or one symbol (not e.g. 2*B). */
static bool dim_writable(ic_dim d) { return d.nsym == 0 || (d.nsym == 1 && d.coef == 1); }

static json_t *dim_json(const ic_graph *g, ic_dim d)
{
    return d.nsym ? json_string(ic_graph_symbol_name(g, d.sym[0])) : json_integer(d.coef);
}

enum { SHAPE_PLAIN, SHAPE_RESHAPE, SHAPE_EXPAND };

/* A shape as a JSON list. A dim v1 cannot write becomes -1 where that means the same: in
 * a reshape target without another -1 (it is then inferred back), and in an expand target
 * where it equals the input's size (-1 keeps it). Graphs built in C can have such dims. */
static ic_status shape_json(saver *sv, const ic_node *n, const char *what, int rank,
                            const ic_dim *shape, int mode, json_t **out)
{
    char buf[256];
    bool fill = mode != SHAPE_RESHAPE;
    for (int i = 0; i < rank; i++)
        fill = fill || (shape[i].nsym == 0 && shape[i].coef == -1);
    const ic_node *src = mode == SHAPE_EXPAND ? sv->g->nodes[n->in[0].node] : NULL;
    json_t *a = json_array();
    if (!a)
        return oom(sv);
    for (int i = 0; i < rank; i++) {
        ic_dim d = shape[i];
        int j = src ? i - (rank - src->info.rank) : -1;
        bool minus1 = false;
        if (!dim_writable(d)) {
            if (mode == SHAPE_RESHAPE && !fill)
                minus1 = fill = true;
            else if (src && j >= 0 && ic_dim_eq(d, src->shape[j]))
                minus1 = true;
            else {
                json_decref(a);
                return SAVE_ERR(sv, n->info.name, ic_op_name(n->info.op), IC_EUNSUPPORTED,
                                "%s %s: dim %d cannot be written in ic-graph v1 (only sizes "
                                "and single symbols)", what,
                                ic_graph_shape_str(sv->g, rank, shape, buf, sizeof buf), i);
            }
        }
        if (json_array_append_new(a, minus1 ? json_integer(-1) : dim_json(sv->g, d))) {
            json_decref(a);
            return oom(sv);
        }
    }
    *out = a;
    return IC_OK;
}

static ic_status scalar_json(saver *sv, const ic_node *n, const char *what, ic_scalar s,
                             json_t **out)
{
    if (!s.is_int && !isfinite(s.f))
        return SAVE_ERR(sv, n->info.name, ic_op_name(n->info.op), IC_EUNSUPPORTED,
                        "%s is %g, which JSON cannot hold", what, s.f);
    *out = s.is_int ? json_integer(s.i) : json_real(s.f);
    return *out ? IC_OK : oom(sv);
}

static json_t *int_list_json(int n, const int64_t *d)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_integer(d[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* Sets obj[key] = v (consumed); NULL v means out of memory. */
static ic_status put(saver *sv, json_t *obj, const char *key, json_t *v)
{
    return v && json_object_set_new(obj, key, v) == 0 ? IC_OK : oom(sv);
}

static ic_status put_scalar(saver *sv, const ic_node *n, json_t *obj, const char *key,
                            ic_scalar s)
{
    json_t *v;
    if (!s.is_int && !isfinite(s.f)) /* an attr: the strings get_scalar reads (operands
                                      * cannot be strings, which name nodes) */
        return put(sv, obj, key, json_string(isnan(s.f) ? "nan" : s.f > 0 ? "inf" : "-inf"));
    ic_status st = scalar_json(sv, n, key, s, &v);
    return st ? st : put(sv, obj, key, v);
}

static ic_status put_shape(saver *sv, const ic_node *n, json_t *obj, const char *key, int mode)
{
    json_t *v;
    ic_status st = shape_json(sv, n, key, n->attrs.nshape, n->attrs.shape, mode, &v);
    return st ? st : put(sv, obj, key, v);
}

/* start, end or step: a slice's is an integer (start and end only when given: has), an
 * arange's a scalar (s). */
static ic_status put_bound(saver *sv, const ic_node *n, json_t *obj, const char *key, bool has,
                           int64_t i, ic_scalar s)
{
    if (n->info.op != IC_OP_SLICE && n->info.op != IC_OP_UNFOLD)
        return put_scalar(sv, n, obj, key, s);
    return has ? put(sv, obj, key, json_integer(i)) : IC_OK;
}

static json_t *real_list_json(int n, const double *d)
{
    json_t *a = json_array();
    for (int i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_real(d[i]))) {
            json_decref(a);
            return NULL;
        }
    return a;
}

/* --- spatial ops (issue 12): lists only when given (absent = the op's default) --- */
static ic_status spatial_attr_json(saver *sv, const ic_node *n, json_t *o, int id)
{
    const ic_attrs *a = &n->attrs;
    const char *k = attr_names[id];
    bool pad = n->info.op == IC_OP_PAD;
#define LIST(cnt, arr) ((cnt) ? put(sv, o, k, int_list_json((cnt), (arr))) : IC_OK)
    switch (id) {
    case A_PAD: return put(sv, o, k, int_list_json(a->npad, a->pad));
    case A_MODE: return put(sv, o, k, json_string(pad ? pad_modes[a->mode] : interp_modes[a->mode]));
    case A_SIZE:
        if (n->info.op == IC_OP_UNFOLD)
            return put(sv, o, k, json_integer(a->unfold_size));
        return put(sv, o, k, int_list_json(a->nsize, a->size));
    case A_SHIFTS: return put(sv, o, k, int_list_json(a->nshifts, a->shifts));
    case A_STRIDE: return LIST(a->nstride, a->stride);
    case A_PADDING:
        if (a->padding_str != IC_PADDING_INTS)
            return put(sv, o, k, json_string(padding_strs[a->padding_str]));
        return LIST(a->npadding, a->padding);
    case A_DILATION: return LIST(a->ndilation, a->dilation);
    case A_GROUPS: return put(sv, o, k, json_integer(a->groups));
    case A_OUTPUT_PADDING: return LIST(a->noutput_padding, a->output_padding);
    case A_KERNEL: return put(sv, o, k, int_list_json(a->nkernel, a->kernel_size));
    case A_CEIL: return put(sv, o, k, json_boolean(a->ceil_mode));
    case A_CIP: return put(sv, o, k, json_boolean(a->count_include_pad));
    case A_DIVISOR: return a->has_divisor ? put(sv, o, k, json_integer(a->divisor_override)) : IC_OK;
    case A_OUTPUT_SIZE: return put(sv, o, k, int_list_json(a->noutput_size, a->output_size));
    case A_SCALE: return a->nscale ? put(sv, o, k, real_list_json(a->nscale, a->scale_factor)) : IC_OK;
    case A_ALIGN: return put(sv, o, k, json_boolean(a->align_corners));
    }
#undef LIST
    return IC_OK;
}

/* Every attr the op takes that has a value (optional ones only when given), so that a
 * reload gives the same ic_attrs. */
static ic_status attrs_json(saver *sv, const ic_node *n, json_t *o)
{
    const ic_attrs *a = &n->attrs;
    ic_op op = n->info.op;
    attr_mask al, rq;
    ic_status st = IC_OK;
    op_attrs(op, &al, &rq);
    for (int id = 0; id < A_COUNT && !st; id++) {
        const char *k = attr_names[id];
        if (!(al & BIT(id)))
            continue;
        switch (id) {
        case A_DIMS: if (a->has_dims) st = put(sv, o, k, int_list_json(a->ndims, a->dims)); break;
        case A_KEEPDIM: st = put(sv, o, k, json_boolean(a->keepdim)); break;
        case A_DIM: st = put(sv, o, k, json_integer(a->dim)); break;
        case A_DIM0: st = put(sv, o, k, json_integer(a->dim0)); break;
        case A_DIM1: st = put(sv, o, k, json_integer(a->dim1)); break;
        case A_SHAPE: st = put_shape(sv, n, o, k, op == IC_OP_RESHAPE ? SHAPE_RESHAPE : op == IC_OP_EXPAND ? SHAPE_EXPAND : SHAPE_PLAIN); break;
        case A_NSHAPE: st = put_shape(sv, n, o, k, SHAPE_PLAIN); break;
        case A_START: st = put_bound(sv, n, o, k, a->has_start, a->start, a->astart); break;
        case A_END: st = put_bound(sv, n, o, k, a->has_end, a->end, a->aend); break;
        case A_STEP: st = put_bound(sv, n, o, k, true, a->step, a->astep); break;
        case A_VALUE: st = put_scalar(sv, n, o, k, a->value); break;
        case A_MIN: if (a->has_min) st = put_scalar(sv, n, o, k, a->min); break;
        case A_MAX: if (a->has_max) st = put_scalar(sv, n, o, k, a->max); break;
        case A_EPS: st = put_scalar(sv, n, o, k, ic_scalar_f(a->eps).scalar); break;
        case A_NEG_SLOPE: st = put_scalar(sv, n, o, k, ic_scalar_f(a->negative_slope).scalar); break;
        case A_BETA: st = put_scalar(sv, n, o, k, ic_scalar_f(a->beta).scalar); break;
        case A_THRESHOLD: st = put_scalar(sv, n, o, k, ic_scalar_f(a->threshold).scalar); break;
        case A_DTYPE: if (a->has_dtype) st = put(sv, o, k, json_string(ic_dtype_name(a->dtype))); break;
        case A_APPROX: st = put(sv, o, k, json_string(a->approximate ? "tanh" : "none")); break;
        default: st = spatial_attr_json(sv, n, o, id); break;
        /* --- nn ops --- */
        case A_NUM_GROUPS: st = put(sv, o, k, json_integer(a->num_groups)); break;
        case A_IS_CAUSAL: st = put(sv, o, k, json_boolean(a->is_causal)); break;
        case A_SDPA_SCALE: if (a->has_scale) st = put_scalar(sv, n, o, k, ic_scalar_f(a->scale).scalar); break;
        case A_DIAGONAL: st = put(sv, o, k, json_integer(a->diagonal)); break;
        case A_MIN_VAL: st = put_scalar(sv, n, o, k, ic_scalar_f(a->min_val).scalar); break;
        case A_MAX_VAL: st = put_scalar(sv, n, o, k, ic_scalar_f(a->max_val).scalar); break;
        case A_ALPHA: st = put_scalar(sv, n, o, k, ic_scalar_f(a->alpha).scalar); break;
        }
    }
    return st;
}

static ic_status operands_json(saver *sv, const ic_node *n, json_t **out)
{
    json_t *a = json_array();
    if (!a)
        return oom(sv);
    for (int i = 0; i < n->info.ninputs; i++) {
        const ic_operand *o = &n->in[i];
        json_t *v = NULL;
        ic_status st = IC_OK;
        if (o->node >= 0)
            v = json_string(sv->g->nodes[o->node]->info.name);
        else if (o->node == IC_NONE)
            v = json_null();
        else
            st = scalar_json(sv, n, "a scalar input", o->scalar, &v);
        if (st || !v || json_array_append_new(a, v)) {
            json_decref(a);
            return st ? st : oom(sv);
        }
    }
    *out = a;
    return IC_OK;
}

static ic_status node_json(saver *sv, const ic_node *n, json_t *o)
{
    ic_status st;
    json_t *ins, *attrs;
    if ((st = put(sv, o, "name", json_string(n->info.name))) ||
        (st = put(sv, o, "op", json_string(ic_op_name(n->info.op)))))
        return st;
    if (n->info.ninputs) {
        if ((st = operands_json(sv, n, &ins)) || (st = put(sv, o, "inputs", ins)))
            return st;
    }
    if (!(attrs = json_object()))
        return oom(sv);
    if ((st = attrs_json(sv, n, attrs))) {
        json_decref(attrs);
        return st;
    }
    if (json_object_size(attrs) == 0) {
        json_decref(attrs);
        return IC_OK;
    }
    return put(sv, o, "attrs", attrs);
}

/* An absolute path for p (resolved when it exists). Caller frees. */
static char *absolute(ic_ctx *c, const char *p)
{
    char buf[PATH_MAX], cwd[PATH_MAX];
    if (realpath(p, buf))
        return ic__strdup(c, buf);
    if (p[0] == '/' || !getcwd(cwd, sizeof cwd))
        return ic__strdup(c, p);
    return join_path(c, cwd, p);
}

/* The "file" to write for a param read from a file: as written when the new graph sits in
 * the same folder (or it is absolute), else an absolute path that still resolves. */
static ic_status param_file_json(saver *sv, const ic_node *n, json_t **out)
{
    const char *f = n->info.file;
    if (f[0] == '/' || sv->same_dir) {
        *out = json_string(f);
        return *out ? IC_OK : oom(sv);
    }
    char *joined = join_path(sv->c, sv->base, f), *abs = joined ? absolute(sv->c, joined) : NULL;
    *out = abs ? json_string(abs) : NULL;
    ic__free(sv->c, joined);
    ic__free(sv->c, abs);
    return *out ? IC_OK : oom(sv);
}

static ic_status decl_json(saver *sv, const ic_node *n, json_t *o)
{
    ic_status st;
    json_t *sh;
    if ((st = put(sv, o, "name", json_string(n->info.name))) ||
        (st = put(sv, o, "dtype", json_string(ic_dtype_name(n->info.dtype)))) ||
        (st = shape_json(sv, n, "shape", n->info.rank, n->shape, SHAPE_PLAIN, &sh)) ||
        (st = put(sv, o, "shape", sh)))
        return st;
    if (n->info.op == IC_OP_INPUT) {
        if (!n->info.has_range)
            return IC_OK;
        int64_t r[2] = { n->info.range_lo, n->info.range_hi };
        return put(sv, o, "range", int_list_json(2, r));
    }
    if (!n->info.data) /* supplied at run time; a recorded file would make it a constant */
        return IC_OK;
    if (sv->text_only && (!n->info.file || !sv->keep_files))
        return IC_OK;
    json_t *f;
    if (!n->info.file)
        f = json_string(sv->st_name);
    else if ((st = param_file_json(sv, n, &f)))
        return st;
    if ((st = put(sv, o, "file", f)))
        return st;
    return put(sv, o, "key", json_string(n->info.key ? n->info.key : n->info.name));
}

enum { LIST_INPUTS, LIST_PARAMS, LIST_NODES };

static bool in_list(const ic_node *n, int which)
{
    ic_op op = n->info.op;
    return which == LIST_INPUTS ? op == IC_OP_INPUT
         : which == LIST_PARAMS ? op == IC_OP_PARAM : op != IC_OP_INPUT && op != IC_OP_PARAM;
}

/* Appends `  "key": [` then one entry a line, in definition order, then `],`. */
static ic_status write_list(saver *sv, FILE *f, const char *key, int which)
{
    const ic_graph *g = sv->g;
    bool first = true;
    fprintf(f, "  \"%s\": [", key);
    for (int v = 0; v < g->nnodes; v++) {
        const ic_node *n = g->nodes[v];
        if (!in_list(n, which))
            continue;
        json_t *o = json_object();
        if (!o)
            return oom(sv);
        ic_status st = which == LIST_NODES ? node_json(sv, n, o) : decl_json(sv, n, o);
        char *s = st ? NULL : json_dumps(o, JSON_PRESERVE_ORDER);
        json_decref(o);
        if (st)
            return st;
        if (!s)
            return oom(sv);
        fprintf(f, "%s\n    %s", first ? "" : ",", s);
        first = false;
        free(s);
    }
    fputs(first ? "],\n" : "\n  ],\n", f);
    return IC_OK;
}

/* The whole document as text (caller frees with free()). */
static ic_status graph_text(saver *sv, char **text, size_t *n)
{
    const ic_graph *g = sv->g;
    FILE *f = open_memstream(text, n);
    if (!f)
        return oom(sv);
    json_t *nm = json_string(g->name), *outs = json_array();
    for (int i = 0; outs && i < g->noutputs; i++)
        if (json_array_append_new(outs, json_string(g->nodes[g->outputs[i]]->info.name)))
            json_decref(outs), outs = NULL;
    char *snm = nm ? json_dumps(nm, JSON_ENCODE_ANY) : NULL;
    char *souts = outs ? json_dumps(outs, 0) : NULL;
    json_decref(nm);
    json_decref(outs);
    ic_status st = snm && souts ? IC_OK : oom(sv);
    if (!st) {
        fprintf(f, "{\n  \"ic_graph\": %d,\n  \"name\": %s,\n", IC_JSON_VERSION, snm);
        if (!(st = write_list(sv, f, "inputs", LIST_INPUTS)) &&
            !(st = write_list(sv, f, "params", LIST_PARAMS)) &&
            !(st = write_list(sv, f, "nodes", LIST_NODES)))
            fprintf(f, "  \"outputs\": %s\n}\n", souts);
    }
    free(snm);
    free(souts);
    if (fclose(f) != 0 && !st)
        st = oom(sv);
    if (st) {
        free(*text);
        *text = NULL;
    }
    return st;
}

/* The target is either the old file or the complete new one, never a partial file. */
static ic_status write_atomic(ic_ctx *c, const char *path, const char *data, size_t n)
{
    const char *step;
    int e = ic__write_atomic_bytes(path, data, n, IC__WRITE_SYNC, &step);
    return e ? ic__error(c, IC_EIO, "%s: %s: %s", path, step, strerror(e)) : IC_OK;
}

static bool same_file(ic_ctx *c, const char *a, const char *b)
{
    char *x = absolute(c, a), *y = absolute(c, b);
    bool same = x && y && strcmp(x, y) == 0;
    ic__free(c, x);
    ic__free(c, y);
    return same;
}

/* Refuses to write `target` when a param's weights are read from it: replacing a file
 * the graph maps would break the graph it came from and every other user of that file. */
static ic_status check_not_input(saver *sv, const char *target)
{
    for (int v = 0; v < sv->g->nnodes; v++) {
        const ic_node *n = sv->g->nodes[v];
        if (n->info.op != IC_OP_PARAM || !n->info.file)
            continue;
        char *p = join_path(sv->c, sv->base, n->info.file);
        bool same = p && same_file(sv->c, p, target);
        ic__free(sv->c, p);
        if (same)
            return SAVE_ERR(sv, n->info.name, "param", IC_EINVAL, "refusing to write '%s': the "
                            "param's weights are read from it", target);
    }
    return IC_OK;
}

/* Writes params with in-memory data and no file to sv->st_path, keyed by name. */
static ic_status save_weights(saver *sv)
{
    const ic_graph *g = sv->g;
    int k = 0;
    for (int v = 0; v < g->nnodes; v++)
        k += g->nodes[v]->info.op == IC_OP_PARAM && g->nodes[v]->info.data && !g->nodes[v]->info.file;
    if (!k)
        return IC_OK;
    ic_status st = check_not_input(sv, sv->st_path);
    if (st)
        return st;
    const char **names = ic__calloc(sv->c, (size_t)k, sizeof *names);
    ic_tensor *ts = ic__calloc(sv->c, (size_t)k, sizeof *ts);
    if (!names || !ts) {
        ic__free(sv->c, names);
        ic__free(sv->c, ts);
        return oom(sv);
    }
    k = 0;
    for (int v = 0; v < g->nnodes; v++) {
        const ic_node *n = g->nodes[v];
        if (n->info.op != IC_OP_PARAM || !n->info.data || n->info.file)
            continue;
        int64_t shape[IC_MAX_RANK];
        for (int i = 0; i < n->info.rank; i++)
            shape[i] = n->shape[i].coef; /* params with data have fixed shapes */
        names[k] = n->info.name;
        ic_tensor_init(&ts[k++], n->info.dtype, n->info.rank, shape, (void *)n->info.data);
    }
    st = ic_safetensors_save(sv->c, sv->st_path, k, names, ts);
    ic__free(sv->c, names);
    ic__free(sv->c, ts);
    return st;
}

static void saver_free(saver *sv)
{
    ic__free(sv->c, sv->base);
    ic__free(sv->c, sv->newdir);
    ic__free(sv->c, sv->st_path);
}

static ic_status saver_init(saver *sv, const ic_graph *g, const char *path)
{
    ic_ctx *c = g->c;
    *sv = (saver){ .g = g, .c = c, .path = path };
    sv->base = g->source ? dir_of(c, g->source) : ic__strdup(c, ".");
    sv->newdir = dir_of(c, path);
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".json") == 0)
        n -= 5;
    sv->st_path = ic__malloc(c, n + 13);
    if (!sv->base || !sv->newdir || !sv->st_path) {
        saver_free(sv);
        return oom(sv);
    }
    memcpy(sv->st_path, path, n);
    memcpy(sv->st_path + n, ".safetensors", 13);
    const char *slash = strrchr(sv->st_path, '/');
    sv->st_name = slash ? slash + 1 : sv->st_path;
    char a[PATH_MAX], b[PATH_MAX];
    sv->same_dir = realpath(sv->base, a) && realpath(sv->newdir, b) && strcmp(a, b) == 0;
    return IC_OK;
}

ic_status ic_graph_save_json(const ic_graph *g, const char *path)
{
    saver sv;
    ic_status st;
    char *text = NULL;
    size_t n = 0;
    if (!path || !*path)
        return ic__error(g->c, IC_EINVAL, "ic_graph_save_json: empty path");
    if ((st = saver_init(&sv, g, path)))
        return st;
    /* the text first: a graph v1 cannot express fails before anything is written */
    if (!(st = check_not_input(&sv, path)) && !(st = graph_text(&sv, &text, &n)) &&
        !(st = save_weights(&sv)))
        st = write_atomic(g->c, path, text, n);
    free(text);
    saver_free(&sv);
    return st;
}

ic_status ic__graph_json_text(const ic_graph *g, bool keep_files, char **text, size_t *n)
{
    saver sv;
    ic_status st = saver_init(&sv, g, "graph.json");
    *text = NULL;
    if (st)
        return st;
    sv.same_dir = false; /* files become absolute paths, valid wherever the text goes */
    sv.text_only = true;
    sv.keep_files = keep_files;
    st = graph_text(&sv, text, n);
    saver_free(&sv);
    return st;
}
