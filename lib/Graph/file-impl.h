/* file-impl.h - files written atomically: every writer of the library (graphs, safetensors,
 * saved models, cache entries and exports, debug dumps) goes through ic__write_atomic, so a
 * reader sees the old file or the complete new one, never a torn one. */
#ifndef IC_FILE_IMPL_H
#define IC_FILE_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define IC_HIDDEN __attribute__((visibility("hidden")))

enum {
    IC__WRITE_SYNC = 1,   /* fsync the file and its folder: user outputs survive a power loss */
    IC__WRITE_MKDIRS = 2, /* create the missing folders of path first (cache entries) */
};

/* Writes the whole file into f; false on failure (errno says why, or ferror(f) is set). */
typedef bool (*ic__write_fn)(FILE *f, void *arg);

/* Writes path through a temporary file beside it, "<path>.tmp.<pid>.<tid>.<n>", renamed over
 * path only when fn and every write succeeded; otherwise the temporary file is removed and path
 * is untouched. The new file keeps the mode of the one it replaces (else 0666 less umask).
 * Returns 0 or an errno value; then *step (may be NULL) says what failed, for a message
 * "<path>: <step>: <strerror>": "cannot write (no temporary file beside it)" or "cannot write". */
IC_HIDDEN int ic__write_atomic(const char *path, ic__write_fn fn, void *arg, unsigned flags,
                               const char **step);
/* The same for n bytes at b. */
IC_HIDDEN int ic__write_atomic_bytes(const char *path, const void *b, size_t n, unsigned flags,
                                     const char **step);
/* True when name (a file name, no folder) is such a temporary file. */
IC_HIDDEN bool ic__is_temp_name(const char *name);

#endif
