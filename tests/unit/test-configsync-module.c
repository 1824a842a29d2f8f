/* SPDX-License-Identifier: MIT */
/* The configsync module's contract with a real manager (config, event loop, pod gates, API):
 * a start that fails half-way leaves nothing running, a stopped module keeps its gate,
 * closed, until it is freed (finding 9), and observers hear bundles go and the module stop. runner_new is wrapped (-Wl,--wrap) so
 * a test can make the second bundle's start fail. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "configsync.h"
#include "fs.h"
#include "manager-fixture.h"
#include "manager.h"
#include "pod-events.h"
#include "pod-gates.h"
#include "pod-store.h"
#include "pods.h"

/* The module table of this test: configsync and a stand-in for its dependency. */
static const struct module fake_zkreg = FIXTURE_NOOP_MODULE("zkreg");
extern const struct module configsync_module;
const struct module *const module_table[] = { &configsync_module, &fake_zkreg };
const unsigned module_table_size = ELEMENTSOF(module_table);

/* runner_new: the real one, except that call number fail_at (1-based) fails with -EIO. */
int __real_runner_new(sd_event *e, char **argv, usec_t quiescence, usec_t timeout, runner_done_fn done,
                      void *userdata, struct runner **ret);
int __wrap_runner_new(sd_event *e, char **argv, usec_t quiescence, usec_t timeout, runner_done_fn done,
                      void *userdata, struct runner **ret);
static unsigned runner_calls, fail_at;
int __wrap_runner_new(sd_event *e, char **argv, usec_t quiescence, usec_t timeout, runner_done_fn done,
                      void *userdata, struct runner **ret) {
        if (++runner_calls == fail_at)
                return -EIO;
        return __real_runner_new(e, argv, quiescence, timeout, done, userdata, ret);
}

struct fixture {
        char dir[64];
        struct manager *m;
        struct module_instance *mi;
};

/* Two bundles (each with an on-change, so each start makes a runner) from a server that is not
 * there (port 1): nothing in these tests needs a download to succeed. */
static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        snprintf(f->dir, sizeof(f->dir), "/tmp/test-configsync-module.XXXXXX");
        f->m = fixture_manager_new(
                f->dir, "[config.a]\nurl=http://127.0.0.1:1/a/manifest.json\ndest=%1$s/a\non-change=/bin/true\n"
                        "[config.b]\nurl=http://127.0.0.1:1/b/manifest.json\ndest=%1$s/b\non-change=/bin/true\n",
                f->dir);
        f->mi = manager_find_module(f->m, "configsync");
        assert_non_null(f->mi);
        runner_calls = fail_at = 0;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        f->m = fixture_manager_free(f->m, f->dir);
        free(f);
        return 0;
}

static struct pod *mkpod(const char *uid, const char *annotation) {
        _cleanup_free_ char *error = NULL;
        struct pod *p = NULL;
        char text[512];

        (void) snprintf(text, sizeof(text),
                        "{\"metadata\":{\"uid\":\"%s\",\"namespace\":\"default\",\"name\":\"p-%s\","
                        "\"annotations\":{\"pinion.io/configs\":\"%s\"}}}",
                        uid, uid, annotation);
        assert_int_equal(pod_parse_json_text(text, strlen(text), NULL, &p, &error), 0);
        return p;
}

static void test_failed_start_leaves_nothing_running(void **state) {
        struct fixture *f = *state;
        struct configsync *cs = f->mi->data;
        _cleanup_free_ char *error = NULL;

        fail_at = 2; /* [config.a] starts, [config.b]'s runner cannot be made */
        assert_int_equal(f->mi->module->start(f->mi), -EIO);
        assert_int_equal(runner_calls, 2);
        assert_false(cs->started);
        assert_int_equal(cs->n_bundles, 0);
        assert_null(cs->bundles);
        assert_null(configsync_find(cs, "a"));
        /* A reload of the failed module swaps the settings; nothing may still use the old ones
         * (under ASan a bundle left running is a use-after-free as soon as its timer fires). */
        assert_int_equal(f->mi->module->reload(f->mi, f->m->config, &error), 0);
        fixture_run_loop(f->m, 300 * USEC_PER_MSEC);
        assert_int_equal(cs->n_bundles, 0);
        assert_int_equal(runner_calls, 2);
}

static void test_stopped_module_keeps_its_gate_closed(void **state) {
        struct fixture *f = *state;
        struct configsync *cs = f->mi->data;
        _cleanup_(pod_unrefp) struct pod *wants = mkpod("u1", "a"), *plain = mkpod("u2", "");
        _cleanup_free_ char *reason = NULL;

        assert_int_equal(f->mi->module->start(f->mi), 0);
        assert_true(cs->started);
        assert_int_equal(cs->n_bundles, 2);
        assert_int_equal(pod_gates_count(f->m->pod_gates), 1);
        fixture_run_loop(f->m, 100 * USEC_PER_MSEC);
        /* Nothing published (no server): closed, "not present yet". */
        assert_int_equal(pod_gates_check(f->m->pod_gates, wants, &reason), 0);
        assert_non_null(strstr(reason, "config a is not present yet"));
        reason = mfree(reason);

        assert_int_equal(f->mi->module->stop(f->mi), 0);
        assert_int_equal(cs->n_bundles, 0);
        /* Still registered, and closed for a pod that declares configs, open for one that does not. */
        assert_int_equal(pod_gates_count(f->m->pod_gates), 1);
        assert_int_equal(pod_gates_check(f->m->pod_gates, wants, &reason), 0);
        assert_string_equal(reason, "configs: the config module is stopping");
        reason = mfree(reason);
        assert_int_equal(pod_gates_check(f->m->pod_gates, plain, &reason), 1);

        /* Gone with the module. */
        f->mi->module->free(f->mi);
        assert_int_equal(pod_gates_count(f->m->pod_gates), 0);
}

/* An observer that records what it hears, as "EVENT:NAME". */
struct heard {
        char *events[8];
        unsigned n;
};

static void on_event(struct configsync *cs, enum configsync_event event, struct bundle *b, void *userdata) {
        static const char *const names[] = {
                [CONFIGSYNC_EVENT_BUNDLE_CHANGED] = "changed", [CONFIGSYNC_EVENT_BUNDLE_REMOVED] = "removed",
                [CONFIGSYNC_EVENT_BUNDLE_STOPPED] = "bundle-stopped", [CONFIGSYNC_EVENT_STOPPED] = "stopped",
        };
        struct heard *h = userdata;

        assert_true(h->n < ELEMENTSOF(h->events));
        /* A bundle that goes is no longer among the module's. */
        if (event == CONFIGSYNC_EVENT_BUNDLE_REMOVED || event == CONFIGSYNC_EVENT_BUNDLE_STOPPED)
                assert_null(configsync_find(cs, b->name));
        assert_true(asprintf(&h->events[h->n++], "%s:%s", names[event], b ? b->name : "") > 0);
}

static void heard_done(struct heard *h) {
        for (unsigned i = 0; i < h->n; i++)
                free(h->events[i]);
}

static void test_observers_hear_bundles_go(void **state) {
        struct fixture *f = *state;
        struct configsync *cs = f->mi->data;
        _cleanup_(config_freep) struct config *only_a = NULL;
        _cleanup_free_ char *error = NULL, *text = NULL;
        _cleanup_(heard_done) struct heard h = {};
        size_t routes;

        routes = api_route_count(f->m->api);
        assert_int_equal(f->mi->module->start(f->mi), 0);
        assert_non_null(cs->api);
        assert_int_equal(api_route_count(f->m->api), routes + 3);
        assert_int_equal(configsync_add_observer(cs, on_event, &h), 0);
        assert_int_equal(configsync_add_observer(cs, on_event, &h), -EEXIST);

        /* [config.b] leaves the configuration. */
        assert_true(asprintf(&text, "[config.a]\nurl=http://127.0.0.1:1/a/manifest.json\ndest=%s/a\non-change=/bin/true\n",
                             f->dir) > 0);
        assert_int_equal(config_load_string("reload", text, &only_a, &error), 0);
        assert_int_equal(f->mi->module->reload(f->mi, only_a, &error), 0);
        assert_int_equal(h.n, 1);
        assert_string_equal(h.events[0], "removed:b");

        /* Stopping: the remaining bundle goes, then the module says it stopped and the API,
         * an observer too, lets go of its routes. */
        assert_int_equal(f->mi->module->stop(f->mi), 0);
        assert_int_equal(h.n, 3);
        assert_string_equal(h.events[1], "bundle-stopped:a");
        assert_string_equal(h.events[2], "stopped:");
        assert_null(cs->api);
        assert_int_equal(api_route_count(f->m->api), routes);
        assert_int_equal(cs->observers.n, 1); /* ours */
        configsync_remove_observer(cs, on_event, &h);
        assert_int_equal(cs->observers.n, 0);
}

/* Pod events as "UID REASON NOTE". */
struct events {
        char *entries[64];
        unsigned n;
};

static void on_pod_event(const struct pod_event *ev, void *userdata) {
        struct events *h = userdata;

        assert_true(ev->type == (streq(ev->reason, POD_EVENT_CONFIG_FAILED) ? POD_EVENT_WARNING : POD_EVENT_NORMAL));
        assert_string_equal(ev->action, "Sync");
        if (h->n < ELEMENTSOF(h->entries))
                assert_true(asprintf(&h->entries[h->n++], "%s %s %s", ev->uid, ev->reason, ev->note) > 0);
}

static void events_done(struct events *h) {
        for (unsigned i = 0; i < h->n; i++)
                free(h->entries[i]);
}

static unsigned count_events(const struct events *h, const char *prefix) {
        unsigned n = 0;
        for (unsigned i = 0; i < h->n; i++)
                n += strncmp(h->entries[i], prefix, strlen(prefix)) == 0;
        return n;
}

/* Each pod that declares a config hears how its syncs go; a pod that declares none hears nothing. */
static void test_pods_hear_their_configs(void **state) {
        struct fixture *f = *state;
        struct configsync *cs = f->mi->data;
        _cleanup_(pod_unrefp) struct pod *a = mkpod("u1", "a"), *plain = mkpod("u2", ""), *both = mkpod("u3", "b,a");
        _cleanup_(events_done) struct events h = {};
        _cleanup_free_ char *dest = NULL, *version = NULL, *data = NULL;

        assert_int_equal(pod_store_put(f->m->pods, a), 1);
        assert_int_equal(pod_store_put(f->m->pods, plain), 1);
        assert_int_equal(pod_store_put(f->m->pods, both), 1);
        assert_int_equal(pod_events_add_observer(f->m->pod_events, on_pod_event, &h), 0);
        assert_int_equal(f->mi->module->start(f->mi), 0);
        for (unsigned i = 0; i < 40 && (count_events(&h, "u3 ConfigFailed Config a:") == 0 ||
                                         count_events(&h, "u3 ConfigFailed Config b:") == 0); i++)
                fixture_run_loop(f->m, 50 * USEC_PER_MSEC);
        /* No server: every sync fails, and says where from and why. */
        assert_true(count_events(&h, "u1 ConfigFailed Config a: sync from http://127.0.0.1:1/a/manifest.json failed: ") > 0);
        assert_true(count_events(&h, "u3 ConfigFailed Config a: ") > 0);
        assert_true(count_events(&h, "u3 ConfigFailed Config b: ") > 0);
        assert_int_equal(count_events(&h, "u1 ConfigFailed Config b"), 0);
        assert_int_equal(count_events(&h, "u2 "), 0);
        assert_int_equal(count_events(&h, "u1 ConfigSynced"), 0);

        /* A version appears in a's dest: present for the pods that declare a. */
        assert_non_null(dest = fs_path_join(f->dir, "a"));
        assert_non_null(version = fs_path_join(dest, "..2026_01_01_00_00_00.000000001"));
        assert_non_null(data = fs_path_join(dest, "..data"));
        assert_int_equal(fs_mkdir_p(version, 0755), 0);
        assert_int_equal(symlink("..2026_01_01_00_00_00.000000001", data), 0);
        bundle_refresh(configsync_find(cs, "a"), "test");
        for (unsigned i = 0; i < 40 && count_events(&h, "u3 ConfigSynced") == 0; i++)
                fixture_run_loop(f->m, 50 * USEC_PER_MSEC);
        assert_int_equal(count_events(&h, "u1 ConfigSynced Config a present in "), 1);
        assert_int_equal(count_events(&h, "u3 ConfigSynced Config a present in "), 1);
        assert_int_equal(count_events(&h, "u2 "), 0);

        assert_int_equal(f->mi->module->stop(f->mi), 0);
        pod_events_remove_observer(f->m->pod_events, on_pod_event, &h);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_failed_start_leaves_nothing_running, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stopped_module_keeps_its_gate_closed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_observers_hear_bundles_go, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pods_hear_their_configs, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
