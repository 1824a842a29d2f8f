/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pod-store.h"

static struct pod *mkpod(const char *uid, const char *ns, const char *name, const char *phase, const char *rv) {
        _cleanup_free_ char *error = NULL;
        struct pod *p = NULL;
        char text[512];
        int r;

        (void) snprintf(text, sizeof(text),
                        "{\"metadata\":{\"uid\":\"%s\",\"namespace\":\"%s\",\"name\":\"%s\",\"resourceVersion\":\"%s\"},"
                        "\"status\":{\"phase\":\"%s\"}}",
                        uid, ns, name, rv, phase);
        r = pod_parse_json_text(text, strlen(text), NULL, &p, &error);
        if (r < 0)
                fail_msg("parse failed: %d %s", r, strempty(error));
        return p;
}

static struct pod *mkpod_src(const char *uid, const char *name, const char *phase, const char *source) {
        struct pod *p = mkpod(uid, "default", name, phase, "1");
        if (source) {
                p->source = strdup(source);
                assert_non_null(p->source);
        }
        return p;
}

#define MAX_EVENTS 64

struct recorder {
        struct pod *old[MAX_EVENTS];
        struct pod *new[MAX_EVENTS];
        size_t n;
};

static void recorder_clear(struct recorder *r) {
        for (size_t i = 0; i < r->n; i++) {
                pod_unref(r->old[i]);
                pod_unref(r->new[i]);
        }
        r->n = 0;
}

static void record(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct recorder *r = userdata;
        assert_true(r->n < MAX_EVENTS);
        assert_true(old || new);
        r->old[r->n] = pod_ref((struct pod *) old);
        r->new[r->n] = pod_ref((struct pod *) new);
        r->n++;
}

static const char *event_uid(const struct recorder *r, size_t i) {
        return r->new[i] ? r->new[i]->uid : r->old[i]->uid;
}

static void test_store_put_remove(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        struct recorder rec = {};
        struct pod *a, *a2, *b;

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_add_observer(s, record, &rec), 0);
        assert_int_equal(pod_store_add_observer(s, record, &rec), -EEXIST);
        assert_int_equal(pod_store_size(s), 0);
        assert_int_equal(pod_store_generation(s), 0);

        a = mkpod("uid-a", "ns", "a", "Pending", "1");
        assert_int_equal(pod_store_put(s, a), 1);
        assert_int_equal(rec.n, 1);
        assert_null(rec.old[0]);
        assert_ptr_equal(rec.new[0], a);
        assert_ptr_equal(pod_store_get(s, "uid-a"), a);
        assert_ptr_equal(pod_store_find(s, "ns", "a"), a);
        assert_null(pod_store_find(s, "ns", "b"));
        assert_null(pod_store_find(s, "other", "a"));
        assert_int_equal(pod_store_size(s), 1);
        assert_int_equal(pod_store_generation(s), 1);

        /* The same object again: nothing. */
        assert_int_equal(pod_store_put(s, a), 0);
        assert_int_equal(rec.n, 1);

        a2 = mkpod("uid-a", "ns", "a", "Running", "2");
        assert_int_equal(pod_store_put(s, a2), 1);
        assert_int_equal(rec.n, 2);
        assert_ptr_equal(rec.old[1], a);
        assert_ptr_equal(rec.new[1], a2);
        assert_ptr_equal(pod_store_get(s, "uid-a"), a2);
        assert_int_equal(pod_store_size(s), 1);
        assert_int_equal(pod_store_generation(s), 2);

        b = mkpod("uid-b", "ns", "b", "Running", "3");
        assert_int_equal(pod_store_put(s, b), 1);
        assert_int_equal(pod_store_size(s), 2);

        assert_int_equal(pod_store_remove(s, "uid-a"), 1);
        assert_int_equal(rec.n, 4);
        assert_ptr_equal(rec.old[3], a2);
        assert_null(rec.new[3]);
        assert_null(pod_store_get(s, "uid-a"));
        assert_null(pod_store_find(s, "ns", "a"));
        assert_int_equal(pod_store_size(s), 1);
        assert_int_equal(pod_store_remove(s, "uid-a"), 0);
        assert_int_equal(rec.n, 4);
        assert_int_equal(pod_store_generation(s), 4);

        /* A pod without a uid cannot be stored. */
        struct pod *nouid = mkpod("uid-c", "ns", "c", "Running", "1");
        free(nouid->uid);
        nouid->uid = NULL;
        assert_int_equal(pod_store_put(s, nouid), -EINVAL);
        pod_unref(nouid);

        /* The store kept its own references: the caller's can go. */
        pod_unref(a);
        pod_unref(a2);
        pod_unref(b);
        assert_int_equal(pod_store_size(s), 1);
        assert_string_equal(pod_store_get(s, "uid-b")->name, "b");

        pod_store_remove_observer(s, record, &rec);
        assert_int_equal(pod_store_remove(s, "uid-b"), 1);
        assert_int_equal(rec.n, 4);
        recorder_clear(&rec);
}

static void test_store_equal_put(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        _cleanup_(pod_unrefp) struct pod *a = mkpod("uid-a", "ns", "a", "Running", "10");
        _cleanup_(pod_unrefp) struct pod *a_newer = mkpod("uid-a", "ns", "a", "Running", "11");
        struct recorder rec = {};

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_put(s, a), 1);
        assert_int_equal(pod_store_add_observer(s, record, &rec), 0);
        uint64_t gen = pod_store_generation(s);

        assert_int_equal(pod_store_put(s, a_newer), 0);
        assert_int_equal(rec.n, 0);
        assert_int_equal(pod_store_generation(s), gen);
        /* The newer resourceVersion is kept quietly. */
        assert_string_equal(pod_store_get(s, "uid-a")->resource_version, "11");
        assert_ptr_equal(pod_store_find(s, "ns", "a"), a_newer);
}

static void test_store_replace_source(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        struct recorder rec = {};
        struct pod *p;

        assert_int_equal(pod_store_new(&s), 0);

        /* A pod of another source that no replace of "pods-dir" may touch. */
        p = mkpod_src("uid-api", "api", "Running", "apiserver");
        assert_int_equal(pod_store_put(s, p), 1);
        pod_unref(p);

        struct pod *first[] = {
                mkpod_src("uid-a", "a", "Running", "pods-dir:/d/a.json"),
                mkpod_src("uid-b", "b", "Running", "pods-dir:/d/b.json"),
                mkpod_src("uid-c", "c", "Running", "pods-dir:/d/c.json"),
        };
        assert_int_equal(pod_store_add_observer(s, record, &rec), 0);
        assert_int_equal(pod_store_replace_source(s, "pods-dir", first, ELEMENTSOF(first)), 3);
        assert_int_equal(rec.n, 3);
        for (size_t i = 0; i < 3; i++) {
                assert_null(rec.old[i]);
                assert_ptr_equal(rec.new[i], first[i]);
        }
        recorder_clear(&rec);
        assert_int_equal(pod_store_size(s), 4);

        /* Same again (new objects, equal content): nothing is announced. */
        struct pod *again[] = {
                mkpod_src("uid-c", "c", "Running", "pods-dir:/d/c.json"),
                mkpod_src("uid-a", "a", "Running", "pods-dir:/d/a.json"),
                mkpod_src("uid-b", "b", "Running", "pods-dir:/d/b.json"),
        };
        assert_int_equal(pod_store_replace_source(s, "pods-dir", again, ELEMENTSOF(again)), 0);
        assert_int_equal(rec.n, 0);

        /* a unchanged, b updated, c removed, d added. */
        struct pod *second[] = {
                mkpod_src("uid-a", "a", "Running", "pods-dir:/d/a.json"),
                mkpod_src("uid-b", "b", "Failed", "pods-dir:/d/b.json"),
                mkpod_src("uid-d", "d", "Running", "pods-dir:/d/d.json"),
        };
        assert_int_equal(pod_store_replace_source(s, "pods-dir", second, ELEMENTSOF(second)), 3);
        assert_int_equal(rec.n, 3);
        /* removals come first */
        assert_string_equal(event_uid(&rec, 0), "uid-c");
        assert_null(rec.new[0]);
        assert_string_equal(event_uid(&rec, 1), "uid-b");
        assert_string_equal(rec.old[1]->phase, "Running");
        assert_ptr_equal(rec.new[1], second[1]);
        assert_string_equal(event_uid(&rec, 2), "uid-d");
        assert_null(rec.old[2]);
        recorder_clear(&rec);
        assert_int_equal(pod_store_size(s), 4);
        assert_non_null(pod_store_get(s, "uid-api"));

        /* Invalid input changes nothing: a foreign pod, a duplicate uid. */
        struct pod *foreign[] = { mkpod_src("uid-x", "x", "Running", "apiserver") };
        assert_int_equal(pod_store_replace_source(s, "pods-dir", foreign, 1), -EINVAL);
        struct pod *prefix[] = { mkpod_src("uid-y", "y", "Running", "pods-dirx:/y.json") };
        assert_int_equal(pod_store_replace_source(s, "pods-dir", prefix, 1), -EINVAL);
        struct pod *dup[] = { second[0], second[0] };
        assert_int_equal(pod_store_replace_source(s, "pods-dir", dup, 2), -EINVAL);
        assert_int_equal(pod_store_replace_source(s, "pods-dir:x", NULL, 0), -EINVAL);
        assert_int_equal(rec.n, 0);
        assert_int_equal(pod_store_size(s), 4);

        /* A pod without a source is given the replaced one. */
        struct pod *unnamed[] = { mkpod_src("uid-z", "z", "Running", NULL) };
        assert_int_equal(pod_store_replace_source(s, "apiserver", unnamed, 1), 2); /* uid-api goes */
        assert_string_equal(unnamed[0]->source, "apiserver");
        recorder_clear(&rec);

        /* Empty: everything of the source goes, nothing else. */
        assert_int_equal(pod_store_replace_source(s, "pods-dir", NULL, 0), 3);
        assert_int_equal(rec.n, 3);
        for (size_t i = 0; i < 3; i++)
                assert_null(rec.new[i]);
        assert_int_equal(pod_store_size(s), 1);
        assert_non_null(pod_store_get(s, "uid-z"));
        recorder_clear(&rec);

        for (size_t i = 0; i < 3; i++) {
                pod_unref(first[i]);
                pod_unref(again[i]);
                pod_unref(second[i]);
        }
        pod_unref(foreign[0]);
        pod_unref(prefix[0]);
        pod_unref(unnamed[0]);
}

/* An observer that removes itself or another, or changes the store, from inside a callback. */
struct meddler {
        struct pod_store *store;
        unsigned calls;
        bool remove_self;
        struct meddler *remove_other;
        bool remove_pod; /* removes every added pod right away */
        bool add_other;  /* registers `other` on the first call */
        struct recorder *other;
};

static void meddle(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct meddler *m = userdata;
        m->calls++;
        if (m->remove_self)
                pod_store_remove_observer(s, meddle, m);
        if (m->remove_other)
                pod_store_remove_observer(s, meddle, m->remove_other);
        if (m->remove_pod && new && !old)
                assert_int_equal(pod_store_remove(s, new->uid), 1);
        if (m->add_other && m->calls == 1)
                assert_int_equal(pod_store_add_observer(s, record, m->other), 0);
}

static void test_observer_removes_itself(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        struct meddler self = { .remove_self = true };
        struct recorder rec = {};

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_add_observer(s, meddle, &self), 0);
        assert_int_equal(pod_store_add_observer(s, record, &rec), 0);

        for (unsigned i = 0; i < 3; i++) {
                char uid[16];
                (void) snprintf(uid, sizeof(uid), "uid-%u", i);
                struct pod *p = mkpod(uid, "ns", uid, "Running", "1");
                assert_int_equal(pod_store_put(s, p), 1);
                pod_unref(p);
        }
        assert_int_equal(self.calls, 1);
        assert_int_equal(rec.n, 3); /* the one after it still gets every event */
        recorder_clear(&rec);
}

static void test_observer_removes_other(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        struct meddler victim = {}, killer = { .remove_other = &victim };
        struct recorder rec = {};

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_add_observer(s, meddle, &killer), 0);
        assert_int_equal(pod_store_add_observer(s, meddle, &victim), 0);
        assert_int_equal(pod_store_add_observer(s, record, &rec), 0);

        struct pod *p = mkpod("uid-1", "ns", "a", "Running", "1");
        assert_int_equal(pod_store_put(s, p), 1);
        pod_unref(p);
        /* Removed before its turn: it is not called, not even for the current event. */
        assert_int_equal(killer.calls, 1);
        assert_int_equal(victim.calls, 0);
        assert_int_equal(rec.n, 1);

        p = mkpod("uid-2", "ns", "b", "Running", "1");
        assert_int_equal(pod_store_put(s, p), 1);
        pod_unref(p);
        assert_int_equal(killer.calls, 2);
        assert_int_equal(victim.calls, 0);
        assert_int_equal(rec.n, 2);
        recorder_clear(&rec);
}

static void test_observer_changes_store(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        struct meddler remover = { .remove_pod = true };
        struct recorder rec = {};

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_add_observer(s, meddle, &remover), 0);
        assert_int_equal(pod_store_add_observer(s, record, &rec), 0);

        struct pod *p = mkpod("uid-1", "ns", "a", "Running", "1");
        assert_int_equal(pod_store_put(s, p), 1);
        pod_unref(p);

        /* Every observer sees "added" then "removed", in that order, even the one registered
         * after the observer that removed the pod. */
        assert_int_equal(remover.calls, 2);
        assert_int_equal(rec.n, 2);
        assert_null(rec.old[0]);
        assert_string_equal(rec.new[0]->uid, "uid-1");
        assert_string_equal(rec.old[1]->uid, "uid-1");
        assert_null(rec.new[1]);
        assert_int_equal(pod_store_size(s), 0);
        assert_int_equal(pod_store_generation(s), 2);
        recorder_clear(&rec);
}

static void test_observer_added_in_callback(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        struct recorder rec = {};
        struct meddler adder = { .add_other = true, .other = &rec };

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_add_observer(s, meddle, &adder), 0);

        struct pod *p = mkpod("uid-1", "ns", "a", "Running", "1");
        assert_int_equal(pod_store_put(s, p), 1);
        pod_unref(p);
        assert_int_equal(rec.n, 0); /* added during the event: does not get it */

        p = mkpod("uid-2", "ns", "b", "Running", "1");
        assert_int_equal(pod_store_put(s, p), 1);
        pod_unref(p);
        assert_int_equal(rec.n, 1);
        assert_string_equal(rec.new[0]->uid, "uid-2");
        recorder_clear(&rec);
}

static void test_store_list_sorted(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        static const char *const pods[][3] = {
                { "u5", "prod", "web-2" },  { "u1", "prod", "web-10" }, { "u3", "default", "zk" },
                { "u4", "kube-system", "a" }, { "u2", "default", "api" }, { "u0", "prod", "web-1" },
        };
        static const char *const expected[] = {
                "default/api", "default/zk", "kube-system/a", "prod/web-1", "prod/web-10", "prod/web-2",
        };
        struct pod **list = NULL;
        size_t n = 0;

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_list(s, &list, &n), 0);
        assert_int_equal(n, 0);
        free(list);

        for (size_t i = 0; i < ELEMENTSOF(pods); i++) {
                struct pod *p = mkpod(pods[i][0], pods[i][1], pods[i][2], "Running", "1");
                assert_int_equal(pod_store_put(s, p), 1);
                pod_unref(p);
        }

        assert_int_equal(pod_store_list(s, &list, &n), 0);
        assert_int_equal(n, ELEMENTSOF(expected));
        for (size_t i = 0; i < n; i++) {
                char buf[64];
                (void) snprintf(buf, sizeof(buf), "%s/%s", list[i]->namespace, list[i]->name);
                assert_string_equal(buf, expected[i]);
        }
        free(list);

        for (size_t i = 0; i < ELEMENTSOF(pods); i++) {
                assert_string_equal(pod_store_get(s, pods[i][0])->name, pods[i][2]);
                assert_string_equal(pod_store_find(s, pods[i][1], pods[i][2])->uid, pods[i][0]);
        }

        /* A renamed pod (same uid) moves in the name index. */
        struct pod *p = mkpod("u3", "default", "aaa", "Running", "2");
        assert_int_equal(pod_store_put(s, p), 1);
        pod_unref(p);
        assert_null(pod_store_find(s, "default", "zk"));
        assert_string_equal(pod_store_find(s, "default", "aaa")->uid, "u3");
        assert_int_equal(pod_store_list(s, &list, &n), 0);
        assert_string_equal(list[0]->name, "aaa");
        assert_string_equal(list[1]->name, "api");
        free(list);
}

/* Many pods in random order: both indexes stay consistent. */
static void test_store_many(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        unsigned seed = 12345;
        enum { N = 300 };

        assert_int_equal(pod_store_new(&s), 0);
        for (unsigned i = 0; i < 3 * N; i++) {
                char uid[16], name[16];
                unsigned k = (seed = seed * 1103515245u + 12345u) / 65536u % N;
                (void) snprintf(uid, sizeof(uid), "u%u", k);
                (void) snprintf(name, sizeof(name), "p%u", k);
                if (i % 3 == 2)
                        assert_true(pod_store_remove(s, uid) >= 0);
                else {
                        struct pod *p = mkpod(uid, "ns", name, i % 2 ? "Running" : "Pending", "1");
                        assert_true(pod_store_put(s, p) >= 0);
                        pod_unref(p);
                }
        }

        struct pod **list;
        size_t n;
        assert_int_equal(pod_store_list(s, &list, &n), 0);
        assert_int_equal(n, pod_store_size(s));
        for (size_t i = 0; i < n; i++) {
                if (i > 0)
                        assert_true(strcmp(list[i - 1]->name, list[i]->name) < 0);
                assert_ptr_equal(pod_store_get(s, list[i]->uid), list[i]);
                assert_ptr_equal(pod_store_find(s, "ns", list[i]->name), list[i]);
        }
        free(list);
}

/* The network overlay (pod_store_set_ips): podnet's IP for a pod, applied over its source. */
static void test_store_ip_overlay(void **state) {
        _cleanup_(pod_store_freep) struct pod_store *s = NULL;
        struct recorder rec = {};
        char *ips[] = { (char *) "10.77.0.5", NULL };
        struct pod *a, *a2, *cur;

        assert_int_equal(pod_store_new(&s), 0);
        assert_int_equal(pod_store_add_observer(s, record, &rec), 0);
        assert_int_equal(pod_store_set_ips(s, NULL, NULL, "x", ips), -EINVAL);

        /* Set before the pod is known (CNI ADD comes first): nothing announced yet. */
        assert_int_equal(pod_store_set_ips(s, "uid-a", NULL, NULL, ips), 0);
        assert_int_equal(rec.n, 0);

        /* The source's pod arrives without an IP: the store keeps a copy with the overlay's. */
        a = mkpod_src("uid-a", "a", "Pending", "apiserver");
        assert_int_equal(pod_store_replace_source(s, "apiserver", &a, 1), 1);
        assert_int_equal(rec.n, 1);
        cur = pod_store_get(s, "uid-a");
        assert_ptr_not_equal(cur, a);
        assert_string_equal(pod_primary_ip(cur), "10.77.0.5");
        assert_string_equal(pod_primary_ip(rec.new[0]), "10.77.0.5");
        assert_null(pod_primary_ip(a)); /* the source's object is untouched */
        assert_string_equal(cur->phase, "Pending");

        /* A relist with the same object: no event. */
        assert_int_equal(pod_store_replace_source(s, "apiserver", &a, 1), 0);
        assert_int_equal(rec.n, 1);

        /* The source updates the pod: the overlay stays. */
        a2 = mkpod_src("uid-a", "a", "Running", "apiserver");
        assert_int_equal(pod_store_replace_source(s, "apiserver", &a2, 1), 1);
        assert_int_equal(rec.n, 2);
        cur = pod_store_get(s, "uid-a");
        assert_string_equal(cur->phase, "Running");
        assert_string_equal(pod_primary_ip(cur), "10.77.0.5");

        /* Setting the same IPs again changes nothing. */
        assert_int_equal(pod_store_set_ips(s, "uid-a", NULL, NULL, ips), 0);
        assert_int_equal(rec.n, 2);

        /* Cleared (CNI DEL): back to the source's newest object, announced. */
        assert_int_equal(pod_store_set_ips(s, "uid-a", NULL, NULL, NULL), 1);
        assert_int_equal(rec.n, 3);
        assert_ptr_equal(pod_store_get(s, "uid-a"), a2);
        assert_null(pod_primary_ip(pod_store_get(s, "uid-a")));
        assert_int_equal(pod_store_set_ips(s, "uid-a", NULL, NULL, NULL), 0);

        /* By namespace/name, set while the pod is there: announced at once. */
        char *ips2[] = { (char *) "10.77.0.6", NULL };
        assert_int_equal(pod_store_set_ips(s, NULL, "default", "a", ips2), 1);
        assert_int_equal(rec.n, 4);
        assert_string_equal(pod_primary_ip(pod_store_get(s, "uid-a")), "10.77.0.6");

        /* The pod goes away and comes back: the overlay outlives it. */
        assert_int_equal(pod_store_replace_source(s, "apiserver", NULL, 0), 1);
        assert_int_equal(pod_store_replace_source(s, "apiserver", &a2, 1), 1);
        assert_string_equal(pod_primary_ip(pod_store_get(s, "uid-a")), "10.77.0.6");
        assert_int_equal(pod_store_set_ips(s, NULL, "default", "a", NULL), 1);
        assert_null(pod_primary_ip(pod_store_get(s, "uid-a")));

        pod_unref(a);
        pod_unref(a2);
        recorder_clear(&rec);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_store_put_remove),
                cmocka_unit_test(test_store_equal_put),
                cmocka_unit_test(test_store_replace_source),
                cmocka_unit_test(test_observer_removes_itself),
                cmocka_unit_test(test_observer_removes_other),
                cmocka_unit_test(test_observer_changes_store),
                cmocka_unit_test(test_observer_added_in_callback),
                cmocka_unit_test(test_store_list_sorted),
                cmocka_unit_test(test_store_many),
                cmocka_unit_test(test_store_ip_overlay),
        };
        return cmocka_run_group_tests_name("pod-store", tests, NULL, NULL);
}
