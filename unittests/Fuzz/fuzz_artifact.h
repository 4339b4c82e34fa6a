/* fuzz_artifact.h - saved-model files for the artifact harnesses, raw or sealed.
 *
 * A raw mutation of a saved model never gets past its header checksum, its section hashes or
 * its meta versions (ic, build id, LLVM, device), so an input not starting with "ICMODEL" is
 * read as sections to seal: records of
 *     name (up to 23 bytes, NUL-terminated), u32 little-endian length, that many bytes
 * (the last record's length is cut to what is left). The harness writes them as a valid
 * container (ic__art_image: table, 64-byte offsets, every hash) whose "meta" section starts
 * with the lines this build and host must match (meta_host), then the record's own lines.
 * An input starting with "ICMODEL" is the file as is: the container checks themselves. */
#ifndef IC_FUZZ_ARTIFACT_H
#define IC_FUZZ_ARTIFACT_H
#include "fuzz_common.h"
#include "artifact-impl.h"

typedef struct {
    const uint8_t *p;
    size_t n;
    void (*host)(FILE *f);    /* the device's meta lines */
} fz_meta;

static ic_status fz_fill_bytes(ic__art_writer *W, FILE *f, const void *arg)
{
    (void)W;
    const fz_meta *m = arg;
    if (m->host) {
        ic__art_meta_versions(f);
        m->host(f);
    }
    fwrite(m->p, 1, m->n, f);
    return IC_OK;
}

/* Writes the artifact at "<tmp>/<name>" (path into out); host writes the meta lines of the
 * device it is for ("device cpu\ntriple ..."). */
static inline const char *fz_artifact(ic_ctx *c, char *out, size_t nout, const char *name,
                                      const uint8_t *data, size_t size, void (*host)(FILE *f))
{
    fz_path(out, nout, name);
    if (size >= 7 && !memcmp(data, "ICMODEL", 7))
        return fz_write(out, nout, name, data, size);
    ic__art_writer W = { .c = c, .path = out };
    fz_meta m[IC__ART_MAX_SECTIONS];
    size_t at = 0;
    while (at < size && W.nsec < IC__ART_MAX_SECTIONS) {
        char sname[IC__ART_NAME_LEN];
        size_t k = 0;
        while (at < size && data[at] && k < sizeof sname - 1)
            sname[k++] = (char)data[at++];
        sname[k] = 0;
        while (at < size && data[at]) /* a longer name is cut */
            at++;
        at += at < size;
        uint32_t len = 0;
        for (int i = 0; i < 4 && at < size; i++)
            len |= (uint32_t)data[at++] << (8 * i);
        size_t n = len < size - at ? len : size - at;
        m[W.nsec] = (fz_meta){ data + at, n, strcmp(sname, "meta") ? NULL : host };
        at += n;
        if (ic__art_text_section(&W, sname, fz_fill_bytes, &m[W.nsec]))
            abort();
    }
    char *img;
    size_t nimg;
    if (ic__art_image(&W, &img, &nimg))
        abort();
    ic__art_writer_free(&W);
    fz_write(out, nout, name, img, nimg);
    free(img);
    return out;
}
#endif
