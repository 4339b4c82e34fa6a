/* expand_nn.c - the nn composites as existing graph ops (see expand-impl.h). */
#include "expand-impl.h"

ic__expand_fn ic__expand_nn(ic_op op)
{
    switch (op) {
    default: return NULL;
    }
}
