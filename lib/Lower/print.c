/* print.c - stable, diffable text of a program: buffers, then each kernel with its loops,
 * nodes, reason, stages and instructions ("%3 = load f32 buf2[%2]  ; x"). */
#include <stdio.h>
#include "lower-impl.h"

static const char *buf_kind(ic_buf_kind k)
{
    switch (k) {
    case IC_BUF_ARG: return "arg";
    case IC_BUF_PARAM: return "param";
    case IC_BUF_OUTPUT: return "output";
    default: return "temp";
    }
}

static const char *cmp_name(int p)
{
    static const char *const n[] = { "eq", "ne", "lt", "le", "gt", "ge" };
    return p >= 0 && p < 6 ? n[p] : "?";
}

static const char *red_name(int p)
{
    static const char *const n[] = { "sum", "prod", "max", "min", "argmax" };
    return p >= 0 && p < 5 ? n[p] : "?";
}

static const char *stage_name(ic_stage_kind k)
{
    return k == IC_STAGE_BODY ? "body" : k == IC_STAGE_REDUCE ? "reduce" : "inner";
}

static void print_dims(FILE *f, int n, const int64_t *d)
{
    fputc('[', f);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%lld", i ? ", " : "", (long long)d[i]);
    fputc(']', f);
}

static void print_instr(FILE *f, const ic_program *p, int i, const ic_linstr *in)
{
    const char *tn = ic_dtype_name(in->type);
    const char *bn = in->buf >= 0 && in->buf < p->nbufs ? p->bufs[in->buf].name : "?";
    switch (in->op) {
    case IC_L_STORE:
        fprintf(f, "    store %s buf%d[%%%d], %%%d  ; %s\n", tn, in->buf, in->a, in->b, bn);
        return;
    case IC_L_LOAD:
        fprintf(f, "    %%%d = load %s buf%d[%%%d]  ; %s\n", i, tn, in->buf, in->a, bn);
        return;
    case IC_L_VAR:
        fprintf(f, "    %%%d = var %d\n", i, in->a);
        return;
    case IC_L_CONST:
        if (ic_dtype_is_float(in->type))
            fprintf(f, "    %%%d = const %s %.17g\n", i, tn, in->imm.f);
        else
            fprintf(f, "    %%%d = const %s %lld\n", i, tn, (long long)in->imm.i);
        return;
    case IC_L_ACC:
        fprintf(f, "    %%%d = acc %s stage%d.%%%d\n", i, tn, in->a, in->b);
        return;
    case IC_L_REDUCE:
        fprintf(f, "    %%%d = reduce %s%s %s %%%d", i, red_name(in->red),
                (in->flags & IC_LF_NAN_FREE) ? ".nan_free" : "", tn, in->a);
        if (in->red == IC_RED_ARGMAX)
            fprintf(f, ", %%%d", in->b);
        fputc('\n', f);
        return;
    case IC_L_CMP:
        fprintf(f, "    %%%d = cmp %s %s %%%d, %%%d\n", i, cmp_name(in->cmp), tn, in->a, in->b);
        return;
    case IC_L_SELECT:
        fprintf(f, "    %%%d = select %s %%%d, %%%d, %%%d\n", i, tn, in->a, in->b, in->c);
        return;
    default:
        fprintf(f, "    %%%d = %s%s %s %%%d", i, ic_lop_name(in->op),
                (in->flags & IC_LF_EXP_LE0) ? ".le0" : "", tn, in->a);
        if (ic_linstr_arity(in) > 1)
            fprintf(f, ", %%%d", in->b);
        fputc('\n', f);
    }
}

/* attention: sizes, scale, then each operand as buffer[c0 + strides . (batch.., row, col)] */
static void print_attention(FILE *f, const ic_program *p, const ic_attention *a)
{
    static const char *const names[5] = { "q", "k", "v", "mask", "out" };
    fprintf(f, "  attention: batch ");
    print_dims(f, a->nb, a->batch);
    fprintf(f, " L %lld S %lld E %lld scale %.9g%s%s\n", (long long)a->L, (long long)a->S,
            (long long)a->E, a->scale, a->causal ? " causal" : "", a->round ? " round" : "");
    const ic_attn_operand *ops[5];
    ic_attention_operands(a, ops);
    for (int w = 0; w < 5; w++) {
        const ic_attn_operand *o = ops[w];
        if (o->buf < 0)
            continue;
        fprintf(f, "    %-4s = %s[%lld + (", names[w], p->bufs[o->buf].name ? p->bufs[o->buf].name : "?",
                (long long)o->c0);
        for (int i = 0; i < a->nb; i++)
            fprintf(f, "%lld, ", (long long)o->sb[i]);
        fprintf(f, "%lld, %lld) . (batch, %s)] %s\n", (long long)o->sr, (long long)o->sc,
                w == 3 ? "l, s" : w == 1 || w == 2 ? "s, e" : "l, e", ic_dtype_name(p->bufs[o->buf].dtype));
    }
}

void ic_kernel_print(FILE *f, const ic_program *p, int k)
{
    const ic_kernel *kn = &p->kernels[k];
    fprintf(f, "kernel %d %s: outer ", k, kn->name);
    print_dims(f, kn->nouter, kn->outer);
    fprintf(f, " inner ");
    print_dims(f, kn->ninner, kn->inner);
    fprintf(f, "\n  nodes:");
    for (int i = 0; i < kn->nnodes; i++)
        fprintf(f, " %s", kn->nodes[i]);
    fprintf(f, "\n  why: %s\n", kn->why && *kn->why ? kn->why : "-");
    if (kn->attn)
        print_attention(f, p, kn->attn);
    for (int s = 0; s < kn->nstages; s++) {
        fprintf(f, "  stage %d %s:\n", s, stage_name(kn->stages[s].kind));
        for (int i = 0; i < kn->stages[s].ninstr; i++)
            print_instr(f, p, i, &kn->stages[s].instr[i]);
    }
}

void ic_program_print(FILE *f, const ic_program *p)
{
    fprintf(f, "program '%s': %d buffers, %d kernels, arena %lld bytes\n", ic_graph_name(p->g),
            p->nbufs, p->nkernels, (long long)p->arena_bytes);
    for (int b = 0; b < p->nbufs; b++) {
        const ic_buffer *bf = &p->bufs[b];
        fprintf(f, "  buf%d = %s", b, buf_kind(bf->kind));
        if (bf->kind == IC_BUF_ARG || bf->kind == IC_BUF_OUTPUT)
            fprintf(f, " %d", bf->index);
        fprintf(f, " %s[%lld] %s", ic_dtype_name(bf->dtype), (long long)bf->numel, bf->name);
        if (bf->kind == IC_BUF_TEMP)
            fprintf(f, " @%lld", (long long)bf->arena_offset);
        fputc('\n', f);
    }
    for (int k = 0; k < p->nkernels; k++)
        ic_kernel_print(f, p, k);
}
