/* lops.c - the loop-IR op table generated from include/ic/lops.def, and the questions every
 * layer asks of an op (name, arity, kind, traits) instead of comparing enum ranges. */
#include "lower-impl.h"

static const ic_lop_info lops[IC_L_OP_COUNT] = {
#define IC_LOP(ID, nm, ar, rl, fl, tr) \
    [IC_L_##ID] = { .name = nm, .arity = ar, .rule = IC_LR_##rl, .flags = fl, .traits = tr },
#include "ic/lops.def"
#undef IC_LOP
};

const ic_lop_info *ic_lop_get(ic_lop op)
{
    return (unsigned)op < IC_L_OP_COUNT ? &lops[op] : NULL;
}

const char *ic_lop_name(ic_lop op)
{
    return (unsigned)op < IC_L_OP_COUNT ? lops[op].name : "?";
}

static bool computing(ic_lop op, int arity)
{
    return (unsigned)op < IC_L_OP_COUNT && lops[op].rule != IC_LR_SPECIAL && lops[op].arity == arity;
}

bool ic_lop_is_unary(ic_lop op) { return computing(op, 1); }
bool ic_lop_is_binary(ic_lop op) { return computing(op, 2); }

bool ic_lop_has_trait(ic_lop op, unsigned trait)
{
    return (unsigned)op < IC_L_OP_COUNT && (lops[op].traits & trait) == trait;
}

int ic_linstr_arity(const ic_linstr *in)
{
    if (in->op == IC_L_REDUCE)
        return in->red == IC_RED_ARGMAX ? 2 : 1;
    return (unsigned)in->op < IC_L_OP_COUNT ? lops[in->op].arity : 0;
}
