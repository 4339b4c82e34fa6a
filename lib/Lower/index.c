/* index.c - index expressions: canonical affine sums over loop variables with floor
 * division, remainder, clamps and run-time values as atoms, simplified with value ranges so
 * that views cost no div/mod unless a reshape of a non-contiguous view really needs one. */
#include <string.h>
#include "gen.h"

#define MAXTERMS 64

typedef struct {
    int n;
    int64_t c0;
    int64_t coef[MAXTERMS];
    const ic__ixatom *atom[MAXTERMS];
} terms;

static int64_t sat(__int128 v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

static int64_t fdiv(int64_t a, int64_t k)
{
    int64_t q = a / k;
    return (a % k != 0 && ((a < 0) != (k < 0))) ? q - 1 : q;
}

static int64_t fmodk(int64_t a, int64_t k) { return a - fdiv(a, k) * k; }

static int64_t gcd(int64_t a, int64_t b)
{
    a = a < 0 ? -a : a;
    b = b < 0 ? -b : b;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

void ic__ix_init(ic__ixtab *t, ic_arena *ar)
{
    memset(t, 0, sizeof *t);
    t->ar = ar;
    ic__tab_init(&t->atoms, ar->c);
    ic__tab_init(&t->exprs, ar->c);
}

void ic__ix_free(ic__ixtab *t)
{
    ic__tab_free(&t->atoms);
    ic__tab_free(&t->exprs);
}

/* ---- hash-consing ---- */

static uint64_t atom_hash(const ic__ixatom *a)
{
    uint64_t h = ic__mix(a->kind, (uint64_t)a->var);
    h = ic__mix(h, (uint64_t)a->instr);
    h = ic__mix(h, (uint64_t)a->stage);
    h = ic__mix(h, a->e ? (uint64_t)a->e->id : ~0ull);
    h = ic__mix(h, (uint64_t)a->k);
    h = ic__mix(h, (uint64_t)a->lo);
    return ic__mix(h, (uint64_t)a->hi);
}

static bool atom_eq(const void *item, const void *key)
{
    const ic__ixatom *a = item, *b = key;
    return a->kind == b->kind && a->var == b->var && a->instr == b->instr &&
           a->stage == b->stage && a->e == b->e && a->k == b->k && a->lo == b->lo && a->hi == b->hi;
}

static const ic__ixatom *atom_get(ic__ixtab *t, ic__ixatom key)
{
    uint64_t h = atom_hash(&key);
    ic__ixatom *a = ic__tab_find(&t->atoms, h, atom_eq, &key);
    if (a)
        return a;
    a = ic__arena_alloc(t->ar, sizeof *a);
    if (!a || !ic__tab_put(&t->atoms, h, a)) {
        t->oom = true;
        return NULL;
    }
    *a = key;
    a->id = t->natoms++;
    return a;
}

static uint64_t terms_hash(const terms *x)
{
    uint64_t h = ic__mix((uint64_t)x->c0, (uint64_t)x->n);
    for (int i = 0; i < x->n; i++)
        h = ic__mix(ic__mix(h, (uint64_t)x->coef[i]), (uint64_t)x->atom[i]->id);
    return h;
}

static bool expr_eq(const void *item, const void *key)
{
    const ic__ix *e = item;
    const terms *x = key;
    if (e->c0 != x->c0 || e->n != x->n)
        return false;
    for (int i = 0; i < e->n; i++)
        if (e->coef[i] != x->coef[i] || e->atom[i] != x->atom[i])
            return false;
    return true;
}

static void range_of(const terms *x, int64_t *lo, int64_t *hi)
{
    __int128 l = x->c0, h = x->c0;
    for (int i = 0; i < x->n; i++) {
        __int128 a = (__int128)x->coef[i] * x->atom[i]->lo, b = (__int128)x->coef[i] * x->atom[i]->hi;
        l += a < b ? a : b;
        h += a < b ? b : a;
    }
    *lo = sat(l);
    *hi = sat(h);
}

static const ic__ix *intern(ic__ixtab *t, const terms *x)
{
    uint64_t h = terms_hash(x);
    ic__ix *e = ic__tab_find(&t->exprs, h, expr_eq, x);
    if (e)
        return e;
    e = ic__arena_alloc(t->ar, sizeof *e);
    int64_t *coef = ic__arena_alloc(t->ar, sizeof(int64_t) * (size_t)(x->n + 1));
    const ic__ixatom **atom = ic__arena_alloc(t->ar, sizeof(void *) * (size_t)(x->n + 1));
    if (!e || !coef || !atom || !ic__tab_put(&t->exprs, h, e)) {
        t->oom = true;
        return NULL;
    }
    memcpy(coef, x->coef, sizeof(int64_t) * (size_t)x->n);
    memcpy(atom, x->atom, sizeof(void *) * (size_t)x->n);
    e->id = t->nexprs++;
    e->n = x->n;
    e->c0 = x->c0;
    e->coef = coef;
    e->atom = atom;
    range_of(x, &e->lo, &e->hi);
    return e;
}

/* ---- canonical form ---- */

static bool push(terms *x, int64_t coef, const ic__ixatom *a)
{
    if (x->n >= MAXTERMS)
        return false;
    x->coef[x->n] = coef;
    x->atom[x->n++] = a;
    return true;
}

static void sort_merge(terms *x)
{
    for (int i = 1; i < x->n; i++)
        for (int j = i; j > 0 && x->atom[j - 1]->id > x->atom[j]->id; j--) {
            int64_t c = x->coef[j];
            const ic__ixatom *a = x->atom[j];
            x->coef[j] = x->coef[j - 1];
            x->atom[j] = x->atom[j - 1];
            x->coef[j - 1] = c;
            x->atom[j - 1] = a;
        }
    int k = 0;
    for (int i = 0; i < x->n; i++) {
        if (k && x->atom[k - 1] == x->atom[i]) {
            x->coef[k - 1] += x->coef[i];
            continue;
        }
        x->coef[k] = x->coef[i];
        x->atom[k++] = x->atom[i];
    }
    x->n = 0;
    for (int i = 0; i < k; i++)
        if (x->coef[i])
            push(x, x->coef[i], x->atom[i]);
}

/* k*(e/k)*c + (e%k)*c = e*c: undoes the delinearisation of a reshape. */
static bool fold_divmod(terms *x)
{
    for (int i = 0; i < x->n; i++) {
        const ic__ixatom *m = x->atom[i];
        if (m->kind != IC__IXA_MOD)
            continue;
        /* the partner of e % k is e / k, which for e = e0 / k1 is written e0 / (k1 * k) */
        const ic__ix *pe = m->e;
        int64_t pk = m->k;
        if (pe->n == 1 && pe->c0 == 0 && pe->coef[0] == 1 && pe->atom[0]->kind == IC__IXA_DIV) {
            pk = pe->atom[0]->k * m->k;
            pe = pe->atom[0]->e;
        }
        for (int j = 0; j < x->n; j++) {
            const ic__ixatom *d = x->atom[j];
            if (d->kind != IC__IXA_DIV || d->e != pe || d->k != pk || x->coef[j] != x->coef[i] * m->k)
                continue;
            int64_t c = x->coef[i];
            const ic__ix *e = m->e;
            x->coef[i] = x->coef[j] = 0;
            x->c0 += c * e->c0;
            for (int t = 0; t < e->n; t++)
                if (!push(x, c * e->coef[t], e->atom[t]))
                    return false;
            return true;
        }
    }
    return false;
}

static const ic__ix *make(ic__ixtab *t, terms *x)
{
    for (int guard = 0; guard < 16; guard++) {
        sort_merge(x);
        if (!fold_divmod(x))
            break;
    }
    return intern(t, x);
}

static void load(terms *x, const ic__ix *e)
{
    x->n = e->n;
    x->c0 = e->c0;
    memcpy(x->coef, e->coef, sizeof(int64_t) * (size_t)e->n);
    memcpy(x->atom, e->atom, sizeof(void *) * (size_t)e->n);
}

/* ---- constructors ---- */

const ic__ix *ic__ix_const(ic__ixtab *t, int64_t k)
{
    terms x = { 0 };
    x.c0 = k;
    return intern(t, &x);
}

static const ic__ix *of_atom(ic__ixtab *t, ic__ixatom key)
{
    const ic__ixatom *a = atom_get(t, key);
    if (!a)
        return NULL;
    terms x = { 0 };
    push(&x, 1, a);
    return intern(t, &x);
}

const ic__ix *ic__ix_var(ic__ixtab *t, int var, int64_t size)
{
    ic__ixatom key = { 0 };
    key.kind = IC__IXA_VAR;
    key.var = var;
    key.hi = size > 0 ? size - 1 : 0;
    return of_atom(t, key);
}

const ic__ix *ic__ix_val(ic__ixtab *t, int instr, int stage, int64_t lo, int64_t hi)
{
    ic__ixatom key = { 0 };
    key.kind = IC__IXA_VAL;
    key.instr = instr;
    key.stage = stage;
    key.lo = lo;
    key.hi = hi;
    return of_atom(t, key);
}

const ic__ix *ic__ix_add(ic__ixtab *t, const ic__ix *a, const ic__ix *b)
{
    if (!a || !b)
        return NULL;
    terms x;
    load(&x, a);
    x.c0 += b->c0;
    for (int i = 0; i < b->n; i++)
        if (!push(&x, b->coef[i], b->atom[i])) {
            t->oom = true;
            return NULL;
        }
    return make(t, &x);
}

/* k * a + c; NULL (an earlier failure) stays NULL. */
static const ic__ix *affine(ic__ixtab *t, const ic__ix *a, int64_t k, int64_t c)
{
    if (!a)
        return NULL;
    terms x;
    load(&x, a);
    x.c0 = x.c0 * k + c;
    for (int i = 0; i < x.n; i++)
        x.coef[i] *= k;
    return make(t, &x);
}

const ic__ix *ic__ix_scale(ic__ixtab *t, const ic__ix *a, int64_t k)
{
    return affine(t, a, k, 0);
}

const ic__ix *ic__ix_addc(ic__ixtab *t, const ic__ix *a, int64_t k)
{
    return affine(t, a, 1, k);
}

/* g = gcd of k, c0 and every coefficient. */
static int64_t common_factor(const ic__ix *a, int64_t k)
{
    int64_t g = gcd(k, a->c0);
    for (int i = 0; i < a->n && g > 1; i++)
        g = gcd(g, a->coef[i]);
    return g;
}

static const ic__ix *exact_div(ic__ixtab *t, const ic__ix *a, int64_t g)
{
    terms x;
    load(&x, a);
    x.c0 /= g;
    for (int i = 0; i < x.n; i++)
        x.coef[i] /= g;
    return make(t, &x);
}

/* Splits a = k*q + r, q from the terms whose coefficients k divides, r in [.., ..]. */
static void split(ic__ixtab *t, const ic__ix *a, int64_t k, const ic__ix **q, const ic__ix **r)
{
    terms xq = { 0 }, xr = { 0 };
    xq.c0 = fdiv(a->c0, k);
    xr.c0 = fmodk(a->c0, k);
    for (int i = 0; i < a->n; i++) {
        if (a->coef[i] % k == 0)
            push(&xq, a->coef[i] / k, a->atom[i]);
        else
            push(&xr, a->coef[i], a->atom[i]);
    }
    *q = make(t, &xq);
    *r = make(t, &xr);
}

/* a = g*q + r with g a divisor of k > 1 (from a coefficient), q from the terms g divides and
 * r the rest in [0, g): then a / k = q / (k/g) and a % k = g*(q % (k/g)) + r. This is what
 * reading a reshape of a materialised buffer needs: (l + 3136*i) / 9408 with l in [0, 3136)
 * is i / 3, so that fold_divmod can undo the delinearisation. */
static bool split_low(ic__ixtab *t, const ic__ix *a, int64_t k, int64_t *g, const ic__ix **q,
                      const ic__ix **r)
{
    for (int c = 0; c < a->n; c++) {
        int64_t gc = gcd(a->coef[c], k);
        if (gc <= 1 || gc == k)
            continue;
        terms xq = { 0 }, xr = { 0 };
        xq.c0 = fdiv(a->c0, gc);
        xr.c0 = fmodk(a->c0, gc);
        for (int i = 0; i < a->n; i++) {
            if (a->coef[i] % gc == 0)
                push(&xq, a->coef[i] / gc, a->atom[i]);
            else
                push(&xr, a->coef[i], a->atom[i]);
        }
        const ic__ix *rr = make(t, &xr);
        if (!rr || rr->lo < 0 || rr->hi >= gc)
            continue;
        *g = gc;
        *q = make(t, &xq);
        *r = rr;
        return *q != NULL;
    }
    return false;
}

const ic__ix *ic__ix_div(ic__ixtab *t, const ic__ix *a, int64_t k)
{
    if (!a || k <= 0)
        return a;
    if (k == 1)
        return a;
    if (a->n == 0)
        return ic__ix_const(t, fdiv(a->c0, k));
    int64_t g = common_factor(a, k);
    if (g > 1)
        return ic__ix_div(t, exact_div(t, a, g), k / g);
    const ic__ix *q, *r;
    if (split_low(t, a, k, &g, &q, &r))
        return ic__ix_div(t, q, k / g);
    split(t, a, k, &q, &r);
    if (!q || !r)
        return NULL;
    if (fdiv(r->lo, k) == fdiv(r->hi, k))
        return ic__ix_addc(t, q, fdiv(r->lo, k));
    ic__ixatom key = { 0 };
    key.kind = IC__IXA_DIV;
    key.k = k;
    if (r->n == 1 && r->c0 == 0 && r->coef[0] == 1 && r->atom[0]->kind == IC__IXA_DIV) {
        key.e = r->atom[0]->e; /* (e / k1) / k = e / (k1 * k) */
        key.k = r->atom[0]->k * k;
    } else {
        key.e = r;
    }
    key.lo = fdiv(key.e->lo, key.k);
    key.hi = fdiv(key.e->hi, key.k);
    return ic__ix_add(t, q, of_atom(t, key));
}

const ic__ix *ic__ix_mod(ic__ixtab *t, const ic__ix *a, int64_t k)
{
    if (!a || k <= 0)
        return a;
    if (k == 1)
        return ic__ix_const(t, 0);
    if (a->n == 0)
        return ic__ix_const(t, fmodk(a->c0, k));
    int64_t g = common_factor(a, k);
    if (g > 1)
        return ic__ix_scale(t, ic__ix_mod(t, exact_div(t, a, g), k / g), g);
    const ic__ix *q, *r;
    if (split_low(t, a, k, &g, &q, &r))
        return ic__ix_add(t, ic__ix_scale(t, ic__ix_mod(t, q, k / g), g), r);
    split(t, a, k, &q, &r);
    if (!q || !r)
        return NULL;
    if (fdiv(r->lo, k) == fdiv(r->hi, k))
        return ic__ix_addc(t, r, -fdiv(r->lo, k) * k);
    ic__ixatom key = { 0 };
    key.kind = IC__IXA_MOD;
    key.k = k;
    key.e = r;
    if (r->n == 1 && r->c0 == 0 && r->coef[0] == 1 && r->atom[0]->kind == IC__IXA_MOD &&
        r->atom[0]->k % k == 0)
        key.e = r->atom[0]->e; /* (e % k1) % k = e % k when k divides k1 */
    key.lo = 0;
    key.hi = k - 1;
    return of_atom(t, key);
}

const ic__ix *ic__ix_clamp(ic__ixtab *t, const ic__ix *a, int64_t lo, int64_t hi)
{
    if (!a)
        return NULL;
    if (a->lo >= lo && a->hi <= hi)
        return a;
    if (a->hi <= lo)
        return ic__ix_const(t, lo);
    if (a->lo >= hi)
        return ic__ix_const(t, hi);
    ic__ixatom key = { 0 };
    key.kind = IC__IXA_CLAMP;
    key.e = a;
    key.lo = a->lo > lo ? a->lo : lo;
    key.hi = a->hi < hi ? a->hi : hi; /* clamping to the range is clamping to lo..hi */
    return of_atom(t, key);
}

const ic__ix *ic__ix_linear(ic__ixtab *t, int rank, const int64_t *shape, const ic__ix *const *idx)
{
    const ic__ix *e = ic__ix_const(t, 0);
    int64_t stride = 1;
    for (int i = rank - 1; i >= 0; i--) {
        if (shape[i] != 1)
            e = ic__ix_add(t, e, ic__ix_scale(t, idx[i], stride));
        stride *= shape[i];
    }
    return e;
}

void ic__ix_delinear(ic__ixtab *t, const ic__ix *e, int rank, const int64_t *shape,
                     const ic__ix **idx)
{
    int64_t stride = 1;
    bool empty = false;
    for (int i = 0; i < rank; i++)
        empty |= shape[i] == 0;
    for (int i = rank - 1; i >= 0; i--) {
        if (empty || shape[i] == 1)
            idx[i] = ic__ix_const(t, 0);
        else if (i == 0)
            idx[i] = ic__ix_div(t, e, stride);
        else
            idx[i] = ic__ix_mod(t, ic__ix_div(t, e, stride), shape[i]);
        stride *= shape[i] ? shape[i] : 1;
    }
}
