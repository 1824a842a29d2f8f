/* SPDX-License-Identifier: MIT */
/* The writers: pod starts and identity rotations make condition PATCHes and event POSTs; the
 * naive policy sends each write on its own, pinion's queues them per agent (sim-writes.h). */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "token-bucket.h"
#include "sim-random.h"
#include "sim-writes.h"

/* What a write is for: a queue entry's flags, a naive write's events' gen. */
enum {
        WRITE_CONDITION = 1u << 0, /* a pod's condition PATCH (else an event POST) */
        WRITE_START = 1u << 1,     /* caused by a pod start (else by a rotation) */
        WRITE_STEADY = 1u << 2,    /* ... by a start counted for the steady figure */
        WRITE_FAILED = 1u << 3,    /* naive: failed at least once */
};

struct write_entry {
        uint32_t pod;
        uint32_t flags;
};

enum writer_state {
        WRITER_IDLE,     /* nothing queued */
        WRITER_WAITING,  /* the head's send is scheduled (token bucket, backoff, the pause after a streak) */
        WRITER_INFLIGHT, /* the head is out */
};

struct writer {
        uint64_t rng;           /* the model's: starts, rotations, how long jobs take */
        uint32_t next_pod;
        bool backlogged;        /* holds a write a failure delayed */
        /* pinion: the queue, head first; the head is out while INFLIGHT */
        struct backoff backoff;
        struct write_entry *queue;
        unsigned len;
        enum writer_state state;
        bool has_token;         /* the head's send holds its token-bucket reservation */
        bool failing;           /* the head's last attempt failed */
        /* naive: writes out or waiting for their retry, and of them those that failed */
        unsigned pending, failed;
};

static void schedule(struct sim_writes *w, usec_t t, enum event_type type, uint32_t i, uint32_t flags,
                     uint32_t arg, enum outcome outcome) {
        heap_push(w->heap, (struct event) {
                .time = t,
                .agent = i,
                .gen = flags,
                .arg = arg,
                .type = type,
                .outcome = outcome,
        });
}

static usec_t random_exponential(uint64_t *rng, double mean_usec) {
        return usec_from_double(-log1p(-sim_random_double(rng)) * mean_usec);
}

static void writer_set_backlogged(struct sim_writes *w, struct writer *wr, bool backlogged, usec_t now) {
        if (wr->backlogged == backlogged)
                return;
        wr->backlogged = backlogged;
        if (backlogged)
                w->n_backlogged++;
        else if (--w->n_backlogged == 0)
                w->clear_at = now;
}

/* A write request leaves: the counts of the result. */
static void write_sent(struct sim_writes *w, uint32_t flags, usec_t now) {
        struct write_result *r = w->result;

        if (now < w->outage_start) {
                if (now >= w->steady_settle) /* the starts' writes have ramped up */
                        r->writes_before++;
                if (flags & WRITE_STEADY)
                        r->writes_steady++;
                return;
        }
        r->writes_total++;
        if (now < w->recovery)
                r->writes_outage++;
}

/* Offers the write to the apiserver and schedules its answer. */
static void write_offer(struct sim_writes *w, uint32_t i, uint32_t flags, usec_t now) {
        usec_t at;
        enum outcome outcome = sim_run_offer_write(w->sim, w->m->write_cost, now, &at);

        write_sent(w, flags, now);
        schedule(w, at, EVENT_WRITE_REPLY, i, flags, sim_run_server_epoch(w->sim), outcome);
}

/* An answer is a success only if the apiserver did not fall over while it was being served. */
static bool write_succeeded(const struct sim_writes *w, const struct event *e) {
        return e->outcome == OUTCOME_OK && e->arg == sim_run_server_epoch(w->sim);
}

/* ---- naive: every write on its own ---- */

static void naive_add(struct sim_writes *w, uint32_t i, uint32_t flags, usec_t now) {
        struct writer *wr = &w->writers[i];

        wr->pending++;
        w->result->queue_max = MAX(w->result->queue_max, wr->pending);
        schedule(w, now, EVENT_WRITE_SEND, i, flags, 0, OUTCOME_NONE);
}

static void naive_reply(struct sim_writes *w, const struct event *e) {
        struct writer *wr = &w->writers[e->agent];
        uint32_t flags = e->gen;

        if (write_succeeded(w, e)) {
                wr->pending--;
                if ((flags & WRITE_FAILED) && --wr->failed == 0)
                        writer_set_backlogged(w, wr, false, e->time);
                return;
        }
        if (!(flags & WRITE_FAILED)) {
                flags |= WRITE_FAILED;
                wr->failed++;
                writer_set_backlogged(w, wr, true, e->time);
        }
        schedule(w, e->time + w->m->legacy_retry, EVENT_WRITE_SEND, e->agent, flags, 0, OUTCOME_NONE);
}

/* ---- pinion: one queue per agent ---- */

/* The first entry that may be replaced or dropped: not the head while it is out. */
static unsigned queue_first_movable(const struct writer *wr) {
        return wr->state == WRITER_INFLIGHT ? 1 : 0;
}

static void queue_remove(struct writer *wr, unsigned k) {
        memmove(&wr->queue[k], &wr->queue[k + 1], (wr->len - k - 1) * sizeof(wr->queue[0]));
        wr->len--;
}

/* A newer decision for a pod whose condition is still queued replaces it where it stands. */
static bool queue_coalesce(struct writer *wr, const struct write_entry *e) {
        for (unsigned k = queue_first_movable(wr); k < wr->len; k++)
                if ((wr->queue[k].flags & WRITE_CONDITION) && wr->queue[k].pod == e->pod) {
                        wr->queue[k].flags = e->flags;
                        return true;
                }
        return false;
}

/* A full queue drops its oldest event, or, holding none, its oldest condition. False: the only
 * entry is out, there is nothing to drop but the new one. */
static bool queue_make_room(struct sim_writes *w, struct writer *wr) {
        unsigned first = queue_first_movable(wr);

        for (unsigned k = first; k < wr->len; k++)
                if (!(wr->queue[k].flags & WRITE_CONDITION)) {
                        queue_remove(wr, k);
                        w->result->dropped++;
                        return true;
                }
        if (first >= wr->len)
                return false;
        queue_remove(wr, first);
        w->result->dropped_conditions++;
        return true;
}

static void pinion_add(struct sim_writes *w, uint32_t i, struct write_entry e, usec_t now) {
        struct writer *wr = &w->writers[i];

        if ((e.flags & WRITE_CONDITION) && queue_coalesce(wr, &e)) {
                w->result->coalesced++;
                return;
        }
        if (wr->len == w->m->write_queue && !queue_make_room(w, wr)) {
                if (e.flags & WRITE_CONDITION)
                        w->result->dropped_conditions++;
                else
                        w->result->dropped++;
                return;
        }
        wr->queue[wr->len++] = e;
        w->result->queue_max = MAX(w->result->queue_max, wr->len);
        if (wr->state == WRITER_IDLE) {
                wr->state = WRITER_WAITING;
                schedule(w, now, EVENT_WRITE_SEND, i, 0, 0, OUTCOME_NONE);
        }
}

static void pinion_send(struct sim_writes *w, uint32_t i, usec_t now) {
        struct writer *wr = &w->writers[i];

        if (wr->state != WRITER_WAITING || wr->len == 0)
                abort(); /* one send is scheduled per queue, and only while it holds a write */
        if (!wr->has_token) {
                usec_t wait = token_bucket_reserve(sim_run_bucket(w->sim, i), now);

                wr->has_token = true;
                if (wait > 0) {
                        schedule(w, now + wait, EVENT_WRITE_SEND, i, 0, 0, OUTCOME_NONE);
                        return;
                }
        }
        wr->has_token = false;
        wr->state = WRITER_INFLIGHT;
        write_offer(w, i, wr->queue[0].flags, now);
}

static void pinion_reply(struct sim_writes *w, const struct event *e) {
        struct writer *wr = &w->writers[e->agent];
        usec_t now = e->time, pause = 0;

        wr->state = WRITER_WAITING;
        if (!write_succeeded(w, e)) {
                /* The whole queue waits for the head's retry. */
                usec_t retry_after = e->outcome == OUTCOME_REJECTED ? w->m->retry_after : 0;

                wr->failing = true;
                writer_set_backlogged(w, wr, true, now);
                schedule(w, now + backoff_next(&wr->backoff, now, retry_after), EVENT_WRITE_SEND, e->agent, 0, 0,
                         OUTCOME_NONE);
                return;
        }
        queue_remove(wr, 0);
        if (wr->failing) {
                /* The streak is over (the apiserver is back): the rest of the queue waits a pause
                 * that spreads the fleet's drain, as the reflector's relist after a 410 does. */
                wr->failing = false;
                pause = backoff_random_between(&wr->backoff, 0, backoff_current_step(&wr->backoff, now));
        }
        if (wr->len == 0) {
                wr->state = WRITER_IDLE;
                writer_set_backlogged(w, wr, false, now);
                return;
        }
        schedule(w, now + pause, EVENT_WRITE_SEND, e->agent, 0, 0, OUTCOME_NONE);
}

/* ---- what makes writes ---- */

static void write_add(struct sim_writes *w, uint32_t i, uint32_t flags, uint32_t pod, usec_t now) {
        switch (w->p->writes) {
        case WRITES_NAIVE:
                naive_add(w, i, flags, now);
                return;
        case WRITES_PINION:
                pinion_add(w, i, (struct write_entry) { .pod = pod, .flags = flags }, now);
                return;
        case WRITES_NONE:
                break;
        }
        abort();
}

static void schedule_start(struct sim_writes *w, uint32_t i, usec_t now) {
        if (w->m->pod_start_rate > 0)
                schedule(w, now + random_exponential(&w->writers[i].rng, (double) USEC_PER_MINUTE / w->m->pod_start_rate),
                         EVENT_POD_START, i, 0, 0, OUTCOME_NONE);
}

static void schedule_rotation(struct sim_writes *w, uint32_t i, usec_t now) {
        if (w->m->rotation_period > 0 && w->m->pods_per_node > 0)
                schedule(w, now + random_exponential(&w->writers[i].rng,
                                                     (double) w->m->rotation_period / w->m->pods_per_node),
                         EVENT_ROTATION, i, 0, 0, OUTCOME_NONE);
}

/* A pod starts: its condition once its jobs are in place (False first if one is still pending
 * after condition-grace), its Normal events (network wired now, identity issued and configs
 * synced when its jobs are in place) in batches of event-batch. */
static void on_pod_start(struct sim_writes *w, uint32_t i, usec_t now) {
        const struct model *m = w->m;
        struct writer *wr = &w->writers[i];
        uint32_t pod = wr->next_pod++, flags = WRITE_START;
        bool slow = sim_random_double(&wr->rng) < m->slow_share;
        usec_t ready = slow ? sim_random_between(&wr->rng, m->condition_grace, m->slow_jobs_time)
                            : sim_random_between(&wr->rng, 0, m->condition_grace);

        w->result->starts++;
        if (now + w->steady_settle <= w->outage_start) {
                flags |= WRITE_STEADY;
                w->result->starts_steady++;
        }
        if (slow)
                schedule(w, now + m->condition_grace, EVENT_CONDITION, i, flags, pod, OUTCOME_NONE);
        schedule(w, now + ready, EVENT_CONDITION, i, flags, pod, OUTCOME_NONE);
        schedule(w, now + m->event_batch, EVENT_EVENTS_DUE, i, flags, pod, OUTCOME_NONE);
        if (ready > m->event_batch) /* the jobs' events come after the first batch closed */
                schedule(w, now + ready + m->event_batch, EVENT_EVENTS_DUE, i, flags, pod, OUTCOME_NONE);
        schedule_start(w, i, now);
}

static void on_rotation(struct sim_writes *w, uint32_t i, usec_t now) {
        schedule(w, now + w->m->event_batch, EVENT_EVENTS_DUE, i, 0, UINT32_MAX, OUTCOME_NONE);
        schedule_rotation(w, i, now);
}

usec_t sim_writes_settle(const struct model *m) {
        /* a start's last write is due by then, and sent within the margin */
        return m->slow_jobs_time + m->event_batch + USEC_PER_SEC;
}

bool sim_writes_owns(enum event_type type) {
        switch (type) {
        case EVENT_POD_START:
        case EVENT_ROTATION:
        case EVENT_CONDITION:
        case EVENT_EVENTS_DUE:
        case EVENT_WRITE_SEND:
        case EVENT_WRITE_REPLY:
                return true;
        case EVENT_TICK:
        case EVENT_OUTAGE:
        case EVENT_SERVER_UP:
        case EVENT_SEND:
        case EVENT_REPLY:
        case EVENT_WATCH_END:
        case EVENT_RELIST:
                return false;
        }
        abort();
}

void sim_writes_dispatch(struct sim_writes *w, const struct event *e) {
        bool naive = w->p->writes == WRITES_NAIVE;

        switch ((enum event_type) e->type) {
        case EVENT_POD_START:
                on_pod_start(w, e->agent, e->time);
                return;
        case EVENT_ROTATION:
                on_rotation(w, e->agent, e->time);
                return;
        case EVENT_CONDITION:
                write_add(w, e->agent, e->gen | WRITE_CONDITION, e->arg, e->time);
                return;
        case EVENT_EVENTS_DUE:
                write_add(w, e->agent, e->gen, e->arg, e->time);
                return;
        case EVENT_WRITE_SEND:
                if (naive)
                        write_offer(w, e->agent, e->gen, e->time);
                else
                        pinion_send(w, e->agent, e->time);
                return;
        case EVENT_WRITE_REPLY:
                if (naive)
                        naive_reply(w, e);
                else
                        pinion_reply(w, e);
                return;
        case EVENT_TICK:
        case EVENT_OUTAGE:
        case EVENT_SERVER_UP:
        case EVENT_SEND:
        case EVENT_REPLY:
        case EVENT_WATCH_END:
        case EVENT_RELIST:
                break;
        }
        abort();
}

static uint64_t writer_seed(uint64_t seed, uint32_t i) {
        uint64_t x = (seed * UINT64_C(0x100000001b3) + i + 1) ^ UINT64_C(0xd1b54a32d192ed03);
        return x != 0 ? x : 1;
}

int sim_writes_init(struct sim_writes *w, const struct model *m, const struct policy *p, struct sim *sim,
                    struct heap *heap, struct write_result *result) {
        *w = (struct sim_writes) {
                .m = m,
                .p = p,
                .sim = sim,
                .heap = heap,
                .outage_start = m->warmup,
                .recovery = m->warmup + m->outage,
                .steady_settle = sim_writes_settle(m),
                .result = result,
        };
        *result = (struct write_result) {};
        if (p->writes == WRITES_NONE)
                return 0;

        w->writers = calloc(m->agents, sizeof(struct writer));
        if (!w->writers)
                return -ENOMEM;
        if (p->writes == WRITES_PINION) {
                struct write_entry *queues = calloc((size_t) m->agents * m->write_queue, sizeof(struct write_entry));
                if (!queues) {
                        w->writers = mfree(w->writers);
                        return -ENOMEM;
                }
                for (uint32_t i = 0; i < m->agents; i++)
                        w->writers[i].queue = queues + (size_t) i * m->write_queue;
        }
        for (uint32_t i = 0; i < m->agents; i++) {
                struct writer *wr = &w->writers[i];
                uint64_t seed = writer_seed(m->seed, i);

                wr->rng = seed;
                backoff_init(&wr->backoff, &p->backoff, seed ^ UINT64_C(0x5851f42d4c957f2d));
                schedule_start(w, i, 0);
                schedule_rotation(w, i, 0);
        }
        return 0;
}

void sim_writes_done(struct sim_writes *w) {
        if (w->writers)
                free(w->writers[0].queue);
        w->writers = mfree(w->writers);
}

bool sim_writes_settled(const struct sim_writes *w) {
        return w->n_backlogged == 0;
}

void sim_writes_finish(struct sim_writes *w) {
        struct write_result *r = w->result;

        r->backlogged_end = w->n_backlogged;
        if (w->n_backlogged > 0)
                r->backlog_clear = USEC_INFINITY;
        else
                r->backlog_clear = w->clear_at > w->recovery ? w->clear_at - w->recovery : 0;
}
