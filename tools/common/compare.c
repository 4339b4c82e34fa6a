/* compare.c - output comparison for ic-run --check / --expect: the spec's per-dtype
 * tolerances (torch.allclose style), NaN equal to NaN, integers and bool exact, and the worst
 * element located by its index so a mismatch message says where to look. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <string.h>
#include "common/cli.h"

void cli_tol(ic_dtype dt, double *rtol, double *atol)
{
    ic_dtype_tolerance(dt, rtol, atol);
}

/* Element i of a contiguous-or-strided integer/bool tensor, exactly (no trip through double,
 * which would hide differences above 2^53 in i64). */
static int64_t get_int(const ic_tensor *t, int64_t i)
{
    int64_t off = 0, rem = i;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t n = t->shape[d] > 0 ? t->shape[d] : 1;
        off += (rem % n) * t->strides[d];
        rem /= n;
    }
    switch (t->dtype) {
    case IC_I64: return ((const int64_t *)t->data)[off];
    case IC_I32: return ((const int32_t *)t->data)[off];
    case IC_I16: return ((const int16_t *)t->data)[off];
    case IC_I8: return ((const int8_t *)t->data)[off];
    default: return ((const uint8_t *)t->data)[off]; /* u8, and bool: the stored byte */
    }
}

/* How far element (g, w) is beyond the tolerance: <= 1 passes, INFINITY for a NaN or an
 * infinity that the other side does not have. */
static double excess(double g, double w, double rtol, double atol)
{
    if (g == w || (isnan(g) && isnan(w)))
        return 0;
    if (isnan(g) || isnan(w) || isinf(g) || isinf(w))
        return INFINITY;
    return fabs(g - w) / (atol + rtol * fabs(w));
}

static void fmt_value(const ic_tensor *t, int64_t i, char *buf, size_t n)
{
    if (!ic_dtype_is_float(t->dtype)) {
        snprintf(buf, n, "%lld", (long long)get_int(t, i));
        return;
    }
    int digits = t->dtype == IC_F64 ? 17 : t->dtype == IC_F32 ? 9 : 5;
    snprintf(buf, n, "%.*g", digits, ic_tensor_get(t, i));
}

bool cli_compare(const ic_tensor *got, const ic_tensor *want, cli_cmp *r)
{
    memset(r, 0, sizeof *r);
    r->worst = -1;
    cli_tol(want->dtype, &r->rtol, &r->atol);
    r->same_shape = got->dtype == want->dtype && got->rank == want->rank;
    for (int d = 0; r->same_shape && d < want->rank; d++)
        r->same_shape = got->shape[d] == want->shape[d];
    if (!r->same_shape)
        return false;
    int64_t n = ic_tensor_numel(want);
    bool is_float = ic_dtype_is_float(want->dtype);
    double worst = -1;
    for (int64_t i = 0; i < n; i++) {
        double x;
        if (is_float) {
            x = excess(ic_tensor_get(got, i), ic_tensor_get(want, i), r->rtol, r->atol);
        } else {
            int64_t g = get_int(got, i), w = get_int(want, i);
            /* exact: any difference fails; the largest one is the worst */
            x = g == w ? 0 : 1 + fabs((double)g - (double)w);
        }
        if (x > (is_float ? 1.0 : 0.0))
            r->nbad++;
        if (x > worst) {
            worst = x;
            r->worst = i;
        }
    }
    r->nelem = n;
    r->worst_excess = worst < 0 ? 0 : worst;
    if (r->worst >= 0) {
        fmt_value(got, r->worst, r->got, sizeof r->got);
        fmt_value(want, r->worst, r->want, sizeof r->want);
    }
    return r->nbad == 0;
}

const char *cli_index_str(const ic_tensor *t, int64_t flat, char *buf, size_t n)
{
    int64_t idx[IC_MAX_RANK], rem = flat;
    for (int d = t->rank - 1; d >= 0; d--) {
        int64_t s = t->shape[d] > 0 ? t->shape[d] : 1;
        idx[d] = rem % s;
        rem /= s;
    }
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->rank && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
    return buf;
}

bool cli_mismatch_msg(const char *backend, const char *output, const ic_tensor *got,
                      const ic_tensor *want, const cli_cmp *r, char *buf, size_t n)
{
    char gs[256], ws[256], at[256];
    cli_shape_str(got, gs, sizeof gs);
    cli_shape_str(want, ws, sizeof ws);
    if (!r->same_shape) {
        snprintf(buf, n, "%s: output '%s' is %s %s but %s %s is expected", backend, output,
                 ic_dtype_name(got->dtype), gs, ic_dtype_name(want->dtype), ws);
        return false;
    }
    if (!r->nbad)
        return true;
    snprintf(buf, n, "%s: output '%s' %s %s: %lld of %lld elements differ beyond rtol %g atol %g; "
             "worst at %s (flat %lld): got %s, expected %s", backend, output,
             ic_dtype_name(want->dtype), ws, (long long)r->nbad, (long long)r->nelem, r->rtol,
             r->atol, cli_index_str(want, r->worst, at, sizeof at), (long long)r->worst, r->got,
             r->want);
    return false;
}
