/* config.c - ic_config: option values at four levels (template, freezing flag, mode, explicit
 * options), resolved highest first, written into the option structs, and read from config
 * strings (JSON, or base64 of JSON, as GraphNet passes its config). The registry and the
 * values as text: options.c. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "options-impl.h"

/* Levels, lowest first. The mode and explicit options never both set values (exclusive). */
enum { L_TEMPLATE, L_FREEZING, L_MODE, L_EXPLICIT, NLEVELS };

struct ic_config {
    ic_ctx *c;
    int nopts;
    ic__optval *v;                 /* [nopts * NLEVELS], option-major */
    const ic_mode_info *mode;      /* explicit, NULL when none (or "default") */
    const ic_template_info *tmpl;
    int nexplicit;                 /* options set explicitly */
};

static ic__optval *val(const ic_config *cfg, int id, int level)
{
    return &cfg->v[id * NLEVELS + level];
}

static void clear(ic_config *cfg, ic__optval *v)
{
    ic__free(cfg->c, v->s);
    memset(v, 0, sizeof *v);
}

ic_status ic_config_create(ic_ctx *c, ic_config **out)
{
    *out = NULL;
    ic_config *cfg = ic__calloc(c, 1, sizeof *cfg);
    int n = ic__opt_count();
    ic__optval *v = cfg ? ic__calloc(c, (size_t)n * NLEVELS, sizeof *v) : NULL;
    if (!v) {
        ic__free(c, cfg);
        return ic__error(c, IC_ENOMEM, "ic_config_create: out of memory");
    }
    *cfg = (ic_config){ .c = c, .nopts = n, .v = v };
    *out = cfg;
    return IC_OK;
}

void ic_config_destroy(ic_config *cfg)
{
    if (!cfg)
        return;
    for (int i = 0; i < cfg->nopts * NLEVELS; i++)
        ic__free(cfg->c, cfg->v[i].s);
    ic__free(cfg->c, cfg->v);
    ic__free(cfg->c, cfg);
}

/* The value in force for option id: the highest level that sets it, else NULL (default). */
static const ic__optval *resolved(const ic_config *cfg, int id)
{
    for (int l = NLEVELS - 1; l >= 0; l--)
        if (val(cfg, id, l)->set)
            return val(cfg, id, l);
    return NULL;
}

static ic_status exclusive(ic_config *cfg, const char *mode)
{
    return ic__error(cfg->c, IC_EINVAL, "mode '%s' and options are exclusive (as torch.compile's "
                     "mode and options): give the mode's options instead (ic-run "
                     "--list-mode-options %s)", mode, mode);
}

/* Parses value into level l of option name. */
static ic_status set_level(ic_config *cfg, const char *name, const char *value, int l)
{
    int id = ic__opt_id(name);
    if (id < 0)
        return ic__opt_unknown(cfg->c, name);
    ic__optval nv;
    ic_status s = ic__opt_parse(cfg->c, id, value, &nv);
    if (s)
        return s;
    clear(cfg, val(cfg, id, l));
    *val(cfg, id, l) = nv;
    return IC_OK;
}

ic_status ic_config_set(ic_config *cfg, const char *name, const char *value)
{
    if (cfg->mode)
        return exclusive(cfg, cfg->mode->name);
    int id = ic__opt_id(name);
    bool was = id >= 0 && val(cfg, id, L_EXPLICIT)->set;
    ic_status s = set_level(cfg, name, value, L_EXPLICIT);
    cfg->nexplicit += !s && !was;
    return s;
}

/* Level l takes mode m's options (only those it turns on, as list_mode_options does). */
static void put_mode(ic_config *cfg, const ic_mode_info *m, int l)
{
    ic__optval on = { .set = true, .i = 1 }, tune = { .set = true, .i = m->autotune };
    if (m->cuda_graphs)
        *val(cfg, ic__opt_id("cuda_graphs"), l) = on;
    if (m->autotune)
        *val(cfg, ic__opt_id("autotune"), l) = tune;
}

static ic_status unknown_mode(ic_ctx *c, const char *mode)
{
    return ic__error(c, IC_EINVAL, "unknown mode '%s' (modes: %s)", mode ? mode : "(null)",
                     ic_mode_names());
}

ic_status ic_config_set_mode(ic_config *cfg, const char *mode)
{
    const ic_mode_info *m = ic_mode_find(mode);
    if (!m)
        return unknown_mode(cfg->c, mode);
    bool none = !m->cuda_graphs && !m->autotune;
    if (!none && cfg->nexplicit)
        return exclusive(cfg, m->name);
    for (int id = 0; id < cfg->nopts; id++)
        clear(cfg, val(cfg, id, L_MODE));
    put_mode(cfg, m, L_MODE);
    cfg->mode = none ? NULL : m;
    return IC_OK;
}

static const char *template_name(int i)
{
    return ic_template_get(i)->name;
}

ic_status ic_config_set_template(ic_config *cfg, const char *name)
{
    const ic_template_info *t = ic_template_find(name);
    if (!t) {
        char list[512];
        size_t len = 0;
        for (int i = 0; i < ic_template_count(); i++)
            len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", i ? ", " : "", template_name(i));
        return ic__error(cfg->c, IC_EINVAL, "unknown template '%s' (templates: %s)",
                         name ? name : "(null)", list);
    }
    for (int id = 0; id < cfg->nopts; id++)
        clear(cfg, val(cfg, id, L_TEMPLATE));
    put_mode(cfg, ic_mode_find(t->mode), L_TEMPLATE);
    for (int i = 0; t->options[i]; i++) {
        char key[64];
        const char *eq = strchr(t->options[i], '=');
        snprintf(key, sizeof key, "%.*s", (int)(eq - t->options[i]), t->options[i]);
        ic_status s = set_level(cfg, key, eq + 1, L_TEMPLATE);
        if (s)
            return s; /* the registry's tests keep every template's options valid */
    }
    cfg->tmpl = t;
    return IC_OK;
}

void ic_config_set_freezing(ic_config *cfg, bool on)
{
    ic__optval *v = val(cfg, ic__opt_id("freezing"), L_FREEZING);
    *v = (ic__optval){ .set = true, .i = on };
}

ic_status ic_config_get(const ic_config *cfg, const char *name, char *buf, size_t n)
{
    int id = ic__opt_id(name);
    if (id < 0)
        return ic__opt_unknown(cfg->c, name);
    ic__optval d;
    const ic__optval *v = resolved(cfg, id);
    if (!v)
        ic__opt_default(id, &d);
    if (ic__opt_format(id, v ? v : &d, buf, n) >= n)
        return ic__error(cfg->c, IC_ENOMEM, "ic_config_get: the value of '%s' needs more than %zu bytes", name, n);
    return IC_OK;
}

const char *ic_config_mode(const ic_config *cfg)
{
    return cfg->mode ? cfg->mode->name : cfg->tmpl ? cfg->tmpl->mode : "default";
}

const char *ic_config_template(const ic_config *cfg)
{
    return cfg->tmpl ? cfg->tmpl->name : NULL;
}

bool ic_config_is_set(const ic_config *cfg, const char *name)
{
    int id = ic__opt_id(name);
    return id >= 0 && resolved(cfg, id);
}

bool ic_config_is_explicit(const ic_config *cfg, const char *name)
{
    int id = ic__opt_id(name);
    return id >= 0 && val(cfg, id, L_EXPLICIT)->set;
}

/* ---- applying ---- */

static void apply(const ic_config *cfg, size_t sel, void *base)
{
    for (int id = 0; id < cfg->nopts; id++) {
        const ic__optval *v = resolved(cfg, id);
        if (v)
            ic__opt_store((const ic__store *)((const char *)ic__opt_row(id) + sel), v, base);
    }
}

void ic_config_apply_compile(const ic_config *cfg, ic_compile_options *o)
{
    apply(cfg, offsetof(ic__optrow, co), o);
}

void ic_config_apply_cuda(const ic_config *cfg, ic_cuda_options *o)
{
    apply(cfg, offsetof(ic__optrow, cu), o);
}

void ic_config_apply_switches(const ic_config *cfg, ic_switches *s)
{
    apply(cfg, offsetof(ic__optrow, sw), s);
}

size_t ic_config_key(const ic_config *cfg, unsigned backends, char *buf, size_t n)
{
    size_t len = 0;
    if (n)
        buf[0] = 0;
    for (int id = 0; id < cfg->nopts; id++) {
        const ic__optrow *r = ic__opt_row(id);
        if (!r->code || !(r->backends & backends))
            continue;
        ic__optval d;
        const ic__optval *v = resolved(cfg, id);
        if (!v)
            ic__opt_default(id, &d);
        ic__opt_key_append(id, v ? v : &d, buf, n, &len);
    }
    return len;
}

/* ---- config strings ---- */

static int b64_digit(int ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

/* Base64 (standard or URL-safe; padding and whitespace ignored) into a NUL-terminated string
 * the caller frees; NULL when text is not base64 or decodes to something with a NUL. */
static char *b64_decode(ic_ctx *c, const char *text)
{
    size_t n = strlen(text), len = 0;
    char *out = ic__malloc(c, n * 3 / 4 + 4);
    if (!out)
        return NULL;
    unsigned acc = 0;
    int bits = 0;
    bool pad = false;
    for (const char *p = text; *p; p++) {
        int d = b64_digit((unsigned char)*p);
        if (isspace((unsigned char)*p))
            continue;
        if (*p == '=') {
            pad = true;
            continue;
        }
        if (d < 0 || pad)
            goto bad;
        acc = (acc << 6) | (unsigned)d;
        if ((bits += 6) >= 8) {
            bits -= 8;
            if (!(out[len++] = (char)((acc >> bits) & 0xff)))
                goto bad;
        }
    }
    out[len] = 0;
    return out;
bad:
    ic__free(c, out);
    return NULL;
}

/* A JSON option value as the text ic_config_set takes: bools, integers, reals, strings, and
 * arrays of strings joined by commas (flags). */
static bool json_value_text(const json_t *j, char *buf, size_t n)
{
    switch (json_typeof(j)) {
    case JSON_TRUE: snprintf(buf, n, "true"); return true;
    case JSON_FALSE: snprintf(buf, n, "false"); return true;
    case JSON_INTEGER: snprintf(buf, n, "%lld", (long long)json_integer_value(j)); return true;
    case JSON_REAL: snprintf(buf, n, "%.17g", json_real_value(j)); return true;
    case JSON_STRING: return (size_t)snprintf(buf, n, "%s", json_string_value(j)) < n;
    case JSON_ARRAY: {
        size_t len = 0, i;
        const json_t *e;
        buf[0] = 0;
        json_array_foreach(j, i, e) {
            if (!json_is_string(e) || len >= n)
                return false;
            len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "," : "", json_string_value(e));
        }
        return len < n;
    }
    default: return false;
    }
}

static ic_status parse_options(ic_config *cfg, const json_t *opts)
{
    if (!json_is_object(opts))
        return ic__error(cfg->c, IC_EINVAL, "config: \"options\" must be an object of option "
                         "name -> value");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)opts, k, v) {
        char text[1024];
        if (ic__opt_id(k) < 0)
            return ic__opt_unknown(cfg->c, k);
        if (!json_value_text(v, text, sizeof text))
            return ic__error(cfg->c, IC_EINVAL, "config: option '%s': a value must be a bool, "
                             "a number, a string or an array of strings", k);
        ic_status s = ic_config_set(cfg, k, text);
        if (s)
            return s;
    }
    return IC_OK;
}

static ic_status string_key(ic_config *cfg, const json_t *root, const char *key, const char **out)
{
    const json_t *j = json_object_get(root, key);
    *out = NULL;
    if (j && !json_is_string(j))
        return ic__error(cfg->c, IC_EINVAL, "config: \"%s\" must be a string", key);
    *out = j ? json_string_value(j) : NULL;
    return IC_OK;
}

/* The keys of root applied to cfg: template, freezing, mode, options. */
static ic_status parse_root(ic_config *cfg, const json_t *root)
{
    static const char *const keys[] = { "mode", "template", "options", "freezing" };
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)root, k, v) {
        bool known = false;
        for (int i = 0; i < 4; i++)
            known |= strcmp(k, keys[i]) == 0;
        if (!known)
            return ic__error(cfg->c, IC_EINVAL, "config: unknown key \"%s\" (keys: mode, template, "
                             "options, freezing)", k);
    }
    const char *tmpl, *mode;
    ic_status s;
    if ((s = string_key(cfg, root, "template", &tmpl)) || (s = string_key(cfg, root, "mode", &mode)))
        return s;
    if (tmpl && (s = ic_config_set_template(cfg, tmpl)))
        return s;
    const json_t *fr = json_object_get(root, "freezing");
    if (fr && !json_is_boolean(fr))
        return ic__error(cfg->c, IC_EINVAL, "config: \"freezing\" must be true or false");
    if (fr)
        ic_config_set_freezing(cfg, json_is_true(fr));
    if (mode && (s = ic_config_set_mode(cfg, mode)))
        return s;
    const json_t *opts = json_object_get(root, "options");
    return opts ? parse_options(cfg, opts) : IC_OK;
}

/* *dst = a copy of src's values (strings duplicated). */
static ic_status copy_into(ic_config *dst, const ic_config *src)
{
    for (int i = 0; i < src->nopts * NLEVELS; i++) {
        dst->v[i] = src->v[i];
        if (src->v[i].s && !(dst->v[i].s = ic__strdup(dst->c, src->v[i].s)))
            return ic__error(dst->c, IC_ENOMEM, "config: out of memory");
    }
    dst->mode = src->mode;
    dst->tmpl = src->tmpl;
    dst->nexplicit = src->nexplicit;
    return IC_OK;
}

/* Applies the JSON text to a copy of cfg, which replaces cfg only when all of it is valid. */
static ic_status parse_json_text(ic_config *cfg, const char *text, bool was_b64)
{
    json_error_t err;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &err);
    if (!root || !json_is_object(root)) {
        json_decref(root);
        return ic__error(cfg->c, IC_EINVAL, "config%s: not a JSON object%s%s", was_b64 ? " (base64)" : "",
                         root ? "" : ": ", root ? "" : err.text);
    }
    ic_config *tmp;
    ic_status s = ic_config_create(cfg->c, &tmp);
    if (!s && !(s = copy_into(tmp, cfg)) && !(s = parse_root(tmp, root))) {
        ic__optval *swap = cfg->v;
        cfg->v = tmp->v;
        tmp->v = swap;
        cfg->mode = tmp->mode;
        cfg->tmpl = tmp->tmpl;
        cfg->nexplicit = tmp->nexplicit;
    }
    ic_config_destroy(tmp);
    json_decref(root);
    return s;
}

ic_status ic_config_parse(ic_config *cfg, const char *text)
{
    const char *p = text ? text : "";
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '{')
        return parse_json_text(cfg, p, false);
    char *dec = *p ? b64_decode(cfg->c, p) : NULL;
    const char *q = dec;
    while (q && isspace((unsigned char)*q))
        q++;
    if (!q || *q != '{') {
        ic__free(cfg->c, dec);
        return ic__error(cfg->c, IC_EINVAL, "config '%.40s%s': neither a JSON object nor base64 of "
                         "one (such as {\"template\": \"max_autotune\"})", p, strlen(p) > 40 ? "..." : "");
    }
    ic_status s = parse_json_text(cfg, q, true);
    ic__free(cfg->c, dec);
    return s;
}
