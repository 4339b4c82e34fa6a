/* print.c - the graph as stable, diffable text: one node a line with dtype and shape. */
#include <string.h>
#include "graph-impl.h"

static void print_scalar(FILE *f, ic_scalar s)
{
    if (s.is_int)
        fprintf(f, "%lld", (long long)s.i);
    else
        fprintf(f, "%.9g", s.f);
}

static void print_operands(FILE *f, const ic_graph *g, const ic_node *n)
{
    for (int i = 0; i < n->info.ninputs; i++) {
        const ic_operand *o = &n->in[i];
        fputs(i ? ", " : "", f);
        if (o->node >= 0)
            fputs(g->nodes[o->node]->info.name, f);
        else if (o->node == IC_NONE)
            fputs("null", f);
        else
            print_scalar(f, o->scalar);
    }
}

static void print_dims(FILE *f, const char *key, int n, const int64_t *d)
{
    fprintf(f, " %s=[", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s%lld", i ? "," : "", (long long)d[i]);
    fputc(']', f);
}

/* --- spatial ops (issue 12) --- */
static void print_list(FILE *f, const char *key, int n, const int64_t *d)
{
    if (n)
        print_dims(f, key, n, d);
}

static void print_spatial(FILE *f, const ic_node *n)
{
    const ic_attrs *a = &n->attrs;
    static const char *const pm[] = { "constant", "reflect", "replicate", "circular" };
    static const char *const im[] = { "nearest", "nearest-exact", "linear", "bilinear", "trilinear" };
    switch (n->info.op) {
    case IC_OP_PAD:
        print_dims(f, "pad", a->npad, a->pad);
        fprintf(f, " mode=%s value=", pm[a->mode & 3]);
        print_scalar(f, a->value);
        break;
    case IC_OP_UNFOLD:
        fprintf(f, " dim=%lld size=%lld step=%lld", (long long)a->dim, (long long)a->unfold_size,
                (long long)a->step);
        break;
    case IC_OP_FLIP: print_dims(f, "dims", a->ndims, a->dims); break;
    case IC_OP_ROLL:
        print_dims(f, "shifts", a->nshifts, a->shifts);
        if (a->has_dims)
            print_dims(f, "dims", a->ndims, a->dims);
        break;
    case IC_OP_CONV: case IC_OP_CONV_TRANSPOSE:
        print_list(f, "stride", a->nstride, a->stride);
        print_list(f, "output_padding", a->noutput_padding, a->output_padding);
        if (a->padding_str)
            fprintf(f, " padding=%s", a->padding_str == IC_PADDING_SAME ? "same" : "valid");
        print_list(f, "padding", a->npadding, a->padding);
        print_list(f, "dilation", a->ndilation, a->dilation);
        fprintf(f, " groups=%lld", (long long)a->groups);
        break;
    case IC_OP_MAX_POOL: case IC_OP_AVG_POOL:
        print_dims(f, "kernel_size", a->nkernel, a->kernel_size);
        print_list(f, "stride", a->nstride, a->stride);
        print_list(f, "padding", a->npadding, a->padding);
        print_list(f, "dilation", a->ndilation, a->dilation);
        if (a->ceil_mode)
            fputs(" ceil_mode", f);
        if (n->info.op == IC_OP_AVG_POOL && !a->count_include_pad)
            fputs(" count_include_pad=false", f);
        if (a->has_divisor)
            fprintf(f, " divisor_override=%lld", (long long)a->divisor_override);
        break;
    case IC_OP_ADAPTIVE_AVG_POOL: case IC_OP_ADAPTIVE_MAX_POOL:
        print_dims(f, "output_size", a->noutput_size, a->output_size);
        break;
    case IC_OP_INTERPOLATE:
        print_dims(f, "size", a->nsize, a->size);
        fprintf(f, " mode=%s", im[a->mode % 5]);
        for (int i = 0; i < a->nscale; i++)
            fprintf(f, "%s%.9g%s", i ? "," : " scale_factor=[", a->scale_factor[i], i + 1 == a->nscale ? "]" : "");
        if (a->align_corners)
            fputs(" align_corners", f);
        break;
    default: break;
    }
}

/* Only the attributes the op uses, so the text stays short and diffable. */
static void print_attrs(FILE *f, const ic_graph *g, const ic_node *n)
{
    const ic_attrs *a = &n->attrs;
    char buf[256];
    switch (n->info.op) {
    case IC_OP_GELU: if (a->approximate) fputs(" approximate=tanh", f); break;
    case IC_OP_LEAKY_RELU: fprintf(f, " negative_slope=%g", a->negative_slope); break;
    case IC_OP_SOFTPLUS: fprintf(f, " beta=%g threshold=%g", a->beta, a->threshold); break;
    case IC_OP_CLAMP:
        if (a->has_min) fputs(" min=", f), print_scalar(f, a->min);
        if (a->has_max) fputs(" max=", f), print_scalar(f, a->max);
        break;
    case IC_OP_CAST: fprintf(f, " dtype=%s", ic_dtype_name(a->dtype)); break;
    case IC_OP_SUM: case IC_OP_MEAN: case IC_OP_AMAX: case IC_OP_AMIN: case IC_OP_PROD:
    case IC_OP_SQUEEZE:
        if (a->has_dims) print_dims(f, "dims", a->ndims, a->dims);
        if (a->keepdim) fputs(" keepdim", f);
        break;
    case IC_OP_ARGMAX:
        fprintf(f, " dim=%lld%s", (long long)a->dim, a->keepdim ? " keepdim" : "");
        break;
    case IC_OP_SOFTMAX: case IC_OP_LOG_SOFTMAX: case IC_OP_UNSQUEEZE: case IC_OP_CAT:
        fprintf(f, " dim=%lld", (long long)a->dim);
        break;
    case IC_OP_LAYER_NORM: case IC_OP_RMS_NORM:
        fprintf(f, " normalized_shape=%s eps=%g", ic_graph_shape_str(g, a->nshape, a->shape, buf, sizeof buf), a->eps);
        break;
    case IC_OP_RESHAPE: case IC_OP_EXPAND:
        fprintf(f, " shape=%s", ic_graph_shape_str(g, a->nshape, a->shape, buf, sizeof buf));
        break;
    case IC_OP_PERMUTE: print_dims(f, "dims", a->ndims, a->dims); break;
    case IC_OP_TRANSPOSE: fprintf(f, " dim0=%lld dim1=%lld", (long long)a->dim0, (long long)a->dim1); break;
    case IC_OP_SLICE:
        fprintf(f, " dim=%lld start=%lld", (long long)a->dim, (long long)(a->has_start ? a->start : 0));
        if (a->has_end) fprintf(f, " end=%lld", (long long)a->end);
        fprintf(f, " step=%lld", (long long)a->step);
        break;
    case IC_OP_FULL:
        fputs(" value=", f), print_scalar(f, a->value);
        fprintf(f, " shape=%s dtype=%s", ic_graph_shape_str(g, a->nshape, a->shape, buf, sizeof buf), ic_dtype_name(a->dtype));
        break;
    case IC_OP_ARANGE:
        fputs(" start=", f), print_scalar(f, a->astart);
        fputs(" end=", f), print_scalar(f, a->aend);
        fputs(" step=", f), print_scalar(f, a->astep);
        fprintf(f, " dtype=%s", ic_dtype_name(a->dtype));
        break;
    default: print_spatial(f, n); break;
    /* --- nn ops --- */
    case IC_OP_BATCH_NORM: fprintf(f, " eps=%g", a->eps); break;
    case IC_OP_GROUP_NORM: fprintf(f, " num_groups=%lld eps=%g", (long long)a->num_groups, a->eps); break;
    case IC_OP_SDPA:
        if (a->is_causal) fputs(" is_causal", f);
        if (a->has_scale) fprintf(f, " scale=%.9g", a->scale);
        if (a->fused) fputs(" fused", f);
        if (a->round_scores) fputs(" round_scores", f);
        if (a->transpose_out) fputs(" transpose_out", f);
        break;
    case IC_OP_GATHER: case IC_OP_INDEX_SELECT: case IC_OP_STACK:
        fprintf(f, " dim=%lld", (long long)a->dim);
        break;
    case IC_OP_CUMSUM:
        fprintf(f, " dim=%lld", (long long)a->dim);
        if (a->has_dtype) fprintf(f, " dtype=%s", ic_dtype_name(a->dtype));
        break;
    case IC_OP_MASKED_FILL: fputs(" value=", f), print_scalar(f, a->value); break;
    case IC_OP_HARDTANH: fprintf(f, " min_val=%g max_val=%g", a->min_val, a->max_val); break;
    case IC_OP_ELU: fprintf(f, " alpha=%g", a->alpha); break;
    case IC_OP_TRIU: case IC_OP_TRIL: fprintf(f, " diagonal=%lld", (long long)a->diagonal); break;
    }
}

void ic_graph_print(FILE *f, const ic_graph *g)
{
    char buf[256];
    fprintf(f, "graph %s  (%d nodes, %d outputs)\n", g->name, g->nnodes, g->noutputs);
    for (int v = 0; v < g->nnodes; v++) {
        const ic_node *n = g->nodes[v];
        fprintf(f, "  %%%d %-12s : %-4s %-20s = %s", v, n->info.name, ic_dtype_name(n->info.dtype),
                ic_graph_shape_str(g, n->info.rank, n->shape, buf, sizeof buf), ic_op_name(n->info.op));
        if (n->info.op == IC_OP_INPUT && n->info.has_range)
            fprintf(f, " range=[%lld, %lld)", (long long)n->info.range_lo, (long long)n->info.range_hi);
        if (n->info.op == IC_OP_PARAM)
            fprintf(f, " %s", n->info.data ? (n->info.file ? n->info.file : "(in memory)") : "(run time)");
        if (n->info.ninputs) {
            fputc('(', f);
            print_operands(f, g, n);
            fputc(')', f);
        }
        print_attrs(f, g, n);
        fputc('\n', f);
    }
    fputs("  outputs:", f);
    for (int i = 0; i < g->noutputs; i++)
        fprintf(f, " %s", g->nodes[g->outputs[i]]->info.name);
    fputc('\n', f);
}
