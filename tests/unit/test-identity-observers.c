/* SPDX-License-Identifier: MIT */
/* The identity model's observers (identity.h): every observer hears every announcement, in the
 * order they were added; one removed from inside a call hears nothing more, one added there only
 * later changes; a change announced from inside a call reaches everyone before the outer
 * announcement goes on; the same fn/userdata pair is there once. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "identity.h"
#include "module.h"

/* identity.c is the module too, and the agent it links against asks for a module table. */
extern const struct module identity_module;
const struct module *const module_table[] = { &identity_module };
const unsigned module_table_size = ELEMENTSOF(module_table);

struct log {
        char entries[32][48];
        size_t n;
};

struct probe {
        const char *name;
        struct log *log;
        /* what to do from inside the next call */
        struct probe *remove, *add;
        bool announce_bundle;
};

static void on_change(struct identity *id, enum identity_change change, const char *uid, void *userdata) {
        struct probe *p = userdata;
        struct log *l = p->log;

        assert_true(l->n < ELEMENTSOF(l->entries));
        snprintf(l->entries[l->n++], sizeof(l->entries[0]), "%s:%d:%s", p->name, change, uid ? uid : "-");
        if (p->remove) {
                identity_remove_observer(id, on_change, p->remove);
                p->remove = NULL;
        }
        if (p->add) {
                assert_int_equal(identity_add_observer(id, on_change, p->add), 0);
                p->add = NULL;
        }
        if (p->announce_bundle) {
                p->announce_bundle = false;
                identity_announce(id, IDENTITY_CHANGE_BUNDLE, NULL);
        }
}

static void assert_log(struct log *l, const char *const *want, size_t n) {
        assert_int_equal(l->n, n);
        for (size_t i = 0; i < n; i++)
                assert_string_equal(l->entries[i], want[i]);
        l->n = 0;
}

static void test_order_and_duplicates(void **state) {
        struct identity id = {};
        struct log l = {};
        struct probe a = { "a", &l }, b = { "b", &l };

        assert_int_equal(identity_add_observer(&id, on_change, &a), 0);
        assert_int_equal(identity_add_observer(&id, on_change, &b), 0);
        assert_int_equal(identity_add_observer(&id, on_change, &a), -EEXIST);
        identity_announce(&id, IDENTITY_CHANGE_WORKLOAD, "uid-1");
        identity_announce(&id, IDENTITY_CHANGE_JWT_KEYS, NULL);
        assert_log(&l, (const char *const[]) { "a:0:uid-1", "b:0:uid-1", "a:2:-", "b:2:-" }, 4);

        identity_remove_observer(&id, on_change, &a);
        identity_remove_observer(&id, on_change, &a); /* not there any more: nothing happens */
        identity_announce(&id, IDENTITY_CHANGE_BUNDLE, NULL);
        assert_log(&l, (const char *const[]) { "b:1:-" }, 1);
        identity_remove_observer(&id, on_change, &b);
        assert_int_equal(id.observers.n, 0u);
        observer_list_done(&id.observers);
}

static void test_changes_from_inside_a_call(void **state) {
        struct identity id = {};
        struct log l = {};
        struct probe a = { "a", &l }, b = { "b", &l }, c = { "c", &l }, d = { "d", &l };

        assert_int_equal(identity_add_observer(&id, on_change, &a), 0);
        assert_int_equal(identity_add_observer(&id, on_change, &b), 0);
        assert_int_equal(identity_add_observer(&id, on_change, &c), 0);

        /* a removes b before b's turn and adds d, which hears only the next change. */
        a.remove = &b;
        a.add = &d;
        identity_announce(&id, IDENTITY_CHANGE_WORKLOAD, "uid-1");
        assert_log(&l, (const char *const[]) { "a:0:uid-1", "c:0:uid-1" }, 2);

        /* c announces from inside its call: everyone hears the inner change, then d the outer. */
        c.announce_bundle = true;
        identity_announce(&id, IDENTITY_CHANGE_WORKLOAD, "uid-2");
        assert_log(&l, (const char *const[]) { "a:0:uid-2", "c:0:uid-2", "a:1:-", "c:1:-", "d:1:-", "d:0:uid-2" }, 6);

        /* An observer removing itself. */
        c.remove = &c;
        identity_announce(&id, IDENTITY_CHANGE_JWT_KEYS, NULL);
        identity_announce(&id, IDENTITY_CHANGE_JWT_KEYS, NULL);
        assert_log(&l, (const char *const[]) { "a:2:-", "c:2:-", "d:2:-", "a:2:-", "d:2:-" }, 5);
        assert_int_equal(id.observers.n, 2u);
        observer_list_done(&id.observers);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_order_and_duplicates),
                cmocka_unit_test(test_changes_from_inside_a_call),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
