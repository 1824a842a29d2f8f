/* SPDX-License-Identifier: MIT */
/* api.c against real clients (the harness is api-harness.h): routing, error replies, request
 * bodies, peer credentials and privilege, metrics, malformed requests, the socket itself and
 * routes removed by their owner. Long polls and streams are test-api-streams.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "acl-check.h"
#include "api-harness.h"

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
        if (getuid() == 0) /* let in by an ACL entry */
                assert_int_equal(acl_check_entry(f->sock, ACL_GROUP, 4242), 6);

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
        assert_int_equal(api_add_routes(f->api, test_routes, n_test_routes, f, NULL), 0);
        assert_int_equal(lstat(f->sock, &st), 0);
        if (getuid() == 0) /* mode 0640: the group may read, not connect */
                assert_int_equal(acl_check_entry(f->sock, ACL_GROUP, 4242), 4);
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
                assert_int_equal(acl_check_entry(f->sock, ACL_GROUP, 4242), 6);
        /* No path given: found from the socket. */
        assert_string_equal(api_socket_path(f->api), f->sock);
        assert_int_equal(api_add_routes(f->api, test_routes, n_test_routes, f, NULL), 0);
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
        api_reply_suspend(r, on_removable_abort, f);
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

/* ---- stand-ins: answering for routes another party does not serve ---- */

static bool standin_preempting;
static struct api_routes *standin_real_set;

static bool standin_preempt(void *userdata) {
        return standin_preempting;
}

static int h_standin(struct api_request *r, void *userdata) {
        return api_reply_text(r, 503, "text/plain", strdup("standin\n"), 8);
}

static int h_real(struct api_request *r, void *userdata) {
        return api_reply_text(r, 200, "text/plain", strdup("real\n"), 5);
}

/* What the party does: registers its route, is told not to be served, goes away. */
static int h_standin_control(struct api_request *r, void *userdata) {
        static const struct api_route real[] = { { "GET", "/v1/party", h_real, false } };
        struct fixture *f = userdata;
        const char *what = api_request_param(r, 0);

        if (streq(what, "register"))
                assert_int_equal(api_add_routes(f->api, real, ELEMENTSOF(real), f, &standin_real_set), 0);
        else if (streq(what, "preempt"))
                standin_preempting = true;
        else
                standin_real_set = api_routes_free(standin_real_set);
        return api_reply_text(r, 200, "text/plain", strdup("ok\n"), 3);
}

static bool get_text(CURL *c, struct fixture *f, const char *path, long status, const char *body) {
        struct reply r = {};
        bool ok = http(c, f, "GET", path, NULL, 0, false, &r) == CURLE_OK && r.status == status &&
                  r.size == strlen(body) && memcmp(r.body, body, r.size) == 0;
        reply_clear(&r);
        return ok;
}

static int client_standin(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        /* Nothing registered: the stand-in answers; another method is 405 naming its method. */
        CHECK(get_text(c, f, "/v1/party", 503, "standin\n"));
        CHECK(http(c, f, "POST", "/v1/party", NULL, 0, false, &r) == CURLE_OK && r.status == 405 && strcmp(r.allow, "GET") == 0);
        reply_clear(&r);
        /* The party's own route wins over it, until the stand-in preempts it. */
        CHECK(get_text(c, f, "/v1/control/register", 200, "ok\n"));
        CHECK(get_text(c, f, "/v1/party", 200, "real\n"));
        CHECK(get_text(c, f, "/v1/control/preempt", 200, "ok\n"));
        CHECK(get_text(c, f, "/v1/party", 503, "standin\n"));
        CHECK(get_text(c, f, "/v1/control/remove", 200, "ok\n"));
        CHECK(get_text(c, f, "/v1/party", 503, "standin\n"));
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_standin_routes(void **state) {
        static const struct api_route standin[] = { { "GET", "/v1/party", h_standin, false } };
        static const struct api_route control[] = { { "GET", "/v1/control/{}", h_standin_control, false } };
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, true);
        assert_int_equal(api_add_standin_routes(f->api, standin, ELEMENTSOF(standin), f, standin_preempt), 0);
        assert_int_equal(api_add_routes(f->api, control, ELEMENTSOF(control), f, NULL), 0);
        run_client(f, client_standin, NULL);
        assert_null(standin_real_set);
}

/* ---- a body holding a secret ---- */

#define SECRET_BODY "{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIGH\\n-----END PRIVATE KEY-----\\n\"}\n"

static int h_secret(struct api_request *r, void *userdata) {
        return api_reply_secret(r, 200, "application/json", strdup(SECRET_BODY), strlen(SECRET_BODY));
}

static int client_secret(struct fixture *f, void *arg) {
        CURL *c = curl_easy_init();
        struct reply r = {};

        /* Served whole, the same on a second request (each reply its own buffer, wiped when freed). */
        for (int i = 0; i < 2; i++) {
                CHECK(http(c, f, "GET", "/v1/secret", NULL, 0, false, &r) == CURLE_OK);
                CHECK(r.status == 200 && r.size == strlen(SECRET_BODY) && memcmp(r.body, SECRET_BODY, r.size) == 0);
                CHECK(strcmp(r.content_type, "application/json") == 0);
                reply_clear(&r);
        }
        curl_easy_cleanup(c);
        return child_failures;
}

static void test_secret_reply(void **state) {
        static const struct api_route routes[] = { { "GET", "/v1/secret", h_secret, false } };
        struct fixture *f = *state;

        api_start(f, 0660, (gid_t) -1, false);
        assert_int_equal(api_add_routes(f->api, routes, ELEMENTSOF(routes), f, NULL), 0);
        run_client(f, client_secret, NULL);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_routing, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_errors, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_peer_credentials, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_metrics_counted, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_malformed, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_socket, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_socket_activation, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_new_on_finished_loop, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_routes_refused, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_route_removal, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_standin_routes, fixture_setup, fixture_teardown),
                cmocka_unit_test_setup_teardown(test_secret_reply, fixture_setup, fixture_teardown),
        };
        int failed;

        api_harness_init();
        failed = cmocka_run_group_tests_name("api", tests, NULL, NULL);
        api_harness_done();
        return failed;
}
