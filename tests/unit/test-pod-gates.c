/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pod-gates.h"

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

/* A gate closed for pods whose pinion.io/configs annotation names something not in `present`. */
struct fake_gate {
        const char *present;
        int error; /* returned instead when non-zero */
        unsigned calls;
};

static int fake_gate(const struct pod *p, void *userdata, char **ret_reason) {
        struct fake_gate *f = userdata;
        const char *want = pod_annotation(p, "pinion.io/configs");

        f->calls++;
        if (f->error)
                return f->error;
        if (!want || !*want || (f->present && streq(want, f->present)))
                return 1;
        assert_true(asprintf(ret_reason, "%s not present", want) >= 0);
        return 0;
}

struct heard {
        char uids[16][64];
        unsigned n;
};

static void listener(struct pod_gates *g, const char *uid, void *userdata) {
        struct heard *h = userdata;
        (void) g;
        assert_true(h->n < 16);
        snprintf(h->uids[h->n++], 64, "%s", uid ?: "*");
}

static void test_no_gates_is_open(void **state) {
        _cleanup_(pod_gates_freep) struct pod_gates *g = NULL;
        struct pod *p = mkpod("u1", "app");
        char *reason = NULL;

        (void) state;
        assert_int_equal(pod_gates_new(&g), 0);
        assert_int_equal(pod_gates_check(g, p, &reason), 1);
        assert_null(reason);
        pod_unref(p);
}

static void test_closed_gate_names_itself(void **state) {
        _cleanup_(pod_gates_freep) struct pod_gates *g = NULL;
        struct fake_gate configs = { .present = "other" }, identity = { .present = NULL };
        struct pod *p = mkpod("u1", "app"), *q = mkpod("u2", "");
        _cleanup_free_ char *reason = NULL;

        (void) state;
        assert_int_equal(pod_gates_new(&g), 0);
        assert_int_equal(pod_gates_add(g, "configs", fake_gate, &configs), 0);
        assert_int_equal(pod_gates_add(g, "configs", fake_gate, &configs), -EEXIST);
        assert_int_equal(pod_gates_add(g, "identity", fake_gate, &identity), 0);
        assert_int_equal(pod_gates_count(g), 2);

        assert_int_equal(pod_gates_check(g, p, &reason), 0);
        assert_string_equal(reason, "configs: app not present");
        /* The first closed gate answers; later ones are not asked. */
        assert_int_equal(identity.calls, 0);

        /* A pod no gate concerns is open. */
        assert_int_equal(pod_gates_check(g, q, NULL), 1);

        configs.present = "app";
        identity.present = "app";
        assert_int_equal(pod_gates_check(g, p, NULL), 1);
        pod_unref(p);
        pod_unref(q);
}

static void test_failing_gate_is_closed(void **state) {
        _cleanup_(pod_gates_freep) struct pod_gates *g = NULL;
        struct fake_gate broken = { .error = -EIO };
        struct pod *p = mkpod("u1", "");
        _cleanup_free_ char *reason = NULL;

        (void) state;
        assert_int_equal(pod_gates_new(&g), 0);
        assert_int_equal(pod_gates_add(g, "broken", fake_gate, &broken), 0);
        assert_int_equal(pod_gates_check(g, p, &reason), 0);
        assert_non_null(strstr(reason, "broken: "));
        pod_unref(p);
}

static void test_listeners_hear_changes(void **state) {
        _cleanup_(pod_gates_freep) struct pod_gates *g = NULL;
        struct fake_gate configs = {};
        struct heard h = {}, h2 = {};

        (void) state;
        assert_int_equal(pod_gates_new(&g), 0);
        assert_int_equal(pod_gates_add_listener(g, listener, &h), 0);
        assert_int_equal(pod_gates_add_listener(g, listener, &h), -EEXIST);
        assert_int_equal(pod_gates_add_listener(g, listener, &h2), 0);

        /* Adding and removing a gate changes every pod's answer. */
        assert_int_equal(pod_gates_add(g, "configs", fake_gate, &configs), 0);
        pod_gates_changed(g, "u7");
        pod_gates_remove(g, "configs");
        pod_gates_remove(g, "configs"); /* unknown now: no-op, no event */
        assert_int_equal(pod_gates_count(g), 0);
        assert_int_equal(h.n, 3);
        assert_string_equal(h.uids[0], "*");
        assert_string_equal(h.uids[1], "u7");
        assert_string_equal(h.uids[2], "*");

        pod_gates_remove_listener(g, listener, &h2);
        pod_gates_changed(g, "u8");
        assert_int_equal(h.n, 4);
        assert_int_equal(h2.n, 3);
}

struct self_remover {
        struct heard heard;
        struct heard *other;
};

static void removing_listener(struct pod_gates *g, const char *uid, void *userdata) {
        struct self_remover *s = userdata;
        listener(g, uid, &s->heard);
        /* Removes itself and the one after it, and adds a new one, in the middle of a dispatch. */
        pod_gates_remove_listener(g, removing_listener, s);
        pod_gates_remove_listener(g, listener, s->other);
        assert_int_equal(pod_gates_add_listener(g, listener, &s->heard), 0);
}

static void test_listener_changes_during_dispatch(void **state) {
        _cleanup_(pod_gates_freep) struct pod_gates *g = NULL;
        struct heard later = {};
        struct self_remover s = { .other = &later };

        (void) state;
        assert_int_equal(pod_gates_new(&g), 0);
        assert_int_equal(pod_gates_add_listener(g, removing_listener, &s), 0);
        assert_int_equal(pod_gates_add_listener(g, listener, &later), 0);
        pod_gates_changed(g, "u1");
        /* The remover heard it once; the one it removed did not; the one it added did not yet. */
        assert_int_equal(s.heard.n, 1);
        assert_int_equal(later.n, 0);
        pod_gates_changed(g, "u2");
        assert_int_equal(s.heard.n, 2); /* through the listener added during the first dispatch */
        assert_string_equal(s.heard.uids[1], "u2");
        assert_int_equal(later.n, 0);
}

/* A gate of the pinion.io/ready condition alone (the network attachment) never holds back
 * registration; pod_gates_check_scope() asks every gate in scope and names them all. */
static void test_scopes(void **state) {
        _cleanup_(pod_gates_freep) struct pod_gates *g = NULL;
        struct fake_gate network = { .present = "none" }, configs = { .present = "none" }, identity = { .present = "app" },
                         broken = { .error = -EIO };
        struct pod *p = mkpod("u1", "app"), *q = mkpod("u2", "");
        char *first = NULL, *reasons = NULL;

        (void) state;
        assert_int_equal(pod_gates_new(&g), 0);
        assert_int_equal(pod_gates_add_scoped(g, "none", fake_gate, &network, 0), -EINVAL);
        assert_int_equal(pod_gates_add_scoped(g, "network", fake_gate, &network, POD_GATE_CONDITION), 0);

        /* Closed for the condition, open for registration. */
        assert_int_equal(pod_gates_check(g, p, &reasons), 1);
        assert_null(reasons);
        assert_int_equal(network.calls, 0);
        assert_int_equal(pod_gates_check_scope(g, p, POD_GATE_REGISTRATION, &first, &reasons), 1);
        assert_null(first);
        assert_null(reasons);
        assert_int_equal(pod_gates_check_scope(g, p, POD_GATE_CONDITION, &first, &reasons), 0);
        assert_string_equal(first, "network");
        assert_string_equal(reasons, "network: app not present");
        first = mfree(first);
        reasons = mfree(reasons);

        /* Every closed gate in scope, in the order added; the first names itself. */
        assert_int_equal(pod_gates_add(g, "configs", fake_gate, &configs), 0);
        assert_int_equal(pod_gates_add(g, "identity", fake_gate, &identity), 0);
        assert_int_equal(pod_gates_add_scoped(g, "broken", fake_gate, &broken, POD_GATE_CONDITION), 0);
        assert_int_equal(pod_gates_check_scope(g, p, POD_GATE_CONDITION, &first, &reasons), 0);
        assert_string_equal(first, "network");
        assert_string_equal(reasons, "network: app not present; configs: app not present; broken: Input/output error");
        first = mfree(first);
        reasons = mfree(reasons);
        /* Registration sees "configs" first, and only the gates of its scope. */
        assert_int_equal(pod_gates_check(g, p, &reasons), 0);
        assert_string_equal(reasons, "configs: app not present");
        reasons = mfree(reasons);
        assert_int_equal(pod_gates_check_scope(g, p, POD_GATE_REGISTRATION, &first, &reasons), 0);
        assert_string_equal(first, "configs");
        assert_string_equal(reasons, "configs: app not present");
        first = mfree(first);
        reasons = mfree(reasons);
        /* Either answer is optional. */
        assert_int_equal(pod_gates_check_scope(g, p, POD_GATE_ALL, NULL, NULL), 0);
        assert_int_equal(pod_gates_check_scope(g, p, POD_GATE_ALL, &first, NULL), 0);
        assert_string_equal(first, "network");
        first = mfree(first);

        /* Open when every gate in scope is. */
        network.present = configs.present = "app";
        broken.error = 0;
        broken.present = "app";
        assert_int_equal(pod_gates_check_scope(g, p, POD_GATE_ALL, &first, &reasons), 1);
        assert_null(first);
        assert_null(reasons);
        assert_int_equal(pod_gates_check_scope(g, q, POD_GATE_CONDITION, &first, &reasons), 1);
        assert_int_equal(pod_gates_check_scope(g, NULL, POD_GATE_CONDITION, &first, &reasons), -EINVAL);
        pod_unref(p);
        pod_unref(q);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_no_gates_is_open),
                cmocka_unit_test(test_closed_gate_names_itself),
                cmocka_unit_test(test_failing_gate_is_closed),
                cmocka_unit_test(test_listeners_hear_changes),
                cmocka_unit_test(test_listener_changes_during_dispatch),
                cmocka_unit_test(test_scopes),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
