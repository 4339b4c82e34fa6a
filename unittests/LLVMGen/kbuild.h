/* kbuild.h - a test-only builder of loop-IR kernels (lower.h structs filled by hand), shared
 * by the LLVMGen and Runtime codegen tests. Static functions; asserts on overflow.
 *
 *     kb_t *kb = kb_new("add", 1, (int64_t[]){ n }, 0, NULL);
 *     kb_stage(kb, IC_STAGE_BODY);
 *     int i = kb_var(kb, 0);
 *     int x = kb_load(kb, 0, IC_F32, i), y = kb_load(kb, 1, IC_F32, i);
 *     kb_store(kb, 2, i, kb_bin(kb, IC_L_ADD, IC_F32, x, y));
 */
#ifndef IC_KBUILD_H
#define IC_KBUILD_H

#include <stdlib.h>
#include <string.h>
#include "ic/lower.h"

#define KB_MAXST 8
#define KB_MAXI 256

typedef struct {
    ic_kernel k;
    ic_stage st[KB_MAXST];
    ic_linstr ins[KB_MAXST][KB_MAXI];
    ic_dtype buftype[64]; /* dtype of each buffer used (for load types) */
} kb_t;

static kb_t *kb_new(const char *name, int nouter, const int64_t *outer, int ninner,
                    const int64_t *inner)
{
    kb_t *kb = calloc(1, sizeof *kb);
    kb->k.name = name;
    kb->k.nouter = nouter;
    kb->k.ninner = ninner;
    for (int i = 0; i < nouter; i++)
        kb->k.outer[i] = outer[i];
    for (int i = 0; i < ninner; i++)
        kb->k.inner[i] = inner[i];
    kb->k.stages = kb->st;
    return kb;
}

static inline int kb_stage(kb_t *kb, ic_stage_kind kind)
{
    int s = kb->k.nstages++;
    kb->st[s].kind = kind;
    kb->st[s].instr = kb->ins[s];
    return s;
}

static inline int kb_add(kb_t *kb, ic_linstr in)
{
    ic_stage *s = &kb->st[kb->k.nstages - 1];
    if (s->ninstr >= KB_MAXI)
        abort();
    s->instr[s->ninstr] = in;
    return s->ninstr++;
}

static inline ic_dtype kb_type(kb_t *kb, int i) { return kb->st[kb->k.nstages - 1].instr[i].type; }

static inline int kb_var(kb_t *kb, int v)
{
    ic_linstr in = { .op = IC_L_VAR, .type = IC_I64, .a = v, .b = -1, .c = -1, .buf = -1,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_consti(kb_t *kb, ic_dtype t, int64_t v)
{
    ic_linstr in = { .op = IC_L_CONST, .type = t, .a = -1, .b = -1, .c = -1, .buf = -1,
                      .imm = { (double)v, v, true } };
    return kb_add(kb, in);
}

static inline int kb_constf(kb_t *kb, ic_dtype t, double v)
{
    ic_linstr in = { .op = IC_L_CONST, .type = t, .a = -1, .b = -1, .c = -1, .buf = -1,
                      .imm = { v, (int64_t)v, false } };
    return kb_add(kb, in);
}

static inline int kb_load(kb_t *kb, int buf, ic_dtype t, int off)
{
    ic_linstr in = { .op = IC_L_LOAD, .type = t, .a = off, .b = -1, .c = -1, .buf = buf,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_store(kb_t *kb, int buf, int off, int val)
{
    ic_linstr in = { .op = IC_L_STORE, .type = kb_type(kb, val), .a = off, .b = val, .c = -1, .buf = buf,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_un(kb_t *kb, ic_lop op, ic_dtype t, int a)
{
    ic_linstr in = { .op = op, .type = t, .a = a, .b = -1, .c = -1, .buf = -1,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_bin(kb_t *kb, ic_lop op, ic_dtype t, int a, int b)
{
    ic_linstr in = { .op = op, .type = t, .a = a, .b = b, .c = -1, .buf = -1,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_cmp(kb_t *kb, ic_cmp pred, int a, int b)
{
    ic_linstr in = { .op = IC_L_CMP, .type = IC_BOOL, .a = a, .b = b, .c = -1, .buf = -1, .cmp = pred,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_select(kb_t *kb, int c, int a, int b)
{
    ic_linstr in = { .op = IC_L_SELECT, .type = kb_type(kb, a), .a = c, .b = a, .c = b, .buf = -1,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_cast(kb_t *kb, ic_dtype t, int a)
{
    return kb_un(kb, IC_L_CAST, t, a);
}

static inline int kb_reduce(kb_t *kb, ic_red red, ic_dtype t, int val, int idx)
{
    ic_linstr in = { .op = IC_L_REDUCE, .type = t, .a = val, .b = idx, .c = -1, .buf = -1, .red = red,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

static inline int kb_acc(kb_t *kb, ic_dtype t, int stage, int instr)
{
    ic_linstr in = { .op = IC_L_ACC, .type = t, .a = stage, .b = instr, .c = -1, .buf = -1,
                      .imm = { 0, 0, false } };
    return kb_add(kb, in);
}

/* v0 * s0 + v1 (a row-major 2-D offset) */
static inline int kb_off2(kb_t *kb, int v0, int64_t s0, int v1)
{
    int c = kb_consti(kb, IC_I64, s0);
    return kb_bin(kb, IC_L_ADD, IC_I64, kb_bin(kb, IC_L_MUL, IC_I64, v0, c), v1);
}

static inline ic_buffer kb_buf(ic_buf_kind kind, ic_dtype t, int64_t numel, int index)
{
    ic_buffer b;
    memset(&b, 0, sizeof b);
    b.kind = kind;
    b.dtype = t;
    b.numel = numel;
    b.index = index;
    b.name = "buf";
    return b;
}

#endif
