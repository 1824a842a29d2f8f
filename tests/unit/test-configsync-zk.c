/* SPDX-License-Identifier: MIT */
/* The zk-version-node trigger against a fake struct zookeeper_fact: the first report is the
 * baseline, a moved mzxid is a change, creation and deletion are changes, no session is not,
 * the same version after a reconnect is not, and free unwatches (or forgets). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "zk-trigger.h"

struct fake_zk {
        char *path;
        zookeeper_node_fn fn;
        void *userdata;
        int watches, unwatches;
        int fail_with;
};

static int fake_watch(void *zk, const char *path, zookeeper_node_fn fn, void *userdata, void **ret_watch) {
        struct fake_zk *z = zk;
        if (z->fail_with)
                return z->fail_with;
        free(z->path);
        z->path = strdup(path);
        z->fn = fn;
        z->userdata = userdata;
        z->watches++;
        *ret_watch = z;
        return 0;
}

static void fake_unwatch(void *zk, void *watch) {
        struct fake_zk *z = zk;
        assert_ptr_equal(watch, z);
        z->unwatches++;
        z->fn = NULL;
}

static void report(struct fake_zk *z, int64_t mzxid, int error) {
        assert_non_null(z->fn);
        z->fn(z->path, mzxid, error, z->userdata);
}

struct seen {
        unsigned n;
        int64_t old, new;
};

static void on_changed(struct zk_trigger *t, int64_t old_version, int64_t new_version, void *userdata) {
        struct seen *s = userdata;
        s->n++;
        s->old = old_version;
        s->new = new_version;
}

static void test_trigger(_unused_ void **state) {
        struct fake_zk z = {};
        struct zookeeper_fact fact = { .zk = &z, .watch_node = fake_watch, .unwatch_node = fake_unwatch };
        struct zk_trigger *t = NULL;
        struct seen s = {};
        int64_t v;

        assert_int_equal(zk_trigger_new(&fact, "relative", on_changed, &s, &t), -EINVAL);
        assert_int_equal(zk_trigger_new(&fact, "/config/app/version", on_changed, &s, &t), 0);
        assert_string_equal(z.path, "/config/app/version");
        assert_ptr_equal(zk_trigger_fact(t), &fact);
        assert_false(zk_trigger_version(t, &v));

        report(&z, 0, -ENOTCONN); /* no session yet: nothing */
        assert_false(zk_trigger_version(t, &v));
        assert_int_equal(zk_trigger_error(t), -ENOTCONN);
        report(&z, 100, 0); /* baseline */
        assert_int_equal(s.n, 0);
        assert_true(zk_trigger_version(t, &v));
        assert_int_equal(v, 100);
        report(&z, 100, 0); /* the same after a reconnect */
        assert_int_equal(s.n, 0);
        report(&z, 0, -ENOTCONN);
        assert_int_equal(s.n, 0);
        report(&z, 105, 0); /* changed while we were away: reported on return */
        assert_int_equal(s.n, 1);
        assert_int_equal(s.old, 100);
        assert_int_equal(s.new, 105);
        report(&z, 0, -ENOENT); /* deleted */
        assert_int_equal(s.n, 2);
        assert_int_equal(s.new, -1);
        report(&z, 0, -ENOENT);
        assert_int_equal(s.n, 2);
        report(&z, 200, 0); /* created again */
        assert_int_equal(s.n, 3);
        assert_int_equal(s.old, -1);
        assert_int_equal(zk_trigger_error(t), 0);

        zk_trigger_free(t, false);
        assert_int_equal(z.unwatches, 1);

        /* A trigger whose node does not exist at first: absence is the baseline. */
        s = (struct seen) {};
        assert_int_equal(zk_trigger_new(&fact, "/n", on_changed, &s, &t), 0);
        report(&z, 0, -ENOENT);
        assert_int_equal(s.n, 0);
        report(&z, 7, 0);
        assert_int_equal(s.n, 1);
        /* forget: the fact is gone, do not call into it. */
        zk_trigger_free(t, true);
        assert_int_equal(z.unwatches, 1);

        z.fail_with = -ENOMEM;
        assert_int_equal(zk_trigger_new(&fact, "/n", on_changed, &s, &t), -ENOMEM);
        free(z.path);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_trigger),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
