/* fuzz_graph_json.c - the graph JSON loader (lib/Graph/json.c): ic_graph_load_json over the
 * bytes as a file (NULs, size bounds, weight files named relative to it) and
 * ic_graph_load_json_string over them as a C string. Params may name "w.safetensors" or
 * "tiny_mlp.safetensors" beside the graph (fuzz_weights.h). A graph that loads must save to
 * text (ic__graph_json_text) that loads again; a refusal must come with a message. */
#include "fuzz_weights.h"
#include "graph-impl.h"

static void check_graph(ic_ctx *c, ic_graph *g)
{
    FZ_CHECK(ic_graph_verify(g) == IC_OK, "a loaded graph fails verify: %s", ic_last_error(c));
    char *text = NULL;
    size_t n = 0;
    ic_status st = ic__graph_json_text(g, true, &text, &n);
    FZ_CHECK(st == IC_OK, "a loaded graph does not save: %s", ic_last_error(c));
    ic_graph *g2 = NULL;
    st = ic_graph_load_json_string(c, text, fz_dir(), &g2);
    FZ_CHECK(st == IC_OK, "the saved text does not load: %s\n%s", ic_last_error(c), text);
    ic_graph_destroy(g2);
    free(text);
}

static void load(ic_ctx *c, ic_status st, ic_graph *g)
{
    fz_note(c, st);
    if (st == IC_OK)
        check_graph(c, g);
    else
        FZ_CHECK(ic_last_error(c)[0], "status %d without a message", (int)st);
    ic_graph_destroy(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_weights();
    ic_ctx *c = fz_ctx();
    char path[512];
    ic_graph *g = NULL;
    fz_write(path, sizeof path, "g.json", data, size);
    ic_status st = ic_graph_load_json(c, path, &g);
    load(c, st, g);
    char *s = fz_cstr(data, size);
    g = NULL;
    st = ic_graph_load_json_string(c, s, fz_dir(), &g);
    load(c, st, g);
    free(s);
    ic_ctx_destroy(c);
    return 0;
}
