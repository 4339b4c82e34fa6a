/* graph.c - building graphs: nodes, names, symbols, outputs, verification, specialisation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "infer-impl.h"

ic_status ic_graph_create(ic_ctx *c, const char *name, ic_graph **out)
{
    *out = NULL;
    ic_graph *g = ic__calloc(c, 1, sizeof *g);
    if (!g)
        return ic__error(c, IC_ENOMEM, "out of memory creating graph");
    g->c = c;
    ic__arena_init(&g->arena, c);
    g->name = ic__arena_strdup(&g->arena, name ? name : "graph");
    if (!g->name) {
        ic_graph_destroy(g);
        return ic__error(c, IC_ENOMEM, "out of memory creating graph");
    }
    *out = g;
    return IC_OK;
}

void ic_graph_destroy(ic_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->nowned; i++)
        ic_safetensors_close(g->owned_files[i]);
    ic__free(g->c, g->owned_files);
    ic__free(g->c, g->nodes);
    ic__free(g->c, g->outputs);
    ic__free(g->c, g->syms);
    ic__arena_free(&g->arena);
    ic__free(g->c, g);
}

ic_ctx *ic_graph_ctx(const ic_graph *g) { return g->c; }
const char *ic_graph_name(const ic_graph *g) { return g->name; }
const char *ic_graph_source(const ic_graph *g) { return g->source; }

ic_status ic__graph_set_source(ic_graph *g, const char *path)
{
    g->source = path ? ic__arena_strdup(&g->arena, path) : NULL;
    if (path && !g->source)
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    return IC_OK;
}

/* Grows *arr (element size sz) so that one more fits. */
static bool grow(ic_ctx *c, void **arr, int *cap, int n, size_t sz)
{
    if (n < *cap)
        return true;
    int nc = *cap ? *cap * 2 : 16;
    void *p = ic__realloc(c, *arr, (size_t)nc * sz);
    if (!p)
        return false;
    *arr = p;
    *cap = nc;
    return true;
}

ic_status ic__graph_keep_file(ic_graph *g, void *st)
{
    if (!grow(g->c, (void **)&g->owned_files, &g->capowned, g->nowned, sizeof(void *)))
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    g->owned_files[g->nowned++] = st;
    return IC_OK;
}

ic_status ic__node_error(const ic_graph *g, const char *node, const char *op, ic_status code,
                         const char *fmt, ...)
{
    char where[512];
    int n = 0;
    if (g->source)
        n += snprintf(where + n, sizeof where - n, "%s: ", g->source);
    n += snprintf(where + n, sizeof where - n, "graph '%s'", g->name);
    if (node && n < (int)sizeof where)
        n += snprintf(where + n, sizeof where - n, " node '%s'", node);
    if (op && n < (int)sizeof where)
        snprintf(where + n, sizeof where - n, " (%s)", op);
    char msg[IC_ERRMAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ic__error(g->c, code, "%s: %s", where, msg);
}

/* ---- symbols and dims ---- */

ic_status ic_graph_symbol(ic_graph *g, const char *name, ic_dim *out)
{
    for (int i = 0; i < g->nsyms; i++)
        if (strcmp(g->syms[i], name) == 0) {
            *out = (ic_dim){ 1, 1, { (uint16_t)i } };
            return IC_OK;
        }
    if (!*name)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "empty symbol name");
    if (g->nsyms >= 65535)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "too many symbols");
    if (!grow(g->c, (void **)&g->syms, &g->capsyms, g->nsyms, sizeof(char *)))
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    const char *s = ic__arena_strdup(&g->arena, name);
    if (!s)
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    g->syms[g->nsyms] = s;
    *out = (ic_dim){ 1, 1, { (uint16_t)g->nsyms } };
    g->nsyms++;
    return IC_OK;
}

int ic_graph_num_symbols(const ic_graph *g) { return g->nsyms; }

const char *ic_graph_symbol_name(const ic_graph *g, int sym)
{
    return sym >= 0 && sym < g->nsyms ? g->syms[sym] : "?";
}

bool ic_dim_eq(ic_dim a, ic_dim b)
{
    if (a.coef != b.coef || a.nsym != b.nsym)
        return false;
    for (int i = 0; i < a.nsym; i++)
        if (a.sym[i] != b.sym[i])
            return false;
    return true;
}

bool ic_dim_is_const(ic_dim d) { return d.nsym == 0; }

bool ic__mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

int64_t ic__shape_numel(int rank, const ic_dim *shape)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        if (shape[i].nsym || !ic__mul_ok(n, shape[i].coef, &n))
            return -1;
    return n;
}

const char *ic_graph_shape_str(const ic_graph *g, int rank, const ic_dim *shape, char *buf,
                               size_t n)
{
    size_t k = 0;
    k += snprintf(buf + k, n - k, "[");
    for (int i = 0; i < rank && k < n; i++) {
        ic_dim d = shape[i];
        if (i)
            k += snprintf(buf + k, n - k, ", ");
        if (k >= n)
            break;
        if (d.nsym == 0 || d.coef != 1)
            k += snprintf(buf + k, n - k, "%lld", (long long)d.coef);
        for (int j = 0; j < d.nsym && k < n; j++)
            k += snprintf(buf + k, n - k, "%s%s", (j || d.coef != 1) ? "*" : "",
                          g ? ic_graph_symbol_name(g, d.sym[j]) : "?");
    }
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

/* ---- nodes ---- */

static ic_status check_name(ic_graph *g, const char *name, const char *op)
{
    if (!name || !*name)
        return ic__node_error(g, NULL, op, IC_EINVAL, "a node needs a non-empty name");
    ic_value v;
    if (ic_graph_find(g, name, &v))
        return ic__node_error(g, name, op, IC_EINVAL, "name '%s' is defined twice", name);
    return IC_OK;
}

/* Appends n (already validated) to g; the name is copied into the arena. */
static ic_status append(ic_graph *g, ic_node *proto, const char *name, ic_value *out)
{
    if (g->nnodes >= INT32_MAX - 1)
        return ic__node_error(g, name, NULL, IC_EINVAL, "too many nodes");
    if (!grow(g->c, (void **)&g->nodes, &g->cap, g->nnodes, sizeof(ic_node *)))
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    ic_node *n = ic__arena_alloc(&g->arena, sizeof *n);
    char *nm = ic__arena_strdup(&g->arena, name);
    if (!n || !nm)
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    *n = *proto;
    n->info.name = nm;
    n->info.shape = n->shape;
    n->info.inputs = n->in;
    n->info.attrs = (n->info.op == IC_OP_INPUT || n->info.op == IC_OP_PARAM) ? NULL : &n->attrs;
    g->nodes[g->nnodes] = n;
    if (out)
        *out = g->nnodes;
    g->nnodes++;
    return IC_OK;
}

static ic_status check_tensor_decl(ic_graph *g, const char *name, const char *what,
                                   ic_dtype dt, int rank, const ic_dim *shape)
{
    if ((unsigned)dt >= IC_DTYPE_COUNT)
        return ic__node_error(g, name, what, IC_EDTYPE, "unknown dtype %d", (int)dt);
    if (rank < 0 || rank > IC_MAX_RANK)
        return ic__node_error(g, name, what, IC_ESHAPE, "rank %d is outside 0..%d", rank,
                              IC_MAX_RANK);
    int64_t numel = 1;
    for (int i = 0; i < rank; i++) {
        ic_dim d = shape[i];
        if (d.coef < 0 || (d.nsym && d.coef < 1))
            return ic__node_error(g, name, what, IC_ESHAPE, "dim %d is negative (%lld)", i,
                                  (long long)d.coef);
        for (int j = 0; j < d.nsym; j++)
            if (d.sym[j] >= g->nsyms)
                return ic__node_error(g, name, what, IC_ESHAPE, "dim %d uses unknown symbol", i);
        if (!ic__mul_ok(numel, d.coef, &numel) || !ic__mul_ok(numel, 16, &(int64_t){0}))
            return ic__node_error(g, name, what, IC_ESHAPE,
                                  "element count overflows (dim %d = %lld)", i,
                                  (long long)d.coef);
    }
    return IC_OK;
}

/* *n = a node of op (INPUT or PARAM) declaring a dt tensor of the given shape, once its
 * name and declaration pass the checks the two share. */
static ic_status tensor_node(ic_graph *g, const char *name, ic_op op, ic_dtype dt, int rank,
                             const ic_dim *shape, ic_node *n)
{
    const char *what = op == IC_OP_INPUT ? "input" : "param";
    ic_status s;
    if ((s = check_name(g, name, what)) || (s = check_tensor_decl(g, name, what, dt, rank, shape)))
        return s;
    memset(n, 0, sizeof *n);
    n->info.op = op;
    n->info.dtype = dt;
    n->info.rank = rank;
    memcpy(n->shape, shape, sizeof(ic_dim) * (size_t)rank);
    return IC_OK;
}

ic_status ic_graph_add_input(ic_graph *g, const char *name, ic_dtype dt, int rank,
                             const ic_dim *shape, ic_value *out)
{
    ic_node n;
    ic_status s = tensor_node(g, name, IC_OP_INPUT, dt, rank, shape, &n);
    return s ? s : append(g, &n, name, out);
}

ic_status ic_graph_set_input_range(ic_graph *g, ic_value v, int64_t lo, int64_t hi)
{
    if (v < 0 || v >= g->nnodes || g->nodes[v]->info.op != IC_OP_INPUT)
        return ic__node_error(g, NULL, "input", IC_EINVAL, "range on something not an input");
    ic_node *n = g->nodes[v];
    if (lo >= hi)
        return ic__node_error(g, n->info.name, "input", IC_EINVAL,
                              "range [%lld, %lld) is empty", (long long)lo, (long long)hi);
    n->info.has_range = true;
    n->info.range_lo = lo;
    n->info.range_hi = hi;
    return IC_OK;
}

ic_status ic_graph_add_param(ic_graph *g, const char *name, ic_dtype dt, int rank,
                             const ic_dim *shape, const void *data, size_t nbytes,
                             const char *file, const char *key, ic_value *out)
{
    ic_node n;
    ic_status s = tensor_node(g, name, IC_OP_PARAM, dt, rank, shape, &n);
    if (s)
        return s;
    if (data) {
        int64_t numel = ic__shape_numel(rank, shape);
        if (numel < 0)
            return ic__node_error(g, name, "param", IC_ESHAPE,
                                  "a param with data needs a fixed shape");
        if ((uint64_t)numel * ic_dtype_size(dt) != nbytes)
            return ic__node_error(g, name, "param", IC_ESHAPE,
                                  "data has %zu bytes, shape needs %llu", nbytes,
                                  (unsigned long long)numel * ic_dtype_size(dt));
        void *copy = ic__arena_alloc(&g->arena, nbytes ? nbytes : 1);
        if (!copy)
            return ic__error(g->c, IC_ENOMEM, "out of memory for param '%s'", name);
        memcpy(copy, data, nbytes);
        n.info.data = copy;
    }
    if (file && !(n.info.file = ic__arena_strdup(&g->arena, file)))
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    if (key && !(n.info.key = ic__arena_strdup(&g->arena, key)))
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    return append(g, &n, name, out);
}

ic_status ic_graph_add_node(ic_graph *g, const char *name, ic_op op, int ninputs,
                            const ic_operand *inputs, const ic_attrs *attrs, ic_value *out)
{
    ic_status s;
    if ((unsigned)op >= IC_OP_COUNT)
        return ic__node_error(g, name, NULL, IC_EINVAL, "unknown op %d", (int)op);
    if ((s = check_name(g, name, ic_op_name(op))))
        return s;
    if (ninputs < 0 || ninputs > IC_MAX_INPUTS)
        return ic__node_error(g, name, ic_op_name(op), IC_EINVAL, "%d inputs (at most %d)",
                              ninputs, IC_MAX_INPUTS);
    ic_node n;
    memset(&n, 0, sizeof n);
    n.info.op = op;
    n.info.name = name;
    n.info.ninputs = ninputs;
    if (ninputs)
        memcpy(n.in, inputs, sizeof(ic_operand) * (size_t)ninputs);
    if (attrs)
        n.attrs = *attrs;
    else
        ic_attrs_init(&n.attrs, op);
    for (int i = 0; i < ninputs; i++) {
        ic_value v = n.in[i].node;
        if (v >= g->nnodes || v < IC_NONE)
            return ic__node_error(g, name, ic_op_name(op), IC_EINVAL,
                                  "input %d refers to node %d, not defined before it", i, v);
    }
    if ((s = ic__infer(g, &n)))
        return s;
    return append(g, &n, name, out);
}

ic_status ic_graph_unary(ic_graph *g, const char *name, ic_op op, ic_operand x, ic_value *out)
{
    return ic_graph_add_node(g, name, op, 1, &x, NULL, out);
}

ic_status ic_graph_binary(ic_graph *g, const char *name, ic_op op, ic_operand a, ic_operand b,
                          ic_value *out)
{
    ic_operand in[2] = { a, b };
    return ic_graph_add_node(g, name, op, 2, in, NULL, out);
}

ic_status ic_graph_add_output(ic_graph *g, ic_value v)
{
    if (v < 0 || v >= g->nnodes)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "output %d is not a node", v);
    if (!grow(g->c, (void **)&g->outputs, &g->capout, g->noutputs, sizeof(ic_value)))
        return ic__error(g->c, IC_ENOMEM, "out of memory");
    g->outputs[g->noutputs++] = v;
    return IC_OK;
}

int ic_graph_num_nodes(const ic_graph *g) { return g->nnodes; }

void ic_graph_node(const ic_graph *g, ic_value v, ic_node_info *out)
{
    IC_ASSERT(v >= 0 && v < g->nnodes);
    *out = g->nodes[v]->info;
}

bool ic_graph_find(const ic_graph *g, const char *name, ic_value *out)
{
    /* Newest first: builders look up what they just defined. Graphs are small (<10^5). */
    for (int i = g->nnodes - 1; i >= 0; i--)
        if (strcmp(g->nodes[i]->info.name, name) == 0) {
            if (out)
                *out = i;
            return true;
        }
    return false;
}

int ic_graph_num_outputs(const ic_graph *g) { return g->noutputs; }

ic_value ic_graph_output(const ic_graph *g, int i)
{
    IC_ASSERT(i >= 0 && i < g->noutputs);
    return g->outputs[i];
}

static bool is_arg(const ic_node *n)
{
    return n->info.op == IC_OP_INPUT || (n->info.op == IC_OP_PARAM && !n->info.data);
}

int ic_graph_num_args(const ic_graph *g)
{
    int k = 0;
    for (int i = 0; i < g->nnodes; i++)
        k += is_arg(g->nodes[i]);
    return k;
}

ic_value ic_graph_arg(const ic_graph *g, int i)
{
    /* inputs first, then params without data, each in definition order */
    for (int pass = 0; pass < 2; pass++)
        for (int v = 0; v < g->nnodes; v++) {
            const ic_node *n = g->nodes[v];
            bool want = pass == 0 ? n->info.op == IC_OP_INPUT : (n->info.op == IC_OP_PARAM && !n->info.data);
            if (want && i-- == 0)
                return v;
        }
    IC_ASSERT(!"argument index out of range");
    return -1;
}

/* ---- verification ---- */

ic_status ic_graph_verify(const ic_graph *g)
{
    if (g->noutputs == 0)
        return ic__node_error(g, NULL, NULL, IC_EINVAL, "the graph has no outputs");
    for (int v = 0; v < g->nnodes; v++) {
        const ic_node *n = g->nodes[v];
        for (int u = 0; u < v; u++)
            if (strcmp(g->nodes[u]->info.name, n->info.name) == 0)
                return ic__node_error(g, n->info.name, ic_op_name(n->info.op), IC_EINVAL,
                                      "name is defined twice");
        for (int i = 0; i < n->info.ninputs; i++)
            if (n->in[i].node >= v)
                return ic__node_error(g, n->info.name, ic_op_name(n->info.op), IC_EINVAL,
                                      "input %d is not defined before the node", i);
        if (n->info.rank < 0 || n->info.rank > IC_MAX_RANK)
            return ic__node_error(g, n->info.name, ic_op_name(n->info.op), IC_ESHAPE, "bad rank");
    }
    for (int i = 0; i < g->noutputs; i++)
        if (g->outputs[i] < 0 || g->outputs[i] >= g->nnodes)
            return ic__node_error(g, NULL, NULL, IC_EINVAL, "output %d is not a node", i);
    return IC_OK;
}

/* ---- binding and specialisation ---- */

ic_status ic_graph_bind(const ic_graph *g, const char *sym, int64_t value, int64_t *vals)
{
    for (int i = 0; i < g->nsyms; i++)
        if (strcmp(g->syms[i], sym) == 0) {
            if (value < 0)
                return ic__node_error(g, NULL, NULL, IC_EINVAL,
                                      "symbol '%s' bound to negative size %lld", sym,
                                      (long long)value);
            vals[i] = value;
            return IC_OK;
        }
    return ic__node_error(g, NULL, NULL, IC_EINVAL, "the graph has no symbol '%s'", sym);
}

ic_status ic_graph_eval_dim(const ic_graph *g, ic_dim d, const int64_t *vals, int64_t *out)
{
    int64_t v = d.coef;
    for (int i = 0; i < d.nsym; i++) {
        int64_t s = vals ? vals[d.sym[i]] : -1;
        if (s < 0)
            return ic__node_error(g, NULL, NULL, IC_EINVAL,
                                  "symbol '%s' is not bound (bind it, e.g. --bind %s=8)",
                                  ic_graph_symbol_name(g, d.sym[i]), ic_graph_symbol_name(g, d.sym[i]));
        if (!ic__mul_ok(v, s, &v))
            return ic__node_error(g, NULL, NULL, IC_ESHAPE, "size overflows");
    }
    *out = v;
    return IC_OK;
}

static ic_status eval_shape(const ic_graph *g, const char *name, int rank, const ic_dim *in,
                            const int64_t *vals, ic_dim *out, bool keep_minus1)
{
    for (int i = 0; i < rank; i++) {
        int64_t v;
        if (keep_minus1 && in[i].nsym == 0) {
            out[i] = in[i];
            continue;
        }
        ic_status s = ic_graph_eval_dim(g, in[i], vals, &v);
        if (s)
            return ic__node_error(g, name, NULL, s, "%s", ic_last_error(g->c));
        out[i] = ic_dim_const(v);
    }
    return IC_OK;
}

ic_status ic__graph_param_borrow(ic_graph *g, const char *name, ic_dtype dt, int rank,
                                 const ic_dim *shape, const void *data, const char *file,
                                 const char *key, ic_value *out)
{
    ic_value v;
    ic_status st = ic_graph_add_param(g, name, dt, rank, shape, NULL, 0, file, key, &v);
    if (st)
        return st;
    g->nodes[v]->info.data = data;
    if (out)
        *out = v;
    return IC_OK;
}

ic_status ic__graph_copy_node(ic_graph *dst, const ic_node_info *ni, const ic_value *map, ic_value *out)
{
    if (ni->op == IC_OP_INPUT) {
        ic_status s = ic_graph_add_input(dst, ni->name, ni->dtype, ni->rank, ni->shape, out);
        if (!s && ni->has_range)
            s = ic_graph_set_input_range(dst, *out, ni->range_lo, ni->range_hi);
        return s;
    }
    if (ni->op == IC_OP_PARAM)
        return ic__graph_param_borrow(dst, ni->name, ni->dtype, ni->rank, ni->shape, ni->data,
                                      ni->file, ni->key, out);
    ic_operand in[IC_MAX_INPUTS];
    for (int i = 0; i < ni->ninputs && i < IC_MAX_INPUTS; i++) {
        in[i] = ni->inputs[i];
        if (in[i].node >= 0)
            in[i].node = map[in[i].node];
    }
    return ic_graph_add_node(dst, ni->name, ni->op, ni->ninputs, in, ni->attrs, out);
}

static ic_status specialize_node(const ic_graph *g, ic_graph *s, const ic_node *n,
                                 const int64_t *vals)
{
    const ic_node_info *in = &n->info;
    ic_dim shape[IC_MAX_RANK];
    ic_status st;
    if (in->op == IC_OP_INPUT || in->op == IC_OP_PARAM) {
        if ((st = eval_shape(g, in->name, in->rank, n->shape, vals, shape, false)))
            return st;
        if (in->op == IC_OP_INPUT) {
            ic_value v;
            if ((st = ic_graph_add_input(s, in->name, in->dtype, in->rank, shape, &v)))
                return st;
            if (in->has_range)
                s->nodes[v]->info.has_range = true, s->nodes[v]->info.range_lo = in->range_lo,
                s->nodes[v]->info.range_hi = in->range_hi;
            return IC_OK;
        }
        /* params share (borrow) the source graph's data */
        return ic__graph_param_borrow(s, in->name, in->dtype, in->rank, shape, in->data,
                                      in->file, in->key, NULL);
    }
    ic_attrs a = n->attrs;
    if ((st = eval_shape(g, in->name, a.nshape, n->attrs.shape, vals, a.shape, true)))
        return st;
    return ic_graph_add_node(s, in->name, in->op, in->ninputs, n->in, &a, NULL);
}

ic_status ic_graph_specialize(const ic_graph *g, const int64_t *vals, ic_graph **out)
{
    ic_graph *s;
    ic_status st;
    *out = NULL;
    if ((st = ic_graph_create(g->c, g->name, &s)))
        return st;
    if ((st = ic__graph_set_source(s, g->source))) {
        ic_graph_destroy(s);
        return st;
    }
    for (int v = 0; v < g->nnodes; v++)
        if ((st = specialize_node(g, s, g->nodes[v], vals))) {
            ic_graph_destroy(s);
            return st;
        }
    for (int i = 0; i < g->noutputs; i++)
        if ((st = ic_graph_add_output(s, g->outputs[i]))) {
            ic_graph_destroy(s);
            return st;
        }
    *out = s;
    return IC_OK;
}
