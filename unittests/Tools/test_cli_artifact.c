/* test_cli_artifact.c - ic-run --save-artifact F (after compiling) and ic-run --artifact F
 * (instead of a graph: loads the saved model and runs it, with the same checks and report),
 * and their bad uses. Each run's cache is a fresh folder (IC_CACHE_DIR). */
#include "cli_run.h"

#define FAST "--iters 1 --warmup 0"

static const char graph_text[] =
    "{\"ic_graph\": 1, \"name\": \"small\",\n"
    " \"inputs\": [{\"name\": \"x\", \"dtype\": \"f32\", \"shape\": [\"B\", 32]}],\n"
    " \"params\": [],\n"
    " \"nodes\": [{\"name\": \"e\", \"op\": \"exp\", \"inputs\": [\"x\"]},\n"
    "           {\"name\": \"s\", \"op\": \"softmax\", \"inputs\": [\"e\"], \"attrs\": {\"dim\": 1}}],\n"
    " \"outputs\": [\"s\"]}\n";

typedef struct {
    char dir[4096], graph[4096], model[4096], env[4200], out1[4096], out2[4096];
} fixture;

static void setup(fixture *f)
{
    snprintf(f->dir, sizeof f->dir, "%s", ict_tmpdir());
    snprintf(f->graph, sizeof f->graph, "%s", ict_path(f->dir, "small.json"));
    snprintf(f->model, sizeof f->model, "%s", ict_path(f->dir, "small.icm"));
    snprintf(f->out1, sizeof f->out1, "%s", ict_path(f->dir, "out1.safetensors"));
    snprintf(f->out2, sizeof f->out2, "%s", ict_path(f->dir, "out2.safetensors"));
    snprintf(f->env, sizeof f->env, "IC_CACHE_DIR='%s'", ict_path(f->dir, "cache"));
    write_text(f->graph, graph_text);
}

Test(cli_artifact, save_then_run_the_saved_model)
{
    fixture f;
    setup(&f);
    char args[16384];
    snprintf(args, sizeof args, "'%s' --bind B=4 --no-compare " FAST " --save-outputs '%s' --save-artifact '%s'",
             f.graph, f.out1, f.model);
    run_result r = run_tool_env(f.dir, f.env, "ic-run", args);
    assert_ok(r, "--save-artifact");
    cr_assert(strstr(r.out, "saved the compiled model (compiled) to"), "stdout: %s", r.out);
    result_free(&r);
    cr_assert(access(f.model, R_OK) == 0, "no model written");

    /* no cache at all: the code comes from the file; same outputs, checked against the reference */
    snprintf(args, sizeof args, "--artifact '%s' --bind B=4 " FAST " --check --json --save-outputs '%s'", f.model,
             f.out2);
    r = run_tool_env(f.dir, "IC_CACHE=0", "ic-run", args);
    assert_ok(r, "--artifact");
    cr_assert(strstr(r.out, "\"compile_ms\"") && strstr(r.out, "\"check\": true"), "report: %s", r.out);
    cr_assert(strstr(r.out, "small.icm"), "the report names the model file: %s", r.out);
    cr_assert(!strstr(r.out, "\"unfused\""), "no unfused baseline from a model: %s", r.out);
    result_free(&r);
    cr_assert(files_equal(f.out1, f.out2), "the saved model's outputs differ from the compiled graph's");

    /* the table form too */
    snprintf(args, sizeof args, "--artifact '%s' --bind B=4 " FAST, f.model);
    r = run_tool_env(f.dir, "IC_CACHE=0", "ic-run", args);
    assert_ok(r, "--artifact table");
    cr_assert(strstr(r.out, "compiled") && strstr(r.out, "small"), "table: %s", r.out);
    result_free(&r);
    ict_rmtree(f.dir);
}

Test(cli_artifact, bad_uses_are_one_line_errors)
{
    fixture f;
    setup(&f);
    char args[16384];
    snprintf(args, sizeof args, "'%s' --artifact '%s' " FAST, f.graph, f.model);
    run_result r = run_tool(f.dir, "ic-run", args);
    assert_fails(r, "ic-run", "graph and model", "not both");
    result_free(&r);

    snprintf(args, sizeof args, "--artifact '%s' --device cuda " FAST, f.model);
    r = run_tool(f.dir, "ic-run", args);
    assert_fails(r, "ic-run", "cuda model", "CPU code", "--device cuda");
    result_free(&r);

    snprintf(args, sizeof args, "--artifact '%s' --backend unfused " FAST, f.model);
    r = run_tool(f.dir, "ic-run", args);
    assert_fails(r, "ic-run", "unfused model", "--backend unfused");
    result_free(&r);

    snprintf(args, sizeof args, "--artifact '%s' " FAST, ict_path(f.dir, "absent.icm"));
    r = run_tool(f.dir, "ic-run", args);
    assert_fails(r, "ic-run", "absent model", "absent.icm", "cannot open");
    result_free(&r);

    /* a graph file is not a model */
    snprintf(args, sizeof args, "--artifact '%s' " FAST, f.graph);
    r = run_tool(f.dir, "ic-run", args);
    assert_fails(r, "ic-run", "graph as model", "small.json", "not a saved ic model");
    result_free(&r);

    /* never over an input of the run */
    snprintf(args, sizeof args, "'%s' --bind B=2 " FAST " --save-artifact '%s'", f.graph, f.graph);
    r = run_tool_env(f.dir, f.env, "ic-run", args);
    assert_fails(r, "ic-run", "model over the graph", "refusing", "small.json");
    result_free(&r);
    char *text = read_text(f.graph);
    cr_assert(text && strcmp(text, graph_text) == 0, "the graph was overwritten");
    free(text);

    snprintf(args, sizeof args, "'%s' --bind B=2 --backend ref " FAST " --save-artifact '%s'", f.graph, f.model);
    r = run_tool(f.dir, "ic-run", args);
    assert_fails(r, "ic-run", "ref model", "--backend ref");
    result_free(&r);

    snprintf(args, sizeof args, "'%s' --bind B=2 " FAST " --save-artifact ''", f.graph);
    r = run_tool(f.dir, "ic-run", args);
    assert_fails(r, "ic-run", "empty name", "--save-artifact needs a file name");
    result_free(&r);
    ict_rmtree(f.dir);
}
