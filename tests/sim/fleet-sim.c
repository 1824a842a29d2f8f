/* SPDX-License-Identifier: MIT */
/* fleet-sim: a discrete-event simulation of a fleet of node agents watching their node's pods on
 * one apiserver through an outage, comparing retry policies (and, beside pinion's, two policies for
 * the agents' status writes). It links the agent's real
 * backoff and token bucket (agent/lib/backoff.c); nothing else of the agent is modelled in code.
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
 *              agent is synced with the apiserver up (and, with node-fresh-watch, every deferred
 *              Node relist is done), or `time-limit` after the recovery.
 *   Node watch with node-watch=1 ([network] routing = nodes) every agent has a second reflector
 *              listing and watching all `nodes` Nodes, with its own backoff and the agent's token
 *              bucket; lists come in pages of page-limit objects, one request each. Every Node
 *              posts its status each node-status-period: a MODIFIED event to every established
 *              Node watch (pods: one per pod-event-period), event-cost each. A route-relevant
 *              change every second the apiserver is up is heard at once by an established Node
 *              watch, else when the reflector's watch resumes or its list completes.
 *   writes     (naive-writes and pinion-writes only) every node starts pods at pod-start-rate
 *              (Poisson), through the outage too. A start's jobs are in place after U[0,
 *              condition-grace), or for slow-share of them U[condition-grace, slow-jobs-time]: one
 *              condition PATCH when they are, a False PATCH first at condition-grace for the slow
 *              ones. Its Normal events (network wired at the start, identity and configs when the
 *              jobs are in place) within event-batch of the first are one event POST, sent
 *              event-batch after the first. Each pod's identity rotates every rotation-period on
 *              average (one event). A write costs write-cost and meets the apiserver as any
 *              request (refused while down, 429 beyond queue-limit); one the apiserver fell over
 *              under fails when its answer was due.
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
 *              the last resourceVersion; only 410 relists, after a pause (gone-pause: uniform in
 *              [0, the current backoff step] as the reflector does, the next backoff step, or
 *              none); a 429's Retry-After is a lower bound of the wait. The Node reflector's
 *              410 pause is at least node-relist-spread; with node-fresh-watch it takes a fresh
 *              resourceVersion (a limit=1 list), watches from it at once, and relists in full
 *              after node-relist-after + U[0, node-relist-spread].
 *   naive-writes   pinion's reflector; every write sent when due and retried every legacy-retry
 *              on its own: no queue, no coalescing, no jitter, no token bucket.
 *   pinion-writes  pinion's reflector; one queue per agent of write-queue writes, a pod's newer
 *              condition replacing its queued one, a full queue dropping its oldest event (or,
 *              holding none, its oldest condition). The head goes through the agent's token
 *              bucket; a failure (refused, 429, cut) backs it off with the reflector's backoff
 *              settings and the whole queue waits; the success that ends a failure streak makes
 *              the rest wait U[0, the current backoff step] before it drains.
 *
 * The files: sim-model (the constants and their options), sim-policy (the policies),
 * sim-event (the event queue), sim-random (the model's generator), sim-run (one run: the agents,
 * the apiserver, the loop), sim-writes (the pod starts and the writers), sim-report (the table and the CSV files), sim-cli (the command line);
 * this one runs every policy with every seed and writes the report.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sim-cli.h"
#include "sim-policy.h"
#include "sim-report.h"
#include "sim-run.h"

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
        print_policies(m, policies);

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
        if (r >= 0) {
                print_table(m, results, spreads, n, legacy);
                print_writes_table(m, results, spreads, n);
                print_fanout_table(m, results, n);
        }
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
                csv = open_output(c.csv, CSV_HEADER);
                if (!csv)
                        return 1;
        }
        if (c.summary) {
                summary = open_output(c.summary, SUMMARY_HEADER);
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
