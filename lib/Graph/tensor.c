/* tensor.c - host tensor descriptors, aligned allocation, element access, f16/bf16. */
#include <stdlib.h>
#include <string.h>
#include "graph-impl.h"

void ic_tensor_init(ic_tensor *t, ic_dtype dt, int rank, const int64_t *shape, void *data)
{
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->rank = rank;
    t->data = data;
    int64_t st = 1;
    for (int i = rank - 1; i >= 0; i--) {
        t->shape[i] = shape[i];
        t->strides[i] = st;
        st *= shape[i] > 0 ? shape[i] : 1;
    }
}

int64_t ic_tensor_numel(const ic_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] < 0 || !ic__mul_ok(n, t->shape[i], &n))
            return -1;
    return n;
}

bool ic_tensor_is_contiguous(const ic_tensor *t)
{
    if (ic_tensor_numel(t) == 0)
        return true; /* no element to misplace, whatever the strides say */
    int64_t st = 1;
    for (int i = t->rank - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != st)
            return false;
        st *= t->shape[i];
    }
    return true;
}

ic_status ic_tensor_alloc(ic_ctx *c, ic_tensor *t)
{
    int64_t n = ic_tensor_numel(t), bytes;
    if (n < 0 || !ic__mul_ok(n, (int64_t)ic_dtype_size(t->dtype), &bytes))
        return ic__error(c, IC_ESHAPE, "tensor size overflows");
    size_t sz = ((size_t)bytes + 63) & ~(size_t)63;
    void *p = NULL;
    if (posix_memalign(&p, 64, sz ? sz : 64))
        return ic__error(c, IC_ENOMEM, "out of memory allocating %lld bytes", (long long)bytes);
    memset(p, 0, sz ? sz : 64);
    int64_t shape[IC_MAX_RANK];
    memcpy(shape, t->shape, sizeof shape);
    ic_tensor_init(t, t->dtype, t->rank, shape, p);
    return IC_OK;
}

void ic_tensor_free(ic_ctx *c, ic_tensor *t)
{
    (void)c;
    free(t->data);
    t->data = NULL;
}

/* The f32 with bit pattern b, and back (memcpy: the aliasing-safe reinterpretation). */
static float f32_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

float ic_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) {
                man <<= 1;
                exp--;
            }
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000 | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return f32_from_bits(bits);
}

uint16_t ic_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000, absx = x & 0x7fffffff;
    if (absx > 0x7f800000) /* NaN: keep it quiet */
        return (uint16_t)(sign | 0x7e00);
    if (absx >= 0x477ff000) /* rounds to >= 65520: infinity */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000) { /* below the smallest normal: subnormal, round to nearest even */
        float scaled = f32_from_bits(absx) * 16777216.0f; /* 2^24: the subnormal step becomes 1 */
        uint32_t m = (uint32_t)scaled;
        float rem = scaled - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1)))
            m++;
        return (uint16_t)(sign | m);
    }
    uint32_t mant = absx + 0xfff + ((absx >> 13) & 1); /* round to nearest even */
    return (uint16_t)(sign | ((mant - 0x38000000) >> 13));
}

float ic_bf16_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

uint16_t ic_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffff) > 0x7f800000)
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* Offset in elements of row-major logical index i. */
static int64_t offset_of(const ic_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t s = t->shape[d] ? t->shape[d] : 1;
        off += (i % s) * t->strides[d];
        i /= s;
    }
    return off;
}

double ic__elem_get(ic_dtype t, const void *data, int64_t i)
{
    switch (t) {
    case IC_F32: return ((const float *)data)[i];
    case IC_F64: return ((const double *)data)[i];
    case IC_F16: return ic_f16_to_f32(((const uint16_t *)data)[i]);
    case IC_BF16: return ic_bf16_to_f32(((const uint16_t *)data)[i]);
    case IC_I32: return ((const int32_t *)data)[i];
    case IC_I64: return (double)((const int64_t *)data)[i];
    case IC_BOOL: return ((const uint8_t *)data)[i] != 0;
    case IC_U8: return ((const uint8_t *)data)[i];
    case IC_I8: return ((const int8_t *)data)[i];
    case IC_I16: return ((const int16_t *)data)[i];
    default: return 0;
    }
}

double ic_tensor_get(const ic_tensor *t, int64_t i)
{
    return ic__elem_get(t->dtype, t->data, offset_of(t, i));
}

/* v truncated toward zero to an integer (NaN 0, saturating at 64 bits), as bits for the
 * narrow integer types to keep (wraparound, as PyTorch's int64 -> uint8 conversion). */
static uint64_t wrap_int(double v)
{
    if (!(v == v))
        return 0;
    if (v >= 9223372036854775807.0)
        return (uint64_t)INT64_MAX;
    if (v <= -9223372036854775808.0)
        return (uint64_t)INT64_MIN;
    return (uint64_t)(int64_t)v;
}

void ic_tensor_set(ic_tensor *t, int64_t i, double v)
{
    int64_t o = offset_of(t, i);
    switch (t->dtype) {
    case IC_F32: ((float *)t->data)[o] = (float)v; break;
    case IC_F64: ((double *)t->data)[o] = v; break;
    case IC_F16: ((uint16_t *)t->data)[o] = ic_f32_to_f16((float)v); break;
    case IC_BF16: ((uint16_t *)t->data)[o] = ic_f32_to_bf16((float)v); break;
    case IC_I32: ((int32_t *)t->data)[o] = (int32_t)v; break;
    case IC_I64: ((int64_t *)t->data)[o] = (int64_t)v; break;
    case IC_BOOL: ((uint8_t *)t->data)[o] = v != 0; break;
    case IC_U8: ((uint8_t *)t->data)[o] = (uint8_t)wrap_int(v); break;
    case IC_I8: ((int8_t *)t->data)[o] = (int8_t)(uint8_t)wrap_int(v); break;
    case IC_I16: ((int16_t *)t->data)[o] = (int16_t)(uint16_t)wrap_int(v); break;
    default: break;
    }
}
