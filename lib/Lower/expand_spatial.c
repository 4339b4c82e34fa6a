/* expand_spatial.c - the spatial composites as existing graph ops (see expand-impl.h). */
#include "expand-impl.h"

ic__expand_fn ic__expand_spatial(ic_op op)
{
    switch (op) {
    default: return NULL;
    }
}
