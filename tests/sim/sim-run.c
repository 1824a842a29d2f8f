/* SPDX-License-Identifier: MIT */
/* One run of one policy: the agents, the apiserver, and the loop that feeds them the events in
 * order until every agent is synced again or the time limit runs out. */

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "backoff.h"
#include "token-bucket.h"
#include "sim-event.h"
#include "sim-random.h"
#include "sim-run.h"

enum request_kind {
        REQUEST_LIST,
        REQUEST_WATCH,
};

enum agent_state {
        AGENT_WAITING,  /* a request is scheduled (backoff, token bucket) */
        AGENT_INFLIGHT, /* a request is out */
        AGENT_WATCHING, /* a watch is established */
};

struct agent {
        struct backoff backoff;
        struct token_bucket bucket;
        uint64_t rng;
        enum agent_state state;
        enum request_kind kind; /* of the request scheduled or in flight */
        uint32_t gen;           /* bumped on every transition: the agent's queued events go stale */
        bool has_token;         /* the scheduled request holds its token-bucket reservation */
        bool accepted;          /* the request in flight is in the apiserver's backlog */
        bool need_list;         /* 410 seen: the next request is a list */
        bool synced;
        usec_t rv;              /* when the last resourceVersion seen was current */
        usec_t synced_at;
};

struct window {
        double offered;
        unsigned requests;
        unsigned rejected;
        unsigned failed;
        bool down; /* the apiserver was down during some of it */
};

struct sim {
        const struct model *m;
        const struct policy *p;
        struct agent *agents;
        struct heap heap;

        /* the apiserver */
        bool up;
        usec_t restarted_at; /* 0: never restarted */
        double backlog;      /* cost units queued */
        usec_t backlog_at;
        unsigned overloaded_windows;

        usec_t outage_start, recovery;
        unsigned n_synced;
        struct window window;
        usec_t window_start;
        struct result *result;
};

static void schedule(struct sim *s, usec_t t, enum event_type type, uint32_t agent, enum outcome outcome) {
        heap_push(&s->heap, (struct event) {
                .time = t,
                .agent = agent,
                .gen = agent < s->m->agents ? s->agents[agent].gen : 0,
                .type = type,
                .outcome = outcome,
        });
}

static double request_cost(const struct sim *s, enum request_kind kind) {
        if (kind == REQUEST_WATCH)
                return s->m->watch_cost;
        return s->m->list_base_cost + s->m->object_cost * (double) s->p->list_objects;
}

static void agent_set_synced(struct sim *s, struct agent *a, bool synced, usec_t now) {
        if (a->synced == synced)
                return;
        a->synced = synced;
        if (synced) {
                s->n_synced++;
                a->synced_at = now;
        } else
                s->n_synced--;
}

/* Schedules the agent's next request `delay` from now. */
static void agent_request(struct sim *s, uint32_t i, usec_t now, usec_t delay, enum request_kind kind) {
        struct agent *a = &s->agents[i];

        a->state = AGENT_WAITING;
        a->kind = kind;
        a->has_token = false;
        a->accepted = false;
        a->gen++;
        schedule(s, now + delay, EVENT_SEND, i, OUTCOME_NONE);
}

static enum request_kind agent_retry_kind(const struct sim *s, const struct agent *a) {
        return s->p->resume && !a->need_list ? REQUEST_WATCH : REQUEST_LIST;
}

static void agent_failed(struct sim *s, uint32_t i, usec_t now, usec_t retry_after) {
        struct agent *a = &s->agents[i];
        usec_t delay = backoff_next(&a->backoff, now, s->p->honour_retry_after ? retry_after : 0);

        agent_set_synced(s, a, false, now);
        s->window.failed++;
        agent_request(s, i, now, delay, agent_retry_kind(s, a));
}

static void agent_gone(struct sim *s, uint32_t i, usec_t now) {
        struct agent *a = &s->agents[i];

        a->need_list = true;
        agent_set_synced(s, a, false, now);
        if (s->p->gone_relists_at_once)
                agent_request(s, i, now, 0, REQUEST_LIST);
        else if (s->p->gone_splay)
                agent_request(s, i, now, backoff_random_between(&a->backoff, 0, backoff_current_step(&a->backoff, now)),
                              REQUEST_LIST);
        else
                /* client-go returns from ListAndWatch and backs off before relisting. */
                agent_request(s, i, now, backoff_next(&a->backoff, now, 0), REQUEST_LIST);
}

static void agent_watching(struct sim *s, uint32_t i, usec_t now) {
        struct agent *a = &s->agents[i];
        usec_t timeout = sim_random_between(&a->rng, s->m->watch_timeout_min, 2 * s->m->watch_timeout_min);

        a->state = AGENT_WATCHING;
        a->rv = now;
        a->gen++;
        agent_set_synced(s, a, true, now);
        schedule(s, now + timeout, EVENT_WATCH_END, i, OUTCOME_NONE);
}

/* The apiserver went away under an established watch: a failure for every policy (the stream was
 * cut short). */
static void agent_watch_cut(struct sim *s, uint32_t i, usec_t now) {
        s->agents[i].rv = now; /* bookmarks kept it current until the cut */
        agent_failed(s, i, now, 0);
}

static void on_watch_end(struct sim *s, uint32_t i, usec_t now) {
        struct agent *a = &s->agents[i];

        /* A normal end of a watch: renewed at once, the agent stays synced meanwhile. */
        a->rv = now;
        agent_request(s, i, now, 0, s->p->renew_resumes ? REQUEST_WATCH : REQUEST_LIST);
}

static void on_reply(struct sim *s, uint32_t i, usec_t now, enum outcome outcome) {
        struct agent *a = &s->agents[i];

        a->accepted = false;
        switch (outcome) {
        case OUTCOME_OK:
                if (a->kind == REQUEST_WATCH) {
                        agent_watching(s, i, now);
                        return;
                }
                a->need_list = false;
                a->rv = now;
                agent_request(s, i, now, 0, REQUEST_WATCH);
                return;
        case OUTCOME_GONE:
                agent_gone(s, i, now);
                return;
        case OUTCOME_REJECTED:
                s->window.rejected++;
                agent_failed(s, i, now, s->m->retry_after);
                return;
        case OUTCOME_REFUSED:
        case OUTCOME_TIMEOUT:
                agent_failed(s, i, now, 0);
                return;
        case OUTCOME_NONE:
                break;
        }
        abort();
}

/* ---- the apiserver ---- */

static void server_drain(struct sim *s, usec_t now) {
        double served = s->m->capacity * (double) (now - s->backlog_at) / (double) USEC_PER_SEC;

        s->backlog = MAX(s->backlog - served, 0.0);
        s->backlog_at = now;
}

static bool server_resume_too_old(struct sim *s, struct agent *a, usec_t now) {
        if (now - a->rv > s->m->cache_window)
                return true;
        if (s->restarted_at > 0 && a->rv < s->restarted_at)
                return sim_random_double(&a->rng) < s->m->gone_after_restart;
        return false;
}

static void server_receive(struct sim *s, uint32_t i, usec_t now) {
        const struct model *m = s->m;
        struct agent *a = &s->agents[i];

        if (!s->up) {
                if (m->down_mode == DOWN_REFUSED)
                        schedule(s, now + m->rtt, EVENT_REPLY, i, OUTCOME_REFUSED);
                else
                        schedule(s, now + m->request_timeout, EVENT_REPLY, i, OUTCOME_TIMEOUT);
                return;
        }

        double cost = request_cost(s, a->kind);
        s->window.offered += cost;
        server_drain(s, now);
        if (s->backlog + cost > m->capacity * (double) m->queue_limit / (double) USEC_PER_SEC) {
                schedule(s, now + m->rtt, EVENT_REPLY, i, OUTCOME_REJECTED);
                return;
        }

        s->backlog += cost;
        a->accepted = true;
        usec_t latency = (usec_t) (s->backlog / m->capacity * (double) USEC_PER_SEC);
        enum outcome outcome = a->kind == REQUEST_WATCH && server_resume_too_old(s, a, now) ? OUTCOME_GONE
                                                                                         : OUTCOME_OK;
        schedule(s, now + m->rtt + latency, EVENT_REPLY, i, outcome);
}

static void server_fall(struct sim *s, usec_t now, usec_t duration) {
        s->up = false;
        s->backlog = 0;
        s->overloaded_windows = 0;
        s->window.down = true;
        if (now >= s->recovery)
                s->result->falls++;
        schedule(s, now + duration, EVENT_SERVER_UP, UINT32_MAX, OUTCOME_NONE);

        /* Every open watch and every request being served is cut (agent_request() and
         * agent_failed() bump the agent's generation, so its queued events go stale). */
        for (uint32_t i = 0; i < s->m->agents; i++) {
                struct agent *a = &s->agents[i];

                if (a->state == AGENT_WATCHING)
                        agent_watch_cut(s, i, now);
                else if (a->state == AGENT_INFLIGHT && a->accepted)
                        agent_failed(s, i, now, 0);
        }
}

static void server_up(struct sim *s, usec_t now) {
        s->up = true;
        if (now == s->window_start)
                s->window.down = false; /* up from the window's first instant */
        s->restarted_at = now;
        s->backlog = 0;
        s->backlog_at = now;
}

/* ---- the loop ---- */

static void on_send(struct sim *s, uint32_t i, usec_t now) {
        struct agent *a = &s->agents[i];

        if (s->p->rate_limited && !a->has_token) {
                usec_t wait = token_bucket_reserve(&a->bucket, now);

                a->has_token = true;
                if (wait > 0) {
                        schedule(s, now + wait, EVENT_SEND, i, OUTCOME_NONE);
                        return;
                }
        }

        a->has_token = false;
        a->state = AGENT_INFLIGHT;
        s->window.requests++;
        if (now >= s->outage_start)
                s->result->requests_total++;
        if (now >= s->outage_start && now < s->recovery)
                s->result->requests_outage++;
        server_receive(s, i, now);
}

static int result_add_sample(struct result *r, const struct sample *sample) {
        if (r->n_samples == r->allocated_samples) {
                size_t n = MAX(r->allocated_samples * 2, (size_t) 256);
                struct sample *v = realloc(r->samples, n * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                r->samples = v;
                r->allocated_samples = n;
        }
        r->samples[r->n_samples++] = *sample;
        return 0;
}

static int window_close(struct sim *s, usec_t now) {
        const struct window *w = &s->window;
        struct sample sample = {
                .t = ((double) s->window_start - (double) s->outage_start) / (double) USEC_PER_SEC,
                .offered = w->offered,
                .requests = w->requests,
                .rejected = w->rejected,
                .failed = w->failed,
                .synced = s->n_synced,
                .up = !w->down,
        };

        if (s->window_start >= s->recovery)
                s->result->peak_cost = MAX(s->result->peak_cost, w->offered);
        s->window = (struct window) { .down = !s->up };
        s->window_start = now;
        return result_add_sample(s->result, &sample);
}

static int on_tick(struct sim *s, usec_t now) {
        bool whole_window_up = !s->window.down;
        bool overloaded = s->window.offered > s->m->capacity;
        int r;

        r = window_close(s, now);
        if (r < 0)
                return r;
        schedule(s, now + USEC_PER_SEC, EVENT_TICK, UINT32_MAX, OUTCOME_NONE);

        if (!whole_window_up || !overloaded) {
                s->overloaded_windows = 0;
                return 0;
        }
        s->overloaded_windows++;
        if ((usec_t) s->overloaded_windows * USEC_PER_SEC > s->m->grace)
                server_fall(s, now, s->m->refall_outage);
        return 0;
}

static bool event_is_stale(const struct sim *s, const struct event *e) {
        return e->agent < s->m->agents && e->gen != s->agents[e->agent].gen;
}

static int sim_dispatch(struct sim *s, const struct event *e) {
        switch ((enum event_type) e->type) {
        case EVENT_TICK:
                return on_tick(s, e->time);
        case EVENT_OUTAGE:
                server_fall(s, e->time, s->m->outage);
                return 0;
        case EVENT_SERVER_UP:
                server_up(s, e->time);
                return 0;
        case EVENT_SEND:
                on_send(s, e->agent, e->time);
                return 0;
        case EVENT_REPLY:
                on_reply(s, e->agent, e->time, (enum outcome) e->outcome);
                return 0;
        case EVENT_WATCH_END:
                on_watch_end(s, e->agent, e->time);
                return 0;
        }
        abort();
}

static uint64_t agent_seed(uint64_t seed, uint32_t i) {
        uint64_t x = seed * UINT64_C(0x100000001b3) + i + 1;
        return x != 0 ? x : 1;
}

/* Steady state at t=0: every agent synced, its watch somewhere in its lifetime. */
static void agents_init(struct sim *s) {
        for (uint32_t i = 0; i < s->m->agents; i++) {
                struct agent *a = &s->agents[i];
                uint64_t seed = agent_seed(s->m->seed, i);

                *a = (struct agent) {
                        .rng = seed ^ UINT64_C(0x5851f42d4c957f2d),
                        .state = AGENT_WATCHING,
                        .synced = true,
                };
                backoff_init(&a->backoff, &s->p->backoff, seed);
                token_bucket_init(&a->bucket, s->p->qps, s->p->burst, 0);

                usec_t timeout = sim_random_between(&a->rng, s->m->watch_timeout_min, 2 * s->m->watch_timeout_min);
                schedule(s, 1 + sim_random_between(&a->rng, 0, timeout), EVENT_WATCH_END, i, OUTCOME_NONE);
        }
        s->n_synced = s->m->agents;
}

static int cmp_usec(const void *x, const void *y) {
        usec_t a = *(const usec_t *) x, b = *(const usec_t *) y;
        return a < b ? -1 : a > b;
}

static usec_t percentile(const usec_t *sorted, size_t n, double q) {
        size_t k = (size_t) ceil(q * (double) n);
        return sorted[k > 0 ? k - 1 : 0];
}

static int result_sync_times(struct sim *s) {
        _cleanup_free_ usec_t *d = calloc(s->m->agents, sizeof(usec_t));
        struct result *r = s->result;

        if (!d)
                return -ENOMEM;
        for (uint32_t i = 0; i < s->m->agents; i++) {
                const struct agent *a = &s->agents[i];

                if (!a->synced) {
                        d[i] = USEC_INFINITY;
                        r->unsynced++;
                } else
                        d[i] = a->synced_at > s->recovery ? a->synced_at - s->recovery : 0;
        }
        qsort(d, s->m->agents, sizeof(usec_t), cmp_usec);
        r->p50 = percentile(d, s->m->agents, 0.50);
        r->p99 = percentile(d, s->m->agents, 0.99);
        r->max = d[s->m->agents - 1];
        return 0;
}

static bool sim_done(const struct sim *s, usec_t now) {
        if (now >= s->recovery + s->m->time_limit)
                return true;
        return now >= s->recovery && s->up && s->n_synced == s->m->agents;
}

static int sim_loop(struct sim *s) {
        struct event e;
        int r;

        while (heap_pop(&s->heap, &e)) {
                if (s->heap.oom)
                        return -ENOMEM;
                if (sim_done(s, e.time)) {
                        s->result->end = e.time;
                        return window_close(s, e.time);
                }
                if (event_is_stale(s, &e))
                        continue;
                r = sim_dispatch(s, &e);
                if (r < 0)
                        return r;
        }
        return -EPIPE; /* the tick never stops, so this cannot happen */
}

void result_done(struct result *r) {
        r->samples = mfree(r->samples);
        r->n_samples = r->allocated_samples = 0;
}

int run_policy(const struct model *m, const struct policy *p, struct result *ret) {
        _cleanup_free_ struct agent *agents = calloc(m->agents, sizeof(struct agent));
        struct sim s = {
                .m = m,
                .p = p,
                .agents = agents,
                .up = true,
                .outage_start = m->warmup,
                .recovery = m->warmup + m->outage,
                .result = ret,
        };
        int r;

        *ret = (struct result) { .policy = p->name };
        if (!agents)
                return -ENOMEM;

        agents_init(&s);
        schedule(&s, USEC_PER_SEC, EVENT_TICK, UINT32_MAX, OUTCOME_NONE);
        schedule(&s, m->warmup, EVENT_OUTAGE, UINT32_MAX, OUTCOME_NONE);

        r = sim_loop(&s);
        if (r >= 0)
                r = result_sync_times(&s);
        free(s.heap.v);
        if (r < 0)
                result_done(ret);
        return r;
}
