/* lower.c - graph -> loop IR: buffers (one per argument, param with data, output, and per
 * materialised node read by another kernel), then one kernel per schedule group.
 * ic_lower's schedule is one kernel per computing op (the analog of eager mode); views
 * never get a kernel; outputs that are views, inputs or params get a copy kernel. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "gen.h"

bool *ic__live_nodes(ic_ctx *c, const ic_graph *g)
{
    int n = ic_graph_num_nodes(g);
    bool *live = ic__calloc(c, (size_t)n + 1, sizeof *live);
    if (!live)
        return NULL;
    for (int i = 0; i < ic_graph_num_outputs(g); i++)
        live[ic_graph_output(g, i)] = true;
    for (int v = n - 1; v >= 0; v--) {
        const ic_node *nd = ic__node(g, v);
        for (int i = 0; live[v] && i < nd->info.ninputs; i++)
            if (nd->in[i].node >= 0)
                live[nd->in[i].node] = true;
    }
    return live;
}

/* "file: graph 'g' node 'n' (op): ..." into c (which may not be the graph's context). */
static ic_status gerror(ic_ctx *c, const ic_graph *g, const char *node, const char *op,
                        ic_status code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static ic_status gerror(ic_ctx *c, const ic_graph *g, const char *node, const char *op,
                        ic_status code, const char *fmt, ...)
{
    char msg[IC_ERRMAX], where[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *src = ic_graph_source(g);
    size_t k = (size_t)snprintf(where, sizeof where, "%s%sgraph '%s'", src ? src : "", src ? ": " : "",
                                ic_graph_name(g));
    if (node && k < sizeof where)
        k += (size_t)snprintf(where + k, sizeof where - k, " node '%s'", node);
    if (op && k < sizeof where)
        snprintf(where + k, sizeof where - k, " (%s)", op);
    return ic__error(c, code, "%s: %s", where, msg);
}

ic_status ic__check_specialised(ic_ctx *c, const ic_graph *g)
{
    for (int v = 0; v < ic_graph_num_nodes(g); v++) {
        const ic_node *n = ic__node(g, v);
        for (int i = 0; i < n->info.rank; i++)
            if (n->shape[i].nsym) {
                char sb[160];
                ic_graph_shape_str(g, n->info.rank, n->shape, sb, sizeof sb);
                return gerror(c, g, n->info.name, ic_op_name(n->info.op), IC_EUNSUPPORTED,
                                      "shape %s has symbolic dims: lowering needs concrete "
                                      "shapes (bind and ic_graph_specialize first)", sb);
            }
    }
    return IC_OK;
}

static double float_max(ic_dtype t)
{
    return t == IC_F16 ? 65504.0 : t == IC_BF16 ? 3.3895313892515355e38 : t == IC_F32 ? 3.4028234663852886e38 : 1.7976931348623157e308;
}

/* Errors PyTorch (and the reference executor) raise whatever the data: caught here, since
 * compiled code has no way to report them at run time. */
static ic_status check_node(ic_ctx *c, const ic_graph *g, const ic_node *n)
{
    const char *name = n->info.name, *op = ic_op_name(n->info.op);
    if (n->info.op == IC_OP_EMBEDDING && ic__dim(ic__node(g, n->in[0].node), 0) == 0 &&
        ic__shape_numel(n->info.rank, n->shape) > 0)
        return gerror(c, g, name, op, IC_EINVAL, "the weight has 0 rows, so every index is out of range");
    if ((n->info.op == IC_OP_GATHER || n->info.op == IC_OP_INDEX_SELECT) && /* --- nn ops --- */
        ic__node(g, n->in[0].node)->info.rank > 0 && ic__dim(ic__node(g, n->in[0].node), n->axis) == 0 &&
        ic__shape_numel(n->info.rank, n->shape) > 0)
        return gerror(c, g, name, op, IC_EINVAL, "dim %d of the input has size 0, so every index is "
                      "out of range", n->axis);
    if (n->info.op == IC_OP_POW && !ic_dtype_is_float(n->compute) && n->in[1].node == IC_SCALAR &&
        n->in[1].scalar.i < 0)
        return gerror(c, g, name, op, IC_EINVAL, "integers to negative integer powers are not "
                              "allowed (exponent %lld)", (long long)n->in[1].scalar.i);
    if (n->info.op == IC_OP_REMAINDER && !ic_dtype_is_float(n->compute) &&
        n->in[1].node == IC_SCALAR && n->in[1].scalar.i == 0)
        return gerror(c, g, name, op, IC_EINVAL, "integer remainder by zero");
    if (n->info.op == IC_OP_FULL) {
        ic_scalar v = n->attrs.value;
        ic_dtype t = n->info.dtype;
        double f = v.is_int ? (double)v.i : v.f;
        bool bad = ic_dtype_is_float(t) ? isfinite(f) && fabs(f) > float_max(t)
                 : t == IC_BOOL ? false
                 : v.is_int || ic__narrow_int(t) ? !ic__scalar_fits(v, t)
                 : !(f > (t == IC_I32 ? -2147483649.0 : -9223372036854775808.0) &&
                     f < (t == IC_I32 ? 2147483648.0 : 9223372036854775808.0));
        if (bad)
            return gerror(c, g, name, op, IC_EINVAL, "value %.17g cannot be converted to %s "
                                  "without overflow", f, ic_dtype_name(t));
    }
    return IC_OK;
}

static ic_status check_inputs(ic_ctx *c, const ic_graph *g, const bool *live)
{
    for (int v = 0; v < ic_graph_num_nodes(g); v++) {
        ic_status st = live[v] ? check_node(c, g, ic__node(g, v)) : IC_OK;
        if (st)
            return st;
    }
    return IC_OK;
}

/* ---- buffers ---- */

static int add_buf(ic_program *p, ic_buf_kind kind, const ic_node *n, int index)
{
    if (p->nbufs == p->capbufs) {
        int cap = p->capbufs ? p->capbufs * 2 : 16;
        ic_buffer *b = ic__realloc(p->c, p->bufs, sizeof *b * (size_t)cap);
        if (!b)
            return -1;
        p->bufs = b;
        p->capbufs = cap;
    }
    ic_buffer *b = &p->bufs[p->nbufs];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    b->dtype = n->info.dtype;
    b->numel = ic__shape_numel(n->info.rank, n->shape);
    b->index = index;
    b->data = kind == IC_BUF_PARAM ? n->info.data : NULL;
    b->name = n->info.name;
    b->arena_offset = -1;
    return p->nbufs++;
}

/* Marks in read[] the materialised nodes that kernel grp loads when computing v. */
static void mark_reads(const ic_graph *g, const ic__sched *s, int grp, ic_value v, int *stamp,
                       int mark, bool *read)
{
    if (stamp[v] == mark)
        return;
    stamp[v] = mark;
    const ic_node *n = ic__node(g, v);
    ic__class k = ic__node_class(n);
    if (k == IC__CL_LEAF)
        return;
    if (k != IC__CL_VIEW && s->group[v] >= 0 && s->group[v] != grp) {
        read[v] = true;
        return;
    }
    for (int i = 0; i < n->info.ninputs; i++)
        if (n->in[i].node >= 0)
            mark_reads(g, s, grp, n->in[i].node, stamp, mark, read);
}

static bool *reads_outside(ic_ctx *c, const ic_graph *g, const ic__sched *s, const bool *live)
{
    int n = ic_graph_num_nodes(g);
    bool *read = ic__calloc(c, (size_t)n + 1, sizeof *read);
    int *stamp = ic__calloc(c, (size_t)n + 1, sizeof *stamp);
    if (!read || !stamp) {
        ic__free(c, read);
        ic__free(c, stamp);
        return NULL;
    }
    int mark = 0;
    for (int v = 0; v < n; v++)
        if (live[v] && s->group[v] >= 0)
            mark_reads(g, s, s->group[v], v, stamp, ++mark, read);
    for (int i = 0; i < ic_graph_num_outputs(g); i++) {
        ic_value v = ic_graph_output(g, i);
        if (s->group[v] < 0)
            mark_reads(g, s, s->out_group[i], v, stamp, ++mark, read);
    }
    ic__free(c, stamp);
    return read;
}

static ic_status make_buffers(ic_program *p, const ic__sched *s, const bool *live, int *out_buf)
{
    const ic_graph *g = p->g;
    int n = ic_graph_num_nodes(g), nargs = 0, nparams = 0;
    for (int v = 0; v < n; v++) {
        const ic_node *nd = ic__node(g, v);
        p->node_buf[v] = -1;
        if (nd->info.op == IC_OP_INPUT || (nd->info.op == IC_OP_PARAM && !nd->info.data))
            p->node_buf[v] = add_buf(p, IC_BUF_ARG, nd, nargs++);
        else if (nd->info.op == IC_OP_PARAM)
            p->node_buf[v] = add_buf(p, IC_BUF_PARAM, nd, nparams++);
        if (ic__node_class(nd) == IC__CL_LEAF && p->node_buf[v] < 0)
            return ic__error(p->c, IC_ENOMEM, "out of memory");
    }
    for (int i = 0; i < ic_graph_num_outputs(g); i++) {
        ic_value v = ic_graph_output(g, i);
        if ((out_buf[i] = add_buf(p, IC_BUF_OUTPUT, ic__node(g, v), i)) < 0)
            return ic__error(p->c, IC_ENOMEM, "out of memory");
        if (p->node_buf[v] < 0 && s->group[v] >= 0)
            p->node_buf[v] = out_buf[i];
    }
    bool *read = reads_outside(p->c, g, s, live);
    if (!read)
        return ic__error(p->c, IC_ENOMEM, "out of memory");
    for (int v = 0; v < n; v++)
        if (live[v] && s->group[v] >= 0 && p->node_buf[v] < 0 && read[v] &&
            (p->node_buf[v] = add_buf(p, IC_BUF_TEMP, ic__node(g, v), -1)) < 0) {
            ic__free(p->c, read);
            return ic__error(p->c, IC_ENOMEM, "out of memory");
        }
    ic__free(p->c, read);
    return IC_OK;
}

/* What kernel grp stores: its materialised nodes that others read or that are outputs,
 * and the outputs (views, leaves) assigned to it. */
static int group_items(const ic_program *p, const ic__sched *s, const bool *live, const int *out_buf,
                       int grp, ic__store *items)
{
    const ic_graph *g = p->g;
    int k = 0, nout = ic_graph_num_outputs(g);
    for (int v = 0; v < ic_graph_num_nodes(g); v++) {
        if (!live[v] || s->group[v] != grp)
            continue;
        int b = p->node_buf[v];
        if (b >= 0 && p->bufs[b].kind == IC_BUF_TEMP)
            items[k++] = (ic__store){ v, b };
        for (int i = 0; i < nout; i++)
            if (ic_graph_output(g, i) == v)
                items[k++] = (ic__store){ v, out_buf[i] };
    }
    for (int i = 0; i < nout; i++) {
        ic_value v = ic_graph_output(g, i);
        if (s->group[v] < 0 && s->out_group[i] == grp)
            items[k++] = (ic__store){ v, out_buf[i] };
    }
    return k;
}

typedef struct {
    ic_program *p;
    bool *live;
    int *out_buf;
    ic__store *items;
} build_state;

static void state_free(ic_ctx *c, build_state *b)
{
    ic__free(c, b->live);
    ic__free(c, b->out_buf);
    ic__free(c, b->items);
    ic_program_destroy(b->p);
}

static ic_status state_init(ic_ctx *c, const ic_graph *g, const ic__sched *s, build_state *b)
{
    ic_status st;
    int n = ic_graph_num_nodes(g), nout = ic_graph_num_outputs(g);
    memset(b, 0, sizeof *b);
    if ((st = ic__check_specialised(c, g)))
        return st;
    if ((b->p = ic__calloc(c, 1, sizeof *b->p))) { /* first: state_free destroys it */
        b->p->c = c;
        b->p->g = g;
        ic__arena_init(&b->p->arena, c);
    }
    b->live = ic__live_nodes(c, g);
    b->out_buf = ic__calloc(c, (size_t)nout + 1, sizeof(int));
    b->items = ic__calloc(c, (size_t)(n + nout) + 1, sizeof(ic__store));
    if (!b->live || !b->out_buf || !b->items || !b->p)
        return ic__error(c, IC_ENOMEM, "out of memory");
    if (!(b->p->node_buf = ic__calloc(c, (size_t)n + 1, sizeof(int))))
        return ic__error(c, IC_ENOMEM, "out of memory");
    if ((st = check_inputs(c, g, b->live)))
        return st;
    return make_buffers(b->p, s, b->live, b->out_buf);
}

ic_status ic__program_build(ic_ctx *c, const ic_graph *g, const ic__sched *s, ic_program **out)
{
    build_state b;
    ic_status st;
    *out = NULL;
    if ((st = state_init(c, g, s, &b))) {
        state_free(c, &b);
        return st;
    }
    for (int grp = 0; grp < s->ngroups; grp++) {
        char why[256] = "";
        int k = group_items(b.p, s, b.live, b.out_buf, grp, b.items);
        if (!ic__gen_kernel(b.p, s, grp, b.items, k, true, why, sizeof why)) {
            state_free(c, &b);
            if (strcmp(why, "out of memory") == 0)
                return ic__error(c, IC_ENOMEM, "out of memory lowering kernel %d", grp);
            return gerror(c, g, NULL, NULL, IC_EUNSUPPORTED, "kernel %d could not be lowered: %s "
                          "(internal error)", grp, why);
        }
    }
    ic__program_plan(b.p);
    if ((st = ic_program_verify(b.p))) {
        state_free(c, &b);
        return st;
    }
    *out = b.p;
    b.p = NULL;
    state_free(c, &b);
    return IC_OK;
}

bool ic__sched_try(ic_ctx *c, const ic_graph *g, const ic__sched *s, int group, char *why, size_t n)
{
    build_state b;
    bool ok = false;
    if (state_init(c, g, s, &b) == IC_OK) {
        int k = group_items(b.p, s, b.live, b.out_buf, group, b.items);
        ok = ic__gen_kernel(b.p, s, group, b.items, k, false, why, n);
    } else {
        snprintf(why, n, "%s", ic_last_error(c));
    }
    state_free(c, &b);
    return ok;
}

/* ---- the unfused schedule ---- */

static ic_status unfused(ic_ctx *c, const ic_graph *g, const bool *live, ic__sched *s, char **why)
{
    int n = ic_graph_num_nodes(g), k = 0;
    for (int v = 0; v < n; v++) {
        ic__class cl = ic__node_class(ic__node(g, v));
        s->group[v] = live[v] && cl != IC__CL_LEAF && cl != IC__CL_VIEW ? k++ : -1;
        if (s->group[v] >= 0 && !(why[s->group[v]] = ic__strdup(c, "unfused: one kernel per op")))
            return ic__error(c, IC_ENOMEM, "out of memory");
    }
    for (int i = 0; i < ic_graph_num_outputs(g); i++) {
        ic_value v = ic_graph_output(g, i);
        const ic_node *nd = ic__node(g, v);
        if (s->group[v] >= 0) {
            s->out_group[i] = s->group[v];
            continue;
        }
        char buf[256];
        snprintf(buf, sizeof buf, "output %d '%s' is %s: copied into the caller's buffer", i,
                 nd->info.name, ic__node_class(nd) == IC__CL_VIEW ? "a view" : "an argument");
        s->out_group[i] = k;
        if (!(why[k++] = ic__strdup(c, buf)))
            return ic__error(c, IC_ENOMEM, "out of memory");
    }
    s->ngroups = k;
    return IC_OK;
}

ic_status ic__lower_unfused(ic_ctx *c, const ic_graph *g, const char *reason, const char *prefix,
                            ic_program **out)
{
    int n = ic_graph_num_nodes(g), nout = ic_graph_num_outputs(g);
    ic__sched s;
    memset(&s, 0, sizeof s);
    *out = NULL;
    ic_status st = ic__check_specialised(c, g);
    if (st)
        return st;
    bool *live = ic__live_nodes(c, g);
    s.group = ic__calloc(c, (size_t)n + 1, sizeof(int));
    s.out_group = ic__calloc(c, (size_t)nout + 1, sizeof(int));
    char **why = ic__calloc(c, (size_t)(n + nout) + 1, sizeof(char *));
    if (!live || !s.group || !s.out_group || !why)
        st = ic__error(c, IC_ENOMEM, "out of memory");
    if (!st)
        st = unfused(c, g, live, &s, why);
    if (!st && reason)
        for (int i = 0; i < s.ngroups; i++)
            if (strncmp(why[i], "unfused", 7) == 0) {
                ic__free(c, why[i]);
                if (!(why[i] = ic__strdup(c, reason)))
                    st = ic__error(c, IC_ENOMEM, "out of memory");
            }
    s.why = (const char *const *)why;
    s.prefix = prefix ? prefix : "cpu_";
    s.emulate_casts = true;
    s.collapse = true;
    s.stash_rows = true;
    if (!st)
        st = ic__program_build(c, g, &s, out);
    for (int i = 0; why && i < n + nout; i++)
        ic__free(c, why[i]);
    ic__free(c, why);
    ic__free(c, live);
    ic__free(c, s.group);
    ic__free(c, s.out_group);
    return st;
}

ic_status ic_lower(ic_ctx *c, const ic_graph *g, ic_program **out)
{
    return ic_lower_prefixed(c, g, "cpu_", out);
}

ic_status ic_lower_prefixed(ic_ctx *c, const ic_graph *g, const char *prefix, ic_program **out)
{
    if (!out)
        return ic__error(c, IC_EINVAL, "ic_lower: out is NULL");
    *out = NULL;
    if (!g || !prefix)
        return ic__error(c, IC_EINVAL, "ic_lower: graph or prefix is NULL");
    ic_graph *x = NULL;
    ic_status s = ic_graph_expand(c, g, &x);
    if (s || !x)
        return s ? s : ic__lower_unfused(c, g, NULL, prefix, out);
    ic__gshare *own = ic__calloc(c, 1, sizeof *own);
    if (!own) {
        ic_graph_destroy(x);
        return ic__error(c, IC_ENOMEM, "ic_lower: out of memory");
    }
    own->g = x;
    own->refs = 1;
    if ((s = ic__lower_unfused(c, x, NULL, prefix, out))) {
        ic_graph_destroy(x);
        ic__free(c, own);
        return s;
    }
    (*out)->own = own;
    return IC_OK;
}
