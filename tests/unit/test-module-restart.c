/* SPDX-License-Identifier: MIT */
/* What modules register with the core — API routes, metric families, metric collectors — is
 * released by their stop() and made again, once, by their start(): a module stopped and
 * started again (as a reload that disables and then enables it would) neither leaks nor
 * duplicates them. The modules run against a real manager (config, loop, pod store, API,
 * metrics) whose backends are not there (an apiserver and a config server on port 1, no
 * ZooKeeper); under ASan, LeakSanitizer checks that nothing of a stopped module stays behind. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "manager-fixture.h"

/* configsync's dependency, without a ZooKeeper. */
static const struct module fake_zkreg = FIXTURE_NOOP_MODULE("zkreg");
extern const struct module apiserver_module, identity_module, configsync_module, reclaim_module, podnet_module;
const struct module *const module_table[] = {
        &apiserver_module, &identity_module, &configsync_module, &reclaim_module, &podnet_module, &fake_zkreg,
};
const unsigned module_table_size = ELEMENTSOF(module_table);

struct fixture {
        char dir[64];
        struct manager *m;
};

/* What the core holds for the modules: routes, rendered families by name, collectors. */
struct registered {
        size_t routes, families, collectors;
        char *types; /* every "# TYPE" line of /metrics */
};

static void registered_done(struct registered *r) {
        free(r->types);
        *r = (struct registered) {};
}

static struct registered snapshot(struct manager *m) {
        struct registered r = {
                .routes = api_route_count(m->api),
                .families = metrics_family_count(m->metrics),
                .collectors = metrics_collector_count(m->metrics),
        };
        _cleanup_free_ char *text = NULL;
        size_t size = 0, n = 0;

        assert_int_equal(metrics_render(m->metrics, &text, &size), 0);
        r.types = calloc(1, size + 1);
        assert_non_null(r.types);
        for (const char *line = text; line && *line;) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t) (end - line) + 1 : strlen(line);
                if (strncmp(line, "# TYPE ", 7) == 0) {
                        memcpy(r.types + n, line, len);
                        n += len;
                }
                line += len;
        }
        return r;
}

static void assert_same(const struct registered *a, const struct registered *b) {
        assert_int_equal(a->routes, b->routes);
        assert_int_equal(a->families, b->families);
        assert_int_equal(a->collectors, b->collectors);
        assert_string_equal(a->types, b->types);
}

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        snprintf(f->dir, sizeof(f->dir), "/tmp/test-module-restart.XXXXXX");
        f->m = fixture_manager_new(f->dir,
                                   "[apiserver]\nurl=http://127.0.0.1:1\n"
                                   "[identity]\nsigner=local\ntrust-domain=example.org\nca-dir=%1$s/ca\n"
                                   "pod-tls-dir=%1$s/run/pods\n"
                                   "[config.a]\nurl=http://127.0.0.1:1/a/manifest.json\ndest=%1$s/a\n"
                                   "[agent]\nlog-level=err\n",
                                   f->dir);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        f->m = fixture_manager_free(f->m, f->dir);
        free(f);
        return 0;
}

static void start_all(struct manager *m) {
        for (unsigned i = 0; i < m->n_modules; i++) {
                assert_int_equal(m->modules[i].module->start(&m->modules[i]), 0);
                m->modules[i].started = true;
        }
}

static void stop_all(struct manager *m) {
        for (unsigned i = m->n_modules; i > 0; i--) {
                assert_int_equal(m->modules[i - 1].module->stop(&m->modules[i - 1]), 0);
                m->modules[i - 1].started = false;
        }
}

static void test_stop_start_all(void **state) {
        struct fixture *f = *state;
        struct registered none = snapshot(f->m), running = {}, again = {}, stopped = {};

        start_all(f->m);
        fixture_run_loop(f->m, 200 * USEC_PER_MSEC);
        running = snapshot(f->m);
        /* identity, configsync, podnet serve routes; every module but the stand-in has metrics. */
        assert_true(running.routes >= none.routes + 4);
        assert_non_null(strstr(running.types, "pinion_identity_certificates_issued_total"));
        assert_non_null(strstr(running.types, "pinion_configsync_fetches_total"));
        assert_non_null(strstr(running.types, "pinion_apiserver_requests_total"));
        assert_non_null(strstr(running.types, "pinion_podnet_operations_total"));
        assert_true(running.collectors >= none.collectors + 4);

        for (unsigned round = 0; round < 2; round++) {
                stop_all(f->m);
                fixture_run_loop(f->m, 100 * USEC_PER_MSEC);
                stopped = snapshot(f->m);
                assert_same(&stopped, &none);
                registered_done(&stopped);

                start_all(f->m);
                fixture_run_loop(f->m, 200 * USEC_PER_MSEC);
                again = snapshot(f->m);
                assert_same(&again, &running);
                registered_done(&again);
        }
        registered_done(&none);
        registered_done(&running);
}

/* One module at a time, the others running: it takes back only what is its own. */
static void test_stop_start_each(void **state) {
        struct fixture *f = *state;
        struct registered running = {};

        start_all(f->m);
        fixture_run_loop(f->m, 200 * USEC_PER_MSEC);
        running = snapshot(f->m);
        for (unsigned i = 0; i < f->m->n_modules; i++) {
                struct module_instance *mi = &f->m->modules[i];
                if (mi->module == &fake_zkreg)
                        continue;
                assert_int_equal(mi->module->stop(mi), 0);
                struct registered without = snapshot(f->m);
                if (mi->state != MODULE_DISABLED)
                        assert_true(without.families < running.families);
                assert_true(without.routes <= running.routes);
                registered_done(&without);
                assert_int_equal(mi->module->start(mi), 0);
                fixture_run_loop(f->m, 100 * USEC_PER_MSEC);
                struct registered back = snapshot(f->m);
                assert_same(&back, &running);
                registered_done(&back);
        }
        registered_done(&running);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_stop_start_all, setup, teardown),
                cmocka_unit_test_setup_teardown(test_stop_start_each, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
