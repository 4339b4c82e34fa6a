/* names.c - kernel names for any backend prefix, from the one generator in lib/Lower. */
#include "lower-impl.h"
#include "ic/fuse.h"

void ic_kernel_format_name(char *buf, size_t n, const char *prefix, const ic_program *p,
                           const ic_kernel *k, int index)
{
    ic__kernel_name(buf, n, prefix ? prefix : "", ic_program_graph(p), k->nnodes, k->nodes, index);
}
