/* ic.h - umbrella header of ic-llvm: include this one. */
#ifndef IC_IC_H
#define IC_IC_H
#include "ic/status.h"
#include "ic/graph.h"
#include "ic/tensor.h"
#include "ic/runtime.h"
#endif
