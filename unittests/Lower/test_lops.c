/* test_lops.c - the loop-IR op table (include/ic/lops.def) and the one verifier built on it:
 * every row is complete and consistent, every computing op is accepted with operands of its
 * rule's types and refused with others, and flags are checked against the op's row. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include "../LLVMGen/kbuild.h"
#include "testutil.h"

static const ic_buffer bufs[2] = {
    { .kind = IC_BUF_ARG, .dtype = IC_F32, .numel = 8, .index = 0, .name = "x", .arena_offset = -1 },
    { .kind = IC_BUF_OUTPUT, .dtype = IC_F32, .numel = 8, .index = 0, .name = "y", .arena_offset = -1 },
};

Test(lops, every_row_is_complete_and_names_are_unique)
{
    for (int op = 0; op < IC_L_OP_COUNT; op++) {
        const ic_lop_info *in = ic_lop_get((ic_lop)op);
        cr_assert(in && in->name && *in->name, "op %d has no row", op);
        cr_assert(in->arity >= 0 && in->arity <= 3, "%s: arity %d", in->name, in->arity);
        cr_assert(strcmp(ic_lop_name((ic_lop)op), in->name) == 0);
        cr_assert(in->rule != IC_LR_SPECIAL || op <= IC_L_REDUCE, "%s: SPECIAL rule on a computing op", in->name);
        bool un = ic_lop_is_unary((ic_lop)op), bin = ic_lop_is_binary((ic_lop)op);
        cr_assert(!(un && bin), "%s is both unary and binary", in->name);
        if (in->rule != IC_LR_SPECIAL)
            cr_assert(un == (in->arity == 1) && bin == (in->arity == 2), "%s: kind differs from arity", in->name);
        for (int o = 0; o < op; o++)
            cr_assert(strcmp(ic_lop_name((ic_lop)o), in->name) != 0, "%s named twice", in->name);
    }
    cr_assert_null(ic_lop_get(IC_L_OP_COUNT));
    cr_assert_str_eq(ic_lop_name((ic_lop)-1), "?");
    cr_assert_str_eq(ic_lop_name(IC_L_OP_COUNT), "?");
}

/* A kernel y[i] = cast<f32>(OP(operands of type t)), through a cast of x[i] to t. */
static kb_t *one_op(ic_lop op, ic_dtype t, ic_dtype result, unsigned flags)
{
    kb_t *kb = kb_new("one", 1, (int64_t[]){ 8 }, 0, NULL);
    kb_stage(kb, IC_STAGE_BODY);
    int i = kb_var(kb, 0);
    int x = kb_load(kb, 0, IC_F32, i);
    int v = x;
    if (t != IC_F32)
        v = kb_cast(kb, t, x);
    const ic_lop_info *in = ic_lop_get(op);
    int c = in->rule == IC_LR_SELECT ? kb_cast(kb, IC_BOOL, x) : v;
    ic_linstr r = { .op = op, .type = result, .a = c, .b = in->arity > 1 ? v : -1,
                    .c = in->arity > 2 ? v : -1, .buf = -1, .flags = flags };
    int y = kb_add(kb, r);
    kb_store(kb, 1, i, result == IC_F32 ? y : kb_cast(kb, IC_F32, y));
    return kb;
}

/* The result type an op of rule r gives for operands of type t. */
static ic_dtype result_of(ic_lrule r, ic_dtype t) { return r == IC_LR_CMP ? IC_BOOL : t; }

static bool rule_takes(ic_lrule r, ic_dtype t)
{
    bool fp = t == IC_F32 || t == IC_F64, in = t == IC_I32 || t == IC_I64;
    switch (r) {
    case IC_LR_ARITH: return fp || in;
    case IC_LR_FLOAT: return fp;
    case IC_LR_INT: return in;
    case IC_LR_BOOL: return t == IC_BOOL;
    default: return true; /* CAST CMP SELECT take every computed type */
    }
}

Test(lops, the_verifier_applies_each_rule)
{
    ic_ctx *c = ict_ctx();
    static const ic_dtype types[] = { IC_F32, IC_F64, IC_I32, IC_I64, IC_BOOL };
    for (int op = IC_L_REDUCE + 1; op < IC_L_OP_COUNT; op++) {
        const ic_lop_info *in = ic_lop_get((ic_lop)op);
        for (size_t j = 0; j < sizeof types / sizeof *types; j++) {
            ic_dtype t = types[j];
            ic_dtype r = op == IC_L_CAST ? IC_I32 : result_of(in->rule, t);
            kb_t *kb = one_op((ic_lop)op, t, r, 0);
            ic_status s = ic_kernel_verify(c, "test", &kb->k, 2, bufs);
            bool want = rule_takes(in->rule, t);
            cr_assert_eq(s == IC_OK, want, "%s %s: verify %s (%s)", in->name, ic_dtype_name(t),
                         s ? "refused" : "accepted", s ? ic_last_error(c) : "");
            if (s)
                cr_assert(strstr(ic_last_error(c), in->name), "the message does not name the op: %s",
                          ic_last_error(c));
            free(kb);
        }
    }
    ic_ctx_destroy(c);
}

Test(lops, flags_are_checked_against_the_row)
{
    ic_ctx *c = ict_ctx();
    static const unsigned flags[] = { IC_LF_EXP_LE0, IC_LF_NAN_FREE, 1u << 7 };
    for (int op = IC_L_REDUCE + 1; op < IC_L_OP_COUNT; op++) {
        const ic_lop_info *in = ic_lop_get((ic_lop)op);
        if (in->rule != IC_LR_FLOAT && in->rule != IC_LR_ARITH)
            continue;
        for (size_t f = 0; f < sizeof flags / sizeof *flags; f++) {
            kb_t *kb = one_op((ic_lop)op, IC_F32, IC_F32, flags[f]);
            ic_status s = ic_kernel_verify(c, "test", &kb->k, 2, bufs);
            bool allowed = (in->flags & flags[f]) == flags[f];
            cr_assert_eq(s == IC_OK, allowed, "%s with flag %#x: %s", in->name, flags[f],
                         s ? ic_last_error(c) : "accepted");
            free(kb);
        }
    }
    /* NAN_FREE is a REDUCE flag, and only on MAX */
    for (int red = IC_RED_SUM; red <= IC_RED_MIN; red++) {
        kb_t *kb = kb_new("red", 1, (int64_t[]){ 2 }, 1, (int64_t[]){ 4 });
        kb_stage(kb, IC_STAGE_REDUCE);
        int x = kb_load(kb, 0, IC_F32, kb_var(kb, 1));
        int r = kb_reduce(kb, (ic_red)red, IC_F32, x, -1);
        kb->ins[0][r].flags = IC_LF_NAN_FREE;
        kb_stage(kb, IC_STAGE_BODY);
        kb_store(kb, 1, kb_var(kb, 0), kb_acc(kb, IC_F32, 0, r));
        ic_status s = ic_kernel_verify(c, "test", &kb->k, 2, bufs);
        cr_assert_eq(s == IC_OK, red == IC_RED_MAX, "nan_free on reduction %d: %s", red,
                     s ? ic_last_error(c) : "accepted");
        free(kb);
    }
    ic_ctx_destroy(c);
}

Test(lops, arity_comes_from_the_table)
{
    for (int op = 0; op < IC_L_OP_COUNT; op++) {
        ic_linstr in = { .op = (ic_lop)op, .red = IC_RED_SUM };
        cr_assert_eq(ic_linstr_arity(&in), ic_lop_get((ic_lop)op)->arity, "%s", ic_lop_name((ic_lop)op));
    }
    ic_linstr am = { .op = IC_L_REDUCE, .red = IC_RED_ARGMAX };
    cr_assert_eq(ic_linstr_arity(&am), 2, "argmax reads a value and an index");
    ic_linstr bad = { .op = IC_L_OP_COUNT };
    cr_assert_eq(ic_linstr_arity(&bad), 0);
}

Test(lops, f16_arithmetic_is_refused_by_name)
{
    ic_ctx *c = ict_ctx();
    kb_t *kb = one_op(IC_L_NEG, IC_F16, IC_F16, 0);
    ict_assert_error(c, ic_kernel_verify(c, "ptx", &kb->k, 2, bufs), IC_EINVAL, "ptx: kernel 'one'",
                     "neg f16", "f16/bf16 exist only in memory");
    free(kb);
    ic_ctx_destroy(c);
}

/* Spot checks written out by hand, so that an edit of lops.def that changes what an op means
 * (not only how the verifier reads the table) fails here. */
Test(lops, rows_say_what_the_ops_mean)
{
    static const struct { ic_lop op; ic_dtype t; unsigned flags; bool ok; } cases[] = {
        { IC_L_DIV, IC_F32, 0, true },   { IC_L_DIV, IC_I32, 0, false }, /* idiv is integer division */
        { IC_L_IDIV, IC_I64, 0, true },  { IC_L_IDIV, IC_F32, 0, false },
        { IC_L_MOD, IC_I32, 0, true },   { IC_L_MOD, IC_F64, 0, false },
        { IC_L_ADD, IC_I32, 0, true },   { IC_L_ADD, IC_BOOL, 0, false },
        { IC_L_NEG, IC_I64, 0, true },   { IC_L_EXP, IC_I32, 0, false },
        { IC_L_NOT, IC_BOOL, 0, true },  { IC_L_NOT, IC_F32, 0, false },
        { IC_L_AND, IC_BOOL, 0, true },  { IC_L_OR, IC_I32, 0, false },
        { IC_L_EXP, IC_F32, IC_LF_EXP_LE0, true }, { IC_L_LOG, IC_F32, IC_LF_EXP_LE0, false },
        { IC_L_MAX, IC_F32, IC_LF_NAN_FREE, false },
        { IC_L_ROUND, IC_F64, 0, true }, { IC_L_ROUND, IC_I32, 0, false }, /* ints are round */
    };
    ic_ctx *c = ict_ctx();
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kb_t *kb = one_op(cases[i].op, cases[i].t, cases[i].t, cases[i].flags);
        ic_status s = ic_kernel_verify(c, "test", &kb->k, 2, bufs);
        cr_assert_eq(s == IC_OK, cases[i].ok, "%s %s flags %#x: %s", ic_lop_name(cases[i].op),
                     ic_dtype_name(cases[i].t), cases[i].flags, s ? ic_last_error(c) : "accepted");
        free(kb);
    }
    ic_ctx_destroy(c);
}
