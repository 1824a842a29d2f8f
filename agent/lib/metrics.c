/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"

/* More labels than this is a cardinality problem, not a metric. */
#define METRIC_LABELS_MAX 16

/* The latency buckets Prometheus client libraries use, in seconds, widened to 1ms. */
static const double default_buckets[] = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};

struct metric_series {
        struct metric_series *next;      /* creation order, for rendering */
        struct metric_series *hash_next; /* chain in the family's hash table */
        uint64_t hash;
        char **values;                   /* n_labels copies, unescaped */
        double value;                    /* counter/gauge value; histogram sum */
        uint64_t count;                  /* histogram: observations */
        uint64_t *bucket_counts;         /* histogram: per bucket, not cumulative */
};

struct metric_family {
        enum metric_type type;
        char *name;
        char *help;
        char **label_names;
        size_t n_labels;
        double *buckets;
        size_t n_buckets;

        struct metric_series *series_first, *series_last;
        size_t n_series;
        /* Lookup by label values is a hash table per family, so the cost of a sample does
         * not grow with the number of series elsewhere (or here). */
        struct metric_series **table;
        size_t table_size;

        /* Registered by metrics_family() (for the process's life), or held by registrations.
         * Neither: retired — not rendered, no series, samples dropped. */
        bool pinned;
        unsigned holders;
};

struct metrics_registration {
        struct metrics *metrics;
        struct metric_family **families;
        size_t n_families;
        metrics_collector_fn collect;
        void *userdata;
};

struct collector {
        metrics_collector_fn fn;
        void *userdata;
};

struct metrics {
        struct metric_family **families; /* sorted by name */
        size_t n_families;
        struct collector *collectors;
        size_t n_collectors;
};

static const char *const type_names[_METRIC_TYPE_MAX] = {
        [METRIC_COUNTER] = "counter",
        [METRIC_GAUGE] = "gauge",
        [METRIC_HISTOGRAM] = "histogram",
};

static void series_free(struct metric_series *s, size_t n_labels) {
        if (!s)
                return;
        for (size_t i = 0; s->values && i < n_labels; i++)
                free(s->values[i]);
        free(s->values);
        free(s->bucket_counts);
        free(s);
}

static void family_drop_series(struct metric_family *f) {
        struct metric_series *next;

        for (struct metric_series *s = f->series_first; s; s = next) {
                next = s->next;
                series_free(s, f->n_labels);
        }
        f->series_first = f->series_last = NULL;
        f->n_series = 0;
        if (f->table)
                memset(f->table, 0, f->table_size * sizeof(*f->table));
}

static struct metric_family *family_free(struct metric_family *f) {
        if (!f)
                return NULL;
        family_drop_series(f);
        free(f->table);
        for (size_t i = 0; i < f->n_labels; i++)
                free(f->label_names[i]);
        free(f->label_names);
        free(f->buckets);
        free(f->help);
        free(f->name);
        free(f);
        return NULL;
}

int metrics_new(struct metrics **ret) {
        struct metrics *m;

        if (!ret)
                return -EINVAL;
        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        *ret = m;
        return 0;
}

struct metrics *metrics_free(struct metrics *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_families; i++)
                family_free(m->families[i]);
        free(m->families);
        free(m->collectors);
        free(m);
        return NULL;
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names, the same without ':' for label names. */
static bool name_valid(const char *s, bool colon_ok) {
        if (isempty(s))
                return false;
        for (const char *p = s; *p; p++) {
                char c = *p;
                bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                          (colon_ok && c == ':') || (p != s && c >= '0' && c <= '9');
                if (!ok)
                        return false;
        }
        return true;
}

static bool metric_name_valid(const char *name) {
        return name_valid(name, true) && strncmp(name, "pinion_", strlen("pinion_")) == 0;
}

static int label_names_check(enum metric_type type, const char *const *label_names, size_t n) {
        for (size_t i = 0; i < n; i++) {
                const char *l = label_names[i];

                /* Names starting with "__" are reserved for Prometheus itself. */
                if (!name_valid(l, false) || strncmp(l, "__", 2) == 0)
                        return -EINVAL;
                if (type == METRIC_HISTOGRAM && streq(l, "le"))
                        return -EINVAL;
                for (size_t j = 0; j < i; j++)
                        if (streq(label_names[j], l))
                                return -EINVAL;
        }
        return 0;
}

static int buckets_check(const double *buckets, size_t n) {
        for (size_t i = 0; i < n; i++) {
                if (!isfinite(buckets[i]))
                        return -EINVAL;
                if (i > 0 && buckets[i] <= buckets[i - 1])
                        return -EINVAL;
        }
        return 0;
}

static size_t strv_count(const char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

/* Re-registration must describe the same family, or the varargs of later samples would be
 * read against the wrong label list. */
static bool family_same_shape(const struct metric_family *f, const char *const *label_names,
                              size_t n_labels, const double *buckets, size_t n_buckets) {
        if (f->n_labels != n_labels)
                return false;
        for (size_t i = 0; i < n_labels; i++)
                if (!streq(f->label_names[i], label_names[i]))
                        return false;
        if (f->type != METRIC_HISTOGRAM)
                return true;
        return f->n_buckets == n_buckets && memcmp(f->buckets, buckets, n_buckets * sizeof(double)) == 0;
}

static size_t family_index(const struct metrics *m, const char *name, bool *ret_found) {
        size_t lo = 0, hi = m->n_families;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(m->families[mid]->name, name);

                if (c == 0) {
                        *ret_found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = false;
        return lo;
}

/* FNV-1a over the values, each terminated by its NUL so ("ab","c") != ("a","bc"). */
static uint64_t values_hash(const char *const *values, size_t n) {
        uint64_t h = UINT64_C(14695981039346656037);

        for (size_t i = 0; i < n; i++) {
                const unsigned char *p = (const unsigned char *) values[i];
                do {
                        h ^= *p;
                        h *= UINT64_C(1099511628211);
                } while (*p++);
        }
        return h;
}

static int family_table_grow(struct metric_family *f) {
        size_t size = f->table_size ? f->table_size * 2 : 16;
        struct metric_series **table;

        table = calloc(size, sizeof(*table));
        if (!table)
                return -ENOMEM;
        for (struct metric_series *s = f->series_first; s; s = s->next) {
                size_t b = s->hash % size;
                s->hash_next = table[b];
                table[b] = s;
        }
        free(f->table);
        f->table = table;
        f->table_size = size;
        return 0;
}

static struct metric_series *family_series_new(struct metric_family *f, const char *const *values,
                                               uint64_t hash) {
        struct metric_series *s;

        if (f->n_series + 1 > f->table_size * 3 / 4 && family_table_grow(f) < 0)
                return NULL;

        s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->hash = hash;
        if (f->n_labels > 0) {
                s->values = calloc(f->n_labels, sizeof(char *));
                if (!s->values)
                        goto oom;
                for (size_t i = 0; i < f->n_labels; i++) {
                        s->values[i] = strdup(values[i]);
                        if (!s->values[i])
                                goto oom;
                }
        }
        if (f->type == METRIC_HISTOGRAM && f->n_buckets > 0) {
                s->bucket_counts = calloc(f->n_buckets, sizeof(uint64_t));
                if (!s->bucket_counts)
                        goto oom;
        }

        if (f->series_last)
                f->series_last->next = s;
        else
                f->series_first = s;
        f->series_last = s;
        f->n_series++;
        s->hash_next = f->table[hash % f->table_size];
        f->table[hash % f->table_size] = s;
        return s;
oom:
        series_free(s, f->n_labels);
        return NULL;
}

static int family_build(enum metric_type type, const char *name, const char *help,
                        const char *const *label_names, size_t n_labels, const double *buckets,
                        size_t n_buckets, struct metric_family **ret) {
        struct metric_family *f;

        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->type = type;
        f->name = strdup(name);
        f->help = help ? strdup(help) : NULL;
        if (!f->name || (help && !f->help))
                goto oom;
        if (n_labels > 0) {
                f->label_names = calloc(n_labels, sizeof(char *));
                if (!f->label_names)
                        goto oom;
                for (size_t i = 0; i < n_labels; i++) {
                        f->label_names[i] = strdup(label_names[i]);
                        if (!f->label_names[i])
                                goto oom;
                        f->n_labels = i + 1;
                }
        }
        if (type == METRIC_HISTOGRAM && n_buckets > 0) {
                f->buckets = malloc(n_buckets * sizeof(double));
                if (!f->buckets)
                        goto oom;
                memcpy(f->buckets, buckets, n_buckets * sizeof(double));
                f->n_buckets = n_buckets;
        }
        /* A family without labels has exactly one series: export it (at zero) from the
         * start, as client libraries do, so rate() sees the first increment. */
        if (n_labels == 0 && !family_series_new(f, NULL, values_hash(NULL, 0)))
                goto oom;
        *ret = f;
        return 0;
oom:
        family_free(f);
        return -ENOMEM;
}

static bool family_live(const struct metric_family *f) {
        return f->pinned || f->holders > 0;
}

/* The family called name, made if there is none; the caller pins or holds it. */
static int family_get(struct metrics *m, enum metric_type type, const char *name, const char *help,
                      const char *const *label_names, const double *buckets, size_t n_buckets,
                      struct metric_family **ret) {
        struct metric_family *f, **grown;
        size_t n_labels, idx;
        bool found;
        int r;

        if (!m || (int) type < 0 || type >= _METRIC_TYPE_MAX || !metric_name_valid(name))
                return -EINVAL;
        n_labels = strv_count(label_names);
        if (n_labels > METRIC_LABELS_MAX)
                return -EINVAL;
        r = label_names_check(type, label_names, n_labels);
        if (r < 0)
                return r;
        if (type == METRIC_HISTOGRAM) {
                if (!buckets) {
                        buckets = default_buckets;
                        n_buckets = ELEMENTSOF(default_buckets);
                }
                r = buckets_check(buckets, n_buckets);
                if (r < 0)
                        return r;
        } else
                n_buckets = 0;

        idx = family_index(m, name, &found);
        if (found) {
                f = m->families[idx];
                if (f->type != type || !family_same_shape(f, label_names, n_labels, buckets, n_buckets))
                        return -EEXIST;
                *ret = f;
                return 0;
        }

        grown = realloc(m->families, (m->n_families + 1) * sizeof(*m->families));
        if (!grown)
                return -ENOMEM;
        m->families = grown;

        r = family_build(type, name, help, label_names, n_labels, buckets, n_buckets, &f);
        if (r < 0)
                return r;
        memmove(m->families + idx + 1, m->families + idx, (m->n_families - idx) * sizeof(*m->families));
        m->families[idx] = f;
        m->n_families++;
        *ret = f;
        return 0;
}

int metrics_family(struct metrics *m, enum metric_type type, const char *name, const char *help,
                   const char *const *label_names, const double *buckets, size_t n_buckets,
                   struct metric_family **ret) {
        struct metric_family *f;
        int r = family_get(m, type, name, help, label_names, buckets, n_buckets, &f);
        if (r < 0)
                return r;
        f->pinned = true;
        if (ret)
                *ret = f;
        return 0;
}

static bool series_matches(const struct metric_family *f, const struct metric_series *s,
                           const char *const *values) {
        for (size_t i = 0; i < f->n_labels; i++)
                if (!streq(s->values[i], values[i]))
                        return false;
        return true;
}

/* Reads exactly n_labels label values from ap and finds or creates their series. */
static int family_series_get(struct metric_family *f, va_list ap, struct metric_series **ret) {
        const char *values[METRIC_LABELS_MAX];
        struct metric_series *s;
        uint64_t hash;

        for (size_t i = 0; i < f->n_labels; i++) {
                values[i] = va_arg(ap, const char *);
                if (!values[i])
                        return -EINVAL;
        }
        hash = values_hash(values, f->n_labels);
        if (f->table)
                for (s = f->table[hash % f->table_size]; s; s = s->hash_next)
                        if (s->hash == hash && series_matches(f, s, values)) {
                                *ret = s;
                                return 0;
                        }
        s = family_series_new(f, values, hash);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int metric_add(struct metric_family *f, double value, ...) {
        struct metric_series *s;
        va_list ap;
        int r;

        if (!f || f->type == METRIC_HISTOGRAM)
                return -EINVAL;
        /* Counters only go up; a negative increment is a bug in the caller. */
        if (f->type == METRIC_COUNTER && !(value >= 0))
                return -EINVAL;
        if (!family_live(f))
                return 0;
        va_start(ap, value);
        r = family_series_get(f, ap, &s);
        va_end(ap);
        if (r < 0)
                return r;
        s->value += value;
        return 0;
}

int metric_set(struct metric_family *f, double value, ...) {
        struct metric_series *s;
        va_list ap;
        int r;

        if (!f || f->type != METRIC_GAUGE)
                return -EINVAL;
        if (!family_live(f))
                return 0;
        va_start(ap, value);
        r = family_series_get(f, ap, &s);
        va_end(ap);
        if (r < 0)
                return r;
        s->value = value;
        return 0;
}

int metric_touch(struct metric_family *f, ...) {
        struct metric_series *s;
        va_list ap;
        int r;

        if (!f)
                return -EINVAL;
        if (!family_live(f))
                return 0;
        va_start(ap, f);
        r = family_series_get(f, ap, &s);
        va_end(ap);
        return r;
}

int metric_observe(struct metric_family *f, double value, ...) {
        struct metric_series *s;
        va_list ap;
        int r;

        if (!f || f->type != METRIC_HISTOGRAM)
                return -EINVAL;
        if (!family_live(f))
                return 0;
        va_start(ap, value);
        r = family_series_get(f, ap, &s);
        va_end(ap);
        if (r < 0)
                return r;
        /* Only the first matching bucket is counted; render makes them cumulative. A value
         * above every bound (or NaN) lands in +Inf, which is the count. */
        for (size_t i = 0; i < f->n_buckets; i++)
                if (value <= f->buckets[i]) {
                        s->bucket_counts[i]++;
                        break;
                }
        s->count++;
        s->value += value;
        return 0;
}

void metric_family_reset(struct metric_family *f) {
        if (!f)
                return;
        family_drop_series(f);
}

int metrics_add_collector(struct metrics *m, metrics_collector_fn fn, void *userdata) {
        struct collector *grown;

        if (!m || !fn)
                return -EINVAL;
        grown = realloc(m->collectors, (m->n_collectors + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        m->collectors = grown;
        m->collectors[m->n_collectors++] = (struct collector) { fn, userdata };
        return 0;
}

void metrics_remove_collector(struct metrics *m, metrics_collector_fn fn, void *userdata) {
        if (!m)
                return;
        for (size_t i = 0; i < m->n_collectors; i++)
                if (m->collectors[i].fn == fn && m->collectors[i].userdata == userdata) {
                        memmove(m->collectors + i, m->collectors + i + 1,
                                (m->n_collectors - i - 1) * sizeof(*m->collectors));
                        m->n_collectors--;
                        return;
                }
}

/* Prometheus spells the specials +Inf, -Inf and NaN. Integers print without exponent or
 * decimal point; anything else in the shortest form that reads back to the same double. */
static void write_value(FILE *f, double v) {
        char buf[64];

        if (isnan(v)) {
                fputs("NaN", f);
                return;
        }
        if (isinf(v)) {
                fputs(v > 0 ? "+Inf" : "-Inf", f);
                return;
        }
        if (v == trunc(v) && fabs(v) < 9007199254740992.0) { /* 2^53: every integer exact */
                fprintf(f, "%" PRId64, (int64_t) v);
                return;
        }
        for (int precision = 15; precision <= 17; precision++) {
                snprintf(buf, sizeof(buf), "%.*g", precision, v);
                if (strtod(buf, NULL) == v)
                        break;
        }
        fputs(buf, f);
}

static void write_escaped(FILE *f, const char *s, bool quote) {
        for (const char *p = s; *p; p++)
                switch (*p) {
                case '\\':
                        fputs("\\\\", f);
                        break;
                case '\n':
                        fputs("\\n", f);
                        break;
                case '"':
                        fputs(quote ? "\\\"" : "\"", f);
                        break;
                default:
                        fputc(*p, f);
                }
}

/* Writes {l1="v1",...} plus an optional le="..." pair; nothing when there are no labels. */
static void write_labels(FILE *out, const struct metric_family *f, const struct metric_series *s,
                         const double *le) {
        bool first = true;

        if (f->n_labels == 0 && !le)
                return;
        fputc('{', out);
        for (size_t i = 0; i < f->n_labels; i++) {
                fprintf(out, "%s%s=\"", first ? "" : ",", f->label_names[i]);
                write_escaped(out, s->values[i], true);
                fputc('"', out);
                first = false;
        }
        if (le) {
                fprintf(out, "%sle=\"", first ? "" : ",");
                write_value(out, *le);
                fputc('"', out);
        }
        fputc('}', out);
}

static void write_histogram_series(FILE *out, const struct metric_family *f,
                                   const struct metric_series *s) {
        static const double inf = INFINITY;
        uint64_t cumulative = 0;

        for (size_t i = 0; i < f->n_buckets; i++) {
                cumulative += s->bucket_counts[i];
                fprintf(out, "%s_bucket", f->name);
                write_labels(out, f, s, &f->buckets[i]);
                fprintf(out, " %" PRIu64 "\n", cumulative);
        }
        fprintf(out, "%s_bucket", f->name);
        write_labels(out, f, s, &inf);
        fprintf(out, " %" PRIu64 "\n", s->count);

        fprintf(out, "%s_sum", f->name);
        write_labels(out, f, s, NULL);
        fputc(' ', out);
        write_value(out, s->value);
        fputc('\n', out);

        fprintf(out, "%s_count", f->name);
        write_labels(out, f, s, NULL);
        fprintf(out, " %" PRIu64 "\n", s->count);
}

static void write_family(FILE *out, const struct metric_family *f) {
        if (f->help) {
                fprintf(out, "# HELP %s ", f->name);
                write_escaped(out, f->help, false);
                fputc('\n', out);
        }
        fprintf(out, "# TYPE %s %s\n", f->name, type_names[f->type]);

        for (const struct metric_series *s = f->series_first; s; s = s->next) {
                if (f->type == METRIC_HISTOGRAM) {
                        write_histogram_series(out, f, s);
                        continue;
                }
                fputs(f->name, out);
                write_labels(out, f, s, NULL);
                fputc(' ', out);
                write_value(out, s->value);
                fputc('\n', out);
        }
}

static void metrics_collect(struct metrics *m) {
        /* Index loop: a collector may remove itself while it runs; then the next one has
         * moved into its slot and must not be skipped. */
        for (size_t i = 0; i < m->n_collectors;) {
                struct collector c = m->collectors[i];

                c.fn(m, c.userdata);
                if (i < m->n_collectors && m->collectors[i].fn == c.fn &&
                    m->collectors[i].userdata == c.userdata)
                        i++;
        }
}

int metrics_render(struct metrics *m, char **ret_text, size_t *ret_size) {
        char *text = NULL;
        size_t size = 0;
        FILE *out;

        if (!m || !ret_text)
                return -EINVAL;

        metrics_collect(m);

        out = open_memstream(&text, &size);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_families; i++)
                if (family_live(m->families[i]))
                        write_family(out, m->families[i]);
        if (fflush(out) != 0 || ferror(out)) {
                fclose(out);
                free(text);
                return -ENOMEM;
        }
        if (fclose(out) != 0) {
                free(text);
                return -ENOMEM;
        }
        *ret_text = text;
        if (ret_size)
                *ret_size = size;
        return 0;
}

int metrics_families(struct metrics *m, const struct metric_def *defs, size_t n) {
        for (size_t i = 0; i < n; i++) {
                int r = metrics_family(m, defs[i].type, defs[i].name, defs[i].help, defs[i].labels, defs[i].buckets,
                                       defs[i].n_buckets, defs[i].f);
                if (r < 0)
                        return r;
        }
        return 0;
}

struct metrics_registration *metrics_registration_free(struct metrics_registration *reg) {
        if (!reg)
                return NULL;
        for (size_t i = 0; i < reg->n_families; i++) {
                struct metric_family *f = reg->families[i];
                /* Retired, not freed: a late sample through a pointer someone kept is dropped,
                 * and registering the name again brings the same family back, empty. */
                if (--f->holders == 0 && !f->pinned)
                        family_drop_series(f);
        }
        if (reg->collect)
                metrics_remove_collector(reg->metrics, reg->collect, reg->userdata);
        free(reg->families);
        free(reg);
        return NULL;
}

int metrics_register(struct metrics *m, const struct metric_def *defs, size_t n, metrics_collector_fn collect,
                     void *userdata, struct metrics_registration **ret) {
        _cleanup_(metrics_registration_freep) struct metrics_registration *reg = NULL;
        int r;

        if (!m || (!defs && n > 0) || !ret)
                return -EINVAL;
        reg = calloc(1, sizeof(*reg));
        if (!reg)
                return -ENOMEM;
        reg->metrics = m;
        reg->families = calloc(MAX(n, (size_t) 1), sizeof(*reg->families));
        if (!reg->families)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                struct metric_family *f;
                r = family_get(m, defs[i].type, defs[i].name, defs[i].help, defs[i].labels, defs[i].buckets,
                               defs[i].n_buckets, &f);
                if (r < 0)
                        return r;
                /* Brought back from retirement: as new, with a label-less family's one series. */
                if (!family_live(f) && f->n_labels == 0 && f->n_series == 0 &&
                    !family_series_new(f, NULL, values_hash(NULL, 0)))
                        return -ENOMEM;
                f->holders++;
                reg->families[reg->n_families++] = f;
                *defs[i].f = f;
        }
        if (collect) {
                r = metrics_add_collector(m, collect, userdata);
                if (r < 0)
                        return r;
                reg->collect = collect;
                reg->userdata = userdata;
        }
        *ret = TAKE_PTR(reg);
        return 0;
}

size_t metrics_family_count(const struct metrics *m) {
        size_t n = 0;
        for (size_t i = 0; m && i < m->n_families; i++)
                n += family_live(m->families[i]);
        return n;
}

size_t metrics_collector_count(const struct metrics *m) {
        return m ? m->n_collectors : 0;
}
