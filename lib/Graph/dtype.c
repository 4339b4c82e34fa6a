/* dtype.c - PyTorch's dtype rules in one place: type promotion (torch.result_type between
 * two tensor dtypes), the result dtypes of the op families that change dtype (float-only
 * math, sums and products, division), and which numbers a dtype can hold
 * (c10::checked_convert, for clamp bounds and fill values). infer.c calls these for the
 * existing ops, and every new op with a dtype rule calls them too, so the narrow integers
 * (u8 i8 i16) behave alike everywhere. */
#include "infer-impl.h"

/* bool < integers < floats (PyTorch's categories). */
static int category(ic_dtype t) { return t == IC_BOOL ? 0 : ic_dtype_is_float(t) ? 2 : 1; }

/* Width in bits of an integer dtype. */
static int int_bits(ic_dtype t)
{
    switch (t) {
    case IC_U8: case IC_I8: return 8;
    case IC_I16: return 16;
    case IC_I32: return 32;
    default: return 64;
    }
}

/* Two integer dtypes: the wider, except that u8 with a signed type needs a signed type that
 * holds 0..255 (u8 with i8 -> i16), as torch.promote_types. */
static ic_dtype promote_int(ic_dtype a, ic_dtype b)
{
    if (a == IC_U8 || b == IC_U8) {
        ic_dtype s = a == IC_U8 ? b : a;
        return s == IC_I8 ? IC_I16 : s;
    }
    return int_bits(a) >= int_bits(b) ? a : b;
}

ic_dtype ic__promote(ic_dtype a, ic_dtype b)
{
    if (a == b)
        return a;
    int ca = category(a), cb = category(b);
    if (ca != cb)
        return ca > cb ? a : b;
    if (ca == 1)
        return promote_int(a, b);
    if (a == IC_F64 || b == IC_F64)
        return IC_F64;
    return IC_F32; /* f16 with bf16, or either with f32 */
}

ic_dtype ic__float_result(ic_dtype t) { return ic_dtype_is_float(t) ? t : IC_F32; }

ic_dtype ic__sum_result(ic_dtype t) { return ic_dtype_is_float(t) ? t : IC_I64; }

bool ic__narrow_int(ic_dtype t) { return t == IC_U8 || t == IC_I8 || t == IC_I16; }

/* c10's overflows<To>(from): floats take any finite value in range (and inf, NaN); an
 * unsigned type takes -max..max (a negative number wraps), a signed one lowest..max. */
bool ic__scalar_fits(ic_scalar v, ic_dtype t)
{
    int64_t lo, hi;
    if (t == IC_BOOL || !ic_dtype_int_range(t, &lo, &hi))
        return true;
    if (t == IC_U8)
        lo = -hi;
    if (v.is_int)
        return v.i >= lo && v.i <= hi;
    double f = v.f;
    if (t == IC_I64)
        return f >= -9223372036854775808.0 && f < 9223372036854775808.0;
    return f >= (double)lo && f <= (double)hi; /* NaN does not fit */
}

int64_t ic__wrap_int(int64_t v, ic_dtype t)
{
    switch (t) {
    case IC_BOOL: return v != 0;
    case IC_U8: return (uint8_t)(uint64_t)v;
    case IC_I8: return (int8_t)(uint8_t)(uint64_t)v;
    case IC_I16: return (int16_t)(uint16_t)(uint64_t)v;
    case IC_I32: return (int32_t)(uint32_t)(uint64_t)v;
    default: return v;
    }
}

int64_t ic__float_to_int(double f, ic_dtype t)
{
    if (t == IC_BOOL)
        return f != 0; /* NaN is true */
    if (f != f)
        return 0;
    int64_t i = f >= 9223372036854775807.0 ? INT64_MAX
              : f <= -9223372036854775808.0 ? INT64_MIN : (int64_t)f;
    return ic__wrap_int(i, t);
}

void ic__arange_int(const ic_attrs *at, int64_t *start, int64_t *step)
{
    *start = at->astart.is_int ? at->astart.i : ic__float_to_int(at->astart.f, IC_I64);
    *step = at->astep.is_int ? at->astep.i : ic__float_to_int(at->astep.f, IC_I64);
}
