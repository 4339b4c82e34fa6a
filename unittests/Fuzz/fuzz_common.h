/* fuzz_common.h - what every harness shares: a per-process temporary folder (the files a
 * reader needs are written there, and IC_CACHE_DIR points inside it, so a harness never
 * writes anywhere else; it is removed at exit) and a context that logs nothing.
 *
 * Every harness treats a crash, a hang, a leak or UB as the bug: a reader must refuse any input
 * with an ic_status and a message, never abort. Where a reader's contract says more (a graph
 * it loaded saves to text that loads again), the harness checks that too and aborts if not. */
#ifndef IC_FUZZ_COMMON_H
#define IC_FUZZ_COMMON_H
#define _GNU_SOURCE
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ic/ic.h"

static char fz_tmp[256];

static inline int fz_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static inline void fz_cleanup(void)
{
    if (fz_tmp[0])
        nftw(fz_tmp, fz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* The temporary folder, made on first use; IC_CACHE_DIR is set before any context exists. */
static inline const char *fz_dir(void)
{
    if (fz_tmp[0])
        return fz_tmp;
    const char *t = getenv("TMPDIR");
    snprintf(fz_tmp, sizeof fz_tmp, "%s/ic-fuzz-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(fz_tmp)) {
        perror("fuzz: mkdtemp");
        abort();
    }
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", fz_tmp);
    setenv("IC_CACHE_DIR", cache, 1);
    atexit(fz_cleanup);
    return fz_tmp;
}

/* "<tmp>/<name>" into out. */
static inline const char *fz_path(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/%s", fz_dir(), name);
    return out;
}

/* Writes data to "<tmp>/<name>"; aborts if it cannot (the harness, not the reader, failed). */
static inline const char *fz_write(char *out, size_t n, const char *name, const void *data, size_t size)
{
    fz_path(out, n, name);
    FILE *f = fopen(out, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f)) {
        perror("fuzz: writing the input file");
        abort();
    }
    return out;
}

/* A context that keeps its messages to itself (the log is off by default). */
static inline ic_ctx *fz_ctx(void)
{
    fz_dir();
    ic_ctx *c;
    if (ic_ctx_create(NULL, &c))
        abort();
    return c;
}

/* data as a NUL-terminated string (a NUL inside ends it, as for any C caller). */
static inline char *fz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* With IC_FUZZ_VERBOSE set, what the reader said (to see which inputs get how far). */
static inline void fz_note(ic_ctx *c, ic_status s)
{
    static int verbose = -1;
    if (verbose < 0)
        verbose = getenv("IC_FUZZ_VERBOSE") != NULL;
    if (verbose)
        fprintf(stderr, "fuzz: %s%s%s\n", s ? ic_status_str(s) : "ok", s ? ": " : "", s ? ic_last_error(c) : "");
}

/* A reader's contract broken (not a refusal): report and abort so the fuzzer keeps the input. */
#define FZ_CHECK(cond, ...)                                                                  \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "fuzz: contract broken: " __VA_ARGS__);                          \
            fputc('\n', stderr);                                                             \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

#endif
