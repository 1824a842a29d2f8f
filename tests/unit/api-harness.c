/* SPDX-License-Identifier: MIT */
/* The harness of the local API tests (api-harness.h): the fixture, the test routes and their
 * handlers, the forked client and the client's side of HTTP. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "api-harness.h"

#define GUARD_USEC (30 * USEC_PER_SEC)

/* ---- handlers ---- */

void signal_child(struct fixture *f) {
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
        const struct peer *p = api_request_peer(r);
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

int h_ok(struct api_request *r, void *userdata) {
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
        api_reply_suspend(r, on_wait_abort, f);
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

        api_reply_suspend(r, on_hold_abort, f);
        hold_noted(f);
        return 0;
}

/* A stream that sends one line and then stays open. */
static int h_stream_hold(struct api_request *r, void *userdata) {
        struct fixture *f = userdata;

        assert_int_equal(api_reply_stream(r, 200, "application/x-ndjson", on_hold_abort, f), 0);
        assert_int_equal(api_reply_stream_write(r, "{\"n\":0}\n", 8), 0);
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
                assert_int_equal(api_reply_stream_end(f->stream_req), 0);
                /* Ended: no more writes. */
                assert_int_equal(api_reply_stream_write(f->stream_req, "x", 1), -EINVAL);
                f->stream_req = NULL;
                f->stream_timer = sd_event_source_disable_unref(f->stream_timer);
                return 0;
        }
        n = snprintf(line, sizeof(line), "{\"n\":%u}\n", f->stream_n++);
        assert_int_equal(api_reply_stream_write(f->stream_req, line, (size_t) n), 0);
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
        api_reply_suspend(r, on_gather_abort, f);
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

const struct api_route test_routes[] = {
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
const size_t n_test_routes = ELEMENTSOF(test_routes);

/* ---- fixture ---- */

int fixture_setup(void **state) {
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

int fixture_teardown(void **state) {
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

void api_start(struct fixture *f, mode_t mode, gid_t gid, bool with_metrics) {
        struct api_options opts = {
                .socket_path = f->sock,
                .socket_mode = mode,
                .socket_gid = gid,
                .listen_fd = -1,
                .max_body = 1024,
        };

        assert_int_equal(api_new(f->event, &opts, with_metrics ? f->metrics : NULL, &f->api), 0);
        assert_int_equal(api_add_routes(f->api, test_routes, n_test_routes, f, NULL), 0);
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

/* Runs client() in a child while the loop serves it; asserts the child found no failure. */
void run_client(struct fixture *f, client_fn client, void *arg) {
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

int child_failures;

void reply_clear(struct reply *r) {
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

void easy_setup(CURL *c, const struct fixture *f, const char *method, const char *path,
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
CURLcode http(CURL *c, const struct fixture *f, const char *method, const char *path,
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

const char *json_str(const struct reply *r, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool json_is_null(const struct reply *r, const char *key) {
        return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(r->json, key));
}

double json_num(const struct reply *r, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->json, key);
        return cJSON_IsNumber(v) ? v->valuedouble : -12345;
}

bool json_bool(const struct reply *r, const char *key) {
        return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r->json, key));
}

/* An error reply is exactly {"error": "...", "code": N}. */
void check_error(const struct reply *r, long status, const char *message) {
        CHECK(r->status == status);
        CHECK(strcmp(r->content_type, "application/json") == 0);
        CHECK(r->json && cJSON_GetArraySize(r->json) == 2);
        CHECK(json_num(r, "code") == (double) status);
        CHECK(json_str(r, "error") && strcmp(json_str(r, "error"), message) == 0);
        if (r->status != status)
                fprintf(stderr, "# child: status %ld, body %s\n", r->status, r->body ? r->body : "(none)");
}

/* A raw connection, for requests left half-done on purpose. */
int raw_connect(const struct fixture *f) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        strcpy(sa.sun_path, f->sock);
        if (fd < 0 || connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -1;
        return fd;
}

bool raw_send(int fd, const char *s) {
        return write(fd, s, strlen(s)) == (ssize_t) strlen(s);
}

void wait_signal(const struct fixture *f) {
        char c;
        CHECK(read(f->signal_fd[0], &c, 1) == 1);
}

/* ---- setting up the test program ---- */

void api_harness_init(void) {
        sigset_t ss;

        /* sd_event_add_child() needs SIGCHLD blocked; a client hanging up must not kill us. */
        sigemptyset(&ss);
        sigaddset(&ss, SIGCHLD);
        sigprocmask(SIG_BLOCK, &ss, NULL);
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
}

void api_harness_done(void) {
        curl_global_cleanup();
}
