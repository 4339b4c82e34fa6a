/* compile.c - the CPU public API: ic_compile (the pipeline, ic__pipeline, through the variant
 * cache: one variant per symbol binding), ic_run (a slot from the variant's pool, checks,
 * the kernels in order) and introspection of the last variant used. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "cpu-impl.h"
#include "ic/options.h"
#include "ic/runtime.h"

void ic_compile_options_init(ic_compile_options *o)
{
    memset(o, 0, sizeof *o);
    o->fusion = 1;
    o->mode = "default";
}

/* Copies o into cc (strings owned by cc) and checks it. */
static ic_status take_options(ic_compiled *cc, const ic_compile_options *o)
{
    ic_ctx *c = cc->c;
    if (o)
        cc->o = *o;
    else
        ic_compile_options_init(&cc->o);
    cc->o.mode = cc->mode = ic__strdup(c, cc->o.mode ? cc->o.mode : "default");
    const char *dir = cc->o.debug_dir;
    cc->o.debug_dir = NULL;
    if (!cc->mode || (dir && !(cc->o.debug_dir = ic__strdup(c, dir))))
        return ic__error(c, IC_ENOMEM, "ic_compile: out of memory");
    /* On the CPU a mode is its autotuning: CUDA graphs have nothing to capture here. */
    const ic_mode_info *m = ic_mode_find(cc->mode);
    if (!m)
        return ic__node_error(cc->g, NULL, NULL, IC_EINVAL, "unknown compile mode '%s' (modes: %s)",
                              cc->mode, ic_mode_names());
    if (cc->o.autotune == 0)
        cc->o.autotune = m->autotune;
    if (cc->o.max_variants < -1)
        return ic__node_error(cc->g, NULL, NULL, IC_EINVAL,
                              "ic_compile: max_variants %d (0: 16, -1: no limit, or a count)", cc->o.max_variants);
    return IC_OK;
}

/* The pipeline every variant of cc is made by. */
static void make_cache(ic_compiled *cc)
{
    ic__pipe P;
    ic__pipe_init(&P, cc->c, &ic__backend_cpu, &cc->o, cc->g);
    P.fusion = P.fusion && cc->o.fusion;
    P.freezing = cc->o.freezing;
    P.tune = &cc->tune;
    ic__pipe_set_debug(&P, cc->o.debug, cc->o.debug_dir);
    ic__vcache_init(&cc->vc, &P, cc->o.max_variants);
}

ic_status ic__compiled_create(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, ic_compiled **out)
{
    *out = NULL;
    ic_status s = ic_graph_verify(g);
    if (s)
        return s;
    ic_compiled *cc = ic__calloc(c, 1, sizeof *cc);
    if (!cc)
        return ic__error(c, IC_ENOMEM, "ic_compile: out of memory");
    cc->c = c;
    cc->g = g;
    pthread_mutex_init(&cc->lock, NULL);
    cc->profile = c->sw.profile;
    cc->nsyms = ic_graph_num_symbols(g);
    cc->bound = ic__malloc(c, sizeof(int64_t) * (size_t)(cc->nsyms + 1));
    s = cc->bound ? take_options(cc, o) : ic__error(c, IC_ENOMEM, "ic_compile: out of memory");
    for (int i = 0; !s && i < cc->nsyms; i++)
        cc->bound[i] = -1;
    make_cache(cc);
    if (s) {
        ic_compiled_destroy(cc);
        return s;
    }
    *out = cc;
    return IC_OK;
}

ic_status ic_compile(ic_ctx *c, const ic_graph *g, const ic_compile_options *o, ic_compiled **out)
{
    if (!out)
        return ic__error(c, IC_EINVAL, "ic_compile: out is NULL");
    *out = NULL;
    if (!g)
        return ic__error(c, IC_EINVAL, "ic_compile: graph is NULL");
    ic_compiled *cc;
    ic_status s = ic__compiled_create(c, g, o, &cc);
    ic__vbase *v;
    if (!s && cc->nsyms == 0)
        s = ic__vcache_get(&cc->vc, cc->bound, &v);
    if (s) {
        ic_compiled_destroy(cc);
        return s;
    }
    *out = cc;
    return IC_OK;
}

void ic_compiled_destroy(ic_compiled *cc)
{
    if (!cc)
        return;
    for (int i = 0; i < cc->vc.n && cc->profile; i++)
        ic__profile_print(cc, (const ic__variant *)cc->vc.v[i]);
    ic__vcache_free(&cc->vc);
    ic__artifact_free(cc->art);
    ic__free(cc->c, cc->bound);
    ic__free(cc->c, cc->mode);
    ic__free(cc->c, (void *)cc->o.debug_dir);
    pthread_mutex_destroy(&cc->lock);
    ic__free(cc->c, cc);
}

ic_status ic_compiled_bind(ic_compiled *cc, const char *sym, int64_t value)
{
    pthread_mutex_lock(&cc->lock);
    ic_status s = ic_graph_bind(cc->g, sym, value, cc->bound);
    cc->vc.last = NULL; /* the fast path matches args only: re-resolve the variant */
    pthread_mutex_unlock(&cc->lock);
    return s;
}

/* ---- running ---- */

static bool args_match(const ic__variant *v, int nargs, const ic_tensor *args)
{
    if (!v || nargs != v->nargs)
        return false;
    for (int i = 0; i < nargs; i++)
        if (!ic__same_sig(&v->argsig[i], &args[i]))
            return false;
    return true;
}

/* The symbol values args fix, on top of the bound ones; every symbol must end up bound. */
static ic_status args_values(ic_compiled *cc, int nargs, const ic_tensor *args, int64_t *vals)
{
    memcpy(vals, cc->bound, sizeof(int64_t) * (size_t)cc->nsyms);
    ic_status s = ic_runtime_bind_args(cc->g, nargs, args, vals);
    for (int i = 0; !s && i < cc->nsyms; i++)
        if (vals[i] < 0)
            s = ic__node_error(cc->g, NULL, NULL, IC_EINVAL,
                               "symbol '%s' is not fixed by any argument: bind it (ic_compiled_bind)",
                               ic_graph_symbol_name(cc->g, i));
    return s;
}

/* The variant for these args: the last one used, a cached one, or a new compile. Called
 * with cc->lock held. */
static ic_status find_variant(ic_compiled *cc, int nargs, const ic_tensor *args, ic__variant **out)
{
    ic__variant *last = (ic__variant *)cc->vc.last;
    if (args_match(last, nargs, args)) {
        last->b.used = ++cc->vc.tick;
        *out = last;
        return IC_OK;
    }
    int64_t stackvals[16], *vals = cc->nsyms <= 16 ? stackvals : ic__malloc(cc->c, sizeof(int64_t) * (size_t)cc->nsyms);
    if (!vals)
        return ic__error(cc->c, IC_ENOMEM, "ic_run: out of memory");
    ic__vbase *v = NULL;
    ic_status s = args_values(cc, nargs, args, vals);
    if (!s)
        s = ic__vcache_get(&cc->vc, vals, &v);
    if (vals != stackvals)
        ic__free(cc->c, vals);
    if (s)
        return s;
    /* bound sizes can still differ from the cached signature (a dtype, a fixed dim) */
    if (!args_match((ic__variant *)v, nargs, args))
        return ic__node_error(cc->g, NULL, NULL, IC_ESHAPE, "arguments do not match the graph");
    *out = (ic__variant *)v;
    return IC_OK;
}

static ic_status check_args(ic_compiled *cc, int nargs, const ic_tensor *args)
{
    if (nargs > 0 && !args)
        return ic__node_error(cc->g, NULL, NULL, IC_EINVAL, "arguments are NULL");
    for (int i = 0; i < nargs; i++)
        if (!args[i].data && ic_tensor_numel(&args[i]) != 0) {
            ic_node_info ni;
            ic_graph_node(cc->g, ic_graph_arg(cc->g, i < ic_graph_num_args(cc->g) ? i : 0), &ni);
            return ic__node_error(cc->g, ni.name, "argument", IC_EINVAL, "argument %d has no data", i);
        }
    return IC_OK;
}

ic_status ic_run(ic_compiled *cc, int nargs, const ic_tensor *args, int nouts, ic_tensor *outs)
{
    if (!cc)
        return IC_EINVAL;
    ic_status s = check_args(cc, nargs, args);
    if (s)
        return s;
    ic__variant *v = NULL;
    pthread_mutex_lock(&cc->lock);
    s = find_variant(cc, nargs, args, &v);
    ic__slot *slot = s ? NULL : ic__slot_acquire(cc, v);
    pthread_mutex_unlock(&cc->lock);
    if (s)
        return s;
    if (!slot)
        return ic__error(cc->c, IC_ENOMEM, "ic_run: out of memory for a run arena");
    if (!(s = ic__check_outputs(cc, v, nargs, args, nouts, outs)) && !(s = ic__check_indices(cc->g, &v->b, args)) &&
        !(s = ic__bind_buffers(cc, v, slot, args, outs))) {
        if (cc->profile) {
            ic__run_profiled(v, slot);
        } else {
            for (int k = 0; k < v->nkernels; k++)
                v->fns[k](ic__kernel_table(v, slot, k));
        }
    }
    ic__slot_release(cc, v, slot);
    return s;
}

/* ---- introspection ---- */

/* Read under cc->lock: runs on other threads change which variant is the last one, and may
 * drop the one that was (max_variants). */
static pthread_mutex_t *lock_of(const ic_compiled *cc)
{
    return (pthread_mutex_t *)&cc->lock;
}

int ic_compiled_num_kernels(const ic_compiled *cc)
{
    if (!cc)
        return 0;
    pthread_mutex_lock(lock_of(cc));
    const ic__variant *v = (const ic__variant *)cc->vc.last;
    int n = v ? v->nkernels : 0;
    pthread_mutex_unlock(lock_of(cc));
    return n;
}

const char *ic_compiled_kernel_name(const ic_compiled *cc, int i)
{
    if (!cc)
        return NULL;
    pthread_mutex_lock(lock_of(cc));
    const ic__variant *v = (const ic__variant *)cc->vc.last;
    const char *name = v && i >= 0 && i < v->nkernels ? ic_program_kernel(v->b.prog, i)->name : NULL;
    pthread_mutex_unlock(lock_of(cc));
    return name;
}

double ic_compiled_compile_ms(const ic_compiled *cc)
{
    if (!cc)
        return 0;
    pthread_mutex_lock(lock_of(cc));
    const ic__variant *v = (const ic__variant *)cc->vc.last;
    double ms = v ? v->b.compile_ms : 0;
    pthread_mutex_unlock(lock_of(cc));
    return ms;
}

int ic_compiled_num_variants(const ic_compiled *cc)
{
    if (!cc)
        return 0;
    pthread_mutex_lock(lock_of(cc));
    int n = cc->vc.n;
    pthread_mutex_unlock(lock_of(cc));
    return n;
}

void ic_compiled_autotune_stats(const ic_compiled *cc, ic_autotune_stats *out)
{
    pthread_mutex_lock(lock_of(cc));
    *out = cc->tune;
    pthread_mutex_unlock(lock_of(cc));
}

int ic_compiled_output_shape(const ic_compiled *cc, int i, int64_t *shape)
{
    if (!cc)
        return -1;
    pthread_mutex_lock(lock_of(cc));
    const ic__variant *v = (const ic__variant *)cc->vc.last;
    int rank = v && i >= 0 && i < v->nouts ? v->outsig[i].rank : -1;
    if (rank >= 0)
        memcpy(shape, v->outsig[i].shape, sizeof(int64_t) * (size_t)rank);
    pthread_mutex_unlock(lock_of(cc));
    return rank;
}
