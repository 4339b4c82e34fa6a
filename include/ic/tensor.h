/* tensor.h - host tensors and .safetensors files.
 *
 * An ic_tensor describes memory it does not own: dtype, shape, element strides, data.
 * Files are read by mmap with the header fully validated; writes are atomic.
 *
 *     ic_safetensors *st;
 *     if (ic_safetensors_open(c, "w.safetensors", &st)) ...;
 *     ic_tensor w; ic_safetensors_get(st, "fc.weight", &w);   // borrowed from st
 *     ic_safetensors_close(st);
 */
#ifndef IC_TENSOR_H
#define IC_TENSOR_H

#include "ic/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ic_tensor {
    ic_dtype dtype;
    int rank;
    int64_t shape[IC_MAX_RANK];
    int64_t strides[IC_MAX_RANK];  /* in elements; row-major for contiguous tensors */
    void *data;
} ic_tensor;

/* Fills t as a contiguous row-major tensor over data (not owned). */
IC_API void ic_tensor_init(ic_tensor *t, ic_dtype dt, int rank, const int64_t *shape, void *data);
/* Element count; -1 on overflow. */
IC_API int64_t ic_tensor_numel(const ic_tensor *t);
IC_API bool ic_tensor_is_contiguous(const ic_tensor *t);
/* Allocates zeroed, 64-byte aligned, contiguous data for t (shape/dtype already set).
 * Free with ic_tensor_free. */
IC_API ic_status ic_tensor_alloc(ic_ctx *c, ic_tensor *t);
IC_API void ic_tensor_free(ic_ctx *c, ic_tensor *t);
/* Reads/writes element i (row-major logical index, strides honoured) as double. */
IC_API double ic_tensor_get(const ic_tensor *t, int64_t i);
IC_API void ic_tensor_set(ic_tensor *t, int64_t i, double v);

/* f16 / bf16 conversions, round to nearest even. */
IC_API float ic_f16_to_f32(uint16_t h);
IC_API uint16_t ic_f32_to_f16(float f);
IC_API float ic_bf16_to_f32(uint16_t h);
IC_API uint16_t ic_f32_to_bf16(float f);

typedef struct ic_safetensors ic_safetensors;

/* Maps path read-only and validates the header (length, JSON, dtypes, shapes, byte sizes,
 * offsets inside the data area, no overlap). The caller owns *out (ic_safetensors_close). */
IC_API ic_status ic_safetensors_open(ic_ctx *c, const char *path, ic_safetensors **out);
IC_API void ic_safetensors_close(ic_safetensors *st);
IC_API int ic_safetensors_count(const ic_safetensors *st);
IC_API const char *ic_safetensors_name(const ic_safetensors *st, int i);
/* Borrowed view of tensor `name`: data points into the mapping, valid until close.
 * IC_EINVAL with a message naming the file and key when absent. The data is read-only and
 * aligned for its dtype (an entry misaligned in the file is copied once, at open). */
IC_API ic_status ic_safetensors_get(const ic_safetensors *st, const char *name, ic_tensor *out);

/* Writes n tensors (strided tensors are written contiguous) atomically: temp file in the
 * same folder, fsync, rename. Names must be unique. */
IC_API ic_status ic_safetensors_save(ic_ctx *c, const char *path, int n,
                                     const char *const *names, const ic_tensor *tensors);

#ifdef __cplusplus
}
#endif
#endif
