/* prefetch.c - what runs after O3 on CPU modules: software prefetches in the vectorised
 * loops of memory-bound kernels, and non-temporal stores for the large outputs gen.c marks.
 *
 * On the machines we measure, a streaming loop that does some work per element (converting
 * to f64 for a sum, an exp, a layer_norm's arithmetic) reads memory well below a plain copy:
 * the hardware prefetchers start again at every 4 KB page and do not run far enough ahead
 * of a loop that is not issuing loads back to back. A prefetch a fixed distance ahead of
 * each streamed cache line keeps the misses in flight (a C row sum with f64 accumulators:
 * 16.3 GB/s plain, 20.0 GB/s with prefetches 4 KB ahead, against a 20.1 GB/s copy).
 *
 * The loop vectorizer refuses loops that call llvm.prefetch, so the prefetches go in after
 * the O3 pipeline: in every single-block loop (the vector body) of a function that carries
 * the attribute "ic-prefetch" (the distance in bytes, from ic_codegen_params), each vector
 * load gets a prefetch of the address that many bytes further on, one per cache line of
 * the loads that share a base pointer, except loads from the broadcast operands gen.c lists
 * in "ic-small-bufs" / "ic-small-params" (they stay cached). Prefetches never fault, so
 * running past the end of a buffer at the end of the loop is harmless. */
#include "llvmgen-impl.h"

#include <stdlib.h>
#include <string.h>

#define LINE 64
#define MAX_LINES 64 /* prefetched lines remembered per loop body */

typedef struct {
    LLVMValueRef root;
    long long off;
} line_t;

/* ptr as root + constant byte offset, through single-index constant GEPs. */
static LLVMValueRef split_ptr(LLVMTargetDataRef td, LLVMValueRef ptr, long long *off)
{
    *off = 0;
    while (LLVMIsAGetElementPtrInst(ptr) && LLVMGetNumOperands(ptr) == 2) {
        LLVMValueRef idx = LLVMGetOperand(ptr, 1);
        if (!LLVMIsAConstantInt(idx))
            break;
        long long size = (long long)LLVMABISizeOfType(td, LLVMGetGEPSourceElementType(ptr));
        *off += LLVMConstIntGetSExtValue(idx) * size;
        ptr = LLVMGetOperand(ptr, 0);
    }
    return ptr;
}

/* Whether a line of root within LINE bytes of off already has its prefetch. */
static bool have_line(const line_t *lines, int n, LLVMValueRef root, long long off)
{
    for (int i = 0; i < n; i++)
        if (lines[i].root == root && llabs(lines[i].off - off) < LINE)
            return true;
    return false;
}

static bool is_loop_body(LLVMBasicBlockRef bb)
{
    LLVMValueRef t = LLVMGetBasicBlockTerminator(bb);
    if (!t || LLVMGetNumSuccessors(t) != 2)
        return false;
    return LLVMGetSuccessor(t, 0) == bb || LLVMGetSuccessor(t, 1) == bb;
}

static bool has_vector_store(LLVMBasicBlockRef bb)
{
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in))
        if (LLVMGetInstructionOpcode(in) == LLVMStore &&
            LLVMGetTypeKind(LLVMTypeOf(LLVMGetOperand(in, 0))) == LLVMVectorTypeKind)
            return true;
    return false;
}

/* Whether the comma-separated list of len bytes holds the number param. */
static bool in_list(const char *list, unsigned len, unsigned param)
{
    char buf[256];
    if (len >= sizeof buf)
        return false;
    memcpy(buf, list, len);
    buf[len] = 0;
    for (char *p = buf; *p;) {
        char *end;
        if (strtoul(p, &end, 10) == param && end != p)
            return true;
        p = *end ? end + 1 : end;
    }
    return false;
}

/* p with every GEP stripped: the pointer it indexes from. */
static LLVMValueRef ptr_root(LLVMValueRef p)
{
    while (LLVMIsAGetElementPtrInst(p))
        p = LLVMGetOperand(p, 0);
    return p;
}

/* The string attribute name of fn as (text, len); NULL when absent. */
static const char *fn_attr(LLVMValueRef fn, const char *name, unsigned *len)
{
    LLVMAttributeRef a = LLVMGetStringAttributeAtIndex(fn, LLVMAttributeFunctionIndex, name,
                                                       (unsigned)strlen(name));
    return a ? LLVMGetStringAttributeValue(a, len) : NULL;
}

/* Position of argument arg among fn's parameters. */
static unsigned param_index(LLVMValueRef fn, LLVMValueRef arg)
{
    unsigned p = 0;
    while (p < LLVMCountParams(fn) && LLVMGetParam(fn, p) != arg)
        p++;
    return p;
}

/* gen.c's lists of a function's broadcast operands (small_buf_attrs). */
typedef struct {
    const char *params, *bufs;
    unsigned lp, lb;
} small_lists;

/* Whether ptr points into a buffer gen.c listed as small (cached: no prefetch): a parameter
 * in "ic-small-params" of a range function, or, once that is inlined into its OpenMP task,
 * a pointer loaded from entry i of the buffer table with i in "ic-small-bufs". */
static bool small_buffer(LLVMTargetDataRef td, LLVMValueRef fn, const small_lists *sl,
                         LLVMValueRef ptr)
{
    LLVMValueRef root = ptr_root(ptr);
    if (sl->params && LLVMIsAArgument(root))
        return in_list(sl->params, sl->lp, param_index(fn, root));
    if (!sl->bufs || !LLVMIsALoadInst(root) ||
        LLVMGetTypeKind(LLVMTypeOf(root)) != LLVMPointerTypeKind)
        return false;
    LLVMValueRef table = LLVMGetOperand(root, 0);
    long long off = 0;
    if (LLVMIsAGetElementPtrInst(table) && LLVMGetNumOperands(table) == 2 &&
        LLVMIsAConstantInt(LLVMGetOperand(table, 1))) {
        off = LLVMConstIntGetSExtValue(LLVMGetOperand(table, 1)) *
              (long long)LLVMABISizeOfType(td, LLVMGetGEPSourceElementType(table));
        table = LLVMGetOperand(table, 0);
    }
    return LLVMIsAArgument(table) && off >= 0 && off % 8 == 0 &&
           in_list(sl->bufs, sl->lb, (unsigned)(off / 8));
}

/* The prefetches of loop body bb, dist bytes ahead. A row kernel's loops that store (its last
 * pass: softmax's exp, layer_norm's output) read a row that earlier passes brought into the
 * cache; their prefetches reach row elements ahead instead, so the next row arrives while
 * this one is computed (softmax of [8192, 4096]: 74% of a copy with 512 B, 84% with the next
 * row). Short rows run U at a time (gen.c, row_group) and "ic-prefetch-row" is then two
 * groups: BERT's attention softmax (rows of 128, then 4 at a time) went from 73% to 81% of a
 * copy with one group and to about 90% with two. Write prefetches of the stored lines
 * (prefetchw) lost 13 points there. */
static int prefetch_block(LLVMModuleRef mod, LLVMBuilderRef b, LLVMValueRef fn,
                          const small_lists *sl, LLVMBasicBlockRef bb, long long dist,
                          long long row)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTargetDataRef td = LLVMGetModuleDataLayout(mod);
    LLVMTypeRef ptr_t = LLVMPointerTypeInContext(ctx, 0), i8 = LLVMInt8TypeInContext(ctx);
    LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx), i64 = LLVMInt64TypeInContext(ctx);
    unsigned id = LLVMLookupIntrinsicID("llvm.prefetch", 13);
    LLVMValueRef pf = LLVMGetIntrinsicDeclaration(mod, id, &ptr_t, 1);
    LLVMTypeRef pf_t = LLVMIntrinsicGetType(ctx, id, &ptr_t, 1);
    line_t lines[MAX_LINES];
    int n = 0, added = 0;
    bool row_ahead = row > 0 && has_vector_store(bb);
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in && n < MAX_LINES;
         in = LLVMGetNextInstruction(in)) {
        if (LLVMGetInstructionOpcode(in) != LLVMLoad ||
            LLVMGetTypeKind(LLVMTypeOf(in)) != LLVMVectorTypeKind)
            continue;
        LLVMValueRef ptr = LLVMGetOperand(in, 0);
        long long off;
        LLVMValueRef root = split_ptr(td, ptr, &off);
        if (have_line(lines, n, root, off) || small_buffer(td, fn, sl, ptr))
            continue;
        lines[n++] = (line_t){ root, off };
        LLVMPositionBuilderBefore(b, in);
        long long dl = dist;
        if (row_ahead) {
            LLVMTypeRef et = LLVMGetElementType(LLVMTypeOf(in));
            long long rb = row * (long long)LLVMABISizeOfType(td, et);
            dl = rb > dl ? rb : dl;
        }
        LLVMValueRef d = LLVMConstInt(i64, (unsigned long long)dl, 1);
        LLVMValueRef args[4] = { LLVMBuildGEP2(b, i8, ptr, &d, 1, "pf"),
                                 LLVMConstInt(i32, 0, 0),   /* read */
                                 LLVMConstInt(i32, 3, 0),   /* keep in all levels (L1) */
                                 LLVMConstInt(i32, 1, 0) }; /* data */
        LLVMBuildCall2(b, pf_t, pf, args, 4, "");
        added++;
    }
    return added;
}

static long long fn_attr_int(LLVMValueRef fn, const char *name)
{
    unsigned len;
    const char *v = fn_attr(fn, name, &len);
    char buf[32];
    if (!v || len >= sizeof buf)
        return 0;
    memcpy(buf, v, len);
    buf[len] = 0;
    return atoll(buf);
}

/* Non-temporal stores (gen.c, nt_plan): in a function whose attribute "ic-nt-params" lists
 * parameters (outputs it only writes, 64-byte aligned by assumption), every vector store
 * through them that O3 proved aligned to its size becomes non-temporal. The loop
 * vectorizer will not widen stores marked so beforehand (the scalar store's alignment is
 * not a vector's), hence this after O3. Scalar tails and unproven stores stay plain: they
 * would become 8-byte movnti, or partial lines written around the cache. */
static int mark_nontemporal(LLVMModuleRef mod, LLVMValueRef fn)
{
    unsigned len;
    const char *list = fn_attr(fn, "ic-nt-params", &len);
    if (!list)
        return 0;
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMTargetDataRef td = LLVMGetModuleDataLayout(mod);
    unsigned kind = LLVMGetMDKindIDInContext(ctx, "nontemporal", 11);
    LLVMValueRef one = LLVMConstInt(LLVMInt32TypeInContext(ctx), 1, 0);
    LLVMValueRef md = LLVMMDNodeInContext(ctx, &one, 1);
    int marked = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
            if (LLVMGetInstructionOpcode(in) != LLVMStore)
                continue;
            LLVMValueRef v = LLVMGetOperand(in, 0), root = ptr_root(LLVMGetOperand(in, 1));
            if (LLVMGetTypeKind(LLVMTypeOf(v)) != LLVMVectorTypeKind || !LLVMIsAArgument(root))
                continue;
            unsigned long long size = LLVMABISizeOfType(td, LLVMTypeOf(v));
            if (size >= 16 && LLVMGetAlignment(in) >= size &&
                in_list(list, len, param_index(fn, root))) {
                LLVMSetMetadata(in, kind, md);
                marked++;
            }
        }
    return marked;
}

int ic__after_o3(LLVMModuleRef mod)
{
    LLVMBuilderRef b = LLVMCreateBuilderInContext(LLVMGetModuleContext(mod));
    int added = 0;
    for (LLVMValueRef fn = LLVMGetFirstFunction(mod); fn; fn = LLVMGetNextFunction(fn)) {
        mark_nontemporal(mod, fn);
        long long dist = fn_attr_int(fn, "ic-prefetch"), row = fn_attr_int(fn, "ic-prefetch-row");
        if (dist <= 0)
            continue;
        small_lists sl = { 0 };
        sl.params = fn_attr(fn, "ic-small-params", &sl.lp);
        sl.bufs = fn_attr(fn, "ic-small-bufs", &sl.lb);
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
            if (is_loop_body(bb))
                added += prefetch_block(mod, b, fn, &sl, bb, dist, row);
    }
    LLVMDisposeBuilder(b);
    return added;
}
