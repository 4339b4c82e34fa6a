/* test_infer.c - shape and dtype inference of the graph builder against PyTorch's documented
 * rules: broadcasting, type promotion (torch.result_type), negative dims, keepdim, reshape
 * with -1 (also symbolic), expand, squeeze, slice, matmul/linear/bmm, creation ops, dtype
 * refusals, arity, names, specialisation. Expected shapes are worked out by hand from the
 * PyTorch docs; each error test checks the status and what the message names. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ic/ic.h"
#include "testutil.h"

static ic_ctx *c;
static ic_graph *g;

static void setup(void)
{
    c = ict_ctx();
    g = ict_graph(c, "t");
}

static void teardown(void)
{
    ic_graph_destroy(g);
    ic_ctx_destroy(c);
}

TestSuite(infer, .init = setup, .fini = teardown);

/* ---- helpers ---- */

#define OPS(...) (int)(sizeof((ic_operand[]){ __VA_ARGS__ }) / sizeof(ic_operand)), \
                 ((ic_operand[]){ __VA_ARGS__ })
#define V(x) ic_val(x)

static ic_attrs attrs(ic_op op)
{
    ic_attrs a;
    ic_attrs_init(&a, op);
    return a;
}

/* Adds a node that must infer; returns its id. */
static ic_value ok_node(const char *name, ic_op op, int n, const ic_operand *in, const ic_attrs *a)
{
    ic_value v = -1;
    ic_status s = ic_graph_add_node(g, name, op, n, in, a, &v);
    cr_assert_eq(s, IC_OK, "%s (%s): %s", name, ic_op_name(op), ic_last_error(c));
    return v;
}

/* Adds a node that must be refused; the graph must stay unchanged. */
static ic_status bad_node(const char *name, ic_op op, int n, const ic_operand *in, const ic_attrs *a)
{
    int before = ic_graph_num_nodes(g);
    ic_value v = 12345;
    ic_status s = ic_graph_add_node(g, name, op, n, in, a, &v);
    cr_assert_neq(s, IC_OK, "%s (%s) was accepted, shape %s", name, ic_op_name(op),
                  v != 12345 ? ict_shape_of(g, v) : "?");
    cr_assert_eq(ic_graph_num_nodes(g), before, "a refused node must not be added");
    cr_assert(!ic_graph_find(g, name, NULL), "a refused node must not be findable");
    return s;
}

static void shape_attr(ic_attrs *a, const char *text)
{
    a->nshape = ict_shape(g, text, a->shape);
}

static void dims_attr(ic_attrs *a, int n, const int64_t *d)
{
    a->has_dims = true;
    a->ndims = n;
    memcpy(a->dims, d, sizeof(int64_t) * (size_t)n);
}

#define DIMS(...) (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), ((int64_t[]){ __VA_ARGS__ })

static ic_value bin(const char *name, ic_op op, ic_operand a, ic_operand b)
{
    return ok_node(name, op, OPS(a, b), NULL);
}

/* ---- broadcasting ---- */

Test(infer, broadcast_column_with_row)
{
    ic_value a = ict_input(g, "a", IC_F32, "3,1"), b = ict_input(g, "b", IC_F32, "1,4");
    ict_assert_shape(g, bin("y", IC_OP_ADD, V(a), V(b)), "[3, 4]");
}

Test(infer, broadcast_scalar_tensor)
{
    ic_value a = ict_input(g, "a", IC_F32, "[]"), b = ict_input(g, "b", IC_F32, "2,3");
    ict_assert_shape(g, bin("y", IC_OP_MUL, V(a), V(b)), "[2, 3]");
    ict_assert_shape(g, bin("z", IC_OP_MUL, V(b), V(a)), "[2, 3]");
    ict_assert_shape(g, bin("s", IC_OP_ADD, V(a), V(a)), "[]");
    ict_assert_shape(g, bin("n", IC_OP_ADD, V(b), ic_scalar_f(0.5)), "[2, 3]");
    ict_assert_shape(g, bin("m", IC_OP_SUB, ic_scalar_i(1), V(a)), "[]");
}

Test(infer, broadcast_zero_size)
{
    ic_value a = ict_input(g, "a", IC_F32, "0,3"), b = ict_input(g, "b", IC_F32, "1,3");
    ict_assert_shape(g, bin("y", IC_OP_ADD, V(a), V(b)), "[0, 3]");
    ic_value e = ict_input(g, "e", IC_F32, "2,0");
    ict_assert_shape(g, bin("z", IC_OP_ADD, V(e), V(ict_input(g, "one", IC_F32, "1"))), "[2, 0]");
    /* 0 broadcasts only with 1 or 0 */
    ict_assert_error(c, bad_node("w", IC_OP_ADD, OPS(V(a), V(ict_input(g, "c", IC_F32, "2,3"))), NULL),
                     IC_ESHAPE, "[0, 3]", "[2, 3]");
}

Test(infer, broadcast_rank_extension)
{
    ic_value a = ict_input(g, "a", IC_F32, "5,1,4"), b = ict_input(g, "b", IC_F32, "3,1");
    ict_assert_shape(g, bin("y", IC_OP_ADD, V(a), V(b)), "[5, 3, 4]");
    ic_value d = ict_input(g, "d", IC_F32, "4");
    ict_assert_shape(g, bin("z", IC_OP_ADD, V(d), V(a)), "[5, 1, 4]");
}

Test(infer, broadcast_incompatible_names_both_shapes)
{
    ic_value a = ict_input(g, "a", IC_F32, "2,3"), b = ict_input(g, "b", IC_F32, "3,2");
    ict_assert_error(c, bad_node("bad_add", IC_OP_ADD, OPS(V(a), V(b)), NULL), IC_ESHAPE,
                     "graph 't'", "node 'bad_add'", "(add)", "[2, 3]", "[3, 2]");
}

Test(infer, broadcast_symbols)
{
    ic_value a = ict_input(g, "a", IC_F32, "B,1"), b = ict_input(g, "b", IC_F32, "1,4");
    ict_assert_shape(g, bin("y", IC_OP_ADD, V(a), V(b)), "[B, 4]");
    ic_value c2 = ict_input(g, "c2", IC_F32, "B,4");
    ict_assert_shape(g, bin("z", IC_OP_ADD, V(c2), V(c2)), "[B, 4]");
    /* B and 4 are not provably equal: refused at build time */
    ic_value d = ict_input(g, "d", IC_F32, "4,4");
    ict_assert_error(c, bad_node("w", IC_OP_ADD, OPS(V(c2), V(d)), NULL), IC_ESHAPE, "[B, 4]", "[4, 4]");
}

Test(infer, where_broadcasts_three_ways)
{
    ic_value cnd = ict_input(g, "cond", IC_BOOL, "3,1"), a = ict_input(g, "a", IC_F16, "1,4"),
             b = ict_input(g, "b", IC_F16, "[]");
    ic_value y = ok_node("y", IC_OP_WHERE, OPS(V(cnd), V(a), V(b)), NULL);
    ict_assert_shape(g, y, "[3, 4]");
    ict_assert_dtype(g, y, IC_F16);
    ic_value z = ok_node("z", IC_OP_WHERE, OPS(V(cnd), V(a), ic_scalar_f(0.0)), NULL);
    ict_assert_dtype(g, z, IC_F16);
    ic_value i = ict_input(g, "i", IC_I32, "4");
    ict_assert_dtype(g, ok_node("w", IC_OP_WHERE, OPS(V(cnd), V(i), ic_scalar_f(1.5)), NULL), IC_F32);
    ict_assert_dtype(g, ok_node("w2", IC_OP_WHERE, OPS(V(cnd), V(i), ic_scalar_i(7)), NULL), IC_I32);
    ict_assert_shape(g, ok_node("w3", IC_OP_WHERE, OPS(V(cnd), ic_scalar_f(1), ic_scalar_f(0)), NULL), "[3, 1]");
}

/* ---- type promotion (torch.result_type) ---- */

static ic_dtype promote_of(ic_dtype a, ic_dtype b, const char *sa, const char *sb)
{
    static int k;
    char na[16], nb[16], ny[16];
    snprintf(na, sizeof na, "a%d", k);
    snprintf(nb, sizeof nb, "b%d", k);
    snprintf(ny, sizeof ny, "y%d", k++);
    ic_value x = ict_input(g, na, a, sa), y = ict_input(g, nb, b, sb);
    return ict_dtype_of(g, bin(ny, IC_OP_ADD, V(x), V(y)));
}

Test(infer, promotion_between_tensors)
{
    static const struct { ic_dtype a, b, want; } t[] = {
        { IC_BOOL, IC_I32, IC_I32 },  { IC_BOOL, IC_F16, IC_F16 }, { IC_I32, IC_I64, IC_I64 },
        { IC_I64, IC_I32, IC_I64 },   { IC_F16, IC_BF16, IC_F32 }, { IC_BF16, IC_F16, IC_F32 },
        { IC_F32, IC_F64, IC_F64 },   { IC_F16, IC_F32, IC_F32 },  { IC_BF16, IC_F64, IC_F64 },
        { IC_I64, IC_F16, IC_F16 },   { IC_I32, IC_BF16, IC_BF16 }, { IC_I64, IC_F32, IC_F32 },
        { IC_BOOL, IC_BOOL, IC_BOOL }, { IC_F16, IC_F16, IC_F16 },
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        ic_dtype got = promote_of(t[i].a, t[i].b, "2", "2");
        cr_assert_eq(got, t[i].want, "%s + %s: got %s, want %s", ic_dtype_name(t[i].a),
                     ic_dtype_name(t[i].b), ic_dtype_name(got), ic_dtype_name(t[i].want));
    }
}

/* Every pair of dtypes and every dtype with a Python int and float, against the table
 * unittests/Graph/promotion_table.py prints from torch.result_type (torch 1.13): u8 with i8
 * is i16, an int number keeps a tensor's integer dtype, a float number makes ints f32. */
Test(infer, promotion_table_of_torch)
{
    static const ic_dtype pair[IC_DTYPE_COUNT][IC_DTYPE_COUNT] = {
    { IC_F32, IC_F64, IC_F32, IC_F32, IC_F32, IC_F32, IC_F32, IC_F32, IC_F32, IC_F32 }, /* f32 */
    { IC_F64, IC_F64, IC_F64, IC_F64, IC_F64, IC_F64, IC_F64, IC_F64, IC_F64, IC_F64 }, /* f64 */
    { IC_F32, IC_F64, IC_F16, IC_F32, IC_F16, IC_F16, IC_F16, IC_F16, IC_F16, IC_F16 }, /* f16 */
    { IC_F32, IC_F64, IC_F32, IC_BF16, IC_BF16, IC_BF16, IC_BF16, IC_BF16, IC_BF16, IC_BF16 }, /* bf16 */
    { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_I32, IC_I32, IC_I32, IC_I32 }, /* i32 */
    { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I64, IC_I64, IC_I64, IC_I64, IC_I64, IC_I64 }, /* i64 */
    { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL, IC_U8, IC_I8, IC_I16 }, /* bool */
    { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_U8, IC_U8, IC_I16, IC_I16 }, /* u8 */
    { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_I8, IC_I16, IC_I8, IC_I16 }, /* i8 */
    { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_I16, IC_I16, IC_I16, IC_I16 }, /* i16 */
    };
    static const ic_dtype num[IC_DTYPE_COUNT][2] = {
    { IC_F32, IC_F32 }, /* f32 */
    { IC_F64, IC_F64 }, /* f64 */
    { IC_F16, IC_F16 }, /* f16 */
    { IC_BF16, IC_BF16 }, /* bf16 */
    { IC_I32, IC_F32 }, /* i32 */
    { IC_I64, IC_F32 }, /* i64 */
    { IC_I64, IC_F32 }, /* bool */
    { IC_U8, IC_F32 }, /* u8 */
    { IC_I8, IC_F32 }, /* i8 */
    { IC_I16, IC_F32 }, /* i16 */
    };
    for (int a = 0; a < IC_DTYPE_COUNT; a++) {
        for (int b = 0; b < IC_DTYPE_COUNT; b++) {
            ic_dtype got = promote_of((ic_dtype)a, (ic_dtype)b, "2", "2");
            cr_assert_eq(got, pair[a][b], "%s + %s: got %s, want %s", ic_dtype_name((ic_dtype)a),
                         ic_dtype_name((ic_dtype)b), ic_dtype_name(got), ic_dtype_name(pair[a][b]));
        }
        char nm[32];
        snprintf(nm, sizeof nm, "pn%d", a);
        ic_value x = ict_input(g, nm, (ic_dtype)a, "2");
        for (int f = 0; f < 2; f++) {
            snprintf(nm, sizeof nm, "pn%d_%d", a, f);
            ic_dtype got = ict_dtype_of(g, bin(nm, IC_OP_ADD, V(x), f ? ic_scalar_f(0.5) : ic_scalar_i(3)));
            cr_assert_eq(got, num[a][f], "%s + %s: got %s, want %s", ic_dtype_name((ic_dtype)a),
                         f ? "0.5" : "3", ic_dtype_name(got), ic_dtype_name(num[a][f]));
        }
    }
}

/* u8/i8/i16: the dtype rules of each op family (dtype.c), as PyTorch 1.13 answers them. */
Test(infer, narrow_integer_dtype_rules)
{
    ic_value u = ict_input(g, "u", IC_U8, "3"), i = ict_input(g, "i", IC_I8, "3");
    ic_value b = ict_input(g, "b", IC_BOOL, "3"), s = ict_input(g, "s", IC_I16, "3");
    ict_assert_dtype(g, bin("ui", IC_OP_ADD, V(u), V(i)), IC_I16);
    ict_assert_dtype(g, bin("us", IC_OP_MUL, V(u), V(s)), IC_I16);
    ict_assert_dtype(g, bin("bu", IC_OP_ADD, V(b), V(u)), IC_U8);
    ict_assert_dtype(g, bin("ud", IC_OP_DIV, V(u), V(u)), IC_F32);
    ict_assert_dtype(g, bin("ulf", IC_OP_LT, V(u), ic_scalar_i(300)), IC_BOOL);
    ict_assert_dtype(g, bin("urem", IC_OP_REMAINDER, V(i), ic_scalar_i(7)), IC_I8);
    ict_assert_dtype(g, ok_node("un", IC_OP_NEG, OPS(V(u)), NULL), IC_U8); /* wraps; bool: error */
    ict_assert_dtype(g, ok_node("ua", IC_OP_ABS, OPS(V(u)), NULL), IC_U8);
    ict_assert_dtype(g, ok_node("ue", IC_OP_EXP, OPS(V(s)), NULL), IC_F32);
    ict_assert_dtype(g, ok_node("ul", IC_OP_LOGICAL_NOT, OPS(V(i)), NULL), IC_BOOL);
    ict_assert_dtype(g, ok_node("usum", IC_OP_SUM, OPS(V(u)), NULL), IC_I64);
    ict_assert_dtype(g, ok_node("iprod", IC_OP_PROD, OPS(V(i)), NULL), IC_I64);
    ict_assert_dtype(g, ok_node("samax", IC_OP_AMAX, OPS(V(s)), NULL), IC_I16);
    ic_attrs a = attrs(IC_OP_ARGMAX);
    a.dim = 0;
    ict_assert_dtype(g, ok_node("uam", IC_OP_ARGMAX, OPS(V(u)), &a), IC_I64);
    cr_assert_eq(bad_node("umean", IC_OP_MEAN, OPS(V(u)), NULL), IC_EDTYPE);
    cr_assert(strstr(ic_last_error(c), "u8"), "%s", ic_last_error(c));
    /* clamp bounds convert to the tensor's dtype: u8 takes -255..255, i8 -128..127 */
    a = attrs(IC_OP_CLAMP);
    a.has_max = true;
    a.max = (ic_scalar){ 300, 300, true };
    cr_assert_eq(bad_node("uc", IC_OP_CLAMP, OPS(V(u)), &a), IC_EINVAL);
    cr_assert(strstr(ic_last_error(c), "cannot be converted to u8"), "%s", ic_last_error(c));
    a.max = (ic_scalar){ -200, -200, true };
    ok_node("uc2", IC_OP_CLAMP, OPS(V(u)), &a);
    cr_assert_eq(bad_node("ic", IC_OP_CLAMP, OPS(V(i)), &a), IC_EINVAL);
    /* integer aranges: int64 arithmetic from truncated start and step; i64's length from
     * the truncated bounds, the others' from the numbers (torch 1.13) */
    static const struct { ic_dtype t; double st, en, sp; const char *len; } ar[] = {
        { IC_I32, 0, 5, 1.5, "[4]" }, { IC_I64, 0, 5, 1.5, "[5]" }, { IC_U8, -0.5, 3, 1, "[4]" },
        { IC_I16, 2.9, -3.2, -1.5, "[5]" }, { IC_I64, 0.5, 5.7, 1.5, "[5]" },
    };
    for (size_t k = 0; k < sizeof ar / sizeof *ar; k++) {
        char nm[16];
        snprintf(nm, sizeof nm, "ar%zu", k);
        a = attrs(IC_OP_ARANGE);
        a.has_dtype = true;
        a.dtype = ar[k].t;
        a.astart = (ic_scalar){ ar[k].st, (int64_t)ar[k].st, false };
        a.aend = (ic_scalar){ ar[k].en, (int64_t)ar[k].en, false };
        a.astep = (ic_scalar){ ar[k].sp, (int64_t)ar[k].sp, false };
        cr_assert_str_eq(ict_shape_of(g, ok_node(nm, IC_OP_ARANGE, 0, NULL, &a)), ar[k].len, "%s", nm);
    }
    a.astep = (ic_scalar){ 0.5, 0, false };
    cr_assert_eq(bad_node("ar_zero", IC_OP_ARANGE, 0, NULL, &a), IC_EINVAL);
    cr_assert(strstr(ic_last_error(c), "step must be nonzero"), "%s", ic_last_error(c));
    for (int d = IC_U8; d <= IC_I16; d++) { /* names and sizes */
        ic_dtype back;
        cr_assert(ic_dtype_from_name(ic_dtype_name((ic_dtype)d), &back) && back == (ic_dtype)d);
        cr_assert_eq(ic_dtype_size((ic_dtype)d), d == IC_I16 ? 2u : 1u);
        cr_assert(ic_dtype_is_int((ic_dtype)d) && !ic_dtype_is_float((ic_dtype)d));
    }
}

/* Numbers only raise the category: to i64 (ints) or the default f32 (floats). */
Test(infer, promotion_with_numbers)
{
    static const struct { ic_dtype t; bool is_int; double v; ic_op op; ic_dtype want; } t[] = {
        { IC_I32, false, 0.5, IC_OP_MUL, IC_F32 },  { IC_I64, false, 0.5, IC_OP_MUL, IC_F32 },
        { IC_BOOL, true, 1, IC_OP_ADD, IC_I64 },    { IC_BOOL, false, 1, IC_OP_ADD, IC_F32 },
        { IC_I32, true, 1, IC_OP_ADD, IC_I32 },     { IC_F16, false, 2.5, IC_OP_ADD, IC_F16 },
        { IC_BF16, true, 3, IC_OP_MUL, IC_BF16 },   { IC_F64, false, 0.1, IC_OP_SUB, IC_F64 },
        { IC_I32, true, 2, IC_OP_DIV, IC_F32 },     { IC_F16, true, 2, IC_OP_DIV, IC_F16 },
        { IC_I64, true, 3, IC_OP_POW, IC_I64 },     { IC_I32, false, 0.5, IC_OP_POW, IC_F32 },
        { IC_I32, true, 3, IC_OP_MAXIMUM, IC_I32 },
    };
    ic_value in[IC_DTYPE_COUNT];
    for (int d = 0; d < IC_DTYPE_COUNT; d++) {
        char nm[16];
        snprintf(nm, sizeof nm, "x_%s", ic_dtype_name((ic_dtype)d));
        in[d] = ict_input(g, nm, (ic_dtype)d, "3");
    }
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "y%zu", i);
        ic_operand s = t[i].is_int ? ic_scalar_i((int64_t)t[i].v) : ic_scalar_f(t[i].v);
        ic_dtype got = ict_dtype_of(g, bin(nm, t[i].op, V(in[t[i].t]), s));
        cr_assert_eq(got, t[i].want, "%s %s %s%g: got %s, want %s", ic_dtype_name(t[i].t),
                     ic_op_name(t[i].op), t[i].is_int ? "int " : "float ", t[i].v,
                     ic_dtype_name(got), ic_dtype_name(t[i].want));
    }
    /* number on the left behaves the same */
    ict_assert_dtype(g, bin("l", IC_OP_MUL, ic_scalar_f(0.5), V(in[IC_I32])), IC_F32);
}

/* 0-d tensors count only when of a higher category than the tensors with dims (the
 * torch.result_type examples: int_tensor + long_zerodim is int32). */
Test(infer, promotion_with_zero_dim_tensors)
{
    static const struct { ic_dtype dim, zero, want; } t[] = {
        { IC_I32, IC_I64, IC_I32 },  { IC_F16, IC_F32, IC_F16 }, { IC_F16, IC_F64, IC_F16 },
        { IC_I32, IC_F64, IC_F64 },  { IC_BOOL, IC_I32, IC_I32 }, { IC_I64, IC_BOOL, IC_I64 },
        { IC_BF16, IC_F16, IC_BF16 }, { IC_I64, IC_F16, IC_F16 },
    };
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        ic_dtype got = promote_of(t[i].dim, t[i].zero, "4", "[]");
        cr_assert_eq(got, t[i].want, "%s[4] + %s[]: got %s, want %s", ic_dtype_name(t[i].dim),
                     ic_dtype_name(t[i].zero), ic_dtype_name(got), ic_dtype_name(t[i].want));
        got = promote_of(t[i].zero, t[i].dim, "[]", "4");
        cr_assert_eq(got, t[i].want, "%s[] + %s[4]: got %s, want %s", ic_dtype_name(t[i].zero),
                     ic_dtype_name(t[i].dim), ic_dtype_name(got), ic_dtype_name(t[i].want));
    }
    /* two 0-d tensors promote normally */
    cr_assert_eq(promote_of(IC_I32, IC_I64, "[]", "[]"), IC_I64);
    /* a 0-d int with a float number: float wins */
    ic_value z = ict_input(g, "z", IC_I32, "[]");
    ict_assert_dtype(g, bin("zf", IC_OP_ADD, V(z), ic_scalar_f(0.5)), IC_F32);
    ict_assert_dtype(g, bin("zi", IC_OP_ADD, V(z), ic_scalar_i(5)), IC_I32);
}

Test(infer, division_and_comparisons)
{
    ic_value a = ict_input(g, "a", IC_I32, "3"), b = ict_input(g, "b", IC_I64, "3"),
             h = ict_input(g, "h", IC_F16, "3"), f = ict_input(g, "f", IC_F32, "3"),
             q = ict_input(g, "q", IC_BOOL, "3");
    ict_assert_dtype(g, bin("d1", IC_OP_DIV, V(a), V(b)), IC_F32);
    ict_assert_dtype(g, bin("d2", IC_OP_DIV, V(h), V(h)), IC_F16);
    ict_assert_dtype(g, bin("d3", IC_OP_DIV, V(q), V(q)), IC_F32);
    ic_op cmp[] = { IC_OP_EQ, IC_OP_NE, IC_OP_LT, IC_OP_LE, IC_OP_GT, IC_OP_GE,
                    IC_OP_LOGICAL_AND, IC_OP_LOGICAL_OR };
    for (size_t i = 0; i < sizeof cmp / sizeof *cmp; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "c%zu", i);
        ict_assert_dtype(g, bin(nm, cmp[i], V(f), V(b)), IC_BOOL);
    }
    ict_assert_dtype(g, bin("e", IC_OP_EQ, V(h), ic_scalar_f(0.5)), IC_BOOL);
    ic_node_info in;
    ic_value lt;
    cr_assert(ic_graph_find(g, "c2", &lt));
    ic_graph_node(g, lt, &in);
    cr_assert_eq(in.dtype, IC_BOOL);
    ict_assert_error(c, bad_node("s", IC_OP_SUB, OPS(V(q), V(q)), NULL), IC_EDTYPE, "node 's'", "(sub)", "bool");
}

Test(infer, unary_dtypes)
{
    ic_value i = ict_input(g, "i", IC_I32, "2"), b = ict_input(g, "b", IC_BOOL, "2"),
             h = ict_input(g, "h", IC_F16, "2");
    ict_assert_dtype(g, ok_node("e", IC_OP_EXP, OPS(V(i)), NULL), IC_F32);
    ict_assert_dtype(g, ok_node("s", IC_OP_SQRT, OPS(V(b)), NULL), IC_F32);
    ict_assert_dtype(g, ok_node("sg", IC_OP_SIGMOID, OPS(V(h)), NULL), IC_F16);
    ict_assert_dtype(g, ok_node("n", IC_OP_NEG, OPS(V(i)), NULL), IC_I32);
    ict_assert_dtype(g, ok_node("ln", IC_OP_LOGICAL_NOT, OPS(V(h)), NULL), IC_BOOL);
    ic_attrs a = attrs(IC_OP_CAST);
    a.has_dtype = true, a.dtype = IC_BF16;
    ict_assert_dtype(g, ok_node("ca", IC_OP_CAST, OPS(V(i)), &a), IC_BF16);
    ict_assert_error(c, bad_node("ca2", IC_OP_CAST, OPS(V(i)), NULL), IC_EINVAL, "(cast)", "dtype");
    ict_assert_error(c, bad_node("nb", IC_OP_NEG, OPS(V(b)), NULL), IC_EDTYPE, "(neg)", "bool");
    ict_assert_error(c, bad_node("si", IC_OP_SILU, OPS(V(i)), NULL), IC_EDTYPE, "node 'si'", "(silu)", "i32");
    ict_assert_error(c, bad_node("ge", IC_OP_GELU, OPS(V(i)), NULL), IC_EDTYPE, "(gelu)", "i32");
    a = attrs(IC_OP_CLAMP);
    a.has_min = true, a.min = (ic_scalar){ 0.5, 0, false };
    ict_assert_dtype(g, ok_node("cl", IC_OP_CLAMP, OPS(V(i)), &a), IC_F32);
    a.min = (ic_scalar){ 0, 0, true };
    ict_assert_dtype(g, ok_node("cl2", IC_OP_CLAMP, OPS(V(i)), &a), IC_I32);
    ict_assert_error(c, bad_node("u", IC_OP_EXP, OPS(ic_scalar_f(1)), NULL), IC_EINVAL, "(exp)", "tensor");
}

/* The ops of issue 11 take what PyTorch takes: log1p/expm1 lift integers and bool to f32,
 * sign keeps every dtype (bool too), round keeps numbers but refuses bool, the activations
 * want floats, remainder promotes like sub and refuses two bools. */
Test(infer, log1p_sign_round_remainder_activation_dtypes)
{
    ic_value i = ict_input(g, "i", IC_I32, "2"), b = ict_input(g, "b", IC_BOOL, "2"),
             h = ict_input(g, "h", IC_BF16, "2"), l = ict_input(g, "l", IC_I64, "3,1");
    ict_assert_dtype(g, ok_node("lp", IC_OP_LOG1P, OPS(V(i)), NULL), IC_F32);
    ict_assert_dtype(g, ok_node("em", IC_OP_EXPM1, OPS(V(b)), NULL), IC_F32);
    ict_assert_dtype(g, ok_node("em2", IC_OP_EXPM1, OPS(V(h)), NULL), IC_BF16);
    ict_assert_dtype(g, ok_node("sg", IC_OP_SIGN, OPS(V(b)), NULL), IC_BOOL);
    ict_assert_dtype(g, ok_node("sg2", IC_OP_SIGN, OPS(V(i)), NULL), IC_I32);
    ict_assert_dtype(g, ok_node("rd", IC_OP_ROUND, OPS(V(i)), NULL), IC_I32);
    ict_assert_error(c, bad_node("rb", IC_OP_ROUND, OPS(V(b)), NULL), IC_EDTYPE, "(round)", "bool");
    const ic_op acts[] = { IC_OP_HARDSWISH, IC_OP_HARDSIGMOID, IC_OP_LEAKY_RELU, IC_OP_SOFTPLUS };
    for (int k = 0; k < 4; k++) {
        ict_assert_dtype(g, ok_node(ic_op_name(acts[k]), acts[k], OPS(V(h)), NULL), IC_BF16);
        ict_assert_error(c, bad_node("a", acts[k], OPS(V(i)), NULL), IC_EDTYPE, ic_op_name(acts[k]), "i32");
    }
    ic_value r = ok_node("r", IC_OP_REMAINDER, OPS(V(l), V(i)), NULL);
    ict_assert_dtype(g, r, IC_I64);
    ict_assert_shape(g, r, "[3, 2]");
    ict_assert_dtype(g, ok_node("r2", IC_OP_REMAINDER, OPS(V(i), ic_scalar_f(2.5)), NULL), IC_F32);
    ict_assert_error(c, bad_node("rbb", IC_OP_REMAINDER, OPS(V(b), V(b)), NULL), IC_EDTYPE, "(remainder)", "bool");
}

/* ---- dtype refusals ---- */

Test(infer, dtype_refusals)
{
    ic_value l = ict_input(g, "l", IC_I64, "2,3"), i = ict_input(g, "i", IC_I32, "3,3"),
             f = ict_input(g, "f", IC_F32, "3,3"), h = ict_input(g, "h", IC_F16, "3,3");
    ic_attrs a = attrs(IC_OP_SOFTMAX);
    a.dim = -1;
    ict_assert_error(c, bad_node("sm", IC_OP_SOFTMAX, OPS(V(l)), &a), IC_EDTYPE, "node 'sm'", "(softmax)", "i64");
    ict_assert_error(c, bad_node("lsm", IC_OP_LOG_SOFTMAX, OPS(V(l)), &a), IC_EDTYPE, "(log_softmax)", "i64");
    ict_assert_error(c, bad_node("si", IC_OP_SILU, OPS(V(i)), NULL), IC_EDTYPE, "(silu)", "i32");
    ict_assert_error(c, bad_node("w", IC_OP_WHERE, OPS(V(i), V(f), V(f)), NULL), IC_EDTYPE,
                     "node 'w'", "(where)", "bool", "i32");
    ict_assert_error(c, bad_node("mm", IC_OP_MATMUL, OPS(V(f), V(h)), NULL), IC_EDTYPE,
                     "node 'mm'", "(matmul)", "f32", "f16");
    ict_assert_error(c, bad_node("mn", IC_OP_MEAN, OPS(V(i)), NULL), IC_EDTYPE, "(mean)", "i32");
    ic_value q = ict_input(g, "q", IC_BOOL, "3,3");
    ict_assert_error(c, bad_node("mb", IC_OP_MATMUL, OPS(V(q), V(q)), NULL), IC_EDTYPE, "(matmul)", "bool");
    ic_attrs am = attrs(IC_OP_ARGMAX);
    ict_assert_error(c, bad_node("am", IC_OP_ARGMAX, OPS(V(q)), &am), IC_EDTYPE, "(argmax)", "bool");
    ic_attrs ln = attrs(IC_OP_LAYER_NORM);
    shape_attr(&ln, "3");
    ict_assert_error(c, bad_node("ln", IC_OP_LAYER_NORM, OPS(V(i)), &ln), IC_EDTYPE, "(layer_norm)", "i32");
    ic_value w16 = ict_input(g, "w16", IC_F16, "3");
    ict_assert_error(c, bad_node("ln2", IC_OP_LAYER_NORM, OPS(V(f), V(w16)), &ln), IC_EDTYPE,
                     "(layer_norm)", "f16", "f32");
    ic_value wt = ict_input(g, "wt", IC_F32, "10,4");
    ict_assert_error(c, bad_node("em", IC_OP_EMBEDDING, OPS(V(wt), V(f)), NULL), IC_EDTYPE,
                     "(embedding)", "f32");
}

/* ---- reductions ---- */

Test(infer, reductions_negative_dims_and_keepdim)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3,4");
    ic_attrs a = attrs(IC_OP_SUM);
    dims_attr(&a, DIMS(-1));
    ict_assert_shape(g, ok_node("s1", IC_OP_SUM, OPS(V(x)), &a), "[2, 3]");
    a.keepdim = true;
    ict_assert_shape(g, ok_node("s2", IC_OP_SUM, OPS(V(x)), &a), "[2, 3, 1]");
    dims_attr(&a, DIMS(0, -1));
    ict_assert_shape(g, ok_node("s3", IC_OP_AMAX, OPS(V(x)), &a), "[1, 3, 1]");
    a.keepdim = false;
    ict_assert_shape(g, ok_node("s4", IC_OP_MEAN, OPS(V(x)), &a), "[3]");
    /* every dim: absent dims, or an empty list */
    ic_attrs all = attrs(IC_OP_SUM);
    ict_assert_shape(g, ok_node("s5", IC_OP_SUM, OPS(V(x)), &all), "[]");
    all.keepdim = true;
    ict_assert_shape(g, ok_node("s6", IC_OP_PROD, OPS(V(x)), &all), "[1, 1, 1]");
    all.keepdim = false;
    all.has_dims = true, all.ndims = 0;
    ict_assert_shape(g, ok_node("s7", IC_OP_AMIN, OPS(V(x)), &all), "[]");
    dims_attr(&a, DIMS(2, 0, 1));
    ict_assert_shape(g, ok_node("s8", IC_OP_SUM, OPS(V(x)), &a), "[]");
    ic_attrs am = attrs(IC_OP_ARGMAX);
    am.dim = -2;
    ic_value y = ok_node("am", IC_OP_ARGMAX, OPS(V(x)), &am);
    ict_assert_shape(g, y, "[2, 4]");
    ict_assert_dtype(g, y, IC_I64);
    am.keepdim = true;
    ict_assert_shape(g, ok_node("am2", IC_OP_ARGMAX, OPS(V(x)), &am), "[2, 1, 4]");
}

Test(infer, reduction_dtypes)
{
    ic_value i = ict_input(g, "i", IC_I32, "4"), b = ict_input(g, "b", IC_BOOL, "4"),
             h = ict_input(g, "h", IC_F16, "4");
    ict_assert_dtype(g, ok_node("s", IC_OP_SUM, OPS(V(i)), NULL), IC_I64);
    ict_assert_dtype(g, ok_node("sb", IC_OP_SUM, OPS(V(b)), NULL), IC_I64);
    ict_assert_dtype(g, ok_node("p", IC_OP_PROD, OPS(V(i)), NULL), IC_I64);
    ict_assert_dtype(g, ok_node("sh", IC_OP_SUM, OPS(V(h)), NULL), IC_F16);
    ict_assert_dtype(g, ok_node("mx", IC_OP_AMAX, OPS(V(i)), NULL), IC_I32);
    ict_assert_dtype(g, ok_node("mh", IC_OP_MEAN, OPS(V(h)), NULL), IC_F16);
}

Test(infer, reduction_errors)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3");
    ic_attrs a = attrs(IC_OP_SUM);
    dims_attr(&a, DIMS(2));
    ict_assert_error(c, bad_node("r", IC_OP_SUM, OPS(V(x)), &a), IC_EINVAL, "node 'r'", "(sum)",
                     "dim 2", "rank 2", "-2..1");
    dims_attr(&a, DIMS(-3));
    ict_assert_error(c, bad_node("r", IC_OP_SUM, OPS(V(x)), &a), IC_EINVAL, "dim -3");
    dims_attr(&a, DIMS(1, -1));
    ict_assert_error(c, bad_node("r", IC_OP_SUM, OPS(V(x)), &a), IC_EINVAL, "twice");
    ic_value z = ict_input(g, "z", IC_F32, "0,3");
    dims_attr(&a, DIMS(0));
    ict_assert_error(c, bad_node("r", IC_OP_AMAX, OPS(V(z)), &a), IC_ESHAPE, "(amax)", "size 0");
    ict_assert_shape(g, ok_node("ok", IC_OP_SUM, OPS(V(z)), &a), "[3]"); /* sum has identity 0 */
}

Test(infer, reduce_scalar_tensor)
{
    ic_value s = ict_input(g, "s", IC_F32, "[]");
    ic_attrs a = attrs(IC_OP_SUM);
    dims_attr(&a, DIMS(-1));
    ict_assert_shape(g, ok_node("r", IC_OP_SUM, OPS(V(s)), &a), "[]");
    dims_attr(&a, DIMS(1));
    ict_assert_error(c, bad_node("r2", IC_OP_SUM, OPS(V(s)), &a), IC_EINVAL, "dim 1");
}

/* ---- normalisation ---- */

Test(infer, softmax_and_norms)
{
    ic_value x = ict_input(g, "x", IC_F32, "B,8,16");
    ic_attrs a = attrs(IC_OP_SOFTMAX);
    a.dim = -1;
    ic_value y = ok_node("sm", IC_OP_SOFTMAX, OPS(V(x)), &a);
    ict_assert_shape(g, y, "[B, 8, 16]");
    a.dim = 3;
    ict_assert_error(c, bad_node("sm2", IC_OP_SOFTMAX, OPS(V(x)), &a), IC_EINVAL, "(softmax)", "dim 3");
    ic_value w = ict_input(g, "w", IC_F32, "16"), b = ict_input(g, "b", IC_F32, "16");
    ic_attrs ln = attrs(IC_OP_LAYER_NORM);
    shape_attr(&ln, "16");
    ict_assert_shape(g, ok_node("ln", IC_OP_LAYER_NORM, OPS(V(x), V(w), V(b)), &ln), "[B, 8, 16]");
    ict_assert_shape(g, ok_node("ln_nw", IC_OP_LAYER_NORM, OPS(V(x), ic_none(), V(b)), &ln), "[B, 8, 16]");
    ic_attrs ln2 = attrs(IC_OP_LAYER_NORM);
    shape_attr(&ln2, "8,16");
    ict_assert_shape(g, ok_node("ln2", IC_OP_LAYER_NORM, OPS(V(x)), &ln2), "[B, 8, 16]");
    ic_attrs rn = attrs(IC_OP_RMS_NORM);
    cr_assert_float_eq(rn.eps, 1e-6, 1e-12, "rms_norm eps default %g", rn.eps);
    cr_assert_float_eq(ln.eps, 1e-5, 1e-12, "layer_norm eps default %g", ln.eps);
    shape_attr(&rn, "16");
    ict_assert_shape(g, ok_node("rn", IC_OP_RMS_NORM, OPS(V(x), V(w)), &rn), "[B, 8, 16]");
}

Test(infer, layer_norm_shape_mismatch)
{
    ic_value x = ict_input(g, "x", IC_F32, "4,8,16");
    ic_attrs ln = attrs(IC_OP_LAYER_NORM);
    shape_attr(&ln, "8");
    ict_assert_error(c, bad_node("ln", IC_OP_LAYER_NORM, OPS(V(x)), &ln), IC_ESHAPE,
                     "node 'ln'", "(layer_norm)", "[8]", "[4, 8, 16]");
    shape_attr(&ln, "16");
    ic_value w = ict_input(g, "w", IC_F32, "8");
    ict_assert_error(c, bad_node("ln", IC_OP_LAYER_NORM, OPS(V(x), V(w)), &ln), IC_ESHAPE,
                     "(layer_norm)", "[8]", "[16]");
    shape_attr(&ln, "2,4,8,16");
    ict_assert_error(c, bad_node("ln", IC_OP_LAYER_NORM, OPS(V(x)), &ln), IC_ESHAPE, "normalized_shape");
    ln.nshape = 0;
    ict_assert_error(c, bad_node("ln", IC_OP_LAYER_NORM, OPS(V(x)), &ln), IC_ESHAPE, "normalized_shape");
}

/* ---- views ---- */

Test(infer, reshape_with_minus_one)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3,4");
    ic_attrs a = attrs(IC_OP_RESHAPE);
    shape_attr(&a, "-1,4");
    ict_assert_shape(g, ok_node("r1", IC_OP_RESHAPE, OPS(V(x)), &a), "[6, 4]");
    shape_attr(&a, "4,-1");
    ict_assert_shape(g, ok_node("r2", IC_OP_RESHAPE, OPS(V(x)), &a), "[4, 6]");
    shape_attr(&a, "-1");
    ict_assert_shape(g, ok_node("r3", IC_OP_RESHAPE, OPS(V(x)), &a), "[24]");
    shape_attr(&a, "1,24,1");
    ict_assert_shape(g, ok_node("r4", IC_OP_RESHAPE, OPS(V(x)), &a), "[1, 24, 1]");
    ic_value one = ict_input(g, "one", IC_F32, "1,1");
    shape_attr(&a, "[]");
    ict_assert_shape(g, ok_node("r5", IC_OP_RESHAPE, OPS(V(one)), &a), "[]");
    ic_value z = ict_input(g, "z", IC_F32, "0,3");
    shape_attr(&a, "-1,3");
    ict_assert_shape(g, ok_node("r6", IC_OP_RESHAPE, OPS(V(z)), &a), "[0, 3]");
}

Test(infer, reshape_symbolic)
{
    ic_value x = ict_input(g, "x", IC_F32, "B,128,768");
    ic_attrs a = attrs(IC_OP_RESHAPE);
    shape_attr(&a, "-1,768");
    ic_value y = ok_node("y", IC_OP_RESHAPE, OPS(V(x)), &a);
    ict_assert_shape(g, y, "[128*B, 768]");
    shape_attr(&a, "B,128,12,64");
    ict_assert_shape(g, ok_node("h", IC_OP_RESHAPE, OPS(V(x)), &a), "[B, 128, 12, 64]");
    shape_attr(&a, "B,-1,64");
    ict_assert_shape(g, ok_node("h2", IC_OP_RESHAPE, OPS(V(x)), &a), "[B, 1536, 64]");
    /* back again: [128*B, 768] -> [B, 128, 768] */
    shape_attr(&a, "B,128,768");
    ict_assert_shape(g, ok_node("back", IC_OP_RESHAPE, OPS(V(y)), &a), "[B, 128, 768]");
    /* B cannot be pulled out of a shape without B */
    ic_value f = ict_input(g, "f", IC_F32, "128,768");
    shape_attr(&a, "B,-1");
    ict_assert_error(c, bad_node("bad", IC_OP_RESHAPE, OPS(V(f)), &a), IC_ESHAPE, "(reshape)", "[B, -1]", "[128, 768]");
}

Test(infer, reshape_errors)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3");
    ic_attrs a = attrs(IC_OP_RESHAPE);
    shape_attr(&a, "4,2");
    ict_assert_error(c, bad_node("r", IC_OP_RESHAPE, OPS(V(x)), &a), IC_ESHAPE, "node 'r'",
                     "(reshape)", "[4, 2]", "[2, 3]");
    shape_attr(&a, "-1,-1");
    ict_assert_error(c, bad_node("r", IC_OP_RESHAPE, OPS(V(x)), &a), IC_ESHAPE, "more than one -1");
    shape_attr(&a, "-2,-3");
    ict_assert_error(c, bad_node("r", IC_OP_RESHAPE, OPS(V(x)), &a), IC_ESHAPE, "negative");
    shape_attr(&a, "-1,4");
    ict_assert_error(c, bad_node("r", IC_OP_RESHAPE, OPS(V(x)), &a), IC_ESHAPE, "[-1, 4]", "[2, 3]");
    ic_value z = ict_input(g, "z", IC_F32, "0,3");
    shape_attr(&a, "-1,0");
    ict_assert_error(c, bad_node("r", IC_OP_RESHAPE, OPS(V(z)), &a), IC_ESHAPE, "-1");
}

Test(infer, permute_and_transpose)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3,4");
    ic_attrs t = attrs(IC_OP_TRANSPOSE);
    t.dim0 = -2, t.dim1 = -1;
    ict_assert_shape(g, ok_node("t", IC_OP_TRANSPOSE, OPS(V(x)), &t), "[2, 4, 3]");
    t.dim0 = 0, t.dim1 = -1;
    ict_assert_shape(g, ok_node("t2", IC_OP_TRANSPOSE, OPS(V(x)), &t), "[4, 3, 2]");
    t.dim0 = 1, t.dim1 = 1;
    ict_assert_shape(g, ok_node("t3", IC_OP_TRANSPOSE, OPS(V(x)), &t), "[2, 3, 4]");
    t.dim0 = 3;
    ict_assert_error(c, bad_node("t4", IC_OP_TRANSPOSE, OPS(V(x)), &t), IC_EINVAL, "(transpose)", "dim0 3");
    ic_attrs p = attrs(IC_OP_PERMUTE);
    dims_attr(&p, DIMS(2, 0, 1));
    ict_assert_shape(g, ok_node("p", IC_OP_PERMUTE, OPS(V(x)), &p), "[4, 2, 3]");
    dims_attr(&p, DIMS(-1, -3, -2));
    ict_assert_shape(g, ok_node("p2", IC_OP_PERMUTE, OPS(V(x)), &p), "[4, 2, 3]");
    dims_attr(&p, DIMS(0, 0, 1));
    ict_assert_error(c, bad_node("p3", IC_OP_PERMUTE, OPS(V(x)), &p), IC_EINVAL, "(permute)", "repeats");
    dims_attr(&p, DIMS(1, 0));
    ict_assert_error(c, bad_node("p4", IC_OP_PERMUTE, OPS(V(x)), &p), IC_EINVAL, "(permute)", "rank 3");
}

Test(infer, unsqueeze_and_squeeze)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3");
    ic_attrs u = attrs(IC_OP_UNSQUEEZE);
    u.dim = -1;
    ict_assert_shape(g, ok_node("u1", IC_OP_UNSQUEEZE, OPS(V(x)), &u), "[2, 3, 1]");
    u.dim = 0;
    ict_assert_shape(g, ok_node("u2", IC_OP_UNSQUEEZE, OPS(V(x)), &u), "[1, 2, 3]");
    u.dim = 2;
    ict_assert_shape(g, ok_node("u3", IC_OP_UNSQUEEZE, OPS(V(x)), &u), "[2, 3, 1]");
    u.dim = -2;
    ict_assert_shape(g, ok_node("u4", IC_OP_UNSQUEEZE, OPS(V(x)), &u), "[2, 1, 3]");
    u.dim = 3;
    ict_assert_error(c, bad_node("u5", IC_OP_UNSQUEEZE, OPS(V(x)), &u), IC_EINVAL, "(unsqueeze)", "dim 3");
    ic_value s = ict_input(g, "s", IC_F32, "[]");
    u.dim = -1;
    ict_assert_shape(g, ok_node("u6", IC_OP_UNSQUEEZE, OPS(V(s)), &u), "[1]");

    ic_value y = ict_input(g, "y", IC_F32, "1,3,1,B");
    ict_assert_shape(g, ok_node("q1", IC_OP_SQUEEZE, OPS(V(y)), NULL), "[3, B]");
    ic_attrs q = attrs(IC_OP_SQUEEZE);
    dims_attr(&q, DIMS(0));
    ict_assert_shape(g, ok_node("q2", IC_OP_SQUEEZE, OPS(V(y)), &q), "[3, 1, B]");
    dims_attr(&q, DIMS(1)); /* size 3: left alone, as in PyTorch */
    ict_assert_shape(g, ok_node("q3", IC_OP_SQUEEZE, OPS(V(y)), &q), "[1, 3, 1, B]");
    dims_attr(&q, DIMS(-2, 0));
    ict_assert_shape(g, ok_node("q4", IC_OP_SQUEEZE, OPS(V(y)), &q), "[3, B]");
    dims_attr(&q, DIMS(-1)); /* symbolic: not known to be 1 */
    ict_assert_shape(g, ok_node("q5", IC_OP_SQUEEZE, OPS(V(y)), &q), "[1, 3, 1, B]");
    dims_attr(&q, DIMS(4));
    ict_assert_error(c, bad_node("q6", IC_OP_SQUEEZE, OPS(V(y)), &q), IC_EINVAL, "(squeeze)", "dim 4");
}

Test(infer, expand)
{
    ic_value x = ict_input(g, "x", IC_F32, "3,1");
    ic_attrs a = attrs(IC_OP_EXPAND);
    shape_attr(&a, "3,4");
    ict_assert_shape(g, ok_node("e1", IC_OP_EXPAND, OPS(V(x)), &a), "[3, 4]");
    shape_attr(&a, "-1,4");
    ict_assert_shape(g, ok_node("e2", IC_OP_EXPAND, OPS(V(x)), &a), "[3, 4]");
    shape_attr(&a, "2,-1,4");
    ict_assert_shape(g, ok_node("e3", IC_OP_EXPAND, OPS(V(x)), &a), "[2, 3, 4]");
    shape_attr(&a, "B,3,-1");
    ict_assert_shape(g, ok_node("e4", IC_OP_EXPAND, OPS(V(x)), &a), "[B, 3, 1]");
    shape_attr(&a, "3,0");
    ict_assert_shape(g, ok_node("e5", IC_OP_EXPAND, OPS(V(x)), &a), "[3, 0]");
    shape_attr(&a, "-1,3,4");
    ict_assert_error(c, bad_node("bad", IC_OP_EXPAND, OPS(V(x)), &a), IC_ESHAPE, "node 'bad'",
                     "(expand)", "leading");
    shape_attr(&a, "4,4");
    ict_assert_error(c, bad_node("bad", IC_OP_EXPAND, OPS(V(x)), &a), IC_ESHAPE, "(expand)",
                     "[3, 1]", "[4, 4]");
    shape_attr(&a, "4");
    ict_assert_error(c, bad_node("bad", IC_OP_EXPAND, OPS(V(x)), &a), IC_ESHAPE, "[3, 1]");
}

Test(infer, slice)
{
    ic_value x = ict_input(g, "x", IC_F32, "4,10");
    ic_attrs a = attrs(IC_OP_SLICE);
    a.dim = -1, a.has_start = true, a.start = -3;
    ict_assert_shape(g, ok_node("s1", IC_OP_SLICE, OPS(V(x)), &a), "[4, 3]"); /* x[:, -3:] */
    a.start = 2, a.has_end = true, a.end = 100, a.step = 3;
    ict_assert_shape(g, ok_node("s2", IC_OP_SLICE, OPS(V(x)), &a), "[4, 3]"); /* 2, 5, 8 */
    a.start = 0, a.end = 10, a.step = 3;
    ict_assert_shape(g, ok_node("s3", IC_OP_SLICE, OPS(V(x)), &a), "[4, 4]"); /* 0 3 6 9 */
    a.start = 8, a.end = 2, a.step = 1;
    ict_assert_shape(g, ok_node("s4", IC_OP_SLICE, OPS(V(x)), &a), "[4, 0]");
    a.start = -100, a.end = -1;
    ict_assert_shape(g, ok_node("s5", IC_OP_SLICE, OPS(V(x)), &a), "[4, 9]");
    a.start = 1, a.end = 2, a.step = INT64_MAX;
    ict_assert_shape(g, ok_node("s6", IC_OP_SLICE, OPS(V(x)), &a), "[4, 1]");
    a.start = 0, a.has_end = false, a.step = INT64_MAX;
    ict_assert_shape(g, ok_node("s6b", IC_OP_SLICE, OPS(V(x)), &a), "[4, 1]");
    a.start = INT64_MIN, a.end = INT64_MAX, a.has_end = true, a.step = 1;
    ict_assert_shape(g, ok_node("s6c", IC_OP_SLICE, OPS(V(x)), &a), "[4, 10]");
    ic_attrs d = attrs(IC_OP_SLICE); /* defaults: dim 0, whole range */
    ict_assert_shape(g, ok_node("s7", IC_OP_SLICE, OPS(V(x)), &d), "[4, 10]");
    a.start = 0, a.end = 5, a.step = 0;
    ict_assert_error(c, bad_node("s8", IC_OP_SLICE, OPS(V(x)), &a), IC_EINVAL, "node 's8'", "(slice)", "step");
    a.step = 1, a.dim = 2;
    ict_assert_error(c, bad_node("s9", IC_OP_SLICE, OPS(V(x)), &a), IC_EINVAL, "(slice)", "dim 2");
}

Test(infer, cat)
{
    ic_value a = ict_input(g, "a", IC_F32, "2,3"), b = ict_input(g, "b", IC_F32, "2,5"),
             i = ict_input(g, "i", IC_I32, "2,1");
    ic_attrs at = attrs(IC_OP_CAT);
    at.dim = -1;
    ic_value y = ok_node("y", IC_OP_CAT, OPS(V(a), V(b), V(i)), &at);
    ict_assert_shape(g, y, "[2, 9]");
    ict_assert_dtype(g, y, IC_F32);
    ic_value z = ict_input(g, "z", IC_F32, "4,3");
    at.dim = 0;
    ict_assert_shape(g, ok_node("y0", IC_OP_CAT, OPS(V(a), V(z)), &at), "[6, 3]");
    ict_assert_shape(g, ok_node("y1", IC_OP_CAT, OPS(V(a)), &at), "[2, 3]");
    ict_assert_error(c, bad_node("bad", IC_OP_CAT, OPS(V(a), V(b)), &at), IC_ESHAPE, "node 'bad'",
                     "(cat)", "[2, 5]", "[2, 3]");
    at.dim = -1;
    ic_value r3 = ict_input(g, "r3", IC_F32, "2,3,1");
    ict_assert_error(c, bad_node("bad", IC_OP_CAT, OPS(V(a), V(r3)), &at), IC_ESHAPE, "(cat)", "[2, 3, 1]");
    ict_assert_error(c, bad_node("bad", IC_OP_CAT, OPS(V(a), ic_scalar_f(1)), &at), IC_EINVAL, "(cat)");
}

/* ---- contractions ---- */

static ic_value mm(const char *name, const char *sa, const char *sb)
{
    char na[32], nb[32];
    snprintf(na, sizeof na, "%s_a", name);
    snprintf(nb, sizeof nb, "%s_b", name);
    ic_value a = ict_input(g, na, IC_F32, sa), b = ict_input(g, nb, IC_F32, sb);
    return bin(name, IC_OP_MATMUL, V(a), V(b));
}

Test(infer, matmul_shapes)
{
    ict_assert_shape(g, mm("m1", "2,1,3,4", "5,4,6"), "[2, 5, 3, 6]");
    ict_assert_shape(g, mm("m2", "4", "4"), "[]");
    ict_assert_shape(g, mm("m3", "3,4", "4"), "[3]");
    ict_assert_shape(g, mm("m4", "4", "4,5"), "[5]");
    ict_assert_shape(g, mm("m5", "4", "2,4,5"), "[2, 5]");
    ict_assert_shape(g, mm("m6", "2,3,4", "4"), "[2, 3]");
    ict_assert_shape(g, mm("m7", "3,4", "4,5"), "[3, 5]");
    ict_assert_shape(g, mm("m8", "B,H,S,64", "B,H,64,S"), "[B, H, S, S]");
    ict_assert_shape(g, mm("m9", "7,1,3,4", "1,5,4,2"), "[7, 5, 3, 2]");
    ict_assert_shape(g, mm("m10", "0,4", "4,3"), "[0, 3]");
}

Test(infer, matmul_errors)
{
    ic_value a = ict_input(g, "a", IC_F32, "4,8"), b = ict_input(g, "b", IC_F32, "7,2");
    ict_assert_error(c, bad_node("fc1", IC_OP_MATMUL, OPS(V(a), V(b)), NULL), IC_ESHAPE,
                     "node 'fc1'", "(matmul)", "[4, 8]", "[7, 2]", "inner");
    ic_value p = ict_input(g, "p", IC_F32, "2,3,4"), q = ict_input(g, "q", IC_F32, "3,4,5");
    ict_assert_error(c, bad_node("mb", IC_OP_MATMUL, OPS(V(p), V(q)), NULL), IC_ESHAPE, "(matmul)", "[2]", "[3]");
    ic_value s = ict_input(g, "s", IC_F32, "[]");
    ict_assert_error(c, bad_node("ms", IC_OP_MATMUL, OPS(V(s), V(a)), NULL), IC_ESHAPE, "(matmul)", "[]");
    ic_value v = ict_input(g, "v", IC_F32, "5");
    ict_assert_error(c, bad_node("mv", IC_OP_MATMUL, OPS(V(a), V(v)), NULL), IC_ESHAPE, "[4, 8]", "[5]");
    ict_assert_error(c, bad_node("mn", IC_OP_MATMUL, OPS(V(a), ic_scalar_f(2)), NULL), IC_EINVAL, "(matmul)");
}

Test(infer, linear)
{
    ic_value x = ict_input(g, "x", IC_F32, "B,8,16"), w = ict_input(g, "w", IC_F32, "32,16"),
             b = ict_input(g, "b", IC_F32, "32");
    ict_assert_shape(g, ok_node("l1", IC_OP_LINEAR, OPS(V(x), V(w), V(b)), NULL), "[B, 8, 32]");
    ict_assert_shape(g, ok_node("l2", IC_OP_LINEAR, OPS(V(x), V(w)), NULL), "[B, 8, 32]");
    ict_assert_shape(g, ok_node("l3", IC_OP_LINEAR, OPS(V(x), V(w), ic_none()), NULL), "[B, 8, 32]");
    ic_value w1 = ict_input(g, "w1", IC_F32, "16");
    ict_assert_shape(g, ok_node("l4", IC_OP_LINEAR, OPS(V(x), V(w1)), NULL), "[B, 8]");
    ic_value v = ict_input(g, "v", IC_F32, "16");
    ict_assert_shape(g, ok_node("l5", IC_OP_LINEAR, OPS(V(v), V(w)), NULL), "[32]");
    ic_value wt = ict_input(g, "wt", IC_F32, "16,32");
    ict_assert_error(c, bad_node("fc", IC_OP_LINEAR, OPS(V(x), V(wt)), NULL), IC_ESHAPE,
                     "node 'fc'", "(linear)", "[B, 8, 16]", "[16, 32]");
    ic_value bb = ict_input(g, "bb", IC_F32, "31");
    ict_assert_error(c, bad_node("fc", IC_OP_LINEAR, OPS(V(x), V(w), V(bb)), NULL), IC_ESHAPE,
                     "(linear)", "[31]");
    ic_value bh = ict_input(g, "bh", IC_F16, "32");
    ict_assert_error(c, bad_node("fc", IC_OP_LINEAR, OPS(V(x), V(w), V(bh)), NULL), IC_EDTYPE,
                     "(linear)", "f16");
}

Test(infer, bmm)
{
    ic_value a = ict_input(g, "a", IC_F32, "2,3,4"), b = ict_input(g, "b", IC_F32, "2,4,5");
    ict_assert_shape(g, bin("y", IC_OP_BMM, V(a), V(b)), "[2, 3, 5]");
    ic_value c3 = ict_input(g, "c3", IC_F32, "3,4,5");
    ict_assert_error(c, bad_node("z", IC_OP_BMM, OPS(V(a), V(c3)), NULL), IC_ESHAPE, "(bmm)", "[2, 3, 4]", "[3, 4, 5]");
    ic_value d = ict_input(g, "d", IC_F32, "4,5");
    ict_assert_error(c, bad_node("z", IC_OP_BMM, OPS(V(a), V(d)), NULL), IC_ESHAPE, "(bmm)", "3-d");
    ic_value e = ict_input(g, "e", IC_F32, "2,5,5");
    ict_assert_error(c, bad_node("z", IC_OP_BMM, OPS(V(a), V(e)), NULL), IC_ESHAPE, "(bmm)", "inner");
}

Test(infer, embedding)
{
    ic_value w = ict_input(g, "w", IC_F16, "30522,768"), ids = ict_input(g, "ids", IC_I64, "B,128"),
             i32 = ict_input(g, "i32", IC_I32, "5");
    ic_value y = bin("e", IC_OP_EMBEDDING, V(w), V(ids));
    ict_assert_shape(g, y, "[B, 128, 768]");
    ict_assert_dtype(g, y, IC_F16);
    ict_assert_shape(g, bin("e2", IC_OP_EMBEDDING, V(w), V(i32)), "[5, 768]");
    ic_value s = ict_input(g, "s", IC_I64, "[]");
    ict_assert_shape(g, bin("e3", IC_OP_EMBEDDING, V(w), V(s)), "[768]");
    ic_value w3 = ict_input(g, "w3", IC_F32, "2,3,4");
    ict_assert_error(c, bad_node("bad", IC_OP_EMBEDDING, OPS(V(w3), V(ids)), NULL), IC_ESHAPE,
                     "(embedding)", "2-d", "[2, 3, 4]");
}

/* ---- creation ---- */

Test(infer, full_and_arange)
{
    ic_attrs f = attrs(IC_OP_FULL);
    shape_attr(&f, "2,3");
    f.has_dtype = true, f.dtype = IC_F16, f.value = (ic_scalar){ 1.5, 1, false };
    ic_value y = ok_node("f", IC_OP_FULL, 0, NULL, &f);
    ict_assert_shape(g, y, "[2, 3]");
    ict_assert_dtype(g, y, IC_F16);
    shape_attr(&f, "[]");
    ict_assert_shape(g, ok_node("f0", IC_OP_FULL, 0, NULL, &f), "[]");
    shape_attr(&f, "-1,3");
    ict_assert_error(c, bad_node("fneg", IC_OP_FULL, 0, NULL, &f), IC_ESHAPE, "(full)", "negative");
    ic_attrs nd = attrs(IC_OP_FULL);
    shape_attr(&nd, "2");
    ict_assert_error(c, bad_node("fnd", IC_OP_FULL, 0, NULL, &nd), IC_EINVAL, "(full)", "dtype");

    static const struct { double s, e, st; const char *want; } ar[] = {
        { 0, 10, 3, "[4]" },  { 0, 10, 1, "[10]" }, { 5, 0, -1, "[5]" }, { 0, 0, 1, "[0]" },
        { 0.5, 5.7, 1.5, "[5]" }, { 2.9, -3.2, -1.5, "[5]" }, { -3, 3, 2, "[3]" }, { 0, 9, 3, "[3]" },
    }; /* i64 with float numbers: as torch.arange(..., dtype=torch.int64), from the truncated
        * start, end and step (0.5 5.7 1.5 is 0 1 2 3 4) */
    for (size_t i = 0; i < sizeof ar / sizeof *ar; i++) {
        ic_attrs a = attrs(IC_OP_ARANGE);
        a.astart = (ic_scalar){ ar[i].s, (int64_t)ar[i].s, ar[i].s == (int64_t)ar[i].s };
        a.aend = (ic_scalar){ ar[i].e, (int64_t)ar[i].e, ar[i].e == (int64_t)ar[i].e };
        a.astep = (ic_scalar){ ar[i].st, (int64_t)ar[i].st, ar[i].st == (int64_t)ar[i].st };
        char nm[16];
        snprintf(nm, sizeof nm, "ar%zu", i);
        ic_value v = ok_node(nm, IC_OP_ARANGE, 0, NULL, &a);
        cr_assert_str_eq(ict_shape_of(g, v), ar[i].want, "arange(%g, %g, %g): got %s, want %s",
                         ar[i].s, ar[i].e, ar[i].st, ict_shape_of(g, v), ar[i].want);
        ict_assert_dtype(g, v, IC_I64); /* the spec's default dtype */
    }
    ic_attrs a = attrs(IC_OP_ARANGE);
    a.aend = (ic_scalar){ 10, 10, true };
    a.astep = (ic_scalar){ -1, -1, true };
    ict_assert_error(c, bad_node("bad", IC_OP_ARANGE, 0, NULL, &a), IC_EINVAL, "(arange)", "wrong side");
    a.astep = (ic_scalar){ 0, 0, true };
    ict_assert_error(c, bad_node("bad", IC_OP_ARANGE, 0, NULL, &a), IC_EINVAL, "(arange)", "step");
    a.astep = (ic_scalar){ 0.25, 0, false }; /* truncates to 0 for i64 */
    ict_assert_error(c, bad_node("bad", IC_OP_ARANGE, 0, NULL, &a), IC_EINVAL, "(arange)", "step must be nonzero");
    a.astep = (ic_scalar){ 1, 1, true };
    a.has_dtype = true, a.dtype = IC_F32;
    ict_assert_dtype(g, ok_node("arf", IC_OP_ARANGE, 0, NULL, &a), IC_F32);
}

/* ---- arity, operands and names ---- */

Test(infer, arity_errors)
{
    ic_value a = ict_input(g, "a", IC_F32, "2");
    ict_assert_error(c, bad_node("x", IC_OP_ADD, OPS(V(a)), NULL), IC_EINVAL, "node 'x'", "(add)",
                     "takes 2 inputs, got 1");
    ict_assert_error(c, bad_node("x", IC_OP_EXP, OPS(V(a), V(a)), NULL), IC_EINVAL, "(exp)",
                     "takes 1 inputs, got 2");
    ict_assert_error(c, bad_node("x", IC_OP_WHERE, OPS(V(a), V(a)), NULL), IC_EINVAL, "(where)",
                     "got 2");
    ic_attrs ln = attrs(IC_OP_LAYER_NORM);
    shape_attr(&ln, "2");
    ict_assert_error(c, bad_node("x", IC_OP_LAYER_NORM, OPS(V(a), V(a), V(a), V(a)), &ln),
                     IC_EINVAL, "(layer_norm)", "1 to 3", "got 4");
    ict_assert_error(c, bad_node("x", IC_OP_CAT, 0, NULL, NULL), IC_EINVAL, "(cat)", "got 0");
    ic_attrs f = attrs(IC_OP_FULL);
    f.has_dtype = true;
    ict_assert_error(c, bad_node("x", IC_OP_FULL, OPS(V(a)), &f), IC_EINVAL, "(full)", "takes 0");
    ict_assert_error(c, bad_node("x", IC_OP_LINEAR, OPS(V(a)), NULL), IC_EINVAL, "(linear)", "2 to 3");
    ict_assert_error(c, bad_node("x", (ic_op)999, OPS(V(a)), NULL), IC_EINVAL, "unknown op");
}

Test(infer, bad_operands)
{
    ic_value a = ict_input(g, "a", IC_F32, "2");
    ict_assert_error(c, bad_node("x", IC_OP_ADD, OPS(V(a), V(7)), NULL), IC_EINVAL, "node 'x'",
                     "input 1", "not defined before");
    ict_assert_error(c, bad_node("x", IC_OP_ADD, OPS(V(a), V(-9)), NULL), IC_EINVAL, "input 1");
    ict_assert_error(c, bad_node("x", IC_OP_ADD, OPS(V(a), ic_none()), NULL), IC_EINVAL, "(add)", "null");
    ict_assert_error(c, bad_node("x", IC_OP_ADD, OPS(ic_scalar_f(1), ic_scalar_f(2)), NULL),
                     IC_EINVAL, "(add)", "tensor");
    ict_assert_error(c, bad_node("x", IC_OP_SUM, OPS(ic_none()), NULL), IC_EINVAL, "(sum)", "null");
}

Test(infer, names)
{
    ic_value a = ict_input(g, "a", IC_F32, "2");
    ic_dim d[1] = { ic_dim_const(2) };
    ic_value v;
    ict_assert_error(c, ic_graph_add_input(g, "a", IC_F32, 1, d, &v), IC_EINVAL, "'a'", "twice");
    ict_assert_error(c, ic_graph_add_param(g, "a", IC_F32, 1, d, NULL, 0, NULL, NULL, &v),
                     IC_EINVAL, "'a'", "twice");
    ic_operand op = V(a);
    ict_assert_error(c, ic_graph_add_node(g, "a", IC_OP_NEG, 1, &op, NULL, &v), IC_EINVAL,
                     "'a'", "(neg)", "twice");
    bin("y", IC_OP_ADD, V(a), V(a));
    ict_assert_error(c, ic_graph_add_node(g, "y", IC_OP_NEG, 1, &op, NULL, &v), IC_EINVAL,
                     "'y'", "twice");
    ict_assert_error(c, ic_graph_add_input(g, "", IC_F32, 1, d, &v), IC_EINVAL, "non-empty name");
    ict_assert_error(c, ic_graph_add_node(g, NULL, IC_OP_NEG, 1, &op, NULL, &v),
                     IC_EINVAL, "(neg)", "non-empty name");
    cr_assert_eq(ic_graph_num_nodes(g), 2);
}

Test(infer, input_declarations)
{
    ic_dim d[2] = { ic_dim_const(2), ic_dim_const(-1) };
    ic_value v;
    ict_assert_error(c, ic_graph_add_input(g, "n", IC_F32, 2, d, &v), IC_ESHAPE, "'n'", "negative");
    ict_assert_error(c, ic_graph_add_input(g, "n", (ic_dtype)42, 1, d, &v), IC_EDTYPE, "'n'", "dtype");
    ict_assert_error(c, ic_graph_add_input(g, "n", IC_F32, 9, d, &v), IC_ESHAPE, "'n'", "rank 9");
    ic_dim big[2] = { ic_dim_const(INT64_MAX / 2), ic_dim_const(4) };
    ict_assert_error(c, ic_graph_add_input(g, "n", IC_F32, 2, big, &v), IC_ESHAPE, "'n'", "overflow");
    float data[3] = { 1, 2, 3 };
    ic_dim s2[1] = { ic_dim_const(2) };
    ict_assert_error(c, ic_graph_add_param(g, "p", IC_F32, 1, s2, data, sizeof data, NULL, NULL, &v),
                     IC_ESHAPE, "'p'", "12 bytes", "8");
    cr_assert_eq(ic_graph_num_nodes(g), 0);
}

/* ---- symbols: eval_dim, bind, specialize ---- */

Test(infer, eval_dim_and_bind)
{
    ic_value x = ict_input(g, "x", IC_F32, "B,128,768");
    ic_attrs a = attrs(IC_OP_RESHAPE);
    shape_attr(&a, "-1,768");
    ic_value y = ok_node("y", IC_OP_RESHAPE, OPS(V(x)), &a);
    ic_node_info in;
    ic_graph_node(g, y, &in);
    cr_assert_eq(ic_graph_num_symbols(g), 1);
    cr_assert_str_eq(ic_graph_symbol_name(g, 0), "B");
    int64_t vals[1] = { -1 }, out = 0;
    ict_assert_error(c, ic_graph_eval_dim(g, in.shape[0], vals, &out), IC_EINVAL, "'B'", "not bound");
    ict_assert_error(c, ic_graph_eval_dim(g, in.shape[0], NULL, &out), IC_EINVAL, "'B'");
    cr_assert_eq(ic_graph_eval_dim(g, in.shape[1], NULL, &out), IC_OK, "a constant needs no symbols");
    cr_assert_eq(out, 768);
    ict_assert_error(c, ic_graph_bind(g, "Q", 3, vals), IC_EINVAL, "'Q'");
    ict_assert_error(c, ic_graph_bind(g, "B", -2, vals), IC_EINVAL, "'B'", "negative");
    cr_assert_eq(ic_graph_bind(g, "B", 4, vals), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(vals[0], 4);
    cr_assert_eq(ic_graph_eval_dim(g, in.shape[0], vals, &out), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(out, 512, "128*B with B=4: got %lld", (long long)out);
    vals[0] = INT64_MAX / 64;
    ict_assert_error(c, ic_graph_eval_dim(g, in.shape[0], vals, &out), IC_ESHAPE, "overflow");
}

Test(infer, specialize)
{
    ic_value x = ict_input(g, "x", IC_F32, "B,128,768");
    ic_value b1 = ict_input(g, "b1", IC_F32, "1,5");
    ic_attrs a = attrs(IC_OP_RESHAPE);
    shape_attr(&a, "-1,768");
    ic_value y = ok_node("y", IC_OP_RESHAPE, OPS(V(x)), &a);
    ic_attrs e = attrs(IC_OP_EXPAND);
    shape_attr(&e, "B,5");
    ic_value z = ok_node("z", IC_OP_EXPAND, OPS(V(b1)), &e);
    float wdata[5] = { 1, 2, 3, 4, 5 };
    ic_dim ws[1] = { ic_dim_const(5) };
    ic_value w;
    cr_assert_eq(ic_graph_add_param(g, "w", IC_F32, 1, ws, wdata, sizeof wdata, NULL, NULL, &w), IC_OK);
    ic_value s = bin("s", IC_OP_ADD, V(z), V(w));
    ict_assert_shape(g, s, "[B, 5]");
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    cr_assert_eq(ic_graph_add_output(g, s), IC_OK);

    int64_t vals[1] = { -1 };
    ic_graph *sp = (ic_graph *)0x1;
    ict_assert_error(c, ic_graph_specialize(g, vals, &sp), IC_EINVAL, "'x'", "'B'");
    cr_assert_null(sp);

    cr_assert_eq(ic_graph_bind(g, "B", 3, vals), IC_OK);
    cr_assert_eq(ic_graph_specialize(g, vals, &sp), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_num_nodes(sp), ic_graph_num_nodes(g));
    cr_assert_eq(ic_graph_num_outputs(sp), 2);
    cr_assert_eq(ic_graph_output(sp, 0), y);
    cr_assert_eq(ic_graph_output(sp, 1), s);
    ict_assert_shape(sp, x, "[3, 128, 768]");
    ict_assert_shape(sp, y, "[384, 768]");
    ict_assert_shape(sp, z, "[3, 5]");
    ict_assert_shape(sp, s, "[3, 5]");
    ic_node_info in, orig;
    ic_graph_node(sp, w, &in);
    ic_graph_node(g, w, &orig);
    cr_assert_eq(in.data, orig.data, "params borrow the source graph's data");
    cr_assert_eq(ic_graph_verify(sp), IC_OK, "%s", ic_last_error(c));
    ic_graph_destroy(sp);
    /* the original keeps its symbols */
    ict_assert_shape(g, y, "[128*B, 768]");
}

Test(infer, graph_unchanged_after_errors_and_verify)
{
    ic_value a = ict_input(g, "a", IC_F32, "2,3");
    ict_assert_error(c, ic_graph_verify(g), IC_EINVAL, "no outputs");
    ic_value y = bin("y", IC_OP_MUL, V(a), ic_scalar_f(2));
    bad_node("z", IC_OP_MATMUL, OPS(V(a), V(a)), NULL);
    cr_assert_eq(ic_graph_add_output(g, y), IC_OK);
    ict_assert_error(c, ic_graph_add_output(g, 99), IC_EINVAL, "output");
    cr_assert_eq(ic_graph_verify(g), IC_OK, "%s", ic_last_error(c));
    cr_assert_eq(ic_graph_num_args(g), 1);
    cr_assert_eq(ic_graph_arg(g, 0), a);
}

/* ---- spatial ops (issue 12): shapes and PyTorch's refusals, with their messages ---- */

static void bad_msg(const char *name, ic_op op, int n, const ic_operand *in, const ic_attrs *a,
                    const char *want)
{
    bad_node(name, op, n, in, a);
    cr_assert(strstr(ic_last_error(c), want), "%s: message '%s' lacks '%s'", name, ic_last_error(c), want);
}

Test(infer, conv_shapes_and_errors)
{
    ic_value x = ict_input(g, "x", IC_F32, "B,4,9,8"), w = ict_input(g, "w", IC_F32, "6,2,3,3");
    ic_value b = ict_input(g, "b", IC_F32, "6"), xi = ict_input(g, "xi", IC_I64, "1,4,9,8");
    ic_value wd = ict_input(g, "wd", IC_F64, "6,2,3,3"), w4 = ict_input(g, "w4", IC_F32, "6,4,3,3");
    ic_attrs a = attrs(IC_OP_CONV);
    a.groups = 2;
    a.nstride = 2, a.stride[0] = 2, a.stride[1] = 1;
    a.npadding = 1, a.padding[0] = 1;
    ict_assert_shape(g, ok_node("c", IC_OP_CONV, OPS(V(x), V(w), V(b)), &a), "[B, 6, 5, 8]");
    ic_attrs same = attrs(IC_OP_CONV);
    same.padding_str = IC_PADDING_SAME;
    ict_assert_shape(g, ok_node("cs", IC_OP_CONV, OPS(V(x), V(w4)), &same), "[B, 6, 9, 8]");
    bad_msg("e1", IC_OP_CONV, OPS(V(x), V(w)), NULL, "expected input[?, 4, 9, 8] to have 2 channels, but got 4");
    ic_attrs g3 = attrs(IC_OP_CONV);
    g3.groups = 4;
    bad_msg("e2", IC_OP_CONV, OPS(V(x), V(w)), &g3, "expected weight to be divisible by 4 at dimension 0");
    same.nstride = 1, same.stride[0] = 2;
    bad_msg("e3", IC_OP_CONV, OPS(V(x), V(w4)), &same, "padding='same' is not supported for strided convolutions");
    bad_msg("e4", IC_OP_CONV, OPS(V(xi), V(w4)), NULL, "takes floating-point tensors, not i64");
    bad_msg("e5", IC_OP_CONV, OPS(V(x), V(wd)), &a, "Input type (f32) and weight type (f64) should be the same");
    ic_value big = ict_input(g, "big", IC_F32, "6,4,10,3");
    bad_msg("e6", IC_OP_CONV, OPS(V(x), V(big)), NULL, "Kernel size can't be greater than actual input size");
    ic_value b5 = ict_input(g, "b5", IC_F32, "5");
    bad_msg("e7", IC_OP_CONV, OPS(V(x), V(w4), V(b5)), NULL, "expected bias to be 1-dimensional with 6 elements");
}

Test(infer, conv_transpose_shapes_and_errors)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,4,5,6"), w = ict_input(g, "w", IC_F32, "4,3,3,3");
    ic_attrs a = attrs(IC_OP_CONV_TRANSPOSE);
    a.groups = 2;
    a.nstride = 1, a.stride[0] = 2;
    a.npadding = 1, a.padding[0] = 1;
    a.noutput_padding = 2, a.output_padding[0] = 1, a.output_padding[1] = 0;
    ict_assert_shape(g, ok_node("t", IC_OP_CONV_TRANSPOSE, OPS(V(x), V(w)), &a), "[2, 6, 10, 11]");
    a.noutput_padding = 1, a.output_padding[0] = 2;
    bad_msg("e1", IC_OP_CONV_TRANSPOSE, OPS(V(x), V(w)), &a, "output padding must be smaller than either stride or dilation");
    ic_value w3 = ict_input(g, "w3", IC_F32, "3,3,3,3");
    bad_msg("e2", IC_OP_CONV_TRANSPOSE, OPS(V(x), V(w3)), NULL, "to have 3 channels (divisible by groups), but got 4");
}

Test(infer, pool_shapes_and_errors)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3,9,8"), u = ict_input(g, "u", IC_F32, "3,10");
    ic_attrs a = attrs(IC_OP_MAX_POOL);
    a.nkernel = 2, a.kernel_size[0] = 3, a.kernel_size[1] = 2;
    a.nstride = 1, a.stride[0] = 2;
    a.npadding = 1, a.padding[0] = 1;
    a.ceil_mode = true;
    ict_assert_shape(g, ok_node("p", IC_OP_MAX_POOL, OPS(V(x)), &a), "[2, 3, 5, 5]");
    ic_attrs k1 = attrs(IC_OP_AVG_POOL);
    k1.nkernel = 1, k1.kernel_size[0] = 3;
    ict_assert_shape(g, ok_node("a", IC_OP_AVG_POOL, OPS(V(u)), &k1), "[3, 3]");
    ic_attrs ad = attrs(IC_OP_ADAPTIVE_AVG_POOL);
    ad.noutput_size = 2, ad.output_size[0] = 1, ad.output_size[1] = 1;
    ict_assert_shape(g, ok_node("ad", IC_OP_ADAPTIVE_AVG_POOL, OPS(V(x)), &ad), "[2, 3, 1, 1]");
    a.npadding = 1, a.padding[0] = 2;
    bad_msg("e1", IC_OP_MAX_POOL, OPS(V(x)), &a, "pad should be at most half of kernel size");
    k1.has_divisor = true;
    bad_msg("e2", IC_OP_AVG_POOL, OPS(V(u)), &k1, "divisor must be not zero");
    ic_attrs big = attrs(IC_OP_MAX_POOL);
    big.nkernel = 1, big.kernel_size[0] = 11;
    bad_msg("e3", IC_OP_MAX_POOL, OPS(V(u)), &big, "Output size is too small");
    bad_msg("e4", IC_OP_ADAPTIVE_AVG_POOL, OPS(V(u)), &ad, "Expected 3D (unbatched) or 4D (batched) input");
    ad.output_size[1] = 0;
    bad_msg("e5", IC_OP_ADAPTIVE_AVG_POOL, OPS(V(x)), &ad, "output_size entry 1 is 0; it must be positive");
}

Test(infer, pad_view_and_interpolate_shapes_and_errors)
{
    ic_value x = ict_input(g, "x", IC_F32, "2,3,5"), xi = ict_input(g, "xi", IC_I32, "2,3,5");
    ic_attrs p = attrs(IC_OP_PAD);
    p.npad = 4, p.pad[0] = 1, p.pad[1] = -2, p.pad[2] = 0, p.pad[3] = 2;
    ict_assert_shape(g, ok_node("p", IC_OP_PAD, OPS(V(x)), &p), "[2, 5, 4]");
    p.npad = 3;
    bad_msg("e1", IC_OP_PAD, OPS(V(x)), &p, "Padding length must be divisible by 2");
    ic_attrs r = attrs(IC_OP_PAD);
    r.mode = IC_PAD_REFLECT, r.npad = 2, r.pad[0] = 5;
    bad_msg("e2", IC_OP_PAD, OPS(V(x)), &r, "Padding size should be less than the corresponding input dimension");
    r.pad[0] = 1;
    bad_msg("e3", IC_OP_PAD, OPS(V(xi)), &r, "reflect padding takes floating-point tensors");
    ic_attrs u = attrs(IC_OP_UNFOLD);
    u.dim = -1, u.unfold_size = 2, u.step = 2;
    ict_assert_shape(g, ok_node("u", IC_OP_UNFOLD, OPS(V(x)), &u), "[2, 3, 2, 2]");
    u.unfold_size = 6;
    bad_msg("e4", IC_OP_UNFOLD, OPS(V(x)), &u, "maximum size for tensor at dimension 2 is 5 but size is 6");
    ic_attrs f = attrs(IC_OP_FLIP);
    dims_attr(&f, DIMS(0, -3));
    bad_msg("e5", IC_OP_FLIP, OPS(V(x)), &f, "appears multiple times");
    ic_attrs ro = attrs(IC_OP_ROLL);
    ro.nshifts = 2, ro.shifts[0] = 1, ro.shifts[1] = 2;
    dims_attr(&ro, DIMS(0));
    bad_msg("e6", IC_OP_ROLL, OPS(V(x)), &ro, "shifts and dimensions must align");
    ic_attrs in = attrs(IC_OP_INTERPOLATE);
    in.nsize = 1, in.size[0] = 9, in.mode = IC_INTERP_LINEAR;
    ict_assert_shape(g, ok_node("i", IC_OP_INTERPOLATE, OPS(V(x)), &in), "[2, 3, 9]");
    in.mode = IC_INTERP_BILINEAR;
    bad_msg("e7", IC_OP_INTERPOLATE, OPS(V(x)), &in, "bilinear mode needs 4D input");
    in.mode = IC_INTERP_NEAREST, in.align_corners = true;
    bad_msg("e8", IC_OP_INTERPOLATE, OPS(V(x)), &in, "align_corners option can only be set with the interpolating modes");
}

/* ---- nn ops (issue 12) ---- */

Test(infer, nn_norms)
{
    ic_value x = ict_input(g, "x", IC_F32, "B,6,5,5"), c6 = ict_input(g, "c6", IC_F32, "6");
    ic_value c4 = ict_input(g, "c4", IC_F32, "4"), h = ict_input(g, "h", IC_BF16, "2,6");
    ic_value i = ict_input(g, "i", IC_I64, "2,6"), x1 = ict_input(g, "x1", IC_F32, "6");
    ic_value d6 = ict_input(g, "d6", IC_F64, "6");
    ic_attrs bn = attrs(IC_OP_BATCH_NORM);
    cr_assert_float_eq(bn.eps, 1e-5, 1e-12);
    ic_value y = ok_node("bn", IC_OP_BATCH_NORM, OPS(V(x), V(c6), V(c6), ic_none(), V(c6)), &bn);
    ict_assert_shape(g, y, "[B, 6, 5, 5]");
    y = ok_node("bn_mixed", IC_OP_BATCH_NORM, OPS(V(h), V(c6), V(c6), V(c6)), &bn);
    ict_assert_dtype(g, y, IC_BF16);
    ict_assert_error(c, bad_node("b1", IC_OP_BATCH_NORM, OPS(V(x), V(c4), V(c6)), &bn), IC_ESHAPE,
                     "node 'b1'", "(batch_norm)", "running_mean", "[4]", "[6]");
    ict_assert_error(c, bad_node("b2", IC_OP_BATCH_NORM, OPS(V(x1), V(c6), V(c6)), &bn), IC_ESHAPE,
                     "(batch_norm)", "at least 2 dims", "[6]");
    ict_assert_error(c, bad_node("b3", IC_OP_BATCH_NORM, OPS(V(i), V(c6), V(c6)), &bn), IC_EDTYPE,
                     "(batch_norm)", "i64");
    ict_assert_error(c, bad_node("b4", IC_OP_BATCH_NORM, OPS(V(x), V(c6), V(d6)), &bn), IC_EDTYPE,
                     "running_var", "f64");
    ic_attrs gn = attrs(IC_OP_GROUP_NORM);
    ict_assert_error(c, bad_node("g0", IC_OP_GROUP_NORM, OPS(V(x)), &gn), IC_EINVAL, "(group_norm)",
                     "num_groups must be positive");
    gn.num_groups = 3;
    ict_assert_shape(g, ok_node("gn", IC_OP_GROUP_NORM, OPS(V(x), V(c6), V(c6)), &gn), "[B, 6, 5, 5]");
    gn.num_groups = 4;
    ict_assert_error(c, bad_node("g1", IC_OP_GROUP_NORM, OPS(V(x)), &gn), IC_ESHAPE, "(group_norm)",
                     "multiple of num_groups=4");
    gn.num_groups = 2;
    ict_assert_error(c, bad_node("g2", IC_OP_GROUP_NORM, OPS(V(x), V(c4)), &gn), IC_ESHAPE, "weight",
                     "[4]", "[6]");
}

Test(infer, nn_attention)
{
    ic_value q = ict_input(g, "q", IC_F16, "B,8,L,64"), k = ict_input(g, "k", IC_F16, "B,8,S,64");
    ic_value v = ict_input(g, "v", IC_F16, "B,8,S,32"), m = ict_input(g, "m", IC_BOOL, "L,S");
    ic_value fm = ict_input(g, "fm", IC_F32, "L,S"), k2 = ict_input(g, "k2", IC_F16, "B,8,S,16");
    ic_value bm = ict_input(g, "bm", IC_BOOL, "3,L,S");
    ic_attrs a = attrs(IC_OP_SDPA);
    ic_value y = ok_node("att", IC_OP_SDPA, OPS(V(q), V(k), V(v), V(m)), &a);
    ict_assert_shape(g, y, "[B, 8, L, 32]");
    ict_assert_dtype(g, y, IC_F16);
    ict_assert_shape(g, ok_node("att_f32_mask", IC_OP_SDPA, OPS(V(q), V(k), V(v), V(fm)), &a), "[B, 8, L, 32]");
    ic_value im = ict_input(g, "im", IC_I32, "L,S");
    ict_assert_error(c, bad_node("a1", IC_OP_SDPA, OPS(V(q), V(k), V(v), V(im)), &a), IC_EDTYPE,
                     "(scaled_dot_product_attention)", "attn_mask", "i32");
    ict_assert_error(c, bad_node("a2", IC_OP_SDPA, OPS(V(q), V(k2), V(v)), &a), IC_ESHAPE, "node 'a2'",
                     "[B, 8, S, 16]");
    ict_assert_error(c, bad_node("a3", IC_OP_SDPA, OPS(V(q), V(k), V(v), V(bm)), &a), IC_ESHAPE,
                     "attn_mask", "[3, L, S]");
    a.is_causal = true;
    ict_assert_error(c, bad_node("a4", IC_OP_SDPA, OPS(V(q), V(k), V(v), V(m)), &a), IC_EINVAL,
                     "attn_mask or is_causal");
}

Test(infer, nn_gather_index_select)
{
    ic_value x = ict_input(g, "x", IC_F32, "4,6"), ix = ict_input(g, "ix", IC_I64, "4,3");
    ic_value i1 = ict_input(g, "i1", IC_I32, "7"), i0 = ict_input(g, "i0", IC_I64, "[]");
    ic_value f = ict_input(g, "f", IC_F32, "4,3"), big = ict_input(g, "big", IC_I64, "5,1");
    ic_attrs a = attrs(IC_OP_GATHER);
    a.dim = 1;
    ict_assert_shape(g, ok_node("ga", IC_OP_GATHER, OPS(V(x), V(ix)), &a), "[4, 3]");
    ict_assert_error(c, bad_node("g1", IC_OP_GATHER, OPS(V(x), V(f)), &a), IC_EDTYPE, "(gather)", "f32");
    ict_assert_error(c, bad_node("g2", IC_OP_GATHER, OPS(V(x), V(big)), &a), IC_ESHAPE, "(gather)",
                     "[5, 1]", "[4, 6]", "dim 0");
    ict_assert_error(c, bad_node("g3", IC_OP_GATHER, OPS(V(x), V(i1)), &a), IC_ESHAPE, "as many dims");
    a.dim = 2;
    ict_assert_error(c, bad_node("g4", IC_OP_GATHER, OPS(V(x), V(ix)), &a), IC_EINVAL, "dim 2");
    ic_attrs s = attrs(IC_OP_INDEX_SELECT);
    s.dim = -1;
    ict_assert_shape(g, ok_node("is", IC_OP_INDEX_SELECT, OPS(V(x), V(i1)), &s), "[4, 7]");
    ict_assert_shape(g, ok_node("is0", IC_OP_INDEX_SELECT, OPS(V(x), V(i0)), &s), "[4, 1]");
    ict_assert_error(c, bad_node("s1", IC_OP_INDEX_SELECT, OPS(V(x), V(ix)), &s), IC_ESHAPE,
                     "(index_select)", "1-d or 0-d", "[4, 3]");
}

Test(infer, nn_cumsum_stack_masked_fill)
{
    ic_value x = ict_input(g, "x", IC_I32, "B,5"), b = ict_input(g, "b", IC_BOOL, "5");
    ic_value f = ict_input(g, "f", IC_F16, "B,5"), y6 = ict_input(g, "y6", IC_F16, "B,6");
    ic_attrs cs = attrs(IC_OP_CUMSUM);
    cs.dim = -1;
    ic_value y = ok_node("cs", IC_OP_CUMSUM, OPS(V(x)), &cs);
    ict_assert_dtype(g, y, IC_I64);
    ict_assert_dtype(g, ok_node("csb", IC_OP_CUMSUM, OPS(V(b)), &cs), IC_I64);
    ict_assert_dtype(g, ok_node("csf", IC_OP_CUMSUM, OPS(V(f)), &cs), IC_F16);
    cs.has_dtype = true, cs.dtype = IC_BOOL;
    ict_assert_error(c, bad_node("c1", IC_OP_CUMSUM, OPS(V(f)), &cs), IC_EDTYPE, "(cumsum)", "bool");
    ic_attrs st = attrs(IC_OP_STACK);
    st.dim = -1;
    y = ok_node("st", IC_OP_STACK, OPS(V(x), V(f)), &st);
    ict_assert_shape(g, y, "[B, 5, 2]");
    ict_assert_dtype(g, y, IC_F16);
    ict_assert_error(c, bad_node("s1", IC_OP_STACK, OPS(V(f), V(y6)), &st), IC_ESHAPE, "(stack)",
                     "[B, 6]", "[B, 5]");
    ic_attrs mf = attrs(IC_OP_MASKED_FILL);
    mf.value = (ic_scalar){ -INFINITY, 0, false };
    ict_assert_shape(g, ok_node("mf", IC_OP_MASKED_FILL, OPS(V(f), V(b)), &mf), "[B, 5]");
    ict_assert_error(c, bad_node("m1", IC_OP_MASKED_FILL, OPS(V(f), V(x)), &mf), IC_EDTYPE,
                     "(masked_fill)", "mask must be bool", "i32");
    ict_assert_error(c, bad_node("m2", IC_OP_MASKED_FILL, OPS(V(x), V(b)), &mf), IC_EINVAL,
                     "(masked_fill)", "without overflow", "i32");
    mf.value = (ic_scalar){ 70000, 70000, true };
    ict_assert_error(c, bad_node("m3", IC_OP_MASKED_FILL, OPS(V(f), V(b)), &mf), IC_EINVAL, "f16");
}

Test(infer, nn_activations_and_triangles)
{
    ic_value x = ict_input(g, "x", IC_I32, "3,4"), b = ict_input(g, "b", IC_BOOL, "3,4");
    ic_value v = ict_input(g, "v", IC_F32, "4");
    ic_attrs ht = attrs(IC_OP_HARDTANH);
    cr_assert(ht.min_val == -1 && ht.max_val == 1);
    ict_assert_dtype(g, ok_node("ht", IC_OP_HARDTANH, OPS(V(x)), &ht), IC_I32);
    ict_assert_error(c, bad_node("h1", IC_OP_HARDTANH, OPS(V(b)), &ht), IC_EDTYPE, "(hardtanh)", "bool");
    ict_assert_error(c, bad_node("h2", IC_OP_MISH, OPS(V(x)), NULL), IC_EDTYPE, "(mish)", "i32");
    ict_assert_error(c, bad_node("h3", IC_OP_ELU, OPS(V(x)), NULL), IC_EDTYPE, "(elu)", "i32");
    cr_assert_eq(attrs(IC_OP_ELU).alpha, 1);
    ict_assert_dtype(g, ok_node("tu", IC_OP_TRIU, OPS(V(b)), NULL), IC_BOOL);
    ict_assert_error(c, bad_node("t1", IC_OP_TRIL, OPS(V(v)), NULL), IC_ESHAPE, "(tril)", "2 dims", "[4]");
}
