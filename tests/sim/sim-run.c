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
        REQUEST_LIST,  /* one page of a list */
        REQUEST_WATCH,
        REQUEST_FRESH, /* a list with limit=1: a fresh resourceVersion, one object */
};

enum agent_state {
        AGENT_WAITING,  /* a request is scheduled (backoff, token bucket) */
        AGENT_INFLIGHT, /* a request is out */
        AGENT_WATCHING, /* a watch is established */
};

/* One list + watch of one resource. Every agent has its pods' reflector; with node-watch also
 * one of all Nodes, which shares the agent's token bucket. */
struct reflector {
        struct backoff backoff;
        uint64_t rng;
        uint32_t owner;         /* the agent */
        enum resource resource;
        enum agent_state state;
        enum request_kind kind; /* of the request scheduled or in flight */
        uint32_t gen;           /* bumped on every transition: the reflector's queued events go stale */
        unsigned page;          /* of the list scheduled or in flight */
        bool has_token;         /* the scheduled request holds its token-bucket reservation */
        bool accepted;          /* the request in flight is in the apiserver's backlog */
        bool need_list;         /* 410 seen (or the deferred relist is due): the next request is a list */
        bool need_fresh;        /* node-fresh-watch: 410 seen, the next request is a limit=1 list */
        bool fresh_gap;         /* watching from a fresh resourceVersion, the full relist not done */
        bool synced;
        usec_t rv;              /* when the last resourceVersion seen was current */
        usec_t fresh_rv_at;     /* when the fresh resourceVersion was taken */
        usec_t relist_at;       /* the deferred full relist (node-fresh-watch); 0: none */
        uint64_t unheard;       /* route changes not heard yet: bit k = the change k ticks ago */
        usec_t unheard_since;   /* the oldest of them; 0: none */
};

struct agent {
        struct token_bucket bucket;
        unsigned unsynced; /* reflectors not synced */
        usec_t synced_at;
};

struct window {
        double offered;
        unsigned requests;
        unsigned rejected;
        unsigned failed;
        unsigned writes;
        double write_cost;
        bool down; /* the apiserver was down during some of it */
};

struct sim {
        const struct model *m;
        const struct policy *p;
        struct agent *agents;
        struct reflector *reflectors;
        uint32_t n_reflectors;
        struct heap heap;

        /* the apiserver */
        bool up;
        usec_t restarted_at; /* 0: never restarted */
        uint32_t epoch;      /* fall-overs so far */
        double backlog;      /* cost units queued */
        usec_t backlog_at;
        unsigned overloaded_windows;

        usec_t outage_start, recovery;
        unsigned n_synced; /* agents with every reflector synced */
        unsigned n_gaps;   /* Node reflectors watching from a fresh resourceVersion, not relisted yet */
        uint64_t up_ticks; /* bit k: the apiserver was up at the tick k ticks ago (a change was made) */
        struct window window;
        usec_t window_start;
        struct sim_writes writes;
        struct result *result;
};

#define LATE_TICKS 5 /* a route change heard 5 s or more after it was made is late */

static void schedule(struct sim *s, usec_t t, enum event_type type, uint32_t i, enum outcome outcome) {
        heap_push(&s->heap, (struct event) {
                .time = t,
                .agent = i,
                .gen = i < s->n_reflectors ? s->reflectors[i].gen : 0,
                .type = type,
                .outcome = outcome,
        });
}

static unsigned list_objects(const struct sim *s, const struct reflector *a) {
        return a->resource == RESOURCE_NODES ? model_nodes(s->m) : s->p->list_objects;
}

static unsigned list_pages(const struct sim *s, const struct reflector *a) {
        unsigned n = list_objects(s, a);
        return n == 0 ? 1 : (n + s->m->page_limit - 1) / s->m->page_limit;
}

/* Objects the request returns: a page's share of the list, one for a limit=1 list. */
static unsigned request_objects(const struct sim *s, const struct reflector *a) {
        if (a->kind == REQUEST_WATCH)
                return 0;
        if (a->kind == REQUEST_FRESH)
                return 1;
        unsigned n = list_objects(s, a), first = a->page * s->m->page_limit;
        return first >= n ? 0 : MIN(n - first, s->m->page_limit);
}

static double request_cost(const struct sim *s, const struct reflector *a) {
        double per_object = a->resource == RESOURCE_NODES ? s->m->node_object_cost : s->m->object_cost;

        if (a->kind == REQUEST_WATCH)
                return s->m->watch_cost;
        return s->m->list_base_cost + per_object * (double) request_objects(s, a);
}

static unsigned object_bytes(const struct sim *s, enum resource r) {
        return r == RESOURCE_NODES ? s->m->node_object_bytes : s->m->pod_object_bytes;
}

/* Events per second one watcher of the resource receives. */
static double event_rate(const struct sim *s, enum resource r) {
        if (r == RESOURCE_NODES)
                return (double) model_nodes(s->m) * (double) USEC_PER_SEC / (double) s->m->node_status_period;
        return (double) s->m->pods_per_node * (double) USEC_PER_SEC / (double) s->m->pod_event_period;
}

/* The span of the run `t` is in, for the fan-out figures. */
static struct fanout *fanout_at(struct sim *s, usec_t t) {
        if (t < s->outage_start)
                return &s->result->steady;
        return &s->result->recovery;
}

static struct route_changes *changes_at(struct sim *s, usec_t t) {
        if (t < s->outage_start)
                return &s->result->changes_steady;
        if (t >= s->recovery)
                return &s->result->changes_after;
        return NULL; /* the apiserver is down: nobody changes a Node */
}

static void agent_set_synced(struct sim *s, struct reflector *a, bool synced, usec_t now) {
        struct agent *g = &s->agents[a->owner];

        if (a->synced == synced)
                return;
        a->synced = synced;
        if (synced) {
                if (--g->unsynced > 0)
                        return;
                s->n_synced++;
                g->synced_at = now;
        } else if (g->unsynced++ == 0)
                s->n_synced--;
}

/* The reflector hears of the route changes it missed: all of them (a list, a resume), or only
 * those after its fresh resourceVersion (a watch from it). */
static void reflector_heard(struct sim *s, struct reflector *a, usec_t now, bool all) {
        if (a->resource != RESOURCE_NODES || a->unheard_since == 0)
                return;
        if (!all) {
                /* bit k is the change made at the last tick k ticks ago; keep those not after
                 * the fresh resourceVersion */
                usec_t last_tick = now / USEC_PER_SEC * USEC_PER_SEC;
                for (unsigned k = 0; k < 64 && last_tick >= k * USEC_PER_SEC; k++)
                        if (last_tick - k * USEC_PER_SEC > a->fresh_rv_at)
                                a->unheard &= ~(UINT64_C(1) << k);
                return;
        }
        struct route_changes *c = changes_at(s, a->unheard_since);
        if (c)
                c->max_delay = MAX(c->max_delay, now - a->unheard_since);
        a->unheard = 0;
        a->unheard_since = 0;
}

static void reflector_set_fresh_gap(struct sim *s, struct reflector *a, bool gap) {
        if (a->fresh_gap == gap)
                return;
        a->fresh_gap = gap;
        if (gap)
                s->n_gaps++;
        else
                s->n_gaps--;
}

/* Schedules the reflector's next request `delay` from now. */
static void agent_request(struct sim *s, uint32_t i, usec_t now, usec_t delay, enum request_kind kind) {
        struct reflector *a = &s->reflectors[i];

        a->state = AGENT_WAITING;
        a->kind = kind;
        a->page = 0;
        a->has_token = false;
        a->accepted = false;
        a->gen++;
        schedule(s, now + delay, EVENT_SEND, i, OUTCOME_NONE);
}

static enum request_kind agent_retry_kind(const struct sim *s, const struct reflector *a) {
        if (a->need_list || !s->p->resume)
                return REQUEST_LIST;
        return a->need_fresh ? REQUEST_FRESH : REQUEST_WATCH;
}

static void agent_failed(struct sim *s, uint32_t i, usec_t now, usec_t retry_after) {
        struct reflector *a = &s->reflectors[i];
        usec_t delay = backoff_next(&a->backoff, now, s->p->honour_retry_after ? retry_after : 0);

        agent_set_synced(s, a, false, now);
        s->window.failed++;
        agent_request(s, i, now, delay, agent_retry_kind(s, a));
}

/* node-fresh-watch: a fresh resourceVersion now, the full relist later. */
static void node_gone_fresh(struct sim *s, uint32_t i, usec_t now) {
        struct reflector *a = &s->reflectors[i];

        a->need_fresh = true;
        if (a->relist_at == 0) {
                a->relist_at = now + s->m->node_relist_after +
                               backoff_random_between(&a->backoff, 0, s->m->node_relist_spread);
                schedule(s, a->relist_at, EVENT_RELIST, i, OUTCOME_NONE);
        }
        agent_request(s, i, now, 0, REQUEST_FRESH);
}

static void agent_gone(struct sim *s, uint32_t i, usec_t now) {
        struct reflector *a = &s->reflectors[i];
        bool nodes = a->resource == RESOURCE_NODES;

        agent_set_synced(s, a, false, now);
        if (nodes && s->p->resume && s->m->node_fresh_watch) {
                node_gone_fresh(s, i, now);
                return;
        }
        a->need_list = true;
        if (s->p->gone_relists_at_once)
                agent_request(s, i, now, 0, REQUEST_LIST);
        else if (s->p->gone_splay) {
                usec_t step = backoff_current_step(&a->backoff, now);
                if (nodes)
                        step = MAX(step, s->m->node_relist_spread);
                agent_request(s, i, now, backoff_random_between(&a->backoff, 0, step), REQUEST_LIST);
        } else
                /* client-go returns from ListAndWatch and backs off before relisting. */
                agent_request(s, i, now, backoff_next(&a->backoff, now, 0), REQUEST_LIST);
}

static void agent_watching(struct sim *s, uint32_t i, usec_t now) {
        struct reflector *a = &s->reflectors[i];
        usec_t timeout = sim_random_between(&a->rng, s->m->watch_timeout_min, 2 * s->m->watch_timeout_min);

        a->state = AGENT_WATCHING;
        a->rv = now;
        a->gen++;
        agent_set_synced(s, a, true, now);
        reflector_heard(s, a, now, !a->fresh_gap);
        schedule(s, now + timeout, EVENT_WATCH_END, i, OUTCOME_NONE);
}

/* The apiserver went away under an established watch: a failure for every policy (the stream was
 * cut short). */
static void agent_watch_cut(struct sim *s, uint32_t i, usec_t now) {
        s->reflectors[i].rv = now; /* bookmarks kept it current until the cut */
        agent_failed(s, i, now, 0);
}

static void on_watch_end(struct sim *s, uint32_t i, usec_t now) {
        struct reflector *a = &s->reflectors[i];

        /* A normal end of a watch: renewed at once, the reflector stays synced meanwhile. */
        a->rv = now;
        agent_request(s, i, now, 0, s->p->renew_resumes ? REQUEST_WATCH : REQUEST_LIST);
}

/* node-fresh-watch: the full relist after a fresh watch is due. */
static void on_relist(struct sim *s, uint32_t i, usec_t now) {
        struct reflector *a = &s->reflectors[i];

        a->relist_at = 0;
        a->need_list = true;
        if (a->state == AGENT_WATCHING)
                agent_request(s, i, now, 0, REQUEST_LIST);
        else if (a->state == AGENT_WAITING && a->kind != REQUEST_LIST) {
                a->kind = REQUEST_LIST; /* its scheduled retry lists instead */
                a->page = 0;
        }
        /* in flight: its reply sees need_list */
}

static void on_list_page(struct sim *s, uint32_t i, usec_t now) {
        struct reflector *a = &s->reflectors[i];

        if (a->page + 1 < list_pages(s, a)) {
                /* the next page goes out at once (or after node-page-interval), through the
                 * token bucket */
                a->state = AGENT_WAITING;
                a->page++;
                a->has_token = false;
                a->gen++;
                schedule(s, now + (a->resource == RESOURCE_NODES ? s->m->node_page_interval : 0), EVENT_SEND, i,
                         OUTCOME_NONE);
                return;
        }
        a->need_list = false;
        reflector_set_fresh_gap(s, a, false);
        a->rv = now;
        reflector_heard(s, a, now, true);
        agent_request(s, i, now, 0, REQUEST_WATCH);
}

static void on_reply(struct sim *s, uint32_t i, usec_t now, enum outcome outcome) {
        struct reflector *a = &s->reflectors[i];

        a->accepted = false;
        switch (outcome) {
        case OUTCOME_OK:
                fanout_at(s, now)->bytes[a->resource] += (double) request_objects(s, a) * object_bytes(s, a->resource);
                if (a->kind == REQUEST_LIST) {
                        on_list_page(s, i, now);
                        return;
                }
                if (a->kind == REQUEST_FRESH) {
                        a->need_fresh = false;
                        reflector_set_fresh_gap(s, a, true);
                        a->fresh_rv_at = a->rv = now;
                        agent_request(s, i, now, 0, REQUEST_WATCH);
                        return;
                }
                if (a->need_list) /* the deferred relist came due while this was out */
                        agent_request(s, i, now, 0, REQUEST_LIST);
                else
                        agent_watching(s, i, now);
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

static bool server_resume_too_old(struct sim *s, struct reflector *a, usec_t now) {
        if (now - a->rv > s->m->cache_window)
                return true;
        if (s->restarted_at > 0 && a->rv < s->restarted_at)
                return sim_random_double(&a->rng) < s->m->gone_after_restart;
        return false;
}

/* A request of `cost` arrives: refused or timed out while down, 429 if it would wait too long,
 * else queued; *ret_at is when its answer arrives. */
static enum outcome server_offer(struct sim *s, double cost, usec_t now, usec_t *ret_at) {
        const struct model *m = s->m;

        if (!s->up) {
                *ret_at = now + (m->down_mode == DOWN_REFUSED ? m->rtt : m->request_timeout);
                return m->down_mode == DOWN_REFUSED ? OUTCOME_REFUSED : OUTCOME_TIMEOUT;
        }
        s->window.offered += cost;
        fanout_at(s, now)->cost += cost;
        server_drain(s, now);
        if (s->backlog + cost > m->capacity * (double) m->queue_limit / (double) USEC_PER_SEC) {
                *ret_at = now + m->rtt;
                return OUTCOME_REJECTED;
        }
        s->backlog += cost;
        *ret_at = now + m->rtt + (usec_t) (s->backlog / m->capacity * (double) USEC_PER_SEC);
        return OUTCOME_OK;
}

static void server_receive(struct sim *s, uint32_t i, usec_t now) {
        struct reflector *a = &s->reflectors[i];
        usec_t at;
        enum outcome outcome = server_offer(s, request_cost(s, a), now, &at);

        if (outcome == OUTCOME_OK) {
                a->accepted = true;
                if (a->kind == REQUEST_WATCH && server_resume_too_old(s, a, now))
                        outcome = OUTCOME_GONE;
        }
        schedule(s, at, EVENT_REPLY, i, outcome);
}

struct token_bucket *sim_run_bucket(struct sim *s, uint32_t agent) {
        return &s->agents[agent].bucket;
}

enum outcome sim_run_offer_write(struct sim *s, double cost, usec_t now, usec_t *ret_at) {
        s->window.writes++;
        if (s->up)
                s->window.write_cost += cost;
        return server_offer(s, cost, now, ret_at);
}

uint32_t sim_run_server_epoch(const struct sim *s) {
        return s->epoch;
}

static void server_fall(struct sim *s, usec_t now, usec_t duration) {
        s->up = false;
        s->epoch++; /* the writes being served are cut (sim-writes.c sees it at their answer) */
        s->backlog = 0;
        s->overloaded_windows = 0;
        s->window.down = true;
        if (now >= s->recovery)
                s->result->falls++;
        schedule(s, now + duration, EVENT_SERVER_UP, UINT32_MAX, OUTCOME_NONE);

        /* Every open watch and every request being served is cut (agent_request() and
         * agent_failed() bump the agent's generation, so its queued events go stale). */
        for (uint32_t i = 0; i < s->n_reflectors; i++) {
                struct reflector *a = &s->reflectors[i];

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
        struct reflector *a = &s->reflectors[i];

        if (s->p->rate_limited && !a->has_token) {
                usec_t wait = token_bucket_reserve(&s->agents[a->owner].bucket, now);

                a->has_token = true;
                if (wait > 0) {
                        schedule(s, now + wait, EVENT_SEND, i, OUTCOME_NONE);
                        return;
                }
        }

        a->has_token = false;
        a->state = AGENT_INFLIGHT;
        s->window.requests++;
        fanout_at(s, now)->requests[a->resource]++;
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
                .writes = w->writes,
                .backlogged = s->writes.n_backlogged,
                .up = !w->down,
        };

        if (s->window_start >= s->recovery) {
                s->result->peak_cost = MAX(s->result->peak_cost, w->offered);
                s->result->writes.peak_cost = MAX(s->result->writes.peak_cost, w->write_cost);
        }
        s->window = (struct window) { .down = !s->up };
        s->window_start = now;
        return result_add_sample(s->result, &sample);
}

/* The closing window's watch events: each established watch received its resource's rate. */
static void tick_events(struct sim *s, usec_t now) {
        struct fanout *f = fanout_at(s, now - USEC_PER_SEC);
        unsigned watching[_RESOURCE_MAX] = {};

        for (uint32_t i = 0; i < s->n_reflectors; i++)
                if (s->reflectors[i].state == AGENT_WATCHING)
                        watching[s->reflectors[i].resource]++;
        for (int r = 0; r < _RESOURCE_MAX; r++) {
                double events = event_rate(s, r) * watching[r];

                f->events[r] += events;
                f->bytes[r] += events * object_bytes(s, r);
                f->cost += events * s->m->event_cost;
                s->window.offered += events * s->m->event_cost;
        }
        f->span += USEC_PER_SEC;
}

/* A route-relevant change to some Node while the apiserver is up: heard at once by every
 * established Node watch, by the others later (reflector_heard()). */
static void tick_route_change(struct sim *s, usec_t now) {
        struct route_changes *c = changes_at(s, now), *c_late = changes_at(s, now - LATE_TICKS * USEC_PER_SEC);
        bool change = s->up && c;
        bool late_was_change = (s->up_ticks >> (LATE_TICKS - 1)) & 1;

        s->up_ticks = s->up_ticks << 1 | change;
        for (uint32_t i = 0; i < s->n_reflectors; i++) {
                struct reflector *a = &s->reflectors[i];

                if (a->resource != RESOURCE_NODES)
                        continue;
                a->unheard <<= 1;
                if (change) {
                        c->pairs++;
                        if (a->state != AGENT_WATCHING) {
                                a->unheard |= 1;
                                if (a->unheard_since == 0)
                                        a->unheard_since = now;
                        }
                }
                if (late_was_change && c_late && (a->unheard >> LATE_TICKS) & 1)
                        c_late->late++;
        }
}

static int on_tick(struct sim *s, usec_t now) {
        bool whole_window_up;
        bool overloaded;
        int r;

        tick_events(s, now);
        tick_route_change(s, now);
        whole_window_up = !s->window.down;
        overloaded = s->window.offered > s->m->capacity;
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
        if (e->agent >= s->n_reflectors || sim_writes_owns(e->type))
                return false;
        if (e->type == EVENT_RELIST)
                return s->reflectors[e->agent].relist_at != e->time;
        return e->gen != s->reflectors[e->agent].gen;
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
        case EVENT_RELIST:
                on_relist(s, e->agent, e->time);
                return 0;
        case EVENT_POD_START:
        case EVENT_ROTATION:
        case EVENT_CONDITION:
        case EVENT_EVENTS_DUE:
        case EVENT_WRITE_SEND:
        case EVENT_WRITE_REPLY:
                sim_writes_dispatch(&s->writes, e);
                return 0;
        }
        abort();
}

static uint64_t agent_seed(uint64_t seed, uint32_t i) {
        uint64_t x = seed * UINT64_C(0x100000001b3) + i + 1;
        return x != 0 ? x : 1;
}

static void reflector_init(struct sim *s, uint32_t i, enum resource resource, uint64_t seed) {
        struct reflector *a = &s->reflectors[i];

        *a = (struct reflector) {
                .rng = seed ^ UINT64_C(0x5851f42d4c957f2d),
                .owner = i % s->m->agents,
                .resource = resource,
                .state = AGENT_WATCHING,
                .synced = true,
        };
        backoff_init(&a->backoff, &s->p->backoff, seed);

        usec_t timeout = sim_random_between(&a->rng, s->m->watch_timeout_min, 2 * s->m->watch_timeout_min);
        schedule(s, 1 + sim_random_between(&a->rng, 0, timeout), EVENT_WATCH_END, i, OUTCOME_NONE);
}

/* Steady state at t=0: every reflector synced, its watch somewhere in its lifetime. The pods'
 * reflectors draw what they drew before there was a Node reflector, so that a run without the
 * Node watch is the run it always was. */
static void agents_init(struct sim *s) {
        for (uint32_t i = 0; i < s->m->agents; i++) {
                token_bucket_init(&s->agents[i].bucket, s->p->qps, s->p->burst, 0);
                reflector_init(s, i, RESOURCE_PODS, agent_seed(s->m->seed, i));
        }
        for (uint32_t i = s->m->agents; i < s->n_reflectors; i++)
                reflector_init(s, i, RESOURCE_NODES, agent_seed(s->m->seed ^ UINT64_C(0x9e3779b97f4a7c15), i));
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

                if (a->unsynced > 0) {
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
        return now >= s->recovery && s->up && s->n_synced == s->m->agents && s->n_gaps == 0 &&
               sim_writes_settled(&s->writes);
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

/* Route changes still unheard when the run ends count as heard then. */
static void result_unheard(struct sim *s, usec_t end) {
        for (uint32_t i = 0; i < s->n_reflectors; i++)
                if (s->reflectors[i].unheard_since > 0)
                        reflector_heard(s, &s->reflectors[i], end, true);
}

int run_policy(const struct model *m, const struct policy *p, struct result *ret) {
        uint32_t n_reflectors = m->agents * (m->node_watch ? 2 : 1);
        _cleanup_free_ struct agent *agents = calloc(m->agents, sizeof(struct agent));
        _cleanup_free_ struct reflector *reflectors = calloc(n_reflectors, sizeof(struct reflector));
        struct sim s = {
                .m = m,
                .p = p,
                .agents = agents,
                .reflectors = reflectors,
                .n_reflectors = n_reflectors,
                .up = true,
                .outage_start = m->warmup,
                .recovery = m->warmup + m->outage,
                .result = ret,
        };
        int r;

        *ret = (struct result) { .policy = p->name, .writing = p->writes != WRITES_NONE };
        if (!agents || !reflectors)
                return -ENOMEM;

        agents_init(&s);
        schedule(&s, USEC_PER_SEC, EVENT_TICK, UINT32_MAX, OUTCOME_NONE);
        schedule(&s, m->warmup, EVENT_OUTAGE, UINT32_MAX, OUTCOME_NONE);
        r = sim_writes_init(&s.writes, m, p, &s, &s.heap, &ret->writes);
        if (r < 0) {
                free(s.heap.v);
                return r;
        }

        r = sim_loop(&s);
        if (r >= 0) {
                result_unheard(&s, ret->end);
                sim_writes_finish(&s.writes);
                r = result_sync_times(&s);
        }
        sim_writes_done(&s.writes);
        free(s.heap.v);
        if (r < 0)
                result_done(ret);
        return r;
}
