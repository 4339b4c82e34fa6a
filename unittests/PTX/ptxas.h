/* ptxas.h - the PTX tests' assembler check: `ptxas -arch=sm_90` (sm_90a for modules with
 * Hopper wgmma kernels) on generated PTX, each kernel's module alone, when the CUDA toolkit's ptxas is on this machine
 * ($IC_PTXAS, else /usr/local/cuda/bin/ptxas). */
#ifndef IC_TEST_PTXAS_H
#define IC_TEST_PTXAS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testutil.h"

#define PTXAS_DEFAULT "/usr/local/cuda/bin/ptxas"

static inline const char *ptxas_path(void)
{
    const char *e = getenv("IC_PTXAS");
    if (e && *e)
        return access(e, X_OK) == 0 ? e : NULL;
    return access(PTXAS_DEFAULT, X_OK) == 0 ? PTXAS_DEFAULT : NULL;
}

/* True when ptxas accepts one PTX module, or when there is no ptxas; log gets its messages. */
static inline bool assemble_one(const char *ptx, char *log, size_t n)
{
    const char *ptxas = ptxas_path();
    log[0] = 0;
    if (!ptxas)
        return true;
    const char *dir = ict_tmpdir();
    char src[600], out[600], cmd[2000];
    snprintf(src, sizeof src, "%s", ict_path(dir, "k.ptx"));
    snprintf(out, sizeof out, "%s", ict_path(dir, "log.txt"));
    ict_write_file(src, ptx, strlen(ptx));
    const char *arch = strstr(ptx, ".target sm_90a") ? "sm_90a" : "sm_90";
    snprintf(cmd, sizeof cmd, "'%s' -arch=%s '%s' -o /dev/null > '%s' 2>&1", ptxas, arch, src, out);
    int rc = system(cmd);
    size_t len = 0;
    char *text = ict_read_file(out, &len);
    if (text) {
        snprintf(log, n, "%.*s", (int)(len < n - 1 ? len : n - 1), text);
        free(text);
    }
    ict_rmtree(dir);
    return rc == 0;
}

/* The same over ic_ptx_module_text: each kernel's module (after its "// ---- kernel" line)
 * assembled alone; a text without such lines is one module. */
static inline bool assemble(const char *ptx, char *log, size_t n)
{
    static const char mark[] = "// ---- kernel ";
    const char *p = strncmp(ptx, mark, strlen(mark)) == 0 ? ptx : strstr(ptx, "\n// ---- kernel ");
    if (!p)
        return assemble_one(ptx, log, n);
    while (p) {
        const char *body = strchr(p + 1, '\n');
        if (!body)
            return true;
        body++;
        const char *next = strstr(body, "\n// ---- kernel ");
        size_t len = next ? (size_t)(next - body) + 1 : strlen(body);
        char *one = malloc(len + 1);
        if (!one)
            return false;
        memcpy(one, body, len);
        one[len] = 0;
        bool ok = assemble_one(one, log, n);
        free(one);
        if (!ok)
            return false;
        p = next;
    }
    return true;
}

#endif
