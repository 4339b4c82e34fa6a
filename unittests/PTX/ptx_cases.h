/* ptx_cases.h - the graphs every GPU test runs (shared by unittests/PTX/test_ptx.c, which
 * emulates them, and unittests/Runtime/test_cuda.c, which runs them on a GPU): each op of
 * the spec in several dtypes and shapes, and launch-geometry variants that reach every
 * mapping and combine path. Graphs are JSON written with single quotes. Header-only. */
#ifndef IC_PTX_CASES_H
#define IC_PTX_CASES_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "testutil.h"
#include "ic/ptx.h"

enum { POS = 1, TIES = 2, SMALL = 4, NOFUSE = 8, FUSEDONLY = 16 };

/* A graph from JSON written with single quotes. */
static ic_graph *graph_json(ic_ctx *c, const char *text)
{
    char *buf = strdup(text);
    cr_assert(buf);
    for (char *p = buf; *p; p++)
        if (*p == '\'')
            *p = '"';
    ic_graph *g = NULL;
    ic_status s = ic_graph_load_json_string(c, buf, ".", &g);
    cr_assert_eq(s, IC_OK, "graph %s: %s", buf, ic_last_error(c));
    free(buf);
    return g;
}

/* The source tree (benchmarks/graphs): $IC_SOURCE_DIR when set (binaries run elsewhere,
 * e.g. on the GPU machine), else where this build came from. */
static const char *source_dir(void)
{
    const char *e = getenv("IC_SOURCE_DIR");
    return e && *e ? e : IC_SOURCE_DIR;
}

#define IN(n, t, s) "{'name':'" n "','dtype':'" t "','shape':" s "}"
#define GRAPH(ins, nodes, outs) "{'ic_graph':1,'name':'t','inputs':[" ins "],'nodes':[" nodes "],'outputs':[" outs "]}"

static uint64_t mix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void make_args(ic_ctx *c, const ic_graph *g, unsigned flags, ic_tensor *args, int *nargs)
{
    int n = ic_graph_num_args(g);
    cr_assert(n <= 8);
    uint64_t seed = 12345;
    for (int i = 0; i < n; i++) {
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        int64_t sh[IC_MAX_RANK];
        for (int d = 0; d < ni.rank; d++)
            sh[d] = ni.shape[d].coef;
        ic_tensor_init(&args[i], ni.dtype, ni.rank, sh, NULL);
        cr_assert_eq(ic_tensor_alloc(c, &args[i]), IC_OK);
        for (int64_t e = 0; e < ic_tensor_numel(&args[i]); e++) {
            uint64_t x = mix(&seed);
            double u = (double)(x >> 11) / 9007199254740992.0;
            double v;
            if (ni.dtype == IC_BOOL)
                v = (double)(x >> 63);
            else if (ni.dtype == IC_I32 || ni.dtype == IC_I64)
                v = ni.has_range ? (double)(ni.range_lo + (int64_t)(x % (uint64_t)(ni.range_hi - ni.range_lo)))
                                 : (double)((int64_t)(x % 19) - 9);
            else if (ic_dtype_is_int(ni.dtype)) /* u8 i8 i16: wrapped from -256..255 */
                v = (double)((int64_t)(x % 512) - 256);
            else if (flags & TIES)
                v = floor(u * 5) - 2;
            else if (flags & SMALL)
                v = 0.9 + 0.2 * u;
            else if (flags & POS)
                v = 0.1 + 2.9 * u;
            else
                v = 4 * u - 2;
            ic_tensor_set(&args[i], e, v);
        }
    }
    *nargs = n;
}


/* What a test does with one case: name, graph JSON, data flags, launch params for every
 * kernel (NULL = heuristic). */
typedef void (*case_fn)(const char *name, const char *json, unsigned flags, const ic_ptx_params *params);

typedef enum {
    CASES_UNARY, CASES_UNARY_DTYPES, CASES_CASTS, CASES_BINARY, CASES_REDUCE, CASES_NORM,
    CASES_VIEW, CASES_CONTRACT, CASES_GEO_ROW, CASES_GEO_COLUMN, CASES_GEO_POINTWISE,
    CASES_GEMM_F32, CASES_GEMM_F16, CASES_GEMM_BF16, CASES_GEMM_PARAMS, CASES_SPLIT_ROWS, CASES_WGMMA, CASES_SPLIT_COLUMNS, CASES_ICONV, CASES_COUNT
} case_group;

/* Convolutions as implicit GEMMs (lib/PTX/iconv.c: wgmma's producer gathers im2col(x) into
 * shared memory; the copy kernel is not launched): odd spatial sizes, paddings, strides,
 * dilation, a 7x7 stem-like kernel (K = 147: its weight rows are loaded element by element),
 * bias, relu, a residual; forced wgmma, fused; at least 64 output channels and positions an
 * image (fewer keep the copy: wgmma's tiles are 64 x 64 or more). */
static void conv_cases(case_fn f)
{
    static const ic_ptx_params force = { .wgmma = 1 }, t128 = { .wgmma = 1, .tile_m = 128, .tile_n = 128, .stages = 3 };
    static const struct { const char *name, *json; const ic_ptx_params *p; } cs[] = {
        { "iconv bf16 [2,16,9,11] -> 72, 3x3 pad 1, bias relu",
          GRAPH(IN("x", "bf16", "[2,16,9,11]") "," IN("w", "bf16", "[72,16,3,3]") "," IN("b", "bf16", "[72]"),
                "{'name':'c','op':'conv','inputs':['x','w','b'],'attrs':{'stride':[1,1],'padding':[1,1]}},"
                "{'name':'y','op':'relu','inputs':['c']}", "'y'"), &force },
        { "iconv f16 [2,16,17,19] -> 64, 3x3 stride 2 pad 1, bias",
          GRAPH(IN("x", "f16", "[2,16,17,19]") "," IN("w", "f16", "[64,16,3,3]") "," IN("b", "f16", "[64]"),
                "{'name':'y','op':'conv','inputs':['x','w','b'],'attrs':{'stride':[2,2],'padding':[1,1]}}", "'y'"), &force },
        { "iconv bf16 [3,8,10,13] -> 70, 3x3 no pad, residual",
          GRAPH(IN("x", "bf16", "[3,8,10,13]") "," IN("w", "bf16", "[70,8,3,3]") "," IN("r", "bf16", "[3,70,8,11]"),
                "{'name':'c','op':'conv','inputs':['x','w']},{'name':'y','op':'add','inputs':['c','r']}", "'y'"), &force },
        { "iconv bf16 [2,3,23,21] -> 64, 7x7 stride 2 pad 3 (stem)",
          GRAPH(IN("x", "bf16", "[2,3,23,21]") "," IN("w", "bf16", "[64,3,7,7]"),
                "{'name':'y','op':'conv','inputs':['x','w'],'attrs':{'stride':[2,2],'padding':[3,3]}}", "'y'"), &force },
        { "iconv bf16 [1,20,12,9] -> 66, 3x3 dilation 2 pad 2, 128x128 tiles",
          GRAPH(IN("x", "bf16", "[1,20,12,9]") "," IN("w", "bf16", "[66,20,3,3]"),
                "{'name':'y','op':'conv','inputs':['x','w'],'attrs':{'padding':[2,2],'dilation':[2,2]}}", "'y'"), &t128 },
        { "iconv f16 [2,16,13,11] -> 64, 1x3 stride (1,2) pad (0,1)",
          GRAPH(IN("x", "f16", "[2,16,13,11]") "," IN("w", "f16", "[64,16,1,3]"),
                "{'name':'y','op':'conv','inputs':['x','w'],'attrs':{'stride':[1,2],'padding':[0,1]}}", "'y'"), &force },
        { "iconv bf16 [2,32,17,16] -> 64, 1x1 stride 2 (downsampling)",
          GRAPH(IN("x", "bf16", "[2,32,17,16]") "," IN("w", "bf16", "[64,32,1,1]"),
                "{'name':'y','op':'conv','inputs':['x','w'],'attrs':{'stride':[2,2]}}", "'y'"), &force },
        /* convs reading temps: x's arena bytes must outlive the GEMM that now reads x */
        { "stacked iconv bf16 relu -> [2,64,9,11] 3x3 -> relu -> 3x3 -> 64",
          GRAPH(IN("x", "bf16", "[2,64,9,11]") "," IN("w", "bf16", "[64,64,3,3]") "," IN("v", "bf16", "[64,64,3,3]"),
                "{'name':'r','op':'relu','inputs':['x']},"
                "{'name':'c','op':'conv','inputs':['r','w'],'attrs':{'padding':[1,1]}},{'name':'h','op':'relu','inputs':['c']},"
                "{'name':'y','op':'conv','inputs':['h','v'],'attrs':{'padding':[1,1]}}", "'y'"), &force },
    };
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        f(cs[i].name, cs[i].json, FUSEDONLY, cs[i].p);
}

/* Contractions through the GEMM kernels in dtype dt: odd shapes (1, 3, 17, 97, 257), every
 * operand layout (k-contiguous, o-contiguous through a transpose, neither), batches,
 * broadcasting, merged m dims, and epilogues (bias, relu, gelu, residual, cast). */
static void gemm_cases(case_fn f, const char *dt)
{
    char json[2048], name[200];
#define GEMM_CASE(nm, ins, nodes)                                                                     do {                                                                                                  snprintf(json, sizeof json, "{'ic_graph':1,'name':'t','inputs':[%s],'nodes':[%s],'outputs':['y']}",                  ins, nodes);                                                                             snprintf(name, sizeof name, "gemm %s %s", dt, nm);                                                f(name, json, 0, NULL);                                                                       } while (0)
    char in1[512], in2[512], in3[512];
#define T3(a, b, c) (snprintf(in1, sizeof in1, "{'name':'a','dtype':'%s','shape':%s}", dt, a),                      snprintf(in2, sizeof in2, ",{'name':'b','dtype':'%s','shape':%s}", dt, b),                      snprintf(in3, sizeof in3, c ? ",{'name':'c','dtype':'%s','shape':%s}" : "%.0s%.0s", dt, c ? c : ""),                      strcat(strcat(in1, in2), in3))
    GEMM_CASE("matmul 17x97x33", T3("[17,97]", "[97,33]", NULL), "{'name':'y','op':'matmul','inputs':['a','b']}");
    GEMM_CASE("matmul 257x64x136 (16-byte copies)", T3("[257,64]", "[64,136]", NULL),
              "{'name':'y','op':'matmul','inputs':['a','b']}");
    GEMM_CASE("matmul 64x128x128 (whole tiles, 16-byte copies)", T3("[64,128]", "[128,128]", NULL),
              "{'name':'y','op':'matmul','inputs':['a','b']}");
    GEMM_CASE("bmm 2x128x256x64 (whole tiles, 16-byte copies)", T3("[2,128,256]", "[2,256,64]", NULL),
              "{'name':'y','op':'bmm','inputs':['a','b']}");
    GEMM_CASE("matmul 3x257x97", T3("[3,257]", "[257,97]", NULL), "{'name':'y','op':'matmul','inputs':['a','b']}");
    GEMM_CASE("matmul 1x64x97", T3("[1,64]", "[64,97]", NULL), "{'name':'y','op':'matmul','inputs':['a','b']}");
    GEMM_CASE("matmul 97x16x1", T3("[97,16]", "[16,1]", NULL), "{'name':'y','op':'matmul','inputs':['a','b']}");
    GEMM_CASE("linear bias relu 97x64 -> 48", T3("[97,64]", "[48,64]", "[48]"),
              "{'name':'h','op':'linear','inputs':['a','b','c']},{'name':'y','op':'relu','inputs':['h']}");
    GEMM_CASE("linear bias gelu 17x33 -> 97", T3("[17,33]", "[97,33]", "[97]"),
              "{'name':'h','op':'linear','inputs':['a','b','c']},{'name':'y','op':'gelu','inputs':['h']}");
    /* a batch norm's rsqrt per element: the epilogue goes through shared memory (tensor
     * cores: a 128 x 128 tile, the shared memory grown to hold it in f32) */
    GEMM_CASE("linear times rsqrt(c*c+1) 130x48 -> 70 (staged epilogue)", T3("[130,48]", "[70,48]", "[70]"),
              "{'name':'h','op':'linear','inputs':['a','b']},{'name':'q','op':'mul','inputs':['c','c']},"
              "{'name':'r','op':'add','inputs':['q',1.0]},{'name':'s','op':'rsqrt','inputs':['r']},"
              "{'name':'y','op':'mul','inputs':['h','s']}");
    GEMM_CASE("linear residual 3x5x32 -> 24", T3("[3,5,32]", "[24,32]", "[3,5,24]"),
              "{'name':'h','op':'linear','inputs':['a','b']},{'name':'y','op':'add','inputs':['h','c']}");
    GEMM_CASE("bmm 3x17x32x24", T3("[3,17,32]", "[3,32,24]", NULL), "{'name':'y','op':'bmm','inputs':['a','b']}");
    GEMM_CASE("bmm 2x33x17x9", T3("[2,33,17]", "[2,17,9]", NULL), "{'name':'y','op':'bmm','inputs':['a','b']}");
    GEMM_CASE("matmul broadcast 2x1x17x16 @ 3x16x9", T3("[2,1,17,16]", "[3,16,9]", NULL),
              "{'name':'y','op':'matmul','inputs':['a','b']}");
    GEMM_CASE("transposed a (m contiguous) 64x40 -> 40x64 @ 64x24", T3("[64,40]", "[64,24]", NULL),
              "{'name':'t','op':'transpose','inputs':['a'],'attrs':{'dim0':0,'dim1':1}},"
              "{'name':'y','op':'matmul','inputs':['t','b']}");
    GEMM_CASE("transposed b (n contiguous) 24x40 @ (40x16)^T", T3("[24,40]", "[16,40]", NULL),
              "{'name':'t','op':'transpose','inputs':['b'],'attrs':{'dim0':0,'dim1':1}},"
              "{'name':'y','op':'matmul','inputs':['a','t']}");
    GEMM_CASE("both transposed 33x17", T3("[33,17]", "[9,33]", NULL),
              "{'name':'t','op':'transpose','inputs':['a'],'attrs':{'dim0':0,'dim1':1}},"
              "{'name':'u','op':'transpose','inputs':['b'],'attrs':{'dim0':0,'dim1':1}},"
              "{'name':'y','op':'matmul','inputs':['t','u']}");
    GEMM_CASE("linear then cast to f32", T3("[40,32]", "[24,32]", NULL),
              "{'name':'h','op':'linear','inputs':['a','b']},{'name':'y','op':'cast','inputs':['h'],'attrs':{'dtype':'f32'}}");
#undef T3
#undef GEMM_CASE
}

static void unary_case(case_fn f, const char *op, const char *dt, const char *attrs, unsigned flags)
{
    char json[2048], name[128];
    snprintf(json, sizeof json,
             "{'ic_graph':1,'name':'t','inputs':[{'name':'x','dtype':'%s','shape':[37,129]}],"
             "'nodes':[{'name':'y','op':'%s','inputs':['x']%s%s%s}],'outputs':['y']}",
             dt, op, attrs ? ",'attrs':{" : "", attrs ? attrs : "", attrs ? "}" : "");
    snprintf(name, sizeof name, "%s %s%s%s", op, dt, attrs ? " " : "", attrs ? attrs : "");
    f(name, json, flags, NULL);
}

static void binary_case(case_fn f, const char *op, const char *dta, const char *sha, const char *dtb,
                        const char *shb, unsigned flags)
{
    char json[2048], name[160];
    snprintf(json, sizeof json,
             "{'ic_graph':1,'name':'t','inputs':[{'name':'a','dtype':'%s','shape':%s},"
             "{'name':'b','dtype':'%s','shape':%s}],"
             "'nodes':[{'name':'y','op':'%s','inputs':['a','b']}],'outputs':['y']}",
             dta, sha, dtb, shb, op);
    snprintf(name, sizeof name, "%s %s%s %s%s", op, dta, sha, dtb, shb);
    f(name, json, flags, NULL);
}

static void reduce_case(case_fn f, const char *op, const char *dt, const char *shape, const char *attrs,
                        unsigned flags)
{
    char json[2048], name[200];
    snprintf(json, sizeof json,
             "{'ic_graph':1,'name':'t','inputs':[{'name':'x','dtype':'%s','shape':%s}],"
             "'nodes':[{'name':'y','op':'%s','inputs':['x'],'attrs':{%s}}],'outputs':['y']}",
             dt, shape, op, attrs);
    snprintf(name, sizeof name, "%s %s%s {%s}", op, dt, shape, attrs);
    f(name, json, flags, NULL);
}

/* Calls f for every case of group g. */
static void ptx_cases(case_group g, case_fn f)
{
    switch (g) {
    case CASES_UNARY: {
        static const char *ops[] = { "neg", "abs", "exp", "sin", "cos", "tanh", "sigmoid", "relu",
                                     "silu", "erf", "floor", "ceil", "reciprocal", "expm1", "sign",
                                     "round", "hardswish", "hardsigmoid", "leaky_relu", "softplus" };
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
            unary_case(f, ops[i], "f32", NULL, 0);
        unary_case(f, "log", "f32", NULL, POS);
        unary_case(f, "log1p", "f32", NULL, POS);
        unary_case(f, "sqrt", "f32", NULL, POS);
        unary_case(f, "rsqrt", "f32", NULL, POS);
        unary_case(f, "gelu", "f32", NULL, 0);
        unary_case(f, "gelu", "f32", "'approximate':'tanh'", 0);
        unary_case(f, "clamp", "f32", "'min':-0.5,'max':0.75", 0);
        unary_case(f, "clamp", "f32", "'min':0.25", 0);
        unary_case(f, "logical_not", "bool", NULL, 0);
        unary_case(f, "abs", "i32", NULL, 0);
        unary_case(f, "neg", "i64", NULL, 0);
        break;
    }
    case CASES_UNARY_DTYPES: {
        static const char *dts[] = { "f64", "f16", "bf16" };
        static const char *ops[] = { "exp", "tanh", "erf", "sigmoid", "sin", "cos", "gelu", "silu", "neg" };
        for (size_t d = 0; d < 3; d++) {
            for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
                unary_case(f, ops[i], dts[d], NULL, 0);
            unary_case(f, "log", dts[d], NULL, POS);
            unary_case(f, "rsqrt", dts[d], NULL, POS);
        }
        break;
    }
    case CASES_CASTS: {
        static const char *dts[] = { "f32", "f64", "f16", "bf16", "i32", "i64", "bool" };
        for (int a = 0; a < 7; a++)
            for (int b = 0; b < 7; b++) {
                if (a == b)
                    continue;
                char attrs[64];
                snprintf(attrs, sizeof attrs, "'dtype':'%s'", dts[b]);
                unary_case(f, "cast", dts[a], attrs, 0);
            }
        break;
    }
    case CASES_BINARY: {
        static const char *ops[] = { "add", "sub", "mul", "div", "maximum", "minimum",
                                     "eq", "ne", "lt", "le", "gt", "ge" };
        for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
            binary_case(f, ops[i], "f32", "[37,129]", "f32", "[129]", TIES);
        binary_case(f, "pow", "f32", "[37,129]", "f32", "[37,1]", POS);
        binary_case(f, "remainder", "f32", "[37,129]", "f32", "[129]", POS);
        binary_case(f, "add", "f32", "[5,1,33]", "f32", "[1,7,1]", 0);
        binary_case(f, "add", "bf16", "[37,128]", "bf16", "[128]", 0);
        binary_case(f, "mul", "f16", "[37,128]", "f16", "[37,128]", 0);
        binary_case(f, "add", "f64", "[37,129]", "f32", "[129]", 0);
        binary_case(f, "add", "i32", "[37,129]", "i64", "[129]", 0);
        binary_case(f, "div", "i64", "[37,129]", "i64", "[37,129]", POS);
        binary_case(f, "mul", "i32", "[37,129]", "f16", "[129]", 0);
        binary_case(f, "logical_and", "bool", "[37,129]", "bool", "[129]", 0);
        binary_case(f, "logical_or", "bool", "[37,129]", "f32", "[129]", 0);
        binary_case(f, "maximum", "i64", "[37,129]", "i64", "[129]", 0);
        f("add scalar, mul scalar",
                    GRAPH(IN("x", "f32", "[1000,3]"),
                          "{'name':'t','op':'add','inputs':['x',1.5]},{'name':'y','op':'mul','inputs':['t',-0.25]}",
                          "'y'"), 0, NULL);
        f("where",
                    GRAPH(IN("c", "bool", "[37,129]") "," IN("a", "f32", "[37,129]") "," IN("b", "f32", "[1,129]"),
                          "{'name':'y','op':'where','inputs':['c','a','b']}", "'y'"), 0, NULL);
        break;
    }
    case CASES_REDUCE: {
        static const char *ops[] = { "sum", "mean", "amax", "amin" };
        for (size_t i = 0; i < 4; i++) {
            reduce_case(f, ops[i], "f32", "[13,200]", "'dims':[-1]", 0);
            reduce_case(f, ops[i], "f32", "[13,200]", "'dims':[0]", 0);
            reduce_case(f, ops[i], "f32", "[13,200]", "", 0);
            reduce_case(f, ops[i], "f32", "[6,50,7]", "'dims':[1],'keepdim':true", 0);
            reduce_case(f, ops[i], "bf16", "[9,1000]", "'dims':[-1]", 0);
        }
        reduce_case(f, "prod", "f32", "[13,20]", "'dims':[-1]", SMALL);
        reduce_case(f, "prod", "f32", "[40,6]", "'dims':[0]", SMALL);
        reduce_case(f, "sum", "i32", "[13,200]", "'dims':[-1]", 0);
        reduce_case(f, "sum", "f64", "[300,17]", "'dims':[0]", 0);
        reduce_case(f, "amax", "i64", "[13,200]", "'dims':[0,1]", 0);
        reduce_case(f, "amax", "bool", "[13,20]", "'dims':[1]", 0);
        reduce_case(f, "sum", "f32", "[3,4,5,6]", "'dims':[0,2]", 0);
        reduce_case(f, "sum", "f16", "[20000]", "", 0);
        reduce_case(f, "argmax", "f32", "[13,200]", "'dim':1", TIES);
        reduce_case(f, "argmax", "f32", "[200,13]", "'dim':0", TIES);
        reduce_case(f, "argmax", "i32", "[6,50,7]", "'dim':1,'keepdim':true", 0);
        reduce_case(f, "argmax", "bf16", "[7,1000]", "'dim':-1", 0);
        break;
    }
    case CASES_NORM: {
        f("softmax rows", GRAPH(IN("x", "f32", "[13,1000]"),
                                          "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':-1}}", "'y'"), 0, NULL);
        f("softmax dim 0", GRAPH(IN("x", "f32", "[130,7]"),
                                           "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':0}}", "'y'"), 0, NULL);
        f("softmax bf16", GRAPH(IN("x", "bf16", "[9,4096]"),
                                          "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':-1}}", "'y'"), 0, NULL);
        f("log_softmax f16", GRAPH(IN("x", "f16", "[9,333]"),
                                             "{'name':'y','op':'log_softmax','inputs':['x'],'attrs':{'dim':1}}", "'y'"), 0, NULL);
        f("log_softmax f64", GRAPH(IN("x", "f64", "[5,64]"),
                                             "{'name':'y','op':'log_softmax','inputs':['x'],'attrs':{'dim':-1}}", "'y'"), 0, NULL);
        f("layer_norm w b", GRAPH(IN("x", "f32", "[13,768]") "," IN("w", "f32", "[768]") "," IN("b", "f32", "[768]"),
                                            "{'name':'y','op':'layer_norm','inputs':['x','w','b'],'attrs':{'normalized_shape':[768]}}", "'y'"), 0, NULL);
        f("layer_norm 2 dims", GRAPH(IN("x", "f32", "[4,6,32]"),
                                               "{'name':'y','op':'layer_norm','inputs':['x'],'attrs':{'normalized_shape':[6,32],'eps':0.001}}", "'y'"), 0, NULL);
        f("layer_norm bf16", GRAPH(IN("x", "bf16", "[9,4096]") "," IN("w", "bf16", "[4096]") "," IN("b", "bf16", "[4096]"),
                                             "{'name':'y','op':'layer_norm','inputs':['x','w','b'],'attrs':{'normalized_shape':[4096]}}", "'y'"), 0, NULL);
        f("rms_norm", GRAPH(IN("x", "f32", "[13,96]") "," IN("w", "f32", "[96]"),
                                      "{'name':'y','op':'rms_norm','inputs':['x','w'],'attrs':{'normalized_shape':[96]}}", "'y'"), 0, NULL);
        f("softmax of a residual add", GRAPH(IN("x", "f32", "[13,512]") "," IN("r", "f32", "[13,512]"),
                    "{'name':'t','op':'add','inputs':['x','r']},{'name':'y','op':'softmax','inputs':['t'],'attrs':{'dim':-1}},"
                    "{'name':'z','op':'mul','inputs':['y',2.0]}", "'z','t'"), 0, NULL);
        break;
    }
    case CASES_VIEW: {
        f("transpose add", GRAPH(IN("x", "f32", "[33,65]") "," IN("y", "f32", "[65,33]"),
                    "{'name':'t','op':'transpose','inputs':['x'],'attrs':{'dim0':0,'dim1':1}},{'name':'z','op':'add','inputs':['t','y']}", "'z'"), 0, NULL);
        f("permute output", GRAPH(IN("x", "f32", "[3,4,5]"),
                    "{'name':'z','op':'permute','inputs':['x'],'attrs':{'dims':[2,0,1]}}", "'z'"), 0, NULL);
        f("expand", GRAPH(IN("x", "f32", "[5,1]"),
                    "{'name':'e','op':'expand','inputs':['x'],'attrs':{'shape':[5,7]}},{'name':'z','op':'exp','inputs':['e']}", "'z'"), 0, NULL);
        f("slice step", GRAPH(IN("x", "f32", "[10,40]"),
                    "{'name':'s','op':'slice','inputs':['x'],'attrs':{'dim':1,'start':3,'end':37,'step':3}},{'name':'z','op':'neg','inputs':['s']}", "'z'"), 0, NULL);
        f("reshape squeeze unsqueeze", GRAPH(IN("x", "f32", "[6,1,8]"),
                    "{'name':'a','op':'squeeze','inputs':['x']},{'name':'b','op':'reshape','inputs':['a'],'attrs':{'shape':[4,-1]}},"
                    "{'name':'c','op':'unsqueeze','inputs':['b'],'attrs':{'dim':0}},{'name':'z','op':'mul','inputs':['c',3]}", "'z'"), 0, NULL);
        f("cat", GRAPH(IN("a", "f32", "[4,3]") "," IN("b", "f32", "[4,5]") "," IN("c", "f32", "[4,1]"),
                    "{'name':'z','op':'cat','inputs':['a','b','c'],'attrs':{'dim':1}}", "'z'"), 0, NULL);
        f("embedding", GRAPH(IN("w", "f32", "[50,16]") ",{'name':'ids','dtype':'i64','shape':[7,5],'range':[0,50]}",
                    "{'name':'z','op':'embedding','inputs':['w','ids']}", "'z'"), 0, NULL);
        f("full arange", "{'ic_graph':1,'name':'t','inputs':[{'name':'x','dtype':'f32','shape':[5]}],'nodes':["
                    "{'name':'f','op':'full','attrs':{'value':2.5,'shape':[5],'dtype':'f32'}},"
                    "{'name':'r','op':'arange','attrs':{'start':1,'end':11,'step':2,'dtype':'f32'}},"
                    "{'name':'i','op':'arange','attrs':{'end':5}},"
                    "{'name':'y','op':'add','inputs':['x','f']},{'name':'z','op':'mul','inputs':['y','r']}],"
                    "'outputs':['z','i']}", 0, NULL);
        f("input and param as outputs (copies)", GRAPH(IN("x", "f32", "[3,7]"),
                    "{'name':'t','op':'transpose','inputs':['x'],'attrs':{'dim0':0,'dim1':1}}", "'x','t'"), 0, NULL);
        break;
    }
    case CASES_CONTRACT: {
        f("matmul", GRAPH(IN("a", "f32", "[5,7]") "," IN("b", "f32", "[7,9]"),
                    "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'"), 0, NULL);
        f("matmul broadcast", GRAPH(IN("a", "f32", "[2,1,4,5]") "," IN("b", "f32", "[3,5,2]"),
                    "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'"), 0, NULL);
        f("linear gelu", GRAPH(IN("x", "f32", "[4,8]") "," IN("w", "f32", "[16,8]") "," IN("b", "f32", "[16]"),
                    "{'name':'h','op':'linear','inputs':['x','w','b']},{'name':'y','op':'gelu','inputs':['h']}", "'y'"), 0, NULL);
        f("bmm", GRAPH(IN("a", "f32", "[3,4,5]") "," IN("b", "f32", "[3,5,6]"),
                    "{'name':'y','op':'bmm','inputs':['a','b']}", "'y'"), 0, NULL);
        break;
    }
    case CASES_GEO_ROW: {
        const char *sm = GRAPH(IN("x", "f32", "[13,1000]"), "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':-1}}", "'y'");
        const char *smb = GRAPH(IN("x", "bf16", "[5,1000]"), "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':-1}}", "'y'");
        const char *am = GRAPH(IN("x", "f32", "[13,300]"), "{'name':'y','op':'argmax','inputs':['x'],'attrs':{'dim':1}}", "'y'");
        static const ic_ptx_params ps[] = {
            { .mode = IC_PTX_ROW, .threads_per_row = 1 },
            { .mode = IC_PTX_ROW, .threads_per_row = 4, .vec = 2 },
            { .mode = IC_PTX_ROW, .threads_per_row = 32 },
            { .mode = IC_PTX_ROW, .threads_per_row = 64, .block = 64 },
            { .mode = IC_PTX_ROW, .threads_per_row = 256, .regs_elems = -1 },
            { .mode = IC_PTX_ROW, .threads_per_row = 1024, .block = 1024 },
            { .mode = IC_PTX_ROW, .threads_per_row = 128, .regs_elems = 4 },
            { .mode = IC_PTX_ROW, .threads_per_row = 16, .vec = 1, .block = 32 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 1 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 8, .block = 64 },
        };
        for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
            char name[128];
            snprintf(name, sizeof name, "softmax params %zu", i);
            f(name, sm, NOFUSE, &ps[i]);
            snprintf(name, sizeof name, "argmax params %zu", i);
            f(name, am, NOFUSE | TIES, &ps[i]);
            if (i % 3 == 0) {
                snprintf(name, sizeof name, "bf16 softmax params %zu", i);
                f(name, smb, NOFUSE, &ps[i]);
            }
        }
        break;
    }
    case CASES_GEO_COLUMN: {
        const char *cs = GRAPH(IN("x", "f32", "[1000,24]"), "{'name':'y','op':'sum','inputs':['x'],'attrs':{'dims':[0]}}", "'y'");
        const char *ca = GRAPH(IN("x", "f32", "[300,24]"), "{'name':'y','op':'argmax','inputs':['x'],'attrs':{'dim':0}}", "'y'");
        const char *cm = GRAPH(IN("x", "f32", "[100,24]"), "{'name':'y','op':'softmax','inputs':['x'],'attrs':{'dim':0}}", "'y'");
        static const ic_ptx_params ps[] = {
            { 0 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 1 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 32, .vec = 4 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 16, .vec = 2, .regs_elems = -1 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 4, .vec = 8, .block = 32 },
            { .mode = IC_PTX_ROW, .threads_per_row = 64 },
            { .mode = IC_PTX_ROW, .threads_per_row = 1 },
        };
        for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
            char name[128];
            snprintf(name, sizeof name, "column sum params %zu", i);
            f(name, cs, NOFUSE, &ps[i]);
            snprintf(name, sizeof name, "column argmax params %zu", i);
            f(name, ca, NOFUSE | TIES, &ps[i]);
            snprintf(name, sizeof name, "column softmax params %zu", i);
            f(name, cm, NOFUSE, &ps[i]);
        }
        break;
    }
    case CASES_GEO_POINTWISE: {
        const char *pw = GRAPH(IN("x", "f32", "[1001]") "," IN("y", "f32", "[1001]"),
                               "{'name':'z','op':'add','inputs':['x','y']}", "'z'");
        const char *pwb = GRAPH(IN("x", "bf16", "[77,40]") "," IN("y", "bf16", "[40]"),
                                "{'name':'z','op':'mul','inputs':['x','y']}", "'z'");
        /* x + b rounded to bf16, then gelu (the rounded value widened again: one
         * cvt.rn.bf16x2.f32 on the GPU), odd rows and a bias row of 17 vectors */
        const char *bg = GRAPH(IN("x", "bf16", "[37,136]") "," IN("b", "bf16", "[136]"),
                               "{'name':'h','op':'add','inputs':['x','b']},{'name':'y','op':'gelu','inputs':['h']}", "'y'");
        static const ic_ptx_params ps[] = {
            { 0 }, { .vec = 1 }, { .vec = 2, .block = 64 }, { .vec = 8, .ept = 3, .block = 32 },
            { .ept = 2 }, { .mode = IC_PTX_ROW, .threads_per_row = 1 },
        };
        for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
            char name[128];
            snprintf(name, sizeof name, "pointwise tail params %zu", i);
            f(name, pw, NOFUSE, &ps[i]);
            snprintf(name, sizeof name, "pointwise bf16 params %zu", i);
            f(name, pwb, NOFUSE, &ps[i]);
            snprintf(name, sizeof name, "bias gelu bf16 params %zu", i);
            f(name, bg, 0, &ps[i]);
        }
        break;
    }
    case CASES_GEMM_F32:
        gemm_cases(f, "f32");
        break;
    case CASES_GEMM_F16:
        gemm_cases(f, "f16");
        break;
    case CASES_GEMM_BF16:
        gemm_cases(f, "bf16");
        break;
    case CASES_GEMM_PARAMS: {
        const char *lb = GRAPH(IN("x", "bf16", "[97,256]") "," IN("w", "bf16", "[40,256]") "," IN("b", "bf16", "[40]"),
                               "{'name':'h','op':'linear','inputs':['x','w','b']},{'name':'y','op':'relu','inputs':['h']}", "'y'");
        const char *lh = GRAPH(IN("x", "f16", "[17,257]") "," IN("w", "f16", "[257,72]"),
                               "{'name':'y','op':'matmul','inputs':['x','w']}", "'y'");
        const char *lf = GRAPH(IN("x", "f32", "[97,200]") "," IN("w", "f32", "[200,40]") "," IN("b", "f32", "[40]"),
                               "{'name':'h','op':'matmul','inputs':['x','w']},{'name':'y','op':'add','inputs':['h','b']}", "'y'");
        static const ic_ptx_params tc[] = {
            { .split_k = 4 },
            { .split_k = 3, .tile_k = 16, .stages = 2 },
            { .tile_m = 64, .tile_n = 64, .warps_m = 2, .warps_n = 2, .stages = 3 },
            { .tile_m = 128, .tile_n = 64, .tile_k = 64, .warps_m = 4, .warps_n = 1, .stages = 2 },
            { .tile_m = 32, .tile_n = 128, .warps_m = 1, .warps_n = 8, .split_k = 2 },
            { .tile_m = 32, .tile_n = 64 }, /* warps from the heuristic for a short tile */
            { .mode = IC_PTX_ROW },
        };
        static const ic_ptx_params ff[] = {
            { .split_k = 5 },
            { .tile_m = 32, .tile_n = 64, .tile_k = 8, .stages = 2 },
            { .tile_m = 64, .tile_n = 128, .tile_k = 32, .stages = 4, .split_k = 2 },
            { .mode = IC_PTX_GEMM, .tile_m = 128, .tile_n = 128 },
        };
        for (size_t i = 0; i < sizeof tc / sizeof *tc; i++) {
            char name[128];
            snprintf(name, sizeof name, "gemm bf16 linear relu params %zu", i);
            f(name, lb, FUSEDONLY, &tc[i]);
            snprintf(name, sizeof name, "gemm f16 matmul params %zu", i);
            f(name, lh, FUSEDONLY, &tc[i]);
        }
        for (size_t i = 0; i < sizeof ff / sizeof *ff; i++) {
            char name[128];
            snprintf(name, sizeof name, "gemm f32 matmul bias params %zu", i);
            f(name, lf, FUSEDONLY, &ff[i]);
        }
        break;
    }
    case CASES_WGMMA: {
        /* Shapes for Hopper's wgmma GEMMs (f16/bf16 with 16-byte aligned rows): edges on every
         * dim, K-major and MN-major
         * operands, batches, a long k (the stage barriers' phases wrap many times),
         * epilogues, and forced tiles. */
        const char *mm = GRAPH(IN("a", "bf16", "[300,520]") "," IN("b", "bf16", "[520,264]"),
                               "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'");
        const char *lin = GRAPH(IN("x", "bf16", "[256,128]") "," IN("w", "bf16", "[192,128]") "," IN("c", "bf16", "[192]"),
                                "{'name':'h','op':'linear','inputs':['x','w','c']},{'name':'y','op':'relu','inputs':['h']}", "'y'");
        const char *ta = GRAPH(IN("a", "f16", "[136,200]") "," IN("b", "f16", "[136,72]"),
                               "{'name':'t','op':'transpose','inputs':['a'],'attrs':{'dim0':0,'dim1':1}},"
                               "{'name':'y','op':'matmul','inputs':['t','b']}", "'y'");
        const char *bm = GRAPH(IN("a", "bf16", "[3,130,64]") "," IN("b", "bf16", "[3,64,96]"),
                               "{'name':'y','op':'bmm','inputs':['a','b']}", "'y'");
        const char *lk = GRAPH(IN("a", "f16", "[128,2048]") "," IN("b", "f16", "[2048,128]"),
                               "{'name':'y','op':'matmul','inputs':['a','b']}", "'y'");
        const char *rs = GRAPH(IN("x", "bf16", "[2,65,96]") "," IN("w", "bf16", "[136,96]") "," IN("r", "bf16", "[2,65,136]"),
                               "{'name':'h','op':'linear','inputs':['x','w']},{'name':'y','op':'add','inputs':['h','r']}", "'y'");
        /* math-library epilogues go through shared memory (wgmma.c's epilogue_staged): even
         * and odd N, edges on M and N */
        const char *ge = GRAPH(IN("x", "bf16", "[200,128]") "," IN("w", "bf16", "[200,128]") "," IN("c", "bf16", "[200]"),
                               "{'name':'h','op':'linear','inputs':['x','w','c']},{'name':'y','op':'gelu','inputs':['h']}", "'y'");
        const char *sg = GRAPH(IN("x", "f16", "[130,64]") "," IN("w", "f16", "[75,64]"),
                               "{'name':'h','op':'linear','inputs':['x','w']},{'name':'y','op':'sigmoid','inputs':['h']}", "'y'");
        /* each shape twice: heuristic params (wgmma on an H100, mma.sync in the emulator),
         * and wgmma forced (the emulator runs the warpgroup code too) */
        static const ic_ptx_params force = { .wgmma = 1 }, f128x64 = { .wgmma = 1, .tile_m = 128, .tile_n = 64 };
        const struct { const char *name; const char **json; const ic_ptx_params *p; } shapes[] = {
            { "wgmma bf16 matmul 300x520x264", &mm, &force },
            { "wgmma bf16 linear bias relu 256x128 -> 192", &lin, &force },
            { "wgmma f16 transposed a 200x136 @ 136x72", &ta, &force },
            { "wgmma bf16 bmm 3x130x64x96", &bm, &force },
            { "wgmma f16 matmul 128x2048x128", &lk, &f128x64 }, /* heuristic: split-k on mma.sync */
            { "wgmma bf16 linear residual 2x65x96 -> 136", &rs, &force },
            { "wgmma bf16 linear bias gelu 200x128 -> 200", &ge, &force },
            { "wgmma f16 linear sigmoid 130x64 -> 75", &sg, &force },
        };
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
            char name[160];
            if (shapes[i].p == &force)
                f(shapes[i].name, *shapes[i].json, 0, NULL);
            snprintf(name, sizeof name, "%s (forced)", shapes[i].name);
            f(name, *shapes[i].json, FUSEDONLY, shapes[i].p);
        }
        static const ic_ptx_params tiles[] = {
            { .wgmma = 1, .tile_m = 128, .tile_n = 256 }, { .wgmma = 1, .tile_m = 64, .tile_n = 64, .stages = 2 },
            { .wgmma = 1, .tile_m = 128, .tile_n = 128, .stages = 3 },
            { .wgmma = 1, .tile_m = 128, .tile_n = 192 }, { .wgmma = 1, .tile_m = 64, .tile_n = 192, .stages = 2 },
        };
        for (size_t i = 0; i < sizeof tiles / sizeof *tiles; i++) {
            char name[128];
            snprintf(name, sizeof name, "wgmma bf16 matmul 300x520x264 params %zu", i);
            f(name, mm, FUSEDONLY, &tiles[i]);
            snprintf(name, sizeof name, "wgmma bf16 linear bias gelu 200x128 -> 200 params %zu", i);
            f(name, ge, FUSEDONLY, &tiles[i]);
        }
        /* 192 columns of a K-major operand (BERT's linears: [4096, 768] in 128 x 192 tiles) */
        f("wgmma bf16 linear bias relu 256x128 -> 192, 128x192 tiles", lin, FUSEDONLY, &tiles[3]);
        break;
    }
    case CASES_ICONV: {
        conv_cases(f);
        break;
    }
    case CASES_SPLIT_ROWS: {
        const char *full = GRAPH(IN("x", "f32", "[3,1000,7]"), "{'name':'y','op':'sum','inputs':['x'],'attrs':{'dims':[0,1,2]}}", "'y'");
        const char *rows = GRAPH(IN("x", "bf16", "[3,5000]"), "{'name':'y','op':'sum','inputs':['x'],'attrs':{'dims':[1]}}", "'y'");
        const char *am = GRAPH(IN("x", "f32", "[2,3000]"), "{'name':'y','op':'argmax','inputs':['x'],'attrs':{'dim':1}}", "'y'");
        const char *mx = GRAPH(IN("x", "f32", "[4000]"), "{'name':'m','op':'amax','inputs':['x'],'attrs':{'dims':[0]}},"
                               "{'name':'y','op':'mul','inputs':['m',2.0]}", "'y'");
        static const ic_ptx_params ps[] = {
            { 0 },
            { .mode = IC_PTX_ROW, .threads_per_row = 32, .blocks_per_row = 4 },
            { .mode = IC_PTX_ROW, .threads_per_row = 64, .blocks_per_row = 16 },
            { .mode = IC_PTX_ROW, .threads_per_row = 128, .blocks_per_row = 2, .regs_elems = -1 },
            { .mode = IC_PTX_ROW, .threads_per_row = 256, .blocks_per_row = 64 },
        };
        for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
            char name[128];
            snprintf(name, sizeof name, "full sum split params %zu", i);
            f(name, full, NOFUSE, &ps[i]);
            snprintf(name, sizeof name, "bf16 row sums split params %zu", i);
            f(name, rows, NOFUSE, &ps[i]);
            snprintf(name, sizeof name, "argmax split params %zu", i);
            f(name, am, NOFUSE | TIES, &ps[i]);
            snprintf(name, sizeof name, "amax then mul split params %zu", i);
            f(name, mx, FUSEDONLY, &ps[i]);
        }
        break;
    }
    case CASES_SPLIT_COLUMNS: {
        /* column reductions split along the reduced dim: odd kept sizes (groups past the
         * last tile, vectors of 1, 4 and 8 lanes), long and short reduced dims, two reduced
         * dims, keepdim, mean, bf16, argmax (value and index through the workspace) */
#define RED(nm, dt, sh, attrs) GRAPH(IN("x", dt, sh), "{'name':'y','op':'" nm "','inputs':['x'],'attrs':{" attrs "}}", "'y'")
        static const struct { const char *name, *json; unsigned flags; } gs[] = {
            { "sum f32 [3000,24]", RED("sum", "f32", "[3000,24]", "'dims':[0]"), 0 },
            { "sum bf16 [2999,40]", RED("sum", "bf16", "[2999,40]", "'dims':[0]"), 0 },
            { "mean f32 keepdim [1001,37]", RED("mean", "f32", "[1001,37]", "'dims':[0],'keepdim':true"), 0 },
            { "sum f32 [20000,3] (long reduced dim)", RED("sum", "f32", "[20000,3]", "'dims':[0]"), 0 },
            { "sum bf16 [9,4104] (short reduced dim)", RED("sum", "bf16", "[9,4104]", "'dims':[0]"), 0 },
            { "sum f32 [40,50,12] dims 0 1", RED("sum", "f32", "[40,50,12]", "'dims':[0,1]"), 0 },
            { "mean bf16 [700,3,16]", RED("mean", "bf16", "[700,3,16]", "'dims':[0]"), 0 },
            { "amax f32 [1500,20]", RED("amax", "f32", "[1500,20]", "'dims':[0]"), 0 },
            { "argmax f32 [1200,13]", RED("argmax", "f32", "[1200,13]", "'dim':0"), TIES },
        };
#undef RED
        static const ic_ptx_params ps[] = {
            { 0 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 32, .blocks_per_row = 4 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 8, .block = 64, .blocks_per_row = 16 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 1, .blocks_per_row = 8 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 32, .vec = 4, .blocks_per_row = 64, .regs_elems = -1 },
            { .mode = IC_PTX_COLUMN, .threads_per_row = 4, .vec = 8, .block = 32, .blocks_per_row = 2 },
        };
        for (size_t g = 0; g < sizeof gs / sizeof *gs; g++)
            for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
                char name[200];
                snprintf(name, sizeof name, "column split %s params %zu", gs[g].name, i);
                f(name, gs[g].json, NOFUSE | gs[g].flags, &ps[i]);
            }
        break;
    }
    default:
        break;
    }
}

#endif
