/* SPDX-License-Identifier: MIT */
/* pinionctl: ask the local piniond over its Unix socket and print the answer for people (tables)
 * or scripts (--json). Exit status: 0 ok, 1 failure reported by the agent, 2 usage error,
 * 3 agent unreachable. A CLI blocks, so this is plain libcurl easy + cJSON. */

#include <cJSON.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

#define DEFAULT_SOCKET "/run/pinion/pinion.sock"
#define DEFAULT_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define DEFAULT_WAIT_USEC (30 * USEC_PER_SEC)
#define MAX_BODY_SIZE (64U * 1024U * 1024U)

enum {
        EXIT_OK = 0,
        EXIT_AGENT = 1,       /* the agent answered with a failure */
        EXIT_USAGE = 2,       /* bad command line */
        EXIT_UNREACHABLE = 3, /* no agent behind the socket */
};

struct options {
        const char *socket;
        bool json;
        usec_t timeout; /* 0: the command's default */
};

struct response {
        long status;
        char *body;
        size_t size;
};

static int log_oom(void) {
        fprintf(stderr, "pinionctl: out of memory\n");
        return EXIT_AGENT;
}

static void response_done(struct response *r) {
        free(r->body);
        r->body = NULL;
        r->size = 0;
}

static inline void cJSON_Deletep(cJSON **p) {
        if (*p)
                cJSON_Delete(*p);
}
#define _cleanup_json_ _cleanup_(cJSON_Deletep)

static inline void curl_easy_cleanupp(CURL **p) {
        if (*p)
                curl_easy_cleanup(*p);
}

static inline void curl_freep(char **p) {
        if (*p)
                curl_free(*p);
}

static void help(FILE *f) {
        fprintf(f,
                "Usage: pinionctl [OPTIONS] COMMAND [ARGS]\n\n"
                "Ask the local pinion agent (piniond) about this node.\n\n"
                "Commands:\n"
                "  health                  ok, or the failing modules (exit 1)\n"
                "  status                  the agent and every module's state\n"
                "  pods [NAMESPACE/NAME]   the node's pods, or one pod (NAME alone: namespace default)\n"
                "  identity                the caller's own workload identity\n"
                "  configs                 the config bundles and their versions\n"
                "  wait-config NAME        wait until config NAME is in place (--timeout, default 30s)\n"
                "  registrations           the ZooKeeper ServerSet registrations\n"
                "  reclaim                 the memory reclaim groups\n"
                "  metrics                 the Prometheus metrics, as text\n\n"
                "Options:\n"
                "  -s, --socket PATH       agent socket (default $PINION_SOCKET, else " DEFAULT_SOCKET ")\n"
                "  -j, --json              print the agent's JSON instead of tables\n"
                "  -t, --timeout S         give up after S (seconds, or 500ms/30s/2m/1h); default 10s\n"
                "  -h, --help              print this help and exit\n"
                "      --version           print the version and exit\n\n"
                "Exit status: 0 ok, 1 failure reported by the agent, 2 usage error, 3 agent unreachable.\n");
}

static void short_usage(FILE *f);

_printf_(1, 2) static int usage_error(const char *format, ...) {
        va_list ap;

        fputs("pinionctl: ", stderr);
        va_start(ap, format);
        vfprintf(stderr, format, ap);
        va_end(ap);
        fputs("\n", stderr);
        short_usage(stderr);
        return EXIT_USAGE;
}

/* ---- small parsers and formatters ---- */

/* "30", "2.5", "500ms", "30s", "2m", "1h" → microseconds; above 0, at most a day. */
static int parse_timeout(const char *s, usec_t *ret) {
        static const struct {
                const char *suffix;
                double usec;
        } units[] = {
                { "", 1e6 }, { "s", 1e6 }, { "ms", 1e3 }, { "m", 60e6 }, { "h", 3600e6 },
        };
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || end == s || !(v > 0))
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (streq(end, units[i].suffix)) {
                        double usec = v * units[i].usec;
                        if (usec < 1 || usec > 24 * 3600e6)
                                return -ERANGE;
                        *ret = (usec_t) usec;
                        return 0;
                }
        return -EINVAL;
}

/* A duration for the API's "?wait=" parameter, in whole seconds when it is one. */
static void format_wait(char *buf, size_t n, usec_t u) {
        if (u % USEC_PER_SEC == 0)
                snprintf(buf, n, "%" PRIu64 "s", u / USEC_PER_SEC);
        else
                snprintf(buf, n, "%" PRIu64 "ms", MAX(u / USEC_PER_MSEC, (usec_t) 1));
}

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

/* Text from the agent may carry pod annotations: never let control characters (C0, DEL, and
 * C1 as UTF-8, U+0080..U+009F) reach a terminal. */
static void sanitize(char *s) {
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
 * compact JSON. Returns NULL on OOM. */
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

static const cJSON *json_get(const cJSON *o, const char *key) {
        return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* The string value of key, or NULL if it is missing or not a string. */
static const char *json_str(const cJSON *o, const char *key) {
        const cJSON *v = json_get(o, key);

        return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The number value of key, or 0. */
static double json_num(const cJSON *o, const char *key) {
        const cJSON *v = json_get(o, key);

        return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const char *strna(const char *s) {
        return isempty(s) ? "-" : s;
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
        sanitize(cell);
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

/* ---- talking to the agent ---- */

static size_t write_cb(char *data, size_t size, size_t nmemb, void *userdata) {
        struct response *r = userdata;
        size_t n = size * nmemb;
        char *b;

        if (r->size + n > MAX_BODY_SIZE)
                return 0; /* makes curl fail with CURLE_WRITE_ERROR */
        b = realloc(r->body, r->size + n + 1);
        if (!b)
                return 0;
        memcpy(b + r->size, data, n);
        r->body = b;
        r->size += n;
        r->body[r->size] = '\0';
        return n;
}

static bool curl_code_is_unreachable(CURLcode c) {
        return c == CURLE_COULDNT_CONNECT || c == CURLE_OPERATION_TIMEDOUT || c == CURLE_GOT_NOTHING ||
               c == CURLE_SEND_ERROR || c == CURLE_RECV_ERROR;
}

/* Prints why the request failed and returns the exit status for it. */
static int report_curl_error(const struct options *o, CURL *c, CURLcode code, const char *errbuf, usec_t timeout) {
        long os_errno = 0;

        (void) curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
        if (code == CURLE_OPERATION_TIMEDOUT)
                fprintf(stderr, "pinionctl: the agent at %s did not answer within %.1fs\n", o->socket,
                        (double) timeout / USEC_PER_SEC);
        else if (code == CURLE_COULDNT_CONNECT && os_errno != 0)
                fprintf(stderr, "pinionctl: cannot reach the agent at %s: %s%s\n", o->socket,
                        strerror((int) os_errno),
                        os_errno == ENOENT || os_errno == ECONNREFUSED ? " (is piniond running?)" : "");
        else if (curl_code_is_unreachable(code))
                fprintf(stderr, "pinionctl: cannot reach the agent at %s: %s\n", o->socket,
                        errbuf[0] ? errbuf : curl_easy_strerror(code));
        else
                fprintf(stderr, "pinionctl: request to the agent at %s failed: %s\n", o->socket,
                        errbuf[0] ? errbuf : curl_easy_strerror(code));
        return curl_code_is_unreachable(code) ? EXIT_UNREACHABLE : EXIT_AGENT;
}

/* GETs path from the agent. Returns an exit status; on EXIT_OK *ret holds the answer, whatever
 * its HTTP status. */
static int agent_get(const struct options *o, const char *path, usec_t timeout, struct response *ret) {
        _cleanup_(curl_easy_cleanupp) CURL *c = NULL;
        _cleanup_free_ char *url = NULL;
        char errbuf[CURL_ERROR_SIZE] = "";
        struct response r = {};
        CURLcode code;

        if (asprintf(&url, "http://pinion%s", path) < 0)
                return log_oom();
        c = curl_easy_init();
        if (!c)
                return log_oom();

        if (curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, o->socket) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long) MAX(timeout / USEC_PER_MSEC, (usec_t) 1)) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_USERAGENT, "pinionctl/" PACKAGE_VERSION) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &r) != CURLE_OK) {
                fprintf(stderr, "pinionctl: failed to set up libcurl\n");
                return EXIT_AGENT;
        }

        code = curl_easy_perform(c);
        if (code != CURLE_OK) {
                response_done(&r);
                return report_curl_error(o, c, code, errbuf, timeout);
        }
        (void) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        *ret = r;
        return EXIT_OK;
}

/* Reports a non-2xx answer: the agent's {"error": ...} if it sent one. */
static int report_agent_error(const struct response *r, const char *path) {
        _cleanup_json_ cJSON *root = r->body ? cJSON_Parse(r->body) : NULL;
        const cJSON *e = json_get(root, "error");
        _cleanup_free_ char *msg = NULL;

        if (cJSON_IsString(e))
                msg = strdup(e->valuestring);
        else if (r->body && r->size > 0)
                msg = strndup(r->body, 200);
        if (msg)
                sanitize(msg);
        fprintf(stderr, "pinionctl: %s: the agent answered %ld%s%s\n", path, r->status, msg ? ": " : "",
                strempty(msg));
        return EXIT_AGENT;
}

static bool status_ok(long status) {
        return status >= 200 && status < 300;
}

/* GETs path and parses its JSON. A non-2xx status other than also_ok is reported as a failure.
 * Returns an exit status; on EXIT_OK *ret is the document and *ret_status the HTTP status. */
static int agent_get_json(const struct options *o, const char *path, usec_t timeout, long also_ok,
                          long *ret_status, cJSON **ret) {
        _cleanup_(response_done) struct response r = {};
        cJSON *root;
        int k;

        k = agent_get(o, path, timeout, &r);
        if (k != EXIT_OK)
                return k;
        if (!status_ok(r.status) && r.status != also_ok)
                return report_agent_error(&r, path);

        root = r.body ? cJSON_Parse(r.body) : NULL;
        if (!root) {
                fprintf(stderr, "pinionctl: %s: the agent answered %ld with no valid JSON\n", path, r.status);
                return EXIT_AGENT;
        }
        if (ret_status)
                *ret_status = r.status;
        *ret = root;
        return EXIT_OK;
}

/* ---- printers: human output of one document; each returns an exit status ---- */

typedef int (*printer_t)(const cJSON *root);

static int print_json(const cJSON *root) {
        _cleanup_free_ char *s = cJSON_Print(root);

        if (!s)
                return log_oom();
        puts(s);
        return EXIT_OK;
}

static void print_field(const char *label, const char *value) {
        _cleanup_free_ char *v = strdup(isempty(value) ? "-" : value);

        if (v)
                sanitize(v);
        printf("%-11s%s\n", label, v ? v : "-");
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
                                sanitize(v);
                        sanitize(key);
                        printf("%s: %s\n", key, v ? v : "-");
                        n++;
                }
        }
        return n;
}

static bool strv_contains(char **l, size_t n, const char *s) {
        for (size_t i = 0; i < n; i++)
                if (streq(l[i], s))
                        return true;
        return false;
}

/* An array of objects as a table whose columns are their non-object fields, in first-seen order. */
static int print_object_array(const cJSON *array) {
        _cleanup_(table_done) struct table t = {};
        _cleanup_free_ char **cols = NULL;
        size_t n = 0;
        const cJSON *item, *f;

        cJSON_ArrayForEach(item, array)
                cJSON_ArrayForEach(f, item) {
                        char **c;
                        if (cJSON_IsObject(f) || json_is_object_array(f) || strv_contains(cols, n, f->string))
                                continue;
                        c = realloc(cols, (n + 1) * sizeof(char *));
                        if (!c)
                                return log_oom();
                        cols = c;
                        cols[n++] = f->string;
                }
        if (n == 0)
                return EXIT_OK;

        t.n_columns = n;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *h = strdup(cols[i]);
                if (!h)
                        return log_oom();
                for (char *p = h; *p; p++)
                        *p = *p == '_' ? ' ' : (char) toupper((unsigned char) *p);
                if (table_add(&t, h) < 0)
                        return log_oom();
        }
        cJSON_ArrayForEach(item, array)
                for (size_t i = 0; i < n; i++)
                        if (table_add_json(&t, json_get(item, cols[i])) < 0)
                                return log_oom();
        if (table_print(&t) < 0)
                return log_oom();
        return EXIT_OK;
}

/* For documents whose shape this client does not know in detail (they belong to modules that
 * may grow): the scalar fields, then one table per array of objects. */
static int print_generic(const cJSON *root) {
        const cJSON *i;
        size_t n;
        int k;

        if (json_is_object_array(root))
                return print_object_array(root);
        if (!cJSON_IsObject(root))
                return print_json(root);

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
                        return log_oom();
        cJSON_ArrayForEach(item, array)
                for (size_t i = 0; i < n; i++)
                        if (table_add_json(&t, json_get(item, keys[i])) < 0)
                                return log_oom();
        if (table_print(&t) < 0)
                return log_oom();
        return EXIT_OK;
}

static int print_health(const cJSON *root) {
        static const char *const header[] = { "MODULE", "STATE", "REASON" };
        static const char *const keys[] = { "module", "state", "reason" };
        const cJSON *failing = json_get(root, "failing");
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
        const cJSON *config = json_get(root, "config"), *pods = json_get(root, "pods");
        char buf[512], up[64];

        print_field_json("version:", json_get(root, "version"));
        print_field_json("node:", json_get(root, "node"));
        format_uptime(up, sizeof up, json_num(root, "uptime_seconds"));
        snprintf(buf, sizeof buf, "%s (since %s)", up, strna(json_str(root, "started")));
        print_field("uptime:", buf);
        print_field_json("ready:", json_get(root, "ready"));
        if (cJSON_IsObject(config)) {
                snprintf(buf, sizeof buf, "%s (%.0f reloads, %.0f failed)", strna(json_str(config, "file")),
                         json_num(config, "reloads"),
                         json_num(config, "reload_failures"));
                print_field("config:", buf);
                if (json_str(config, "last_reload_error"))
                        print_field("  error:", json_str(config, "last_reload_error"));
        }
        if (cJSON_IsObject(pods)) {
                snprintf(buf, sizeof buf, "%.0f (pods-dir %s, %d errors)", json_num(pods, "count"),
                         strna(json_str(pods, "pods_dir")), cJSON_GetArraySize(json_get(pods, "errors")));
                print_field("pods:", buf);
        }
}

static int print_status(const cJSON *root) {
        static const char *const header[] = { "MODULE", "STATE", "SINCE", "REASON" };
        static const char *const keys[] = { "name", "state", "since", "reason" };

        print_status_header(root);
        printf("\n");
        return print_table(header, keys, ELEMENTSOF(header), json_get(root, "modules"));
}

static int print_pods(const cJSON *root) {
        static const char *const header[] = { "NAMESPACE", "NAME", "READY", "PHASE", "IP", "SOURCE" };
        static const char *const keys[] = { "namespace", "name", "ready", "phase", "ips", "source" };

        return print_table(header, keys, ELEMENTSOF(header), json_get(root, "pods"));
}

static int print_pod(const cJSON *pod) {
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
                print_field_json(fields[k].label, json_get(pod, fields[k].key));
        cJSON_ArrayForEach(i, json_get(pod, "conditions")) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "%s=%s", i->string, cJSON_IsTrue(i) ? "True" : "False") < 0)
                        return log_oom();
                print_field("cond:", line);
        }
        cJSON_ArrayForEach(i, json_get(pod, "annotations")) {
                _cleanup_free_ char *line = NULL;
                if (asprintf(&line, "%s=%s", i->string, strna(cJSON_IsString(i) ? i->valuestring : NULL)) < 0)
                        return log_oom();
                print_field("annot:", line);
        }
        if (cJSON_GetArraySize(json_get(pod, "ports")) == 0)
                return EXIT_OK;
        printf("\n");
        return print_table(header, keys, ELEMENTSOF(header), json_get(pod, "ports"));
}

/* ---- commands ---- */

struct verb;
typedef int (*verb_fn)(const struct options *o, const struct verb *v, char **args, int n_args);

struct verb {
        const char *name;
        int min_args, max_args;
        verb_fn run;
        const char *path; /* for verb_show */
        printer_t print;  /* for verb_show */
};

static usec_t request_timeout(const struct options *o) {
        return o->timeout > 0 ? o->timeout : DEFAULT_TIMEOUT_USEC;
}

/* GETs path and prints it with the verb's printer (or as JSON). */
static int show(const struct options *o, const char *path, usec_t timeout, printer_t print) {
        _cleanup_json_ cJSON *root = NULL;
        int k;

        k = agent_get_json(o, path, timeout, 0, NULL, &root);
        if (k != EXIT_OK)
                return k;
        return o->json ? print_json(root) : print(root);
}

static int verb_show(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        return show(o, v->path, request_timeout(o), v->print);
}

static int verb_health(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        _cleanup_json_ cJSON *root = NULL;
        long status = 0;
        int k;

        k = agent_get_json(o, "/v1/health", request_timeout(o), 503, &status, &root);
        if (k != EXIT_OK)
                return k;
        if (o->json) {
                k = print_json(root);
                return k != EXIT_OK ? k : status == 503 ? EXIT_AGENT : EXIT_OK;
        }
        k = print_health(root);
        return status == 503 ? EXIT_AGENT : k;
}

/* Escapes one path segment. Returns NULL on OOM; free with curl_free(). */
static char *escape_segment(const char *s) {
        return curl_easy_escape(NULL, s, 0);
}

static int verb_pods(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        _cleanup_(curl_freep) char *ns = NULL, *name = NULL;
        _cleanup_free_ char *path = NULL;
        const char *slash;

        if (n_args == 0)
                return show(o, "/v1/pods", request_timeout(o), print_pods);

        slash = strchr(args[0], '/');
        if (slash && (slash == args[0] || isempty(slash + 1) || strchr(slash + 1, '/')))
                return usage_error("pods: expected NAMESPACE/NAME, got '%s'", args[0]);
        if (slash) {
                _cleanup_free_ char *n = strndup(args[0], (size_t) (slash - args[0]));
                if (!n)
                        return log_oom();
                ns = escape_segment(n);
                name = escape_segment(slash + 1);
        } else {
                ns = escape_segment("default");
                name = escape_segment(args[0]);
        }
        if (!ns || !name || asprintf(&path, "/v1/pods/%s/%s", ns, name) < 0)
                return log_oom();
        return show(o, path, request_timeout(o), print_pod);
}

static int verb_wait_config(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        _cleanup_(curl_freep) char *name = NULL;
        _cleanup_free_ char *path = NULL;
        usec_t wait = o->timeout > 0 ? o->timeout : DEFAULT_WAIT_USEC;
        char w[32];

        if (isempty(args[0]))
                return usage_error("wait-config: empty config name");
        name = escape_segment(args[0]);
        format_wait(w, sizeof w, wait);
        if (!name || asprintf(&path, "/v1/configs/%s?wait=%s", name, w) < 0)
                return log_oom();
        /* The agent answers when the config is there or the wait is over; allow it some slack. */
        return show(o, path, wait + DEFAULT_TIMEOUT_USEC, print_generic);
}

static int verb_metrics(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        _cleanup_(response_done) struct response r = {};
        int k;

        k = agent_get(o, "/metrics", request_timeout(o), &r);
        if (k != EXIT_OK)
                return k;
        if (!status_ok(r.status))
                return report_agent_error(&r, "/metrics");
        if (r.size > 0 && fwrite(r.body, 1, r.size, stdout) != r.size)
                return EXIT_AGENT;
        return EXIT_OK;
}

static const struct verb verbs[] = {
        { "health", 0, 0, verb_health, NULL, NULL },
        { "status", 0, 0, verb_show, "/v1/status", print_status },
        { "pods", 0, 1, verb_pods, NULL, NULL },
        { "identity", 0, 0, verb_show, "/v1/identity", print_generic },
        { "configs", 0, 0, verb_show, "/v1/configs", print_generic },
        { "wait-config", 1, 1, verb_wait_config, NULL, NULL },
        { "registrations", 0, 0, verb_show, "/v1/registrations", print_generic },
        { "reclaim", 0, 0, verb_show, "/v1/reclaim", print_generic },
        { "metrics", 0, 0, verb_metrics, NULL, NULL },
};

static void short_usage(FILE *f) {
        fputs("Usage: pinionctl [--socket PATH] [--json] [--timeout S] COMMAND [ARGS]\nCommands:", f);
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, " %s", verbs[i].name);
        fputs("\nSee 'pinionctl --help'.\n", f);
}

static const struct verb *verb_find(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name))
                        return &verbs[i];
        return NULL;
}

/* ---- command line ---- */

/* Returns -1 to go on, otherwise the exit status. Options may follow the command
 * ("wait-config app --timeout 60s"). */
static int parse_argv(int argc, char *argv[], struct options *o) {
        enum { ARG_VERSION = 0x100 };
        static const struct option options[] = {
                { "socket", required_argument, NULL, 's' },
                { "json", no_argument, NULL, 'j' },
                { "timeout", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {}
        };
        int c;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":s:jt:h", options, NULL)) >= 0)
                switch (c) {
                case 's':
                        if (isempty(optarg))
                                return usage_error("--socket needs a path");
                        o->socket = optarg;
                        break;
                case 'j':
                        o->json = true;
                        break;
                case 't':
                        if (parse_timeout(optarg, &o->timeout) < 0)
                                return usage_error("invalid --timeout '%s' (expected e.g. 10, 2.5, 500ms, 30s, 2m)", optarg);
                        break;
                case 'h':
                        help(stdout);
                        return EXIT_OK;
                case ARG_VERSION:
                        printf("pinionctl %s\n", PACKAGE_VERSION);
                        return EXIT_OK;
                case ':':
                        return usage_error("option '%s' needs an argument", argv[optind - 1]);
                default:
                        return usage_error("unknown option '%s'", argv[optind - 1]);
                }
        return -1;
}

static int run_verb(const struct options *o, char **args, int n) {
        const struct verb *v;

        if (n == 0)
                return usage_error("missing command");
        v = verb_find(args[0]);
        if (!v)
                return usage_error("unknown command '%s'", args[0]);
        if (n - 1 < v->min_args)
                return usage_error("%s: missing argument", v->name);
        if (n - 1 > v->max_args)
                return usage_error("%s: unexpected argument '%s'", v->name, args[v->max_args + 1]);
        return v->run(o, v, args + 1, n - 1);
}

int main(int argc, char *argv[]) {
        struct options o = { .socket = getenv("PINION_SOCKET") };
        int k;

        if (isempty(o.socket))
                o.socket = DEFAULT_SOCKET;
        k = parse_argv(argc, argv, &o);
        if (k >= 0)
                return k;

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                fprintf(stderr, "pinionctl: failed to initialize libcurl\n");
                return EXIT_AGENT;
        }
        k = run_verb(&o, argv + optind, argc - optind);
        curl_global_cleanup();
        fflush(stdout);
        return ferror(stdout) ? EXIT_AGENT : k;
}
