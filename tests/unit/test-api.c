/* SPDX-License-Identifier: MIT */
/* api.c against real clients: the API runs on an sd-event loop in this process; the client is
 * a forked child (its own PID, so peer credentials mean something) speaking HTTP with libcurl
 * or, where a half-finished request is needed, over a raw socket. The child checks what it
 * receives and exits with its number of failures; the parent checks what handlers saw. */
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "api.h"

#define N_GATHER 20
#define GUARD_USEC (30 * USEC_PER_SEC)

struct fixture {
        char dir[64];
        char sock[128];
        sd_event *event;
        struct metrics *metrics;
        struct api *api;
        int signal_fd[2]; /* parent → child: "the request is now held" */

        bool done; /* stop serving: the child exited and every expected abort came */
        bool timed_out;
        pid_t child;
        bool child_done;
        int child_status;
        unsigned expect_aborts;
        unsigned aborts;

        /* What handlers saw. */
        struct api_peer last_peer;
        unsigned echo_calls;

        struct api_request *wait_req;
        sd_event_source *wait_timer;

        struct api_request *stream_req;
        sd_event_source *stream_timer;
        unsigned stream_n;

        struct api_request *gather[N_GATHER];
        unsigned n_gather;

        bool free_api_on_hold; /* api_free() with requests held */
        unsigned holds;
};

/* ---- handlers ---- */

static void signal_child(struct fixture *f) {
        char c = 'h';
        assert_int_equal(write(f->signal_fd[1], &c, 1), 1);
}

static void maybe_exit(struct fixture *f) {
        if (f->child_done && f->aborts >= f->expect_aborts)
                f->done = true;
}

static cJSON *nullable_string(const char *s) {
        return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

static int h_echo(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        const struct api_peer *p = api_request_peer(r);
        cJSON *o = cJSON_CreateObject();

        f->last_peer = *p;
        f->echo_calls++;
        cJSON_AddStringToObject(o, "method", api_request_method(r));
        cJSON_AddStringToObject(o, "path", api_request_path(r));
        cJSON_AddStringToObject(o, "route", api_request_route(r));
        cJSON_AddItemToObject(o, "p0", nullable_string(api_request_param(r, 0)));
        cJSON_AddItemToObject(o, "p1", nullable_string(api_request_param(r, 1)));
        cJSON_AddItemToObject(o, "p2", nullable_string(api_request_param(r, 2)));
        cJSON_AddItemToObject(o, "watch", nullable_string(api_request_query(r, "watch")));
        cJSON_AddItemToObject(o, "name", nullable_string(api_request_query(r, "name")));
        cJSON_AddItemToObject(o, "flag", nullable_string(api_request_query(r, "flag")));
        cJSON_AddItemToObject(o, "missing", nullable_string(api_request_query(r, "missing")));
        cJSON_AddNumberToObject(o, "pid", p->pid);
        cJSON_AddNumberToObject(o, "uid", p->uid);
        cJSON_AddNumberToObject(o, "gid", p->gid);
        cJSON_AddBoolToObject(o, "privileged", p->privileged);
        return api_reply_json(r, 200, o);
}

static int h_body(struct api_request *r, void *userdata) {
        size_t size;
        const char *body = api_request_body(r, &size);
        cJSON *o = cJSON_CreateObject();

        cJSON_AddNumberToObject(o, "size", (double) size);
        cJSON_AddBoolToObject(o, "terminated", body[size] == 0);
        cJSON_AddStringToObject(o, "body", body);
        return api_reply_json(r, 200, o);
}

static int h_ok(struct api_request *r, void *userdata) {
        return api_reply_text(r, 200, "text/plain", strdup("ok\n"), 3);
}

static int h_fail(struct api_request *r, void *userdata) {
        return -EIO; /* no reply: the API answers 500 */
}

static int h_metrics(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        char *text = NULL;
        size_t size = 0;
        int k;

        k = metrics_render(f->metrics, &text, &size);
        if (k < 0)
                return k;
        return api_reply_text(r, 200, "text/plain; version=0.0.4", text, size);
}

static void on_wait_abort(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        f->wait_timer = sd_event_source_disable_unref(f->wait_timer);
        f->wait_req = NULL;
        f->aborts++;
        maybe_exit(f);
}

static int on_wait_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct fixture *f = userdata;
        cJSON *o = cJSON_CreateObject();

        cJSON_AddBoolToObject(o, "waited", true);
        assert_int_equal(api_reply_json(f->wait_req, 200, o), 0);
        f->wait_req = NULL;
        f->wait_timer = sd_event_source_disable_unref(f->wait_timer);
        return 0;
}

/* A long-poll answered 100ms later from a timer. */
static int h_wait(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        assert_null(f->wait_req);
        f->wait_req = r;
        api_request_suspend(r, on_wait_abort, f);
        assert_int_equal(sd_event_add_time_relative(f->event, &f->wait_timer, CLOCK_MONOTONIC,
                                                    100 * USEC_PER_MSEC, 1, on_wait_timer, f),
                         0);
        return 0;
}

static void on_hold_abort(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        f->aborts++;
        maybe_exit(f);
}

static int on_free_api(sd_event_source *s, void *userdata) {
        struct fixture *f = userdata;

        f->api = api_free(f->api);
        return 0;
}

static void hold_noted(struct fixture *f) {
        f->holds++;
        signal_child(f);
        if (f->free_api_on_hold && f->holds == 2)
                assert_int_equal(sd_event_add_defer(f->event, NULL, on_free_api, f), 0);
}

/* A long-poll nobody answers: only the client leaving (or api_free) ends it. */
static int h_hold(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        api_request_suspend(r, on_hold_abort, f);
        hold_noted(f);
        return 0;
}

/* A stream that sends one line and then stays open. */
static int h_stream_hold(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        assert_int_equal(api_reply_stream(r, 200, "application/x-ndjson", on_hold_abort, f), 0);
        assert_int_equal(api_stream_write(r, "{\"n\":0}\n", 8), 0);
        hold_noted(f);
        return 0;
}

static void on_stream_abort(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        f->stream_timer = sd_event_source_disable_unref(f->stream_timer);
        f->stream_req = NULL;
        f->aborts++;
}

static int on_stream_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct fixture *f = userdata;
        char line[32];
        int n;

        if (f->stream_n == 5) {
                assert_int_equal(api_stream_end(f->stream_req), 0);
                /* Ended: no more writes. */
                assert_int_equal(api_stream_write(f->stream_req, "x", 1), -EINVAL);
                f->stream_req = NULL;
                f->stream_timer = sd_event_source_disable_unref(f->stream_timer);
                return 0;
        }
        n = snprintf(line, sizeof(line), "{\"n\":%u}\n", f->stream_n++);
        assert_int_equal(api_stream_write(f->stream_req, line, (size_t) n), 0);
        assert_int_equal(sd_event_source_set_time_relative(s, 20 * USEC_PER_MSEC), 0);
        assert_int_equal(sd_event_source_set_enabled(s, SD_EVENT_ONESHOT), 0);
        return 0;
}

/* Five NDJSON lines, 20ms apart, then the end. */
static int h_stream(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        assert_null(f->stream_req);
        f->stream_req = r;
        f->stream_n = 0;
        assert_int_equal(api_reply_stream(r, 200, "application/x-ndjson", on_stream_abort, f), 0);
        assert_int_equal(sd_event_add_time_relative(f->event, &f->stream_timer, CLOCK_MONOTONIC,
                                                    20 * USEC_PER_MSEC, 1, on_stream_timer, f),
                         0);
        return 0;
}

/* The gathering clients never leave early; if one did, its slot would dangle. */
static void on_gather_abort(struct api_request *r, void *userdata) {
        fail_msg("a gathered request was aborted");
}

/* Answers nobody until N_GATHER requests are held at once: proves they are concurrent. */
static int h_gather(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        assert_true(f->n_gather < N_GATHER);
        f->gather[f->n_gather++] = r;
        api_request_suspend(r, on_gather_abort, f);
        if (f->n_gather < N_GATHER)
                return 0;
        for (unsigned i = 0; i < N_GATHER; i++) {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddNumberToObject(o, "index", i);
                assert_int_equal(api_reply_json(f->gather[i], 200, o), 0);
        }
        /* Replying twice is refused (the request is finished). */
        assert_int_equal(api_reply_error(r, 500, "again"), -EALREADY);
        f->n_gather = 0;
        return 0;
}

static const struct api_route test_routes[] = {
        { "GET", "/v1/echo/{}/{}", h_echo, false },
        { "POST", "/v1/body", h_body, false },
        { "GET", "/v1/multi", h_ok, false },
        { "POST", "/v1/multi", h_ok, false },
        { "PUT", "/v1/multi", h_ok, false },
        { "POST", "/v1/multi", h_ok, false }, /* listed once in Allow */
        { "GET", "/v1/priv", h_ok, true },
        { "GET", "/", h_ok, false },
        { "GET", "/v1/fail", h_fail, false },
        { "GET", "/v1/wait", h_wait, false },
        { "GET", "/v1/hold", h_hold, false },
        { "GET", "/v1/stream", h_stream, false },
        { "GET", "/v1/stream-hold", h_stream_hold, false },
        { "GET", "/v1/gather", h_gather, false },
        { "GET", "/metrics", h_metrics, false },
};

/* ---- fixture ---- */

static int fixture_setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        strcpy(f->dir, "/tmp/test-api-XXXXXX");
        assert_non_null(mkdtemp(f->dir));
        /* Other users must reach the socket in the credential tests. */
        assert_int_equal(chmod(f->dir, 0755), 0);
        snprintf(f->sock, sizeof(f->sock), "%s/pinion.sock", f->dir);
        assert_int_equal(sd_event_new(&f->event), 0);
        assert_int_equal(metrics_new(&f->metrics), 0);
        assert_int_equal(pipe2(f->signal_fd, O_CLOEXEC), 0);
        *state = f;
        return 0;
}

static int fixture_teardown(void **state) {
        struct fixture *f = *state;

        f->wait_timer = sd_event_source_disable_unref(f->wait_timer);
        f->stream_timer = sd_event_source_disable_unref(f->stream_timer);
        f->api = api_free(f->api);
        (void) unlink(f->sock);
        (void) rmdir(f->dir);
        metrics_free(f->metrics);
        sd_event_unref(f->event);
        close(f->signal_fd[0]);
        close(f->signal_fd[1]);
        free(f);
        return 0;
}

static void api_start(struct fixture *f, mode_t mode, gid_t gid, bool with_metrics) {
        struct api_options opts = {
                .socket_path = f->sock,
                .socket_mode = mode,
                .socket_gid = gid,
                .listen_fd = -1,
                .max_body = 1024,
        };

        assert_int_equal(api_new(f->event, &opts, with_metrics ? f->metrics : NULL, &f->api), 0);
        assert_int_equal(api_add_routes(f->api, test_routes, ELEMENTSOF(test_routes), f, NULL), 0);
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        struct fixture *f = userdata;

        f->child_done = true;
        f->child_status = si->si_code == CLD_EXITED ? si->si_status : 128 + si->si_status;
        sd_event_source_disable_unref(s);
        maybe_exit(f);
        return 0;
}

static int on_guard(sd_event_source *s, uint64_t usec, void *userdata) {
        struct fixture *f = userdata;

        fprintf(stderr, "# guard timer: child_done=%d aborts=%u/%u\n", f->child_done, f->aborts,
                f->expect_aborts);
        f->timed_out = f->done = true;
        return 0;
}

typedef int (*client_fn)(struct fixture *f, void *arg);

/* Runs client() in a child while the loop serves it; asserts the child found no failure. */
static void run_client(struct fixture *f, client_fn client, void *arg) {
        sd_event_source *guard = NULL;
        pid_t pid;

        f->child_done = f->done = f->timed_out = false;
        f->child_status = -1;
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int failures = client(f, arg);
                /* _exit: the child must not run the parent's atexit handlers (or LSan's). */
                _exit(failures > 100 ? 100 : failures);
        }
        f->child = pid;
        assert_int_equal(sd_event_add_child(f->event, NULL, pid, WEXITED, on_child, f), 0);
        assert_int_equal(sd_event_add_time_relative(f->event, &guard, CLOCK_MONOTONIC, GUARD_USEC, 0,
                                                    on_guard, f),
                         0);
        /* sd_event_run() rather than sd_event_loop(): a loop that exited cannot run again,
         * and some tests serve several clients in turn. */
        while (!f->done)
                assert_true(sd_event_run(f->event, UINT64_MAX) >= 0);
        sd_event_source_disable_unref(guard);
        assert_false(f->timed_out);
        assert_true(f->child_done);
        assert_int_equal(f->child_status, 0);
}

/* ---- the client side (runs in the child) ---- */

static int child_failures;

#define CHECK(cond)                                                                             \
        do {                                                                                    \
                if (!(cond)) {                                                                  \
                        fprintf(stderr, "# child: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
                                #cond);                                                         \
                        child_failures++;                                                       \
                }                                                                               \
        } while (0)

struct reply {
        long status;
        char *body;
        size_t size;
        unsigned writes;
        char content_type[128];
        char allow[128];
        bool chunked;
        cJSON *json;
};

static void reply_clear(struct reply *r) {
        free(r->body);
        cJSON_Delete(r->json);
        *r = (struct reply) {};
}

static size_t on_curl_body(char *p, size_t size, size_t n, void *userdata) {
        struct reply *r = userdata;
        char *grown = realloc(r->body, r->size + size * n + 1);

        if (!grown)
                return 0;
        r->body = grown;
        memcpy(r->body + r->size, p, size * n);
        r->size += size * n;
        r->body[r->size] = 0;
        r->writes++;
        return size * n;
}

static void header_value(const char *line, size_t len, const char *name, char *out, size_t out_size) {
        size_t nlen = strlen(name);
        size_t vlen;

        if (len <= nlen || strncasecmp(line, name, nlen) != 0)
                return;
        line += nlen;
        len -= nlen;
        while (len > 0 && *line == ' ') {
                line++;
                len--;
        }
        vlen = len;
        while (vlen > 0 && (line[vlen - 1] == '\r' || line[vlen - 1] == '\n'))
                vlen--;
        snprintf(out, out_size, "%.*s", (int) vlen, line);
}

static size_t on_curl_header(char *p, size_t size, size_t n, void *userdata) {
        struct reply *r = userdata;
        char te[64] = "";

        header_value(p, size * n, "Content-Type:", r->content_type, sizeof(r->content_type));
        header_value(p, size * n, "Allow:", r->allow, sizeof(r->allow));
        header_value(p, size * n, "Transfer-Encoding:", te, sizeof(te));
        if (strcasecmp(te, "chunked") == 0)
                r->chunked = true;
        return size * n;
}

struct upload {
        const char *data;
        size_t size, off;
};

static size_t on_curl_read(char *buf, size_t size, size_t n, void *userdata) {
        struct upload *u = userdata;
        size_t k = MIN(size * n, u->size - u->off);

        k = MIN(k, (size_t) 100); /* many chunks */
        memcpy(buf, u->data + u->off, k);
        u->off += k;
        return k;
}

static void easy_setup(CURL *c, const struct fixture *f, const char *method, const char *path,
                       struct reply *out) {
        char url[512];

        snprintf(url, sizeof(url), "http://localhost%s", path);
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, f->sock);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 20L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_curl_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_curl_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, out);
        if (strcmp(method, "GET") == 0)
                curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        else if (strcmp(method, "HEAD") == 0)
                curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
}

/* One request; body (if any) is sent as is, or chunked when chunked is set. Parses JSON
 * replies into out->json. Returns the curl result. */
static CURLcode http(CURL *c, const struct fixture *f, const char *method, const char *path,
                     const char *body, size_t body_size, bool chunked, struct reply *out) {
        struct curl_slist *headers = NULL;
        struct upload u = { body, body_size, 0 };
        CURLcode rc;

        reply_clear(out);
        curl_easy_reset(c);
        easy_setup(c, f, method, path, out);
        if (body && chunked) {
                headers = curl_slist_append(headers, "Transfer-Encoding: chunked");
                curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
                curl_easy_setopt(c, CURLOPT_READFUNCTION, on_curl_read);
                curl_easy_setopt(c, CURLOPT_READDATA, &u);
        } else if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long) body_size);
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
        curl_slist_free_all(headers);
        if (out->body && strncmp(out->content_type, "application/json", 16) == 0)
                out->json = cJSON_Parse(out->body);
        return rc;
}

static const char *json_str(const struct reply *r, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool json_is_null(const struct reply *r, const char *key) {
        return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r->json, key));
}

static double json_num(const struct reply *r, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
        return cJSON_IsNumber(v) ? v->valuedouble : -12345;
}

static bool json_bool(const struct reply *r, const char *key) {
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->json, key));
}

/* An error reply is exactly {"error": "...", "code": N}. */
static void check_error(const struct reply *r, long status, const char *message) {
        CHECK(r->status == status);
        CHECK(strcmp(r->content_type, "application/json") == 0);
        CHECK(r->json && cJSON_GetArraySize(r->json) == 2);
        CHECK(json_num(r, "code") == (double) status);
        CHECK(json_str(r, "error") && strcmp(json_str(r, "error"), message) == 0);
        if (r->status != status)
                fprintf(stderr, "# child: status %ld, body %s\n", r->status, r->body ? r->body : "(none)");
}

/* A raw connection, for requests left half-done on purpose. */
static int raw_connect(const struct fixture *f) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        strcpy(sa.sun_path, f->sock);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -1;
        return fd;
}

static bool raw_send(int fd, const char *s) {
        return write(fd, s, strlen(s)) == (ssize_t) strlen(s);
}

static void wait_signal(const struct fixture *f) {
        char c;
        CHECK(read(f->signal_fd[0], &c, 1) == 1);
}

/* ---- tests ---- */

static int client_routing(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        CHECK(http(c, f, "GET", "/v1/echo/ns1/na%2Fme%20x?watch=1&name=a%20b&flag", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        CHECK(strcmp(r.content_type, "application/json") == 0);
        CHECK(r.json != NULL);
        CHECK(json_str(&r, "method") && strcmp(json_str(&r, "method"), "GET") == 0);
        CHECK(json_str(&r, "route") && strcmp(json_str(&r, "route"), "/v1/echo/{}/{}") == 0);
        CHECK(json_str(&r, "p0") && strcmp(json_str(&r, "p0"), "ns1") == 0);
        /* %2F is data inside a capture, not a separator. */
        CHECK(json_str(&r, "p1") && strcmp(json_str(&r, "p1"), "na/me x") == 0);
        CHECK(json_is_null(&r, "p2"));
        CHECK(json_str(&r, "watch") && strcmp(json_str(&r, "watch"), "1") == 0);
        CHECK(json_str(&r, "name") && strcmp(json_str(&r, "name"), "a b") == 0);
        CHECK(json_str(&r, "flag") && strcmp(json_str(&r, "flag"), "") == 0);
        CHECK(json_is_null(&r, "missing"));
        /* The peer is this child, as the kernel saw it. */
        CHECK(json_num(&r, "pid") == (double) getpid());
        CHECK(json_num(&r, "uid") == (double) getuid());
        CHECK(json_num(&r, "gid") == (double) getgid());
        CHECK(json_bool(&r, "privileged") == (getuid() == 0));

        /* Literal segments are compared decoded too. */
        CHECK(http(c, f, "GET", "/v1/%65cho/a/b", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        CHECK(http(c, f, "GET", "/", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200 && r.size == 3 && strcmp(r.body, "ok\n") == 0);
        CHECK(strcmp(r.content_type, "text/plain") == 0);
        CHECK(http(c, f, "HEAD", "/v1/multi", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200 && r.size == 0);

        /* Too few, too many, empty capture, trailing slash. */
        CHECK(http(c, f, "GET", "/v1/echo/a", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 404, "not found");
        CHECK(http(c, f, "GET", "/v1/echo/a/b/c", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 404, "not found");
        CHECK(http(c, f, "GET", "/v1/echo//b", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 404, "not found");
        CHECK(http(c, f, "GET", "/v1/multi/", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 404, "not found");
        /* Encodings that cannot be right. */
        CHECK(http(c, f, "GET", "/v1/echo/a%00b/c", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 400, "malformed request path");
        CHECK(http(c, f, "GET", "/v1/echo/a%zzb/c", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 400, "malformed request path");
        CHECK(http(c, f, "GET", "/v1/echo/a/b%2", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 400, "malformed request path");
        /* A handler that fails without replying. */
        CHECK(http(c, f, "GET", "/v1/fail", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 500, "internal error: Input/output error");

        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_routing(void **state) {
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_routing, NULL);
        assert_int_equal(f->echo_calls, 2);
        assert_int_equal(f->last_peer.pid, f->child);
        assert_int_equal(f->last_peer.uid, getuid());
}

static int client_errors(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};
        char big[2000], fits[1024 + 1];

        CHECK(http(c, f, "DELETE", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 405, "method not allowed");
        CHECK(strcmp(r.allow, "GET") == 0);
        CHECK(http(c, f, "DELETE", "/v1/multi", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 405, "method not allowed");
        CHECK(strcmp(r.allow, "GET, POST, PUT") == 0);
        CHECK(http(c, f, "GET", "/nope", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 404, "not found");
        CHECK(r.body && strcmp(r.body, "{\"error\":\"not found\",\"code\":404}\n") == 0);
        /* Refused without a body: the connection stays open for the next request. */
        CHECK(http(c, f, "GET", "/v1/echo/x/y", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        long connects = -1;
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        CHECK(connects == 0);

        /* A body of exactly max_body is fine; its echo comes back NUL-terminated. */
        memset(fits, 'a', sizeof(fits) - 1);
        fits[sizeof(fits) - 1] = 0;
        CHECK(http(c, f, "POST", "/v1/body", fits, 1024, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        CHECK(json_num(&r, "size") == 1024);
        CHECK(json_bool(&r, "terminated"));
        CHECK(json_str(&r, "body") && strcmp(json_str(&r, "body"), fits) == 0);
        /* Chunked, in 100-byte pieces. */
        CHECK(http(c, f, "POST", "/v1/body", "hello chunked world", 19, true, &r) == CURLE_OK);
        CHECK(r.status == 200);
        CHECK(json_str(&r, "body") && strcmp(json_str(&r, "body"), "hello chunked world") == 0);
        /* Empty body. */
        CHECK(http(c, f, "POST", "/v1/body", "", 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200 && json_num(&r, "size") == 0);

        /* One byte over, declared: refused before it is read. */
        memset(big, 'b', sizeof(big));
        CHECK(http(c, f, "POST", "/v1/body", big, 1025, false, &r) == CURLE_OK);
        check_error(&r, 413, "request body too large");
        CHECK(http(c, f, "POST", "/v1/body", big, sizeof(big), false, &r) == CURLE_OK);
        check_error(&r, 413, "request body too large");
        /* Over, chunked: read, dropped, refused. */
        CHECK(http(c, f, "POST", "/v1/body", big, sizeof(big), true, &r) == CURLE_OK);
        check_error(&r, 413, "request body too large");
        /* And the server is still fine. */
        CHECK(http(c, f, "GET", "/v1/echo/x/y", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);

        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_errors(void **state) {
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_errors, NULL);
}

struct identity {
        uid_t uid;
        gid_t gid;
        gid_t group; /* a supplementary group, or -1 */
        bool privileged;
};

static int client_identity(struct fixture *f, void *arg) {
        const struct identity *id = arg;
        struct reply r = {};
        CURL *c;

        if (id->group != (gid_t) -1)
                CHECK(setgroups(1, &id->group) == 0);
        else
                CHECK(setgroups(0, NULL) == 0);
        CHECK(setgid(id->gid) == 0);
        CHECK(setuid(id->uid) == 0);
        if (child_failures > 0)
                return child_failures;

        c = curl_easy_init();
        CHECK(http(c, f, "GET", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        CHECK(json_num(&r, "uid") == (double) id->uid);
        CHECK(json_num(&r, "gid") == (double) id->gid);
        CHECK(json_num(&r, "pid") == (double) getpid());
        CHECK(json_bool(&r, "privileged") == id->privileged);
        CHECK(http(c, f, "GET", "/v1/priv", NULL, 0, false, &r) == CURLE_OK);
        if (id->privileged)
                CHECK(r.status == 200);
        else
                check_error(&r, 403, "permission denied");
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_peer_credentials(void **state) {
        struct fixture *f = *state;
        const gid_t group = 4242;
        const struct identity nobody = { 65534, 65534, (gid_t) -1, false };
        const struct identity primary = { 65534, group, (gid_t) -1, true };
        const struct identity supplementary = { 65534, 65534, group, true };
        const struct identity other = { 65534, 65534, 4343, false };
        const struct identity root = { 0, 0, (gid_t) -1, true };

        if (getuid() != 0)
                skip(); /* needs to become other users */

        api_start(f, 0666, group, true);
        run_client(f, client_identity, (void *) &nobody);
        run_client(f, client_identity, (void *) &primary);
        run_client(f, client_identity, (void *) &supplementary);
        run_client(f, client_identity, (void *) &other);
        run_client(f, client_identity, (void *) &root);
        assert_int_equal(f->last_peer.uid, 0);
        assert_int_equal(f->last_peer.pid, f->child);

        /* Reload: the group changes, so does who is privileged. */
        assert_int_equal(api_set_access(f->api, 0666, (gid_t) -1), 0);
        const struct identity primary_now = { 65534, group, (gid_t) -1, false };
        run_client(f, client_identity, (void *) &primary_now);
        assert_int_equal(api_set_access(f->api, 0666, 4343), 0);
        const struct identity other_now = { 65534, 65534, 4343, true };
        run_client(f, client_identity, (void *) &other_now);
}

static int client_long_poll(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        for (int i = 0; i < 3; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);

                CHECK(http(c, f, "GET", "/v1/wait", NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
                CHECK(json_bool(&r, "waited"));
                CHECK(now_usec(CLOCK_MONOTONIC) - t0 >= 100 * USEC_PER_MSEC);
                /* The connection is still good for an ordinary request. */
                CHECK(http(c, f, "GET", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
        }
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_long_poll(void **state) {
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_long_poll, NULL);
        assert_int_equal(f->aborts, 0);
        assert_null(f->wait_req);
}

static int client_stream(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        for (int i = 0; i < 2; i++) {
                CHECK(http(c, f, "GET", "/v1/stream", NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
                CHECK(r.chunked);
                CHECK(strcmp(r.content_type, "application/x-ndjson") == 0);
                CHECK(r.body && strcmp(r.body, "{\"n\":0}\n{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n") == 0);
                /* The lines arrived as they were written, not all at the end. */
                CHECK(r.writes >= 3);
        }
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_stream(void **state) {
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_stream, NULL);
        assert_int_equal(f->aborts, 0);
        assert_null(f->stream_req);
}

static int client_abort(struct fixture *f, void *arg) {
        char buf[512];
        ssize_t n;
        int fd;

        /* A long-poll: hang up while it is held. */
        fd = raw_connect(f);
        CHECK(fd >= 0);
        CHECK(raw_send(fd, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        close(fd);

        /* A stream: read its first line, then hang up. */
        fd = raw_connect(f);
        CHECK(fd >= 0);
        CHECK(raw_send(fd, "GET /v1/stream-hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        n = read(fd, buf, sizeof(buf) - 1);
        CHECK(n > 0);
        buf[n > 0 ? n : 0] = 0;
        CHECK(strstr(buf, "HTTP/1.1 200") == buf);
        close(fd);

        /* Half-closed after sending: still "gone" (EPOLLRDHUP). */
        fd = raw_connect(f);
        CHECK(fd >= 0);
        CHECK(raw_send(fd, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        CHECK(shutdown(fd, SHUT_WR) == 0);
        n = read(fd, buf, sizeof(buf));
        CHECK(n == 0); /* closed without a reply */
        close(fd);
        return child_failures;
}

static void test_abort(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *text = NULL;

        api_start(f, 0660, (gid_t) -1, true);
        f->expect_aborts = 3;
        run_client(f, client_abort, NULL);
        assert_int_equal(f->aborts, 3);

        assert_int_equal(metrics_render(f->metrics, &text, NULL), 0);
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/hold\",code=\"499\"} 2\n"));
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/stream-hold\",code=\"200\"} 1\n"));
}

static int client_free_held(struct fixture *f, void *arg) {
        char buf[4096];
        size_t got = 0;
        ssize_t n;
        int a, b;

        a = raw_connect(f);
        b = raw_connect(f);
        CHECK(a >= 0 && b >= 0);
        CHECK(raw_send(a, "GET /v1/hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        CHECK(raw_send(b, "GET /v1/stream-hold HTTP/1.1\r\nHost: x\r\n\r\n"));
        wait_signal(f);
        /* api_free() now runs: both connections are closed. */
        CHECK(read(a, buf, sizeof(buf)) == 0);
        while ((n = read(b, buf + got, sizeof(buf) - 1 - got)) > 0)
                got += (size_t) n;
        CHECK(n == 0);
        buf[got] = 0;
        CHECK(strstr(buf, "HTTP/1.1 200") == buf);
        CHECK(strstr(buf, "{\"n\":0}") != NULL);
        close(a);
        close(b);
        return child_failures;
}

static void test_free_with_held_requests(void **state) {
        struct fixture *f = *state;
        struct stat st;

        api_start(f, 0660, (gid_t) -1, false); /* and no metrics */
        f->free_api_on_hold = true;
        f->expect_aborts = 2;
        run_client(f, client_free_held, NULL);
        assert_null(f->api);
        assert_int_equal(f->aborts, 2);
        assert_int_equal(stat(f->sock, &st), -1); /* unlinked */
}

static int client_many(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init(), *easy[N_GATHER];
        struct reply r = {}, replies[N_GATHER] = {};
        CURLM *multi = curl_multi_init();
        bool seen[N_GATHER] = {};
        int running = 0;
        long connects = 0;

        /* 100 sequential on one keep-alive connection... */
        for (int i = 0; i < 100; i++) {
                char path[64];
                snprintf(path, sizeof(path), "/v1/echo/seq/%d", i);
                CHECK(http(c, f, "GET", path, NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200);
                CHECK(json_str(&r, "p1") && atoi(json_str(&r, "p1")) == i);
        }
        curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &connects);
        /* ...and 100 on fresh connections. */
        for (int i = 0; i < 100; i++) {
                curl_easy_reset(c);
                reply_clear(&r);
                easy_setup(c, f, "GET", "/v1/echo/fresh/x", &r);
                curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
                curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
                CHECK(curl_easy_perform(c) == CURLE_OK);
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
                CHECK(r.status == 200);
        }

        /* 20 at once: the server answers none until it holds all 20. */
        for (int i = 0; i < N_GATHER; i++) {
                easy[i] = curl_easy_init();
                easy_setup(easy[i], f, "GET", "/v1/gather", &replies[i]);
                curl_multi_add_handle(multi, easy[i]);
        }
        do {
                CHECK(curl_multi_perform(multi, &running) == CURLM_OK);
                if (running)
                        CHECK(curl_multi_poll(multi, NULL, 0, 1000, NULL) == CURLM_OK);
        } while (running > 0 && child_failures == 0);
        for (int i = 0; i < N_GATHER; i++) {
                cJSON *j;
                const cJSON *idx;

                curl_easy_getinfo(easy[i], CURLINFO_RESPONSE_CODE, &replies[i].status);
                CHECK(replies[i].status == 200);
                j = replies[i].body ? cJSON_Parse(replies[i].body) : NULL;
                idx = cJSON_GetObjectItemCaseSensitive(j, "index");
                CHECK(cJSON_IsNumber(idx) && idx->valueint >= 0 && idx->valueint < N_GATHER &&
                      !seen[idx->valueint]);
                if (cJSON_IsNumber(idx) && idx->valueint >= 0 && idx->valueint < N_GATHER)
                        seen[idx->valueint] = true;
                cJSON_Delete(j);
                curl_multi_remove_handle(multi, easy[i]);
                curl_easy_cleanup(easy[i]);
                reply_clear(&replies[i]);
        }
        curl_multi_cleanup(multi);
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_many_requests(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *text = NULL;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_many, NULL);
        assert_int_equal(f->echo_calls, 200);
        assert_int_equal(metrics_render(f->metrics, &text, NULL), 0);
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/echo/{}/{}\",code=\"200\"} 200\n"));
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/gather\",code=\"200\"} 20\n"));
}

static int client_metrics(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        for (int i = 0; i < 3; i++)
                CHECK(http(c, f, "GET", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
        CHECK(http(c, f, "GET", "/nope", NULL, 0, false, &r) == CURLE_OK);
        CHECK(http(c, f, "GET", "/nope/again", NULL, 0, false, &r) == CURLE_OK);
        CHECK(http(c, f, "PUT", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
        CHECK(http(c, f, "GET", "/v1/fail", NULL, 0, false, &r) == CURLE_OK);

        CHECK(http(c, f, "GET", "/metrics", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        CHECK(strcmp(r.content_type, "text/plain; version=0.0.4") == 0);
        CHECK(r.body != NULL);
        if (!r.body)
                return child_failures;
        CHECK(strstr(r.body, "# TYPE pinion_api_requests_total counter\n") != NULL);
        CHECK(strstr(r.body, "# TYPE pinion_api_request_duration_seconds histogram\n") != NULL);
        CHECK(strstr(r.body, "\npinion_api_requests_total{route=\"/v1/echo/{}/{}\",code=\"200\"} 3\n") != NULL);
        CHECK(strstr(r.body, "\npinion_api_requests_total{route=\"unmatched\",code=\"404\"} 2\n") != NULL);
        CHECK(strstr(r.body, "\npinion_api_requests_total{route=\"unmatched\",code=\"405\"} 1\n") != NULL);
        CHECK(strstr(r.body, "\npinion_api_requests_total{route=\"/v1/fail\",code=\"500\"} 1\n") != NULL);
        CHECK(strstr(r.body, "\npinion_api_request_duration_seconds_count{route=\"/v1/echo/{}/{}\"} 3\n") != NULL);
        CHECK(strstr(r.body, "\npinion_api_request_duration_seconds_bucket{route=\"/v1/echo/{}/{}\",le=\"+Inf\"} 3\n") != NULL);
        CHECK(strstr(r.body, "\npinion_api_request_duration_seconds_count{route=\"unmatched\"} 3\n") != NULL);
        /* The /metrics request itself is counted once it is done, not before. */
        CHECK(strstr(r.body, "route=\"/metrics\"") == NULL);
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_metrics_counted(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *text = NULL;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_metrics, NULL);
        assert_int_equal(metrics_render(f->metrics, &text, NULL), 0);
        assert_non_null(strstr(text, "\npinion_api_requests_total{route=\"/metrics\",code=\"200\"} 1\n"));
}

static unsigned count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        unsigned n = 0;

        assert_non_null(d);
        while (readdir(d))
                n++;
        closedir(d);
        return n;
}

static int listening_socket(const char *path, bool do_listen) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        strcpy(sa.sun_path, path);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        if (do_listen)
                assert_int_equal(listen(fd, 16), 0);
        return fd;
}

static int client_one(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        CHECK(http(c, f, "GET", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_socket(void **state) {
        struct fixture *f = *state;
        struct api_options opts = { .socket_path = f->sock, .socket_mode = 0640, .socket_gid = (gid_t) -1, .listen_fd = -1 };
        struct api *other = NULL;
        struct stat st;
        unsigned fds;
        int fd;
        mode_t old_umask;

        /* The mode is exact whatever the umask. */
        old_umask = umask(0077);
        assert_int_equal(api_new(f->event, &opts, NULL, &f->api), 0);
        umask(old_umask);
        assert_int_equal(lstat(f->sock, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_string_equal(api_socket_path(f->api), f->sock);
        assert_int_equal(api_set_access(f->api, 0660, getuid() == 0 ? 4242 : (gid_t) -1), 0);
        assert_int_equal(lstat(f->sock, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0660);
        if (getuid() == 0)
                assert_int_equal(st.st_gid, 4242);

        /* A live socket is not stolen. */
        assert_int_equal(api_new(f->event, &opts, NULL, &other), -EADDRINUSE);
        assert_null(other);
        f->api = api_free(f->api);
        assert_int_equal(lstat(f->sock, &st), -1);

        /* A stale one is replaced; no fd is left behind by new + free. */
        fd = listening_socket(f->sock, false);
        close(fd);
        fds = count_fds();
        opts.socket_gid = getuid() == 0 ? 4242 : (gid_t) -1;
        assert_int_equal(api_new(f->event, &opts, f->metrics, &f->api), 0);
        assert_int_equal(api_add_routes(f->api, test_routes, ELEMENTSOF(test_routes), f, NULL), 0);
        assert_int_equal(lstat(f->sock, &st), 0);
        if (getuid() == 0)
                assert_int_equal(st.st_gid, 4242);
        run_client(f, client_one, NULL);
        f->api = api_free(f->api);
        assert_int_equal(count_fds(), fds);

        /* Something that is not a socket is left alone. */
        fd = open(f->sock, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        close(fd);
        assert_int_equal(api_new(f->event, &opts, NULL, &other), -EEXIST);
        assert_int_equal(unlink(f->sock), 0);

        /* Bad options. */
        opts.socket_path = NULL;
        assert_int_equal(api_new(f->event, &opts, NULL, &other), -EINVAL);
        opts.socket_path = "/tmp/a-socket-path-that-is-far-too-long-for-sun-path-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
        assert_int_equal(api_new(f->event, &opts, NULL, &other), -ENAMETOOLONG);
        assert_null(other);
}

static void test_socket_activation(void **state) {
        struct fixture *f = *state;
        struct api_options opts = { .socket_mode = 0660, .socket_gid = (gid_t) -1 };
        struct stat st;

        /* systemd made the file with its SocketMode=; socket-mode is what counts once we run. */
        opts.listen_fd = listening_socket(f->sock, true);
        assert_int_equal(chmod(f->sock, 0600), 0);
        assert_int_equal(api_new(f->event, &opts, f->metrics, &f->api), 0);
        assert_int_equal(lstat(f->sock, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0660);
        assert_int_equal(api_set_access(f->api, 0666, getuid() == 0 ? 4242 : (gid_t) -1), 0);
        assert_int_equal(lstat(f->sock, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0666);
        if (getuid() == 0)
                assert_int_equal(st.st_gid, 4242);
        /* No path given: found from the socket. */
        assert_string_equal(api_socket_path(f->api), f->sock);
        assert_int_equal(api_add_routes(f->api, test_routes, ELEMENTSOF(test_routes), f, NULL), 0);
        run_client(f, client_one, NULL);
        f->api = api_free(f->api);
        /* Not ours to unlink; the fd was ours to close. */
        assert_int_equal(lstat(f->sock, &st), 0);
        assert_int_equal(fcntl(opts.listen_fd, F_GETFD), -1);
}

/* Reads until the server closes (or 64K), returns what came. */
static size_t raw_read_all(int fd, char *buf, size_t size) {
        size_t got = 0;
        ssize_t n;

        while (got < size - 1 && (n = read(fd, buf + got, size - 1 - got)) > 0)
                got += (size_t) n;
        buf[got] = 0;
        return got;
}

static int client_malformed(struct fixture *f, void *arg) {
        static char buf[65536], big[40000];
        CURL *c = curl_easy_init();
        struct reply r = {};
        int fd;

        /* Connect and leave. */
        fd = raw_connect(f);
        CHECK(fd >= 0);
        close(fd);

        /* Not HTTP: MHD answers it (or just closes); either way nothing reaches a handler. */
        fd = raw_connect(f);
        CHECK(raw_send(fd, "GARBAGE\r\n\r\n"));
        raw_read_all(fd, buf, sizeof(buf));
        CHECK(buf[0] == 0 || strncmp(buf, "HTTP/1.1 4", 10) == 0);
        close(fd);

        /* A header bigger than a connection's memory pool. */
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = 0;
        fd = raw_connect(f);
        CHECK(raw_send(fd, "GET /v1/echo/a/b HTTP/1.1\r\nHost: x\r\nX-Big: "));
        (void) raw_send(fd, big); /* the server may close before all of it is read */
        (void) raw_send(fd, "\r\n\r\n");
        raw_read_all(fd, buf, sizeof(buf));
        CHECK(buf[0] == 0 || strncmp(buf, "HTTP/1.1 4", 10) == 0);
        close(fd);

        /* A request cut off in its headers. */
        fd = raw_connect(f);
        CHECK(raw_send(fd, "GET /v1/echo/a/b HTTP/1.1\r\nHost: x\r\n"));
        close(fd);

        /* A body cut off half way. */
        fd = raw_connect(f);
        CHECK(raw_send(fd, "POST /v1/body HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf"));
        close(fd);

        /* Still serving. */
        CHECK(http(c, f, "GET", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_malformed(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *text = NULL;

        api_start(f, 0660, (gid_t) -1, true);
        run_client(f, client_malformed, NULL);
        assert_int_equal(f->echo_calls, 1);
        assert_int_equal(metrics_render(f->metrics, &text, NULL), 0);
        assert_non_null(strstr(text, "pinion_api_requests_total{route=\"/v1/echo/{}/{}\",code=\"200\"} 1\n"));
}

static int on_exit_now(sd_event_source *s, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

/* sd-event refuses new sources on a loop that has finished: api_new() must fail cleanly
 * (MHD already started: its socket is closed once, not twice). */
static void test_new_on_finished_loop(void **state) {
        struct fixture *f = *state;
        struct api_options opts = { .socket_path = f->sock, .socket_mode = 0660, .socket_gid = (gid_t) -1, .listen_fd = -1 };
        struct api *a = NULL;
        struct stat st;
        unsigned fds;

        assert_int_equal(sd_event_add_defer(f->event, NULL, on_exit_now, NULL), 0);
        assert_int_equal(sd_event_loop(f->event), 0);
        fds = count_fds();
        assert_true(api_new(f->event, &opts, f->metrics, &a) < 0);
        assert_null(a);
        assert_int_equal(count_fds(), fds);
        assert_int_equal(lstat(f->sock, &st), -1);
}

static void test_routes_refused(void **state) {
        struct fixture *f = *state;
        const struct api_route bad_pattern[] = { { "GET", "v1/x", h_ok, false } };
        const struct api_route no_handler[] = { { "GET", "/v1/x", NULL, false } };
        const struct api_route too_many[] = { { "GET", "/{}/{}/{}/{}/{}/{}/{}/{}/{}", h_ok, false } };

        api_start(f, 0660, (gid_t) -1, false);
        assert_int_equal(api_add_routes(f->api, bad_pattern, 1, f, NULL), -EINVAL);
        assert_int_equal(api_add_routes(f->api, no_handler, 1, f, NULL), -EINVAL);
        assert_int_equal(api_add_routes(f->api, too_many, 1, f, NULL), -EINVAL);
        assert_int_equal(api_add_routes(f->api, NULL, 0, f, NULL), 0);
        assert_null(api_free(NULL));
        assert_null(api_request_method(NULL));
        assert_null(api_request_param(NULL, 0));
}

/* ---- routes removed by their owner ---- */

static struct api_routes *removable_set;
static struct api_request *removable_held;

static void on_removable_abort(struct api_request *r, void *userdata) {
        fail_msg("the held request of a removed route was aborted");
}

static int h_removable_hold(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;
        removable_held = r;
        api_request_suspend(r, on_removable_abort, f);
        signal_child(f);
        return 0;
}

/* Removes the set, then answers the request it held: its route outlives the removal. */
static int h_remove(struct api_request *r, void *userdata) {
        removable_set = api_routes_free(removable_set);
        if (removable_held) {
                assert_int_equal(api_reply_text(removable_held, 200, "text/plain", strdup("late\n"), 5), 0);
                removable_held = NULL;
        }
        return api_reply_text(r, 200, "text/plain", strdup("removed\n"), 8);
}

static int client_route_removal(struct fixture *f, void *arg) {
        static char buf[4096];
        CURL *c = curl_easy_init();
        struct reply r = {};
        int fd;

        CHECK(http(c, f, "GET", "/v1/removable", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        fd = raw_connect(f);
        CHECK(fd >= 0 && raw_send(fd, "GET /v1/removable-hold HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
        wait_signal(f);
        CHECK(http(c, f, "GET", "/v1/remove", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        raw_read_all(fd, buf, sizeof(buf));
        CHECK(strncmp(buf, "HTTP/1.1 200", 12) == 0 && strstr(buf, "\r\n\r\nlate\n"));
        close(fd);
        /* Gone, the rest of the table as it was. */
        CHECK(http(c, f, "GET", "/v1/removable", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 404, "not found");
        CHECK(http(c, f, "GET", "/v1/removable-hold", NULL, 0, false, &r) == CURLE_OK);
        check_error(&r, 404, "not found");
        CHECK(http(c, f, "GET", "/v1/echo/a/b", NULL, 0, false, &r) == CURLE_OK);
        CHECK(r.status == 200);
        reply_clear(&r);
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_route_removal(void **state) {
        static const struct api_route removable[] = {
                { "GET", "/v1/removable", h_ok, false },
                { "GET", "/v1/removable-hold", h_removable_hold, false },
        };
        static const struct api_route control[] = { { "GET", "/v1/remove", h_remove, false } };
        struct fixture *f = *state;
        _cleanup_free_ char *text = NULL;
        size_t n;

        api_start(f, 0660, (gid_t) -1, true);
        n = api_route_count(f->api);
        assert_int_equal(api_add_routes(f->api, control, ELEMENTSOF(control), f, NULL), 0);
        assert_int_equal(api_add_routes(f->api, removable, ELEMENTSOF(removable), f, &removable_set), 0);
        assert_int_equal(api_route_count(f->api), n + 3);
        run_client(f, client_route_removal, NULL);
        assert_null(removable_set);
        assert_int_equal(api_route_count(f->api), n + 1);
        /* The request in flight was counted under the route it matched. */
        assert_int_equal(metrics_render(f->metrics, &text, NULL), 0);
        assert_non_null(strstr(text, "\npinion_api_requests_total{route=\"/v1/removable-hold\",code=\"200\"} 1\n"));

        /* Added again: served again; a set outliving its API is freed without it. */
        assert_int_equal(api_add_routes(f->api, removable, ELEMENTSOF(removable), f, &removable_set), 0);
        assert_int_equal(api_route_count(f->api), n + 3);
        f->api = api_free(f->api);
        removable_set = api_routes_free(removable_set);
        assert_null(api_routes_free(NULL));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_routing, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_peer_credentials, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_long_poll, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_stream, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_abort, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_free_with_held_requests, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_many_requests, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_metrics_counted, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_malformed, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_socket, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_socket_activation, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_new_on_finished_loop, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_routes_refused, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_route_removal, fixture_setup, fixture_teardown),
        };
        sigset_t ss;

        /* sd_event_add_child() needs SIGCHLD blocked; a client hanging up must not kill us. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);

        int failed = cmocka_run_group_tests_name("api", tests, NULL, NULL);
        curl_global_cleanup();
        return failed;
}
