/* SPDX-License-Identifier: MIT */
/* The event correlator decides like client-go's event recorder: identical events become one
 * Event with a count, the 10th distinct note of a kind within 10 minutes is combined, a pod may
 * post 25 events and then one per 5 minutes, and every cache is bounded. */

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "event-correlator.h"

#define T0 (UINT64_C(1700000000) * USEC_PER_SEC)
#define POD_A "6f1c2a4e-0000-4000-8000-00000000000a"
#define POD_B "6f1c2a4e-0000-4000-8000-00000000000b"

static struct event_correlator *correlator_new(size_t cache_max) {
        struct event_correlator_settings s = EVENT_CORRELATOR_SETTINGS_DEFAULT;
        struct event_correlator *c = NULL;

        s.cache_max = cache_max;
        assert_int_equal(event_correlator_new(&s, &c), 0);
        return c;
}

/* Observes a Warning ConfigFailed/Sync (or the given reason) and returns the verdict; the
 * decision is left in *d (NULL: released). New Events are named "<uid>.<hex ns>" like client-go's. */
static enum event_verdict observe_full(struct event_correlator *c, const char *uid, enum pod_event_type type,
                                       const char *reason, const char *action, const char *note, usec_t now,
                                       struct event_decision *d) {
        struct pod_event ev = { .uid = uid, .type = type, .reason = reason, .action = action, .note = note };
        struct event_decision local;
        char name[128];

        snprintf(name, sizeof(name), "%.8s.%" PRIx64, uid, now * 1000);
        if (!d)
                d = &local;
        assert_int_equal(event_correlator_observe(c, &ev, name, now, d), 0);
        enum event_verdict v = d->verdict;
        if (d == &local)
                event_decision_done(d);
        return v;
}

static enum event_verdict observe(struct event_correlator *c, const char *uid, const char *note, usec_t now,
                                  struct event_decision *d) {
        return observe_full(c, uid, POD_EVENT_WARNING, POD_EVENT_CONFIG_FAILED, "Sync", note, now, d);
}

/* A CREATE of POD_A's event at now, named as the caller asked. */
static void assert_create(const struct event_decision *d, const char *note, usec_t now) {
        char name[128];

        snprintf(name, sizeof(name), "%.8s.%" PRIx64, POD_A, now * 1000);
        assert_int_equal(d->verdict, EVENT_VERDICT_CREATE);
        assert_int_equal(d->count, 1);
        assert_int_equal(d->first_seen, now);
        assert_string_equal(d->note, note);
        assert_string_equal(d->name, name);
}

static void test_identical_events_count(void **state) {
        struct event_correlator *c = correlator_new(4096);
        struct event_decision d;
        char first_name[128];

        assert_int_equal(observe(c, POD_A, "app v3: download failed: 503", T0, &d), EVENT_VERDICT_CREATE);
        assert_create(&d, "app v3: download failed: 503", T0);
        snprintf(first_name, sizeof(first_name), "%s", d.name);
        event_decision_done(&d);
        assert_null(d.note);
        assert_null(d.name);

        /* Retries every 30 s: one Event, counted; its name and first occurrence stay. */
        for (unsigned i = 2; i <= 12; i++) {
                assert_int_equal(observe(c, POD_A, "app v3: download failed: 503", T0 + (i - 1) * 30 * USEC_PER_SEC, &d),
                                 EVENT_VERDICT_SERIES);
                assert_int_equal(d.count, i);
                assert_string_equal(d.name, first_name);
                assert_int_equal(d.first_seen, T0);
                assert_string_equal(d.note, "app v3: download failed: 503");
                event_decision_done(&d);
        }
        /* The same note under another type, reason or action is another Event. */
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_CONFIG_FAILED, "Sync",
                                      "app v3: download failed: 503", T0 + 400 * USEC_PER_SEC, NULL),
                         EVENT_VERDICT_CREATE);
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_WARNING, POD_EVENT_IDENTITY_FAILED, "Sync",
                                      "app v3: download failed: 503", T0 + 401 * USEC_PER_SEC, NULL),
                         EVENT_VERDICT_CREATE);
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_WARNING, POD_EVENT_CONFIG_FAILED, "Issue",
                                      "app v3: download failed: 503", T0 + 402 * USEC_PER_SEC, NULL),
                         EVENT_VERDICT_CREATE);
        /* spam + aggregate + log for the first kind, aggregate + log for each of the other three */
        assert_int_equal(event_correlator_size(c), 3 + 3 * 2);
        event_correlator_free(c);
}

static void test_similar_events_combine(void **state) {
        struct event_correlator *c = correlator_new(4096);
        struct event_decision d;
        char note[64], combined_name[128];
        usec_t now = T0;

        /* Nine distinct notes within ten minutes: nine Events of their own. */
        for (unsigned i = 1; i <= 9; i++, now += 20 * USEC_PER_SEC) {
                snprintf(note, sizeof(note), "app v%u synced", i);
                assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync", note, now, &d),
                                 EVENT_VERDICT_CREATE);
                assert_string_equal(d.note, note);
                event_decision_done(&d);
        }
        /* The tenth is the combined Event (client-go combines once the set holds 10 notes). */
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync", "app v10 synced", now, &d),
                         EVENT_VERDICT_CREATE);
        assert_string_equal(d.note, "(combined from similar events): app v10 synced");
        assert_int_equal(d.count, 1);
        assert_int_equal(d.first_seen, now);
        snprintf(combined_name, sizeof(combined_name), "%s", d.name);
        event_decision_done(&d);

        /* Every further new note is counted on the combined Event, which shows the latest note. */
        for (unsigned i = 11; i <= 15; i++) {
                now += 20 * USEC_PER_SEC;
                snprintf(note, sizeof(note), "app v%u synced", i);
                assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync", note, now, &d),
                                 EVENT_VERDICT_SERIES);
                assert_int_equal(d.count, i - 9);
                assert_string_equal(d.name, combined_name);
                assert_true(startswith(d.note, EVENT_CORRELATOR_COMBINED_PREFIX));
                assert_string_equal(d.note + strlen(EVENT_CORRELATOR_COMBINED_PREFIX), note);
                event_decision_done(&d);
        }
        /* One of the first nine again: its own Event, counted. The tenth again: the combined one. */
        now += 20 * USEC_PER_SEC;
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync", "app v3 synced", now, &d),
                         EVENT_VERDICT_SERIES);
        assert_int_equal(d.count, 2);
        assert_string_equal(d.note, "app v3 synced");
        assert_int_equal(d.first_seen, T0 + 2 * 20 * USEC_PER_SEC);
        event_decision_done(&d);
        now += 20 * USEC_PER_SEC;
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync", "app v10 synced", now, &d),
                         EVENT_VERDICT_SERIES);
        assert_int_equal(d.count, 7);
        assert_string_equal(d.name, combined_name);
        event_decision_done(&d);

        /* Another reason of the same pod is not similar: its own Event. */
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_WARNING, POD_EVENT_CONFIG_FAILED, "Sync", "app v16: 503", now, &d),
                         EVENT_VERDICT_CREATE);
        assert_string_equal(d.note, "app v16: 503");
        event_decision_done(&d);
        event_correlator_free(c);
}

static void test_aggregation_window(void **state) {
        struct event_correlator *c = correlator_new(4096);
        const usec_t window = 10 * USEC_PER_MINUTE;
        struct event_decision d;
        char note[64];
        usec_t now = T0;

        /* The window rolls: nine notes 9 minutes apart are all within 10 minutes of the previous. */
        for (unsigned i = 1; i <= 9; i++, now += 9 * USEC_PER_MINUTE) {
                snprintf(note, sizeof(note), "rotated, serial %u", i);
                assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ROTATED, "Rotate", note, now, NULL),
                                 EVENT_VERDICT_CREATE);
        }
        /* Exactly the window after the last one is still within it: combined. */
        now = now - 9 * USEC_PER_MINUTE + window;
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ROTATED, "Rotate", "rotated, serial 10",
                                      now, &d),
                         EVENT_VERDICT_CREATE);
        assert_true(startswith(d.note, EVENT_CORRELATOR_COMBINED_PREFIX));
        event_decision_done(&d);

        /* Quiet for longer than the window: the distinct notes start again, nine of their own. */
        now += window + 1;
        for (unsigned i = 11; i <= 19; i++, now += USEC_PER_SEC) {
                snprintf(note, sizeof(note), "rotated, serial %u", i);
                assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ROTATED, "Rotate", note, now, &d),
                                 EVENT_VERDICT_CREATE);
                assert_string_equal(d.note, note);
                event_decision_done(&d);
        }
        /* ... and the next distinct one joins the combined Event still in the dedup cache. */
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ROTATED, "Rotate", "rotated, serial 20",
                                      now, &d),
                         EVENT_VERDICT_SERIES);
        assert_int_equal(d.count, 2);
        assert_string_equal(d.note, "(combined from similar events): rotated, serial 20");
        event_decision_done(&d);

        /* A clock that stepped back is within the window. */
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ROTATED, "Rotate", "rotated, serial 21",
                                      now - USEC_PER_HOUR, &d),
                         EVENT_VERDICT_SERIES);
        assert_int_equal(d.count, 3);
        event_decision_done(&d);
        event_correlator_free(c);
}

static void test_spam_burst_then_one_per_5min(void **state) {
        struct event_correlator *c = correlator_new(4096);
        struct event_decision d;
        usec_t now = T0, allowed_at;

        /* A crash loop failing every second: 25 posted (1 create, 24 patches), then dropped. */
        for (unsigned i = 1; i <= 40; i++, now += USEC_PER_SEC) {
                enum event_verdict v = observe(c, POD_A, "network: veth setup failed: EEXIST", now, &d);
                if (i == 1)
                        assert_int_equal(v, EVENT_VERDICT_CREATE);
                else if (i <= 25) {
                        assert_int_equal(v, EVENT_VERDICT_SERIES);
                        assert_int_equal(d.count, i);
                } else {
                        assert_int_equal(v, EVENT_VERDICT_DROP);
                        assert_null(d.note);
                        assert_null(d.name);
                }
                event_decision_done(&d);
        }
        /* The other pod has its own bucket. */
        assert_int_equal(observe(c, POD_B, "network: veth setup failed: EEXIST", now, NULL), EVENT_VERDICT_CREATE);

        /* One token per 5 minutes; the patch carries every occurrence, the suppressed too. */
        now = T0 + 5 * USEC_PER_MINUTE;
        assert_int_equal(observe(c, POD_A, "network: veth setup failed: EEXIST", now - 2 * USEC_PER_SEC, NULL),
                         EVENT_VERDICT_DROP);
        now += USEC_PER_SEC;
        assert_int_equal(observe(c, POD_A, "network: veth setup failed: EEXIST", now, &d), EVENT_VERDICT_SERIES);
        assert_int_equal(d.count, 42);
        assert_int_equal(d.first_seen, T0);
        event_decision_done(&d);
        allowed_at = now;
        for (unsigned round = 0; round < 3; round++) {
                assert_int_equal(observe(c, POD_A, "network: veth setup failed: EEXIST", allowed_at + USEC_PER_SEC, NULL),
                                 EVENT_VERDICT_DROP);
                assert_int_equal(observe(c, POD_A, "network: veth setup failed: EEXIST",
                                         allowed_at + 4 * USEC_PER_MINUTE, NULL),
                                 EVENT_VERDICT_DROP);
                allowed_at += 5 * USEC_PER_MINUTE + USEC_PER_SEC;
                assert_int_equal(observe(c, POD_A, "network: veth setup failed: EEXIST", allowed_at, &d),
                                 EVENT_VERDICT_SERIES);
                assert_int_equal(d.count, 42 + 3 * (round + 1));
                event_decision_done(&d);
        }

        /* The bucket is per pod, not per event: a new kind is dropped too, and leaves no series
         * behind, so when it is posted later it is created rather than patched. */
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "registered in /svc/app",
                                      allowed_at + USEC_PER_SEC, NULL),
                         EVENT_VERDICT_DROP);
        allowed_at += 5 * USEC_PER_MINUTE + USEC_PER_SEC;
        assert_int_equal(observe_full(c, POD_A, POD_EVENT_NORMAL, POD_EVENT_REGISTERED, "Register", "registered in /svc/app",
                                      allowed_at, &d),
                         EVENT_VERDICT_CREATE);
        assert_int_equal(d.count, 1);
        event_decision_done(&d);
        event_correlator_free(c);
}

static void test_forget_name(void **state) {
        struct event_correlator *c = correlator_new(4096);
        struct event_decision d;
        char name[128];

        assert_int_equal(observe(c, POD_A, "identity: CA unreachable", T0, &d), EVENT_VERDICT_CREATE);
        snprintf(name, sizeof(name), "%s", d.name);
        event_decision_done(&d);
        assert_int_equal(observe(c, POD_A, "identity: CA unreachable", T0 + USEC_PER_SEC, &d), EVENT_VERDICT_SERIES);
        assert_string_equal(d.name, name);
        event_decision_done(&d);

        /* The patch found no Event (expired after an hour on the server): create it again. */
        event_correlator_forget_name(c, "no-such-event");
        event_correlator_forget_name(c, name);
        assert_int_equal(observe(c, POD_A, "identity: CA unreachable", T0 + 2 * USEC_PER_HOUR, &d), EVENT_VERDICT_CREATE);
        assert_create(&d, "identity: CA unreachable", T0 + 2 * USEC_PER_HOUR);
        assert_string_not_equal(d.name, name);
        event_decision_done(&d);
        assert_int_equal(observe(c, POD_A, "identity: CA unreachable", T0 + 2 * USEC_PER_HOUR + 1, &d),
                         EVENT_VERDICT_SERIES);
        assert_int_equal(d.count, 2);
        event_decision_done(&d);
        event_correlator_free(c);
}

static void test_forget_pod(void **state) {
        struct event_correlator *c = correlator_new(4096);
        struct event_decision d;
        usec_t now = T0;

        for (unsigned i = 0; i < 30; i++, now += USEC_PER_SEC)
                (void) observe(c, POD_A, "config: app v3 failed", now, NULL);
        assert_int_equal(observe(c, POD_A, "config: app v3 failed", now, NULL), EVENT_VERDICT_DROP);
        assert_int_equal(observe(c, POD_B, "config: app v3 failed", now, NULL), EVENT_VERDICT_CREATE);
        assert_int_equal(observe(c, POD_B, "registered", now, NULL), EVENT_VERDICT_CREATE);
        assert_int_equal(event_correlator_size(c), 3 + 4); /* B: one bucket, one kind, two notes */

        /* A deleted pod leaves nothing; a pod by the same uid would start with a full bucket. */
        event_correlator_forget_pod(c, POD_A);
        event_correlator_forget_pod(c, "not-a-pod");
        assert_int_equal(event_correlator_size(c), 4);
        assert_int_equal(observe(c, POD_A, "config: app v3 failed", now, &d), EVENT_VERDICT_CREATE);
        assert_create(&d, "config: app v3 failed", now);
        event_decision_done(&d);
        assert_int_equal(observe(c, POD_B, "config: app v3 failed", now + 1, &d), EVENT_VERDICT_SERIES);
        assert_int_equal(d.count, 2);
        event_decision_done(&d);

        event_correlator_forget_pod(c, POD_B);
        event_correlator_forget_pod(c, POD_A);
        assert_int_equal(event_correlator_size(c), 0);
        event_correlator_free(c);
}

static const char *pod_uid(unsigned i) {
        static char uid[64];

        snprintf(uid, sizeof(uid), "pod-%u", i);
        return uid;
}

static void test_lru_eviction(void **state) {
        struct event_correlator *c = correlator_new(3);
        usec_t now = T0;

        /* Three pods fill each cache (spam, aggregate, log: one entry each per pod). */
        for (unsigned i = 0; i < 3; i++)
                assert_int_equal(observe(c, pod_uid(i), "wired eth0", now++, NULL), EVENT_VERDICT_CREATE);
        assert_int_equal(event_correlator_size(c), 9);

        /* pod-0 is used again, so pod-1 is now the least recently used and a fourth pod evicts it. */
        assert_int_equal(observe(c, pod_uid(0), "wired eth0", now++, NULL), EVENT_VERDICT_SERIES);
        assert_int_equal(observe(c, pod_uid(3), "wired eth0", now++, NULL), EVENT_VERDICT_CREATE);
        assert_int_equal(event_correlator_size(c), 9);
        assert_int_equal(observe(c, pod_uid(0), "wired eth0", now++, NULL), EVENT_VERDICT_SERIES);
        assert_int_equal(observe(c, pod_uid(3), "wired eth0", now++, NULL), EVENT_VERDICT_SERIES);
        /* pod-1 was forgotten: created again (evicting pod-2, the least recent now). */
        assert_int_equal(observe(c, pod_uid(1), "wired eth0", now++, NULL), EVENT_VERDICT_CREATE);
        assert_int_equal(observe(c, pod_uid(2), "wired eth0", now++, NULL), EVENT_VERDICT_CREATE);
        assert_int_equal(event_correlator_size(c), 9);

        /* Many notes of one pod stay bounded too. */
        char note[32];
        for (unsigned i = 0; i < 20; i++) {
                snprintf(note, sizeof(note), "wired eth%u", i);
                (void) observe(c, pod_uid(7), note, now++, NULL);
        }
        assert_int_equal(event_correlator_size(c), 9);
        event_correlator_free(c);
}

static void test_lru_large(void **state) {
        struct event_correlator *c = correlator_new(4096);
        usec_t now = T0;

        /* Past a cache's bound (and through the hash table's growth) every pod keeps its series
         * while it is among the 4096 most recent. */
        for (unsigned i = 0; i < 5000; i++)
                assert_int_equal(observe(c, pod_uid(i), "registered", now++, NULL), EVENT_VERDICT_CREATE);
        assert_int_equal(event_correlator_size(c), 3 * 4096);
        assert_int_equal(observe(c, pod_uid(4999), "registered", now++, NULL), EVENT_VERDICT_SERIES);
        assert_int_equal(observe(c, pod_uid(904), "registered", now++, NULL), EVENT_VERDICT_SERIES);
        assert_int_equal(observe(c, pod_uid(903), "registered", now++, NULL), EVENT_VERDICT_CREATE);
        event_correlator_free(c);
}

static void test_combined_note_fits(void **state) {
        struct event_correlator *c = correlator_new(4096);
        struct event_decision d;
        char note[POD_EVENT_NOTE_MAX + 1];

        /* A note of 1 KiB of two-byte characters: the combined one is cut to 1 KiB, on a
         * character boundary. */
        for (size_t i = 0; i + 1 < POD_EVENT_NOTE_MAX; i += 2) {
                note[i] = (char) 0xC3;
                note[i + 1] = (char) 0xA9; /* é */
        }
        note[POD_EVENT_NOTE_MAX] = 0;
        for (unsigned i = 0; i < 9; i++) {
                note[0] = (char) ('a' + i);
                note[1] = 'x';
                (void) observe(c, POD_A, note, T0 + i, NULL);
        }
        note[0] = 'z';
        note[1] = 'x';
        assert_int_equal(observe(c, POD_A, note, T0 + 10, &d), EVENT_VERDICT_CREATE);
        size_t n = strlen(d.note);
        assert_true(n <= POD_EVENT_NOTE_MAX);
        assert_true(n >= POD_EVENT_NOTE_MAX - 1);
        assert_true(startswith(d.note, EVENT_CORRELATOR_COMBINED_PREFIX "zx"));
        assert_int_equal((unsigned char) d.note[n - 1], 0xA9);
        event_decision_done(&d);
        event_correlator_free(c);
}

static void test_invalid(void **state) {
        struct event_correlator_settings s = EVENT_CORRELATOR_SETTINGS_DEFAULT;
        struct event_correlator *c = NULL;
        struct event_decision d;

        s.cache_max = 0;
        assert_int_equal(event_correlator_new(&s, &c), -EINVAL);
        s = EVENT_CORRELATOR_SETTINGS_DEFAULT;
        s.aggregate_max_events = 0;
        assert_int_equal(event_correlator_new(&s, &c), -EINVAL);
        s = EVENT_CORRELATOR_SETTINGS_DEFAULT;
        s.spam_qps = NAN;
        assert_int_equal(event_correlator_new(&s, &c), -EINVAL);
        s.spam_qps = -1;
        assert_int_equal(event_correlator_new(&s, &c), -EINVAL);
        s = EVENT_CORRELATOR_SETTINGS_DEFAULT;
        s.spam_burst = 0;
        assert_int_equal(event_correlator_new(&s, &c), -EINVAL);
        assert_int_equal(event_correlator_new(NULL, &c), -EINVAL);
        assert_null(c);

        c = correlator_new(16);
        struct pod_event ev = { .uid = POD_A, .type = POD_EVENT_NORMAL, .reason = "Registered", .action = "Register",
                                .note = "ok" };
        assert_int_equal(event_correlator_observe(c, NULL, "n", T0, &d), -EINVAL);
        assert_int_equal(d.verdict, EVENT_VERDICT_DROP);
        assert_null(d.name);
        assert_int_equal(event_correlator_observe(c, &ev, NULL, T0, &d), -EINVAL);
        assert_int_equal(event_correlator_observe(c, &ev, "", T0, &d), -EINVAL);
        assert_int_equal(event_correlator_observe(c, &ev, "n", T0, NULL), -EINVAL);
        ev.uid = "";
        assert_int_equal(event_correlator_observe(c, &ev, "n", T0, &d), -EINVAL);
        ev.uid = POD_A;
        ev.note = NULL;
        assert_int_equal(event_correlator_observe(c, &ev, "n", T0, &d), -EINVAL);
        ev.note = "ok";
        ev.type = (enum pod_event_type) 7;
        assert_int_equal(event_correlator_observe(c, &ev, "n", T0, &d), -EINVAL);
        assert_int_equal(event_correlator_size(c), 0);

        /* An empty note and action are events like any other. */
        ev.type = POD_EVENT_NORMAL;
        ev.note = "";
        ev.action = "";
        assert_int_equal(event_correlator_observe(c, &ev, "n", T0, &d), 0);
        assert_int_equal(d.verdict, EVENT_VERDICT_CREATE);
        assert_string_equal(d.name, "n");
        event_decision_done(&d);

        event_correlator_forget_name(NULL, "n");
        event_correlator_forget_pod(NULL, POD_A);
        assert_int_equal(event_correlator_size(NULL), 0);
        event_decision_done(NULL);
        assert_null(event_correlator_free(c));
        assert_null(event_correlator_free(NULL));

        assert_string_equal(event_correlator_verdict_to_string(EVENT_VERDICT_SERIES), "series");
        assert_null(event_correlator_verdict_to_string(_EVENT_VERDICT_MAX));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_identical_events_count),
                cmocka_unit_test(test_similar_events_combine),
                cmocka_unit_test(test_aggregation_window),
                cmocka_unit_test(test_spam_burst_then_one_per_5min),
                cmocka_unit_test(test_forget_name),
                cmocka_unit_test(test_forget_pod),
                cmocka_unit_test(test_lru_eviction),
                cmocka_unit_test(test_lru_large),
                cmocka_unit_test(test_combined_note_fits),
                cmocka_unit_test(test_invalid),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
