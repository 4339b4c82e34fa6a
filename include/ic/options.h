/* options.h - the option registry, the compile modes, the config templates and ic_config, the
 * object that resolves them into ic_compile_options, ic_cuda_options and ic_switches
 * (lib/Runtime/options.c; the full table: docs/options.md).
 *
 *     ic_config *cfg;
 *     ic_config_create(c, &cfg);                      // every option at its default
 *     ic_config_set_template(cfg, "max_autotune");    // lowest priority
 *     ic_config_set_freezing(cfg, true);              // above the template
 *     ic_config_set(cfg, "vector_width", "8");        // explicit options: highest
 *     ic_compile_options o;
 *     ic_compile_options_init(&o);
 *     ic_config_apply_compile(cfg, &o);               // the options cfg sets, written into o
 *     ic_compile(c, g, &o, &cc);
 *     ic_config_destroy(cfg);                         // after the compile: o borrows cfg's strings
 *
 * Priority, highest first: explicit options (ic_config_set, "options" of a config string) and
 * the explicit mode (the two are exclusive, as torch.compile's mode and options), the freezing
 * flag, the template (its options, then the mode it implies). An option no level sets keeps its
 * registry default, and apply leaves its field as the caller initialised it.
 * Errors go to the context (ic_last_error): an unknown option, mode or template lists the valid
 * names; a bad value names the option, the value and what is accepted. A failed call leaves the
 * config as it was. */
#ifndef IC_OPTIONS_H
#define IC_OPTIONS_H

#include "ic/ptx.h"
#include "ic/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    IC_OPTION_BOOL,   /* true/false (also 1/0, on/off, yes/no) */
    IC_OPTION_INT,    /* a decimal integer in [min, max] */
    IC_OPTION_FLOAT,  /* a finite number >= min */
    IC_OPTION_ENUM,   /* one word of `values` */
    IC_OPTION_FLAGS,  /* a comma list of the words of `values` */
    IC_OPTION_STRING, /* any text */
} ic_option_type;

/* Which backends an option acts on. */
enum { IC_OPTION_CPU = 1, IC_OPTION_CUDA = 2, IC_OPTION_BOTH = 3 };

typedef struct ic_option_info {
    const char *name;          /* "vector_width": ic_config_set, ic-run --option NAME=VALUE */
    ic_option_type type;
    const char *def;           /* the default, as ic_config_get prints it */
    const char *values;        /* what is accepted, in words ("an integer from 0 to 64",
                                * "gemm, conv, ..."): error messages and --list-options */
    const char *env;           /* the environment variable that also sets it, or NULL */
    const char *doc;           /* one line */
    bool code;                 /* changes generated code: part of the cache keys */
    unsigned backends;         /* IC_OPTION_CPU | IC_OPTION_CUDA */
    const char *compile_field; /* where apply writes it: a field of ic_compile_options, */
    const char *cuda_field;    /* of ic_cuda_options ("no_fusion (inverted)"), */
    const char *switch_field;  /* of ic_switches; NULL where none */
} ic_option_info;

/* The registry, in its fixed order (options of a kind together). */
IC_API int ic_option_count(void);
/* Option i, NULL when i is out of range. */
IC_API const ic_option_info *ic_option_get(int i);
/* The option named name, NULL when none is. */
IC_API const ic_option_info *ic_option_find(const char *name);

/* A compile mode, as torch._inductor.list_mode_options(): what it turns on. */
typedef struct ic_mode_info {
    const char *name;          /* "max-autotune" */
    const char *doc;
    bool cuda_graphs;          /* sets option cuda_graphs (no effect on the CPU) */
    int autotune;              /* sets option autotune to these IC_TUNE_* flags when not 0 */
} ic_mode_info;

/* default, reduce-overhead, max-autotune, max-autotune-no-cudagraphs (torch.compile's order). */
IC_API int ic_mode_count(void);
IC_API const ic_mode_info *ic_mode_get(int i);
IC_API const ic_mode_info *ic_mode_find(const char *name);
/* "default, reduce-overhead, ..." (static text, for messages). */
IC_API const char *ic_mode_names(void);

/* A config template (GraphNet's Inductor templates, docs/options.md says why each maps so). */
typedef struct ic_template_info {
    const char *name;          /* "max_autotune" */
    const char *mode;          /* the mode it implies ("default" for most) */
    const char *options[4];    /* "name=value" our options it sets, NULL-terminated */
    const char *doc;           /* what the name means for us, incl. where we have no analog */
} ic_template_info;

/* triton, cpp_wrapper, cutlass, aten, cudagraphs, max_autotune, freezing, tma. */
IC_API int ic_template_count(void);
IC_API const ic_template_info *ic_template_get(int i);
IC_API const ic_template_info *ic_template_find(const char *name);

/* IC_TUNE_* flags as text ("none", "max", "gemm,conv", "max,exhaustive") into buf. */
IC_API const char *ic_autotune_text(int flags, char *buf, size_t n);

typedef struct ic_config ic_config;

/* A config with no option set (every one at its default); the caller owns *out. c receives
 * the errors of every call on the config and must outlive it. */
IC_API ic_status ic_config_create(ic_ctx *c, ic_config **out);
IC_API void ic_config_destroy(ic_config *cfg);

/* An explicit option. IC_EINVAL for an unknown name (the message lists the options), a bad
 * value, or a mode other than "default" already set. */
IC_API ic_status ic_config_set(ic_config *cfg, const char *name, const char *value);
/* The resolved value of option name as text (what wins of the levels, else the default) into
 * buf; IC_EINVAL for an unknown name, IC_ENOMEM when n is too small. */
IC_API ic_status ic_config_get(const ic_config *cfg, const char *name, char *buf, size_t n);
/* The explicit mode. "default" sets nothing (and so never conflicts with options); another
 * with options already set is an error ("mode and options are exclusive"). */
IC_API ic_status ic_config_set_mode(ic_config *cfg, const char *mode);
/* The template (replacing an earlier one). */
IC_API ic_status ic_config_set_template(ic_config *cfg, const char *name);
/* The freezing flag: option freezing, above the template, below explicit options. */
IC_API void ic_config_set_freezing(ic_config *cfg, bool on);
/* Reads a config string: a JSON object, or base64 (standard or URL-safe, padding optional) of
 * one, with the keys "mode", "template", "options" (an object: option name -> bool, number,
 * string, or for flags an array of words) and "freezing" (bool); other keys are errors. All
 * or nothing: on an error cfg is unchanged. */
IC_API ic_status ic_config_parse(ic_config *cfg, const char *text);

/* The mode in force: the explicit one, else the template's, else "default". */
IC_API const char *ic_config_mode(const ic_config *cfg);
/* The template set, or NULL. */
IC_API const char *ic_config_template(const ic_config *cfg);
/* Whether some level sets option name (else it is at its default). */
IC_API bool ic_config_is_set(const ic_config *cfg, const char *name);
/* Whether option name was set explicitly (ic_config_set or a config's "options"). */
IC_API bool ic_config_is_explicit(const ic_config *cfg, const char *name);

/* Write every option that some level sets and that has a field in the struct into it (the
 * others keep the caller's values). Strings are borrowed from cfg. The mode is applied
 * through its options (cuda_graphs, autotune); ic_compile_options.mode is left as it is. */
IC_API void ic_config_apply_compile(const ic_config *cfg, ic_compile_options *o);
IC_API void ic_config_apply_cuda(const ic_config *cfg, ic_cuda_options *o);
IC_API void ic_config_apply_switches(const ic_config *cfg, ic_switches *s);

/* The canonical text of the code-changing options of `backends` (IC_OPTION_CPU / _CUDA), in
 * registry order, "name=value;..." with resolved values: equal texts mean the same generated
 * code, the part of cache keys that options contribute. snprintf-like: returns the length
 * the whole text needs; buf (n bytes) gets as much as fits. */
IC_API size_t ic_config_key(const ic_config *cfg, unsigned backends, char *buf, size_t n);
/* The same text read back from option structs (sw: the context's switches, for options that
 * live there; NULL = their defaults), so a compile keys its cache by what it was given. */
IC_API size_t ic_compile_options_key(const ic_compile_options *o, const ic_switches *sw,
                                     char *buf, size_t n);
IC_API size_t ic_cuda_options_key(const ic_cuda_options *o, const ic_switches *sw, char *buf,
                                  size_t n);

#ifdef __cplusplus
}
#endif
#endif
