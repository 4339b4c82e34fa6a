/* options.c - the option registry (the one table of every tunable and switch: type, default,
 * environment variable, doc, whether it changes generated code, where it is stored), the
 * compile modes and the config templates, and values as text: parsing, formatting, and
 * writing them into (or reading them back from) ic_compile_options, ic_cuda_options and
 * ic_switches. docs/options.md explains the choices; config.c resolves the levels. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "options-impl.h"

#define CO(f, k) { #f, (int)offsetof(ic_compile_options, f), IC__ST_##k }
#define CU(f, k) { #f, (int)offsetof(ic_cuda_options, f), IC__ST_##k }
#define CU_NOT(f) { #f " (inverted)", (int)offsetof(ic_cuda_options, f), IC__ST_NOT_BOOL }
#define SW(f, k) { #f, (int)offsetof(ic_switches, f), IC__ST_##k }
#define SW_NOT(f) { #f " (inverted)", (int)offsetof(ic_switches, f), IC__ST_NOT_BOOL }
#define CUDA_MODE { "mode (reduce-overhead when true)", (int)offsetof(ic_cuda_options, mode), IC__ST_CUDA_GRAPHS }

static const ic__word tristate[] = { { "auto", 0 }, { "on", 1 }, { "off", -1 }, { NULL, 0 } };
static const ic__word wgmma_words[] = { { "auto", 0 }, { "off", -1 }, { NULL, 0 } };
/* "max" and "none" first: formatting prefers them over the single flags they stand for */
static const ic__word tune_words[] = {
    { "max", IC_TUNE_MAX },             { "none", 0 },
    { "gemm", IC_TUNE_GEMM },           { "conv", IC_TUNE_CONV },
    { "pointwise", IC_TUNE_POINTWISE }, { "reduction", IC_TUNE_REDUCTION },
    { "attention", IC_TUNE_ATTENTION }, { "coordesc", IC_TUNE_COORDESC },
    { "exhaustive", IC_TUNE_EXHAUSTIVE }, { NULL, 0 },
};

#define BOOL_ IC_OPTION_BOOL
#define INT_ IC_OPTION_INT
#define FLT_ IC_OPTION_FLOAT
#define ENUM_ IC_OPTION_ENUM
#define FLAGS_ IC_OPTION_FLAGS
#define STR_ IC_OPTION_STRING
#define CPU IC_OPTION_CPU
#define CUDA IC_OPTION_CUDA
#define BOTH IC_OPTION_BOTH

/* The registry. Code generation first, then running, autotuning and caching, debugging. */
static const ic__optrow rows[] = {
    { "fusion", BOOL_, "true", "IC_NO_FUSION", "fuse ops into kernels; false: one kernel per op "
      "(the unfused baseline; IC_NO_FUSION=1 does the same)", true, BOTH, 0, 1, NULL,
      CO(fusion, INT), CU_NOT(no_fusion), SW_NOT(no_fusion) },
    { "threads", INT_, "0", NULL, "OpenMP threads of each CPU kernel (0: the runtime's default, "
      "all cores)", true, CPU, 0, 4096, NULL, CO(threads, INT), { 0 }, { 0 } },
    { "freezing", BOOL_, "false", NULL, "params with data are compile-time constants: constant "
      "subgraphs folded, batch norms folded into convolutions, CPU weights prepacked", true, BOTH,
      0, 1, NULL, CO(freezing, INT), CU(freezing, BOOL), { 0 } },
    { "vector_width", INT_, "0", NULL, "SIMD lanes of CPU kernels (0: heuristic, 1: scalar code)",
      true, CPU, 0, 64, NULL, CO(vector_width, INT), { 0 }, { 0 } },
    { "serial_threshold", INT_, "0", NULL, "CPU kernels with fewer elements run on one thread "
      "(0: heuristic)", true, CPU, 0, INT64_MAX, NULL, CO(serial_threshold, I64), { 0 }, { 0 } },
    { "stream_bytes", INT_, "0", NULL, "CPU row kernels write outputs of at least this many bytes "
      "with non-temporal stores (0: heuristic, -1: never)", true, CPU, -1, INT64_MAX, NULL,
      CO(stream_bytes, I64), { 0 }, { 0 } },
    { "prefetch_bytes", INT_, "0", NULL, "software prefetch distance of CPU kernels in bytes "
      "(0: heuristic, -1: no prefetches)", true, CPU, -1, INT_MAX, NULL, CO(prefetch_bytes, INT),
      { 0 }, { 0 } },
    { "allow_tf32", BOOL_, "false", NULL, "f32 matmuls on tensor cores in TF32 (operands rounded "
      "to 10-bit mantissas; torch's allow_tf32)", true, CUDA, 0, 1, NULL, { 0 },
      CU(allow_tf32, BOOL), { 0 } },
    { "wgmma", ENUM_, "auto", NULL, "f16/bf16 GEMMs as Hopper warpgroup MMAs with mbarrier "
      "pipelines where the GPU is sm_90 (auto); off: mma.sync everywhere", true, CUDA, 0, 0,
      wgmma_words, { 0 }, CU(wgmma, INT), { 0 } },
    { "iconv", BOOL_, "true", "IC_ICONV", "GPU convolutions read their input in place (implicit "
      "im2col); false: they keep im2col copies (IC_ICONV=0 does the same)", true, CUDA, 0, 1,
      NULL, { 0 }, { 0 }, SW_NOT(no_iconv) },
    { "ptx_opt_level", INT_, "0", NULL, "LLVM optimisation level of the NVPTX pipeline (0: 3, "
      "-1: none)", true, CUDA, -1, 3, NULL, { 0 }, CU(ptx_opt_level, INT), { 0 } },
    { "cuda_graphs", BOOL_, "false", NULL, "each run replays its launches as one CUDA graph "
      "(mode reduce-overhead); no effect on the CPU", false, CUDA, 0, 1, NULL, { 0 }, CUDA_MODE,
      { 0 } },
    { "max_variants", INT_, "0", NULL, "symbolic graphs: specialisations kept in memory (0: 16, "
      "-1: no limit), least recently used dropped first", false, BOTH, -1, INT_MAX, NULL,
      CO(max_variants, INT), CU(max_variants, INT), { 0 } },
    { "autotune", FLAGS_, "none", NULL, "kernels the autotuner searches: gemm, conv, pointwise, "
      "reduction, attention, coordesc (refine the winner), max (all), none; exhaustive: no "
      "pruning, early stop or budget", false, BOTH, 0, 0, tune_words, CO(autotune, INT),
      CU(autotune, INT), { 0 } },
    { "autotune_budget", FLT_, "0", NULL, "tuning time limit per graph in seconds (0: 60)", false,
      BOTH, 0, 0, NULL, CO(autotune_budget_s, DBL), CU(autotune_budget_s, DBL), { 0 } },
    { "cache", ENUM_, "auto", "IC_CACHE", "the persistent cache of tuning records and compiled "
      "code (auto: on unless IC_CACHE=0)", false, BOTH, 0, 0, tristate, CO(cache, INT),
      CU(cache, INT), { 0 } },
    { "cache_dir", STR_, "", "IC_CACHE_DIR", "folder of the persistent cache (empty: "
      "$XDG_CACHE_HOME/ic-llvm, else ~/.cache/ic-llvm)", false, BOTH, 0, 0, NULL, { 0 }, { 0 },
      SW(cache_dir, STR) },
    { "autotune_log", BOOL_, "false", "IC_AUTOTUNE_LOG", "an AUTOTUNE table per tuned kernel on "
      "stderr (candidate, time, % of best)", false, BOTH, 0, 1, NULL, { 0 }, { 0 },
      SW(autotune_log, BOOL) },
    { "compile_threads", INT_, "0", "IC_COMPILE_THREADS", "threads compiling kernels (0: the "
      "cores online)", false, BOTH, 0, 4096, NULL, { 0 }, { 0 }, SW(compile_threads, INT) },
    { "debug", ENUM_, "auto", "IC_COMPILE_DEBUG", "each compile writes a debug folder (graph, "
      "loop IR, LLVM IR, PTX; auto: when IC_COMPILE_DEBUG is set)", false, BOTH, 0, 0, tristate,
      CO(debug, INT), CU(debug, INT), { 0 } },
    { "dump", STR_, "", "IC_DUMP", "stages every compile prints (a comma list of stage names, or "
      "all)", false, BOTH, 0, 0, NULL, { 0 }, { 0 }, SW(dump, STR) },
    { "profile", BOOL_, "false", "IC_PROFILE", "time every kernel of every run and print a "
      "profile when the compiled graph is destroyed", false, BOTH, 0, 1, NULL, { 0 }, { 0 },
      SW(profile, BOOL) },
    { "log_level", INT_, "0", "IC_DEBUG", "log level the tools print (0: info, 1: debug)", false,
      BOTH, 0, 9, NULL, { 0 }, { 0 }, SW(debug, INT) },
    { "cuda_driver", STR_, "", "IC_CUDA_DRIVER", "the CUDA driver library ic_cuda_open loads "
      "(empty: libcuda.so.1)", false, CUDA, 0, 0, NULL, { 0 }, { 0 }, SW(cuda_driver, STR) },
    { "ptxas", STR_, "", "IC_PTXAS", "the ptxas that ic-dump --stage sass runs (empty: look on "
      "PATH and in the CUDA folders)", false, CUDA, 0, 0, NULL, { 0 }, { 0 }, SW(ptxas, STR) },
};
enum { NOPTS = sizeof rows / sizeof rows[0] };

int ic__opt_count(void)
{
    return NOPTS;
}

const ic__optrow *ic__opt_row(int id)
{
    return id >= 0 && id < NOPTS ? &rows[id] : NULL;
}

int ic__opt_id(const char *name)
{
    for (int i = 0; name && i < NOPTS; i++)
        if (strcmp(rows[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- the public descriptions, made once from the rows ---- */

static ic_option_info infos[NOPTS];
static char values_text[NOPTS][160];
static pthread_once_t infos_once = PTHREAD_ONCE_INIT;

static void words_text(const ic__word *w, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = 0;
    for (; w->word && len < n; w++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "", w->word);
}

/* What option r accepts, in words: the tail of every bad-value message. */
static void accepted_text(const ic__optrow *r, char *buf, size_t n)
{
    switch (r->type) {
    case IC_OPTION_BOOL: snprintf(buf, n, "true, false"); break;
    case IC_OPTION_INT:
        if (r->max == INT64_MAX || r->max == INT_MAX)
            snprintf(buf, n, "an integer >= %lld", (long long)r->min);
        else
            snprintf(buf, n, "an integer from %lld to %lld", (long long)r->min, (long long)r->max);
        break;
    case IC_OPTION_FLOAT: snprintf(buf, n, "a number of seconds >= %lld", (long long)r->min); break;
    case IC_OPTION_ENUM: words_text(r->words, buf, n); break;
    case IC_OPTION_FLAGS:
        words_text(r->words, buf, n);
        snprintf(buf + strlen(buf), n - strlen(buf), " (a comma list)");
        break;
    case IC_OPTION_STRING: snprintf(buf, n, "any text"); break;
    }
}

static void make_infos(void)
{
    for (int i = 0; i < NOPTS; i++) {
        const ic__optrow *r = &rows[i];
        accepted_text(r, values_text[i], sizeof values_text[i]);
        infos[i] = (ic_option_info){ r->name, r->type, r->def, values_text[i], r->env, r->doc,
                                     r->code, r->backends, r->co.field, r->cu.field, r->sw.field };
    }
}

int ic_option_count(void)
{
    return NOPTS;
}

const ic_option_info *ic_option_get(int i)
{
    if (i < 0 || i >= NOPTS)
        return NULL;
    pthread_once(&infos_once, make_infos);
    return &infos[i];
}

const ic_option_info *ic_option_find(const char *name)
{
    return ic_option_get(ic__opt_id(name));
}

/* A comma list of names[i] for i < n into buf. */
static const char *name_list(const char *(*name)(int), int n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < n && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "", name(i));
    return buf;
}

static const char *row_name(int i)
{
    return rows[i].name;
}

ic_status ic__opt_unknown(ic_ctx *c, const char *name)
{
    char list[1024];
    return ic__error(c, IC_EINVAL, "unknown option '%s' (options: %s)", name ? name : "(null)",
                     name_list(row_name, NOPTS, list, sizeof list));
}

/* ---- modes and templates ---- */

static const ic_mode_info modes[] = {
    { "default", "the defaults: no CUDA graphs, no autotuning", false, 0 },
    { "reduce-overhead", "CUDA graphs: each run replays its launches as one graph (no effect on "
      "the CPU)", true, 0 },
    { "max-autotune", "autotune GEMMs, convolutions, pointwise kernels, reductions and attention, "
      "refined by coordinate descent, plus CUDA graphs", true, IC_TUNE_MAX },
    { "max-autotune-no-cudagraphs", "max-autotune without CUDA graphs", false, IC_TUNE_MAX },
};
enum { NMODES = sizeof modes / sizeof modes[0] };

int ic_mode_count(void)
{
    return NMODES;
}

const ic_mode_info *ic_mode_get(int i)
{
    return i >= 0 && i < NMODES ? &modes[i] : NULL;
}

const ic_mode_info *ic_mode_find(const char *name)
{
    for (int i = 0; name && i < NMODES; i++)
        if (strcmp(modes[i].name, name) == 0)
            return &modes[i];
    return NULL;
}

const char *ic_mode_names(void)
{
    return "default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs";
}

/* docs/options.md, "Templates", gives the reasoning behind each mapping. */
static const ic_template_info templates[] = {
    { "triton", "default", { NULL }, "Inductor's own generated kernels: ours are the analog, so "
      "the defaults" },
    { "cpp_wrapper", "default", { NULL }, "a C++ instead of a Python wrapper around the kernels: "
      "our runtime is C already, so the defaults" },
    { "cutlass", "default", { "wgmma=auto", "autotune=gemm,conv", NULL }, "CUTLASS GEMM templates "
      "chosen by autotuning: our own GEMM templates (wgmma on sm_90) with GEMMs and convolutions "
      "tuned" },
    { "aten", "default", { "autotune=none", NULL }, "GEMMs by the library (ATen) rather than "
      "tuned templates: our fixed heuristic GEMMs, nothing tuned; fusion stays on, as Inductor's "
      "aten backend fuses the rest" },
    { "cudagraphs", "reduce-overhead", { NULL }, "CUDA graphs (mode reduce-overhead; no effect on "
      "the CPU)" },
    { "max_autotune", "max-autotune", { NULL }, "mode max-autotune" },
    { "freezing", "default", { "freezing=true", NULL }, "freezing: params become constants" },
    { "tma", "default", { "wgmma=auto", "autotune=gemm", NULL }, "Inductor's TMA GEMM templates: "
      "our wgmma pipeline (mbarrier stages; we have no TMA loads) where the GPU is sm_90, "
      "mma.sync elsewhere, GEMMs tuned" },
};
enum { NTEMPLATES = sizeof templates / sizeof templates[0] };

int ic_template_count(void)
{
    return NTEMPLATES;
}

const ic_template_info *ic_template_get(int i)
{
    return i >= 0 && i < NTEMPLATES ? &templates[i] : NULL;
}

const ic_template_info *ic_template_find(const char *name)
{
    for (int i = 0; name && i < NTEMPLATES; i++)
        if (strcmp(templates[i].name, name) == 0)
            return &templates[i];
    return NULL;
}

/* ---- values as text ---- */

static bool parse_bool(const char *t, int64_t *out)
{
    static const char *const on[] = { "true", "1", "on", "yes" }, *const off[] = { "false", "0", "off", "no" };
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(t, on[i]) == 0)
            return (*out = 1), true;
        if (strcasecmp(t, off[i]) == 0)
            return (*out = 0), true;
    }
    return false;
}

static bool parse_int(const char *t, const ic__optrow *r, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(t, &end, 10);
    if (!*t || *end || errno || v < r->min || v > r->max)
        return false;
    *out = v;
    return true;
}

static bool parse_float(const char *t, const ic__optrow *r, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(t, &end);
    if (!*t || *end || errno || !isfinite(v) || v < (double)r->min || v > 1e9)
        return false;
    *out = v;
    return true;
}

static bool find_word(const ic__word *w, const char *t, size_t len, int64_t *out)
{
    for (; w->word; w++)
        if (strlen(w->word) == len && strncmp(w->word, t, len) == 0)
            return (*out = w->value), true;
    return false;
}

/* A comma list of flag words; "none" only alone. */
static bool parse_flags(const char *t, const ic__word *w, int64_t *out)
{
    int64_t v = 0, f;
    int n = 0;
    bool none = false;
    for (const char *p = t;; p++) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!find_word(w, p, len, &f))
            return false;
        none |= f == 0;
        v |= f;
        n++;
        if (!e)
            break;
        p = e;
    }
    if (none && n > 1)
        return false;
    *out = v;
    return true;
}

ic_status ic__opt_parse(ic_ctx *c, int id, const char *text, ic__optval *out)
{
    const ic__optrow *r = &rows[id];
    memset(out, 0, sizeof *out);
    out->set = true;
    bool ok = false;
    text = text ? text : "";
    switch (r->type) {
    case IC_OPTION_BOOL: ok = parse_bool(text, &out->i); break;
    case IC_OPTION_INT: ok = parse_int(text, r, &out->i); break;
    case IC_OPTION_FLOAT: ok = parse_float(text, r, &out->f); break;
    case IC_OPTION_ENUM: ok = find_word(r->words, text, strlen(text), &out->i); break;
    case IC_OPTION_FLAGS: ok = parse_flags(text, r->words, &out->i); break;
    case IC_OPTION_STRING:
        if (*text && !(out->s = ic__strdup(c, text)))
            return ic__error(c, IC_ENOMEM, "option '%s': out of memory", r->name);
        ok = true;
        break;
    }
    if (ok)
        return IC_OK;
    pthread_once(&infos_once, make_infos);
    return ic__error(c, IC_EINVAL, "option '%s': bad value '%s' (accepted: %s)", r->name, text,
                     values_text[id]);
}

void ic__opt_default(int id, ic__optval *out)
{
    const ic__optrow *r = &rows[id];
    memset(out, 0, sizeof *out);
    switch (r->type) {
    case IC_OPTION_BOOL: parse_bool(r->def, &out->i); break;
    case IC_OPTION_INT: parse_int(r->def, r, &out->i); break;
    case IC_OPTION_FLOAT: parse_float(r->def, r, &out->f); break;
    case IC_OPTION_ENUM: find_word(r->words, r->def, strlen(r->def), &out->i); break;
    case IC_OPTION_FLAGS: parse_flags(r->def, r->words, &out->i); break;
    case IC_OPTION_STRING: break;
    }
}

const char *ic_autotune_text(int flags, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = 0;
    if (flags == 0)
        return snprintf(buf, n, "none"), buf;
    for (const ic__word *w = tune_words; w->word; w++) {
        if (!w->value || (flags & w->value) != w->value)
            continue;
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? "," : "", w->word);
        flags &= ~w->value;
    }
    return buf;
}

/* The shortest %g text that reads back as f (2.5, not 2.5000000000000000). */
static size_t float_text(double f, char *buf, size_t n)
{
    char t[40];
    if (f == floor(f) && fabs(f) < 1e15)
        return (size_t)snprintf(buf, n, "%.0f", f);
    for (int p = 1; p < 17; p++) {
        snprintf(t, sizeof t, "%.*g", p, f);
        if (strtod(t, NULL) == f)
            break;
    }
    if (strtod(t, NULL) != f)
        snprintf(t, sizeof t, "%.17g", f);
    return (size_t)snprintf(buf, n, "%s", t);
}

size_t ic__opt_format(int id, const ic__optval *v, char *buf, size_t n)
{
    const ic__optrow *r = &rows[id];
    char tmp[160];
    const char *word = NULL;
    switch (r->type) {
    case IC_OPTION_BOOL: return (size_t)snprintf(buf, n, "%s", v->i ? "true" : "false");
    case IC_OPTION_INT: return (size_t)snprintf(buf, n, "%lld", (long long)v->i);
    case IC_OPTION_FLOAT: return float_text(v->f, buf, n);
    case IC_OPTION_ENUM:
        for (const ic__word *w = r->words; w->word; w++)
            if (w->value == v->i)
                word = w->word;
        return word ? (size_t)snprintf(buf, n, "%s", word) : (size_t)snprintf(buf, n, "%lld", (long long)v->i);
    case IC_OPTION_FLAGS: return (size_t)snprintf(buf, n, "%s", ic_autotune_text((int)v->i, tmp, sizeof tmp));
    case IC_OPTION_STRING: return (size_t)snprintf(buf, n, "%s", v->s ? v->s : "");
    }
    return 0;
}

void ic__opt_key_append(int id, const ic__optval *v, char *buf, size_t n, size_t *len)
{
    char val[256];
    ic__opt_format(id, v, val, sizeof val);
    *len += (size_t)snprintf(*len < n ? buf + *len : NULL, *len < n ? n - *len : 0, "%s=%s;",
                             rows[id].name, val);
}

/* ---- the option structs ---- */

void ic__opt_store(const ic__store *st, const ic__optval *v, void *base)
{
    char *p = (char *)base + st->off;
    switch (st->kind) {
    case IC__ST_NONE: break;
    case IC__ST_INT: *(int *)p = (int)v->i; break;
    case IC__ST_I64: *(int64_t *)p = v->i; break;
    case IC__ST_DBL: *(double *)p = v->f; break;
    case IC__ST_BOOL: *(bool *)p = v->i != 0; break;
    case IC__ST_NOT_BOOL: *(bool *)p = v->i == 0; break;
    case IC__ST_STR: *(const char **)p = v->s && *v->s ? v->s : NULL; break;
    case IC__ST_CUDA_GRAPHS: *(ic_cuda_mode *)p = v->i ? IC_CUDA_REDUCE_OVERHEAD : IC_CUDA_DEFAULT; break;
    }
}

/* A mode of ic_cuda_options (any of ic_cuda_mode) read back: whether it captures graphs. */
static bool cuda_mode_graphs(ic_cuda_mode m)
{
    const ic_mode_info *mi = ic_mode_get((int)m);
    return mi && mi->cuda_graphs;
}

bool ic__opt_load(const ic__store *st, const void *base, ic__optval *v)
{
    const char *p = (const char *)base + st->off;
    memset(v, 0, sizeof *v);
    v->set = true;
    switch (st->kind) {
    case IC__ST_NONE: return false;
    case IC__ST_INT: v->i = *(const int *)p; break;
    case IC__ST_I64: v->i = *(const int64_t *)p; break;
    case IC__ST_DBL: v->f = *(const double *)p; break;
    case IC__ST_BOOL: v->i = *(const bool *)p; break;
    case IC__ST_NOT_BOOL: v->i = !*(const bool *)p; break;
    case IC__ST_STR: v->s = (char *)*(const char *const *)p; break;
    case IC__ST_CUDA_GRAPHS: v->i = cuda_mode_graphs(*(const ic_cuda_mode *)p); break;
    }
    return true;
}

/* The key text of the code-changing options of one backend, each read from the struct at base
 * through the store the row picks (sel), else from the switches, else the default. */
static size_t struct_key(unsigned backend, const void *base, size_t sel, const ic_switches *sw,
                         char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = 0;
    for (int id = 0; id < NOPTS; id++) {
        const ic__optrow *r = &rows[id];
        if (!r->code || !(r->backends & backend))
            continue;
        ic__optval v;
        const ic__store *st = (const ic__store *)((const char *)r + sel);
        if (!ic__opt_load(st, base, &v) && !(sw && ic__opt_load(&r->sw, sw, &v)))
            ic__opt_default(id, &v);
        ic__opt_key_append(id, &v, buf, n, &len);
    }
    return len;
}

size_t ic_compile_options_key(const ic_compile_options *o, const ic_switches *sw, char *buf, size_t n)
{
    ic_compile_options d;
    if (!o) {
        ic_compile_options_init(&d);
        o = &d;
    }
    return struct_key(IC_OPTION_CPU, o, offsetof(ic__optrow, co), sw, buf, n);
}

size_t ic_cuda_options_key(const ic_cuda_options *o, const ic_switches *sw, char *buf, size_t n)
{
    ic_cuda_options d;
    if (!o) {
        ic_cuda_options_init(&d);
        o = &d;
    }
    return struct_key(IC_OPTION_CUDA, o, offsetof(ic__optrow, cu), sw, buf, n);
}
