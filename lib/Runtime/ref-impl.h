/* ref-impl.h - private interface of the reference executor, split by op group:
 * reference.c (driver, unary, binary, where, reductions) and ref_shape.c (views, cat, norms,
 * contractions, embedding, creation). Values are contiguous row-major tensors; views are
 * materialised as copies, because the oracle favours clarity over speed. */
#ifndef IC_REF_IMPL_H
#define IC_REF_IMPL_H

#include <math.h>
#include "graph-impl.h"
#include "ic/runtime.h"

/* Element i of a contiguous tensor, as double (floats; f16/bf16 widened exactly) or as
 * int64 (integers and bool; exact). */
static inline double ic__ref_getf(const ic_tensor *t, int64_t i) { return ic__elem_get(t->dtype, t->data, i); }

static inline int64_t ic__ref_geti(const ic_tensor *t, int64_t i)
{
    switch (t->dtype) {
    case IC_I32: return ((const int32_t *)t->data)[i];
    case IC_I64: return ((const int64_t *)t->data)[i];
    case IC_BOOL: return ((const uint8_t *)t->data)[i] != 0;
    case IC_U8: return ((const uint8_t *)t->data)[i];
    case IC_I8: return ((const int8_t *)t->data)[i];
    case IC_I16: return ((const int16_t *)t->data)[i];
    default: {
        double f = ic__ref_getf(t, i); /* float -> int truncates toward zero, as PyTorch's cast */
        return isnan(f) ? 0 : f >= 9.2e18 ? INT64_MAX : f <= -9.2e18 ? INT64_MIN : (int64_t)f;
    }
    }
}

static inline void ic__ref_seti(ic_tensor *t, int64_t i, int64_t v);

/* Stores v rounded to t's dtype (f32 round to nearest, f16/bf16 via f32 round to nearest even). */
static inline void ic__ref_setf(ic_tensor *t, int64_t i, double v)
{
    switch (t->dtype) {
    case IC_F32: ((float *)t->data)[i] = (float)v; break;
    case IC_F64: ((double *)t->data)[i] = v; break;
    case IC_F16: ((uint16_t *)t->data)[i] = ic_f32_to_f16((float)v); break;
    case IC_BF16: ((uint16_t *)t->data)[i] = ic_f32_to_bf16((float)v); break;
    case IC_I32: ((int32_t *)t->data)[i] = (int32_t)(isnan(v) ? 0 : v); break;
    case IC_I64: ((int64_t *)t->data)[i] = (int64_t)(isnan(v) ? 0 : v); break;
    case IC_U8: case IC_I8: case IC_I16: ic__ref_seti(t, i, ic__float_to_int(v, t->dtype)); break;
    default: ((uint8_t *)t->data)[i] = v != 0; break;
    }
}

/* Stores v wrapped to t's width (integers), != 0 (bool), or converted (floats). */
static inline void ic__ref_seti(ic_tensor *t, int64_t i, int64_t v)
{
    switch (t->dtype) {
    case IC_U8: ((uint8_t *)t->data)[i] = (uint8_t)ic__wrap_int(v, IC_U8); break;
    case IC_I8: ((int8_t *)t->data)[i] = (int8_t)ic__wrap_int(v, IC_I8); break;
    case IC_I16: ((int16_t *)t->data)[i] = (int16_t)ic__wrap_int(v, IC_I16); break;
    case IC_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case IC_I64: ((int64_t *)t->data)[i] = v; break;
    case IC_BOOL: ((uint8_t *)t->data)[i] = v != 0; break;
    default: ic__ref_setf(t, i, (double)v); break;
    }
}

/* The f32 rounding step for f16/bf16/f32 compute: intermediate results of ops whose
 * compute dtype is f32 or narrower are rounded to f32, as PyTorch computes them. */
static inline double ic__ref_round(ic_dtype compute, double v)
{
    return compute == IC_F64 ? v : (double)(float)v;
}

/* Each function computes node n into out (already allocated: n's dtype and shape,
 * contiguous). ins[i] is operand i as a contiguous tensor, or NULL for a number (read
 * n->in[i].scalar) or an absent optional operand. Errors name the node (ic__node_error). */
typedef ic_status (*ic__ref_fn)(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins,
                                ic_tensor *out);
IC_HIDDEN ic_status ic__ref_view(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out);
IC_HIDDEN ic_status ic__ref_cat(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out);
IC_HIDDEN ic_status ic__ref_norm(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out);
IC_HIDDEN ic_status ic__ref_contract(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out);
IC_HIDDEN ic_status ic__ref_gather(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out);
/* --- spatial ops (issue 12): ref_spatial.c --- */
IC_HIDDEN ic_status ic__ref_spatial(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out);
IC_HIDDEN ic_status ic__ref_create(const ic_graph *g, const ic_node *n, const ic_tensor *const *ins, ic_tensor *out);
/* --- nn ops (ref_nn.c) --- */
/* The kernel of an nn op of issue 12 (batch_norm, attention, gather...), NULL for others. */
IC_HIDDEN ic__ref_fn ic__ref_nn_kernel(ic_op op);

#endif
