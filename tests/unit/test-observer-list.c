/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "macro.h"
#include "observer-list.h"

/* A model with observers of its own callback type, walked as the models walk theirs. */
struct model;
typedef void (*model_observer_fn)(struct model *m, int event, void *userdata);

struct model {
        struct observer_list observers;
        int calls[8];  /* per observer index (userdata points at its slot's index) */
        int order[16]; /* who was called, in order */
        size_t n_order;
};

static void announce(struct model *m, int event) {
        for (size_t i = 0, n = observer_list_begin(&m->observers); i < n; i++) {
                struct observer_list_entry o;
                if (observer_list_get(&m->observers, i, &o))
                        ((model_observer_fn) o.fn)(m, event, o.userdata);
        }
        observer_list_end(&m->observers);
}

static int slots[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };

static void record(struct model *m, int who) {
        m->calls[who]++;
        if (m->n_order < ELEMENTSOF(m->order))
                m->order[m->n_order++] = who;
}

static void plain(struct model *m, _unused_ int event, void *userdata) {
        record(m, *(int *) userdata);
}

static int add(struct model *m, model_observer_fn fn, int who) {
        return observer_list_add(&m->observers, (observer_list_fn) fn, &slots[who], 0);
}

static void del(struct model *m, model_observer_fn fn, int who) {
        observer_list_remove(&m->observers, (observer_list_fn) fn, &slots[who]);
}

static void test_order_and_duplicates(_unused_ void **state) {
        struct model m = {};

        assert_false(observer_list_has_any(&m.observers));
        assert_int_equal(add(&m, plain, 0), 0);
        assert_true(observer_list_has_any(&m.observers));
        assert_int_equal(add(&m, plain, 1), 0);
        assert_int_equal(add(&m, plain, 0), -EEXIST);
        assert_int_equal(observer_list_add(&m.observers, NULL, NULL, 0), -EINVAL);
        announce(&m, 1);
        assert_int_equal(m.n_order, 2);
        assert_int_equal(m.order[0], 0);
        assert_int_equal(m.order[1], 1);

        del(&m, plain, 0);
        del(&m, plain, 5); /* not there: nothing happens */
        announce(&m, 2);
        assert_int_equal(m.calls[0], 1);
        assert_int_equal(m.calls[1], 2);
        assert_int_equal(m.observers.n, 1);
        /* removed, it may be added again */
        assert_int_equal(add(&m, plain, 0), 0);
        observer_list_done(&m.observers);
        assert_null(m.observers.entries);
}

/* Observer 0 removes observer 1 (after it in the list) and itself, and adds observer 2. */
static void reshuffle(struct model *m, _unused_ int event, void *userdata) {
        record(m, *(int *) userdata);
        del(m, plain, 1);
        del(m, reshuffle, 0);
        assert_int_equal(add(m, plain, 2), 0);
}

static void test_changes_from_inside_a_call(_unused_ void **state) {
        struct model m = {};

        assert_int_equal(add(&m, reshuffle, 0), 0);
        assert_int_equal(add(&m, plain, 1), 0);
        announce(&m, 1);
        /* 1 was removed before its turn; 2, added during the walk, hears only later events */
        assert_int_equal(m.calls[0], 1);
        assert_int_equal(m.calls[1], 0);
        assert_int_equal(m.calls[2], 0);
        /* the removed entries are gone once the walk ended */
        assert_int_equal(m.observers.n, 1);

        announce(&m, 2);
        assert_int_equal(m.calls[0], 1);
        assert_int_equal(m.calls[2], 1);
        observer_list_done(&m.observers);
}

/* The only observer leaves from inside its call: none is there any more, though the walk still
 * holds its entry. */
static void leave(struct model *m, _unused_ int event, void *userdata) {
        record(m, *(int *) userdata);
        del(m, leave, 0);
        assert_false(observer_list_has_any(&m->observers));
}

static void test_none_left_during_a_walk(_unused_ void **state) {
        struct model m = {};

        assert_int_equal(add(&m, leave, 0), 0);
        announce(&m, 1);
        assert_int_equal(m.calls[0], 1);
        assert_false(observer_list_has_any(&m.observers));
        observer_list_done(&m.observers);
}

/* Observer 3 announces again from inside its call: the inner walk must not compact the list
 * under the outer one. */
static void nested(struct model *m, int event, void *userdata) {
        record(m, *(int *) userdata);
        if (event == 1) {
                del(m, plain, 4);
                announce(m, 2);
        }
}

static void test_nested_walks(_unused_ void **state) {
        struct model m = {};

        assert_int_equal(add(&m, nested, 3), 0);
        assert_int_equal(add(&m, plain, 4), 0);
        assert_int_equal(add(&m, plain, 5), 0);
        announce(&m, 1);
        /* 3 heard both events; 4 was removed before either reached it; 5 heard both, the inner
         * one first */
        assert_int_equal(m.calls[3], 2);
        assert_int_equal(m.calls[4], 0);
        assert_int_equal(m.calls[5], 2);
        assert_int_equal(m.observers.n, 2);
        assert_int_equal(m.observers.walking, 0);
        observer_list_done(&m.observers);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_order_and_duplicates),
                cmocka_unit_test(test_changes_from_inside_a_call),
                cmocka_unit_test(test_none_left_during_a_walk),
                cmocka_unit_test(test_nested_walks),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
