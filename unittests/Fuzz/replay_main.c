/* replay_main.c - runs a fuzz harness without libFuzzer: LLVMFuzzerTestOneInput over every
 * file of the folders (and files) named on the command line, in name order. Linked with each
 * harness in the normal builds (cmake/fuzz.cmake), so the seed corpus and the regression
 * inputs (crashes found, fixed since) are replayed by ctest under whatever sanitizers the
 * build has. A folder that does not exist is skipped; no input at all is an error. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: %s: cannot open\n", path);
        return -1;
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *b = realloc(buf, cap *= 2);
            if (!b)
                free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: %s: out of memory\n", path);
        return -1;
    }
    /* an exact-size copy, so ASan sees a read past the input's end */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, n);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

static int run_dir(const char *dir)
{
    struct dirent **ents;
    int n = scandir(dir, &ents, NULL, by_name), count = 0;
    bool bad = false;
    if (n < 0)
        return 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, ents[i]->d_name);
        if (ents[i]->d_name[0] != '.' && stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
            int r = run_file(path);
            bad |= r < 0;
            count += r > 0;
        }
        free(ents[i]);
    }
    free(ents);
    return bad ? -1 : count;
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    int total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat sb;
        if (stat(argv[i], &sb) != 0) {
            fprintf(stderr, "replay: %s: not found, skipped\n", argv[i]);
            continue;
        }
        int r = S_ISDIR(sb.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
        if (r < 0)
            return 1;
        total += r;
    }
    printf("replay: %d inputs, no crash\n", total);
    return total > 0 ? 0 : 1;
}
