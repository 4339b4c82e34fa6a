/* ic.h - umbrella header of ic-llvm: include this one. One header per layer, in pipeline
 * order: Graph -> Lower -> Fuse -> LLVMGen | PTX -> Runtime. */
#ifndef IC_IC_H
#define IC_IC_H
#include "ic/status.h"
#include "ic/graph.h"
#include "ic/tensor.h"
#include "ic/lower.h"
#include "ic/fuse.h"
#include "ic/llvmgen.h"
#include "ic/ptx.h"
#include "ic/runtime.h"
#include "ic/options.h"
#include "ic/cache.h"
#endif
