/* test_backend_ops.c - every graph op of ops.def on every backend, after ggml's
 * test-backend-ops: for each op a one-node graph is generated from its kind (one small hint
 * per op says the inputs, attrs and value ranges it needs), run by the reference executor
 * (the oracle), and by the loop-IR interpreter, the CPU JIT (fused and unfused) and the PTX
 * emulator, each compared with the reference: NMSE for floats, exact for integers and bool,
 * non-finite values in the same places. An op of ops.def without a hint fails the test, so a
 * new op cannot be left out. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/lower.h"
#include "ic/ptx.h"

/* One op's graph. inputs: space-separated "dtype:shape[:lo:hi[:nz]]" where dtype T is each
 * of `dtypes` in turn, shape is comma-separated (empty: a scalar), lo..hi the value range
 * (default -2..2; integers take [lo, hi)), nz keeps values away from zero. NULL inputs: by
 * kind (unary "T:4,33", binary "T:4,33 T:33", ternary "bool:4,33 T:4,33 T:33", reduce
 * "T:4,33"). attrs: the node's JSON "attrs" object, NULL for none. */
typedef struct {
    const char *op;
    const char *dtypes;   /* NULL = "f32" */
    const char *inputs;
    const char *attrs;
} op_hint;

static const op_hint HINTS[] = {
    { "neg", "f32 i32 u8 i8", NULL, NULL },
    { "abs", "f32 i64 i8 i16", NULL, NULL },
    { "exp", "f32 bf16", "T:4,33:-4:4", NULL },
    { "log", NULL, "T:4,33:0.1:4", NULL },
    { "sqrt", NULL, "T:4,33:0.1:4", NULL },
    { "rsqrt", NULL, "T:4,33:0.1:4", NULL },
    { "sin", NULL, "T:4,33:-4:4", NULL },
    { "cos", NULL, "T:4,33:-4:4", NULL },
    { "tanh", NULL, "T:4,33:-4:4", NULL },
    { "sigmoid", NULL, "T:4,33:-6:6", NULL },
    { "relu", "f32 i32 i8", NULL, NULL },
    { "silu", NULL, "T:4,33:-6:6", NULL },
    { "erf", NULL, NULL, NULL },
    { "reciprocal", NULL, "T:4,33:0.5:4", NULL },
    { "floor", "f32 f64", "T:4,33:-4:4", NULL },
    { "ceil", "f32 f64", "T:4,33:-4:4", NULL },
    { "logical_not", "f32 bool", NULL, NULL },
    { "gelu", NULL, "T:4,33:-4:4", "{\"approximate\": \"tanh\"}" },
    { "clamp", "f32 i32 u8 i16", NULL, "{\"min\": -1, \"max\": 1}" },
    { "cast", "f32 u8 i8", "T:4,33:-4:4", "{\"dtype\": \"i16\"}" },
    { "add", "f32 i32 f16 u8 i8 i16", NULL, NULL },
    { "sub", "f32 i64 u8", NULL, NULL },
    { "mul", "f32 i32 i8 i16", NULL, NULL },
    { "div", "f32 u8 i16", "T:4,33 T:33:-2:2:nz", NULL },
    { "pow", NULL, "T:4,33:0.1:2 T:33:-2:2", NULL },
    { "maximum", "f32 u8 i8", NULL, NULL },
    { "minimum", "f32 i16", NULL, NULL },
    { "eq", "f32 i32 u8", NULL, NULL },
    { "ne", "f32 i32", NULL, NULL },
    { "lt", "f32 i32 i8", NULL, NULL },
    { "le", NULL, NULL, NULL },
    { "gt", "f32 u8", NULL, NULL },
    { "ge", NULL, NULL, NULL },
    { "logical_and", "bool", NULL, NULL },
    { "logical_or", "bool", NULL, NULL },
    { "where", "f32 u8 i16", NULL, NULL },
    { "sum", "f32 i64 u8 i8", NULL, "{\"dims\": [1]}" },
    { "mean", NULL, NULL, "{\"dims\": [0]}" },
    { "amax", "f32 u8", NULL, "{\"dims\": [1]}" },
    { "amin", "f32 i8", NULL, "{\"dims\": [1]}" },
    { "prod", "f32 i16", "T:4,33:0.5:1.5", "{\"dims\": [1]}" },
    { "argmax", "f32 u8 i16", NULL, "{\"dim\": 1}" },
    { "softmax", NULL, NULL, "{\"dim\": -1}" },
    { "log_softmax", NULL, NULL, "{\"dim\": 0}" },
    { "layer_norm", NULL, "T:4,33 T:33 T:33", "{\"normalized_shape\": [33]}" },
    { "rms_norm", NULL, "T:4,33 T:33", "{\"normalized_shape\": [33]}" },
    { "reshape", NULL, "T:4,33", "{\"shape\": [33, 4]}" },
    { "permute", "f32 u8", "T:4,5,6", "{\"dims\": [2, 0, 1]}" },
    { "transpose", NULL, "T:4,33", "{\"dim0\": 0, \"dim1\": 1}" },
    { "expand", NULL, "T:4,1", "{\"shape\": [4, 33]}" },
    { "unsqueeze", NULL, "T:4,33", "{\"dim\": 1}" },
    { "squeeze", NULL, "T:4,1,33", NULL },
    { "slice", "f32 i16", "T:4,33", "{\"dim\": 1, \"start\": 2, \"end\": 30, \"step\": 3}" },
    { "cat", "f32 u8 i8", "T:4,33 T:4,5", "{\"dim\": 1}" },
    { "matmul", "f32 i8", "T:4,33 T:33,7", NULL },
    { "linear", "f32 i16", "T:4,33 T:7,33 T:7", NULL },
    { "bmm", NULL, "T:2,4,33 T:2,33,7", NULL },
    { "embedding", "f32 u8", "T:10,8 i64:5:0:10", NULL },
    { "full", NULL, "", "{\"value\": 1.5, \"shape\": [3, 4], \"dtype\": \"f32\"}" },
    { "arange", NULL, "", "{\"start\": 1, \"end\": 20, \"step\": 3}" },
    { "log1p", "f32 f64 bf16", "T:4,33:-0.9:3", NULL },
    { "expm1", "f32 f64", "T:4,33:-3:3", NULL },
    { "sign", "f32 i32 bool i8", NULL, NULL },
    { "round", "f32 f64 i32 f16 u8", "T:4,33:-4:4", NULL },
    { "remainder", "f32 i64 bf16 u8 i8", "T:4,33:-9:9 T:33:-4:4:nz", NULL },
    { "hardswish", NULL, "T:4,33:-5:5", NULL },
    { "hardsigmoid", NULL, "T:4,33:-5:5", NULL },
    { "leaky_relu", NULL, NULL, "{\"negative_slope\": 0.2}" },
    { "softplus", "f32 f64 f16", "T:4,33:-8:8", "{\"beta\": 2, \"threshold\": 5}" },
    /* --- spatial ops (issue 12) --- */
    { "pad", "f32 i32 bf16", "T:2,3,9", "{\"pad\": [2, 3, -1, 1], \"value\": 1.5}" },
    { "unfold", "f32 i64 bool", "T:3,10,2", "{\"dim\": 1, \"size\": 4, \"step\": 3}" },
    { "flip", "f32 i32", "T:3,4,5", "{\"dims\": [0, 2]}" },
    { "roll", "f32 i64", "T:3,4,5", "{\"shifts\": [1, -2], \"dims\": [0, 2]}" },
    { "conv", "f32 f64 f16", "T:2,4,9,8 T:6,2,3,3 T:6",
      "{\"stride\": [2, 1], \"padding\": [1, 2], \"dilation\": [1, 2], \"groups\": 2}" },
    { "max_pool", "f32 bf16", "T:2,3,9,8",
      "{\"kernel_size\": [3, 2], \"stride\": [2, 2], \"padding\": [1, 1], \"ceil_mode\": true}" },
    { "avg_pool", "f32 f64", "T:2,3,9,8",
      "{\"kernel_size\": [3, 3], \"stride\": [2, 2], \"padding\": [1, 1], \"count_include_pad\": false}" },
    { "adaptive_avg_pool", "f32 f16", "T:2,3,9,8", "{\"output_size\": [4, 3]}" },
    { "adaptive_max_pool", NULL, "T:2,3,9,8", "{\"output_size\": [4, 5]}" },
    { "interpolate", "f32 f64", "T:2,3,4,5", "{\"size\": [7, 9], \"mode\": \"bilinear\"}" },
    { "conv_transpose", "f32 bf16", "T:2,4,5,4 T:4,3,3,3 T:6",
      "{\"stride\": [2, 1], \"padding\": [1, 0], \"output_padding\": [1, 0], \"groups\": 2}" },
    /* --- nn ops (issue 12) --- */
    { "batch_norm", "f32 f64 bf16", "T:2,3,5 T:3 T:3:0.5:2 T:3", "{\"eps\": 0.001}" },
    { "group_norm", "f32 f16", "T:2,6,5 T:6 T:6", "{\"num_groups\": 3}" },
    { "scaled_dot_product_attention", "f32 f16", "T:2,5,8 T:2,7,8 T:2,7,6 bool:5,7", NULL },
    { "gather", "f32 i32", "T:4,33 i64:4,5:0:33", "{\"dim\": 1}" },
    { "index_select", "f32 bf16", "T:5,33 i32:7:0:5", "{\"dim\": 0}" },
    { "cumsum", "f32 i32 bool", "T:4,33", "{\"dim\": 1}" },
    { "stack", "f32 i64", "T:4,33 T:4,33", "{\"dim\": 1}" },
    { "masked_fill", "f32 i32", "T:4,33 bool:33", "{\"value\": -2}" },
    { "hardtanh", "f32 i32 f16", "T:4,33:-3:3", "{\"min_val\": -0.5, \"max_val\": 2}" },
    { "mish", "f32 bf16", "T:4,33:-6:6", NULL },
    { "elu", "f32 f64", "T:4,33:-4:4", "{\"alpha\": 0.7}" },
    { "triu", "f32 bool", "T:2,5,6", "{\"diagonal\": 1}" },
    { "tril", "f32 i64", "T:5,6", "{\"diagonal\": -1}" },
};
#define NHINTS ((int)(sizeof HINTS / sizeof HINTS[0]))

static const op_hint *hint_of(ic_op op)
{
    for (int i = 0; i < NHINTS; i++)
        if (!strcmp(HINTS[i].op, ic_op_name(op)))
            return &HINTS[i];
    return NULL;
}

static const char *default_inputs(ic_op op)
{
    switch (ic_op_kind_of(op)) {
    case IC_KIND_UNARY: case IC_KIND_REDUCE: case IC_KIND_NORM: return "T:4,33";
    case IC_KIND_BINARY: return "T:4,33 T:33";
    case IC_KIND_TERNARY: return "bool:4,33 T:4,33 T:33";
    default: return NULL;
    }
}

/* ---- one case: graph text and arguments ---- */

typedef struct {
    char dtype[8];
    int rank;
    int64_t shape[IC_MAX_RANK];
    double lo, hi;
    bool nonzero;
} in_spec;

static int parse_inputs(const char *text, const char *T, in_spec *in)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        in_spec *s = &in[n++];
        memset(s, 0, sizeof *s);
        s->lo = -2, s->hi = 2;
        char *f[5] = { 0 };
        int nf = 0;
        for (char *p = tok; p && nf < 5;) {
            f[nf++] = p;
            p = strchr(p, ':');
            if (p)
                *p++ = 0;
        }
        const char *dt = f[0] && strcmp(f[0], "T") ? f[0] : T ? T : "f32";
        snprintf(s->dtype, sizeof s->dtype, "%s", dt);
        for (char *p = nf > 1 ? f[1] : ""; *p;) {
            s->shape[s->rank++] = strtoll(p, &p, 10);
            if (*p == ',')
                p++;
        }
        if (nf > 3)
            s->lo = atof(f[2]), s->hi = atof(f[3]);
        s->nonzero = nf > 4 && !strcmp(f[4], "nz");
    }
    return n;
}

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(ic_tensor *t, const in_spec *s, uint64_t *seed)
{
    for (int64_t i = 0; i < ic_tensor_numel(t); i++) {
        uint64_t x = next(seed);
        double u = (double)(x >> 11) / 9007199254740992.0, v;
        if (t->dtype == IC_BOOL) {
            v = (double)(x & 1);
        } else if (!ic_dtype_is_float(t->dtype)) {
            int64_t lo = (int64_t)s->lo, span = (int64_t)s->hi - lo;
            v = (double)(lo + (int64_t)(x % (uint64_t)(span > 0 ? span : 1)));
            if (s->nonzero && v == 0)
                v = 1;
        } else {
            v = s->lo + u * (s->hi - s->lo);
            if (s->nonzero && fabs(v) < 0.25)
                v = v < 0 ? -0.5 : 0.5;
        }
        switch (t->dtype) { /* integers exactly; floats through ic_tensor_set's rounding */
        case IC_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
        case IC_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
        case IC_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
        default: ic_tensor_set(t, i, v); break;
        }
    }
}

typedef struct {
    char name[64];
    ic_graph *g;
    int nargs;
    ic_tensor args[4];
    ic_tensor ref;        /* the reference executor's output */
} op_case;

/* Builds case k (0-based, over dtypes) of op; false when op has no k-th dtype. */
static bool case_make(ic_ctx *c, ic_op op, int k, op_case *oc)
{
    const op_hint *h = hint_of(op);
    char dts[64], *save = NULL, *T = NULL;
    snprintf(dts, sizeof dts, "%s", h->dtypes ? h->dtypes : "f32");
    T = strtok_r(dts, " ", &save);
    for (int i = 0; i < k && T; i++)
        T = strtok_r(NULL, " ", &save);
    if (!T)
        return false;
    memset(oc, 0, sizeof *oc);
    snprintf(oc->name, sizeof oc->name, "%s(%s)", ic_op_name(op), T);
    const char *itext = h->inputs ? h->inputs : default_inputs(op);
    cr_assert(itext, "%s: its kind has no default inputs: give them in the hint", oc->name);
    in_spec in[4];
    int n = parse_inputs(itext, T, in);
    char json[2048], ins[1024] = "", opnds[256] = "";
    size_t li = 0, lo = 0;
    for (int i = 0; i < n; i++) {
        char sh[128] = "";
        size_t ls = 0;
        for (int d = 0; d < in[i].rank; d++)
            ls += (size_t)snprintf(sh + ls, sizeof sh - ls, "%s%lld", d ? ", " : "", (long long)in[i].shape[d]);
        li += (size_t)snprintf(ins + li, sizeof ins - li, "%s{\"name\": \"x%d\", \"dtype\": \"%s\", \"shape\": [%s]}",
                               i ? ", " : "", i, in[i].dtype, sh);
        lo += (size_t)snprintf(opnds + lo, sizeof opnds - lo, "%s\"x%d\"", i ? ", " : "", i);
    }
    snprintf(json, sizeof json,
             "{\"ic_graph\": 1, \"name\": \"%s\", \"inputs\": [%s], \"nodes\": [{\"name\": \"y\", "
             "\"op\": \"%s\", \"inputs\": [%s]%s%s}], \"outputs\": [\"y\"]}",
             ic_op_name(op), ins, ic_op_name(op), opnds, h->attrs ? ", \"attrs\": " : "",
             h->attrs ? h->attrs : "");
    ic_status s = ic_graph_load_json_string(c, json, NULL, &oc->g);
    cr_assert_eq(s, IC_OK, "%s: the hint's graph does not load: %s\n%s", oc->name, ic_last_error(c), json);
    uint64_t seed = 0x1234u + (uint64_t)op * 977u + (uint64_t)k;
    oc->nargs = ic_graph_num_args(oc->g);
    cr_assert_eq(oc->nargs, n);
    for (int i = 0; i < n; i++) {
        ic_node_info ni;
        ic_graph_node(oc->g, ic_graph_arg(oc->g, i), &ni);
        ic_tensor_init(&oc->args[i], ni.dtype, in[i].rank, in[i].shape, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &oc->args[i]), IC_OK);
        fill(&oc->args[i], &in[i], &seed);
    }
    s = ic_ref_run(c, oc->g, NULL, oc->nargs, oc->args, 1, &oc->ref);
    cr_assert_eq(s, IC_OK, "%s: the reference executor fails: %s", oc->name, ic_last_error(c));
    return true;
}

static void case_free(ic_ctx *c, op_case *oc)
{
    for (int i = 0; i < oc->nargs; i++)
        ic_tensor_free(c, &oc->args[i]);
    ic_tensor_free(c, &oc->ref);
    ic_graph_destroy(oc->g);
}

/* ---- comparison ---- */

/* NMSE of got against want (ggml's metric) when float, exact equality otherwise; NaN and
 * infinities must sit in the same places. Writes a line into msg on failure. */
static bool compare(const ic_tensor *got, const ic_tensor *want, double max_nmse, char *msg, size_t n)
{
    int64_t ne = ic_tensor_numel(want);
    double num = 0, den = 0;
    for (int64_t i = 0; i < ne; i++) {
        if (!ic_dtype_is_float(want->dtype)) {
            int64_t a = ict_get_i(got, i), b = ict_get_i(want, i);
            if (a != b) {
                snprintf(msg, n, "element %lld: got %lld, want %lld", (long long)i, (long long)a, (long long)b);
                return false;
            }
            continue;
        }
        double a = ict_get_f(got, i), b = ict_get_f(want, i);
        if (!isfinite(a) || !isfinite(b)) {
            if (!(isnan(a) && isnan(b)) && a != b) {
                snprintf(msg, n, "element %lld: got %g, want %g", (long long)i, a, b);
                return false;
            }
            continue;
        }
        num += (a - b) * (a - b);
        den += b * b;
    }
    double nmse = den > 0 ? num / den : num;
    if (nmse > max_nmse) {
        snprintf(msg, n, "NMSE %.3g > %.3g", nmse, max_nmse);
        return false;
    }
    return true;
}

static double max_nmse(ic_dtype t)
{
    return t == IC_F64 ? 1e-14 : t == IC_F32 ? 1e-7 : 1e-4;
}

/* ---- backends ---- */

typedef enum { BK_INTERP, BK_JIT, BK_JIT_UNFUSED, BK_PTX_EMU } backend;
static const char *const BK_NAMES[] = { "interpreter", "cpu-jit", "cpu-jit-unfused", "ptx-emulator" };

static ic_status run_backend(ic_ctx *c, backend bk, const op_case *oc, ic_tensor *out)
{
    ic_status s;
    if (bk == BK_JIT || bk == BK_JIT_UNFUSED) {
        ic_compile_options o;
        ic_compile_options_init(&o);
        o.fusion = bk == BK_JIT;
        o.threads = 1;
        ic_compiled *cc = NULL;
        if ((s = ic_compile(c, oc->g, &o, &cc)))
            return s;
        s = ic_run(cc, oc->nargs, oc->args, 1, out);
        ic_compiled_destroy(cc);
        return s;
    }
    ic_program *p = NULL;
    if ((s = ic_lower(c, oc->g, &p)))
        return s;
    if (!(s = ic_program_verify(p)))
        s = bk == BK_INTERP ? ic_program_interpret(c, p, oc->args, oc->nargs, out, 1)
                            : ic_ptx_emulate(c, p, NULL, oc->args, oc->nargs, out, 1);
    ic_program_destroy(p);
    return s;
}

/* Every op, every dtype of its hint, on backend bk; one line per failure, then asserts. */
static void check_backend(backend bk)
{
    ic_ctx *c = ict_ctx();
    int nfail = 0, nrun = 0;
    for (int op = 0; op < IC_OP_COUNT; op++) {
        if (!hint_of((ic_op)op))
            continue; /* every_op_has_a_hint reports it */
        op_case oc;
        for (int k = 0; case_make(c, (ic_op)op, k, &oc); k++) {
            ic_tensor got;
            ic_tensor_init(&got, oc.ref.dtype, oc.ref.rank, oc.ref.shape, NULL);
            cr_assert_eq(ic_tensor_alloc(c, &got), IC_OK);
            memset(got.data, 0xcd, (size_t)ic_tensor_numel(&got) * ic_dtype_size(got.dtype));
            char msg[512];
            ic_status s = run_backend(c, bk, &oc, &got);
            bool ok = s == IC_OK && compare(&got, &oc.ref, max_nmse(oc.ref.dtype), msg, sizeof msg);
            if (s)
                snprintf(msg, sizeof msg, "%s", ic_last_error(c));
            if (!ok) {
                fprintf(stderr, "  %-26s %-16s FAIL: %s\n", oc.name, BK_NAMES[bk], msg);
                nfail++;
            }
            nrun++;
            ic_tensor_free(c, &got);
            case_free(c, &oc);
        }
    }
    fprintf(stderr, "backend_ops %s: %d of %d cases pass\n", BK_NAMES[bk], nrun - nfail, nrun);
    cr_assert_eq(nfail, 0, "%s: %d of %d cases differ from the reference (listed above)",
                 BK_NAMES[bk], nfail, nrun);
    ic_ctx_destroy(c);
}

Test(backend_ops, every_op_has_a_hint)
{
    int missing = 0;
    for (int op = 0; op < IC_OP_COUNT; op++)
        if (!hint_of((ic_op)op)) {
            fprintf(stderr, "  op '%s' has no entry in HINTS of %s\n", ic_op_name((ic_op)op), __FILE__);
            missing++;
        }
    for (int i = 0; i < NHINTS; i++) {
        ic_op op;
        cr_assert(ic_op_from_name(HINTS[i].op, &op), "hint '%s' names no op of ops.def", HINTS[i].op);
    }
    cr_assert_eq(missing, 0, "%d ops of ops.def have no hint: add one to HINTS (see above)", missing);
}

Test(backend_ops, interpreter, .timeout = 600) { check_backend(BK_INTERP); }
Test(backend_ops, cpu_jit, .timeout = 600) { check_backend(BK_JIT); }
Test(backend_ops, cpu_jit_unfused, .timeout = 600) { check_backend(BK_JIT_UNFUSED); }
Test(backend_ops, ptx_emulator, .timeout = 600) { check_backend(BK_PTX_EMU); }

/* round is a loop-IR primitive (lops.def ROUND), one instruction on each target:
 * llvm.roundeven on the CPU (roundps/vrndscale), cvt.rni in the PTX. */
Test(backend_ops, round_is_one_instruction_per_target)
{
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "round");
    ic_value x = ict_input(g, "x", IC_F32, "4,33"), y;
    cr_assert_eq(ic_graph_unary(g, "y", IC_OP_ROUND, ic_val(x), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    char *ir = ict_compile_dump(c, g, NULL, "llvm");
    cr_assert(strstr(ir, "llvm.roundeven"), "no llvm.roundeven in the CPU IR:\n%s", ir);
    free(ir);
    ic_program *p = NULL;
    cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
    ic_ptx_options o = { .sm = 90 };
    ic_ptx_module *m = NULL;
    cr_assert_eq(ic_ptx_emit(c, p, &o, NULL, &m), IC_OK, "%s", ic_last_error(c));
    cr_assert(strstr(ic_ptx_module_text(m), "cvt.rni.f32.f32"), "no cvt.rni in the PTX:\n%s",
              ic_ptx_module_text(m));
    ic_ptx_module_destroy(m);
    ic_program_destroy(p);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

/* log1p and expm1 are decompositions over exp and log (Goldberg's and Kahan's corrections):
 * a dense f32 sweep through the CPU JIT and the PTX emulator, each element within a few ulp of
 * libm in double, including tiny arguments where the plain formulas lose every digit. */
static void sweep(ic_op op, double lo, double hi, double rtol)
{
    enum { N = 20000 };
    ic_ctx *c = ict_ctx();
    ic_graph *g = ict_graph(c, "sweep");
    ic_value x = ict_input(g, "x", IC_F32, "20000"), y;
    cr_assert_eq(ic_graph_unary(g, "y", op, ic_val(x), &y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    int64_t n = N;
    ic_tensor in, out;
    ic_tensor_init(&in, IC_F32, 1, &n, NULL);
    ic_tensor_init(&out, IC_F32, 1, &n, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &in), IC_OK);
    cr_assert_eq(ic_tensor_alloc(c, &out), IC_OK);
    float *xs = in.data, *ys = out.data;
    for (int i = 0; i < N; i++) /* half linear over [lo, hi], half +-2^-k towards 0 */
        xs[i] = i % 2 ? (float)(lo + (hi - lo) * i / N) : (float)ldexp(i % 4 ? 1.0 : -1.0, -(i % 120) - 1);
    for (int bk = 0; bk < 2; bk++) {
        ic_status s;
        if (bk == 0) {
            ic_compiled *cc = NULL;
            cr_assert_eq(ic_compile(c, g, NULL, &cc), IC_OK, "%s", ic_last_error(c));
            s = ic_run(cc, 1, &in, 1, &out);
            ic_compiled_destroy(cc);
        } else {
            ic_program *p = NULL;
            cr_assert_eq(ic_lower(c, g, &p), IC_OK, "%s", ic_last_error(c));
            s = ic_ptx_emulate(c, p, NULL, &in, 1, &out, 1);
            ic_program_destroy(p);
        }
        cr_assert_eq(s, IC_OK, "%s", ic_last_error(c));
        for (int i = 0; i < N; i++) {
            double want = op == IC_OP_LOG1P ? log1p(xs[i]) : expm1(xs[i]);
            cr_assert(fabs(ys[i] - want) <= rtol * fabs(want) + 1e-45, "%s %s(%.9g): got %.9g, want %.9g",
                      bk ? "ptx-emulator" : "cpu-jit", ic_op_name(op), xs[i], ys[i], want);
        }
    }
    ic_tensor_free(c, &in), ic_tensor_free(c, &out);
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

Test(backend_ops, log1p_sweep) { sweep(IC_OP_LOG1P, -0.9999, 100, 1e-6); }
Test(backend_ops, expm1_sweep) { sweep(IC_OP_EXPM1, -20, 20, 1e-6); }
