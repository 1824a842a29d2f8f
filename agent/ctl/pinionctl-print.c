/* SPDX-License-Identifier: MIT */
/* pinionctl's human output: tables and "label: value" lines from the agent's JSON. */

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "pinionctl-print.h"
#include "strv.h"

int pinionctl_print_oom(void) {
        fprintf(stderr, "pinionctl: out of memory\n");
        return EXIT_AGENT;
}

/* ---- small formatters ---- */

static void format_uptime(char *buf, size_t n, double seconds) {
        uint64_t s = seconds > 0 ? (uint64_t) seconds : 0;
        uint64_t d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60;

        if (d > 0)
                snprintf(buf, n, "%" PRIu64 "d %" PRIu64 "h %" PRIu64 "m", d, h, m);
        else if (h > 0)
                snprintf(buf, n, "%" PRIu64 "h %" PRIu64 "m", h, m);
        else if (m > 0)
                snprintf(buf, n, "%" PRIu64 "m %" PRIu64 "s", m, s % 60);
        else
                snprintf(buf, n, "%" PRIu64 "s", s);
}

/* C1 as UTF-8 is U+0080..U+009F. */
void pinionctl_print_sanitize(char *s) {
        for (unsigned char *p = (unsigned char *) s; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        *p = ' ';
                else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
                        p[0] = p[1] = ' ';
}

/* ---- JSON values as text ---- */

static bool json_is_scalar(const cJSON *v) {
        return cJSON_IsString(v) || cJSON_IsNumber(v) || cJSON_IsBool(v) || cJSON_IsNull(v);
}

static bool json_is_scalar_array(const cJSON *v) {
        const cJSON *i;

        if (!cJSON_IsArray(v))
                return false;
        cJSON_ArrayForEach(i, v)
                if (!json_is_scalar(i))
                        return false;
        return true;
}

static bool json_is_object_array(const cJSON *v) {
        const cJSON *i;

        if (!cJSON_IsArray(v) || !v->child)
                return false;
        cJSON_ArrayForEach(i, v)
                if (!cJSON_IsObject(i))
                        return false;
        return true;
}

static char *scalar_to_text(const cJSON *v) {
        char buf[64];

        if (cJSON_IsString(v)) {
                if (strstr(v->valuestring, "-----BEGIN "))
                        snprintf(buf, sizeof buf, "(PEM, %zu bytes; see --json)", strlen(v->valuestring));
                else
                        return strdup(v->valuestring);
        } else if (cJSON_IsNumber(v)) {
                double d = v->valuedouble;
                if (d == (double) (int64_t) d && d > -1e15 && d < 1e15)
                        snprintf(buf, sizeof buf, "%" PRId64, (int64_t) d);
                else
                        snprintf(buf, sizeof buf, "%.3f", d);
        } else if (cJSON_IsBool(v))
                snprintf(buf, sizeof buf, "%s", cJSON_IsTrue(v) ? "yes" : "no");
        else
                snprintf(buf, sizeof buf, "-");
        return strdup(buf);
}

/* Any value as one line: scalars as themselves, arrays of scalars comma-joined, the rest as
 * compact JSON, nothing as "-". Returns NULL on OOM. */
static char *json_to_text(const cJSON *v) {
        _cleanup_free_ char *joined = NULL;
        size_t len = 0;
        const cJSON *i;

        if (!v)
                return strdup("-");
        if (json_is_scalar(v))
                return scalar_to_text(v);
        if (!json_is_scalar_array(v))
                return cJSON_PrintUnformatted(v);
        if (!v->child)
                return strdup("-");
        cJSON_ArrayForEach(i, v) {
                _cleanup_free_ char *t = scalar_to_text(i);
                char *n;

                if (!t)
                        return NULL;
                n = realloc(joined, len + strlen(t) + 2);
                if (!n)
                        return NULL;
                joined = n;
                len += (size_t) sprintf(joined + len, "%s%s", len > 0 ? "," : "", t);
        }
        return TAKE_PTR(joined);
}

const cJSON *pinionctl_print_json_get(const cJSON *o, const char *key) {
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* The string value of key, or NULL if it is missing or not a string. */
static const char *json_str(const cJSON *o, const char *key) {
        const cJSON *v = pinionctl_print_json_get(o, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The number value of key, or 0. */
static double json_num(const cJSON *o, const char *key) {
        const cJSON *v = pinionctl_print_json_get(o, key);

        return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *strna(const char *s) {
        return isempty(s) ? "-" : s;
}

/* "1 error", "2 errors": the noun for a count. */
static const char *plural(double n, const char *one, const char *many) {
        return n == 1 ? one : many;
}

/* ---- tables ---- */

struct table {
        size_t n_columns;
        char **cells; /* row-major; the first row is the header */
        size_t n_cells;
};

static void table_done(struct table *t) {
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        free(t->cells);
        t->cells = NULL;
        t->n_cells = 0;
}

/* Takes ownership of cell (NULL or empty → "-"). */
static int table_add_take(struct table *t, char *cell) {
        char **n;

        if (isempty(cell)) {
                free(cell);
                cell = strdup("-");
                if (!cell)
                        return -ENOMEM;
        }
        n = realloc(t->cells, (t->n_cells + 1) * sizeof(char *));
        if (!n) {
                free(cell);
                return -ENOMEM;
        }
        pinionctl_print_sanitize(cell);
        t->cells = n;
        t->cells[t->n_cells++] = cell;
        return 0;
}

static int table_add(struct table *t, const char *cell) {
        char *c = strdup(isempty(cell) ? "-" : cell);

        return c ? table_add_take(t, c) : -ENOMEM;
}

static int table_add_json(struct table *t, const cJSON *v) {
        char *c = json_to_text(v);

        return c ? table_add_take(t, c) : -ENOMEM;
}

static int table_print(const struct table *t) {
        _cleanup_free_ size_t *widths = calloc(t->n_columns, sizeof(size_t));

        if (!widths)
                return -ENOMEM;
        for (size_t i = 0; i < t->n_cells; i++)
                widths[i % t->n_columns] = MAX(widths[i % t->n_columns], strlen(t->cells[i]));

        for (size_t i = 0; i < t->n_cells; i++) {
                size_t col = i % t->n_columns;

                if (col + 1 == t->n_columns)
                        printf("%s\n", t->cells[i]);
                else
                        printf("%-*s  ", (int) widths[col], t->cells[i]);
        }
        return 0;
}

/* ---- printers ---- */

int pinionctl_print_json(const cJSON *root) {
        _cleanup_free_ char *s = cJSON_Print(root);

        if (!s)
                return pinionctl_print_oom();
        puts(s);
        return EXIT_OK;
}

static void print_field(const char *label, const char *value) {
        _cleanup_free_ char *v = strdup(isempty(value) ? "-" : value);

        if (v)
                pinionctl_print_sanitize(v);
        /* A label longer than the column still gets its space. */
        printf("%-10s %s\n", label, v ? v : "-");
}

static void print_field_json(const char *label, const cJSON *value) {
        _cleanup_free_ char *v = json_to_text(value);

        print_field(label, v);
}

/* Scalar fields of an object as "key: value" lines, nested objects flattened as "a.b".
 * Returns the number of lines printed. */
static size_t print_object_fields(const cJSON *o, const char *prefix) {
        size_t n = 0;
        const cJSON *i;

        cJSON_ArrayForEach(i, o) {
                _cleanup_free_ char *key = NULL;

                if (json_is_object_array(i))
                        continue; /* printed as tables */
                if (asprintf(&key, "%s%s", prefix, i->string) < 0)
                        return n;
                if (cJSON_IsObject(i) && i->child) {
                        _cleanup_free_ char *p = NULL;
                        if (asprintf(&p, "%s.", key) >= 0)
                                n += print_object_fields(i, p);
                } else {
                        _cleanup_free_ char *v = json_to_text(i);
                        if (v)
                                pinionctl_print_sanitize(v);
                        pinionctl_print_sanitize(key);
                        printf("%s: %s\n", key, v ? v : "-");
                        n++;
                }
        }
        return n;
}

/* An array of objects as a table whose columns are their non-object fields, in first-seen order. */
static int print_object_array(const cJSON *array) {
        _cleanup_(table_done) struct table t = {};
        _cleanup_strv_free_ char **cols = NULL;
        const cJSON *item, *f;

        cJSON_ArrayForEach(item, array)
                cJSON_ArrayForEach(f, item) {
                        if (cJSON_IsObject(f) || json_is_object_array(f) || strv_contains(cols, f->string))
                                continue;
                        if (strv_extend(&cols, f->string) < 0)
                                return pinionctl_print_oom();
                }
        t.n_columns = strv_length(cols);
        if (t.n_columns == 0)
                return EXIT_OK;

        STRV_FOREACH(c, cols) {
                _cleanup_free_ char *h = strdup(*c);
                if (!h)
                        return pinionctl_print_oom();
                for (char *p = h; *p; p++)
                        *p = *p == '_' ? ' ' : (char) toupper((unsigned char) *p);
                if (table_add(&t, h) < 0)
                        return pinionctl_print_oom();
        }
        cJSON_ArrayForEach(item, array)
                STRV_FOREACH(c, cols)
                        if (table_add_json(&t, pinionctl_print_json_get(item, *c)) < 0)
                                return pinionctl_print_oom();
        if (table_print(&t) < 0)
                return pinionctl_print_oom();
        return EXIT_OK;
}

int pinionctl_print_generic(const cJSON *root) {
        const cJSON *i;
        size_t n;
        int k;

        if (json_is_object_array(root))
                return print_object_array(root);
        if (!cJSON_IsObject(root))
                return pinionctl_print_json(root);

        n = print_object_fields(root, "");
        cJSON_ArrayForEach(i, root) {
                if (!json_is_object_array(i))
                        continue;
                if (n++ > 0)
                        printf("\n");
                k = print_object_array(i);
                if (k != EXIT_OK)
                        return k;
        }
        return EXIT_OK;
}

/* The header row and one row per object of array, taking the fields named by keys. */
static int print_table(const char *const *header, const char *const *keys, size_t n, const cJSON *array) {
        _cleanup_(table_done) struct table t = { .n_columns = n };
        const cJSON *item;

        for (size_t i = 0; i < n; i++)
                if (table_add(&t, header[i]) < 0)
                        return pinionctl_print_oom();
        cJSON_ArrayForEach(item, array)
                for (size_t i = 0; i < n; i++)
                        if (table_add_json(&t, pinionctl_print_json_get(item, keys[i])) < 0)
                                return pinionctl_print_oom();
        if (table_print(&t) < 0)
                return pinionctl_print_oom();
        return EXIT_OK;
}

int pinionctl_print_health(const cJSON *root) {
        static const char *const header[] = { "MODULE", "STATE", "REASON" };
        static const char *const keys[] = { "module", "state", "reason" };
        const cJSON *failing = pinionctl_print_json_get(root, "failing");
        int k;

        if (streq_ptr(json_str(root, "status"), "ok") && cJSON_GetArraySize(failing) == 0) {
                printf("ok\n");
                return EXIT_OK;
        }
        printf("failing\n\n");
        k = print_table(header, keys, ELEMENTSOF(header), failing);
        return k != EXIT_OK ? k : EXIT_AGENT;
}

static void print_status_header(const cJSON *root) {
        const cJSON *config = pinionctl_print_json_get(root, "config"), *pods = pinionctl_print_json_get(root, "pods");
        char buf[512], up[64];

        print_field_json("version:", pinionctl_print_json_get(root, "version"));
        print_field_json("node:", pinionctl_print_json_get(root, "node"));
        format_uptime(up, sizeof up, json_num(root, "uptime_seconds"));
        snprintf(buf, sizeof buf, "%s (since %s)", up, strna(json_str(root, "started")));
        print_field("uptime:", buf);
        print_field_json("ready:", pinionctl_print_json_get(root, "ready"));
        if (cJSON_IsObject(config)) {
                double reloads = json_num(config, "reloads");
                snprintf(buf, sizeof buf, "%s (%.0f %s, %.0f failed)", strna(json_str(config, "file")), reloads,
                         plural(reloads, "reload", "reloads"), json_num(config, "reload_failures"));
                print_field("config:", buf);
                if (json_str(config, "last_reload_error"))
                        print_field("  error:", json_str(config, "last_reload_error"));
        }
        if (cJSON_IsObject(pods)) {
                const cJSON *errors = pinionctl_print_json_get(pods, "errors"), *e;
                int n = cJSON_GetArraySize(errors);

                snprintf(buf, sizeof buf, "%.0f (pods-dir %s, %d %s)", json_num(pods, "count"),
                         strna(json_str(pods, "pods_dir")), n, plural(n, "error", "errors"));
                print_field("pods:", buf);
                /* Each names its file and why it was skipped ("PATH: reason"). */
                cJSON_ArrayForEach(e, errors)
                        print_field_json("  error:", e);
        }
}

/* podnet's routes between nodes ([network] routing), when the module reports them: the mode,
 * the routes per family, and every peer skipped or in conflict with why. */
static int print_status_routing(const cJSON *root) {
        static const char *const header[] = { "NODE", "ADDRESS", "SKIPPED BECAUSE" };
        static const char *const keys[] = { "node", "address", "reason" };
        const cJSON *module, *routing = NULL;
        char buf[256];

        cJSON_ArrayForEach(module, pinionctl_print_json_get(root, "modules"))
                if (streq_ptr(json_str(module, "name"), "podnet"))
                        routing = pinionctl_print_json_get(pinionctl_print_json_get(module, "details"), "routing");
        if (!cJSON_IsObject(routing))
                return EXIT_OK;
        const cJSON *routes = pinionctl_print_json_get(routing, "routes");
        const cJSON *skipped = pinionctl_print_json_get(routing, "skipped");
        const cJSON *conflicts = pinionctl_print_json_get(routing, "conflicts");
        printf("\n");
        double n6 = json_num(routes, "ipv6");
        int n_skipped = cJSON_GetArraySize(skipped), n_conflicts = cJSON_GetArraySize(conflicts);
        snprintf(buf, sizeof buf, "%s (%.0f IPv4 and %.0f IPv6 %s to other nodes, %d %s skipped, %d %s)",
                 strna(json_str(routing, "mode")), json_num(routes, "ipv4"), n6, plural(n6, "route", "routes"),
                 n_skipped, plural(n_skipped, "peer", "peers"), n_conflicts, plural(n_conflicts, "conflict", "conflicts"));
        print_field("routing:", buf);
        if (json_str(routing, "hint"))
                print_field("  hint:", json_str(routing, "hint"));
        if (cJSON_GetArraySize(skipped) == 0)
                return EXIT_OK;
        printf("\n");
        return print_table(header, keys, ELEMENTSOF(header), skipped);
}

/* zkreg's drain, when the node is drained: it outlives restarts, so say it where people look. */
static void print_status_drain(const cJSON *root) {
        const cJSON *module, *details = NULL;
        char buf[256];

        cJSON_ArrayForEach(module, pinionctl_print_json_get(root, "modules"))
                if (streq_ptr(json_str(module, "name"), "zkreg"))
                        details = pinionctl_print_json_get(module, "details");
        if (!cJSON_IsTrue(pinionctl_print_json_get(details, "drained")))
                return;
        printf("\n");
        snprintf(buf, sizeof buf, "since %s: registering nothing until `pinionctl undrain`",
                 strna(json_str(details, "drained_since")));
        print_field("drained:", buf);
        if (json_str(details, "drain_error"))
                print_field("  error:", json_str(details, "drain_error"));
}

int pinionctl_print_status(const cJSON *root) {
        static const char *const header[] = { "MODULE", "STATE", "SINCE", "REASON" };
        static const char *const keys[] = { "name", "state", "since", "reason" };

        print_status_header(root);
        printf("\n");
        int k = print_table(header, keys, ELEMENTSOF(header), pinionctl_print_json_get(root, "modules"));
        if (k == EXIT_OK)
                print_status_drain(root);
        return k != EXIT_OK ? k : print_status_routing(root);
}

int pinionctl_print_registrations(const cJSON *root) {
        static const char *const header[] = { "POD", "STATE", "ENDPOINT", "ZNODE", "LAST CHANGE", "LAST ERROR" };
        static const char *const keys[] = { "pod", "state", "endpoint", "znode", "last_change", "last_error" };

        print_field_json("session:", pinionctl_print_json_get(root, "session"));
        print_field_json("session id:", pinionctl_print_json_get(root, "session_id"));
        print_field_json("drained:", pinionctl_print_json_get(root, "drained"));
        if (json_str(root, "drained_since"))
                print_field("  since:", json_str(root, "drained_since"));
        if (json_str(root, "drain_error"))
                print_field("  error:", json_str(root, "drain_error"));
        printf("\n");
        return print_table(header, keys, ELEMENTSOF(header), pinionctl_print_json_get(root, "registrations"));
}

int pinionctl_print_drain(const cJSON *root) {
        const cJSON *n = pinionctl_print_json_get(root, "stopping");

        if (cJSON_IsNumber(n))
                printf("%.0f %s marked STOPPING; removed after %.0fms; no new registrations until undrain\n",
                       n->valuedouble, plural(n->valuedouble, "registration", "registrations"),
                       json_num(root, "drain_delay_ms"));
        else
                printf("undrained: ready pods are registered again\n");
        return EXIT_OK;
}

int pinionctl_print_pods(const cJSON *root) {
        static const char *const header[] = { "NAMESPACE", "NAME", "READY", "PHASE", "IP", "SOURCE" };
        static const char *const keys[] = { "namespace", "name", "ready", "phase", "ips", "source" };

        return print_table(header, keys, ELEMENTSOF(header), pinionctl_print_json_get(root, "pods"));
}

int pinionctl_print_pod(const cJSON *pod) {
        static const struct {
                const char *label, *key;
        } fields[] = {
                { "namespace:", "namespace" }, { "name:", "name" },      { "uid:", "uid" },
                { "node:", "node" },           { "phase:", "phase" },    { "ready:", "ready" },
                { "ips:", "ips" },             { "hostnet:", "hostNetwork" },
                { "account:", "serviceAccount" }, { "source:", "source" },
        };
        static const char *const header[] = { "PORT", "NUMBER", "PROTOCOL" };
        static const char *const keys[] = { "name", "port", "protocol" };
        const cJSON *i;

        for (size_t k = 0; k < ELEMENTSOF(fields); k++)
                print_field_json(fields[k].label, pinionctl_print_json_get(pod, fields[k].key));
        cJSON_ArrayForEach(i, pinionctl_print_json_get(pod, "conditions")) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "%s=%s", i->string, cJSON_IsTrue(i) ? "True" : "False") < 0)
                        return pinionctl_print_oom();
                print_field("cond:", line);
        }
        cJSON_ArrayForEach(i, pinionctl_print_json_get(pod, "annotations")) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "%s=%s", i->string, strna(cJSON_IsString(i) ? i->valuestring : NULL)) < 0)
                        return pinionctl_print_oom();
                print_field("annot:", line);
        }
        if (cJSON_GetArraySize(pinionctl_print_json_get(pod, "ports")) == 0)
                return EXIT_OK;
        printf("\n");
        return print_table(header, keys, ELEMENTSOF(header), pinionctl_print_json_get(pod, "ports"));
}

/* ---- reclaim ---- */

/* Bytes as "48.0M" (binary units, like the config's sizes); "-" for null. */
static char *format_bytes_json(const cJSON *v) {
        static const char units[] = "KMGTP";
        char *s = NULL;
        if (!cJSON_IsNumber(v))
                return strdup("-");
        double b = v->valuedouble;
        int u = -1;
        while (b >= 1024 && u < (int) sizeof(units) - 2) {
                b /= 1024;
                u++;
        }
        if (u < 0 ? asprintf(&s, "%.0f", b) < 0 : asprintf(&s, "%.1f%c", b, units[u]) < 0)
                return NULL;
        return s;
}

/* "v2" (unified) or "v1", not a bare number that reads as a count; "-" when no hierarchy was found. */
static void print_cgroup_version(const cJSON *v) {
        char buf[32];

        if (cJSON_IsNumber(v))
                snprintf(buf, sizeof buf, "v%.0f", v->valuedouble);
        else
                snprintf(buf, sizeof buf, "-");
        print_field("cgroup:", buf);
}

int pinionctl_print_reclaim(const cJSON *root) {
        static const char *const header[] = { "NAME", "CGROUP", "STATE", "LIMIT", "USAGE", "FILE", "ANON",
                                              "RECLAIMS", "RECLAIMED", "LAST REACTION", "REASON" };
        static const char *const bytes[] = { "limit", "usage", "file", "anon" };
        _cleanup_(table_done) struct table t = { .n_columns = ELEMENTSOF(header) };
        const cJSON *item;

        print_field_json("state:", pinionctl_print_json_get(root, "state"));
        if (json_str(root, "reason"))
                print_field_json("reason:", pinionctl_print_json_get(root, "reason"));
        print_cgroup_version(pinionctl_print_json_get(root, "cgroup_version"));
        cJSON_ArrayForEach(item, pinionctl_print_json_get(root, "pod_errors"))
                print_field_json("pod error:", item);
        printf("\n");
        for (size_t i = 0; i < ELEMENTSOF(header); i++)
                if (table_add(&t, header[i]) < 0)
                        return pinionctl_print_oom();
        cJSON_ArrayForEach(item, pinionctl_print_json_get(root, "targets")) {
                char *cell;
                if (table_add_json(&t, pinionctl_print_json_get(item, "name")) < 0 || table_add_json(&t, pinionctl_print_json_get(item, "cgroup")) < 0 ||
                    table_add_json(&t, pinionctl_print_json_get(item, "state")) < 0)
                        return pinionctl_print_oom();
                for (size_t i = 0; i < ELEMENTSOF(bytes); i++)
                        if (!(cell = format_bytes_json(pinionctl_print_json_get(item, bytes[i]))) || table_add_take(&t, cell) < 0)
                                return pinionctl_print_oom();
                if (table_add_json(&t, pinionctl_print_json_get(item, "reclaims")) < 0 ||
                    !(cell = format_bytes_json(pinionctl_print_json_get(item, "bytes_reclaimed"))) || table_add_take(&t, cell) < 0)
                        return pinionctl_print_oom();
                const cJSON *r = pinionctl_print_json_get(item, "last_reaction_seconds");
                if (cJSON_IsNumber(r) ? asprintf(&cell, "%.1fms", r->valuedouble * 1000) < 0 : !(cell = strdup("-")))
                        return pinionctl_print_oom();
                if (table_add_take(&t, cell) < 0 || table_add_json(&t, pinionctl_print_json_get(item, "reason")) < 0)
                        return pinionctl_print_oom();
        }
        if (table_print(&t) < 0)
                return pinionctl_print_oom();
        return EXIT_OK;
}

int pinionctl_print_identity(const cJSON *root) {
        /* A pod's own identity (never the key: that is for --json and the pod's own use). */
        if (pinionctl_print_json_get(root, "private_key")) {
                static const struct {
                        const char *label, *key;
                } fields[] = {
                        { "id:", "id" }, { "subject:", "subject" }, { "sans:", "sans" },
                        { "serial:", "serial" }, { "expires:", "not_after" }, { "generation:", "generation" },
                };
                for (size_t k = 0; k < ELEMENTSOF(fields); k++)
                        print_field_json(fields[k].label, pinionctl_print_json_get(root, fields[k].key));
                return EXIT_OK;
        }
        /* Root: the node certificate, then every workload certificate. */
        static const struct {
                const char *label, *key;
        } node[] = {
                { "subject:", "subject" }, { "sans:", "sans" }, { "state:", "state" }, { "serial:", "serial" },
                { "expires:", "notAfter" }, { "renews:", "rotateAt" }, { "error:", "lastError" }, { "cert:", "certFile" },
        };
        static const char *const header[] = { "NAMESPACE", "NAME", "STATE", "ID", "SANS", "EXPIRES", "ERROR" };
        static const char *const keys[] = { "namespace", "name", "state", "id", "sans", "notAfter", "lastError" };
        const cJSON *w = pinionctl_print_json_get(root, "workloads");

        print_field_json("trust:", pinionctl_print_json_get(root, "trustDomain"));
        printf("node certificate\n");
        for (size_t k = 0; k < ELEMENTSOF(node); k++)
                print_field_json(node[k].label, pinionctl_print_json_get(pinionctl_print_json_get(root, "node"), node[k].key));
        if (pinionctl_print_json_get(root, "nodeCA")) {
                printf("node CA (signs workload certificates)\n");
                for (size_t k = 0; k < ELEMENTSOF(node); k++)
                        print_field_json(node[k].label, pinionctl_print_json_get(pinionctl_print_json_get(root, "nodeCA"), node[k].key));
        }
        printf("\nworkload certificates: %d\n", cJSON_GetArraySize(w));
        if (cJSON_GetArraySize(w) == 0)
                return EXIT_OK;
        return print_table(header, keys, ELEMENTSOF(header), w);
}

int pinionctl_print_configs(const cJSON *root) {
        static const char *const header[] = { "NAME", "STATE", "PRESENT", "VERSION", "FILES", "PUBLISHED", "LAST ERROR" };
        static const char *const keys[] = { "name", "state", "present", "version", "files", "published", "last_error" };
        static const char *const pod_header[] = { "POD", "CONFIGS", "READY", "REASON" };
        static const char *const pod_keys[] = { "pod", "configs", "ready", "reason" };
        int k;

        k = print_table(header, keys, ELEMENTSOF(header), pinionctl_print_json_get(root, "configs"));
        if (k != EXIT_OK || cJSON_GetArraySize(pinionctl_print_json_get(root, "pods")) == 0)
                return k;
        printf("\n");
        return print_table(pod_header, pod_keys, ELEMENTSOF(pod_header), pinionctl_print_json_get(root, "pods"));
}

/* ---- names for the shell's completion ---- */

static bool is_shell_word(const char *s) {
        if (isempty(s))
                return false;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (*p <= ' ' || *p == 0x7f || strchr("\"'\\$`;&|<>()*?[]{}!#~", *p))
                        return false;
        return true;
}

int pinionctl_print_pod_names(const cJSON *root) {
        const cJSON *pod;

        cJSON_ArrayForEach(pod, pinionctl_print_json_get(root, "pods")) {
                const char *ns = json_str(pod, "namespace"), *name = json_str(pod, "name");
                if (is_shell_word(ns) && is_shell_word(name))
                        printf("%s/%s\n", ns, name);
        }
        return EXIT_OK;
}

int pinionctl_print_config_names(const cJSON *root) {
        const cJSON *config;

        cJSON_ArrayForEach(config, pinionctl_print_json_get(root, "configs")) {
                const char *name = json_str(config, "name");
                if (is_shell_word(name))
                        printf("%s\n", name);
        }
        return EXIT_OK;
}
