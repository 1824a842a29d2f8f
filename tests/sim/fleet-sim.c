/* SPDX-License-Identifier: MIT */
/* fleet-sim: a discrete-event simulation of a fleet of node agents watching their node's pods on
 * one apiserver through an outage, comparing three retry policies. It links the agent's real
 * backoff and token bucket (agent/backoff.c); nothing else of the agent is modelled in code.
 *
 * No real time and no threads: virtual time in microseconds, one binary heap of events ordered by
 * time (then the closing 1 s window first, then insertion order), and seeded generators, so a run
 * is a pure function of its options.
 *
 * The model (every constant is an option, see --help; the report prints them all):
 *
 *   apiserver  serves `capacity` cost units per second from a FIFO backlog (a request's answer
 *              comes after the backlog ahead of it has drained). A request that would wait more
 *              than `queue-limit` is refused at once with 429 + Retry-After. Offered cost is the
 *              sum of the costs of the requests arriving (served or refused) per 1 s window; when
 *              it stays above capacity for longer than `grace`, the apiserver falls over (OOM):
 *              every open watch and every request being served is cut, and it is down for
 *              `refall-outage`. While down, requests are refused at once (down-mode=refused) or
 *              hang until `request-timeout` (down-mode=timeout), and cost nothing.
 *   costs      a list costs list-base-cost + object-cost × objects returned (the node's pods;
 *              legacy-list-objects for an unfiltered legacy client); a watch request costs
 *              watch-cost whether it is established or answered 410.
 *   cache      a watch resume succeeds when its resourceVersion is still in the watch cache:
 *              no older than cache-window, and — after a restart, whose cache starts empty — not
 *              from before the restart, except for a share (1 − gone-after-restart) of such resumes
 *              (a cache prefilled from history, or another apiserver behind the balancer).
 *              An agent's resourceVersion is as fresh as the moment its watch was cut (bookmarks).
 *   agents     start synced, each with an open watch of timeoutSeconds drawn from
 *              [watch-timeout-min, 2×]; a watch that times out is renewed at once. An agent is
 *              synced while it holds an established watch; it stops being synced when its watch
 *              is cut or a request of its fails.
 *   scenario   steady state for `warmup`, an outage of `outage`, recovery; the run ends when every
 *              agent is synced with the apiserver up, or `time-limit` after the recovery.
 *
 * The policies:
 *   legacy     the pre-fix client: retries legacy-retry after every failure (no growth, no
 *              jitter), every retry and every watch renewal is a full list, no rate limit.
 *   client-go  the reflector with client-go's defaults (BACKOFF_CONFIG_CLIENT_GO): a cut watch, a
 *              failed request or a 410 returns from ListAndWatch and the next attempt after the
 *              backoff is a full relist; a watch that times out normally is renewed from its RV.
 *              Simplifications: no rest-client rate limiter, no rest-client 429 retries, no
 *              watch retry on "connection refused" (newer reflectors have one).
 *   pinion     what modules/apiserver/reflector.c does, with the agent's [apiserver] defaults:
 *              the same backoff, plus the token bucket (qps, burst) in front of every request; a
 *              cut watch or a failed request is retried after the backoff as a watch resume from
 *              the last resourceVersion; only 410 relists, after a pause (gone-pause: the next
 *              backoff step, as the reflector does, or none); a 429's Retry-After is a lower bound
 *              of the wait.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backoff.h"
#include "parse-util.h"
#include "macro.h"

/* ---- options: the model's constants ---- */

enum down_mode {
        DOWN_REFUSED,
        DOWN_TIMEOUT,
};

enum gone_pause {
        GONE_PAUSE_BACKOFF, /* the next backoff step */
        GONE_PAUSE_NONE,
        GONE_PAUSE_SPLAY, /* uniform in [0, the current backoff step] (modules/apiserver/reflector.c) */
};

struct model {
        unsigned agents;
        unsigned pods_per_node;
        unsigned legacy_list_objects; /* 0: the node's pods, like the others */
        double list_base_cost;
        double object_cost;
        double watch_cost;
        double capacity;
        usec_t grace;
        usec_t queue_limit;
        usec_t retry_after;
        usec_t rtt;
        enum down_mode down_mode;
        usec_t request_timeout;
        usec_t warmup;
        usec_t outage;
        usec_t refall_outage;
        usec_t cache_window;
        double gone_after_restart;
        usec_t watch_timeout_min;
        enum gone_pause gone_pause;
        usec_t time_limit;
        uint64_t seed;
        unsigned runs;
        usec_t legacy_retry;
        /* pinion: the [apiserver] keys of DESIGN.md, with the agent's defaults */
        usec_t backoff_initial;
        usec_t backoff_max;
        double backoff_factor;
        double backoff_jitter;
        usec_t backoff_reset;
        double qps;
        double burst;
};

typedef int (*option_parser)(const char *s, void *ret);

struct option_def {
        const char *name;
        option_parser parse;
        size_t offset;
        const char *def;
        const char *help;
};

static int parse_unsigned(const char *s, void *ret) {
        char *end;
        unsigned long v;

        if (!s || *s == '-' || *s == '\0')
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno != 0 || *end != '\0' || v > UINT32_MAX)
                return -EINVAL;
        *(unsigned *) ret = (unsigned) v;
        return 0;
}

static int parse_u64(const char *s, void *ret) {
        char *end;
        unsigned long long v;

        if (!s || *s == '-' || *s == '\0')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0')
                return -EINVAL;
        *(uint64_t *) ret = (uint64_t) v;
        return 0;
}

static int parse_double(const char *s, void *ret) {
        char *end;
        double v;

        if (!s || *s == '\0')
                return -EINVAL;
        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || *end != '\0' || !isfinite(v) || v < 0)
                return -EINVAL;
        *(double *) ret = v;
        return 0;
}

/* The agent's own duration syntax ("800ms", "30s", "2m", "1h"; a bare number is seconds), so
 * the model takes its [apiserver] settings exactly as pinion.conf writes them. */
static int parse_duration_option(const char *s, void *ret) {
        return parse_duration(s, ret);
}

static int parse_down_mode(const char *s, void *ret) {
        if (streq(s, "refused"))
                *(enum down_mode *) ret = DOWN_REFUSED;
        else if (streq(s, "timeout"))
                *(enum down_mode *) ret = DOWN_TIMEOUT;
        else
                return -EINVAL;
        return 0;
}

static int parse_gone_pause(const char *s, void *ret) {
        if (streq(s, "backoff"))
                *(enum gone_pause *) ret = GONE_PAUSE_BACKOFF;
        else if (streq(s, "none"))
                *(enum gone_pause *) ret = GONE_PAUSE_NONE;
        else if (streq(s, "splay"))
                *(enum gone_pause *) ret = GONE_PAUSE_SPLAY;
        else
                return -EINVAL;
        return 0;
}

#define FIELD(f) offsetof(struct model, f)

static const struct option_def option_defs[] = {
        { "agents", parse_unsigned, FIELD(agents), "2500", "virtual agents, one per node" },
        { "pods-per-node", parse_unsigned, FIELD(pods_per_node), "30", "objects a node's list returns" },
        { "legacy-list-objects", parse_unsigned, FIELD(legacy_list_objects), "0",
          "objects a legacy list returns (0: the node's pods; more for an unfiltered client)" },
        { "list-base-cost", parse_double, FIELD(list_base_cost), "1", "cost of a list besides its objects" },
        { "object-cost", parse_double, FIELD(object_cost), "1", "cost per object a list returns" },
        { "watch-cost", parse_double, FIELD(watch_cost), "1", "cost of a watch request (resume or 410)" },
        { "capacity", parse_double, FIELD(capacity), "3000",
          "apiserver capacity, cost units per second (3000: ~97 node lists/s)" },
        { "grace", parse_duration_option, FIELD(grace), "5s",
          "offered cost above capacity for longer than this (whole 1 s windows) makes it fall over" },
        { "queue-limit", parse_duration_option, FIELD(queue_limit), "5s",
          "a request that would wait longer than this in the backlog gets 429" },
        { "retry-after", parse_duration_option, FIELD(retry_after), "1s", "Retry-After sent with a 429" },
        { "rtt", parse_duration_option, FIELD(rtt), "5ms", "network round trip of every request" },
        { "down-mode", parse_down_mode, FIELD(down_mode), "refused",
          "a request to a down apiserver: refused (at once) or timeout" },
        { "request-timeout", parse_duration_option, FIELD(request_timeout), "10s",
          "client timeout of a request to a down apiserver with down-mode=timeout" },
        { "warmup", parse_duration_option, FIELD(warmup), "30s", "steady state before the outage" },
        { "outage", parse_duration_option, FIELD(outage), "60s", "the outage (T)" },
        { "refall-outage", parse_duration_option, FIELD(refall_outage), "60s",
          "how long the apiserver is down after falling over from overload" },
        { "cache-window", parse_duration_option, FIELD(cache_window), "75s",
          "history the watch cache keeps: an older resourceVersion gets 410" },
        { "gone-after-restart", parse_double, FIELD(gone_after_restart), "1",
          "share of resumes from before a restart answered 410 (1: the new cache starts empty)" },
        { "watch-timeout-min", parse_duration_option, FIELD(watch_timeout_min), "5m",
          "watch timeoutSeconds drawn from [this, 2x] ([apiserver] watch-timeout-min)" },
        { "gone-pause", parse_gone_pause, FIELD(gone_pause), "splay",
          "pinion: wait before the relist a 410 asks for: splay (uniform in [0, the current backoff step], as reflector.c), backoff (the next step) or none" },
        { "time-limit", parse_duration_option, FIELD(time_limit), "10m", "give up this long after the recovery" },
        { "seed", parse_u64, FIELD(seed), "1", "seed of every generator (agent i uses seed, i)" },
        { "runs", parse_unsigned, FIELD(runs), "10",
          "runs per policy, with seeds seed, seed+1, ...: the table shows the first and the worst" },
        { "legacy-retry", parse_duration_option, FIELD(legacy_retry), "1s", "legacy: fixed wait after a failure" },
        { "backoff-initial", parse_duration_option, FIELD(backoff_initial), "800ms", "pinion: [apiserver] backoff-initial" },
        { "backoff-max", parse_duration_option, FIELD(backoff_max), "30s", "pinion: [apiserver] backoff-max" },
        { "backoff-factor", parse_double, FIELD(backoff_factor), "2",
          "pinion: backoff growth factor (no config key: the agent uses 2)" },
        { "backoff-jitter", parse_double, FIELD(backoff_jitter), "1.0", "pinion: [apiserver] backoff-jitter" },
        { "backoff-reset", parse_duration_option, FIELD(backoff_reset), "2m", "pinion: [apiserver] backoff-reset" },
        { "qps", parse_double, FIELD(qps), "5", "pinion: [apiserver] qps (token bucket rate)" },
        { "burst", parse_double, FIELD(burst), "10", "pinion: [apiserver] burst (token bucket size)" },
};

#define N_OPTIONS ELEMENTSOF(option_defs)

static const char *model_check(const struct model *m) {
        if (m->agents == 0 || m->runs == 0)
                return "--agents and --runs must be at least 1";
        if (!(m->capacity > 0))
                return "--capacity must be positive";
        if (m->gone_after_restart > 1)
                return "--gone-after-restart is a share in [0, 1]";
        if (m->legacy_retry == 0 || m->backoff_initial == 0 || m->backoff_max < m->backoff_initial)
                return "needs --legacy-retry > 0 and 0 < --backoff-initial <= --backoff-max";
        if (m->backoff_factor < 1)
                return "--backoff-factor must be at least 1";
        if (!(m->qps > 0) || m->burst < 1)
                return "needs --qps > 0 and --burst >= 1";
        if (m->watch_timeout_min == 0 || m->outage == 0 || m->refall_outage == 0)
                return "--watch-timeout-min, --outage and --refall-outage must be positive";
        return NULL;
}

/* ---- the model's own randomness (not the backoff's): splitmix64 ---- */

static uint64_t sim_random(uint64_t *state) {
        uint64_t x = (*state += UINT64_C(0x9e3779b97f4a7c15));

        x = (x ^ (x >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        x = (x ^ (x >> 27)) * UINT64_C(0x94d049bb133111eb);
        return x ^ (x >> 31);
}

static double sim_random_double(uint64_t *state) {
        return (double) (sim_random(state) >> 11) * 0x1.0p-53;
}

static usec_t sim_random_between(uint64_t *state, usec_t lo, usec_t hi) {
        if (hi <= lo)
                return lo;
        return lo + (usec_t) (sim_random_double(state) * (double) (hi - lo));
}

/* ---- events ---- */

enum event_type {
        EVENT_TICK,      /* a 1 s accounting window closes */
        EVENT_OUTAGE,    /* the scenario's outage begins */
        EVENT_SERVER_UP, /* the apiserver is back */
        EVENT_SEND,      /* an agent's request leaves (after its backoff and token bucket) */
        EVENT_REPLY,     /* an agent's request is answered */
        EVENT_WATCH_END, /* an agent's watch reaches its timeoutSeconds */
};

enum outcome {
        OUTCOME_NONE,
        OUTCOME_OK,
        OUTCOME_GONE,     /* 410: the resourceVersion is too old */
        OUTCOME_REJECTED, /* 429 from an overloaded apiserver */
        OUTCOME_REFUSED,  /* connection refused: the apiserver is down */
        OUTCOME_TIMEOUT,  /* no answer from a down apiserver */
};

struct event {
        usec_t time;
        uint64_t seq;
        uint32_t agent;
        uint32_t gen;
        uint8_t type;
        uint8_t outcome;
};

struct heap {
        struct event *v;
        size_t n, allocated;
        uint64_t seq;
        bool oom;
};

/* Ordered by time; at the same time a closing window first (so that what happens at t counts
 * in the window starting at t), then in the order scheduled. */
static bool event_before(const struct event *a, const struct event *b) {
        if (a->time != b->time)
                return a->time < b->time;
        if ((a->type == EVENT_TICK) != (b->type == EVENT_TICK))
                return a->type == EVENT_TICK;
        return a->seq < b->seq;
}

static void heap_push(struct heap *h, struct event e) {
        if (h->n == h->allocated) {
                size_t n = MAX(h->allocated * 2, (size_t) 1024);
                struct event *v = realloc(h->v, n * sizeof(*v));
                if (!v) {
                        h->oom = true;
                        return;
                }
                h->v = v;
                h->allocated = n;
        }

        e.seq = h->seq++;
        size_t i = h->n++;
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (!event_before(&e, &h->v[parent]))
                        break;
                h->v[i] = h->v[parent];
                i = parent;
        }
        h->v[i] = e;
}

static bool heap_pop(struct heap *h, struct event *ret) {
        if (h->n == 0)
                return false;

        *ret = h->v[0];
        struct event last = h->v[--h->n];
        size_t i = 0;
        for (;;) {
                size_t child = 2 * i + 1;
                if (child >= h->n)
                        break;
                if (child + 1 < h->n && event_before(&h->v[child + 1], &h->v[child]))
                        child++;
                if (!event_before(&h->v[child], &last))
                        break;
                h->v[i] = h->v[child];
                i = child;
        }
        if (h->n > 0)
                h->v[i] = last;
        return true;
}

/* ---- policies ---- */

enum policy_id {
        POLICY_LEGACY,
        POLICY_CLIENT_GO,
        POLICY_PINION,
        _POLICY_MAX,
};

struct policy {
        const char *name;
        struct backoff_config backoff;
        bool rate_limited;       /* a token bucket in front of every request */
        double qps, burst;
        bool renew_resumes;      /* a watch that times out is renewed from its RV, not relisted */
        bool resume;             /* retries resume the watch from the last RV; only 410 relists */
        bool gone_relists_at_once; /* no backoff between a 410 and the relist */
        bool gone_splay;           /* a 410 relists after U(0, current backoff step) */
        bool honour_retry_after;
        unsigned list_objects;
};

static void policies_init(const struct model *m, struct policy ret[static _POLICY_MAX]) {
        ret[POLICY_LEGACY] = (struct policy) {
                .name = "legacy",
                .backoff = {
                        .initial = m->legacy_retry,
                        .max = m->legacy_retry,
                        .factor = 1.0,
                        .jitter = 0,
                        .reset_after = m->legacy_retry,
                },
                .list_objects = m->legacy_list_objects > 0 ? m->legacy_list_objects : m->pods_per_node,
        };
        ret[POLICY_CLIENT_GO] = (struct policy) {
                .name = "client-go",
                .backoff = BACKOFF_CONFIG_CLIENT_GO,
                .renew_resumes = true,
                .list_objects = m->pods_per_node,
        };
        ret[POLICY_PINION] = (struct policy) {
                .name = "pinion",
                .backoff = {
                        .initial = m->backoff_initial,
                        .max = m->backoff_max,
                        .factor = m->backoff_factor,
                        .jitter = m->backoff_jitter,
                        .reset_after = m->backoff_reset,
                },
                .rate_limited = true,
                .qps = m->qps,
                .burst = m->burst,
                .renew_resumes = true,
                .resume = true,
                .gone_relists_at_once = m->gone_pause == GONE_PAUSE_NONE,
                .gone_splay = m->gone_pause == GONE_PAUSE_SPLAY,
                .honour_retry_after = true,
                .list_objects = m->pods_per_node,
        };
}

static int policy_from_name(const char *name) {
        static const char *const names[_POLICY_MAX] = {
                [POLICY_LEGACY] = "legacy",
                [POLICY_CLIENT_GO] = "client-go",
                [POLICY_PINION] = "pinion",
        };

        for (int i = 0; i < _POLICY_MAX; i++)
                if (streq(name, names[i]))
                        return i;
        return -EINVAL;
}

/* ---- one run ---- */

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

struct sample {
        double t; /* window start, seconds since the outage began */
        double offered;
        unsigned requests, rejected, failed, synced;
        bool up;
};

struct result {
        const char *policy;
        uint64_t requests_outage;
        uint64_t requests_total; /* from the outage start until the end of the run */
        double peak_cost;        /* highest 1 s offered cost after the recovery */
        unsigned falls;          /* fall-overs after the recovery */
        unsigned unsynced;       /* agents not synced when the run ended */
        usec_t p50, p99, max;    /* from the recovery until synced; USEC_INFINITY: never */
        usec_t end;
        struct sample *samples;
        size_t n_samples, allocated_samples;
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

static void result_done(struct result *r) {
        r->samples = mfree(r->samples);
        r->n_samples = r->allocated_samples = 0;
}

static int run_policy(const struct model *m, const struct policy *p, struct result *ret) {
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

/* ---- report ---- */

static void format_duration(char *buf, size_t size, usec_t u) {
        if (u == USEC_INFINITY)
                snprintf(buf, size, "never");
        else
                snprintf(buf, size, "%.1f s", (double) u / (double) USEC_PER_SEC);
}

static void print_model(const char *const values[static N_OPTIONS], const struct model *m) {
        printf("# Fleet simulation: %u agents, %.0f s outage\n\n", m->agents,
               (double) m->outage / (double) USEC_PER_SEC);
        printf("Reproduce with `fleet-sim");
        for (size_t i = 0; i < N_OPTIONS; i++)
                printf(" --%s %s", option_defs[i].name, values[i]);
        printf("`\n\n| parameter | value | meaning |\n|---|---|---|\n");
        for (size_t i = 0; i < N_OPTIONS; i++)
                printf("| %s | %s | %s |\n", option_defs[i].name, values[i], option_defs[i].help);
        printf("\nOne cost unit ≈ one object serialized. A node list costs %.0f units, a watch request %.0f. "
               "The whole fleet relisting costs %.0f units, %.1f s of capacity.\n\n",
               m->list_base_cost + m->object_cost * m->pods_per_node, m->watch_cost,
               (double) m->agents * (m->list_base_cost + m->object_cost * m->pods_per_node),
               (double) m->agents * (m->list_base_cost + m->object_cost * m->pods_per_node) / m->capacity);
}

static void print_policies(const struct policy policies[static _POLICY_MAX]) {
        const struct policy *l = &policies[POLICY_LEGACY], *p = &policies[POLICY_PINION];

        printf("Policies:\n");
        printf("- **legacy**: retries %.1f s after every failure, every retry and every watch renewal is a "
               "full list (%u objects), no rate limit.\n",
               (double) l->backoff.initial / (double) USEC_PER_SEC, l->list_objects);
        printf("- **client-go**: reflector defaults (`BACKOFF_CONFIG_CLIENT_GO`: 800 ms ×2 up to 30 s, "
               "jitter 1.0, reset after 2 min healthy); after a cut watch, a failure or a 410 it backs "
               "off and relists.\n");
        printf("- **pinion** (modules/apiserver/reflector.c): `[apiserver]` backoff-initial=%.0fms "
               "backoff-max=%.0fs backoff-jitter=%.2g backoff-reset=%.0fs (factor %.2g), token bucket "
               "qps=%.2g burst=%.2g; retries resume from the last resourceVersion, only a 410 relists "
               "(%s).\n\n",
               (double) p->backoff.initial / (double) USEC_PER_MSEC,
               (double) p->backoff.max / (double) USEC_PER_SEC, p->backoff.jitter,
               (double) p->backoff.reset_after / (double) USEC_PER_SEC, p->backoff.factor, p->qps, p->burst,
               p->gone_relists_at_once ? "at once"
               : p->gone_splay        ? "after a pause uniform in [0, the current backoff step]"
                                      : "after the next backoff step");
}

/* What the runs with other seeds add to the first one. */
struct spread {
        unsigned runs;
        unsigned survived;
        double worst_peak;
        usec_t worst_max;
};

static void spread_add(struct spread *sp, const struct result *r) {
        sp->runs++;
        if (r->falls == 0)
                sp->survived++;
        sp->worst_peak = MAX(sp->worst_peak, r->peak_cost);
        sp->worst_max = MAX(sp->worst_max, r->max);
}

static void print_table(const struct model *m, const struct result *results, const struct spread *spreads,
                        size_t n, const struct result *legacy) {
        printf("| policy | requests during outage | vs legacy | peak offered cost after recovery "
               "| apiserver survived | synced after recovery p50 / p99 / max | total requests "
               "| %u seeds: survived, worst peak, worst max |\n", m->runs);
        printf("|---|---:|---:|---:|---|---|---:|---|\n");
        for (size_t i = 0; i < n; i++) {
                const struct result *r = &results[i];
                const struct spread *sp = &spreads[i];
                char p50[32], p99[32], max[32], worst[32], vs[32] = "—", survived[64];

                format_duration(p50, sizeof(p50), r->p50);
                format_duration(p99, sizeof(p99), r->p99);
                format_duration(max, sizeof(max), r->max);
                format_duration(worst, sizeof(worst), sp->worst_max);
                if (legacy && r != legacy && legacy->requests_outage > 0)
                        snprintf(vs, sizeof(vs), "%+.1f%%",
                                 100.0 * ((double) r->requests_outage / (double) legacy->requests_outage - 1));
                if (r->falls == 0)
                        snprintf(survived, sizeof(survived), "yes");
                else
                        snprintf(survived, sizeof(survived), "no (fell over %u×)", r->falls);

                printf("| %s | %" PRIu64 " | %s | %.2f× (%.0f/s) | %s | %s / %s / %s | %" PRIu64 "%s "
                       "| %u/%u, %.2f×, %s |\n",
                       r->policy, r->requests_outage, vs, r->peak_cost / m->capacity, r->peak_cost, survived,
                       p50, p99, max, r->requests_total, r->unsynced > 0 ? " (time limit)" : "",
                       sp->survived, sp->runs, sp->worst_peak / m->capacity, worst);
        }
        printf("\nRequests are counted from the outage start; \"never\": not every agent was synced "
               "when the time limit ran out.\n");
}

static void csv_write(FILE *f, const struct model *m, const struct result *r) {
        for (size_t i = 0; i < r->n_samples; i++) {
                const struct sample *x = &r->samples[i];
                fprintf(f, "%s,%g,%.3f,%g,%u,%u,%u,%u,%d\n", r->policy, x->t, x->offered, m->capacity,
                        x->requests, x->rejected, x->failed, x->synced, x->up);
        }
}

static void summary_write(FILE *f, const struct model *m, uint64_t seed, const struct result *r) {
        fprintf(f, "%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.3f,%.3f,%u,%u,%.3f,%.3f,%.3f\n", r->policy,
                seed, r->requests_outage, r->requests_total, r->peak_cost, m->capacity, r->falls, r->unsynced,
                r->p50 == USEC_INFINITY ? INFINITY : (double) r->p50 / (double) USEC_PER_SEC,
                r->p99 == USEC_INFINITY ? INFINITY : (double) r->p99 / (double) USEC_PER_SEC,
                r->max == USEC_INFINITY ? INFINITY : (double) r->max / (double) USEC_PER_SEC);
}

/* ---- command line ---- */

enum {
        ARG_POLICY = 0x100,
        ARG_CSV,
        ARG_SUMMARY,
        ARG_HELP,
        ARG_MODEL, /* + index into option_defs */
};

struct cli {
        struct model model;
        const char *values[N_OPTIONS];
        bool policies[_POLICY_MAX];
        const char *csv;
        const char *summary;
};

static void help(void) {
        printf("fleet-sim [OPTIONS]: a discrete-event simulation of agents watching an apiserver\n"
               "through an outage (see the comment at the top of tests/sim/fleet-sim.c).\n\n"
               "  --policy LIST       comma-separated: legacy,client-go,pinion (default: all)\n"
               "  --csv FILE          offered cost per second per policy\n"
               "  --summary-csv FILE  one row of results per policy and run\n\n"
               "Model (durations take us/ms/s/m/h):\n");
        for (size_t i = 0; i < N_OPTIONS; i++)
                printf("  --%-22s %s (default %s)\n", option_defs[i].name, option_defs[i].help, option_defs[i].def);
}

static int parse_policies(const char *s, bool ret[static _POLICY_MAX]) {
        _cleanup_free_ char *copy = strdup(s);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        memset(ret, 0, _POLICY_MAX * sizeof(bool));
        for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                int p = policy_from_name(w);
                if (p < 0)
                        return p;
                ret[p] = true;
        }
        return 0;
}

static int cli_parse(int argc, char *argv[], struct cli *c) {
        struct option longopts[N_OPTIONS + 5] = {
                { "policy", required_argument, NULL, ARG_POLICY },
                { "csv", required_argument, NULL, ARG_CSV },
                { "summary-csv", required_argument, NULL, ARG_SUMMARY },
                { "help", no_argument, NULL, ARG_HELP },
        };
        int opt;

        for (size_t i = 0; i < N_OPTIONS; i++) {
                longopts[4 + i] = (struct option) { option_defs[i].name, required_argument, NULL, ARG_MODEL + (int) i };
                c->values[i] = option_defs[i].def;
        }
        for (int p = 0; p < _POLICY_MAX; p++)
                c->policies[p] = true;

        while ((opt = getopt_long(argc, argv, "", longopts, NULL)) >= 0)
                switch (opt) {
                case ARG_POLICY:
                        if (parse_policies(optarg, c->policies) < 0) {
                                fprintf(stderr, "fleet-sim: bad --policy '%s'\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_CSV:
                        c->csv = optarg;
                        break;
                case ARG_SUMMARY:
                        c->summary = optarg;
                        break;
                case ARG_HELP:
                        help();
                        return 0;
                default:
                        if (opt < ARG_MODEL || opt >= ARG_MODEL + (int) N_OPTIONS)
                                return -EINVAL;
                        c->values[opt - ARG_MODEL] = optarg;
                }
        if (optind < argc) {
                fprintf(stderr, "fleet-sim: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }

        for (size_t i = 0; i < N_OPTIONS; i++)
                if (option_defs[i].parse(c->values[i], (uint8_t *) &c->model + option_defs[i].offset) < 0) {
                        fprintf(stderr, "fleet-sim: bad --%s '%s'\n", option_defs[i].name, c->values[i]);
                        return -EINVAL;
                }
        const char *why = model_check(&c->model);
        if (why) {
                fprintf(stderr, "fleet-sim: %s\n", why);
                return -EINVAL;
        }
        return 1;
}

static FILE *open_output(const char *path, const char *header) {
        FILE *f = fopen(path, "we");
        if (!f) {
                fprintf(stderr, "fleet-sim: %s: %s\n", path, strerror(errno));
                return NULL;
        }
        fputs(header, f);
        return f;
}

static int close_output(FILE *f, const char *path) {
        if (!f)
                return 0;
        if (ferror(f) | (fclose(f) != 0)) {
                fprintf(stderr, "fleet-sim: writing %s failed\n", path);
                return -EIO;
        }
        return 0;
}

/* Runs one policy --runs times: the first run is kept whole, the others only add to the spread. */
static int run_seeds(const struct model *m, const struct policy *p, FILE *summary, struct result *ret,
                     struct spread *ret_spread) {
        struct spread sp = {};
        int r;

        for (unsigned k = 0; k < m->runs; k++) {
                struct model mk = *m;
                struct result other, *res = k == 0 ? ret : &other;

                mk.seed = m->seed + k;
                r = run_policy(&mk, p, res);
                if (r < 0) {
                        if (k > 0)
                                result_done(ret);
                        return r;
                }
                spread_add(&sp, res);
                if (summary)
                        summary_write(summary, m, mk.seed, res);
                if (k > 0)
                        result_done(&other);
        }
        *ret_spread = sp;
        return 0;
}

static int run_all(const struct cli *c, FILE *csv, FILE *summary) {
        const struct model *m = &c->model;
        struct policy policies[_POLICY_MAX];
        struct result results[_POLICY_MAX];
        struct spread spreads[_POLICY_MAX];
        const struct result *legacy = NULL;
        size_t n = 0;
        int r = 0;

        policies_init(m, policies);
        print_model(c->values, m);
        print_policies(policies);

        for (int p = 0; p < _POLICY_MAX; p++) {
                if (!c->policies[p])
                        continue;
                r = run_seeds(m, &policies[p], summary, &results[n], &spreads[n]);
                if (r < 0) {
                        fprintf(stderr, "fleet-sim: %s: %s\n", policies[p].name, strerror(-r));
                        break;
                }
                if (p == POLICY_LEGACY)
                        legacy = &results[n];
                if (csv)
                        csv_write(csv, m, &results[n]);
                n++;
        }
        if (r >= 0)
                print_table(m, results, spreads, n, legacy);
        for (size_t i = 0; i < n; i++)
                result_done(&results[i]);
        return r;
}

int main(int argc, char *argv[]) {
        struct cli c = {};
        FILE *csv = NULL, *summary = NULL;
        int r;

        r = cli_parse(argc, argv, &c);
        if (r <= 0)
                return r < 0 ? 2 : 0;

        if (c.csv) {
                csv = open_output(c.csv, "policy,t,offered_cost,capacity,requests,rejected,failed,synced,server_up\n");
                if (!csv)
                        return 1;
        }
        if (c.summary) {
                summary = open_output(c.summary, "policy,seed,requests_outage,requests_total,peak_cost,capacity,"
                                                 "falls,unsynced,sync_p50,sync_p99,sync_max\n");
                if (!summary) {
                        if (csv)
                                (void) fclose(csv);
                        return 1;
                }
        }

        r = run_all(&c, csv, summary);
        if (close_output(csv, c.csv) < 0 || close_output(summary, c.summary) < 0)
                r = -EIO;
        return r < 0 ? 1 : 0;
}
