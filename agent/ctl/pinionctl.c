/* SPDX-License-Identifier: MIT */
/* pinionctl: ask the local piniond over its Unix socket and print the answer for people (tables)
 * or scripts (--json). Exit status: 0 ok, 1 failure reported by the agent, 2 usage error,
 * 3 agent unreachable, 4 the module behind the command not running. A CLI blocks, so this is
 * plain libcurl easy + cJSON. */

#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "macro.h"
#include "parse.h"
#include "pinionctl-print.h"
#include "socket-trust.h"

#define DEFAULT_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define DEFAULT_WAIT_USEC (30 * USEC_PER_SEC)
#define MAX_BODY_SIZE (64U * 1024U * 1024U)
#define MAX_TIMEOUT_USEC (24 * USEC_PER_HOUR)
#define COMPLETE_TIMEOUT_USEC (USEC_PER_SEC / 2)
#define MAX_LONG_POLL_USEC (10 * USEC_PER_MINUTE) /* the agent's longest ?wait= */

struct options {
        const char *socket;
        uid_t socket_owner; /* besides root, whose socket and peer are the agent's */
        bool json;
        usec_t timeout; /* 0: the command's default */
};

struct response {
        long status;
        char *body;
        size_t size;
};

static void response_done(struct response *r) {
        free(r->body);
        r->body = NULL;
        r->size = 0;
}

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
                "  identity                the caller's own identity; for root: the node and every pod\n"
                "  configs                 the config bundles and their versions\n"
                "  wait-config NAME        wait until config NAME is in place (--timeout, default 30s)\n"
                "  registrations           the ZooKeeper ServerSet registrations\n"
                "  drain                   mark this node's registrations STOPPING, then remove them\n"
                "  undrain                 register ready pods again after a drain\n"
                "  reclaim                 the memory reclaim groups\n"
                "  metrics                 the Prometheus metrics, as text\n\n"
                "Options:\n"
                "  -s, --socket PATH       agent socket (default $PINION_SOCKET, else " PINION_SOCKET_DEFAULT ")\n"
                "  -j, --json              print the agent's JSON instead of tables\n"
                "  -t, --timeout S         give up after S (seconds, or 500ms/30s/2m/1h); default 10s\n"
                "  -h, --help              print this help and exit\n"
                "      --version           print the version and exit\n\n"
                "Exit status: 0 ok, 1 failure reported by the agent, 2 usage error, 3 agent unreachable, "
                "4 module not running.\n");
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

/* "2.5", "0.5m": one decimal number and at most one unit, which parse_duration() does not take
 * (it counts whole units). The unit means what parse_duration() makes of "1<unit>". */
static int parse_fractional_duration(const char *s, usec_t *ret) {
        size_t n_int, n_frac;
        const char *unit;
        char one[16];
        usec_t factor;
        double v;
        int r;

        n_int = strspn(s, "0123456789");
        if (s[n_int] != '.')
                return -EINVAL;
        n_frac = strspn(s + n_int + 1, "0123456789");
        if (n_int + n_frac == 0)
                return -EINVAL;
        unit = s + n_int + 1 + n_frac;
        if (unit[strspn(unit, "abcdefghijklmnopqrstuvwxyz")] != '\0')
                return -EINVAL;
        if ((size_t) snprintf(one, sizeof one, "1%s", unit) >= sizeof one)
                return -EINVAL;
        r = parse_duration(one, &factor);
        if (r < 0)
                return r;

        v = strtod(s, NULL) * (double) factor;
        if (v >= (double) UINT64_MAX)
                return -ERANGE;
        *ret = (usec_t) v;
        return 0;
}

/* parse_duration() ("30", "500ms", "2m", "1m 30s"; a bare number is seconds), plus decimals
 * ("2.5"); above 0, at most a day. */
static int parse_timeout(const char *s, usec_t *ret) {
        usec_t t;
        int r;

        r = parse_duration(s, &t);
        if (r == -EINVAL && strchr(s, '.'))
                r = parse_fractional_duration(s, &t);
        if (r < 0)
                return r;
        if (t == 0 || t > MAX_TIMEOUT_USEC)
                return -ERANGE;
        *ret = t;
        return 0;
}

/* A duration for the API's "?wait=" parameter, in whole seconds when it is one. */
static void format_wait(char *buf, size_t n, usec_t u) {
        if (u % USEC_PER_SEC == 0)
                snprintf(buf, n, "%" PRIu64 "s", u / USEC_PER_SEC);
        else
                snprintf(buf, n, "%" PRIu64 "ms", MAX(u / USEC_PER_MSEC, (usec_t) 1));
}

/* A duration for people, as --timeout takes it: "3s", "90s", "2m", "1h", "2.5s". */
static void format_duration_text(char *buf, size_t n, usec_t u) {
        uint64_t s = u / USEC_PER_SEC;

        if (u % USEC_PER_SEC != 0)
                snprintf(buf, n, "%.1fs", (double) u / USEC_PER_SEC);
        else if (s < 60 || s % 60 != 0)
                snprintf(buf, n, "%" PRIu64 "s", s);
        else if (s < 3600 || s % 3600 != 0)
                snprintf(buf, n, "%" PRIu64 "m", s / 60);
        else
                snprintf(buf, n, "%" PRIu64 "h", s / 3600);
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

/* The connection to the agent: its peer is checked once connected, before curl sends a byte. */
struct agent_conn {
        const struct options *o;
        curl_socket_t fd; /* the socket curl made, from its sockopt callback */
        bool refused; /* the socket or its peer is not the agent's */
        char why[SOCKET_TRUST_WHY_MAX];
};

static int note_agent_socket(void *userdata, curl_socket_t fd, curlsocktype purpose _unused_) {
        struct agent_conn *ac = userdata;
        ac->fd = fd;
        return CURL_SOCKOPT_OK;
}

static int check_agent_peer(void *userdata, char *primary_ip _unused_, char *local_ip _unused_,
                            int primary_port _unused_, int local_port _unused_) {
        struct agent_conn *ac = userdata;

        if (ac->fd == CURL_SOCKET_BAD) {
                snprintf(ac->why, sizeof(ac->why), "cannot see the connection to check its peer");
                ac->refused = true;
                return CURL_PREREQFUNC_ABORT;
        }
        if (socket_trust_check_peer(ac->fd, ac->o->socket_owner, ac->why, sizeof(ac->why)) < 0) {
                ac->refused = true;
                return CURL_PREREQFUNC_ABORT;
        }
        return CURL_PREREQFUNC_OK;
}

static int report_refused(const struct options *o, const char *why) {
        fprintf(stderr, "pinionctl: refusing the socket %s: %s (not the agent's; see " SOCKET_OWNER_ENV
                " in pinionctl(1))\n", o->socket, why);
        return EXIT_UNREACHABLE;
}

/* Prints why the request failed and returns the exit status for it. */
static int report_curl_error(const struct options *o, const struct agent_conn *ac, CURL *c, CURLcode code,
                             const char *errbuf, usec_t timeout) {
        long os_errno = 0;

        if (ac->refused)
                return report_refused(o, ac->why);
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

/* GETs (or POSTs, with an empty body) path from the agent. Returns an exit status; on EXIT_OK
 * *ret holds the answer, whatever its HTTP status. */
static int agent_request(const struct options *o, bool post, const char *path, usec_t timeout, struct response *ret) {
        _cleanup_(curl_easy_cleanupp) CURL *c = NULL;
        _cleanup_free_ char *url = NULL;
        char errbuf[CURL_ERROR_SIZE] = "";
        struct agent_conn ac = { .o = o, .fd = CURL_SOCKET_BAD };
        struct response r = {};
        CURLcode code;
        int k;

        /* Before connecting: a socket someone else could have put there gets nothing from us. */
        k = socket_trust_check_path(o->socket, o->socket_owner, ac.why, sizeof(ac.why));
        if (k == -EPERM || k == -ELOOP)
                return report_refused(o, ac.why);
        if (asprintf(&url, "http://pinion%s", path) < 0)
                return pinionctl_print_oom();
        c = curl_easy_init();
        if (!c)
                return pinionctl_print_oom();

        if (curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, o->socket) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, note_agent_socket) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_SOCKOPTDATA, &ac) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_PREREQFUNCTION, check_agent_peer) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_PREREQDATA, &ac) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_PROXY, "") != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long) MAX(timeout / USEC_PER_MSEC, (usec_t) 1)) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_USERAGENT, "pinionctl/" PACKAGE_VERSION) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb) != CURLE_OK ||
            curl_easy_setopt(c, CURLOPT_WRITEDATA, &r) != CURLE_OK ||
            (post && curl_easy_setopt(c, CURLOPT_POSTFIELDS, "") != CURLE_OK)) {
                fprintf(stderr, "pinionctl: failed to set up libcurl\n");
                return EXIT_AGENT;
        }

        code = curl_easy_perform(c);
        if (code != CURLE_OK) {
                response_done(&r);
                return report_curl_error(o, &ac, c, code, errbuf, timeout);
        }
        (void) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        *ret = r;
        return EXIT_OK;
}

static int agent_get(const struct options *o, const char *path, usec_t timeout, struct response *ret) {
        return agent_request(o, false, path, timeout, ret);
}

/* The agent's 503 for a route of a module that is not running: {"error": "zkreg is disabled:
 * ...", "code": 503, "module", "state", "reason"} (docs/api.md). Its error on stderr as the
 * agent wrote it, the body on stdout with --json; EXIT_MODULE_DOWN. -ENOENT: another answer. */
static int report_module_down(const struct options *o, const struct response *r, const cJSON *root) {
        const cJSON *e = pinionctl_print_json_get(root, "error");
        _cleanup_free_ char *msg = NULL;

        if (r->status != 503 || !cJSON_IsString(pinionctl_print_json_get(root, "module")) ||
            !cJSON_IsString(pinionctl_print_json_get(root, "state")) || !cJSON_IsString(e))
                return -ENOENT;
        msg = strdup(e->valuestring);
        if (!msg)
                return pinionctl_print_oom();
        pinionctl_print_sanitize(msg);
        fprintf(stderr, "pinionctl: %s\n", msg);
        if (o->json)
                (void) pinionctl_print_json(root);
        return EXIT_MODULE_DOWN;
}

/* Reports a non-2xx answer: the agent's {"error": ...} if it sent one. */
static int report_agent_error(const struct options *o, const struct response *r, const char *path) {
        _cleanup_(cJSON_Deletep) cJSON *root = r->body ? cJSON_Parse(r->body) : NULL;
        const cJSON *e = pinionctl_print_json_get(root, "error");
        _cleanup_free_ char *msg = NULL;
        int k = report_module_down(o, r, root);

        if (k != -ENOENT)
                return k;

        if (cJSON_IsString(e))
                msg = strdup(e->valuestring);
        else if (r->body && r->size > 0)
                msg = strndup(r->body, 200);
        if (msg)
                pinionctl_print_sanitize(msg);
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
                return report_agent_error(o, &r, path);

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
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int k;

        k = agent_get_json(o, path, timeout, 0, NULL, &root);
        if (k != EXIT_OK)
                return k;
        return o->json ? pinionctl_print_json(root) : print(root);
}

static int verb_show(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        return show(o, v->path, request_timeout(o), v->print);
}

static int verb_health(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        long status = 0;
        int k;

        k = agent_get_json(o, "/v1/health", request_timeout(o), 503, &status, &root);
        if (k != EXIT_OK)
                return k;
        if (o->json) {
                k = pinionctl_print_json(root);
                return k != EXIT_OK ? k : status == 503 ? EXIT_AGENT : EXIT_OK;
        }
        k = pinionctl_print_health(root);
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
                return show(o, "/v1/pods", request_timeout(o), pinionctl_print_pods);

        slash = strchr(args[0], '/');
        if (slash && (slash == args[0] || isempty(slash + 1) || strchr(slash + 1, '/')))
                return usage_error("pods: expected NAMESPACE/NAME, got '%s'", args[0]);
        if (slash) {
                _cleanup_free_ char *n = strndup(args[0], (size_t) (slash - args[0]));
                if (!n)
                        return pinionctl_print_oom();
                ns = escape_segment(n);
                name = escape_segment(slash + 1);
        } else {
                ns = escape_segment("default");
                name = escape_segment(args[0]);
        }
        if (!ns || !name || asprintf(&path, "/v1/pods/%s/%s", ns, name) < 0)
                return pinionctl_print_oom();
        return show(o, path, request_timeout(o), pinionctl_print_pod);
}

/* One long-poll of at most `wait` for config NAME. EXIT_OK with *ret_present and the agent's
 * document (or its error text) in *ret_doc. */
static int wait_config_once(const struct options *o, const char *escaped, usec_t wait, bool *ret_present,
                            cJSON **ret_doc) {
        _cleanup_(response_done) struct response r = {};
        _cleanup_free_ char *path = NULL;
        char w[32];
        int k;

        format_wait(w, sizeof w, wait);
        if (asprintf(&path, "/v1/configs/%s?wait=%s", escaped, w) < 0)
                return pinionctl_print_oom();
        /* The agent answers when the config is there or the wait is over; allow it some slack. */
        k = agent_get(o, path, wait + DEFAULT_TIMEOUT_USEC, &r);
        if (k != EXIT_OK)
                return k;
        if (r.status != 200 && r.status != 504)
                return report_agent_error(o, &r, path);
        *ret_doc = r.body ? cJSON_Parse(r.body) : NULL;
        if (!*ret_doc) {
                fprintf(stderr, "pinionctl: %s: the agent answered %ld with no valid JSON\n", path, r.status);
                return EXIT_AGENT;
        }
        *ret_present = r.status == 200;
        return EXIT_OK;
}

/* The config's state and last error right now, for what a 504 does not carry. Both NULL when
 * the agent does not say; *ret_doc owns the strings. */
static void config_progress(const struct options *o, const char *escaped, cJSON **ret_doc, const char **ret_state,
                            const char **ret_error) {
        _cleanup_free_ char *path = NULL;
        const cJSON *state, *error;

        *ret_doc = NULL;
        *ret_state = *ret_error = NULL;
        if (asprintf(&path, "/v1/configs/%s", escaped) < 0 ||
            agent_get_json(o, path, DEFAULT_TIMEOUT_USEC, 0, NULL, ret_doc) != EXIT_OK)
                return;
        state = pinionctl_print_json_get(*ret_doc, "state");
        error = pinionctl_print_json_get(*ret_doc, "last_error");
        *ret_state = cJSON_IsString(state) ? state->valuestring : NULL;
        *ret_error = cJSON_IsString(error) ? error->valuestring : NULL;
}

/* The terminal's progress line: "waiting for config app: failing, 3s of 30s; last error: ...". */
static void show_wait_progress(const struct options *o, const char *name, const char *escaped, usec_t waited,
                               usec_t total) {
        _cleanup_(cJSON_Deletep) cJSON *doc = NULL;
        _cleanup_free_ char *line = NULL;
        const char *state, *error;

        config_progress(o, escaped, &doc, &state, &error);
        if (!doc)
                return;
        if (asprintf(&line, "waiting for config %s: %s, %.0fs of %.0fs%s%s", name, state ? state : "?",
                     (double) waited / USEC_PER_SEC, (double) total / USEC_PER_SEC, error ? "; last error: " : "",
                     strempty(error)) < 0)
                return;
        pinionctl_print_sanitize(line);
        fprintf(stderr, "\r\033[K%.*s", 200, line);
}

/* The end of a wait that ran out: how long was waited (the whole --timeout, not the last of the
 * polls it was made of) and why the config is not there, if the agent knows. */
static int report_wait_timeout(const struct options *o, const char *name, const char *escaped, usec_t total) {
        _cleanup_(cJSON_Deletep) cJSON *doc = NULL;
        _cleanup_free_ char *error = NULL;
        const char *state, *e;
        char waited[32];

        config_progress(o, escaped, &doc, &state, &e);
        if (e && !(error = strdup(e)))
                return pinionctl_print_oom();
        if (error)
                pinionctl_print_sanitize(error);
        format_duration_text(waited, sizeof waited, total);
        fprintf(stderr, "pinionctl: wait-config %s: config %s is not present after %s%s%s\n", name, name, waited,
                error ? ": " : "", strempty(error));
        return EXIT_AGENT;
}

/* wait-config NAME: blocks until the config is present (exit 0) or --timeout passes (exit 1).
 * On a terminal it polls every second and shows what the agent is doing; otherwise it long-polls
 * quietly, in pieces of at most the agent's longest wait. */
static int verb_wait_config(const struct options *o, _unused_ const struct verb *v, char **args, _unused_ int n_args) {
        _cleanup_(curl_freep) char *name = NULL;
        usec_t total = o->timeout > 0 ? o->timeout : DEFAULT_WAIT_USEC;
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + total;
        bool tty = isatty(STDERR_FILENO), shown = false;
        int k;

        if (isempty(args[0]))
                return usage_error("wait-config: empty config name");
        name = escape_segment(args[0]);
        if (!name)
                return pinionctl_print_oom();
        for (;;) {
                _cleanup_(cJSON_Deletep) cJSON *doc = NULL;
                usec_t now = now_usec(CLOCK_MONOTONIC), left = deadline > now ? deadline - now : 0;
                bool present = false;

                if (left == 0)
                        left = 1; /* one last look */
                k = wait_config_once(o, name, MIN(left, tty ? USEC_PER_SEC : MAX_LONG_POLL_USEC), &present, &doc);
                if (k != EXIT_OK || present || now_usec(CLOCK_MONOTONIC) >= deadline) {
                        if (shown)
                                fputs("\n", stderr);
                        if (k != EXIT_OK)
                                return k;
                        if (present)
                                return o->json ? pinionctl_print_json(doc) : pinionctl_print_generic(doc);
                        return report_wait_timeout(o, args[0], name, total);
                }
                if (tty) {
                        now = now_usec(CLOCK_MONOTONIC);
                        show_wait_progress(o, args[0], name, total - MIN(total, deadline > now ? deadline - now : 0),
                                           total);
                        shown = true;
                }
        }
}

static int verb_metrics(const struct options *o, _unused_ const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        _cleanup_(response_done) struct response r = {};
        int k;

        k = agent_get(o, "/metrics", request_timeout(o), &r);
        if (k != EXIT_OK)
                return k;
        if (!status_ok(r.status))
                return report_agent_error(o, &r, "/metrics");
        if (r.size > 0 && fwrite(r.body, 1, r.size, stdout) != r.size)
                return EXIT_AGENT;
        return EXIT_OK;
}

/* zkreg: POST /v1/registrations/drain (or undrain) and print the answer. */
static int verb_drain(const struct options *o, const struct verb *v, _unused_ char **args, _unused_ int n_args) {
        _cleanup_(response_done) struct response r = {};
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        int k;

        k = agent_request(o, true, v->path, request_timeout(o), &r);
        if (k != EXIT_OK)
                return k;
        if (!status_ok(r.status))
                return report_agent_error(o, &r, v->path);
        root = r.body ? cJSON_Parse(r.body) : NULL;
        if (!root) {
                fprintf(stderr, "pinionctl: %s: the agent answered %ld with no valid JSON\n", v->path, r.status);
                return EXIT_AGENT;
        }
        if (o->json)
                return pinionctl_print_json(root);
        return pinionctl_print_drain(root);
}

static const struct verb verbs[] = {
        { "health", 0, 0, verb_health, NULL, NULL },
        { "status", 0, 0, verb_show, "/v1/status", pinionctl_print_status },
        { "pods", 0, 1, verb_pods, NULL, NULL },
        { "identity", 0, 0, verb_show, "/v1/identity", pinionctl_print_identity },
        { "configs", 0, 0, verb_show, "/v1/configs", pinionctl_print_configs },
        { "wait-config", 1, 1, verb_wait_config, NULL, NULL },
        { "registrations", 0, 0, verb_show, "/v1/registrations", pinionctl_print_registrations },
        { "drain", 0, 0, verb_drain, "/v1/registrations/drain", NULL },
        { "undrain", 0, 0, verb_drain, "/v1/registrations/undrain", NULL },
        { "reclaim", 0, 0, verb_show, "/v1/reclaim", pinionctl_print_reclaim },
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

enum { ARG_VERSION = 0x100 };
static const struct option cli_options[] = {
        { "socket", required_argument, NULL, 's' },
        { "json", no_argument, NULL, 'j' },
        { "timeout", required_argument, NULL, 't' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, ARG_VERSION },
        {}
};

/* Returns -1 to go on, otherwise the exit status. Options may follow the command
 * ("wait-config app --timeout 60s"). */
static int parse_argv(int argc, char *argv[], struct options *o) {
        int c;

        opterr = 0;
        while ((c = getopt_long(argc, argv, ":s:jt:h", cli_options, NULL)) >= 0)
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

/* "__complete KIND", the words the bash completion (shell-completion/bash/pinionctl) offers, one
 * a line: the commands, the long options, or the names of the node's pods or configs. Hidden from
 * --help. The shell waits on it at every Tab: names come with a short timeout and without a word
 * on stderr, so an agent that is down or slow means no names, at once. */
static int complete_words(const struct options *o, const char *kind) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        struct options quick = *o;
        bool pods = streq(kind, "pods");
        int k;

        if (streq(kind, "commands")) {
                for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                        puts(verbs[i].name);
                return EXIT_OK;
        }
        if (streq(kind, "options")) {
                for (const struct option *opt = cli_options; opt->name; opt++)
                        printf("--%s\n", opt->name);
                return EXIT_OK;
        }
        if (!pods && !streq(kind, "configs"))
                return usage_error("__complete: unknown kind '%s'", kind);
        if (!freopen("/dev/null", "w", stderr))
                return EXIT_AGENT;
        if (quick.timeout == 0)
                quick.timeout = COMPLETE_TIMEOUT_USEC;
        k = agent_get_json(&quick, pods ? "/v1/pods" : "/v1/configs", request_timeout(&quick), 0, NULL, &root);
        if (k != EXIT_OK)
                return k;
        return pods ? pinionctl_print_pod_names(root) : pinionctl_print_config_names(root);
}

static int run_verb(const struct options *o, char **args, int n) {
        const struct verb *v;

        if (n == 0)
                return usage_error("missing command");
        if (streq(args[0], "__complete"))
                return n == 2 ? complete_words(o, args[1]) : usage_error("__complete: expected one KIND");
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

        char why[SOCKET_TRUST_WHY_MAX];

        if (isempty(o.socket))
                o.socket = socket_trust_default_path();
        k = parse_argv(argc, argv, &o);
        if (k >= 0)
                return k;
        if (socket_trust_owner(&o.socket_owner, why, sizeof(why)) < 0)
                return usage_error("%s", why);

        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                fprintf(stderr, "pinionctl: failed to initialize libcurl\n");
                return EXIT_AGENT;
        }
        k = run_verb(&o, argv + optind, argc - optind);
        curl_global_cleanup();
        fflush(stdout);
        return ferror(stdout) ? EXIT_AGENT : k;
}
