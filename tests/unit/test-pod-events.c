/* SPDX-License-Identifier: MIT */
/* The pod events bus (pod-events.h): an announcement reaches every observer in the order they
 * were added, with its note formatted and cut at POD_EVENT_NOTE_MAX bytes on a UTF-8 boundary;
 * without an observer nothing is formatted; observers added or removed from inside a call. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pod-events.h"

struct heard {
        char *entries[8]; /* "NAME UID TYPE REASON ACTION NOTE" */
        unsigned n;
};

static void heard_done(struct heard *h) {
        for (unsigned i = 0; i < h->n; i++)
                free(h->entries[i]);
}

struct probe {
        const char *name;
        struct heard *heard;
        /* what to do from inside the next call */
        struct pod_events *events;
        struct probe *remove, *add;
};

static void on_event(const struct pod_event *ev, void *userdata) {
        struct probe *p = userdata;
        struct heard *h = p->heard;

        assert_true(h->n < ELEMENTSOF(h->entries));
        assert_true(asprintf(&h->entries[h->n++], "%s %s %s %s %s %s", p->name, ev->uid,
                             ev->type == POD_EVENT_WARNING ? "Warning" : "Normal", ev->reason, ev->action, ev->note) > 0);
        if (p->remove) {
                pod_events_remove_observer(p->events, on_event, p->remove);
                p->remove = NULL;
        }
        if (p->add) {
                assert_int_equal(pod_events_add_observer(p->events, on_event, p->add), 0);
                p->add = NULL;
        }
}

static void test_observers_in_order(void **state) {
        _cleanup_(pod_events_freep) struct pod_events *e = NULL;
        _cleanup_(heard_done) struct heard h = {};
        struct probe a = { .name = "a", .heard = &h }, b = { .name = "b", .heard = &h };

        (void) state;
        assert_int_equal(pod_events_new(&e), 0);
        assert_false(pod_events_observed(e));
        assert_int_equal(pod_events_add_observer(e, on_event, &a), 0);
        assert_int_equal(pod_events_add_observer(e, on_event, &b), 0);
        assert_int_equal(pod_events_add_observer(e, on_event, &a), -EEXIST);
        assert_true(pod_events_observed(e));

        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync", "Config %s version %d", "app", 3);
        pod_event_emit(e, "u2", POD_EVENT_WARNING, POD_EVENT_NETWORK_FAILED, NULL, "no %s", "address");
        assert_int_equal(h.n, 4);
        assert_string_equal(h.entries[0], "a u1 Normal ConfigSynced Sync Config app version 3");
        assert_string_equal(h.entries[1], "b u1 Normal ConfigSynced Sync Config app version 3");
        /* No action: an empty one, never NULL. */
        assert_string_equal(h.entries[2], "a u2 Warning NetworkFailed  no address");
        assert_string_equal(h.entries[3], "b u2 Warning NetworkFailed  no address");

        pod_events_remove_observer(e, on_event, &a);
        pod_event_emit(e, "u3", POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "x");
        assert_int_equal(h.n, 5);
        assert_string_equal(h.entries[4], "b u3 Normal Registered Register x");
        pod_events_remove_observer(e, on_event, &b);
        assert_false(pod_events_observed(e));
}

static void on_note(const struct pod_event *ev, void *userdata) {
        char **note = userdata;
        free(*note);
        *note = strdup(ev->note);
        assert_non_null(*note);
}

static void test_note_cut_on_a_character(void **state) {
        _cleanup_(pod_events_freep) struct pod_events *e = NULL;
        _cleanup_free_ char *note = NULL;
        char text[POD_EVENT_NOTE_MAX + 16];

        (void) state;
        assert_int_equal(pod_events_new(&e), 0);
        assert_int_equal(pod_events_add_observer(e, on_note, &note), 0);

        /* Exactly the limit: whole. */
        memset(text, 'a', POD_EVENT_NOTE_MAX);
        text[POD_EVENT_NOTE_MAX] = 0;
        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ISSUED, "Issue", "%s", text);
        assert_int_equal(strlen(note), POD_EVENT_NOTE_MAX);

        /* Longer: cut at the limit. */
        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ISSUED, "Issue", "%sbcd", text);
        assert_int_equal(strlen(note), POD_EVENT_NOTE_MAX);
        assert_int_equal(note[POD_EVENT_NOTE_MAX - 1], 'a');

        /* A two-byte character across the limit goes whole: 1023 bytes, never half of it. */
        text[POD_EVENT_NOTE_MAX - 1] = 0;
        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ISSUED, "Issue", "%s\xc3\xa9", text);
        assert_int_equal(strlen(note), POD_EVENT_NOTE_MAX - 1);
        /* A three-byte one ending at the limit stays: it fits. */
        text[POD_EVENT_NOTE_MAX - 3] = 0;
        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ISSUED, "Issue", "%s\xe2\x82\xac", text);
        assert_int_equal(strlen(note), POD_EVENT_NOTE_MAX);
        assert_string_equal(note + POD_EVENT_NOTE_MAX - 3, "\xe2\x82\xac");
        /* ... and one byte later it goes whole. */
        text[POD_EVENT_NOTE_MAX - 3] = 'a';
        text[POD_EVENT_NOTE_MAX - 2] = 0;
        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ISSUED, "Issue", "%s\xe2\x82\xac", text);
        assert_int_equal(strlen(note), POD_EVENT_NOTE_MAX - 2);
        pod_events_remove_observer(e, on_note, &note);
}

static void test_nobody_listening_costs_nothing(void **state) {
        _cleanup_(pod_events_freep) struct pod_events *e = NULL;
        _cleanup_(heard_done) struct heard h = {};
        struct probe a = { .name = "a", .heard = &h };

        (void) state;
        assert_int_equal(pod_events_new(&e), 0);
        /* The note is not even formatted: an argument that would crash it is never read. */
        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "%s", (const char *) 1);
        /* No bus, no uid: nothing happens. */
        pod_event_emit(NULL, "u1", POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "x");
        assert_int_equal(pod_events_add_observer(e, on_event, &a), 0);
        pod_event_emit(e, NULL, POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "x");
        assert_int_equal(h.n, 0);
        assert_false(pod_events_observed(NULL));
        assert_int_equal(pod_events_add_observer(NULL, on_event, &a), -EINVAL);
        pod_events_remove_observer(NULL, on_event, &a);
}

static void test_observers_change_during_a_call(void **state) {
        _cleanup_(pod_events_freep) struct pod_events *e = NULL;
        _cleanup_(heard_done) struct heard h = {};
        struct probe a = { .name = "a", .heard = &h }, b = { .name = "b", .heard = &h }, c = { .name = "c", .heard = &h };

        (void) state;
        assert_int_equal(pod_events_new(&e), 0);
        a.events = e;
        a.remove = &b; /* the one after it */
        a.add = &c;
        assert_int_equal(pod_events_add_observer(e, on_event, &a), 0);
        assert_int_equal(pod_events_add_observer(e, on_event, &b), 0);

        pod_event_emit(e, "u1", POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "one");
        /* b was removed before its turn; c, added during the call, hears only later events. */
        assert_int_equal(h.n, 1);
        assert_string_equal(h.entries[0], "a u1 Normal Registered Register one");

        pod_event_emit(e, "u2", POD_EVENT_NORMAL, POD_EVENT_DEREGISTERED, "Deregister", "two");
        assert_int_equal(h.n, 3);
        assert_string_equal(h.entries[1], "a u2 Normal Deregistered Deregister two");
        assert_string_equal(h.entries[2], "c u2 Normal Deregistered Deregister two");

        /* An observer that removes itself hears nothing more. */
        c.events = e;
        c.remove = &c;
        pod_event_emit(e, "u3", POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "three");
        pod_event_emit(e, "u4", POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "four");
        assert_int_equal(h.n, 6);
        assert_string_equal(h.entries[4], "c u3 Normal Registered Register three");
        assert_string_equal(h.entries[5], "a u4 Normal Registered Register four");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_observers_in_order),
                cmocka_unit_test(test_note_cut_on_a_character),
                cmocka_unit_test(test_nobody_listening_costs_nothing),
                cmocka_unit_test(test_observers_change_during_a_call),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
