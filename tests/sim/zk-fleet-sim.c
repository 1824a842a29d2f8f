/* SPDX-License-Identifier: MIT */
/* zk-fleet-sim: the fleet's ZooKeeper writes after a global session loss.
 *
 * Every agent (default 2,500) lost its session at once (the ensemble lost quorum for longer
 * than the session timeout, say) and gets a new one at a time drawn uniformly from
 * [0, reconnect-spread). At that moment all its pods (default 250) want their members back.
 * Each agent paces its writes with the agent's own code: modules/zkreg/write-pacer.c for
 * `request` (what zkreg does: write-qps requests a second, burst max(10, write-qps), each a multi
 * of up to max-ops-per-write creates), or agent/lib/token-bucket.c for `operation` (what zkreg
 * did before: write-qps creates a second, burst the same; what a pass got tokens for went out as
 * multis of 250). A pass takes what the pacing allows; the rest waits for the next token, as
 * the registry's dispatch timer does. A member's create does not wait for another's answer, so
 * the sends do not depend on the server.
 *
 * The ensemble is one FIFO server: a transaction of k creates takes
 * 1/single-rate + (k - 1) * (1/multi-rate - 1/single-rate) / (multi-ops - 1) seconds, a line
 * through the two rates measured on a real server (tests/bench/zkreg-batch-bench.py prints
 * them; an ensemble's are lower: pass them derated). Reported per policy: when the last member
 * is back, the fleet's offered transactions and creates in its busiest second, the longest a
 * request waited for its answer, and how many agents heard nothing from the server for longer
 * than 2/3 of the session timeout with a request outstanding (the ZooKeeper C client then
 * drops its connection: its pings wait on the server behind its own pending request; the
 * agent then checks for the members of its lost creates on reconnect, which the model leaves
 * out).
 *
 *   tests/sim/zk-fleet-sim [--agents 2500] [--pods 250] [--write-qps 50] [--max-ops 250]
 *                          [--multi-rate R] [--single-rate R] [--reconnect-spread 1]
 *                          [--session-timeout 16] [--seed 1]
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "token-bucket.h"
#include "write-pacer.h"

struct params {
        unsigned agents, pods, max_ops, seed;
        double qps, multi_rate, single_rate, multi_ops, spread, session_timeout;
};

struct send {
        double t;       /* seconds after the loss */
        unsigned k;     /* creates in the request */
        unsigned agent;
};

struct sends {
        struct send *v;
        size_t n, cap;
};

static void push(struct sends *s, double t, unsigned k, unsigned agent) {
        if (s->n == s->cap) {
                s->cap = s->cap ? 2 * s->cap : 1024;
                s->v = realloc(s->v, s->cap * sizeof(*s->v));
                if (!s->v) {
                        perror("realloc");
                        exit(1);
                }
        }
        s->v[s->n++] = (struct send) { t, k, agent };
}

/* One pass's ops sent as multis of at most cap. */
static void push_pass(struct sends *s, double t, unsigned went, unsigned cap, unsigned agent) {
        while (went > 0) {
                unsigned k = went < cap ? went : cap;
                push(s, t, k, agent);
                went -= k;
        }
}

static usec_t to_usec(double s) {
        return (usec_t) (s * 1e6);
}

/* An agent connected at t0 with p->pods creates to make: its sends. */
static void agent_request(const struct params *p, unsigned agent, double t0, struct sends *s) {
        struct write_pacer w;
        usec_t now = to_usec(t0);
        unsigned left = p->pods;

        write_pacer_init(&w, p->qps, p->max_ops, 0);
        while (left > 0) {
                unsigned went = 0;
                usec_t wait = 0;
                while (left > 0 && write_pacer_take(&w, now, &wait)) {
                        went++;
                        left--;
                }
                write_pacer_flush(&w);
                push_pass(s, (double) now / 1e6, went, p->max_ops, agent);
                now += wait > 0 ? wait : 1;
        }
}

static void agent_operation(const struct params *p, unsigned agent, double t0, struct sends *s) {
        struct token_bucket tb;
        usec_t now = to_usec(t0);
        unsigned left = p->pods;

        token_bucket_init(&tb, p->qps, p->qps < 10 ? 10 : p->qps, 0);
        while (left > 0) {
                unsigned went = 0;
                usec_t wait = 0;
                while (left > 0 && token_bucket_try_take(&tb, now, &wait)) {
                        went++;
                        left--;
                }
                push_pass(s, (double) now / 1e6, went, 250, agent);
                now += wait > 0 ? wait : 1;
        }
}

static int cmp_send(const void *a, const void *b) {
        double x = ((const struct send *) a)->t, y = ((const struct send *) b)->t;
        return x < y ? -1 : x > y;
}

/* A reproducible uniform draw in [0, 1). */
static double uniform(unsigned long long *state) {
        *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
        return (double) (*state >> 11) / 9007199254740992.0;
}

static void run(const struct params *p, const char *policy) {
        struct sends s = {};
        unsigned long long rng = p->seed * 2654435761ULL + 1;
        double t1 = 1.0 / p->single_rate, per_op = (1.0 / p->multi_rate - t1) / (p->multi_ops - 1);
        double free_at = 0, last_done = 0, max_wait = 0, busy = 0, limit = p->session_timeout * 2 / 3;
        size_t over = 0, windows = 0;
        double *win_txn, *win_ops;
        /* Per agent: when it last heard from the server (or first sent), and its longest
         * silence with a request outstanding. The client's pings wait behind its own pending
         * request on the server, so a silence is what the client's receive timeout sees. */
        double *heard = calloc(p->agents, sizeof(double)), *silence = calloc(p->agents, sizeof(double));
        if (!heard || !silence) {
                perror("calloc");
                exit(1);
        }
        for (unsigned a = 0; a < p->agents; a++)
                heard[a] = -1;

        for (unsigned a = 0; a < p->agents; a++) {
                double t0 = uniform(&rng) * p->spread;
                if (strcmp(policy, "request") == 0)
                        agent_request(p, a, t0, &s);
                else
                        agent_operation(p, a, t0, &s);
        }
        qsort(s.v, s.n, sizeof(*s.v), cmp_send);
        windows = (size_t) (s.n ? s.v[s.n - 1].t : 0) + 2;
        win_txn = calloc(windows, sizeof(double));
        win_ops = calloc(windows, sizeof(double));
        if (!win_txn || !win_ops) {
                perror("calloc");
                exit(1);
        }
        for (size_t i = 0; i < s.n; i++) {
                double start = s.v[i].t > free_at ? s.v[i].t : free_at;
                double service = t1 + (s.v[i].k - 1) * (per_op > 0 ? per_op : 0);
                free_at = start + service;
                busy += service;
                last_done = free_at;
                if (free_at - s.v[i].t > max_wait)
                        max_wait = free_at - s.v[i].t;
                unsigned a = s.v[i].agent;
                double since = heard[a] < 0 || heard[a] < s.v[i].t ? s.v[i].t : heard[a];
                if (free_at - since > silence[a])
                        silence[a] = free_at - since;
                heard[a] = free_at;
                win_txn[(size_t) s.v[i].t] += 1;
                win_ops[(size_t) s.v[i].t] += s.v[i].k;
        }
        for (unsigned a = 0; a < p->agents; a++)
                over += silence[a] > limit;
        free(heard);
        free(silence);
        double peak_txn = 0, peak_ops = 0;
        for (size_t w = 0; w < windows; w++) {
                if (win_txn[w] > peak_txn)
                        peak_txn = win_txn[w];
                if (win_ops[w] > peak_ops)
                        peak_ops = win_ops[w];
        }
        printf("| %s | %zu | %.0f | %.0f | %.2f s | %.2f s | %zu | %.0f%% |\n", policy, s.n, peak_txn, peak_ops,
               last_done, max_wait, over, last_done > 0 ? 100.0 * busy / last_done : 0.0);
        free(win_txn);
        free(win_ops);
        free(s.v);
}

static void usage(void) {
        fputs("usage: zk-fleet-sim [--agents N] [--pods N] [--write-qps Q] [--max-ops N] [--multi-rate TXN/S]\n"
              "                    [--multi-ops N] [--single-rate TXN/S] [--reconnect-spread S]\n"
              "                    [--session-timeout S] [--seed N]\n",
              stderr);
}

int main(int argc, char **argv) {
        /* The rates: one standalone ZooKeeper 3.8 on the 2-core machine, log in memory
         * (docs/benchmarks.md, "ZooKeeper bulk writes"). */
        struct params p = {
                .agents = 2500, .pods = 250, .max_ops = WRITE_PACER_MAX_OPS_DEFAULT, .seed = 1,
                .qps = 50, .multi_rate = 184, .multi_ops = 250, .single_rate = 5352,
                .spread = 1, .session_timeout = 16,
        };

        for (int i = 1; i < argc; i++) {
                const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
                if (strcmp(o, "--help") == 0) {
                        usage();
                        return 0;
                }
                if (!v) {
                        usage();
                        return 2;
                }
                i++;
                if (strcmp(o, "--agents") == 0)
                        p.agents = (unsigned) strtoul(v, NULL, 10);
                else if (strcmp(o, "--pods") == 0)
                        p.pods = (unsigned) strtoul(v, NULL, 10);
                else if (strcmp(o, "--write-qps") == 0)
                        p.qps = strtod(v, NULL);
                else if (strcmp(o, "--max-ops") == 0)
                        p.max_ops = (unsigned) strtoul(v, NULL, 10);
                else if (strcmp(o, "--multi-rate") == 0)
                        p.multi_rate = strtod(v, NULL);
                else if (strcmp(o, "--multi-ops") == 0)
                        p.multi_ops = strtod(v, NULL);
                else if (strcmp(o, "--single-rate") == 0)
                        p.single_rate = strtod(v, NULL);
                else if (strcmp(o, "--reconnect-spread") == 0)
                        p.spread = strtod(v, NULL);
                else if (strcmp(o, "--session-timeout") == 0)
                        p.session_timeout = strtod(v, NULL);
                else if (strcmp(o, "--seed") == 0)
                        p.seed = (unsigned) strtoul(v, NULL, 10);
                else {
                        usage();
                        return 2;
                }
        }
        if (p.agents == 0 || p.pods == 0 || p.max_ops == 0 || !(p.qps > 0) || !(p.multi_rate > 0) ||
            !(p.single_rate > 0) || !(p.multi_ops > 1) || p.spread < 0) {
                usage();
                return 2;
        }

        printf("%u agents x %u pods (%llu creates) after a global session loss, new sessions over %.1f s; "
               "write-qps %.0f, max-ops-per-write %u; server %.0f txn/s for multis of %.0f, %.0f txn/s for lone "
               "creates; session timeout %.0f s (a wait over %.1f s drops the connection)\n\n",
               p.agents, p.pods, (unsigned long long) p.agents * p.pods, p.spread, p.qps, p.max_ops, p.multi_rate,
               p.multi_ops, p.single_rate, p.session_timeout, p.session_timeout * 2 / 3);
        printf("| pacing | transactions | peak txn/s offered | peak creates/s offered | all back after | "
               "longest wait | agents silent over 2/3 timeout | server busy |\n|---|---|---|---|---|---|---|---|\n");
        run(&p, "request");
        run(&p, "operation");
        return 0;
}
