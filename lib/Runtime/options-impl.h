/* options-impl.h - the option registry's rows and values, shared by options.c (the table,
 * parsing and formatting values, writing and reading the option structs) and config.c (the
 * ic_config object). */
#ifndef IC_OPTIONS_IMPL_H
#define IC_OPTIONS_IMPL_H

#include "ic/options.h"
#include "graph-impl.h"

/* How a value goes into one field. */
typedef enum {
    IC__ST_NONE,        /* the struct has no field for the option */
    IC__ST_INT,         /* int field = value (bools 0/1, enums their number) */
    IC__ST_I64,         /* int64_t field = value */
    IC__ST_DBL,         /* double field = value */
    IC__ST_BOOL,        /* bool field = value */
    IC__ST_NOT_BOOL,    /* bool field = !value (no_fusion, no_iconv) */
    IC__ST_STR,         /* const char * field = the text, NULL when empty (borrowed) */
    IC__ST_CUDA_GRAPHS, /* ic_cuda_mode field = value ? IC_CUDA_REDUCE_OVERHEAD : IC_CUDA_DEFAULT */
} ic__store_kind;

typedef struct {
    const char *field;  /* its name, as ic_option_info shows it */
    int off;            /* offsetof in the struct */
    ic__store_kind kind;
} ic__store;

typedef struct {
    const char *word;
    int value;
} ic__word;

/* One option: its public description and how it is stored. */
typedef struct {
    const char *name;
    ic_option_type type;
    const char *def;
    const char *env;
    const char *doc;
    bool code;
    unsigned backends;
    int64_t min, max;       /* INT (and min for FLOAT) */
    const ic__word *words;  /* ENUM and FLAGS, ended by a NULL word */
    ic__store co, cu, sw;   /* ic_compile_options, ic_cuda_options, ic_switches */
} ic__optrow;

/* A value: i for bool/int/enum/flags, f for float, s (owned, NULL = "") for strings. */
typedef struct {
    bool set;
    int64_t i;
    double f;
    char *s;
} ic__optval;

IC_HIDDEN int ic__opt_count(void);
IC_HIDDEN const ic__optrow *ic__opt_row(int id);
/* The id of option name, -1 when none. */
IC_HIDDEN int ic__opt_id(const char *name);
/* IC_EINVAL naming name and listing every option. */
IC_HIDDEN ic_status ic__opt_unknown(ic_ctx *c, const char *name);
/* Parses text as option id's value into *out (out->s allocated for strings). */
IC_HIDDEN ic_status ic__opt_parse(ic_ctx *c, int id, const char *text, ic__optval *out);
/* The default of option id (no allocation: strings default to empty). */
IC_HIDDEN void ic__opt_default(int id, ic__optval *out);
/* v as text (registry form: "true", "8", "auto", "gemm,conv"); returns the length needed. */
IC_HIDDEN size_t ic__opt_format(int id, const ic__optval *v, char *buf, size_t n);
/* Writes v into the field of st in the struct at base (nothing for IC__ST_NONE). */
IC_HIDDEN void ic__opt_store(const ic__store *st, const ic__optval *v, void *base);
/* Reads the field back into *v; false for IC__ST_NONE. */
IC_HIDDEN bool ic__opt_load(const ic__store *st, const void *base, ic__optval *v);
/* Appends "name=value;" to buf at *len (snprintf-like bookkeeping). */
IC_HIDDEN void ic__opt_key_append(int id, const ic__optval *v, char *buf, size_t n, size_t *len);

#endif
