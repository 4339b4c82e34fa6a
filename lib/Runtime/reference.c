/* reference.c - the reference executor (placeholder until implemented). */
#include "graph-impl.h"
#include "ic/runtime.h"
