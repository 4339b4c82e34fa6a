/* test_safetensors.c - .safetensors read/write: round trips of every dtype, the public byte
 * layout, header validation (one test per failure class), truncation at every byte, and
 * atomic saves that never leave a half-written or temporary file behind. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ic/ic.h"
#include "testutil.h"

static ic_ctx *c;
static const char *dir;
static char dirbuf[4096];

static void setup(void)
{
    c = ict_ctx();
    snprintf(dirbuf, sizeof dirbuf, "%s", ict_tmpdir());
    dir = dirbuf;
}

static void teardown(void)
{
    ict_rmtree(dir);
    ic_ctx_destroy(c);
}

TestSuite(safetensors, .init = setup, .fini = teardown);

/* ---- helpers ---- */

/* Writes 8-byte LE length + header + data to dir/name, by hand per the public layout. */
static const char *write_raw(const char *name, uint64_t hlen, const char *header, size_t hbytes,
                             const void *data, size_t dlen)
{
    const char *path = ict_path(dir, name);
    size_t n = 8 + hbytes + dlen;
    unsigned char *buf = malloc(n);
    cr_assert(buf);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hlen >> (8 * i));
    memcpy(buf + 8, header, hbytes);
    if (dlen)
        memcpy(buf + 8 + hbytes, data, dlen);
    ict_write_file(path, buf, n);
    free(buf);
    return path;
}

static const char *write_st(const char *name, const char *header, const void *data, size_t dlen)
{
    return write_raw(name, strlen(header), header, strlen(header), data, dlen);
}

/* Opens path expecting failure with status want and a message naming path and parts. */
#define expect_open_error(path, want, ...)                                                   \
    do {                                                                                     \
        ic_safetensors *st_ = (ic_safetensors *)0x1;                                         \
        ic_status s_ = ic_safetensors_open(c, (path), &st_);                                 \
        cr_assert_null(st_, "out must be NULL on error");                                    \
        ict_assert_error(c, s_, (want), (path), __VA_ARGS__);                                \
    } while (0)

static ic_safetensors *open_ok(const char *path)
{
    ic_safetensors *st = NULL;
    ic_status s = ic_safetensors_open(c, path, &st);
    cr_assert_eq(s, IC_OK, "open %s: %s", path, ic_last_error(c));
    return st;
}

static uint64_t read_le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* ---- round trips ---- */

Test(safetensors, round_trip_every_dtype)
{
    static const float f32[6] = { 1.5f, -2.25f, 0.0f, 3e-39f, 1e30f, -0.0f };
    static const double f64[6] = { 1e-300, -2.5, 3.141592653589793, 0, 1e300, -7 };
    static const uint16_t f16[6] = { 0x3c00, 0xc000, 0x0001, 0x7bff, 0x7c00, 0x8000 };
    static const uint16_t bf16[6] = { 0x3f80, 0xc040, 0x0001, 0x7f7f, 0xff80, 0x4049 };
    static const int32_t i32[6] = { 0, -1, INT32_MAX, INT32_MIN, 7, 42 };
    static const int64_t i64[6] = { INT64_MAX, INT64_MIN, -1, 0, 1LL << 53 | 1, 30521 };
    static const uint8_t bl[6] = { 1, 0, 0, 1, 1, 0 };
    static const uint8_t u8[6] = { 0, 127, 128, 255, 1, 200 };
    static const int8_t i8[6] = { 0, 127, -128, -1, 1, -100 };
    static const int16_t i16[6] = { 0, INT16_MAX, INT16_MIN, -1, 255, -256 };
    enum { N = 10 };
    const void *data[N] = { f32, f64, f16, bf16, i32, i64, bl, u8, i8, i16 };
    const ic_dtype dts[N] = { IC_F32, IC_F64, IC_F16, IC_BF16, IC_I32, IC_I64, IC_BOOL, IC_U8, IC_I8, IC_I16 };
    const char *names[N] = { "f32", "f64", "f16", "bf16", "i32", "i64", "bool", "u8", "i8", "i16" };
    ic_tensor ts[N];
    int64_t shape[2] = { 2, 3 };
    for (int i = 0; i < N; i++)
        ic_tensor_init(&ts[i], dts[i], 2, shape, (void *)data[i]);
    const char *path = ict_path(dir, "all.safetensors");
    cr_assert_eq(ic_safetensors_save(c, path, N, names, ts), IC_OK, "%s", ic_last_error(c));

    ic_safetensors *st = open_ok(path);
    cr_assert_eq(ic_safetensors_count(st), N, "count %d", ic_safetensors_count(st));
    for (int i = 0; i < N; i++) {
        ic_tensor t;
        cr_assert_eq(ic_safetensors_get(st, names[i], &t), IC_OK, "%s", ic_last_error(c));
        cr_assert_eq(t.dtype, dts[i], "%s: dtype %s", names[i], ic_dtype_name(t.dtype));
        cr_assert_eq(t.rank, 2);
        cr_assert(t.shape[0] == 2 && t.shape[1] == 3 && t.strides[0] == 3 && t.strides[1] == 1,
                  "%s: shape [%lld,%lld]", names[i], (long long)t.shape[0], (long long)t.shape[1]);
        size_t es = ic_dtype_size(dts[i]);
        cr_assert_eq((uintptr_t)t.data % es, 0, "%s: data not aligned", names[i]);
        cr_assert(memcmp(t.data, data[i], 6 * es) == 0, "%s: bytes differ", names[i]);
    }
    /* every name is listed exactly once */
    for (int i = 0; i < N; i++) {
        int seen = 0;
        for (int k = 0; k < N; k++)
            seen += strcmp(ic_safetensors_name(st, k), names[i]) == 0;
        cr_assert_eq(seen, 1, "name %s listed %d times", names[i], seen);
    }
    cr_assert_null(ic_safetensors_name(st, N));
    /* values as ic_tensor_get reads them: u8 unsigned, i8/i16 signed */
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(st, "u8", &t), IC_OK);
    cr_assert(ic_tensor_get(&t, 3) == 255 && ic_tensor_get(&t, 2) == 128);
    cr_assert_eq(ic_safetensors_get(st, "i8", &t), IC_OK);
    cr_assert(ic_tensor_get(&t, 2) == -128 && ic_tensor_get(&t, 3) == -1);
    cr_assert_eq(ic_safetensors_get(st, "i16", &t), IC_OK);
    cr_assert(ic_tensor_get(&t, 2) == INT16_MIN && ic_tensor_get(&t, 5) == -256);
    ic_safetensors_close(st);
}

Test(safetensors, round_trip_empty_scalar_and_strided)
{
    /* [3,4] row-major 0..11; its transpose [4,3] has strides [1,4] */
    float base[12];
    for (int i = 0; i < 12; i++)
        base[i] = (float)i;
    ic_tensor ts[5];
    int64_t s34[2] = { 3, 4 }, s0[2] = { 0, 4 }, none[1] = { 0 };
    ic_tensor_init(&ts[0], IC_F32, 2, s34, base);
    ts[0].shape[0] = 4, ts[0].shape[1] = 3, ts[0].strides[0] = 1, ts[0].strides[1] = 4;
    double scalar = -6.5;
    ic_tensor_init(&ts[1], IC_F64, 0, none, &scalar);
    ic_tensor_init(&ts[2], IC_I64, 2, s0, NULL); /* 0 elements, no data */
    /* every other element of row 1: base[4], base[6] as a [2] view with stride 2 */
    int64_t s2[1] = { 2 };
    ic_tensor_init(&ts[3], IC_F32, 1, s2, base + 4);
    ts[3].strides[0] = 2;
    int64_t s1[1] = { 0 };
    ic_tensor_init(&ts[4], IC_BOOL, 1, s1, NULL);
    const char *names[5] = { "t", "scalar", "empty", "step2", "empty_bool" };
    const char *path = ict_path(dir, "views.safetensors");
    cr_assert_eq(ic_safetensors_save(c, path, 5, names, ts), IC_OK, "%s", ic_last_error(c));

    ic_safetensors *st = open_ok(path);
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(st, "t", &t), IC_OK);
    cr_assert(t.rank == 2 && t.shape[0] == 4 && t.shape[1] == 3);
    cr_assert(ic_tensor_is_contiguous(&t), "loaded tensors are contiguous");
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) {
            float want = base[j * 4 + i], got = ((const float *)t.data)[i * 3 + j];
            cr_assert_eq(got, want, "t[%d,%d]: got %g, want %g", i, j, got, want);
        }
    cr_assert_eq(ic_safetensors_get(st, "scalar", &t), IC_OK);
    cr_assert_eq(t.rank, 0);
    cr_assert_eq(ic_tensor_numel(&t), 1);
    cr_assert_eq(((const double *)t.data)[0], -6.5);
    cr_assert_eq(ic_safetensors_get(st, "empty", &t), IC_OK);
    cr_assert(t.rank == 2 && t.shape[0] == 0 && t.shape[1] == 4 && t.dtype == IC_I64);
    cr_assert_eq(ic_tensor_numel(&t), 0);
    cr_assert_eq(ic_safetensors_get(st, "step2", &t), IC_OK);
    cr_assert(t.rank == 1 && t.shape[0] == 2);
    cr_assert(((const float *)t.data)[0] == 4.0f && ((const float *)t.data)[1] == 6.0f,
              "step2: got %g %g, want 4 6", ((const float *)t.data)[0], ((const float *)t.data)[1]);
    cr_assert_eq(ic_safetensors_get(st, "empty_bool", &t), IC_OK);
    cr_assert(t.rank == 1 && t.shape[0] == 0 && t.dtype == IC_BOOL);
    ic_safetensors_close(st);
}

Test(safetensors, save_zero_tensors)
{
    const char *path = ict_path(dir, "none.safetensors");
    cr_assert_eq(ic_safetensors_save(c, path, 0, NULL, NULL), IC_OK, "%s", ic_last_error(c));
    ic_safetensors *st = open_ok(path);
    cr_assert_eq(ic_safetensors_count(st), 0);
    ic_safetensors_close(st);
}

/* The written bytes follow the public layout: LE length (multiple of 8, header padded with
 * spaces), compact JSON with safetensors dtype names, offsets aligned to element sizes. */
Test(safetensors, saved_layout_matches_format)
{
    uint16_t h[3] = { 0x3c00, 0x4000, 0x4200 }; /* f16 1 2 3: 6 bytes */
    int64_t l[1] = { -5 };
    uint8_t b[1] = { 1 };
    ic_tensor ts[3];
    int64_t s3[1] = { 3 }, s1[1] = { 1 };
    ic_tensor_init(&ts[0], IC_F16, 1, s3, h);
    ic_tensor_init(&ts[1], IC_BOOL, 1, s1, b);
    ic_tensor_init(&ts[2], IC_I64, 1, s1, l);
    const char *names[3] = { "half", "flag", "long" };
    const char *path = ict_path(dir, "layout.safetensors");
    cr_assert_eq(ic_safetensors_save(c, path, 3, names, ts), IC_OK, "%s", ic_last_error(c));

    size_t n;
    unsigned char *buf = ict_read_file(path, &n);
    cr_assert(buf && n >= 8);
    uint64_t hlen = read_le64(buf);
    cr_assert_eq(hlen % 8, 0, "header length %llu is not a multiple of 8", (unsigned long long)hlen);
    cr_assert_eq(n, 8 + hlen + 6 + 1 + 8, "file size %zu, header %llu", n, (unsigned long long)hlen);
    json_error_t err;
    json_t *j = json_loadb((const char *)buf + 8, hlen, 0, &err);
    cr_assert(json_is_object(j), "header is not a JSON object: %s", err.text);
    cr_assert_eq(json_object_size(j), 3);
    const struct { const char *name, *dtype; long long size, elem; } want[3] = {
        { "half", "F16", 6, 2 }, { "flag", "BOOL", 1, 1 }, { "long", "I64", 8, 8 } };
    for (int i = 0; i < 3; i++) {
        json_t *e = json_object_get(j, want[i].name);
        cr_assert(json_is_object(e), "no entry %s", want[i].name);
        cr_assert_str_eq(json_string_value(json_object_get(e, "dtype")), want[i].dtype);
        json_t *o = json_object_get(e, "data_offsets");
        long long b0 = json_integer_value(json_array_get(o, 0)), b1 = json_integer_value(json_array_get(o, 1));
        cr_assert_eq(b1 - b0, want[i].size, "%s: %lld bytes", want[i].name, b1 - b0);
        cr_assert_eq(b0 % want[i].elem, 0, "%s at offset %lld is misaligned", want[i].name, b0);
        cr_assert(memcmp(buf + 8 + hlen + b0, want[i].name[0] == 'h' ? (void *)h : want[i].name[0] == 'f' ? (void *)b : (void *)l,
                         (size_t)want[i].size) == 0, "%s: data bytes differ", want[i].name);
    }
    /* the padding, if any, is spaces after the closing brace */
    size_t end = hlen;
    while (end > 0 && buf[8 + end - 1] == ' ')
        end--;
    cr_assert_eq(buf[8 + end - 1], '}', "header must end with '}' before padding");
    cr_assert_lt(hlen - end, 8, "at most 7 bytes of padding, got %zu", (size_t)(hlen - end));
    json_decref(j);
    free(buf);
}

/* A file written by hand from the public description (as another implementation would),
 * unpadded so that the data area is misaligned, with __metadata__. */
Test(safetensors, reads_hand_written_file)
{
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
                      "\"ids\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[],\"data_offsets\":[24,26]}} ";
    unsigned char data[26];
    float w[4] = { 1, 2, 3, 4 };
    int64_t ids[1] = { 30521 };
    uint16_t bf = 0x3fc0; /* 1.5 */
    memcpy(data, w, 16);
    memcpy(data + 16, ids, 8);
    memcpy(data + 24, &bf, 2);
    cr_assert_neq(strlen(hdr) % 4, 0, "the test wants a misaligned data area");
    const char *path = write_st("hand.safetensors", hdr, data, sizeof data);

    ic_safetensors *st = open_ok(path);
    cr_assert_eq(ic_safetensors_count(st), 3, "__metadata__ is not a tensor");
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(st, "w", &t), IC_OK);
    cr_assert_eq((uintptr_t)t.data % 4, 0, "f32 data must be aligned");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(((const float *)t.data)[i], w[i]);
    cr_assert_eq(ic_safetensors_get(st, "ids", &t), IC_OK);
    cr_assert_eq((uintptr_t)t.data % 8, 0, "i64 data must be aligned");
    cr_assert_eq(((const int64_t *)t.data)[0], 30521);
    cr_assert_eq(ic_safetensors_get(st, "b", &t), IC_OK);
    cr_assert_eq(t.rank, 0);
    cr_assert_eq(ic_bf16_to_f32(((const uint16_t *)t.data)[0]), 1.5f);
    /* names in data order */
    cr_assert_str_eq(ic_safetensors_name(st, 0), "w");
    cr_assert_str_eq(ic_safetensors_name(st, 1), "ids");
    cr_assert_str_eq(ic_safetensors_name(st, 2), "b");
    ic_safetensors_close(st);
}

Test(safetensors, missing_key_names_file_and_key)
{
    const char *path = write_st("one.safetensors",
                                "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                                "\0\0\0\0", 4);
    ic_safetensors *st = open_ok(path);
    ic_tensor t;
    ict_assert_error(c, ic_safetensors_get(st, "fc.weight", &t), IC_EINVAL, path, "fc.weight");
    ic_safetensors_close(st);
}

/* ---- header validation ---- */

Test(safetensors, missing_file_and_directory)
{
    const char *path = ict_path(dir, "nope.safetensors");
    expect_open_error(path, IC_EIO, "No such file");
    expect_open_error(dir, IC_EIO, "not a regular file");
}

Test(safetensors, empty_and_tiny_files)
{
    const char *path = ict_path(dir, "empty.safetensors");
    ict_write_file(path, "", 0);
    expect_open_error(path, IC_EFORMAT, "0 bytes");
    ict_write_file(path, "\x02\0\0", 3);
    expect_open_error(path, IC_EFORMAT, "3 bytes");
}

Test(safetensors, truncated_at_every_byte)
{
    uint16_t h[3] = { 1, 2, 3 };
    int32_t i[2] = { 4, 5 };
    ic_tensor ts[2];
    int64_t s3[1] = { 3 }, s2[1] = { 2 };
    ic_tensor_init(&ts[0], IC_F16, 1, s3, h);
    ic_tensor_init(&ts[1], IC_I32, 1, s2, i);
    const char *names[2] = { "h", "i" };
    const char *full = ict_path(dir, "full.safetensors");
    cr_assert_eq(ic_safetensors_save(c, full, 2, names, ts), IC_OK, "%s", ic_last_error(c));
    size_t n;
    unsigned char *buf = ict_read_file(full, &n);
    cr_assert(buf);
    char cut[4096];
    snprintf(cut, sizeof cut, "%s", ict_path(dir, "cut.safetensors"));
    for (size_t k = 0; k < n; k++) {
        ict_write_file(cut, buf, k);
        ic_safetensors *st = (ic_safetensors *)0x1;
        ic_status s = ic_safetensors_open(c, cut, &st);
        cr_assert_eq(s, IC_EFORMAT, "cut at %zu of %zu: status %d: %s", k, n, (int)s, ic_last_error(c));
        cr_assert_null(st);
        cr_assert(strstr(ic_last_error(c), cut), "cut at %zu: message lacks the path: %s", k,
                  ic_last_error(c));
    }
    ict_write_file(cut, buf, n);
    ic_safetensors *st = open_ok(cut);
    ic_safetensors_close(st);
    free(buf);
}

Test(safetensors, header_length_past_end_of_file)
{
    const char *hdr = "{}      ";
    const char *path = write_raw("long.safetensors", 9, hdr, 8, NULL, 0);
    expect_open_error(path, IC_EFORMAT, "header length 9");
}

Test(safetensors, absurd_header_length)
{
    const char *path = write_raw("absurd.safetensors", UINT64_MAX, "{}      ", 8, NULL, 0);
    expect_open_error(path, IC_EFORMAT, "header length 18446744073709551615", "limit");
    path = write_raw("absurd2.safetensors", 100000001, "{}      ", 8, NULL, 0);
    expect_open_error(path, IC_EFORMAT, "header length 100000001");
}

Test(safetensors, bad_json)
{
    expect_open_error(write_st("a.safetensors", "{\"a\":", NULL, 0), IC_EFORMAT, "not valid JSON");
    expect_open_error(write_st("b.safetensors", "[1, 2]", NULL, 0), IC_EFORMAT, "JSON object");
    expect_open_error(write_st("c.safetensors", "{} x", NULL, 0), IC_EFORMAT, "not valid JSON");
    expect_open_error(write_st("d.safetensors", "{\"\xff\":1}", NULL, 0), IC_EFORMAT, "not valid JSON");
    expect_open_error(write_raw("e.safetensors", 4, "{\0}  ", 4, NULL, 0), IC_EFORMAT, "not valid JSON");
    expect_open_error(write_st("f.safetensors", "", NULL, 0), IC_EFORMAT, "not valid JSON");
    expect_open_error(write_st("g.safetensors", "{\"a\": 5}", NULL, 0), IC_EFORMAT, "'a'", "object");
}

/* U8, I8 and I16 entries as PyTorch's safetensors writes them (I16 misaligned: copied). */
Test(safetensors, reads_narrow_integers)
{
    const char *hdr = "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[0,3]},"
                      "\"b\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[3,5]},"
                      "\"c\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[5,9]}}";
    const unsigned char data[9] = { 0, 200, 255, 0x80, 0x7f, 0x00, 0x80, 0xff, 0xff };
    const char *path = write_st("narrow.safetensors", hdr, data, sizeof data);
    ic_safetensors *st = open_ok(path);
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(st, "a", &t), IC_OK);
    cr_assert(t.dtype == IC_U8 && ic_tensor_get(&t, 1) == 200 && ic_tensor_get(&t, 2) == 255);
    cr_assert_eq(ic_safetensors_get(st, "b", &t), IC_OK);
    cr_assert(t.dtype == IC_I8 && ic_tensor_get(&t, 0) == -128 && ic_tensor_get(&t, 1) == 127);
    cr_assert_eq(ic_safetensors_get(st, "c", &t), IC_OK);
    cr_assert_eq((uintptr_t)t.data % 2, 0, "i16 data must be aligned");
    cr_assert(t.dtype == IC_I16 && ic_tensor_get(&t, 0) == -32768 && ic_tensor_get(&t, 1) == -1);
    ic_safetensors_close(st);
    /* an I16 entry whose byte size is not 2 per element is refused */
    expect_open_error(write_st("narrow2.safetensors",
                               "{\"x\":{\"dtype\":\"I16\",\"shape\":[3],\"data_offsets\":[0,3]}}",
                               "abc", 3), IC_EFORMAT, "'x'", "needs 6");
}

Test(safetensors, wrong_dtype_names)
{
    const char *bad[] = { "U16", "F8_E4M3", "f32", "u8", "" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"x.w\":{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[0,1]}}", bad[i]);
        char quoted[64];
        snprintf(quoted, sizeof quoted, "\"%s\"", bad[i]);
        expect_open_error(write_st("dt.safetensors", hdr, "\0", 1), IC_EDTYPE, "'x.w'", quoted);
    }
    expect_open_error(write_st("dt2.safetensors",
                               "{\"x\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", "abcd", 4),
                      IC_EFORMAT, "'x'", "dtype");
    expect_open_error(write_st("dt3.safetensors", "{\"x\":{\"shape\":[1],\"data_offsets\":[0,4]}}", "abcd", 4),
                      IC_EFORMAT, "'x'", "dtype", "missing");
}

Test(safetensors, bad_shapes)
{
    static const struct { const char *shape, *msg; } cases[] = {
        { "[-1]", "shape[0]" },
        { "[2, -3]", "shape[1]" },
        { "[2.0]", "not an integer" },
        { "\"[2]\"", "list of integers" },
        { "[1,1,1,1,1,1,1,1,1]", "rank 9" },
        { "[4611686018427387904, 4611686018427387904]", "overflows" },
        { "[99999999999999999999]", "not valid JSON" }, /* jansson: too big integer */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"k\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[0,4]}}",
                 cases[i].shape);
        const char *path = write_st("shape.safetensors", hdr, "abcd", 4);
        if (strstr(cases[i].msg, "JSON"))
            expect_open_error(path, IC_EFORMAT, cases[i].msg);
        else
            expect_open_error(path, IC_EFORMAT, "'k'", cases[i].msg);
    }
    expect_open_error(write_st("noshape.safetensors", "{\"k\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "abcd", 4),
                      IC_EFORMAT, "'k'", "shape");
}

Test(safetensors, offsets_out_of_range)
{
    static const struct { const char *offs, *msg; } cases[] = {
        { "[0,100]", "past the data area" },
        { "[8,4]", "begin is after end" },
        { "[-4,0]", "data_offsets" },
        { "[0]", "data_offsets" },
        { "[0,4,8]", "data_offsets" },
        { "[0,4.0]", "data_offsets" },
        { "\"0,4\"", "data_offsets" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"k\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":%s}}",
                 cases[i].offs);
        expect_open_error(write_st("offs.safetensors", hdr, "abcdefgh", 8), IC_EFORMAT, "'k'",
                          cases[i].msg);
    }
    /* the last tensor ends one byte past the data */
    expect_open_error(write_st("offs2.safetensors",
                               "{\"k\":{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
                               "abcdefg", 7),
                      IC_EFORMAT, "'k'", "[0, 8]", "7 bytes");
}

Test(safetensors, overlapping_tensors)
{
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
    expect_open_error(write_st("ov.safetensors", hdr, "abcdefghijkl", 12), IC_EFORMAT, "'b'",
                      "overlap", "'a'");
    /* the same range twice */
    hdr = "{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    expect_open_error(write_st("ov2.safetensors", hdr, "abcd", 4), IC_EFORMAT, "overlap");
    /* adjacent and empty tensors do not overlap */
    hdr = "{\"a\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"e\":{\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[2,2]},"
          "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    ic_safetensors *st = open_ok(write_st("ov3.safetensors", hdr, "abcdefgh", 8));
    cr_assert_eq(ic_safetensors_count(st), 3);
    ic_safetensors_close(st);
}

Test(safetensors, byte_size_mismatch)
{
    expect_open_error(write_st("sz.safetensors",
                               "{\"k\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}",
                               "abcdefghijkl", 12),
                      IC_EFORMAT, "'k'", "8 bytes", "needs 12");
    expect_open_error(write_st("sz2.safetensors",
                               "{\"k\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,4]}}",
                               "abcd", 4),
                      IC_EFORMAT, "'k'", "needs 2");
}

/* Found by fuzzing (unittests/Fuzz/regress/safetensors/empty_tensor_name): a name no get can
 * ask for and the writer refuses, so a file that opened could not be saved back. */
Test(safetensors, empty_tensor_name)
{
    expect_open_error(write_st("empty_name.safetensors",
                               "{\"\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", "ab", 2),
                      IC_EFORMAT, "header", "empty name");
}

Test(safetensors, duplicate_key)
{
    const char *hdr = "{\"dup.weight\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"dup.weight\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    expect_open_error(write_st("dup.safetensors", hdr, "abcdefgh", 8), IC_EFORMAT,
                      "'dup.weight'", "twice");
    hdr = "{\"q\\\"uote\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
          "\"q\\\"uote\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
    expect_open_error(write_st("dup2.safetensors", hdr, "abcdefgh", 8), IC_EFORMAT,
                      "'q\"uote'", "twice");
}

Test(safetensors, metadata)
{
    expect_open_error(write_st("m.safetensors", "{\"__metadata__\":{\"n\":3}}", NULL, 0),
                      IC_EFORMAT, "__metadata__", "'n'");
    expect_open_error(write_st("m2.safetensors", "{\"__metadata__\":[]}", NULL, 0), IC_EFORMAT,
                      "__metadata__");
    ic_safetensors *st = open_ok(write_st("m3.safetensors", "{\"__metadata__\":{}}", NULL, 0));
    cr_assert_eq(ic_safetensors_count(st), 0);
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(st, "__metadata__", &t), IC_EINVAL);
    ic_safetensors_close(st);
}

/* ---- saving ---- */

Test(safetensors, save_rejects_bad_names)
{
    float x = 1;
    ic_tensor ts[2];
    ic_tensor_init(&ts[0], IC_F32, 0, NULL, &x);
    ic_tensor_init(&ts[1], IC_F32, 0, NULL, &x);
    const char *path = ict_path(dir, "bad.safetensors");
    const char *dup[2] = { "w", "w" }, *empty[2] = { "w", "" }, *null[2] = { NULL, "w" };
    const char *meta[1] = { "__metadata__" }, *utf[1] = { "bad\xff" };
    ict_assert_error(c, ic_safetensors_save(c, path, 2, dup, ts), IC_EINVAL, path, "'w'", "twice");
    ict_assert_error(c, ic_safetensors_save(c, path, 2, empty, ts), IC_EINVAL, path, "empty name");
    ict_assert_error(c, ic_safetensors_save(c, path, 2, null, ts), IC_EINVAL, path, "empty name");
    ict_assert_error(c, ic_safetensors_save(c, path, 1, meta, ts), IC_EINVAL, path, "reserved");
    ict_assert_error(c, ic_safetensors_save(c, path, 1, utf, ts), IC_EINVAL, path, "UTF-8");
    ic_tensor bad = ts[0];
    bad.dtype = (ic_dtype)99;
    const char *one[1] = { "t" };
    ict_assert_error(c, ic_safetensors_save(c, path, 1, one, &bad), IC_EDTYPE, path, "'t'");
    bad = ts[0];
    bad.rank = 1, bad.shape[0] = -2;
    ict_assert_error(c, ic_safetensors_save(c, path, 1, one, &bad), IC_ESHAPE, path, "'t'");
    bad.shape[0] = 2, bad.data = NULL;
    ict_assert_error(c, ic_safetensors_save(c, path, 1, one, &bad), IC_EINVAL, path, "'t'", "NULL");
    cr_assert_eq(ict_count_files(dir), 0, "nothing is written on refusal");
}

static void save_one(const char *path, float v, ic_status want)
{
    ic_tensor t;
    int64_t s[1] = { 1 };
    ic_tensor_init(&t, IC_F32, 1, s, &v);
    const char *name = "v";
    ic_status st = ic_safetensors_save(c, path, 1, &name, &t);
    cr_assert_eq(st, want, "save %s: %d: %s", path, (int)st, ic_last_error(c));
}

static float read_one(const char *path)
{
    ic_safetensors *st = open_ok(path);
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(st, "v", &t), IC_OK, "%s", ic_last_error(c));
    float v = *(const float *)t.data;
    ic_safetensors_close(st);
    return v;
}

Test(safetensors, save_replaces_and_leaves_no_temp)
{
    const char *path = ict_path(dir, "out.safetensors");
    save_one(path, 1.0f, IC_OK);
    cr_assert_eq(ict_count_files(dir), 1);
    chmod(path, 0640);
    /* an open mapping of the old file stays valid when the file is replaced */
    ic_safetensors *old = open_ok(path);
    save_one(path, 2.0f, IC_OK);
    cr_assert_eq(ict_count_files(dir), 1, "only the saved file remains");
    cr_assert_eq(read_one(path), 2.0f);
    ic_tensor t;
    cr_assert_eq(ic_safetensors_get(old, "v", &t), IC_OK);
    cr_assert_eq(*(const float *)t.data, 1.0f, "the old mapping still reads the old data");
    ic_safetensors_close(old);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(sb.st_mode & 0777, 0640, "mode of the replaced file is kept: %o", sb.st_mode & 0777);
}

Test(safetensors, save_into_missing_folder_fails)
{
    const char *path = ict_path(dir, "no/such/folder/x.safetensors");
    save_one(path, 1.0f, IC_EIO);
    cr_assert(strstr(ic_last_error(c), path), "%s", ic_last_error(c));
    cr_assert_eq(ict_count_files(dir), 0);
}

/* rename fails (the destination is a non-empty folder) after the temp file was written:
 * the temp file must be removed. */
Test(safetensors, failed_rename_removes_temp)
{
    char sub[4096];
    snprintf(sub, sizeof sub, "%s", ict_path(dir, "out.safetensors"));
    cr_assert_eq(mkdir(sub, 0700), 0);
    ict_write_file(ict_path(sub, "keep"), "x", 1);
    save_one(sub, 1.0f, IC_EIO);
    cr_assert(strstr(ic_last_error(c), sub), "%s", ic_last_error(c));
    cr_assert_eq(ict_count_files(dir), 1, "no temp file may remain");
    cr_assert_eq(ict_count_files(sub), 1);
}

/* A write that fails half-way (file size limit) leaves the old file as it was. */
Test(safetensors, failed_write_keeps_old_file)
{
    const char *path = ict_path(dir, "big.safetensors");
    save_one(path, 7.0f, IC_OK);
    size_t n0;
    void *before = ict_read_file(path, &n0);
    cr_assert(before);
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl = { 65536, 65536 };
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &rl), 0, "setrlimit: %s", strerror(errno));
    int64_t shape[1] = { 1 << 20 };
    ic_tensor t;
    ic_tensor_init(&t, IC_F32, 1, shape, NULL);
    cr_assert_eq(ic_tensor_alloc(c, &t), IC_OK);
    const char *name = "v";
    ict_assert_error(c, ic_safetensors_save(c, path, 1, &name, &t), IC_EIO, path, "cannot write");
    ic_tensor_free(c, &t);
    size_t n1;
    void *after = ict_read_file(path, &n1);
    cr_assert(after && n1 == n0 && memcmp(before, after, n0) == 0, "old file changed");
    cr_assert_eq(ict_count_files(dir), 1, "no temp file may remain");
    cr_assert_eq(read_one(path), 7.0f);
    free(before);
    free(after);
}

/* Saving over an existing file in a folder we may not write to fails and keeps the file.
 * Root may write anywhere, so the attempt runs in a child that drops to 'nobody'. */
Test(safetensors, unwritable_folder_keeps_old_file)
{
    const char *path = ict_path(dir, "ro.safetensors");
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    save_one(p, 3.0f, IC_OK);
    chmod(p, 0644);
    cr_assert_eq(chmod(dir, 0555), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0))
            _exit(3);
        float v = 4.0f;
        ic_tensor t;
        int64_t s[1] = { 1 };
        ic_tensor_init(&t, IC_F32, 1, s, &v);
        const char *name = "v";
        ic_status st = ic_safetensors_save(c, p, 1, &name, &t);
        if (st != IC_EIO)
            _exit(1);
        _exit(strstr(ic_last_error(c), p) && strstr(ic_last_error(c), "temporary") ? 0 : 2);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    chmod(dir, 0700);
    cr_assert(WIFEXITED(ws), "child died");
    cr_assert_eq(WEXITSTATUS(ws), 0, "child: 1 = wrong status, 2 = bad message, 3 = setuid failed");
    cr_assert_eq(read_one(p), 3.0f, "old file intact");
    cr_assert_eq(ict_count_files(dir), 1);
}

/* ---- allocation failures: every failing allocation gives ENOMEM, never a crash or leak ---- */

static int alloc_budget;

static void *failing_alloc(void *user, void *ptr, size_t size)
{
    (void)user;
    if (size == 0) {
        free(ptr);
        return NULL;
    }
    if (alloc_budget-- <= 0)
        return NULL;
    return realloc(ptr, size);
}

Test(safetensors, allocation_failures)
{
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[4,12]}}";
    char path[4096];
    snprintf(path, sizeof path, "%s", write_st("oom.safetensors", hdr, "abcdefghijkl", 12));
    char out[4096];
    snprintf(out, sizeof out, "%s", ict_path(dir, "oom-out.safetensors"));
    ic_ctx_options o = { .alloc = failing_alloc };
    bool opened = false, saved = false;
    for (int budget = 1; budget < 64 && !(opened && saved); budget++) {
        alloc_budget = 1000;
        ic_ctx *fc = NULL;
        cr_assert_eq(ic_ctx_create(&o, &fc), IC_OK);
        alloc_budget = budget;
        ic_safetensors *st = NULL;
        ic_status s = ic_safetensors_open(fc, path, &st);
        cr_assert(s == IC_OK || s == IC_ENOMEM, "budget %d: %d %s", budget, (int)s, ic_last_error(fc));
        if (s == IC_OK) {
            opened = true;
            ic_tensor t[2];
            cr_assert_eq(ic_safetensors_get(st, "a", &t[0]), IC_OK);
            cr_assert_eq(ic_safetensors_get(st, "b", &t[1]), IC_OK);
            const char *names[2] = { "a", "b" };
            alloc_budget = budget;
            s = ic_safetensors_save(fc, out, 2, names, t);
            cr_assert(s == IC_OK || s == IC_ENOMEM, "save budget %d: %d %s", budget, (int)s,
                      ic_last_error(fc));
            saved = s == IC_OK;
            ic_safetensors_close(st);
        } else {
            cr_assert_null(st);
        }
        alloc_budget = 1000;
        ic_ctx_destroy(fc);
    }
    cr_assert(opened && saved, "never succeeded");
}

/* ---- corruption: random byte changes never crash, and every refusal names the file ---- */

Test(safetensors, random_corruptions_never_crash)
{
    int64_t s23[2] = { 2, 3 }, s1[1] = { 1 };
    float f[6] = { 1, 2, 3, 4, 5, 6 };
    int64_t l[1] = { 9 };
    uint16_t h[6] = { 0 };
    ic_tensor ts[3];
    ic_tensor_init(&ts[0], IC_F32, 2, s23, f);
    ic_tensor_init(&ts[1], IC_I64, 1, s1, l);
    ic_tensor_init(&ts[2], IC_BF16, 2, s23, h);
    const char *names[3] = { "layer.0.weight", "step", "emb" };
    char full[4096], bad[4096];
    snprintf(full, sizeof full, "%s", ict_path(dir, "ok.safetensors"));
    snprintf(bad, sizeof bad, "%s", ict_path(dir, "bad.safetensors"));
    cr_assert_eq(ic_safetensors_save(c, full, 3, names, ts), IC_OK, "%s", ic_last_error(c));
    size_t n;
    unsigned char *orig = ict_read_file(full, &n);
    cr_assert(orig);
    unsigned char *buf = malloc(n);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    int refused = 0;
    for (int iter = 0; iter < 2000; iter++) {
        memcpy(buf, orig, n);
        int flips = 1 + iter % 3;
        for (int k = 0; k < flips; k++) {
            rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
            /* mostly the length and header, where the structure is */
            size_t pos = (size_t)(rng >> 8) % (iter % 4 == 0 ? n : (n < 8 + 200 ? n : 8 + 200));
            static const unsigned char pick[] = { '"', '{', '}', '[', ']', ',', ':', '-', '0',
                                                  '9', ' ', 0, 0xff, '1', 'e' };
            buf[pos] = (rng >> 40) & 1 ? pick[(rng >> 48) % sizeof pick] : (unsigned char)(rng >> 32);
        }
        ict_write_file(bad, buf, n);
        ic_safetensors *st = NULL;
        ic_status s = ic_safetensors_open(c, bad, &st);
        if (s) {
            refused++;
            cr_assert_null(st);
            cr_assert(strstr(ic_last_error(c), bad), "iter %d: message lacks the path: %s", iter,
                      ic_last_error(c));
            continue;
        }
        /* accepted: every tensor is readable and lies inside the file */
        for (int i = 0; i < ic_safetensors_count(st); i++) {
            ic_tensor t;
            cr_assert_eq(ic_safetensors_get(st, ic_safetensors_name(st, i), &t), IC_OK);
            int64_t ne = ic_tensor_numel(&t);
            cr_assert(ne >= 0);
            volatile unsigned char sink = 0;
            for (int64_t b = 0; b < ne * (int64_t)ic_dtype_size(t.dtype); b++)
                sink ^= ((const unsigned char *)t.data)[b];
            (void)sink;
        }
        ic_safetensors_close(st);
    }
    cr_assert_gt(refused, 100, "most corruptions are refused (%d)", refused);
    free(buf);
    free(orig);
}

/* The shared allclose helper must be able to fail (other suites rely on it). */
Test(safetensors, testutil_allclose_can_fail)
{
    float a[3] = { 1.0f, 2.0f, 3.0f }, b[3] = { 1.0f, 2.00001f, 3.1f };
    int64_t s[1] = { 3 };
    ic_tensor ta, tb;
    ic_tensor_init(&ta, IC_F32, 1, s, a);
    ic_tensor_init(&tb, IC_F32, 1, s, b);
    char msg[512];
    cr_assert(!ict_allclose(&ta, &tb, msg, sizeof msg), "3.0 vs 3.1 must differ in f32");
    cr_assert(strstr(msg, "1 of 3") && strstr(msg, "[2]"), "message: %s", msg);
    b[2] = 3.0f;
    cr_assert(ict_allclose(&ta, &tb, msg, sizeof msg), "%s", msg);
    int64_t i1[2] = { INT64_MAX, 1 }, i2[2] = { INT64_MAX - 1, 1 };
    int64_t s2[1] = { 2 };
    ic_tensor_init(&ta, IC_I64, 1, s2, i1);
    ic_tensor_init(&tb, IC_I64, 1, s2, i2);
    cr_assert(!ict_allclose(&ta, &tb, msg, sizeof msg), "i64 compares exactly");
    double d1[1] = { NAN }, d2[1] = { 1 };
    int64_t s1[1] = { 1 };
    ic_tensor_init(&ta, IC_F64, 1, s1, d1);
    ic_tensor_init(&tb, IC_F64, 1, s1, d2);
    cr_assert(!ict_allclose(&ta, &tb, msg, sizeof msg), "NaN differs from 1");
    cr_assert(ict_allclose(&ta, &ta, msg, sizeof msg), "NaN matches NaN");
}
