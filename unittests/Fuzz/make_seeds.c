/* make_seeds.c - seed inputs of the runtime formats' harnesses, made by this build of the
 * library (they hold its version and build id, so the raw ones go stale with every source
 * change; the sealed ones do not: fuzz_artifact.h, fuzz_cache.h). scripts/ci-fuzz.sh runs it
 * into the run's corpus copy before fuzzing; the committed corpus was made the same way:
 *
 *     build/fuzz_make_seeds unittests/Fuzz/corpus
 *
 * It compiles two small graphs on the CPU (tuned: tuning records) with the persistent cache
 * in a temporary folder and saves one as a model; emits a program's PTX with no GPU and makes
 * GPU code entries, GPU tuning records and a GPU saved model from it; then writes, per harness
 * folder, the files (raw) and their sealed forms:
 *   artifact, cuda_artifact   the saved models
 *   cache_entry               each cache entry (selector byte + file, or + its sealed middle)
 *   cache_archive             an export of the cache, and its records sealed
 *   gpu_code                  the GPU entries, all in one input and one by one
 *   tune_record               the CPU records, their params, GPU params texts
 *   config                    config strings, as JSON and base64 */
#include "fuzz_weights.h"
#include "fuzz_gpu.h"
#include "fuzz_cache.h"
#include <dirent.h>
#include <sys/stat.h>
#include "artifact-impl.h"
#include "cache-impl.h"
#include "key-impl.h"
#include "tune_cuda-impl.h"

static const char *out_root;

/* Writes one seed into <root>/<harness>/<tag>-<hash of its bytes>. */
static void seed(const char *harness, const char *tag, const void *a, size_t na, const void *b, size_t nb)
{
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/%s", out_root, harness);
    mkdir(dir, 0777);
    uint64_t h = ic__hash_bytes(ic__hash_bytes(IC__HASH_SEED, a, na), b, nb);
    snprintf(path, sizeof path, "%s/%s-%016llx", dir, tag, (unsigned long long)h);
    FILE *f = fopen(path, "wb");
    if (!f || (na && fwrite(a, 1, na, f) != na) || (nb && fwrite(b, 1, nb, f) != nb) || fclose(f)) {
        fprintf(stderr, "make_seeds: cannot write %s\n", path);
        exit(1);
    }
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static void die(ic_ctx *c, const char *what)
{
    fprintf(stderr, "make_seeds: %s: %s\n", what, ic_last_error(c));
    exit(1);
}

/* ---- saved models: the raw file and its sections as records (fuzz_artifact.h) ---- */

static bool host_line(const char *l, size_t n)
{
    static const char *const keys[] = { "ic", "build", "llvm", "device", "triple", "cpu", "features", "gpu", "sm",
                                        "driver", NULL };
    for (int i = 0; keys[i]; i++) {
        size_t k = strlen(keys[i]);
        if (n > k && !strncmp(l, keys[i], k) && l[k] == ' ')
            return true;
    }
    return false;
}

static void artifact_seeds(const char *harness, const uint8_t *img, size_t n)
{
    seed(harness, "raw", img, n, NULL, 0);
    char *rec = NULL;
    size_t nrec = 0;
    FILE *f = open_memstream(&rec, &nrec);
    uint64_t nsec;
    memcpy(&nsec, img + 8, 8);
    for (uint64_t i = 0; i < nsec; i++) {
        const uint8_t *e = img + 16 + i * (IC__ART_NAME_LEN + 24);
        char name[IC__ART_NAME_LEN + 1] = { 0 };
        uint64_t off, bytes;
        memcpy(name, e, IC__ART_NAME_LEN);
        memcpy(&off, e + IC__ART_NAME_LEN, 8);
        memcpy(&bytes, e + IC__ART_NAME_LEN + 8, 8);
        const char *p = (const char *)img + off;
        bool text = !strcmp(name, "meta") || !strcmp(name, "graph");
        while (text && bytes && !p[bytes - 1]) /* the padding; the sealer pads again */
            bytes--;
        char *body = NULL;
        size_t nbody = 0;
        FILE *b = open_memstream(&body, &nbody);
        for (const char *l = p; l < p + bytes;) { /* meta: the host's lines go, the rest stays */
            const char *nl = memchr(l, '\n', (size_t)(p + bytes - l));
            size_t len = nl ? (size_t)(nl - l) + 1 : (size_t)(p + bytes - l);
            if (strcmp(name, "meta") || !host_line(l, len))
                fwrite(l, 1, len, b);
            l += len;
        }
        fclose(b);
        uint32_t len = (uint32_t)nbody;
        fwrite(name, 1, strlen(name) + 1, f);
        fwrite(&len, 4, 1, f);
        fwrite(body, 1, nbody, f);
        free(body);
    }
    fclose(f);
    seed(harness, "sealed", rec, nrec, NULL, 0);
    free(rec);
}

/* ---- the CPU: two graphs compiled and tuned, one saved ---- */

static const char *const mlp =
    "{\"ic_graph\": 1, \"name\": \"mlp\", \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [4, 8]}],"
    " \"params\": [{\"name\": \"w1\", \"dtype\": \"f32\", \"shape\": [16, 8], \"file\": \"w.safetensors\", \"key\": \"fc1.weight\"},"
    " {\"name\": \"b1\", \"dtype\": \"f32\", \"shape\": [16], \"file\": \"w.safetensors\", \"key\": \"fc1.bias\"}],"
    " \"nodes\": [{\"name\": \"h\", \"op\": \"linear\", \"inputs\": [\"x\", \"w1\", \"b1\"]},"
    " {\"name\": \"y\", \"op\": \"relu\", \"inputs\": [\"h\"]}, {\"name\": \"s\", \"op\": \"softmax\", \"inputs\": [\"y\"],"
    " \"attrs\": {\"dim\": -1}}], \"outputs\": [\"s\"]}";

static void cpu_seeds(ic_ctx *c)
{
    ic_graph *g = NULL;
    ic_compiled *cc = NULL;
    ic_compile_options o;
    ic_compile_options_init(&o);
    o.autotune = IC_TUNE_GEMM | IC_TUNE_POINTWISE | IC_TUNE_REDUCTION;
    o.threads = 1;
    if (ic_graph_load_json_string(c, mlp, fz_dir(), &g) || ic_compile(c, g, &o, &cc))
        die(c, "compiling the CPU graph");
    char path[512];
    if (ic_compiled_save(cc, fz_path(path, sizeof path, "mlp.icm"), true))
        die(c, "saving the CPU model");
    size_t n;
    uint8_t *img = read_all(path, &n);
    artifact_seeds("artifact", img, n);
    free(img);
    ic_compiled_destroy(cc);
    ic_graph_destroy(g);
}

/* ---- the GPU, without one: PTX of fz_program, its entries, records, a saved model ---- */

typedef struct {
    char **e;
    size_t *n;
    int nk;
} entries;

static ic_status fill_gmeta(ic__art_writer *W, FILE *f, const void *arg)
{
    (void)W, (void)arg;
    ic__art_meta_versions(f);
    fprintf(f, "device cuda\ngpu %s\nsm %d\ndriver %d\ngraph fz\noption mode 0\noption no_fusion 0\n"
            "option ptx_opt_level 3\noption allow_tf32 0\noption wgmma -1\noption freezing 0\n"
            "option max_variants 8\noption autotune 0\noption cache 0\n", FZ_GPU_NAME, FZ_GPU_SM, FZ_GPU_DRIVER);
    return IC_OK;
}

typedef struct {
    const entries *E;
    ic__art_wsec *data;
} gvar_arg;

static ic_status fill_gvariants(ic__art_writer *W, FILE *f, const void *arg)
{
    const gvar_arg *a = arg;
    ic__art_put32(f, 1);
    ic__art_put32(f, 0); /* no symbols */
    ic__art_put32(f, (uint32_t)a->E->nk);
    for (int k = 0; k < a->E->nk; k++) {
        ic__art_put64(f, ic__art_piece_offset(a->data, a->data->n));
        ic__art_put64(f, a->E->n[k]);
        if (!ic__art_add_piece(W, a->data, a->E->e[k], a->E->n[k]))
            return IC_ENOMEM;
    }
    return IC_OK;
}

static void gpu_artifact(ic_ctx *c, const entries *E)
{
    ic_graph *g;
    ic__art_writer W = { .c = c, .path = "fz.icm" };
    ic__art_wsec gcode = { .n = 0 };
    gvar_arg a = { E, &gcode };
    if (ic_graph_load_json_string(c, mlp, fz_dir(), &g) || ic__art_text_section(&W, "meta", fill_gmeta, NULL) ||
        ic__art_graph_sections(&W, g, true) || ic__art_text_section(&W, "gvariants", fill_gvariants, &a))
        die(c, "the GPU model");
    ic__art_add_data_section(&W, &gcode, "gcode");
    char *img;
    size_t n;
    if (ic__art_image(&W, &img, &n))
        die(c, "the GPU model's image");
    artifact_seeds("cuda_artifact", (const uint8_t *)img, n);
    free(img);
    ic__free(c, gcode.pc);
    ic__art_writer_free(&W);
    ic_graph_destroy(g);
}

static void gpu_seeds(ic_ctx *c)
{
    ic_ptx_module *pm;
    if (ic_ptx_emit(c, fz_program(), NULL, NULL, &pm))
        die(c, "emitting PTX");
    int nk = ic_ptx_module_num_kernels(pm);
    entries E = { calloc((size_t)nk, sizeof(char *)), calloc((size_t)nk, sizeof(size_t)), nk };
    char *all = NULL;
    size_t nall = 0;
    FILE *f = open_memstream(&all, &nall);
    static char cubin[] = "FAKECUBIN " FZ_GPU_NAME "\n";
    for (int k = 0; k < nk; k++) {
        const ic_ptx_kernel *kk = ic_ptx_module_kernel(pm, k);
        ic__cubin own = { cubin, sizeof cubin - 1, false }, none = { 0 };
        if (!ic__gcode_entry(pm, k, kk->code == k ? &own : &none, &E.e[k], &E.n[k]))
            die(c, "a GPU code entry");
        uint32_t len = (uint32_t)E.n[k];
        fwrite(&len, 4, 1, f);
        fwrite(E.e[k], 1, E.n[k], f);
        seed("gpu_code", "one", &len, 4, E.e[k], E.n[k]);
        char key[64], params[IC__PTX_PARAMS_TEXT];
        snprintf(key, sizeof key, "fuzz gpu kernel %d", k);
        ic__cache_put(c, IC__CACHE_GPU_CODE, key, E.e[k], E.n[k]);
        ic__tune_cuda_record_put(c, key, 1, &kk->params);
        ic__ptx_params_format(&kk->params, params, sizeof params);
        seed("tune_record", "ptx", "\2", 1, params, strlen(params));
    }
    fclose(f);
    seed("gpu_code", "all", all, nall, NULL, 0);
    free(all);
    gpu_artifact(c, &E);
    for (int k = 0; k < nk; k++)
        free(E.e[k]);
    free(E.e);
    free(E.n);
    ic_ptx_module_destroy(pm);
}

/* ---- the cache: every entry, raw and sealed; an export, raw and sealed ---- */

static void cache_seeds(ic_ctx *c)
{
    char dir[512], nsdir[600], path[900], exp[512];
    snprintf(dir, sizeof dir, "%s/cache", fz_dir());
    char *rec = NULL;
    size_t nrec = 0;
    FILE *r = open_memstream(&rec, &nrec);
    for (int ns = 0; ns < 4; ns++) {
        snprintf(nsdir, sizeof nsdir, "%s/%s", dir, fz_cache_ns[ns]);
        DIR *d = opendir(nsdir);
        struct dirent *de;
        int kept = 0;
        while (d && (de = readdir(d)) && kept < 4) {
            if (ic__cache_file_kind(de->d_name) != IC__FILE_ENTRY)
                continue;
            snprintf(path, sizeof path, "%s/%s", nsdir, de->d_name);
            size_t n;
            uint64_t nver = 0; /* the head: magic, then the version field (u64 length + text) */
            uint8_t *b = read_all(path, &n), sel = (uint8_t)ns;
            if (b && n >= 24)
                memcpy(&nver, b + 8, 8);
            if (!b || n < 24 || nver > n - 24) {
                free(b);
                continue;
            }
            seed("cache_entry", fz_cache_ns[ns], &sel, 1, b, n);
            sel |= 4;
            const uint8_t *mid = b + 16 + nver;
            size_t nmid = n - 16 - (size_t)nver - 8;
            seed("cache_entry", fz_cache_ns[ns], &sel, 1, mid, nmid);
            uint32_t len = (uint32_t)nmid;
            fputc(ns, r);
            fwrite(&len, 4, 1, r);
            fwrite(mid, 1, nmid, r);
            if (ns == 1) { /* a CPU tuning record: its text, its params */
                ic__cache_view v;
                const char *why;
                if (ic__cache_parse(b, n, &v, &why) == IC__ENTRY_OK) {
                    seed("tune_record", "cpu", "\0", 1, v.val, (size_t)v.nval);
                    const char *nl = memchr(v.val, '\n', (size_t)v.nval);
                    if (nl && v.nval > 7)
                        seed("tune_record", "cg", "\1", 1, v.val + 7, (size_t)(nl - v.val - 7));
                }
            }
            free(b);
            kept++;
        }
        if (d)
            closedir(d);
    }
    fclose(r);
    seed("cache_archive", "sealed", rec, nrec, NULL, 0);
    free(rec);
    if (ic_cache_export(c, fz_path(exp, sizeof exp, "cache.iccx"), NULL))
        die(c, "exporting the cache");
    size_t n;
    uint8_t *b = read_all(exp, &n);
    seed("cache_archive", "raw", b, n, NULL, 0);
    free(b);
}

/* ---- config strings ---- */

static char *b64(const char *s, bool url)
{
    const char *abc = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                          : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s), w = 0;
    char *o = malloc(n / 3 * 4 + 8);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(uint8_t)s[i] << 16 | (i + 1 < n ? (uint32_t)(uint8_t)s[i + 1] << 8 : 0) |
                     (i + 2 < n ? (uint8_t)s[i + 2] : 0);
        o[w++] = abc[v >> 18 & 63];
        o[w++] = abc[v >> 12 & 63];
        o[w++] = i + 1 < n ? abc[v >> 6 & 63] : url ? 0 : '=';
        o[w++] = i + 2 < n ? abc[v & 63] : url ? 0 : '=';
    }
    o[w] = 0;
    return o;
}

static void config_seed(const char *text)
{
    seed("config", "json", text, strlen(text), NULL, 0);
    for (int url = 0; url < 2; url++) {
        char *e = b64(text, url);
        seed("config", url ? "b64url" : "b64", e, strlen(e), NULL, 0);
        free(e);
    }
}

static void config_seeds(void)
{
    static const char *const texts[] = {
        "{\"mode\": \"max-autotune\"}",
        "{\"mode\": \"reduce-overhead\", \"freezing\": true}",
        "{\"template\": \"cutlass\", \"freezing\": false}",
        "{\"template\": \"tma\", \"options\": {\"vector_width\": 8}}",
        "{\"options\": {\"autotune\": [\"gemm\", \"conv\"], \"fusion\": false}}",
        "{}",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        config_seed(texts[i]);
    char *all = NULL; /* every option at its default, as a string */
    size_t n = 0;
    FILE *f = open_memstream(&all, &n);
    fputs("{\"options\": {", f);
    for (int i = 0; i < ic_option_count(); i++)
        fprintf(f, "%s\"%s\": \"%s\"", i ? ", " : "", ic_option_get(i)->name, ic_option_get(i)->def);
    fputs("}}", f);
    fclose(f);
    config_seed(all);
    free(all);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_ROOT   (writes CORPUS_ROOT/<harness>/...)\n", argv[0]);
        return 2;
    }
    out_root = argv[1];
    mkdir(out_root, 0777);
    fz_weights();
    ic_ctx *c = fz_ctx();
    cpu_seeds(c);
    gpu_seeds(c);
    cache_seeds(c);
    config_seeds();
    ic_ctx_destroy(c);
    printf("make_seeds: seeds written under %s\n", out_root);
    return 0;
}
