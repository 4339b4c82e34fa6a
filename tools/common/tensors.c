/* tensors.c - run-time arguments for the tools: read by name from .safetensors, symbols bound
 * from their shapes and --bind, the rest generated deterministically; output stats and saving. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common/cli.h"

/* ---- deterministic data ---- */

uint64_t cli_splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t cli_fnv1a64(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* Significand precision: k / 2^(p-1) - 1 with k < 2^p is then exact in the dtype and < 1. */
static int float_bits(ic_dtype dt)
{
    switch (dt) {
    case IC_F64: return 53;
    case IC_F16: return 11;
    case IC_BF16: return 8;
    default: return 24;
    }
}

void cli_fill_random(ic_tensor *t, uint64_t seed, const char *name, int64_t lo, int64_t hi)
{
    uint64_t st = seed ^ cli_fnv1a64(name);
    int64_t n = ic_tensor_numel(t);
    if (ic_dtype_is_float(t->dtype)) {
        int p = float_bits(t->dtype);
        double scale = ldexp(1.0, -(p - 1));
        for (int64_t i = 0; i < n; i++) {
            uint64_t k = cli_splitmix64(&st) >> (64 - p);
            ic_tensor_set(t, i, (double)k * scale - 1.0);
        }
    } else if (t->dtype == IC_BOOL) {
        for (int64_t i = 0; i < n; i++)
            ic_tensor_set(t, i, (double)(cli_splitmix64(&st) >> 63));
    } else {
        /* Modulo bias is below 2^-40 for any range a test would use; simplicity wins. */
        uint64_t span = (uint64_t)hi - (uint64_t)lo;
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)((uint64_t)lo + cli_splitmix64(&st) % span);
            if (t->dtype == IC_I64)
                ((int64_t *)t->data)[i] = v; /* exact: no trip through double */
            else if (t->dtype == IC_I32)
                ((int32_t *)t->data)[i] = (int32_t)v;
            else
                ic_tensor_set(t, i, (double)v); /* u8 i8 i16: exact, wraps outside */
        }
    }
}

/* ---- run-time arguments ---- */

void cli_args_free(ic_ctx *c, cli_args *a)
{
    for (int i = 0; i < a->n && a->t; i++)
        if (a->t[i].data)
            ic_tensor_free(c, &a->t[i]);
    free(a->t);
    free(a->supplied);
    free(a->vals);
    memset(a, 0, sizeof *a);
}

static int find_arg(const ic_graph *g, const char *name)
{
    ic_node_info ni;
    for (int i = 0; i < ic_graph_num_args(g); i++) {
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        if (strcmp(ni.name, name) == 0)
            return i;
    }
    return -1;
}

static const char *arg_list(const ic_graph *g, char *buf, size_t n)
{
    ic_node_info ni;
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < ic_graph_num_args(g) && k < n; i++) {
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", ni.name);
    }
    return ic_graph_num_args(g) ? buf : "none";
}

/* Who fixed a symbol, for conflict messages. */
typedef struct { char what[300]; } origin;

/* Binds the symbols of graph argument `ni` from the concrete shape of t (read from file). */
static bool bind_from_tensor(const ic_graph *g, const char *file, const ic_node_info *ni,
                             const ic_tensor *t, int64_t *vals, origin *who, cli_err *e)
{
    char gs[256];
    ic_graph_shape_str(g, ni->rank, ni->shape, gs, sizeof gs);
    if (t->dtype != ni->dtype)
        return cli_fail(e, "%s: tensor '%s' is %s but graph '%s' takes %s %s", file, ni->name,
                        ic_dtype_name(t->dtype), ic_graph_name(g), ic_dtype_name(ni->dtype), gs);
    char ts[256];
    cli_shape_str(t, ts, sizeof ts);
    if (t->rank != ni->rank)
        return cli_fail(e, "%s: tensor '%s' has shape %s but graph '%s' takes %s", file,
                        ni->name, ts, ic_graph_name(g), gs);
    for (int d = 0; d < ni->rank; d++) {
        ic_dim dim = ni->shape[d];
        int64_t size = t->shape[d];
        if (dim.nsym != 1) {
            /* constants must match; products of symbols are checked by ic_runtime_bind_args */
            if (dim.nsym == 0 && dim.coef != size)
                return cli_fail(e, "%s: tensor '%s' has shape %s but graph '%s' takes %s (dim %d)",
                                file, ni->name, ts, ic_graph_name(g), gs, d);
            continue;
        }
        int s = dim.sym[0];
        const char *sym = ic_graph_symbol_name(g, s);
        if (dim.coef <= 0 || size % dim.coef != 0)
            return cli_fail(e, "%s: tensor '%s' has shape %s but graph '%s' takes %s (dim %d)",
                            file, ni->name, ts, ic_graph_name(g), gs, d);
        int64_t v = size / dim.coef;
        if (vals[s] < 0) {
            vals[s] = v;
            snprintf(who[s].what, sizeof who[s].what, "tensor '%s'", ni->name);
        } else if (vals[s] != v) {
            return cli_fail(e, "%s: symbol '%s' is %lld in tensor '%s' but %lld in %s", file, sym,
                            (long long)v, ni->name, (long long)vals[s], who[s].what);
        }
    }
    return true;
}

/* Copies a (possibly unaligned, mmap'ed) tensor into owned aligned memory. */
static bool copy_tensor(ic_ctx *c, const ic_tensor *src, ic_tensor *dst, cli_err *e)
{
    memset(dst, 0, sizeof *dst);
    ic_tensor_init(dst, src->dtype, src->rank, src->shape, NULL);
    if (ic_tensor_alloc(c, dst) != IC_OK)
        return cli_fail_ctx(e, c, NULL);
    int64_t n = ic_tensor_numel(src);
    if (ic_tensor_is_contiguous(src))
        memcpy(dst->data, src->data, (size_t)n * ic_dtype_size(src->dtype));
    else
        for (int64_t i = 0; i < n; i++)
            ic_tensor_set(dst, i, ic_tensor_get(src, i));
    return true;
}

static bool read_inputs(ic_ctx *c, const ic_graph *g, const char *path, cli_args *a, origin *who,
                        cli_err *e)
{
    ic_safetensors *st = NULL;
    if (ic_safetensors_open(c, path, &st) != IC_OK) {
        const char *m = ic_last_error(c);
        if (m && strstr(m, path))
            return cli_fail(e, "%s", m);
        return cli_fail(e, "%s: %s", path, m && *m ? m : "cannot open");
    }
    bool ok = true;
    for (int k = 0; ok && k < ic_safetensors_count(st); k++) {
        const char *name = ic_safetensors_name(st, k);
        int i = find_arg(g, name);
        if (i < 0) {
            char list[1024];
            ok = cli_fail(e, "%s: tensor '%s' is not a run-time argument of graph '%s' "
                          "(it takes: %s)", path, name, ic_graph_name(g), arg_list(g, list, sizeof list));
            break;
        }
        ic_tensor t;
        ic_node_info ni;
        ic_graph_node(g, ic_graph_arg(g, i), &ni);
        if (ic_safetensors_get(st, name, &t) != IC_OK)
            ok = cli_fail_ctx(e, c, NULL);
        else if ((ok = bind_from_tensor(g, path, &ni, &t, a->vals, who, e)))
            ok = copy_tensor(c, &t, &a->t[i], e);
        a->supplied[i] = ok;
    }
    ic_safetensors_close(st);
    return ok;
}

static bool generate(ic_ctx *c, const ic_graph *g, int i, uint64_t seed, cli_args *a, cli_err *e)
{
    ic_node_info ni;
    ic_graph_node(g, ic_graph_arg(g, i), &ni);
    int64_t shape[IC_MAX_RANK];
    for (int d = 0; d < ni.rank; d++)
        if (ic_graph_eval_dim(g, ni.shape[d], a->vals, &shape[d]) != IC_OK)
            return cli_fail_ctx(e, ic_graph_ctx(g), NULL);
    ic_tensor *t = &a->t[i];
    ic_tensor_init(t, ni.dtype, ni.rank, shape, NULL);
    if (ic_tensor_alloc(c, t) != IC_OK) {
        char gs[256];
        return cli_fail(e, "graph '%s': cannot allocate generated '%s' %s %s: %s", ic_graph_name(g),
                        ni.name, ic_dtype_name(ni.dtype), cli_shape_str(t, gs, sizeof gs),
                        ic_last_error(c));
    }
    int64_t lo = 0, hi = 10;
    if (ni.dtype == IC_U8 || ni.dtype == IC_I8 || ni.dtype == IC_I16) {
        ic_dtype_int_range(ni.dtype, &lo, &hi); /* every value, so wraparound is exercised */
        hi++;
    }
    if (ni.has_range && ni.range_lo < ni.range_hi) {
        lo = ni.range_lo;
        hi = ni.range_hi;
    }
    cli_fill_random(t, seed, ni.name, lo, hi);
    return true;
}

static bool apply_binds(const ic_graph *g, const cli_bind *binds, int nbinds, int64_t *vals,
                        origin *who, cli_err *e)
{
    for (int b = 0; b < nbinds; b++) {
        int s = -1;
        for (int k = 0; k < ic_graph_num_symbols(g); k++)
            if (strcmp(ic_graph_symbol_name(g, k), binds[b].sym) == 0)
                s = k;
        if (s < 0) {
            char list[512] = "";
            size_t n = 0;
            for (int k = 0; k < ic_graph_num_symbols(g) && n < sizeof list; k++)
                n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "",
                                      ic_graph_symbol_name(g, k));
            return cli_fail(e, "--bind %s=%lld: graph '%s' has no symbol '%s' (its symbols: %s)",
                            binds[b].sym, (long long)binds[b].value, ic_graph_name(g),
                            binds[b].sym, n ? list : "none");
        }
        if (vals[s] >= 0 && vals[s] != binds[b].value)
            return cli_fail(e, "symbol '%s' is bound twice: --bind %s=%lld and --bind %s=%lld",
                            binds[b].sym, binds[b].sym, (long long)vals[s], binds[b].sym,
                            (long long)binds[b].value);
        vals[s] = binds[b].value;
        snprintf(who[s].what, sizeof who[s].what, "--bind %s=%lld", binds[b].sym,
                 (long long)binds[b].value);
    }
    return true;
}

bool cli_args_prepare(ic_ctx *c, const ic_graph *g, const char *inputs_path, const cli_bind *binds,
                      int nbinds, uint64_t seed, cli_args *a, cli_err *e)
{
    memset(a, 0, sizeof *a);
    int n = ic_graph_num_args(g), nsym = ic_graph_num_symbols(g);
    a->n = n;
    a->t = calloc((size_t)n + 1, sizeof *a->t);
    a->supplied = calloc((size_t)n + 1, sizeof *a->supplied);
    a->vals = malloc(((size_t)nsym + 1) * sizeof *a->vals);
    origin *who = calloc((size_t)nsym + 1, sizeof *who);
    if (!a->t || !a->supplied || !a->vals || !who) {
        free(who);
        return cli_fail(e, "out of memory");
    }
    for (int s = 0; s < nsym; s++)
        a->vals[s] = -1;
    bool ok = apply_binds(g, binds, nbinds, a->vals, who, e);
    if (ok && inputs_path)
        ok = read_inputs(c, g, inputs_path, a, who, e);
    for (int s = 0; ok && s < nsym; s++)
        if (a->vals[s] < 0) {
            const char *sym = ic_graph_symbol_name(g, s);
            ok = cli_fail(e, "graph '%s': symbol '%s' is not bound: pass --bind %s=N or supply "
                          "an input that fixes it with --inputs", ic_graph_name(g), sym, sym);
        }
    for (int i = 0; ok && i < n; i++)
        if (!a->supplied[i])
            ok = generate(c, g, i, seed, a, e);
    /* The library's own check: ranks, dtypes, fixed sizes, products of symbols. */
    if (ok && ic_runtime_bind_args(g, n, a->t, a->vals) != IC_OK)
        ok = cli_fail_ctx(e, c, inputs_path);
    free(who);
    return ok;
}

/* ---- outputs ---- */

const char *cli_shape_str(const ic_tensor *t, char *buf, size_t n)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

void cli_tensor_stats(const ic_tensor *t, cli_stats *s)
{
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
    double sum = 0;
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double v = ic_tensor_get(t, i);
        if (isnan(v)) {
            s->nan++;
            continue;
        }
        s->min = v < s->min ? v : s->min;
        s->max = v > s->max ? v : s->max;
        sum += v;
        s->n++;
    }
    s->mean = s->n ? sum / (double)s->n : NAN;
}

bool cli_save_outputs(ic_ctx *c, const ic_graph *g, const char *path, int nouts,
                      const ic_tensor *outs, cli_err *e)
{
    const char **names = calloc((size_t)nouts + 1, sizeof *names);
    ic_tensor *ts = calloc((size_t)nouts + 1, sizeof *ts);
    if (!names || !ts) {
        free(names);
        free(ts);
        return cli_fail(e, "out of memory");
    }
    int k = 0;
    for (int i = 0; i < nouts; i++) {
        ic_value v = ic_graph_output(g, i);
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= ic_graph_output(g, j) == v;
        if (dup)
            continue;
        ic_node_info ni;
        ic_graph_node(g, v, &ni);
        names[k] = ni.name;
        ts[k++] = outs[i];
    }
    bool ok = ic_safetensors_save(c, path, k, names, ts) == IC_OK;
    if (!ok) {
        const char *m = ic_last_error(c);
        if (m && strstr(m, path))
            cli_fail(e, "%s", m);
        else
            cli_fail(e, "%s: %s", path, m && *m ? m : "cannot write");
    }
    free(names);
    free(ts);
    return ok;
}

bool cli_check_not_input(const ic_graph *g, const char *graph_path, const char *inputs_path,
                         const char *out, cli_err *e)
{
    if (cli_same_file(out, graph_path) || (out && graph_path && strcmp(out, graph_path) == 0))
        return cli_fail(e, "refusing to write outputs to '%s': it is the graph file", out);
    if (inputs_path && (cli_same_file(out, inputs_path) || strcmp(out, inputs_path) == 0))
        return cli_fail(e, "refusing to write outputs to '%s': it is the --inputs file", out);
    if (!g) {
        /* Fail before a long run rather than after it. */
        struct stat st;
        if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
            return cli_fail(e, "cannot write outputs to '%s': it is a folder", out);
        char parent[4096];
        snprintf(parent, sizeof parent, "%s", out);
        char *sl = strrchr(parent, '/');
        if (sl) {
            sl[sl == parent ? 1 : 0] = 0;
            if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
                return cli_fail(e, "cannot write outputs to '%s': folder '%s' does not exist", out,
                                parent);
        }
        return true;
    }
    /* weights files are named relative to the graph's folder */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", graph_path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = 0;
    else
        dir[0] = 0;
    for (int v = 0; v < ic_graph_num_nodes(g); v++) {
        ic_node_info ni;
        ic_graph_node(g, v, &ni);
        if (ni.op != IC_OP_PARAM || !ni.file)
            continue;
        char p[8192];
        snprintf(p, sizeof p, "%s%s", ni.file[0] == '/' ? "" : dir, ni.file);
        if (cli_same_file(out, p))
            return cli_fail(e, "refusing to write outputs to '%s': it holds the weights of param "
                            "'%s'", out, ni.name);
    }
    return true;
}
