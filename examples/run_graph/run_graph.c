/* run_graph.c - the C API end to end, as a program outside ic-llvm's tree uses the installed
 * library: load a graph file, bind its symbols, fill its run-time arguments, compile it for this
 * CPU, run it, check every output against the reference executor, print the outputs.
 *
 *     run_graph GRAPH.json [SYM=N]...        e.g.  run_graph mlp.json B=4
 *
 * Exit 0 when every output matches the reference within the spec's tolerances, 1 on an error
 * (the library's located message on stderr), 2 on a mismatch. Ownership, as the headers say:
 * the compiled graph borrows the graph (destroy it first), which borrows the context. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ic/ic.h>

enum { EXIT_ERROR = 1, EXIT_MISMATCH = 2 };

typedef struct {
    ic_ctx *c;
    ic_graph *g;
    ic_compiled *cc;
    int64_t *vals;               /* symbol values, -1 = unbound */
    int nargs, nouts;
    ic_tensor *args, *outs, *refs;
} run_state;

static int fail(const run_state *r, const char *what)
{
    fprintf(stderr, "run_graph: %s: %s\n", what, ic_last_error(r->c));
    return EXIT_ERROR;
}

/* SYM=N arguments into r->vals; every symbol of the graph must end up bound. */
static int bind_symbols(run_state *r, int n, char **assign)
{
    int nsym = ic_graph_num_symbols(r->g);
    r->vals = malloc(sizeof(int64_t) * (size_t)(nsym > 0 ? nsym : 1));
    if (!r->vals) {
        fprintf(stderr, "run_graph: out of memory\n");
        return EXIT_ERROR;
    }
    for (int s = 0; s < nsym; s++)
        r->vals[s] = -1;
    for (int i = 0; i < n; i++) {
        char name[64], *end;
        const char *eq = strchr(assign[i], '=');
        size_t len = eq ? (size_t)(eq - assign[i]) : 0;
        long long v = eq ? strtoll(eq + 1, &end, 10) : 0;
        if (!eq || len == 0 || len >= sizeof name || *end || end == eq + 1) {
            fprintf(stderr, "run_graph: '%s': expected SYM=N (e.g. B=4)\n", assign[i]);
            return EXIT_ERROR;
        }
        memcpy(name, assign[i], len);
        name[len] = '\0';
        if (ic_graph_bind(r->g, name, v, r->vals) != IC_OK)
            return fail(r, assign[i]);
    }
    for (int s = 0; s < nsym; s++) {
        if (r->vals[s] < 0) {
            fprintf(stderr, "run_graph: %s: symbol '%s' is not bound: pass %s=N\n",
                    ic_graph_source(r->g), ic_graph_symbol_name(r->g, s),
                    ic_graph_symbol_name(r->g, s));
            return EXIT_ERROR;
        }
    }
    return 0;
}

/* A zeroed contiguous tensor of value v's dtype and its shape under the bound symbols. */
static int alloc_like(run_state *r, ic_value v, ic_tensor *t)
{
    ic_node_info info;
    int64_t shape[IC_MAX_RANK];
    ic_graph_node(r->g, v, &info);
    for (int d = 0; d < info.rank; d++)
        if (ic_graph_eval_dim(r->g, info.shape[d], r->vals, &shape[d]) != IC_OK)
            return fail(r, info.name);
    ic_tensor_init(t, info.dtype, info.rank, shape, NULL);
    if (ic_tensor_alloc(r->c, t) != IC_OK)
        return fail(r, info.name);
    return 0;
}

/* Deterministic arguments: smooth values in [-1, 1] for floats, the input's "range" (or
 * 0..6) for integers, alternating for bool. */
static void fill(const ic_graph *g, ic_value v, ic_tensor *t, int seed)
{
    ic_node_info info;
    ic_graph_node(g, v, &info);
    int64_t lo = 0, span = info.dtype == IC_BOOL ? 2 : 7;
    if (info.has_range) {
        lo = info.range_lo;
        span = info.range_hi - info.range_lo;
    }
    int64_t n = ic_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double x = ic_dtype_is_float(t->dtype) ? sin(0.7 * (double)i + seed)
                                               : (double)(lo + (i + seed) % span);
        ic_tensor_set(t, i, x);
    }
}

static int make_args(run_state *r)
{
    r->nargs = ic_graph_num_args(r->g);
    r->nouts = ic_graph_num_outputs(r->g);
    r->args = calloc((size_t)r->nargs + 1, sizeof(ic_tensor));
    r->outs = calloc((size_t)r->nouts + 1, sizeof(ic_tensor));
    r->refs = calloc((size_t)r->nouts + 1, sizeof(ic_tensor));
    if (!r->args || !r->outs || !r->refs) {
        fprintf(stderr, "run_graph: out of memory\n");
        return EXIT_ERROR;
    }
    for (int i = 0; i < r->nargs; i++) {
        int rc = alloc_like(r, ic_graph_arg(r->g, i), &r->args[i]);
        if (rc)
            return rc;
        fill(r->g, ic_graph_arg(r->g, i), &r->args[i], i);
    }
    for (int i = 0; i < r->nouts; i++) {
        int rc = alloc_like(r, ic_graph_output(r->g, i), &r->outs[i]);
        if (rc)
            return rc;
    }
    return 0;
}

/* Every element of every output within the spec's tolerances of the reference executor. */
static int compare(const run_state *r)
{
    for (int k = 0; k < r->nouts; k++) {
        ic_node_info info;
        double rtol, atol;
        ic_graph_node(r->g, ic_graph_output(r->g, k), &info);
        ic_dtype_tolerance(r->outs[k].dtype, &rtol, &atol);
        int64_t n = ic_tensor_numel(&r->outs[k]);
        for (int64_t i = 0; i < n; i++) {
            double got = ic_tensor_get(&r->outs[k], i), want = ic_tensor_get(&r->refs[k], i);
            bool same = (isnan(got) && isnan(want)) || got == want ||
                        fabs(got - want) <= atol + rtol * fabs(want);
            if (!same) {
                fprintf(stderr, "run_graph: output '%s' element %lld: compiled %.9g, reference "
                        "%.9g (rtol %g, atol %g)\n", info.name, (long long)i, got, want, rtol, atol);
                return EXIT_MISMATCH;
            }
        }
    }
    return 0;
}

static void print_outputs(const run_state *r)
{
    for (int k = 0; k < r->nouts; k++) {
        const ic_tensor *t = &r->outs[k];
        ic_node_info info;
        ic_graph_node(r->g, ic_graph_output(r->g, k), &info);
        printf("%s %s [", info.name, ic_dtype_name(t->dtype));
        for (int d = 0; d < t->rank; d++)
            printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
        printf("]:");
        int64_t n = ic_tensor_numel(t), row = t->rank ? t->shape[t->rank - 1] : 1;
        for (int64_t i = 0; i < n && i < 64; i++)   /* a line per row, 8 values at most */
            printf("%s%12.6g", row > 0 && i % row % 8 == 0 ? "\n" : "", ic_tensor_get(t, i));
        printf("%s\n", n > 64 ? "\n  ..." : "");
    }
}

static int run_graph(run_state *r, const char *path, int nassign, char **assign)
{
    ic_compile_options o;
    int rc;
    if (ic_graph_load_json(r->c, path, &r->g) != IC_OK)
        return fail(r, "loading the graph");
    if ((rc = bind_symbols(r, nassign, assign)) || (rc = make_args(r)))
        return rc;
    ic_compile_options_init(&o);                      /* fusion on, all cores */
    if (ic_compile(r->c, r->g, &o, &r->cc) != IC_OK)
        return fail(r, "compiling");
    if (ic_run(r->cc, r->nargs, r->args, r->nouts, r->outs) != IC_OK)
        return fail(r, "running");
    if (ic_ref_run(r->c, r->g, r->vals, r->nargs, r->args, r->nouts, r->refs) != IC_OK)
        return fail(r, "running the reference executor");
    printf("ic-llvm %s: '%s' compiled for this CPU into %d kernels (%.1f ms)\n", ic_version(),
           ic_graph_name(r->g), ic_compiled_num_kernels(r->cc), ic_compiled_compile_ms(r->cc));
    print_outputs(r);
    if ((rc = compare(r)))
        return rc;
    printf("every output matches the reference executor\n");
    return 0;
}

static void destroy(run_state *r)
{
    for (int i = 0; r->args && i < r->nargs; i++)
        ic_tensor_free(r->c, &r->args[i]);
    for (int i = 0; r->outs && i < r->nouts; i++) {
        ic_tensor_free(r->c, &r->outs[i]);
        ic_tensor_free(r->c, &r->refs[i]);
    }
    free(r->args);
    free(r->outs);
    free(r->refs);
    free(r->vals);
    ic_compiled_destroy(r->cc);                       /* before the graph it borrows */
    ic_graph_destroy(r->g);
    ic_ctx_destroy(r->c);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: run_graph GRAPH.json [SYM=N]...\n");
        return EXIT_ERROR;
    }
    run_state r = { 0 };
    ic_status s = ic_ctx_create(NULL, &r.c);
    if (s != IC_OK) {
        fprintf(stderr, "run_graph: no context: %s\n", ic_status_str(s));
        return EXIT_ERROR;
    }
    int rc = run_graph(&r, argv[1], argc - 2, argv + 2);
    destroy(&r);
    return rc;
}
