/* SPDX-License-Identifier: MIT */
#pragma once

/* A real manager for tests of modules: config, loop, pod store, gates, metrics and the API on
 * a socket, all under a fresh temporary directory, with nothing started. Include after
 * <cmocka.h>. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "fs.h"
#include "manager.h"

/* A module that does nothing, to stand in for a dependency the test leaves out. */
static inline int fixture_noop_init(struct module_instance *mi, struct config *c, char **ret_error) {
        return 0;
}
static inline int fixture_noop_start(struct module_instance *mi) {
        return 0;
}
static inline int fixture_noop_stop(struct module_instance *mi) {
        return 0;
}
static inline int fixture_noop_status(struct module_instance *mi, cJSON *o) {
        return 0;
}
static inline void fixture_noop_free(struct module_instance *mi) {
}
#define FIXTURE_NOOP_MODULE(n)                                                                          \
        {                                                                                               \
                .name = (n), .init = fixture_noop_init, .start = fixture_noop_start,                   \
                .reload = fixture_noop_init, .stop = fixture_noop_stop, .status = fixture_noop_status, \
                .free = fixture_noop_free,                                                              \
        }

/* Makes dir (a mkdtemp template, "/tmp/NAME.XXXXXX") and a manager whose [agent] keeps
 * everything below it, with the sections format adds (%1$s is dir). */
static inline struct manager *fixture_manager_new(char *dir, const char *format, ...) _printf_(2, 3);
static inline struct manager *fixture_manager_new(char *dir, const char *format, ...) {
        _cleanup_free_ char *conf = NULL, *sections = NULL, *text = NULL, *error = NULL;
        struct manager_options opts = {};
        struct manager *m = NULL;
        va_list ap;

        assert_non_null(mkdtemp(dir));
        va_start(ap, format);
        assert_true(vasprintf(&sections, format, ap) >= 0);
        va_end(ap);
        assert_true(asprintf(&text,
                             "[agent]\nstate-dir=%1$s/state\nruntime-dir=%1$s/run\nsocket=%1$s/run/pinion.sock\n"
                             "pods-dir=%1$s/pods\nlog-level=warning\n%2$s",
                             dir, sections) > 0);
        conf = fs_path_join(dir, "pinion.conf");
        assert_non_null(conf);
        assert_int_equal(fs_write_file_atomic(conf, text, strlen(text), 0600, (uid_t) -1, (gid_t) -1), 0);
        opts.config_file = conf;
        assert_int_equal(manager_new(&opts, &m, &error), 0);
        assert_int_equal(fs_mkdir_p(m->settings.runtime_dir, 0755), 0);
        assert_int_equal(fs_mkdir_p(m->settings.state_dir, 0700), 0);
        struct api_options ao = { .socket_path = m->settings.socket, .socket_mode = 0600,
                                  .socket_gid = (gid_t) -1, .listen_fd = -1 };
        assert_int_equal(api_new(m->event, &ao, m->metrics, &m->api), 0);
        return m;
}

/* Frees the manager and removes dir with everything below it. */
static inline struct manager *fixture_manager_free(struct manager *m, const char *dir) {
        manager_free(m);
        assert_int_equal(fs_rm_rf(dir), 0);
        return NULL;
}

static inline void fixture_run_loop(struct manager *m, usec_t usec) {
        usec_t end = now_usec(CLOCK_MONOTONIC) + usec;
        while (now_usec(CLOCK_MONOTONIC) < end)
                assert_true(sd_event_run(m->event, 50 * USEC_PER_MSEC) >= 0);
}
