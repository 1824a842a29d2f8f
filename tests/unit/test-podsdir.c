/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs.h"
#include "podsdir.h"
#include "strv.h"

#define NODE "node-7"

struct fixture {
        char tmp[64];
        char *dir; /* tmp/pods.d unless a test says otherwise */
        sd_event *event;
        struct pod_store *store;
        struct podsdir *podsdir;

        unsigned adds, updates, removes;
        unsigned scans, last_loaded, last_failed;
};

static void on_change(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct fixture *f = userdata;
        if (old && new)
                f->updates++;
        else if (new)
                f->adds++;
        else
                f->removes++;
}

static void on_scan(struct podsdir *d, unsigned n_loaded, unsigned n_failed, void *userdata) {
        struct fixture *f = userdata;
        f->scans++;
        f->last_loaded = n_loaded;
        f->last_failed = n_failed;
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(struct fixture));
        assert_non_null(f);
        strcpy(f->tmp, "/tmp/test-podsdir.XXXXXX");
        assert_non_null(mkdtemp(f->tmp));
        assert_true(asprintf(&f->dir, "%s/pods.d", f->tmp) > 0);
        assert_int_equal(sd_event_new(&f->event), 0);
        assert_int_equal(pod_store_new(&f->store), 0);
        assert_int_equal(pod_store_add_observer(f->store, on_change, f), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        podsdir_free(f->podsdir);
        pod_store_free(f->store);
        sd_event_unref(f->event);
        assert_int_equal(fs_rm_rf(f->tmp), 0);
        free(f->dir);
        free(f);
        return 0;
}

static void start(struct fixture *f) {
        assert_int_equal(podsdir_new(f->event, f->store, f->dir, NODE, &f->podsdir), 0);
        podsdir_set_scan_callback(f->podsdir, on_scan, f);
        assert_int_equal(podsdir_start(f->podsdir), 0);
}

static char *path_in(const char *dir, const char *name) {
        char *p;
        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        return p;
}

static void write_raw(const char *dir, const char *name, const char *content) {
        _cleanup_free_ char *p = path_in(dir, name);
        FILE *fp = fopen(p, "we");
        assert_non_null(fp);
        assert_int_equal(fputs(content, fp) >= 0, 1);
        assert_int_equal(fclose(fp), 0);
}

/* A static pod as an operator writes one: no uid, no node, no status. */
static void write_pod(const char *dir, const char *file, const char *ns, const char *name, const char *port) {
        char buf[1024];
        (void) snprintf(buf, sizeof(buf),
                        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\n"
                        " \"metadata\":{\"namespace\":\"%s\",\"name\":\"%s\",\n"
                        "   \"annotations\":{\"pinion.io/serverset\":\"/discovery/%s\",\"pinion.io/port\":\"%s\"}},\n"
                        " \"spec\":{\"hostNetwork\":true,\"containers\":[{\"name\":\"main\",\"image\":\"x\",\n"
                        "   \"ports\":[{\"name\":\"http\",\"containerPort\":%s}]}]}}\n",
                        ns, name, name, port, port);
        write_raw(dir, file, buf);
}

static void run_until(struct fixture *f, bool (*cond)(struct fixture *f, const void *arg), const void *arg) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 5 * USEC_PER_SEC;
        while (!cond(f, arg)) {
                if (now_usec(CLOCK_MONOTONIC) > deadline)
                        fail_msg("condition not reached within 5 s");
                assert_true(sd_event_run(f->event, 50 * USEC_PER_MSEC) >= 0);
        }
}

/* Runs the loop for a while, for "nothing else happens" checks. */
static void run_for(struct fixture *f, usec_t usec) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + usec;
        while (now_usec(CLOCK_MONOTONIC) < deadline)
                assert_true(sd_event_run(f->event, 20 * USEC_PER_MSEC) >= 0);
}

static bool has_pod(struct fixture *f, const void *name) {
        return pod_store_find(f->store, "default", name) != NULL;
}

static bool lacks_pod(struct fixture *f, const void *name) {
        return !has_pod(f, name);
}

static bool pod_port_is(struct fixture *f, const void *port) {
        struct pod *p = pod_store_find(f->store, "default", "web");
        return p && streq_ptr(pod_annotation(p, "pinion.io/port"), port);
}

static bool scans_at_least(struct fixture *f, const void *n) {
        return f->scans >= *(const unsigned *) n;
}

static bool size_is(struct fixture *f, const void *n) {
        return pod_store_size(f->store) == *(const size_t *) n;
}

static bool errors_contain(struct fixture *f, const char *needle) {
        STRV_FOREACH(e, podsdir_errors(f->podsdir))
                if (strstr(*e, needle))
                        return true;
        return false;
}

static bool errors_say(struct fixture *f, const void *needle) {
        return errors_contain(f, needle);
}

/* ---- static uid ---- */

static void test_static_uid(void **state) {
        _cleanup_free_ char *a = NULL, *a2 = NULL, *b = NULL, *c = NULL;

        assert_int_equal(podsdir_file_static_uid("default", "web", &a), 0);
        /* printf 'default/web' | sha256sum → 82b3ade9d00cd1642a4d420e670d6cd9... */
        assert_string_equal(a, "82b3ade9-d00c-d164-2a4d-420e670d6cd9");
        assert_int_equal(podsdir_file_static_uid("default", "web", &a2), 0);
        assert_string_equal(a, a2);

        assert_int_equal(podsdir_file_static_uid("prod", "api-0", &b), 0);
        assert_string_equal(b, "fdd6041f-46f0-301d-3d92-f26966539e64");
        /* "default/web" must not collide with a namespace/name split differently. */
        assert_int_equal(podsdir_file_static_uid("defaul", "t-web", &c), 0);
        assert_string_not_equal(a, c);

        assert_int_equal(strlen(b), 36);
        for (size_t i = 0; i < 36; i++) {
                if (i == 8 || i == 13 || i == 18 || i == 23)
                        assert_int_equal(b[i], '-');
                else
                        assert_non_null(strchr("0123456789abcdef", b[i]));
        }

        char *untouched = (char *) "x";
        assert_int_equal(podsdir_file_static_uid("", "web", &untouched), -EINVAL);
        assert_int_equal(podsdir_file_static_uid("default", NULL, &untouched), -EINVAL);
        assert_string_equal(untouched, "x");
}

/* ---- scanning ---- */

static void test_initial_scan(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *web_path = NULL, *bad_path = NULL, *subdir = NULL, *expected_source = NULL;
        _cleanup_free_ char *uid = NULL;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        write_pod(f->dir, "web.json", "default", "web", "8080");
        /* Everything given explicitly is kept. */
        write_raw(f->dir, "api.json",
                  "{\"metadata\":{\"name\":\"api\",\"uid\":\"explicit-uid\"},"
                  "\"spec\":{\"nodeName\":\"elsewhere\"},"
                  "\"status\":{\"phase\":\"Running\",\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\"}]}}");
        write_raw(f->dir, "bad.json", "{\"metadata\": {\"name\": \"bad\",");
        write_raw(f->dir, "notes.txt", "not a pod");
        write_raw(f->dir, ".hidden.json", "{broken");
        write_raw(f->dir, "web.json.bak", "{broken");
        subdir = path_in(f->dir, "dir.json");
        assert_int_equal(mkdir(subdir, 0755), 0);

        start(f);

        assert_int_equal(f->scans, 1);
        assert_int_equal(f->last_loaded, 2);
        assert_int_equal(f->last_failed, 2);
        assert_int_equal(pod_store_size(f->store), 2);
        assert_int_equal(f->adds, 2);

        struct pod *web = pod_store_find(f->store, "default", "web");
        assert_non_null(web);
        assert_int_equal(podsdir_file_static_uid("default", "web", &uid), 0);
        assert_string_equal(web->uid, uid);
        assert_string_equal(web->node_name, NODE);
        assert_true(pod_is_ready(web));
        assert_true(web->host_network);
        assert_int_equal(web->n_ports, 1);
        assert_int_equal(web->ports[0].port, 8080);
        web_path = path_in(f->dir, "web.json");
        assert_true(asprintf(&expected_source, "pods-dir:%s", web_path) > 0);
        assert_string_equal(web->source, expected_source);

        struct pod *api = pod_store_find(f->store, "default", "api");
        assert_non_null(api);
        assert_string_equal(api->uid, "explicit-uid");
        assert_string_equal(api->node_name, "elsewhere");
        assert_false(pod_is_ready(api));

        char *const *errors = podsdir_errors(f->podsdir);
        assert_int_equal(strv_length(errors), 2);
        bad_path = path_in(f->dir, "bad.json");
        assert_int_equal(strncmp(errors[0], bad_path, strlen(bad_path)), 0);
        assert_non_null(strstr(errors[0], ": invalid JSON at offset"));
        assert_non_null(strstr(errors[1], "dir.json: not a regular file"));

        assert_string_equal(podsdir_path(f->podsdir), f->dir);
}

static void test_bad_files_reported(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *big = NULL;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        write_pod(f->dir, "good.json", "default", "good", "80");
        write_raw(f->dir, "type.json", "{\"metadata\":{\"name\":\"t\",\"annotations\":\"a=b\"}}");
        write_raw(f->dir, "port.json",
                  "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"ports\":[{\"containerPort\":70000}]}]}}");
        write_raw(f->dir, "deploy.json", "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"d\"}}");
        write_raw(f->dir, "empty.json", "");

        /* Over 1 MiB: refused without parsing. */
        size_t n = 1024 * 1024 + 1;
        big = malloc(n + 1);
        assert_non_null(big);
        memset(big, ' ', n);
        big[0] = '{';
        big[n - 1] = '}';
        big[n] = 0;
        write_raw(f->dir, "big.json", big);

        start(f);

        assert_int_equal(f->last_loaded, 1);
        assert_int_equal(f->last_failed, 5);
        assert_non_null(pod_store_find(f->store, "default", "good"));
        assert_true(errors_contain(f, "/type.json: metadata.annotations: not an object"));
        assert_true(errors_contain(f, "/port.json: spec.containers[0].ports[0].containerPort: 70000 is not a port"));
        assert_true(errors_contain(f, "/deploy.json: kind: \"Deployment\" is not \"Pod\""));
        assert_true(errors_contain(f, "/empty.json: invalid JSON"));
        assert_true(errors_contain(f, "/big.json: larger than 1 MiB"));
}

static void test_duplicates(void **state) {
        struct fixture *f = *state;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        write_pod(f->dir, "a-web.json", "default", "web", "8080");
        write_pod(f->dir, "b-web-copy.json", "default", "web", "9090");
        write_raw(f->dir, "c-one.json", "{\"metadata\":{\"name\":\"one\",\"uid\":\"same-uid\"}}");
        write_raw(f->dir, "d-two.json", "{\"metadata\":{\"name\":\"two\",\"uid\":\"same-uid\"}}");

        start(f);

        assert_int_equal(f->last_loaded, 2);
        assert_int_equal(f->last_failed, 2);
        assert_true(pod_port_is(f, "8080")); /* the first by name wins */
        assert_non_null(pod_store_find(f->store, "default", "one"));
        assert_null(pod_store_find(f->store, "default", "two"));

        char *const *errors = podsdir_errors(f->podsdir);
        assert_int_equal(strv_length(errors), 2);
        /* Each names the skipped file and the one it clashes with. */
        assert_non_null(strstr(errors[0], "/b-web-copy.json: pod default/web is already declared by "));
        assert_non_null(strstr(errors[0], "/a-web.json"));
        assert_non_null(strstr(errors[1], "/d-two.json: uid same-uid is already used by "));
        assert_non_null(strstr(errors[1], "/c-one.json"));

        /* The winner's file removed: the copy it shadowed takes its place. */
        _cleanup_free_ char *winner = path_in(f->dir, "a-web.json");
        assert_int_equal(unlink(winner), 0);
        run_until(f, pod_port_is, "9090");
        assert_int_equal(strv_length(podsdir_errors(f->podsdir)), 1);
        write_pod(f->dir, "a-web.json", "default", "web", "8080");
        run_until(f, pod_port_is, "8080");
        assert_int_equal(strv_length(podsdir_errors(f->podsdir)), 2);

        /* Fixing the copy makes both load. */
        write_pod(f->dir, "b-web-copy.json", "default", "web2", "9090");
        run_until(f, has_pod, "web2");
        assert_int_equal(strv_length(podsdir_errors(f->podsdir)), 1);
}

/* ---- watching ---- */

static void test_live_changes(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *outside = NULL, *from = NULL, *to = NULL;
        size_t zero = 0;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        start(f);
        assert_int_equal(f->scans, 1);
        assert_int_equal(pod_store_size(f->store), 0);

        /* added */
        write_pod(f->dir, "web.json", "default", "web", "8080");
        run_until(f, has_pod, "web");
        assert_int_equal(f->adds, 1);

        /* changed */
        write_pod(f->dir, "web.json", "default", "web", "9090");
        run_until(f, pod_port_is, "9090");
        assert_int_equal(f->updates, 1);
        assert_int_equal(f->adds, 1);

        /* rewritten unchanged: rescanned, nothing announced */
        unsigned scans = f->scans + 1;
        write_pod(f->dir, "web.json", "default", "web", "9090");
        run_until(f, scans_at_least, &scans);
        run_for(f, 150 * USEC_PER_MSEC);
        assert_int_equal(f->updates, 1);
        assert_int_equal(f->adds, 1);

        /* renamed in from elsewhere (the atomic way to publish a file) */
        outside = path_in(f->tmp, "api.json.tmp");
        write_pod(f->tmp, "api.json.tmp", "default", "api", "7000");
        to = path_in(f->dir, "api.json");
        assert_int_equal(rename(outside, to), 0);
        run_until(f, has_pod, "api");
        assert_int_equal(f->adds, 2);

        /* renamed away from *.json: gone */
        from = path_in(f->dir, "api.json.disabled");
        assert_int_equal(rename(to, from), 0);
        run_until(f, lacks_pod, "api");
        assert_int_equal(f->removes, 1);

        /* a file that turns bad keeps its last good pod and says why; another file is unaffected */
        write_pod(f->dir, "other.json", "default", "other", "81");
        run_until(f, has_pod, "other");
        unsigned removes = f->removes, updates = f->updates;
        write_raw(f->dir, "web.json", "{\"metadata\":{\"name\":\"web\",\"labels\":[]}}");
        run_until(f, errors_say, "/web.json: metadata.labels: not an object; its last good version stays");
        assert_true(pod_port_is(f, "9090"));
        assert_int_equal(f->removes, removes);
        assert_int_equal(f->updates, updates);
        assert_non_null(pod_store_find(f->store, "default", "other"));
        assert_int_equal(f->last_failed, 1);
        /* fixed: the new version replaces it and the problem is gone */
        write_pod(f->dir, "web.json", "default", "web", "9191");
        run_until(f, pod_port_is, "9191");
        assert_int_equal(strv_length(podsdir_errors(f->podsdir)), 0);

        /* deleted */
        _cleanup_free_ char *web = path_in(f->dir, "web.json"), *other = path_in(f->dir, "other.json");
        assert_int_equal(unlink(web), 0);
        assert_int_equal(unlink(other), 0);
        run_until(f, size_is, &zero);
        assert_int_equal(strv_length(podsdir_errors(f->podsdir)), 0);
}

/* Each file is read on its own, when its event comes: ten new files are ten updates of one file
 * each, with no rescan of the directory. The files are written while the loop is not running,
 * so all their events are queued when it runs: no timing involved. */
static void test_each_file_on_its_own(void **state) {
        struct fixture *f = *state;
        size_t ten = 10;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        start(f);
        assert_int_equal(f->scans, 1);
        for (unsigned i = 0; i < 10; i++) {
                char file[32], name[32];
                (void) snprintf(file, sizeof(file), "p%u.json", i);
                (void) snprintf(name, sizeof(name), "p%u", i);
                write_pod(f->dir, file, "default", name, "80");
        }
        run_until(f, size_is, &ten);
        run_for(f, 200 * USEC_PER_MSEC);
        assert_int_equal(f->adds, 10);
        assert_int_equal(f->updates, 0);
        assert_int_equal(f->scans, 11);
        assert_int_equal(f->last_loaded, 10);
}

/* Only the file whose event came is read: web.json links to a file outside the directory, whose
 * change no event in pods-dir announces; a change of another file must not pick it up (a rescan
 * of the directory would). */
static void test_only_the_changed_file_is_read(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *target = path_in(f->tmp, "web-target.json"), *link = NULL;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        write_pod(f->tmp, "web-target.json", "default", "web", "8080");
        link = path_in(f->dir, "web.json");
        assert_int_equal(symlink(target, link), 0);
        start(f);
        assert_true(pod_port_is(f, "8080"));

        write_pod(f->tmp, "web-target.json", "default", "web", "9090");
        write_pod(f->dir, "api.json", "default", "api", "7000");
        run_until(f, has_pod, "api");
        run_for(f, 200 * USEC_PER_MSEC);
        assert_true(pod_port_is(f, "8080"));
        assert_int_equal(f->updates, 0);
}

/* A file written in place is read when it is closed, never half-way: while the writer holds it
 * open with half a pod in it, nothing is loaded and nothing is reported. */
static void test_in_place_write_read_on_close(void **state) {
        struct fixture *f = *state;
        static const char pod[] = "{\"metadata\":{\"name\":\"web\"},\"spec\":{\"hostNetwork\":true}}";
        _cleanup_free_ char *path = NULL;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        start(f);
        path = path_in(f->dir, "web.json");
        FILE *fp = fopen(path, "we");
        assert_non_null(fp);
        assert_int_equal(fwrite(pod, 1, 20, fp), 20);
        assert_int_equal(fflush(fp), 0);
        run_for(f, 250 * USEC_PER_MSEC);
        assert_int_equal(pod_store_size(f->store), 0);
        assert_int_equal(strv_length(podsdir_errors(f->podsdir)), 0);

        assert_int_equal(fputs(pod + 20, fp) >= 0, 1);
        assert_int_equal(fclose(fp), 0);
        run_until(f, has_pod, "web");
        assert_int_equal(strv_length(podsdir_errors(f->podsdir)), 0);
}

/* Publishing by renaming a temp file over the old one is one update, never a removal first. */
static void test_rename_over(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *tmp = NULL, *path = NULL;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        write_pod(f->dir, "web.json", "default", "web", "8080");
        start(f);
        write_pod(f->dir, ".web.json.swp", "default", "web", "9090"); /* an editor's: never a pod */
        write_pod(f->dir, "web.json~", "default", "web", "9090");
        write_pod(f->dir, "web.json.tmp", "default", "web", "9090");
        run_for(f, 150 * USEC_PER_MSEC);
        assert_true(pod_port_is(f, "8080"));
        assert_int_equal(f->updates, 0);

        tmp = path_in(f->dir, "web.json.tmp");
        path = path_in(f->dir, "web.json");
        assert_int_equal(rename(tmp, path), 0);
        run_until(f, pod_port_is, "9090");
        assert_int_equal(f->updates, 1);
        assert_int_equal(f->removes, 0);
        assert_int_equal(f->adds, 1);
}

/* More events than the kernel queues (max_queued_events) while the loop is busy: the ones after
 * the overflow are lost, so the directory is read again. */
static void test_overflow_rescans(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *a = NULL, *b = NULL;
        unsigned long max = 16384;

        FILE *limit = fopen("/proc/sys/fs/inotify/max_queued_events", "re");
        if (limit) {
                assert_int_equal(fscanf(limit, "%lu", &max), 1);
                fclose(limit);
        }
        assert_int_equal(mkdir(f->dir, 0755), 0);
        write_pod(f->dir, "web.json", "default", "web", "8080");
        start(f);
        a = path_in(f->dir, ".a");
        b = path_in(f->dir, ".b");
        /* Alternating names: the kernel folds only identical consecutive events. */
        for (unsigned long i = 0; i <= max; i++) {
                int fd = open(i % 2 ? a : b, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                assert_true(fd >= 0);
                close(fd);
        }
        write_pod(f->dir, "web.json", "default", "web", "9090"); /* its event is one of the lost */
        run_until(f, pod_port_is, "9090");
}

static void test_directory_created_later(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *parent = NULL, *tmpdir = NULL;
        size_t zero = 0;

        /* Two levels missing: tmp/etc/pods.d */
        free(f->dir);
        parent = path_in(f->tmp, "etc");
        f->dir = path_in(parent, "pods.d");

        start(f);
        assert_int_equal(f->scans, 1);
        assert_int_equal(f->last_loaded, 0);
        assert_int_equal(f->last_failed, 0);
        assert_int_equal(pod_store_size(f->store), 0);

        assert_int_equal(mkdir(parent, 0755), 0);
        run_for(f, 150 * USEC_PER_MSEC);
        assert_int_equal(mkdir(f->dir, 0755), 0);
        write_pod(f->dir, "web.json", "default", "web", "8080");
        run_until(f, has_pod, "web");

        /* Deleted: its pods go; re-created (here by a rename, as tools do): they come back. */
        assert_int_equal(fs_rm_rf(f->dir), 0);
        run_until(f, size_is, &zero);
        run_for(f, 150 * USEC_PER_MSEC);

        tmpdir = path_in(parent, ".pods.d.new");
        assert_int_equal(mkdir(tmpdir, 0755), 0);
        write_pod(tmpdir, "api.json", "default", "api", "7000");
        assert_int_equal(rename(tmpdir, f->dir), 0);
        run_until(f, has_pod, "api");

        /* And the new directory is watched in turn. */
        write_pod(f->dir, "web.json", "default", "web", "8080");
        run_until(f, has_pod, "web");

        /* The whole tree removed and re-created. */
        assert_int_equal(fs_rm_rf(parent), 0);
        run_until(f, size_is, &zero);
        assert_int_equal(fs_mkdir_p(f->dir, 0755), 0);
        write_pod(f->dir, "web.json", "default", "web", "8080");
        run_until(f, has_pod, "web");
}

/* A directory laid out like a Kubernetes volume: *.json are links through ..data, and an update
 * is one rename of ..data. */
static void test_atomic_writer_layout(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *v1 = NULL, *v2 = NULL, *data = NULL, *data_tmp = NULL, *link = NULL;

        assert_int_equal(mkdir(f->dir, 0755), 0);
        v1 = path_in(f->dir, "..v1");
        v2 = path_in(f->dir, "..v2");
        data = path_in(f->dir, "..data");
        data_tmp = path_in(f->dir, "..data_tmp");
        link = path_in(f->dir, "web.json");
        assert_int_equal(mkdir(v1, 0755), 0);
        write_pod(v1, "web.json", "default", "web", "8080");
        assert_int_equal(symlink("..v1", data), 0);
        assert_int_equal(symlink("..data/web.json", link), 0);

        start(f);
        assert_true(pod_port_is(f, "8080"));

        assert_int_equal(mkdir(v2, 0755), 0);
        write_pod(v2, "web.json", "default", "web", "9090");
        assert_int_equal(symlink("..v2", data_tmp), 0);
        assert_int_equal(rename(data_tmp, data), 0);
        run_until(f, pod_port_is, "9090");
        assert_int_equal(f->updates, 1);
        assert_int_equal(f->last_failed, 0); /* ..v1, ..v2 and ..data are not pods */
}

static void test_not_a_directory(void **state) {
        struct fixture *f = *state;

        write_raw(f->tmp, "pods.d", "a file");
        assert_int_equal(podsdir_new(f->event, f->store, f->dir, NODE, &f->podsdir), 0);
        assert_int_equal(podsdir_start(f->podsdir), -ENOTDIR);
        assert_int_equal(pod_store_size(f->store), 0);
}

static void test_trailing_slash_and_other_sources(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *with_slash = NULL;
        struct pod *api;
        size_t one = 1;

        /* A pod from the apiserver is not the directory's to remove. */
        static const char text[] = "{\"metadata\":{\"name\":\"from-api\",\"uid\":\"u-api\"}}";
        assert_int_equal(pod_parse_json_text(text, strlen(text), NULL, &api, NULL), 0);
        api->source = strdup("apiserver");
        assert_int_equal(pod_store_put(f->store, api), 1);
        pod_unref(api);

        assert_int_equal(mkdir(f->dir, 0755), 0);
        assert_true(asprintf(&with_slash, "%s//", f->dir) > 0);
        assert_int_equal(podsdir_new(f->event, f->store, with_slash, NULL, &f->podsdir), 0);
        assert_string_equal(podsdir_path(f->podsdir), f->dir);
        assert_int_equal(podsdir_start(f->podsdir), 0);

        write_pod(f->dir, "web.json", "default", "web", "8080");
        run_until(f, has_pod, "web");
        /* No node name given: nodeName stays unset. */
        assert_null(pod_store_find(f->store, "default", "web")->node_name);

        _cleanup_free_ char *web = path_in(f->dir, "web.json");
        assert_int_equal(unlink(web), 0);
        run_until(f, size_is, &one);
        assert_non_null(pod_store_get(f->store, "u-api"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_static_uid),
                cmocka_unit_test_setup_teardown(test_initial_scan, setup, teardown),
                cmocka_unit_test_setup_teardown(test_bad_files_reported, setup, teardown),
                cmocka_unit_test_setup_teardown(test_duplicates, setup, teardown),
                cmocka_unit_test_setup_teardown(test_live_changes, setup, teardown),
                cmocka_unit_test_setup_teardown(test_each_file_on_its_own, setup, teardown),
                cmocka_unit_test_setup_teardown(test_only_the_changed_file_is_read, setup, teardown),
                cmocka_unit_test_setup_teardown(test_in_place_write_read_on_close, setup, teardown),
                cmocka_unit_test_setup_teardown(test_rename_over, setup, teardown),
                cmocka_unit_test_setup_teardown(test_overflow_rescans, setup, teardown),
                cmocka_unit_test_setup_teardown(test_directory_created_later, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_writer_layout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_a_directory, setup, teardown),
                cmocka_unit_test_setup_teardown(test_trailing_slash_and_other_sources, setup, teardown),
        };
        return cmocka_run_group_tests_name("podsdir", tests, NULL, NULL);
}
