/* spatial-impl.h - the geometry of the spatial ops (conv, pooling, interpolate), computed once
 * from a node's attrs and shapes with PyTorch's rules, and shared by shape inference
 * (infer_spatial.c), the reference executor (lib/Runtime/ref_spatial.c) and the composite
 * expansion (lib/Lower/expand_spatial.c), so the three agree on every size. */
#ifndef IC_SPATIAL_IMPL_H
#define IC_SPATIAL_IMPL_H

#include "graph-impl.h"

#define IC_SPATIAL_MAX 3 /* 1-d, 2-d and 3-d ops */

typedef struct {
    int k;                     /* spatial dims */
    bool batched;              /* x is [N, C, *] (else [C, *]) */
    int64_t n, c;              /* batch (1 when unbatched; -1 symbolic), channels */
    int64_t cout, groups;      /* conv: out channels, groups */
    int64_t in[IC_SPATIAL_MAX], out[IC_SPATIAL_MAX];
    int64_t kernel[IC_SPATIAL_MAX], stride[IC_SPATIAL_MAX], dil[IC_SPATIAL_MAX];
    int64_t pad_lo[IC_SPATIAL_MAX], pad_hi[IC_SPATIAL_MAX]; /* conv "same": hi may be lo + 1;
                                                             * conv_transpose: hi = output_padding */
} ic__sgeom;

/* The geometry of node op (conv, conv_transpose, max_pool, avg_pool, adaptive pools, interpolate) with attrs
 * a, input x (rank xr, shape xs; a symbolic dim is -1) and, for conv, weight w. false with a
 * PyTorch-like message in why when PyTorch refuses the sizes or attrs. */
IC_HIDDEN bool ic__spatial_geom(ic_op op, const ic_attrs *a, int xr, const int64_t *xs, int wr,
                                const int64_t *ws, ic__sgeom *g, char *why, size_t nwhy);

/* Shape and dtype inference of the spatial ops (pad, unfold, flip, roll, conv, pools,
 * interpolate); n is not yet part of g. */
IC_HIDDEN ic_status ic__infer_spatial(ic_graph *g, ic_node *n);

/* The source index of output index o along one padded dim of size len (pads before and
 * after, mode IC_PAD_*), -1 where it falls in constant padding. Circular pads wrap around
 * the cropped input (negative pads crop first, as PyTorch). */
static inline int64_t ic__pad_source(int64_t o, int64_t before, int64_t after, int64_t len, int mode)
{
    int64_t i = o - before;
    switch (mode) {
    case 1: /* reflect: the edge is not repeated */
        if (i < 0)
            i = -i;
        if (i >= len)
            i = 2 * (len - 1) - i;
        return i;
    case 2: return i < 0 ? 0 : i >= len ? len - 1 : i;             /* replicate */
    case 3: {                                                         /* circular */
        int64_t base = before < 0 ? -before : 0, m = len - base - (after < 0 ? -after : 0);
        int64_t j = o - (before > 0 ? before : 0);
        return base + ((j % m) + m) % m;
    }
    default: return i < 0 || i >= len ? -1 : i;                      /* constant */
    }
}

#endif
