/* test_json.c - ic-graph JSON v1: round trips over every op, each error class with its
 * message, a malformed-file corpus, a mutation fuzz, safetensors-backed params, a golden. */
#define _GNU_SOURCE
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ic/ic.h"
#include "graph-impl.h"
#include "testutil.h"

/* ---- helpers ---- */

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    cr_assert(p != NULL);
    return p;
}

/* A fresh folder (malloc'd path; ict_tmpdir's buffer rotates). */
static char *tmpdir_new(void) { return xstrdup(ict_tmpdir()); }

static char *path_in(const char *dir, const char *name)
{
    char *p = NULL;
    cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
    return p;
}

static void write_text(const char *path, const char *text)
{
    ict_write_file(path, text, strlen(text));
}

/* The whole file, NUL-terminated; NULL if it cannot be read. */
static char *read_text(const char *path)
{
    size_t n = 0;
    char *b = ict_read_file(path, &n);
    if (!b)
        return NULL;
    char *t = malloc(n + 1);
    cr_assert(t != NULL);
    memcpy(t, b, n);
    t[n] = 0;
    free(b);
    return t;
}

static ic_graph *load_string_ok(ic_ctx *c, const char *text, const char *dir)
{
    ic_graph *g = (ic_graph *)1;
    ic_status s = ic_graph_load_json_string(c, text, dir, &g);
    cr_assert_eq(s, IC_OK, "load failed (%s): %s", ic_status_str(s), ic_last_error(c));
    cr_assert(g != NULL);
    return g;
}

static ic_graph *load_file_ok(ic_ctx *c, const char *path)
{
    ic_graph *g = (ic_graph *)1;
    ic_status s = ic_graph_load_json(c, path, &g);
    cr_assert_eq(s, IC_OK, "load %s failed (%s): %s", path, ic_status_str(s), ic_last_error(c));
    cr_assert(g != NULL);
    return g;
}

static void save_ok(const ic_graph *g, const char *path)
{
    ic_status s = ic_graph_save_json(g, path);
    cr_assert_eq(s, IC_OK, "save %s failed (%s): %s", path, ic_status_str(s),
                 ic_last_error(ic_graph_ctx(g)));
}

static char *print_graph(const ic_graph *g)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    cr_assert(f != NULL);
    ic_graph_print(f, g);
    fclose(f);
    return buf;
}

/* ---- graph equality, through the public node view; symbols compared by name ---- */

static bool dim_same(const ic_graph *a, ic_dim x, const ic_graph *b, ic_dim y)
{
    if (x.coef != y.coef || x.nsym != y.nsym)
        return false;
    for (int i = 0; i < x.nsym; i++)
        if (strcmp(ic_graph_symbol_name(a, x.sym[i]), ic_graph_symbol_name(b, y.sym[i])) != 0)
            return false;
    return true;
}

static bool shape_same(const ic_graph *a, int ra, const ic_dim *sa, const ic_graph *b, int rb,
                       const ic_dim *sb)
{
    if (ra != rb)
        return false;
    for (int i = 0; i < ra; i++)
        if (!dim_same(a, sa[i], b, sb[i]))
            return false;
    return true;
}

static bool scalar_same(ic_scalar x, ic_scalar y)
{
    return x.is_int == y.is_int && (x.is_int ? x.i == y.i : memcmp(&x.f, &y.f, sizeof x.f) == 0);
}

static bool attrs_same(const ic_graph *a, const ic_attrs *x, const ic_graph *b, const ic_attrs *y,
                       const char **what)
{
#define CHECK(cond, name) do { if (!(cond)) { *what = name; return false; } } while (0)
    CHECK(x->has_dims == y->has_dims && x->ndims == y->ndims, "dims");
    for (int i = 0; i < x->ndims && i < IC_MAX_RANK; i++)
        CHECK(x->dims[i] == y->dims[i], "dims");
    CHECK(x->keepdim == y->keepdim, "keepdim");
    CHECK(x->dim == y->dim && x->dim0 == y->dim0 && x->dim1 == y->dim1, "dim/dim0/dim1");
    CHECK(shape_same(a, x->nshape, x->shape, b, y->nshape, y->shape), "shape");
    CHECK(x->has_start == y->has_start && x->has_end == y->has_end && x->start == y->start &&
          x->end == y->end && x->step == y->step, "slice start/end/step");
    CHECK(scalar_same(x->astart, y->astart) && scalar_same(x->aend, y->aend) &&
          scalar_same(x->astep, y->astep), "arange start/end/step");
    CHECK(scalar_same(x->value, y->value), "value");
    CHECK(x->has_min == y->has_min && x->has_max == y->has_max && scalar_same(x->min, y->min) &&
          scalar_same(x->max, y->max), "min/max");
    CHECK(x->eps == y->eps, "eps");
    CHECK(x->has_dtype == y->has_dtype && x->dtype == y->dtype, "dtype");
    CHECK(x->approximate == y->approximate, "approximate");
#undef CHECK
    return true;
}

static bool operand_same(const ic_graph *a, ic_operand x, const ic_graph *b, ic_operand y)
{
    if ((x.node >= 0) != (y.node >= 0))
        return false;
    if (x.node >= 0) {
        ic_node_info nx, ny;
        ic_graph_node(a, x.node, &nx);
        ic_graph_node(b, y.node, &ny);
        return strcmp(nx.name, ny.name) == 0;
    }
    return x.node == y.node && (x.node == IC_NONE || scalar_same(x.scalar, y.scalar));
}

/* Same nodes in the same order: names, ops, dtypes, shapes, operands, attrs, ranges and
 * param data (bytes); same outputs. On a difference, says which in why. */
static bool graphs_equal(const ic_graph *a, const ic_graph *b, char *why, size_t n)
{
    if (strcmp(ic_graph_name(a), ic_graph_name(b)) != 0)
        return snprintf(why, n, "names %s vs %s", ic_graph_name(a), ic_graph_name(b)), false;
    if (ic_graph_num_nodes(a) != ic_graph_num_nodes(b))
        return snprintf(why, n, "%d vs %d nodes", ic_graph_num_nodes(a), ic_graph_num_nodes(b)), false;
    for (int v = 0; v < ic_graph_num_nodes(a); v++) {
        ic_node_info x, y;
        const char *what = NULL;
        ic_graph_node(a, v, &x);
        ic_graph_node(b, v, &y);
        if (strcmp(x.name, y.name) || x.op != y.op || x.dtype != y.dtype)
            what = "name/op/dtype";
        else if (!shape_same(a, x.rank, x.shape, b, y.rank, y.shape))
            what = "shape";
        else if (x.ninputs != y.ninputs)
            what = "number of inputs";
        for (int i = 0; !what && i < x.ninputs; i++)
            if (!operand_same(a, x.inputs[i], b, y.inputs[i]))
                what = "operand";
        if (!what && (!x.attrs) != (!y.attrs))
            what = "attrs presence";
        if (!what && x.attrs)
            attrs_same(a, x.attrs, b, y.attrs, &what);
        if (!what && (x.has_range != y.has_range || x.range_lo != y.range_lo || x.range_hi != y.range_hi))
            what = "range";
        if (!what && (!x.data) != (!y.data))
            what = "param data presence";
        if (!what && x.data) {
            int64_t numel = 1;
            for (int i = 0; i < x.rank; i++)
                numel *= x.shape[i].coef;
            if (memcmp(x.data, y.data, (size_t)numel * ic_dtype_size(x.dtype)) != 0)
                what = "param data";
        }
        if (what)
            return snprintf(why, n, "node %d '%s': %s differs", v, x.name, what), false;
    }
    if (ic_graph_num_outputs(a) != ic_graph_num_outputs(b))
        return snprintf(why, n, "number of outputs"), false;
    for (int i = 0; i < ic_graph_num_outputs(a); i++)
        if (!operand_same(a, ic_val(ic_graph_output(a, i)), b, ic_val(ic_graph_output(b, i))))
            return snprintf(why, n, "output %d differs", i), false;
    return true;
}

#define assert_graphs_equal(a, b)                                                          \
    do {                                                                                   \
        char why_[512] = "";                                                               \
        cr_assert(graphs_equal((a), (b), why_, sizeof why_), "graphs differ: %s", why_);   \
    } while (0)

static ic_value find(const ic_graph *g, const char *name)
{
    ic_value v = -1;
    cr_assert(ic_graph_find(g, name, &v), "no node '%s'", name);
    return v;
}

static const char *shape_of(const ic_graph *g, const char *name)
{
    static char buf[4][256];
    static int k;
    ic_node_info in;
    ic_graph_node(g, find(g, name), &in);
    k = (k + 1) % 4;
    return ic_graph_shape_str(g, in.rank, in.shape, buf[k], sizeof buf[k]);
}

/* ---- a graph using every op of ops.def, with non-default attrs, symbols and ranges ---- */

static const char *all_ops_json =
    "{\"ic_graph\": 1, \"name\": \"all_ops\",\n"
    " \"inputs\": [\n"
    "  {\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"B\", 4, 6]},\n"
    "  {\"name\": \"y\", \"dtype\": \"f32\", \"shape\": [\"B\", 4, 6]},\n"
    "  {\"name\": \"m\", \"dtype\": \"bool\", \"shape\": [\"B\", 4, 6]},\n"
    "  {\"name\": \"ids\", \"dtype\": \"i64\", \"shape\": [\"B\", 3], \"range\": [0, 10]},\n"
    "  {\"name\": \"iv\", \"dtype\": \"i32\", \"shape\": [4], \"range\": [-5, 5]},\n"
    "  {\"name\": \"bq\", \"dtype\": \"f32\", \"shape\": [2, 4, 6]},\n"
    "  {\"name\": \"bk\", \"dtype\": \"f32\", \"shape\": [2, 6, 5]},\n"
    "  {\"name\": \"gi\", \"dtype\": \"i64\", \"shape\": [3, 2], \"range\": [0, 6]}],\n"
    " \"params\": [\n"
    "  {\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [6, 6]},\n"
    "  {\"name\": \"emb\", \"dtype\": \"f32\", \"shape\": [10, 6]},\n"
    "  {\"name\": \"lnw\", \"dtype\": \"f32\", \"shape\": [6]},\n"
    "  {\"name\": \"lnb\", \"dtype\": \"f32\", \"shape\": [6]},\n"
    "  {\"name\": \"cw\", \"dtype\": \"f32\", \"shape\": [6, 2, 3]},\n"
    "  {\"name\": \"cb\", \"dtype\": \"f32\", \"shape\": [6]},\n"
    "  {\"name\": \"tw\", \"dtype\": \"f32\", \"shape\": [4, 3, 2]},\n"
    "  {\"name\": \"bn4\", \"dtype\": \"f32\", \"shape\": [4]}],\n"
    " \"nodes\": [\n"
    "  {\"name\": \"neg\", \"op\": \"neg\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"abs\", \"op\": \"abs\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"exp\", \"op\": \"exp\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"log\", \"op\": \"log\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"sqrt\", \"op\": \"sqrt\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"rsqrt\", \"op\": \"rsqrt\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"sin\", \"op\": \"sin\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"cos\", \"op\": \"cos\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"tanh\", \"op\": \"tanh\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"sigmoid\", \"op\": \"sigmoid\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"relu\", \"op\": \"relu\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"silu\", \"op\": \"silu\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"erf\", \"op\": \"erf\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"recip\", \"op\": \"reciprocal\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"floor\", \"op\": \"floor\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"ceil\", \"op\": \"ceil\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"lnot\", \"op\": \"logical_not\", \"inputs\": [\"m\"]},\n"
    "  {\"name\": \"gelu\", \"op\": \"gelu\", \"inputs\": [\"x\"], \"attrs\": {\"approximate\": \"tanh\"}},\n"
    "  {\"name\": \"clamp\", \"op\": \"clamp\", \"inputs\": [\"x\"], \"attrs\": {\"min\": -0.5, \"max\": 2}},\n"
    "  {\"name\": \"clamp_lo\", \"op\": \"clamp\", \"inputs\": [\"iv\"], \"attrs\": {\"min\": -1}},\n"
    "  {\"name\": \"cast\", \"op\": \"cast\", \"inputs\": [\"x\"], \"attrs\": {\"dtype\": \"f16\"}},\n"
    "  {\"name\": \"add\", \"op\": \"add\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"sub\", \"op\": \"sub\", \"inputs\": [\"x\", 1]},\n"
    "  {\"name\": \"mul\", \"op\": \"mul\", \"inputs\": [0.5, \"x\"]},\n"
    "  {\"name\": \"div\", \"op\": \"div\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"pow\", \"op\": \"pow\", \"inputs\": [\"x\", 2.0]},\n"
    "  {\"name\": \"maximum\", \"op\": \"maximum\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"minimum\", \"op\": \"minimum\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"eq\", \"op\": \"eq\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"ne\", \"op\": \"ne\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"lt\", \"op\": \"lt\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"le\", \"op\": \"le\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"gt\", \"op\": \"gt\", \"inputs\": [\"x\", -3]},\n"
    "  {\"name\": \"ge\", \"op\": \"ge\", \"inputs\": [\"x\", \"y\"]},\n"
    "  {\"name\": \"land\", \"op\": \"logical_and\", \"inputs\": [\"m\", \"eq\"]},\n"
    "  {\"name\": \"lor\", \"op\": \"logical_or\", \"inputs\": [\"m\", \"lt\"]},\n"
    "  {\"name\": \"where\", \"op\": \"where\", \"inputs\": [\"m\", \"x\", 0.0]},\n"
    "  {\"name\": \"sum\", \"op\": \"sum\", \"inputs\": [\"x\"], \"attrs\": {\"dims\": [1, -1], \"keepdim\": true}},\n"
    "  {\"name\": \"mean\", \"op\": \"mean\", \"inputs\": [\"x\"], \"attrs\": {\"dims\": [-1]}},\n"
    "  {\"name\": \"amax\", \"op\": \"amax\", \"inputs\": [\"x\"], \"attrs\": {\"dims\": [0], \"keepdim\": true}},\n"
    "  {\"name\": \"amin\", \"op\": \"amin\", \"inputs\": [\"x\"], \"attrs\": {\"keepdim\": true}},\n"
    "  {\"name\": \"prod\", \"op\": \"prod\", \"inputs\": [\"iv\"], \"attrs\": {\"dims\": []}},\n"
    "  {\"name\": \"argmax\", \"op\": \"argmax\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": -1, \"keepdim\": true}},\n"
    "  {\"name\": \"softmax\", \"op\": \"softmax\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": 1}},\n"
    "  {\"name\": \"lsm\", \"op\": \"log_softmax\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": -1}},\n"
    "  {\"name\": \"ln\", \"op\": \"layer_norm\", \"inputs\": [\"x\", \"lnw\", \"lnb\"], \"attrs\": {\"normalized_shape\": [6], \"eps\": 0.001}},\n"
    "  {\"name\": \"ln_nb\", \"op\": \"layer_norm\", \"inputs\": [\"x\", null, \"lnb\"], \"attrs\": {\"normalized_shape\": [6]}},\n"
    "  {\"name\": \"rms\", \"op\": \"rms_norm\", \"inputs\": [\"x\", \"lnw\"], \"attrs\": {\"normalized_shape\": [6], \"eps\": 1}},\n"
    "  {\"name\": \"reshape\", \"op\": \"reshape\", \"inputs\": [\"x\"], \"attrs\": {\"shape\": [\"B\", -1]}},\n"
    "  {\"name\": \"reshape2\", \"op\": \"reshape\", \"inputs\": [\"x\"], \"attrs\": {\"shape\": [-1, 2, 3]}},\n"
    "  {\"name\": \"permute\", \"op\": \"permute\", \"inputs\": [\"x\"], \"attrs\": {\"dims\": [2, 0, 1]}},\n"
    "  {\"name\": \"transpose\", \"op\": \"transpose\", \"inputs\": [\"x\"], \"attrs\": {\"dim0\": 0, \"dim1\": -1}},\n"
    "  {\"name\": \"unsq\", \"op\": \"unsqueeze\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": 1}},\n"
    "  {\"name\": \"expand\", \"op\": \"expand\", \"inputs\": [\"unsq\"], \"attrs\": {\"shape\": [-1, 3, 4, 6]}},\n"
    "  {\"name\": \"squeeze\", \"op\": \"squeeze\", \"inputs\": [\"unsq\"], \"attrs\": {\"dims\": [1]}},\n"
    "  {\"name\": \"slice\", \"op\": \"slice\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": 2, \"start\": 1, \"end\": -1, \"step\": 2}},\n"
    "  {\"name\": \"cat\", \"op\": \"cat\", \"inputs\": [\"x\", \"y\", \"x\"], \"attrs\": {\"dim\": -1}},\n"
    "  {\"name\": \"matmul\", \"op\": \"matmul\", \"inputs\": [\"x\", \"w\"]},\n"
    "  {\"name\": \"linear\", \"op\": \"linear\", \"inputs\": [\"x\", \"w\", \"lnb\"]},\n"
    "  {\"name\": \"bmm\", \"op\": \"bmm\", \"inputs\": [\"bq\", \"bk\"]},\n"
    "  {\"name\": \"embedding\", \"op\": \"embedding\", \"inputs\": [\"emb\", \"ids\"]},\n"
    "  {\"name\": \"full\", \"op\": \"full\", \"attrs\": {\"value\": 1.5, \"shape\": [\"B\", 2], \"dtype\": \"f64\"}},\n"
    "  {\"name\": \"arange\", \"op\": \"arange\", \"attrs\": {\"start\": 1, \"end\": 10, \"step\": 3, \"dtype\": \"i32\"}},\n"
    "  {\"name\": \"arange_f\", \"op\": \"arange\", \"inputs\": [], \"attrs\": {\"start\": 0.5, \"end\": 2.5, \"step\": 0.5, \"dtype\": \"f32\"}},\n"
    "  {\"name\": \"arange_d\", \"op\": \"arange\", \"attrs\": {\"end\": 5}},\n"
    "  {\"name\": \"log1p\", \"op\": \"log1p\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"expm1\", \"op\": \"expm1\", \"inputs\": [\"iv\"]},\n"
    "  {\"name\": \"sign\", \"op\": \"sign\", \"inputs\": [\"m\"]},\n"
    "  {\"name\": \"round\", \"op\": \"round\", \"inputs\": [\"iv\"]},\n"
    "  {\"name\": \"remainder\", \"op\": \"remainder\", \"inputs\": [\"x\", -1.5]},\n"
    "  {\"name\": \"hardswish\", \"op\": \"hardswish\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"hardsigmoid\", \"op\": \"hardsigmoid\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"leaky_relu\", \"op\": \"leaky_relu\", \"inputs\": [\"x\"], \"attrs\": {\"negative_slope\": 0.2}},\n"
    "  {\"name\": \"softplus\", \"op\": \"softplus\", \"inputs\": [\"x\"], \"attrs\": {\"beta\": 2, \"threshold\": 7.5}},\n"
    /* --- spatial ops (issue 12) --- */
    "  {\"name\": \"pad\", \"op\": \"pad\", \"inputs\": [\"x\"], \"attrs\": {\"pad\": [1, 2, -1, 0], \"mode\": \"constant\", \"value\": 0.5}},\n"
    "  {\"name\": \"pad_r\", \"op\": \"pad\", \"inputs\": [\"x\"], \"attrs\": {\"pad\": [2, 1], \"mode\": \"reflect\"}},\n"
    "  {\"name\": \"unfold\", \"op\": \"unfold\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": 2, \"size\": 3, \"step\": 2}},\n"
    "  {\"name\": \"flip\", \"op\": \"flip\", \"inputs\": [\"x\"], \"attrs\": {\"dims\": [1, -1]}},\n"
    "  {\"name\": \"roll\", \"op\": \"roll\", \"inputs\": [\"x\"], \"attrs\": {\"shifts\": [2], \"dims\": [2]}},\n"
    "  {\"name\": \"conv\", \"op\": \"conv\", \"inputs\": [\"x\", \"cw\", \"cb\"], \"attrs\": {\"stride\": [2], \"padding\": [1], \"dilation\": 1, \"groups\": 2}},\n"
    "  {\"name\": \"conv_same\", \"op\": \"conv\", \"inputs\": [\"x\", \"cw\"], \"attrs\": {\"padding\": \"same\", \"groups\": 2}},\n"
    "  {\"name\": \"max_pool\", \"op\": \"max_pool\", \"inputs\": [\"x\"], \"attrs\": {\"kernel_size\": [3], \"stride\": [2], \"padding\": [1], \"dilation\": [1], \"ceil_mode\": true}},\n"
    "  {\"name\": \"avg_pool\", \"op\": \"avg_pool\", \"inputs\": [\"x\"], \"attrs\": {\"kernel_size\": [2], \"count_include_pad\": false, \"divisor_override\": 3}},\n"
    "  {\"name\": \"aap\", \"op\": \"adaptive_avg_pool\", \"inputs\": [\"x\"], \"attrs\": {\"output_size\": [4]}},\n"
    "  {\"name\": \"amp\", \"op\": \"adaptive_max_pool\", \"inputs\": [\"x\"], \"attrs\": {\"output_size\": [5]}},\n"
    "  {\"name\": \"interp\", \"op\": \"interpolate\", \"inputs\": [\"x\"], \"attrs\": {\"size\": [12], \"scale_factor\": [2.0], \"mode\": \"linear\", \"align_corners\": false}},\n"
    "  {\"name\": \"convt\", \"op\": \"conv_transpose\", \"inputs\": [\"x\", \"tw\", \"cb\"], \"attrs\": {\"stride\": [2], \"padding\": [1], \"output_padding\": [1], \"dilation\": [1], \"groups\": 2}},\n"
    /* --- nn ops (issue 12) --- */
    "  {\"name\": \"bn\", \"op\": \"batch_norm\", \"inputs\": [\"x\", \"bn4\", \"bn4\", null, \"bn4\"], \"attrs\": {\"eps\": 0.01}},\n"
    "  {\"name\": \"gn\", \"op\": \"group_norm\", \"inputs\": [\"x\", \"bn4\"], \"attrs\": {\"num_groups\": 2, \"eps\": 0.5}},\n"
    "  {\"name\": \"sdpa\", \"op\": \"scaled_dot_product_attention\", \"inputs\": [\"bq\", \"bq\", \"bq\"], \"attrs\": {\"is_causal\": true, \"scale\": 0.25}},\n"
    "  {\"name\": \"gather\", \"op\": \"gather\", \"inputs\": [\"emb\", \"gi\"], \"attrs\": {\"dim\": 1}},\n"
    "  {\"name\": \"isel\", \"op\": \"index_select\", \"inputs\": [\"emb\", \"iv\"], \"attrs\": {\"dim\": -2}},\n"
    "  {\"name\": \"cumsum\", \"op\": \"cumsum\", \"inputs\": [\"iv\"], \"attrs\": {\"dim\": 0}},\n"
    "  {\"name\": \"cumsum_d\", \"op\": \"cumsum\", \"inputs\": [\"x\"], \"attrs\": {\"dim\": -1, \"dtype\": \"f64\"}},\n"
    "  {\"name\": \"stack\", \"op\": \"stack\", \"inputs\": [\"x\", \"y\"], \"attrs\": {\"dim\": -1}},\n"
    "  {\"name\": \"mfill\", \"op\": \"masked_fill\", \"inputs\": [\"x\", \"m\"], \"attrs\": {\"value\": \"-inf\"}},\n"
    "  {\"name\": \"hardtanh\", \"op\": \"hardtanh\", \"inputs\": [\"x\"], \"attrs\": {\"min_val\": -2, \"max_val\": 0.5}},\n"
    "  {\"name\": \"mish\", \"op\": \"mish\", \"inputs\": [\"x\"]},\n"
    "  {\"name\": \"elu\", \"op\": \"elu\", \"inputs\": [\"x\"], \"attrs\": {\"alpha\": 0.5}},\n"
    "  {\"name\": \"triu\", \"op\": \"triu\", \"inputs\": [\"m\"], \"attrs\": {\"diagonal\": 1}},\n"
    "  {\"name\": \"tril\", \"op\": \"tril\", \"inputs\": [\"x\"]}],\n"
    " \"outputs\": [\"add\", \"sum\", \"embedding\", \"x\", \"w\", \"add\"]}\n";

/* Found by fuzzing (unittests/Fuzz/regress/graph_json/scalar_neg_inf_to_int.json): a real
 * scalar's integer form was a bare cast, undefined for masked_fill's "-inf", NaN or 1e300. */
Test(json, real_scalars_saturate_to_int64)
{
    cr_assert_eq(ic_scalar_f(-INFINITY).scalar.i, INT64_MIN);
    cr_assert_eq(ic_scalar_f(INFINITY).scalar.i, INT64_MAX);
    cr_assert_eq(ic_scalar_f(1e300).scalar.i, INT64_MAX);
    cr_assert_eq(ic_scalar_f(NAN).scalar.i, 0);
    cr_assert_eq(ic_scalar_f(-3.7).scalar.i, -3);
    cr_assert_eq(ic_scalar_f(0x1p62).scalar.i, (int64_t)1 << 62);
    ic_ctx *c = ict_ctx();
    ic_graph *g = NULL;
    const char *text = "{\"ic_graph\": 1, \"inputs\": [{\"name\": \"s\", \"dtype\": \"f32\", \"shape\": [2]},"
                       " {\"name\": \"m\", \"dtype\": \"bool\", \"shape\": [2]}], \"nodes\": [{\"name\": \"y\","
                       " \"op\": \"masked_fill\", \"inputs\": [\"s\", \"m\"], \"attrs\": {\"value\": \"-inf\"}}],"
                       " \"outputs\": [\"y\"]}";
    cr_assert_eq(ic_graph_load_json_string(c, text, NULL, &g), IC_OK, "%s", ic_last_error(c));
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(json, every_op_is_covered)
{
    /* the all-ops graph must use each op of ops.def, so a new op needs a new line here */
    ic_ctx *c = ict_ctx();
    ic_graph *g = load_string_ok(c, all_ops_json, NULL);
    bool used[IC_OP_COUNT] = { false };
    for (int v = 0; v < ic_graph_num_nodes(g); v++) {
        ic_node_info in;
        ic_graph_node(g, v, &in);
        if ((unsigned)in.op < IC_OP_COUNT)
            used[in.op] = true;
    }
    for (int op = 0; op < IC_OP_COUNT; op++)
        cr_expect(used[op], "op '%s' is not in the all-ops graph", ic_op_name((ic_op)op));
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(json, load_reads_what_the_file_says)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = load_string_ok(c, all_ops_json, NULL);
    ic_node_info in;
    /* shapes worked out by hand from the PyTorch rules */
    cr_assert_str_eq(shape_of(g, "x"), "[B, 4, 6]");
    cr_assert_str_eq(shape_of(g, "sum"), "[B, 1, 1]");
    cr_assert_str_eq(shape_of(g, "mean"), "[B, 4]");
    cr_assert_str_eq(shape_of(g, "amin"), "[1, 1, 1]");
    cr_assert_str_eq(shape_of(g, "prod"), "[]");
    cr_assert_str_eq(shape_of(g, "reshape"), "[B, 24]");
    cr_assert_str_eq(shape_of(g, "reshape2"), "[4*B, 2, 3]");
    cr_assert_str_eq(shape_of(g, "permute"), "[6, B, 4]");
    cr_assert_str_eq(shape_of(g, "transpose"), "[6, 4, B]");
    cr_assert_str_eq(shape_of(g, "expand"), "[B, 3, 4, 6]");
    cr_assert_str_eq(shape_of(g, "squeeze"), "[B, 4, 6]");
    cr_assert_str_eq(shape_of(g, "slice"), "[B, 4, 2]");
    cr_assert_str_eq(shape_of(g, "cat"), "[B, 4, 18]");
    cr_assert_str_eq(shape_of(g, "bmm"), "[2, 4, 5]");
    cr_assert_str_eq(shape_of(g, "embedding"), "[B, 3, 6]");
    cr_assert_str_eq(shape_of(g, "full"), "[B, 2]");
    cr_assert_str_eq(shape_of(g, "arange"), "[3]");   /* 1, 4, 7 */
    cr_assert_str_eq(shape_of(g, "arange_f"), "[4]"); /* 0.5, 1, 1.5, 2 */
    cr_assert_str_eq(shape_of(g, "arange_d"), "[5]");
    cr_assert_str_eq(shape_of(g, "pad"), "[B, 3, 9]"); /* --- spatial ops --- */
    cr_assert_str_eq(shape_of(g, "pad_r"), "[B, 4, 9]");
    cr_assert_str_eq(shape_of(g, "unfold"), "[B, 4, 2, 3]");
    cr_assert_str_eq(shape_of(g, "flip"), "[B, 4, 6]");
    cr_assert_str_eq(shape_of(g, "conv"), "[B, 6, 3]");
    cr_assert_str_eq(shape_of(g, "conv_same"), "[B, 6, 6]");
    cr_assert_str_eq(shape_of(g, "max_pool"), "[B, 4, 4]");
    cr_assert_str_eq(shape_of(g, "avg_pool"), "[B, 4, 3]");
    cr_assert_str_eq(shape_of(g, "aap"), "[B, 4, 4]");
    cr_assert_str_eq(shape_of(g, "amp"), "[B, 4, 5]");
    cr_assert_str_eq(shape_of(g, "interp"), "[B, 4, 12]");
    cr_assert_str_eq(shape_of(g, "convt"), "[B, 6, 11]"); /* (6-1)*2 - 2 + (2-1) + 1 + 1 */

    ic_graph_node(g, find(g, "sum"), &in);
    cr_assert(in.attrs->has_dims && in.attrs->ndims == 2 && in.attrs->dims[0] == 1 &&
              in.attrs->dims[1] == -1 && in.attrs->keepdim);
    ic_graph_node(g, find(g, "gelu"), &in);
    cr_assert_eq(in.attrs->approximate, 1);
    ic_graph_node(g, find(g, "clamp"), &in);
    cr_assert(in.attrs->has_min && !in.attrs->min.is_int && in.attrs->min.f == -0.5);
    cr_assert(in.attrs->has_max && in.attrs->max.is_int && in.attrs->max.i == 2);
    ic_graph_node(g, find(g, "clamp_lo"), &in);
    cr_assert(in.attrs->has_min && !in.attrs->has_max);
    ic_graph_node(g, find(g, "cast"), &in);
    cr_assert_eq(in.dtype, IC_F16);
    ic_graph_node(g, find(g, "leaky_relu"), &in);
    cr_assert_eq(in.attrs->negative_slope, 0.2);
    ic_graph_node(g, find(g, "softplus"), &in);
    cr_assert(in.attrs->beta == 2 && in.attrs->threshold == 7.5);
    /* --- nn ops --- */
    cr_assert_str_eq(shape_of(g, "sdpa"), "[2, 4, 6]");
    cr_assert_str_eq(shape_of(g, "gather"), "[3, 2]");
    cr_assert_str_eq(shape_of(g, "isel"), "[4, 6]");
    cr_assert_str_eq(shape_of(g, "stack"), "[B, 4, 6, 2]");
    ic_graph_node(g, find(g, "bn"), &in);
    cr_assert(in.attrs->eps == 0.01 && in.ninputs == 5 && in.inputs[3].node == IC_NONE);
    ic_graph_node(g, find(g, "gn"), &in);
    cr_assert(in.attrs->num_groups == 2 && in.attrs->eps == 0.5);
    ic_graph_node(g, find(g, "sdpa"), &in);
    cr_assert(in.attrs->is_causal && in.attrs->has_scale && in.attrs->scale == 0.25);
    ic_graph_node(g, find(g, "cumsum"), &in);
    cr_assert(in.dtype == IC_I64 && in.attrs->dim == 0 && !in.attrs->has_dtype);
    ic_graph_node(g, find(g, "cumsum_d"), &in);
    cr_assert(in.dtype == IC_F64 && in.attrs->has_dtype);
    ic_graph_node(g, find(g, "mfill"), &in);
    cr_assert(!in.attrs->value.is_int && isinf(in.attrs->value.f) && in.attrs->value.f < 0);
    ic_graph_node(g, find(g, "hardtanh"), &in);
    cr_assert(in.attrs->min_val == -2 && in.attrs->max_val == 0.5);
    ic_graph_node(g, find(g, "elu"), &in);
    cr_assert_eq(in.attrs->alpha, 0.5);
    ic_graph_node(g, find(g, "mish"), &in);
    cr_assert_eq(in.attrs->alpha, 1);
    ic_graph_node(g, find(g, "triu"), &in);
    cr_assert(in.attrs->diagonal == 1 && in.dtype == IC_BOOL);
    ic_graph_node(g, find(g, "expm1"), &in);
    cr_assert_eq(in.dtype, IC_F32);  /* integers to f32, as torch.expm1 */
    ic_graph_node(g, find(g, "sign"), &in);
    cr_assert_eq(in.dtype, IC_BOOL); /* sign of bool is bool */
    ic_graph_node(g, find(g, "round"), &in);
    cr_assert_eq(in.dtype, IC_I32);
    /* numbers in inputs: integer -> integer scalar, real -> real scalar */
    ic_graph_node(g, find(g, "sub"), &in);
    cr_assert(in.inputs[1].node == IC_SCALAR && in.inputs[1].scalar.is_int && in.inputs[1].scalar.i == 1);
    ic_graph_node(g, find(g, "pow"), &in);
    cr_assert(in.inputs[1].node == IC_SCALAR && !in.inputs[1].scalar.is_int && in.inputs[1].scalar.f == 2.0);
    ic_graph_node(g, find(g, "mul"), &in);
    cr_assert(in.inputs[0].node == IC_SCALAR && in.inputs[0].scalar.f == 0.5);
    /* null is an absent optional operand */
    ic_graph_node(g, find(g, "ln_nb"), &in);
    cr_assert(in.ninputs == 3 && in.inputs[1].node == IC_NONE && in.inputs[2].node == find(g, "lnb"));
    ic_graph_node(g, find(g, "ln"), &in);
    cr_assert_eq(in.attrs->eps, 0.001);
    ic_graph_node(g, find(g, "rms"), &in);
    cr_assert_eq(in.attrs->eps, 1.0);
    ic_graph_node(g, find(g, "slice"), &in);
    cr_assert(in.attrs->has_start && in.attrs->start == 1 && in.attrs->has_end &&
              in.attrs->end == -1 && in.attrs->step == 2 && in.attrs->dim == 2);
    ic_graph_node(g, find(g, "arange_f"), &in);
    cr_assert(!in.attrs->astart.is_int && in.attrs->astart.f == 0.5 && in.attrs->astep.f == 0.5);
    ic_graph_node(g, find(g, "arange_d"), &in);
    cr_assert_eq(in.dtype, IC_I64);
    ic_graph_node(g, find(g, "ids"), &in);
    cr_assert(in.has_range && in.range_lo == 0 && in.range_hi == 10);
    ic_graph_node(g, find(g, "iv"), &in);
    cr_assert(in.has_range && in.range_lo == -5 && in.range_hi == 5);
    ic_graph_node(g, find(g, "w"), &in);
    cr_assert(in.op == IC_OP_PARAM && in.data == NULL && in.file == NULL);
    /* six outputs, in order, a repeated one included */
    cr_assert_eq(ic_graph_num_outputs(g), 6);
    cr_assert_eq(ic_graph_output(g, 3), find(g, "x"));
    cr_assert_eq(ic_graph_output(g, 5), find(g, "add"));
    cr_assert_eq(ic_graph_num_symbols(g), 1);
    cr_assert_str_eq(ic_graph_name(g), "all_ops");
    cr_assert_eq(ic_graph_verify(g), IC_OK);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(json, round_trip_every_op)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *p1 = path_in(dir, "a.json"), *p2 = path_in(dir, "b.json");
    ic_graph *g1 = load_string_ok(c, all_ops_json, NULL);
    save_ok(g1, p1);
    ic_graph *g2 = load_file_ok(c, p1);
    assert_graphs_equal(g1, g2);
    cr_assert_str_eq(ic_graph_source(g2), p1);
    /* saving is canonical: a second save of the reloaded graph is the same text */
    save_ok(g2, p2);
    char *t1 = read_text(p1), *t2 = read_text(p2);
    cr_assert_str_eq(t1, t2);
    ic_graph *g3 = load_file_ok(c, p2);
    assert_graphs_equal(g1, g3);
    char *s1 = print_graph(g1), *s3 = print_graph(g3);
    cr_assert_str_eq(s1, s3);
    /* nothing else (temp files) is left in the folder */
    cr_assert_eq(ict_count_files(dir), 2);
    free(s1), free(s3), free(t1), free(t2);
    ic_graph_destroy(g1), ic_graph_destroy(g2), ic_graph_destroy(g3);
    ict_rmtree(dir);
    free(dir), free(p1), free(p2);
    ic_ctx_destroy(c);
}

/* u8/i8/i16 inputs, a u8 param with data (written to safetensors as U8) and a cast to i16:
 * saved and reloaded, dtypes, names and the param's bytes are the same. */
Test(json, narrow_integer_dtypes_round_trip)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *p1 = path_in(dir, "n.json");
    ic_graph *g1 = load_string_ok(c,
        "{\"ic_graph\": 1, \"name\": \"n\", \"inputs\": [{\"name\": \"a\", \"dtype\": \"u8\", "
        "\"shape\": [3]}, {\"name\": \"b\", \"dtype\": \"i8\", \"shape\": [3], \"range\": [-128, 128]}], "
        "\"nodes\": [{\"name\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]}, {\"name\": \"y\", "
        "\"op\": \"cast\", \"inputs\": [\"s\"], \"attrs\": {\"dtype\": \"i16\"}}], \"outputs\": [\"y\"]}",
        NULL);
    const uint8_t w[3] = { 0, 128, 255 };
    ic_value pw;
    cr_assert_eq(ic_graph_add_param(g1, "w", IC_U8, 1, (ic_dim[]){ ic_dim_const(3) }, w, 3, NULL, NULL, &pw),
                 IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_add_output(g1, pw), IC_OK);
    save_ok(g1, p1);
    char *t = read_text(p1);
    cr_assert(strstr(t, "\"dtype\": \"u8\"") && strstr(t, "\"dtype\": \"i8\"") &&
              strstr(t, "\"dtype\": \"i16\""), "%s", t);
    ic_graph *g2 = load_file_ok(c, p1);
    char *p2 = path_in(dir, "n2.json");
    save_ok(g2, p2); /* canonical: the reloaded graph saves to the same text */
    char *t2 = read_text(p2);
    cr_assert_str_eq(t, t2);
    free(t2), free(p2);
    ic_value v;
    cr_assert(ic_graph_find(g2, "s", &v));
    cr_assert_eq(ict_dtype_of(g2, v), IC_I16); /* u8 + i8 */
    ic_node_info ni;
    cr_assert(ic_graph_find(g2, "w", &v));
    ic_graph_node(g2, v, &ni);
    cr_assert(ni.dtype == IC_U8 && ni.data && memcmp(ni.data, w, 3) == 0);
    free(t);
    ic_graph_destroy(g1), ic_graph_destroy(g2);
    ict_rmtree(dir);
    free(dir), free(p1);
    ic_ctx_destroy(c);
}

Test(json, saved_text_is_the_documented_format)
{
    /* the writer's output is itself a spec-conforming file: spot-check its parts */
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *p = path_in(dir, "s.json");
    ic_graph *g = load_string_ok(c,
        "{\"ic_graph\": 1, \"name\": \"s\", \"inputs\": [{\"name\": \"ids\", \"dtype\": \"i64\", "
        "\"shape\": [\"B\", 128], \"range\": [0, 30522]}], \"nodes\": [{\"name\": \"t\", \"op\": "
        "\"mul\", \"inputs\": [\"ids\", 2]}, {\"name\": \"y\", \"op\": \"sum\", \"inputs\": [\"t\"], "
        "\"attrs\": {\"dims\": [-1], \"keepdim\": true}}], \"outputs\": [\"y\"]}", NULL);
    save_ok(g, p);
    char *t = read_text(p);
    cr_assert(strstr(t, "\"ic_graph\": 1") != NULL, "%s", t);
    cr_assert(strstr(t, "{\"name\": \"ids\", \"dtype\": \"i64\", \"shape\": [\"B\", 128], "
                        "\"range\": [0, 30522]}") != NULL, "%s", t);
    cr_assert(strstr(t, "{\"name\": \"t\", \"op\": \"mul\", \"inputs\": [\"ids\", 2]}") != NULL, "%s", t);
    cr_assert(strstr(t, "\"attrs\": {\"dims\": [-1], \"keepdim\": true}") != NULL, "%s", t);
    cr_assert(strstr(t, "\"outputs\": [\"y\"]") != NULL, "%s", t);
    free(t);
    ic_graph_destroy(g);
    ict_rmtree(dir);
    free(dir), free(p);
    ic_ctx_destroy(c);
}

Test(json, round_trip_of_a_graph_built_in_c)
{
    /* a C-built graph with a 2*B reshape target (not expressible in v1) and in-memory attrs */
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *p = path_in(dir, "built.json");
    ic_graph *g = ict_graph(c, "built");
    ic_dim sh[3], b;
    cr_assert_eq(ic_graph_symbol(g, "B", &b), IC_OK);
    sh[0] = b, sh[1] = ic_dim_const(2), sh[2] = ic_dim_const(3);
    ic_value x, r, e, u, y;
    cr_assert_eq(ic_graph_add_input(g, "x", IC_F32, 3, sh, &x), IC_OK);
    ic_attrs a;
    ic_attrs_init(&a, IC_OP_RESHAPE);
    a.nshape = 2;
    a.shape[0] = (ic_dim){ 2, 1, { b.sym[0] } }; /* 2*B */
    a.shape[1] = ic_dim_const(3);
    cr_assert_eq(ic_graph_add_node(g, "r", IC_OP_RESHAPE, 1, (ic_operand[]){ ic_val(x) }, &a, &r), IC_OK,
                 "%s", ic_last_error(c));
    ic_attrs_init(&a, IC_OP_UNSQUEEZE);
    a.dim = 0;
    cr_assert_eq(ic_graph_add_node(g, "u", IC_OP_UNSQUEEZE, 1, (ic_operand[]){ ic_val(r) }, &a, &u), IC_OK);
    ic_attrs_init(&a, IC_OP_EXPAND);
    a.nshape = 3;
    a.shape[0] = ic_dim_const(5), a.shape[1] = (ic_dim){ 2, 1, { b.sym[0] } }, a.shape[2] = ic_dim_const(3);
    cr_assert_eq(ic_graph_add_node(g, "e", IC_OP_EXPAND, 1, (ic_operand[]){ ic_val(u) }, &a, &e), IC_OK,
                 "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(e), ic_scalar_f(0.25), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    save_ok(g, p);
    ic_graph *g2 = load_file_ok(c, p);
    /* 2*B became -1, which infers the same shapes */
    cr_assert_str_eq(shape_of(g2, "r"), "[2*B, 3]");
    cr_assert_str_eq(shape_of(g2, "e"), "[5, 2*B, 3]");
    cr_assert_str_eq(shape_of(g2, "y"), "[5, 2*B, 3]");
    char *t = read_text(p);
    cr_assert(strstr(t, "\"shape\": [-1, 3]") != NULL, "%s", t);
    cr_assert(strstr(t, "\"shape\": [5, -1, 3]") != NULL, "%s", t);
    free(t);
    ic_graph_destroy(g2);
    ic_graph_destroy(g);
    ict_rmtree(dir);
    free(dir), free(p);
    ic_ctx_destroy(c);
}

Test(json, save_refuses_what_v1_cannot_hold_and_writes_nothing)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *p = path_in(dir, "bad.json");
    /* an input of size 2*B */
    ic_graph *g = ict_graph(c, "g");
    ic_dim b, sh[1];
    ic_value x, y;
    cr_assert_eq(ic_graph_symbol(g, "B", &b), IC_OK);
    sh[0] = (ic_dim){ 2, 1, { b.sym[0] } };
    cr_assert_eq(ic_graph_add_input(g, "x", IC_F32, 1, sh, &x), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(x), ic_scalar_f(NAN), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    ic_status s = ic_graph_save_json(g, p);
    ict_assert_error(c, s, IC_EUNSUPPORTED, "'x'", "2*B", "v1");
    cr_assert_eq(ict_count_files(dir), 0);
    ic_graph_destroy(g);
    /* a NaN scalar */
    g = ict_graph(c, "g");
    sh[0] = ic_dim_const(3);
    cr_assert_eq(ic_graph_add_input(g, "x", IC_F32, 1, sh, &x), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(x), ic_scalar_f(NAN), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    write_text(p, "old");
    s = ic_graph_save_json(g, p);
    ict_assert_error(c, s, IC_EUNSUPPORTED, "'y'", "nan");
    /* the old file is untouched and no temporary is left */
    char *t = read_text(p);
    cr_assert_str_eq(t, "old");
    cr_assert_eq(ict_count_files(dir), 1);
    free(t);
    /* a folder that does not exist */
    char *q = path_in(dir, "nope/g.json");
    ic_graph_destroy(g);
    g = load_string_ok(c, all_ops_json, NULL);
    s = ic_graph_save_json(g, q);
    ict_assert_error(c, s, IC_EIO, "nope/g.json");
    ic_graph_destroy(g);
    ict_rmtree(dir);
    free(dir), free(p), free(q);
    ic_ctx_destroy(c);
}

Test(json, save_replaces_an_existing_file_whole)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *p = path_in(dir, "g.json");
    char big[100000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    write_text(p, big);
    ic_graph *g = load_string_ok(c, all_ops_json, NULL);
    save_ok(g, p);
    ic_graph *g2 = load_file_ok(c, p);
    assert_graphs_equal(g, g2);
    cr_assert_eq(ict_count_files(dir), 1);
    struct stat sb;
    cr_assert_eq(stat(p, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0644, "mode %o", sb.st_mode & 0777);
    ic_graph_destroy(g), ic_graph_destroy(g2);
    ict_rmtree(dir);
    free(dir), free(p);
    ic_ctx_destroy(c);
}

/* ---- golden ---- */

Test(json, golden_seed_pattern)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = load_file_ok(c, IC_SOURCE_DIR "/unittests/golden/seed_pattern.json");
    char *got = print_graph(g), *want = read_text(IC_SOURCE_DIR "/unittests/golden/seed_pattern.expected");
    cr_assert(want != NULL, "missing seed_pattern.expected");
    cr_assert_str_eq(got, want, "ic_graph_print differs from the golden file:\n%s", got);
    free(got), free(want);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* ---- error classes: status, and a message naming the file, the node and the problem ---- */

typedef struct {
    ic_ctx *c;
    char *dir, *path;
} errcase;

static errcase errcase_new(void)
{
    errcase e = { ict_ctx(), tmpdir_new(), NULL };
    e.path = path_in(e.dir, "case.json");
    return e;
}

static void errcase_free(errcase *e)
{
    ict_rmtree(e->dir);
    free(e->dir), free(e->path);
    ic_ctx_destroy(e->c);
}

/* Loads text from case.json and expects status want with a message that names the file,
 * the node (if node is not NULL, as 'node') and contains what. */
static void expect_fail_at(errcase *e, const char *text, ic_status want, const char *node,
                           const char *what, const char *srcfile, int line)
{
    ic_graph *g = (ic_graph *)1;
    write_text(e->path, text);
    ic_status s = ic_graph_load_json(e->c, e->path, &g);
    const char *msg = ic_last_error(e->c);
    cr_assert_eq(s, want, "%s:%d: status %s, want %s; message: %s\nfile: %s", srcfile, line,
                 ic_status_str(s), ic_status_str(want), msg, text);
    cr_assert_null(g, "%s:%d: *out must be NULL on error", srcfile, line);
    cr_assert(strstr(msg, e->path) != NULL, "%s:%d: message does not name the file: %s", srcfile, line, msg);
    if (node) {
        char q[256];
        snprintf(q, sizeof q, "'%s'", node);
        cr_assert(strstr(msg, q) != NULL, "%s:%d: message does not name %s: %s", srcfile, line, q, msg);
    }
    cr_assert(strstr(msg, what) != NULL, "%s:%d: message lacks \"%s\": %s", srcfile, line, what, msg);
}
#define expect_fail(e, text, want, node, what) expect_fail_at(e, text, want, node, what, __FILE__, __LINE__)

/* A graph text around nodes (and extra inputs/params). */
static char *graph_with(const char *inputs, const char *params, const char *nodes, const char *outputs)
{
    char *t = NULL;
    cr_assert(asprintf(&t, "{\"ic_graph\": 1, \"name\": \"g\", \"inputs\": [%s], \"params\": [%s], "
                           "\"nodes\": [%s], \"outputs\": %s}", inputs, params, nodes, outputs) > 0);
    return t;
}

#define X_IN "{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [2, 3]}"

static void expect_node_fail_at(errcase *e, const char *nodes, ic_status want, const char *node,
                                const char *what, int line)
{
    char *t = graph_with(X_IN, "", nodes, "[\"x\"]");
    expect_fail_at(e, t, want, node, what, __FILE__, line);
    free(t);
}
#define expect_node_fail(e, nodes, want, node, what) expect_node_fail_at(e, nodes, want, node, what, __LINE__)

Test(json_errors, version)
{
    errcase e = errcase_new();
    expect_fail(&e, "{\"name\": \"g\", \"outputs\": []}", IC_EFORMAT, NULL, "missing \"ic_graph\" version");
    expect_fail(&e, "{\"ic_graph\": 2, \"outputs\": []}", IC_EFORMAT, NULL, "version 2 is not supported");
    expect_fail(&e, "{\"ic_graph\": 99999999999, \"outputs\": []}", IC_EFORMAT, NULL, "version 99999999999");
    expect_fail(&e, "{\"ic_graph\": \"1\", \"outputs\": []}", IC_EFORMAT, NULL, "must be an integer, not a string");
    expect_fail(&e, "{\"ic_graph\": 1.0, \"outputs\": []}", IC_EFORMAT, NULL, "must be an integer, not a real");
    expect_fail(&e, "{\"ic_graph\": 0, \"outputs\": []}", IC_EFORMAT, NULL, "version 0");
    errcase_free(&e);
}

Test(json_errors, root_and_top_level_types)
{
    errcase e = errcase_new();
    expect_fail(&e, "[1, 2]", IC_EFORMAT, NULL, "top level must be an object, not a list");
    expect_fail(&e, "\"ic_graph\"", IC_EFORMAT, NULL, "top level must be an object, not a string");
    expect_fail(&e, "42", IC_EFORMAT, NULL, "not an integer");
    expect_fail(&e, "{\"ic_graph\": 1, \"name\": 3, \"outputs\": []}", IC_EFORMAT, NULL, "\"name\" must be a non-empty string");
    expect_fail(&e, "{\"ic_graph\": 1, \"name\": \"\", \"outputs\": []}", IC_EFORMAT, NULL, "\"name\" must be a non-empty string");
    expect_fail(&e, "{\"ic_graph\": 1, \"inputs\": {}, \"outputs\": []}", IC_EFORMAT, NULL, "\"inputs\" must be a list, not an object");
    expect_fail(&e, "{\"ic_graph\": 1, \"params\": 1, \"outputs\": []}", IC_EFORMAT, NULL, "\"params\" must be a list, not an integer");
    expect_fail(&e, "{\"ic_graph\": 1, \"nodes\": \"a\", \"outputs\": []}", IC_EFORMAT, NULL, "\"nodes\" must be a list, not a string");
    expect_fail(&e, "{\"ic_graph\": 1, \"output\": [\"x\"]}", IC_EFORMAT, NULL, "unknown key 'output'");
    errcase_free(&e);
}

Test(json_errors, invalid_json_reports_line_and_column)
{
    errcase e = errcase_new();
    /* line 3, after "name": the value is missing */
    expect_fail(&e, "{\n  \"ic_graph\": 1,\n  \"name\": }\n", IC_EFORMAT, NULL, "case.json:3:");
    expect_fail(&e, "{\n  \"ic_graph\": 1,\n  \"name\": }\n", IC_EFORMAT, NULL, "invalid JSON");
    /* truncated in the middle of the nodes list */
    expect_fail(&e, "{\"ic_graph\": 1, \"nodes\": [{\"name\": \"a\", \"op\": \"ne", IC_EFORMAT, NULL, "invalid JSON");
    expect_fail(&e, "", IC_EFORMAT, NULL, "empty");
    expect_fail(&e, " \n\t ", IC_EFORMAT, NULL, "empty");
    expect_fail(&e, "not json at all", IC_EFORMAT, NULL, "case.json:1:");
    expect_fail(&e, "{\"ic_graph\": 1, \"ic_graph\": 1}", IC_EFORMAT, NULL, "duplicate");
    expect_fail(&e, "{\"ic_graph\": 1} trailing", IC_EFORMAT, NULL, "invalid JSON");
    expect_fail(&e, "{\"ic_graph\": 1, \"x\": 99999999999999999999}", IC_EFORMAT, NULL, "invalid JSON");
    errcase_free(&e);
}

Test(json_errors, file_problems)
{
    errcase e = errcase_new();
    ic_graph *g = (ic_graph *)1;
    char *missing = path_in(e.dir, "missing.json");
    ic_status s = ic_graph_load_json(e.c, missing, &g);
    ict_assert_error(e.c, s, IC_EIO, missing, "cannot open");
    cr_assert_null(g);
    g = (ic_graph *)1;
    s = ic_graph_load_json(e.c, e.dir, &g);
    ict_assert_error(e.c, s, IC_EIO, e.dir, "folder");
    cr_assert_null(g);
    free(missing);
    errcase_free(&e);
}

Test(json_errors, wrong_types_in_entries)
{
    errcase e = errcase_new();
    char *t;
    t = graph_with("3", "", "", "[]");
    expect_fail(&e, t, IC_EFORMAT, NULL, "input 0 must be an object, not an integer"), free(t);
    t = graph_with("{\"dtype\": \"f32\", \"shape\": []}", "", "", "[]");
    expect_fail(&e, t, IC_EFORMAT, NULL, "input 0 has no \"name\""), free(t);
    t = graph_with("{\"name\": 7, \"dtype\": \"f32\", \"shape\": []}", "", "", "[]");
    expect_fail(&e, t, IC_EFORMAT, NULL, "input 0: \"name\" must be a string, not an integer"), free(t);
    t = graph_with("{\"name\": \"a\", \"shape\": []}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "missing \"dtype\""), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"f32\"}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "missing \"shape\""), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"float32\", \"shape\": []}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "'float32' is not a dtype"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": 1, \"shape\": []}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "dtype must be a dtype name string, not an integer"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": 3}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "shape must be a list, not an integer"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [2, true]}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "entry 1 must be an integer or a symbol name, not a boolean"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": [2, \"\"]}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "empty symbol name"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"i64\", \"shape\": [], \"range\": 5}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "\"range\" must be a list [lo, hi)"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"i64\", \"shape\": [], \"range\": [0, 1, 2]}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "of 2 integers, not of 3 entries"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"i64\", \"shape\": [], \"range\": [0, 1.5]}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "range hi must be an integer, not a real"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"i64\", \"shape\": [], \"range\": [5, 5]}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EINVAL, "a", "is empty"), free(t);
    t = graph_with("{\"name\": \"a\", \"dtype\": \"i64\", \"shape\": [], \"rnage\": [0, 5]}", "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "unknown key 'rnage'"), free(t);
    t = graph_with("", "{\"name\": \"p\", \"dtype\": \"f32\", \"shape\": [], \"key\": \"k\"}", "", "[\"p\"]");
    expect_fail(&e, t, IC_EFORMAT, "p", "\"key\" is given without \"file\""), free(t);
    t = graph_with("", "{\"name\": \"p\", \"dtype\": \"f32\", \"shape\": [], \"file\": 3}", "", "[\"p\"]");
    expect_fail(&e, t, IC_EFORMAT, "p", "\"file\" must be a non-empty path string, not an integer"), free(t);
    t = graph_with("", "{\"name\": \"p\", \"dtype\": \"f32\", \"shape\": [], \"file\": \"w.st\", \"key\": [1]}", "", "[\"p\"]");
    expect_fail(&e, t, IC_EFORMAT, "p", "\"key\" must be a string, not a list"), free(t);
    /* nodes */
    expect_node_fail(&e, "[\"n\"]", IC_EFORMAT, NULL, "node 0 must be an object, not a list");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": 5, \"inputs\": [\"x\"]}", IC_EFORMAT, "n", "\"op\" must be an op name string, not an integer");
    expect_node_fail(&e, "{\"name\": \"n\", \"inputs\": [\"x\"]}", IC_EFORMAT, "n", "missing \"op\"");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"neg\", \"inputs\": \"x\"}", IC_EFORMAT, "n", "\"inputs\" must be a list, not a string");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"neg\", \"inputs\": [true]}", IC_EFORMAT, "n", "input 0 must be a name, a number or null, not a boolean");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"neg\", \"inputs\": [[\"x\"]]}", IC_EFORMAT, "n", "input 0 must be a name, a number or null, not a list");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"sum\", \"inputs\": [\"x\"], \"attrs\": [1]}", IC_EFORMAT, "n", "\"attrs\" must be an object, not a list");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"sum\", \"inputs\": [\"x\"], \"attr\": {\"dims\": [0]}}", IC_EFORMAT, "n", "unknown key 'attr'");
    errcase_free(&e);
}

Test(json_errors, unknown_op)
{
    errcase e = errcase_new();
    expect_node_fail(&e, "{\"name\": \"t1\", \"op\": \"addd\", \"inputs\": [\"x\", \"x\"]}", IC_EFORMAT, "t1", "unknown op 'addd'");
    expect_node_fail(&e, "{\"name\": \"t1\", \"op\": \"input\", \"inputs\": []}", IC_EFORMAT, "t1", "unknown op 'input'");
    expect_node_fail(&e, "{\"name\": \"t1\", \"op\": \"\", \"inputs\": []}", IC_EFORMAT, "t1", "unknown op ''");
    errcase_free(&e);
}

Test(json_errors, unknown_and_mistyped_attrs)
{
    errcase e = errcase_new();
#define N(op, attrs) "{\"name\": \"n\", \"op\": \"" op "\", \"inputs\": [\"x\"], \"attrs\": " attrs "}"
    expect_node_fail(&e, N("sum", "{\"keepdims\": true}"), IC_EFORMAT, "n", "unknown attr 'keepdims' (sum takes: dims, keepdim)");
    expect_node_fail(&e, N("neg", "{\"dim\": 0}"), IC_EFORMAT, "n", "unknown attr 'dim' (neg takes no attrs)");
    expect_node_fail(&e, N("softmax", "{\"dim\": 0, \"dims\": [0]}"), IC_EFORMAT, "n", "unknown attr 'dims'");
    expect_node_fail(&e, N("sum", "{\"dims\": 1}"), IC_EFORMAT, "n", "attr 'dims' must be a list, not an integer");
    expect_node_fail(&e, N("sum", "{\"dims\": [1.5]}"), IC_EFORMAT, "n", "attr 'dims' must be a list of integers; entry 0 is a real number");
    expect_node_fail(&e, N("sum", "{\"dims\": [\"a\"]}"), IC_EFORMAT, "n", "entry 0 is a string");
    expect_node_fail(&e, N("sum", "{\"dims\": [0,1,0,1,0,1,0,1,0]}"), IC_EFORMAT, "n", "has 9 entries (at most 8)");
    expect_node_fail(&e, N("sum", "{\"keepdim\": \"yes\"}"), IC_EFORMAT, "n", "attr 'keepdim' must be true or false, not a string");
    expect_node_fail(&e, N("sum", "{\"keepdim\": 1}"), IC_EFORMAT, "n", "attr 'keepdim' must be true or false, not an integer");
    expect_node_fail(&e, N("cast", "{\"dtype\": \"float32\"}"), IC_EFORMAT, "n", "attr 'dtype' 'float32' is not a dtype");
    expect_node_fail(&e, N("cast", "{\"dtype\": null}"), IC_EFORMAT, "n", "attr 'dtype' must be a dtype name string, not null");
    expect_node_fail(&e, N("gelu", "{\"approximate\": \"fast\"}"), IC_EFORMAT, "n", "must be \"none\" or \"tanh\", not 'fast'");
    expect_node_fail(&e, N("gelu", "{\"approximate\": true}"), IC_EFORMAT, "n", "must be \"none\" or \"tanh\", not a boolean");
    expect_node_fail(&e, N("leaky_relu", "{\"negative_slope\": \"0.1\"}"), IC_EFORMAT, "n", "attr 'negative_slope' must be a number, not a string");
    expect_node_fail(&e, N("softplus", "{\"beta\": 1, \"thresh\": 5}"), IC_EFORMAT, "n", "unknown attr 'thresh' (softplus takes: beta, threshold)");
    expect_node_fail(&e, N("softmax", "{\"dim\": \"1\"}"), IC_EFORMAT, "n", "attr 'dim' must be an integer, not a string");
    expect_node_fail(&e, N("softmax", "{\"dim\": 1.0}"), IC_EFORMAT, "n", "attr 'dim' must be an integer, not a real");
    expect_node_fail(&e, N("clamp", "{\"min\": \"0\"}"), IC_EFORMAT, "n", "attr 'min' must be a number, not a string");
    expect_node_fail(&e, N("layer_norm", "{\"normalized_shape\": [3], \"eps\": \"small\"}"), IC_EFORMAT, "n", "attr 'eps' must be a number");
    expect_node_fail(&e, N("layer_norm", "{\"normalized_shape\": [-3]}"), IC_EFORMAT, "n", "normalized_shape' entry 0 is -3");
    expect_node_fail(&e, N("reshape", "{\"shape\": [-2, 3]}"), IC_EFORMAT, "n", "only -1 is allowed");
    expect_node_fail(&e, N("reshape", "{\"shape\": [2.0, 3]}"), IC_EFORMAT, "n", "entry 0 is 2, not an integer");
    expect_node_fail(&e, N("slice", "{\"start\": 0.5}"), IC_EFORMAT, "n", "attr 'start' must be an integer");
    expect_node_fail(&e, N("slice", "{\"step\": null}"), IC_EFORMAT, "n", "attr 'step' must be an integer, not null");
    expect_node_fail(&e, N("transpose", "{\"dim0\": 0, \"dim1\": [1]}"), IC_EFORMAT, "n", "attr 'dim1' must be an integer, not a list");
    expect_node_fail(&e, N("permute", "{\"dims\": {\"0\": 1}}"), IC_EFORMAT, "n", "attr 'dims' must be a list, not an object");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"arange\", \"attrs\": {\"end\": \"10\"}}", IC_EFORMAT, "n", "attr 'end' must be a number, not a string");
    /* true/false are numbers 1/0 as in Python (full of bools); a string is not */
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"full\", \"attrs\": {\"value\": \"1\", \"shape\": [2], \"dtype\": \"bool\"}}", IC_EFORMAT, "n", "attr 'value' must be a number, not a string");
    expect_node_fail(&e, "{\"name\": \"n\", \"op\": \"full\", \"attrs\": {\"value\": 1, \"shape\": [-1], \"dtype\": \"f32\"}}", IC_EFORMAT, "n", "sizes cannot be negative");
    /* values the loader accepts but the op refuses: the builder's message, still located */
    expect_node_fail(&e, N("softmax", "{\"dim\": 5}"), IC_EINVAL, "n", "dim 5 is out of range");
    expect_node_fail(&e, N("slice", "{\"step\": 0}"), IC_EINVAL, "n", "step must be positive");
    expect_node_fail(&e, N("layer_norm", "{\"normalized_shape\": [3], \"eps\": -1}"), IC_EINVAL, "n", "eps");
#undef N
    errcase_free(&e);
}

Test(json_errors, missing_required_attrs)
{
    static const struct { const char *op, *attrs, *missing; } cases[] = {
        { "cast", "{}", "dtype" },
        { "argmax", "{\"keepdim\": true}", "dim" },
        { "softmax", "{}", "dim" },
        { "log_softmax", "{}", "dim" },
        { "layer_norm", "{\"eps\": 0.1}", "normalized_shape" },
        { "rms_norm", "{}", "normalized_shape" },
        { "reshape", "{}", "shape" },
        { "permute", "{}", "dims" },
        { "transpose", "{\"dim1\": 0}", "dim0" },
        { "transpose", "{\"dim0\": 0}", "dim1" },
        { "expand", "{}", "shape" },
        { "unsqueeze", "{}", "dim" },
        { "full", "{\"shape\": [2], \"dtype\": \"f32\"}", "value" },
        { "full", "{\"value\": 1, \"dtype\": \"f32\"}", "shape" },
        { "full", "{\"value\": 1, \"shape\": [2]}", "dtype" },
        { "arange", "{\"start\": 1}", "end" },
    };
    errcase e = errcase_new();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char node[256], what[64];
        bool create = !strcmp(cases[i].op, "full") || !strcmp(cases[i].op, "arange");
        snprintf(node, sizeof node, "{\"name\": \"n%zu\", \"op\": \"%s\", \"inputs\": %s, \"attrs\": %s}",
                 i, cases[i].op, create ? "[]" : "[\"x\"]", cases[i].attrs);
        snprintf(what, sizeof what, "missing required attr '%s'", cases[i].missing);
        char nm[16];
        snprintf(nm, sizeof nm, "n%zu", i);
        expect_node_fail(&e, node, IC_EFORMAT, nm, what);
    }
    /* no "attrs" at all is the same */
    expect_node_fail(&e, "{\"name\": \"c\", \"op\": \"cast\", \"inputs\": [\"x\"]}", IC_EFORMAT, "c", "missing required attr 'dtype'");
    errcase_free(&e);
}

Test(json_errors, names_used_before_definition)
{
    errcase e = errcase_new();
    expect_node_fail(&e, "{\"name\": \"a\", \"op\": \"neg\", \"inputs\": [\"b\"]},"
                         "{\"name\": \"b\", \"op\": \"neg\", \"inputs\": [\"x\"]}",
                     IC_EFORMAT, "a", "input 0 'b' is defined later");
    expect_node_fail(&e, "{\"name\": \"a\", \"op\": \"add\", \"inputs\": [\"x\", \"a\"]}",
                     IC_EFORMAT, "a", "input 1 refers to the node itself");
    /* a two-node cycle */
    expect_node_fail(&e, "{\"name\": \"a\", \"op\": \"add\", \"inputs\": [\"x\", \"b\"]},"
                         "{\"name\": \"b\", \"op\": \"add\", \"inputs\": [\"x\", \"a\"]}",
                     IC_EFORMAT, "a", "cycle");
    expect_node_fail(&e, "{\"name\": \"a\", \"op\": \"neg\", \"inputs\": [\"ghost\"]}",
                     IC_EFORMAT, "a", "input 0 'ghost' is not defined");
    errcase_free(&e);
}

Test(json_errors, names_defined_twice)
{
    errcase e = errcase_new();
    expect_node_fail(&e, "{\"name\": \"a\", \"op\": \"neg\", \"inputs\": [\"x\"]},"
                         "{\"name\": \"a\", \"op\": \"abs\", \"inputs\": [\"x\"]}",
                     IC_EINVAL, "a", "defined twice");
    expect_node_fail(&e, "{\"name\": \"x\", \"op\": \"neg\", \"inputs\": [\"x\"]}", IC_EINVAL, "x", "defined twice");
    char *t = graph_with(X_IN, "{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [2, 3]}", "", "[\"x\"]");
    expect_fail(&e, t, IC_EINVAL, "x", "defined twice"), free(t);
    t = graph_with(X_IN "," X_IN, "", "", "[\"x\"]");
    expect_fail(&e, t, IC_EINVAL, "x", "defined twice"), free(t);
    errcase_free(&e);
}

Test(json_errors, bad_shapes)
{
    errcase e = errcase_new();
    char *t;
#define IN(shape) "{\"name\": \"a\", \"dtype\": \"f32\", \"shape\": " shape "}"
    t = graph_with(IN("[2, -3]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "entry 1 is -3; sizes cannot be negative"), free(t);
    t = graph_with(IN("[1e30]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "not an integer"), free(t);
    t = graph_with(IN("[2.5, 3]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "entry 0 is 2.5, not an integer"), free(t);
    t = graph_with(IN("[9223372036854775807, 2]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_ESHAPE, "a", "element count overflows"), free(t);
    t = graph_with(IN("[9223372036854775807]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_ESHAPE, "a", "overflows"), free(t);
    t = graph_with(IN("[4294967296, 4294967296, 4294967296]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_ESHAPE, "a", "element count overflows"), free(t);
    t = graph_with(IN("[1,1,1,1,1,1,1,1,1]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, "a", "shape has 9 entries (at most 8)"), free(t);
    t = graph_with(IN("[9223372036854775808]"), "", "", "[\"a\"]");
    expect_fail(&e, t, IC_EFORMAT, NULL, "invalid JSON"), free(t);
    /* huge sizes inside ops: the builder refuses them with the node's name */
    t = graph_with(X_IN, "", "{\"name\": \"f\", \"op\": \"full\", \"attrs\": {\"value\": 0, "
                   "\"shape\": [4294967296, 4294967296, 4], \"dtype\": \"f32\"}}", "[\"f\"]");
    expect_fail(&e, t, IC_ESHAPE, "f", "overflows"), free(t);
    t = graph_with(X_IN, "", "{\"name\": \"r\", \"op\": \"reshape\", \"inputs\": [\"x\"], \"attrs\": "
                   "{\"shape\": [9223372036854775807, 2]}}", "[\"r\"]");
    expect_fail(&e, t, IC_ESHAPE, "r", "overflows"), free(t);
    t = graph_with(X_IN, "", "{\"name\": \"r\", \"op\": \"reshape\", \"inputs\": [\"x\"], \"attrs\": "
                   "{\"shape\": [4, 2]}}", "[\"r\"]");
    expect_fail(&e, t, IC_ESHAPE, "r", "shape [4, 2] is invalid for input [2, 3]"), free(t);
#undef IN
    errcase_free(&e);
}

Test(json_errors, builder_errors_name_the_file_and_node)
{
    errcase e = errcase_new();
    char *t = graph_with(X_IN ", {\"name\": \"z\", \"dtype\": \"f32\", \"shape\": [4, 3]}", "",
                         "{\"name\": \"t1\", \"op\": \"add\", \"inputs\": [\"x\", \"z\"]}", "[\"t1\"]");
    expect_fail(&e, t, IC_ESHAPE, "t1", "[2, 3] and [4, 3] cannot be broadcast"), free(t);
    t = graph_with(X_IN ", {\"name\": \"k\", \"dtype\": \"i64\", \"shape\": [3]}", "",
                   "{\"name\": \"mm\", \"op\": \"mean\", \"inputs\": [\"k\"]}", "[\"mm\"]");
    expect_fail(&e, t, IC_EDTYPE, "mm", "floating-point"), free(t);
    expect_node_fail(&e, "{\"name\": \"t2\", \"op\": \"add\", \"inputs\": [\"x\", \"x\", \"x\"]}", IC_EINVAL, "t2", "takes 2 inputs, got 3");
    expect_node_fail(&e, "{\"name\": \"t3\", \"op\": \"matmul\", \"inputs\": [\"x\", \"x\"]}", IC_ESHAPE, "t3", "inner dims differ");
    expect_node_fail(&e, "{\"name\": \"t4\", \"op\": \"add\", \"inputs\": [\"x\", null]}", IC_EINVAL, "t4", "input 1 is null");
    /* 65 operands for cat: more than a node can hold */
    char nodes[2048] = "{\"name\": \"c\", \"op\": \"cat\", \"inputs\": [\"x\"";
    for (int i = 0; i < 64; i++)
        strcat(nodes, ", \"x\"");
    strcat(nodes, "]}");
    expect_node_fail(&e, nodes, IC_EFORMAT, "c", "has 65 entries (at most 64)");
    errcase_free(&e);
}

Test(json_errors, outputs)
{
    errcase e = errcase_new();
    char *t = graph_with(X_IN, "", "", "[\"y\"]");
    expect_fail(&e, t, IC_EFORMAT, NULL, "output 0 'y' is not defined"), free(t);
    t = graph_with(X_IN, "", "", "[\"x\", 3]");
    expect_fail(&e, t, IC_EFORMAT, NULL, "output 1 must be a name, not an integer"), free(t);
    t = graph_with(X_IN, "", "", "\"x\"");
    expect_fail(&e, t, IC_EFORMAT, NULL, "\"outputs\" must be a list of names, not a string"), free(t);
    t = graph_with(X_IN, "", "", "[]");
    expect_fail(&e, t, IC_EINVAL, NULL, "no outputs"), free(t);
    expect_fail(&e, "{\"ic_graph\": 1, \"inputs\": [" X_IN "]}", IC_EFORMAT, NULL, "missing \"outputs\"");
    errcase_free(&e);
}

Test(json_errors, string_loads_name_the_string)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = (ic_graph *)1;
    ic_status s = ic_graph_load_json_string(c, "{\"ic_graph\": 1, \"nodes\": [{\"name\": \"q\", "
                                           "\"op\": \"nope\"}], \"outputs\": []}", NULL, &g);
    ict_assert_error(c, s, IC_EFORMAT, "<string>", "'q'", "unknown op 'nope'");
    cr_assert_null(g);
    g = (ic_graph *)1;
    s = ic_graph_load_json_string(c, NULL, NULL, &g);
    cr_assert_eq(s, IC_EINVAL);
    cr_assert_null(g);
    ic_ctx_destroy(c);
}

/* ---- the malformed-file corpus ---- */

/* Every corpus file with a phrase its message must contain (so each file is refused for
 * the reason it was written for, not for an accident). */
static const struct { const char *file, *phrase; } corpus[] = {
    { "empty.json", "empty" },
    { "whitespace.json", "empty" },
    { "not_json.json", "invalid JSON" },
    { "truncated.json", "invalid JSON" },
    { "truncated_string.json", "invalid JSON" },
    { "trailing_garbage.json", "invalid JSON" },
    { "nul_byte.json", "invalid JSON" },
    { "invalid_utf8.json", "invalid JSON" },
    { "deep_nesting.json", "invalid JSON" },
    { "duplicate_key.json", "duplicate" },
    { "too_big_integer.json", "invalid JSON" },
    { "root_array.json", "top level must be an object" },
    { "root_string.json", "top level must be an object" },
    { "no_version.json", "missing \"ic_graph\" version" },
    { "bad_version.json", "version 2 is not supported" },
    { "version_string.json", "must be an integer" },
    { "version_real.json", "must be an integer" },
    { "unknown_top_key.json", "unknown key 'output'" },
    { "inputs_not_list.json", "\"inputs\" must be a list" },
    { "node_not_object.json", "node 0 must be an object" },
    { "name_empty.json", "node 0 has an empty \"name\"" },
    { "unknown_op.json", "unknown op 'addd'" },
    { "unknown_attr.json", "unknown attr 'keepdims'" },
    { "dims_not_list.json", "attr 'dims' must be a list" },
    { "dims_real.json", "must be a list of integers" },
    { "keepdim_not_bool.json", "must be true or false" },
    { "bad_dtype_name.json", "'float32' is not a dtype" },
    { "approximate_bad.json", "\"none\" or \"tanh\"" },
    { "missing_required_attr.json", "missing required attr 'dim'" },
    { "scalar_bool_operand.json", "must be a name, a number or null" },
    { "forward_ref.json", "is defined later" },
    { "self_ref.json", "refers to the node itself" },
    { "cycle.json", "cycle" },
    { "undefined_name.json", "is not defined" },
    { "duplicate_node.json", "defined twice" },
    { "duplicate_input_param.json", "defined twice" },
    { "negative_dim.json", "sizes cannot be negative" },
    { "huge_dim_real.json", "not an integer" },
    { "int64_max_dim.json", "overflows" },
    { "overflow_dims.json", "overflows" },
    { "non_integer_dim.json", "not an integer" },
    { "rank9.json", "at most 8" },
    { "shape_mismatch.json", "cannot be broadcast" },
    { "wrong_arity.json", "takes 2 inputs, got 3" },
    { "mean_of_int.json", "floating-point" },
    { "output_unknown.json", "output 0 'nothing' is not defined" },
    { "outputs_missing.json", "missing \"outputs\"" },
    { "outputs_empty.json", "no outputs" },
    { "param_file_missing.json", "'w'" },
    { "param_symbolic_with_file.json", "needs a fixed shape" },
    { "full_huge.json", "overflows" },
};

static const char *corpus_phrase(const char *file)
{
    for (size_t i = 0; i < sizeof corpus / sizeof corpus[0]; i++)
        if (!strcmp(corpus[i].file, file))
            return corpus[i].phrase;
    return NULL;
}

Test(json, malformed_corpus)
{
    const char *dir = IC_SOURCE_DIR "/unittests/data/json";
    DIR *d = opendir(dir);
    cr_assert(d != NULL, "cannot open %s", dir);
    ic_ctx *c = ict_ctx();
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        const char *phrase = corpus_phrase(e->d_name);
        cr_assert(phrase != NULL, "corpus file %s has no entry in the test's table", e->d_name);
        ic_graph *g = (ic_graph *)1;
        ic_status s = ic_graph_load_json(c, path, &g);
        const char *msg = ic_last_error(c);
        cr_expect_neq(s, IC_OK, "%s loaded", e->d_name);
        cr_expect_null(g, "%s: *out is not NULL", e->d_name);
        cr_expect(msg[0] != 0, "%s: empty message", e->d_name);
        cr_expect(strstr(msg, e->d_name) != NULL, "%s: message does not name the file: %s", e->d_name, msg);
        cr_expect(strstr(msg, phrase) != NULL, "%s: message lacks \"%s\": %s", e->d_name, phrase, msg);
        if (s == IC_OK)
            ic_graph_destroy(g);
        n++;
    }
    closedir(d);
    cr_assert_eq(n, (int)(sizeof corpus / sizeof corpus[0]), "corpus has %d files, the table %zu",
                 n, sizeof corpus / sizeof corpus[0]);
    cr_assert_geq(n, 25);
    ic_ctx_destroy(c);
}

/* ---- mutation fuzz: nothing may crash, every result is OK or an error with a message ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 33;
}

static void mutate(char *buf, size_t *n, size_t cap, uint64_t *rs)
{
    static const char interesting[] = "{}[],:\"0123456789-+.eE ntfalsrue\\/x";
    int k = 1 + (int)(rng_next(rs) % 4);
    for (int m = 0; m < k && *n > 0; m++) {
        size_t at = rng_next(rs) % *n;
        switch (rng_next(rs) % 6) {
        case 0: /* replace a byte with a JSON-ish character */
            buf[at] = interesting[rng_next(rs) % (sizeof interesting - 1)];
            break;
        case 1: /* any byte at all */
            buf[at] = (char)(rng_next(rs) & 0xff);
            break;
        case 2: { /* delete a short run */
            size_t len = 1 + rng_next(rs) % 8;
            if (at + len > *n)
                len = *n - at;
            memmove(buf + at, buf + at + len, *n - at - len);
            *n -= len;
            break;
        }
        case 3: { /* duplicate a short run */
            size_t len = 1 + rng_next(rs) % 16;
            if (at + len > *n)
                len = *n - at;
            if (*n + len < cap) {
                memmove(buf + at + len, buf + at, *n - at);
                *n += len;
            }
            break;
        }
        case 4: /* truncate */
            *n = at;
            break;
        default: { /* swap a digit for a huge or negative number */
            static const char *nums[] = { "-1", "9223372036854775807", "1e30", "-0", "4294967296", "0.5" };
            const char *s = nums[rng_next(rs) % 6];
            size_t len = strlen(s);
            if (*n + len < cap) {
                memmove(buf + at + len, buf + at + 1, *n - at - 1);
                memcpy(buf + at, s, len);
                *n += len - 1;
            }
        }
        }
    }
    buf[*n] = 0;
}

Test(json, mutation_fuzz)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *p = path_in(dir, "fz.json");
    size_t len = strlen(all_ops_json), cap = len * 2 + 64;
    char *buf = malloc(cap);
    cr_assert(buf != NULL);
    uint64_t rs = 12345;
    int ok = 0, failed = 0, resaved = 0;
    for (int i = 0; i < 4000; i++) {
        size_t n = len;
        memcpy(buf, all_ops_json, len + 1);
        mutate(buf, &n, cap, &rs);
        ic_graph *g = (ic_graph *)1;
        ic_clear_error(c);
        ic_status s = ic_graph_load_json_string(c, buf, NULL, &g);
        if (s != IC_OK) {
            cr_assert_null(g, "mutant %d: *out not NULL on error", i);
            cr_assert(ic_last_error(c)[0], "mutant %d: error %s without a message", i, ic_status_str(s));
            failed++;
            continue;
        }
        cr_assert(g != NULL);
        cr_assert_eq(ic_graph_verify(g), IC_OK, "mutant %d: %s", i, ic_last_error(c));
        ok++;
        /* whatever loads must survive a round trip unchanged */
        if (ic_graph_save_json(g, p) == IC_OK) {
            ic_graph *g2 = load_file_ok(c, p);
            assert_graphs_equal(g, g2);
            ic_graph_destroy(g2);
            resaved++;
        }
        ic_graph_destroy(g);
    }
    cr_log_info("mutation fuzz: %d loaded (%d round-tripped), %d refused", ok, resaved, failed);
    cr_assert_gt(failed, 1000, "the mutations should break most texts");
    cr_assert_gt(ok, 10, "some mutations (e.g. in numbers) should still load");
    cr_assert_eq(ok, resaved, "every graph that loads must save");
    free(buf);
    ict_rmtree(dir);
    free(dir), free(p);
    ic_ctx_destroy(c);
}

/* ---- params from safetensors files (need lib/Graph/safetensors.c) ---- */

static void make_weights(const char *path)
{
    ic_ctx *c = ict_ctx();
    static float w[6] = { 1, 2, 3, 4, 5, 6 };
    static float b[3] = { 0.5f, -0.5f, 0.25f };
    static int64_t ids[2] = { 7, -7 };
    ic_tensor t[3];
    ic_tensor_init(&t[0], IC_F32, 2, (int64_t[]){ 2, 3 }, w);
    ic_tensor_init(&t[1], IC_F32, 1, (int64_t[]){ 3 }, b);
    ic_tensor_init(&t[2], IC_I64, 1, (int64_t[]){ 2 }, ids);
    const char *names[3] = { "fc.weight", "bias", "ids" };
    ic_status s = ic_safetensors_save(c, path, 3, names, t);
    cr_assert_eq(s, IC_OK, "ic_safetensors_save: %s", ic_last_error(c));
    ic_ctx_destroy(c);
}

static const char *weights_graph =
    "{\"ic_graph\": 1, \"name\": \"fc\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"N\", 3]}],\n"
    " \"params\": [\n"
    "  {\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [2, 3], \"file\": \"w.safetensors\", \"key\": \"fc.weight\"},\n"
    "  {\"name\": \"bias\", \"dtype\": \"f32\", \"shape\": [3], \"file\": \"w.safetensors\"},\n"
    "  {\"name\": \"late\", \"dtype\": \"f32\", \"shape\": [3]}],\n"
    " \"nodes\": [{\"name\": \"xb\", \"op\": \"add\", \"inputs\": [\"x\", \"bias\"]},\n"
    "            {\"name\": \"y\", \"op\": \"linear\", \"inputs\": [\"xb\", \"w\"]},\n"
    "            {\"name\": \"z\", \"op\": \"mul\", \"inputs\": [\"xb\", \"late\"]}],\n"
    " \"outputs\": [\"y\", \"z\"]}\n";

static void assert_weights(const ic_graph *g)
{
    ic_node_info in;
    ic_graph_node(g, find(g, "w"), &in);
    cr_assert(in.data != NULL, "w has no data");
    const float *w = in.data;
    for (int i = 0; i < 6; i++)
        cr_assert_eq(w[i], (float)(i + 1), "w[%d] = %g", i, w[i]);
    ic_graph_node(g, find(g, "bias"), &in);
    cr_assert(in.data != NULL);
    const float *b = in.data;
    cr_assert(b[0] == 0.5f && b[1] == -0.5f && b[2] == 0.25f, "bias = %g %g %g", b[0], b[1], b[2]);
    ic_graph_node(g, find(g, "late"), &in);
    cr_assert_null(in.data);
    /* only x and the run-time param are arguments */
    cr_assert_eq(ic_graph_num_args(g), 2);
}

Test(json_params, read_from_safetensors_without_copying)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *gp = path_in(dir, "fc.json"), *wp = path_in(dir, "w.safetensors");
    make_weights(wp);
    write_text(gp, weights_graph);
    ic_graph *g = load_file_ok(c, gp);
    assert_weights(g);
    ic_node_info in;
    ic_graph_node(g, find(g, "w"), &in);
    cr_assert_str_eq(in.file, "w.safetensors");
    cr_assert_str_eq(in.key, "fc.weight");
    ic_graph_node(g, find(g, "bias"), &in);
    cr_assert_str_eq(in.key, "bias"); /* key defaults to the param's name */
    /* one mapping for both params, owned by the graph; the data points into it */
    cr_assert_eq(g->nowned, 1);
    ic_safetensors *st;
    cr_assert_eq(ic_safetensors_open(c, wp, &st), IC_OK);
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(st, "bias", &t), IC_OK);
    cr_assert_eq(memcmp(t.data, in.data, 12), 0);
    ic_safetensors_close(st);
    ic_graph_destroy(g);
    ict_rmtree(dir);
    free(dir), free(gp), free(wp);
    ic_ctx_destroy(c);
}

Test(json_params, string_load_resolves_files_against_dir)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *wp = path_in(dir, "w.safetensors");
    make_weights(wp);
    ic_graph *g = load_string_ok(c, weights_graph, dir);
    assert_weights(g);
    ic_node_info in;
    ic_graph_node(g, find(g, "w"), &in);
    cr_assert_str_eq(in.file, wp);
    ic_graph_destroy(g);
    ict_rmtree(dir);
    free(dir), free(wp);
    ic_ctx_destroy(c);
}

Test(json_params, mismatches_are_refused_with_both_sides)
{
    errcase e = errcase_new();
    char *wp = path_in(e.dir, "w.safetensors");
    make_weights(wp);
#define P(decl) "{\"ic_graph\": 1, \"params\": [" decl "], \"outputs\": [\"w\"]}"
    expect_fail(&e, P("{\"name\": \"w\", \"dtype\": \"f64\", \"shape\": [2, 3], \"file\": \"w.safetensors\", \"key\": \"fc.weight\"}"),
                IC_EFORMAT, "w", "tensor 'fc.weight' in '");
    expect_fail(&e, P("{\"name\": \"w\", \"dtype\": \"f64\", \"shape\": [2, 3], \"file\": \"w.safetensors\", \"key\": \"fc.weight\"}"),
                IC_EFORMAT, "w", "is f32 [2, 3], the param is declared f64 [2, 3]");
    expect_fail(&e, P("{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [3, 2], \"file\": \"w.safetensors\", \"key\": \"fc.weight\"}"),
                IC_EFORMAT, "w", "is f32 [2, 3], the param is declared f32 [3, 2]");
    expect_fail(&e, P("{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [6], \"file\": \"w.safetensors\", \"key\": \"fc.weight\"}"),
                IC_EFORMAT, "w", "the param is declared f32 [6]");
    expect_fail(&e, P("{\"name\": \"w\", \"dtype\": \"i64\", \"shape\": [3], \"file\": \"w.safetensors\", \"key\": \"ids\"}"),
                IC_EFORMAT, "w", "is i64 [2], the param is declared i64 [3]");
    {
        ic_graph *g = (ic_graph *)1;
        write_text(e.path, P("{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [2, 3], \"file\": \"w.safetensors\", \"key\": \"nope\"}"));
        ic_status s = ic_graph_load_json(e.c, e.path, &g);
        cr_assert_neq(s, IC_OK);
        cr_assert_null(g);
        const char *msg = ic_last_error(e.c);
        cr_assert(strstr(msg, e.path) && strstr(msg, "'w'") && strstr(msg, "nope"), "%s", msg);
    }
    {
        ic_graph *g = (ic_graph *)1;
        write_text(e.path, P("{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [2, 3], \"file\": \"other.safetensors\"}"));
        ic_status s = ic_graph_load_json(e.c, e.path, &g);
        cr_assert_neq(s, IC_OK);
        cr_assert_null(g);
        const char *msg = ic_last_error(e.c);
        cr_assert(strstr(msg, e.path) && strstr(msg, "'w'") && strstr(msg, "other.safetensors"), "%s", msg);
    }
    /* a corrupt weights file */
    char *bad = path_in(e.dir, "bad.safetensors");
    ict_write_file(bad, "\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":", 13);
    {
        ic_graph *g = (ic_graph *)1;
        write_text(e.path, P("{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [2, 3], \"file\": \"bad.safetensors\"}"));
        ic_status s = ic_graph_load_json(e.c, e.path, &g);
        cr_assert_neq(s, IC_OK);
        cr_assert_null(g);
        const char *msg = ic_last_error(e.c);
        cr_assert(strstr(msg, e.path) && strstr(msg, "'w'") && strstr(msg, "bad.safetensors"), "%s", msg);
    }
    /* a later error after a file was opened: nothing half-loaded, the mapping is closed */
    expect_fail(&e, "{\"ic_graph\": 1, \"params\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [2, 3], "
                    "\"file\": \"w.safetensors\", \"key\": \"fc.weight\"}], \"nodes\": [{\"name\": \"k\", "
                    "\"op\": \"nope\"}], \"outputs\": [\"w\"]}", IC_EFORMAT, "k", "unknown op");
#undef P
    free(wp), free(bad);
    errcase_free(&e);
}

Test(json_params, symbolic_shape_with_file_is_refused)
{
    errcase e = errcase_new();
    expect_fail(&e, "{\"ic_graph\": 1, \"params\": [{\"name\": \"w\", \"dtype\": \"f32\", \"shape\": [\"N\", 3], "
                    "\"file\": \"w.safetensors\"}], \"outputs\": [\"w\"]}",
                IC_EFORMAT, "w", "needs a fixed shape; dim 0 is the symbol 'N'");
    errcase_free(&e);
}

Test(json_params, save_keeps_files_resolvable)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *other = tmpdir_new();
    char *gp = path_in(dir, "fc.json"), *wp = path_in(dir, "w.safetensors");
    char *same = path_in(dir, "copy.json"), *far = path_in(other, "far.json");
    make_weights(wp);
    write_text(gp, weights_graph);
    ic_graph *g = load_file_ok(c, gp);
    /* same folder: the path stays relative */
    save_ok(g, same);
    char *t = read_text(same);
    cr_assert(strstr(t, "\"file\": \"w.safetensors\", \"key\": \"fc.weight\"") != NULL, "%s", t);
    free(t);
    ic_graph *g2 = load_file_ok(c, same);
    assert_graphs_equal(g, g2);
    assert_weights(g2);
    /* another folder: an absolute path to the same file */
    save_ok(g2, far);
    t = read_text(far);
    char want[4200], real[4096];
    cr_assert(realpath(wp, real) != NULL);
    snprintf(want, sizeof want, "\"file\": \"%s\"", real);
    cr_assert(strstr(t, want) != NULL, "want %s in\n%s", want, t);
    free(t);
    ic_graph *g3 = load_file_ok(c, far);
    assert_graphs_equal(g, g3);
    assert_weights(g3);
    /* no weights file was written beside either copy */
    cr_assert_eq(ict_count_files(other), 1);
    cr_assert_eq(ict_count_files(dir), 3);
    ic_graph_destroy(g), ic_graph_destroy(g2), ic_graph_destroy(g3);
    ict_rmtree(dir), ict_rmtree(other);
    free(dir), free(other), free(gp), free(wp), free(same), free(far);
    ic_ctx_destroy(c);
}

Test(json_params, in_memory_params_are_written_beside)
{
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *gp = path_in(dir, "mem.json"), *sp = path_in(dir, "mem.safetensors");
    ic_graph *g = ict_graph(c, "mem");
    double wd[4] = { 1.5, -2, 3.25, 1e-300 };
    uint16_t hd[3] = { 0x3c00, 0xc000, 0x7bff };
    ic_dim s22[2] = { ic_dim_const(2), ic_dim_const(2) }, s3[1] = { ic_dim_const(3) }, sx[2];
    ic_value w, h, x, y, z;
    /* inputs first: the file lists inputs before params, so a reload has this order */
    cr_assert_eq(ic_graph_symbol(g, "B", &sx[0]), IC_OK);
    sx[1] = ic_dim_const(2);
    cr_assert_eq(ic_graph_add_input(g, "x", IC_F64, 2, sx, &x), IC_OK);
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F64, 2, s22, wd, sizeof wd, NULL, NULL, &w), IC_OK);
    cr_assert_eq(ic_graph_add_param(g, "h", IC_F16, 1, s3, hd, sizeof hd, NULL, NULL, &h), IC_OK);
    cr_assert_eq(ic_graph_add_node(g, "y", IC_OP_MATMUL, 2, (ic_operand[]){ ic_val(x), ic_val(w) }, NULL, &y), IC_OK);
    cr_assert_eq(ic_graph_unary(g, "z", IC_OP_NEG, ic_val(h), &z), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, z), IC_OK);
    save_ok(g, gp);
    char *t = read_text(gp);
    cr_assert(strstr(t, "\"file\": \"mem.safetensors\", \"key\": \"w\"") != NULL, "%s", t);
    free(t);
    ic_safetensors *st;
    cr_assert_eq(ic_safetensors_open(c, sp, &st), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_safetensors_count(st), 2);
    ic_safetensors_close(st);
    ic_graph *g2 = load_file_ok(c, gp);
    assert_graphs_equal(g, g2);
    ic_graph_destroy(g2);
    cr_assert_eq(ict_count_files(dir), 2);
    ic_graph_destroy(g);
    ict_rmtree(dir);
    free(dir), free(gp), free(sp);
    ic_ctx_destroy(c);
}

Test(json_params, save_never_overwrites_a_weights_file_in_use)
{
    /* the weights beside "m.json" would be "m.safetensors", which a param reads from */
    ic_ctx *c = ict_ctx();
    char *dir = tmpdir_new(), *gp = path_in(dir, "m.json"), *sp = path_in(dir, "m.safetensors");
    write_text(sp, "precious");
    ic_graph *g = ict_graph(c, "m");
    float a[2] = { 1, 2 }, b[2] = { 3, 4 };
    ic_dim s2[1] = { ic_dim_const(2) };
    ic_value pa, pb, y;
    cr_assert_eq(ic_graph_add_param(g, "a", IC_F32, 1, s2, a, sizeof a, sp, "a", &pa), IC_OK);
    cr_assert_eq(ic_graph_add_param(g, "b", IC_F32, 1, s2, b, sizeof b, NULL, NULL, &pb), IC_OK);
    cr_assert_eq(ic_graph_binary(g, "y", IC_OP_ADD, ic_val(pa), ic_val(pb), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    ic_status s = ic_graph_save_json(g, gp);
    ict_assert_error(c, s, IC_EINVAL, "'a'", "m.safetensors", "refusing");
    char *t = read_text(sp);
    cr_assert_str_eq(t, "precious");
    free(t);
    cr_assert_eq(ict_count_files(dir), 1);
    /* nor the graph file onto the weights file */
    s = ic_graph_save_json(g, sp);
    ict_assert_error(c, s, IC_EINVAL, "'a'", "refusing");
    ic_graph_destroy(g);
    ict_rmtree(dir);
    free(dir), free(gp), free(sp);
    ic_ctx_destroy(c);
}
