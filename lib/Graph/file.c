/* file.c - atomic file writes (file-impl.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "file-impl.h"

#define TEMP_TAG ".tmp."

/* Opens a new temporary file beside path; its name goes to tmp (size n). A counter per thread,
 * with the pid and thread id, names a file no other writer uses, now or (after a crash left one
 * behind) later, as O_EXCL checks. */
static int temp_open(const char *path, char *tmp, size_t n)
{
    static _Thread_local unsigned counter;
    long pid = (long)getpid(), tid = (long)syscall(SYS_gettid);
    for (int tries = 0; tries < 16; tries++) {
        int w = snprintf(tmp, n, "%s" TEMP_TAG "%ld.%ld.%u", path, pid, tid, ++counter);
        if (w < 0 || (size_t)w >= n)
            return errno = ENAMETOOLONG, -1;
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* mkdir -p of path's folders (not of its last component). */
static void make_dirs(const char *path)
{
    char *p = strdup(path);
    for (char *s = p ? strchr(p + 1, '/') : NULL; s; s = strchr(s + 1, '/')) {
        *s = 0;
        mkdir(p, 0777);
        *s = '/';
    }
    free(p);
}

static void keep_mode(int fd, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
        (void)fchmod(fd, sb.st_mode & 07777);
}

/* Makes the rename itself durable (best effort: some file systems refuse a folder fsync). */
static void sync_dir_of(const char *path)
{
    char *p = strdup(path);
    char *slash = p ? strrchr(p, '/') : NULL;
    const char *dir = !p ? NULL : !slash ? "." : slash == p ? "/" : (*slash = 0, p);
    int fd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(p);
}

/* Runs fn on the open temporary file; 0 or the errno of the first failure. */
static int fill(int fd, ic__write_fn fn, void *arg, unsigned flags)
{
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        int e = errno;
        close(fd);
        return e;
    }
    errno = 0;
    bool ok = fn(f, arg) && !ferror(f) && fflush(f) == 0;
    ok = ok && (!(flags & IC__WRITE_SYNC) || fsync(fd) == 0);
    int e = ok ? 0 : errno ? errno : EIO;
    if (fclose(f) != 0 && !e)
        e = errno ? errno : EIO;
    return e;
}

int ic__write_atomic(const char *path, ic__write_fn fn, void *arg, unsigned flags, const char **step)
{
    const char *unused;
    step = step ? step : &unused;
    *step = "cannot write";
    size_t n = strlen(path) + 64;
    char *tmp = malloc(n);
    if (!tmp)
        return ENOMEM;
    int fd = temp_open(path, tmp, n);
    if (fd < 0 && errno == ENOENT && (flags & IC__WRITE_MKDIRS)) {
        make_dirs(path);
        fd = temp_open(path, tmp, n);
    }
    int e = fd < 0 ? errno : 0;
    if (fd < 0)
        *step = "cannot write (no temporary file beside it)";
    else {
        keep_mode(fd, path);
        e = fill(fd, fn, arg, flags);
        if (!e && rename(tmp, path) != 0)
            e = errno;
        if (e)
            unlink(tmp);
        else if (flags & IC__WRITE_SYNC)
            sync_dir_of(path);
    }
    free(tmp);
    return e;
}

typedef struct { const void *b; size_t n; } bytes_arg;

static bool write_bytes(FILE *f, void *arg)
{
    const bytes_arg *a = arg;
    return fwrite(a->b, 1, a->n, f) == a->n;
}

int ic__write_atomic_bytes(const char *path, const void *b, size_t n, unsigned flags, const char **step)
{
    bytes_arg a = { b, n };
    return ic__write_atomic(path, write_bytes, &a, flags, step);
}

bool ic__is_temp_name(const char *name)
{
    return strstr(name, TEMP_TAG) != NULL;
}
