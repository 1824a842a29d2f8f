/* SPDX-License-Identifier: MIT */
/* The event correlator under any sequence of events, forgets and clock jumps: it never fails,
 * its caches stay within their bound, a CREATE is named as asked with count 1, a SERIES patches
 * an Event that was created and not forgotten, a forgotten pod starts afresh, the note posted is
 * the event's (or its combined form) within 1 KiB, and no pod posts more than its bucket allows.
 *
 * Input: three setting bytes (cache_max 1..8, aggregate_max_events 1..12, spam_burst 1..32), then
 * three bytes an operation: [reason:2 pod:2 op:2] [type:1 note:4] [dt]. op 0/1 observes, 2 forgets
 * the pod's last Event name, 3 forgets the pod; the clock then moves dt^2 seconds on, or an hour
 * back for dt 255. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event-correlator.h"
#include "fuzz.h"

#define N_PODS 4
#define MAX_OPS 2048

static const char *const reasons[] = { POD_EVENT_CONFIG_FAILED, POD_EVENT_CONFIG_SYNCED, POD_EVENT_REGISTERED,
                                       POD_EVENT_NETWORK_WIRED };

struct pod_model {
        char uid[16];
        long last_name; /* the last Event name (its number) decided for this pod, -1: none */
        bool fresh;     /* forgotten since its last event */
        usec_t bucket_since;
        bool bucket_started;
        unsigned posts;
};

struct model {
        struct event_correlator_settings settings;
        struct pod_model pods[N_PODS];
        bool created[MAX_OPS], forgotten[MAX_OPS];
        long next_name;
        bool clock_stepped_back;
};

static void check_bucket(struct model *m, struct pod_model *p, usec_t now) {
        double elapsed;

        /* With a spam entry per pod always cached and a clock that only moved on, posts since the
         * bucket began are at most its burst plus what it refilled. */
        if (m->settings.cache_max < N_PODS || m->clock_stepped_back)
                return;
        elapsed = (double) (now - p->bucket_since) / (double) USEC_PER_SEC;
        if ((double) p->posts > m->settings.spam_burst + elapsed * m->settings.spam_qps + 1e-6)
                abort();
}

static void check_decision(struct model *m, struct pod_model *p, const struct event_decision *d, const char *note,
                           const char *new_name, usec_t now) {
        long id;

        switch (d->verdict) {
        case EVENT_VERDICT_DROP:
                if (d->note || d->name || d->count != 0)
                        abort();
                return;
        case EVENT_VERDICT_CREATE:
                if (d->count != 1 || d->first_seen != now || !d->name || !streq(d->name, new_name))
                        abort();
                m->created[m->next_name] = true;
                break;
        case EVENT_VERDICT_SERIES:
                if (d->count < 2 || !d->name || sscanf(d->name, "e%ld", &id) != 1 || id < 0 || id >= m->next_name ||
                    !m->created[id] || m->forgotten[id] || p->fresh)
                        abort();
                break;
        case _EVENT_VERDICT_MAX:
                abort();
        }
        if (!d->note || strlen(d->note) > POD_EVENT_NOTE_MAX)
                abort();
        if (!streq(d->note, note) && !(startswith(d->note, EVENT_CORRELATOR_COMBINED_PREFIX) &&
                                       streq(d->note + strlen(EVENT_CORRELATOR_COMBINED_PREFIX), note)))
                abort();
        if (sscanf(d->name, "e%ld", &p->last_name) != 1)
                abort();
        p->posts++;
}

static void observe(struct event_correlator *c, struct model *m, struct pod_model *p, uint8_t op, uint8_t arg,
                    usec_t now) {
        char note[32], new_name[32];
        struct pod_event ev = {
                .uid = p->uid,
                .type = arg & 0x80 ? POD_EVENT_WARNING : POD_EVENT_NORMAL,
                .reason = reasons[(op >> 4) & 3],
                .action = "Act",
                .note = note,
        };
        struct event_decision d;

        snprintf(note, sizeof(note), "note %u", arg & 0x0F);
        snprintf(new_name, sizeof(new_name), "e%ld", m->next_name);
        if (!p->bucket_started) {
                p->bucket_started = true;
                p->bucket_since = now;
                p->posts = 0;
        }
        if (event_correlator_observe(c, &ev, new_name, now, &d) < 0)
                abort();
        check_decision(m, p, &d, note, new_name, now);
        check_bucket(m, p, now);
        event_decision_done(&d);
        p->fresh = false;
        m->next_name++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct event_correlator *c = NULL;
        struct model *m;
        usec_t now = 1700000000 * USEC_PER_SEC;

        if (size < 3)
                return 0;
        m = calloc(1, sizeof(*m));
        if (!m)
                return 0;
        m->settings = EVENT_CORRELATOR_SETTINGS_DEFAULT;
        m->settings.cache_max = 1 + data[0] % 8;
        m->settings.aggregate_max_events = 1 + data[1] % 12;
        m->settings.spam_burst = 1 + data[2] % 32;
        if (event_correlator_new(&m->settings, &c) < 0)
                abort();
        for (unsigned i = 0; i < N_PODS; i++) {
                snprintf(m->pods[i].uid, sizeof(m->pods[i].uid), "pod-%u", i);
                m->pods[i].last_name = -1;
        }

        for (size_t i = 3; i + 3 <= size && m->next_name < MAX_OPS; i += 3) {
                uint8_t op = data[i], arg = data[i + 1], dt = data[i + 2];
                struct pod_model *p = &m->pods[(op >> 2) & 3];

                switch (op & 3) {
                case 0:
                case 1:
                        observe(c, m, p, op, arg, now);
                        break;
                case 2:
                        if (p->last_name >= 0) {
                                char name[32];
                                snprintf(name, sizeof(name), "e%ld", p->last_name);
                                event_correlator_forget_name(c, name);
                                m->forgotten[p->last_name] = true;
                        }
                        break;
                case 3:
                        event_correlator_forget_pod(c, p->uid);
                        p->fresh = true;
                        p->bucket_started = false;
                        break;
                }
                if (event_correlator_size(c) > 3 * m->settings.cache_max)
                        abort();
                if (dt == 255) {
                        now -= USEC_PER_HOUR;
                        m->clock_stepped_back = true;
                } else
                        now += (usec_t) dt * dt * USEC_PER_SEC;
        }
        event_correlator_free(c);
        free(m);
        return 0;
}
