/* SPDX-License-Identifier: MIT */
/* The report: the model and the policies, the Markdown table of results, and the two CSV files. */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "sim-report.h"

static void format_duration(char *buf, size_t size, usec_t u) {
        if (u == USEC_INFINITY)
                snprintf(buf, size, "never");
        else
                snprintf(buf, size, "%.1f s", (double) u / (double) USEC_PER_SEC);
}

static double per_agent_minute(const struct model *m, const struct fanout *f, double x) {
        return f->span > 0 ? x / m->agents / ((double) f->span / (double) USEC_PER_MINUTE) : NAN;
}

static uint64_t fanout_requests(const struct fanout *f) {
        return f->requests[RESOURCE_PODS] + f->requests[RESOURCE_NODES];
}

static double fanout_bytes(const struct fanout *f) {
        return f->bytes[RESOURCE_PODS] + f->bytes[RESOURCE_NODES];
}

/* The share of (change, Node reflector) pairs heard 5 s or more late; NAN without a Node watch. */
static double late_share(const struct route_changes *c) {
        return c->pairs > 0 ? (double) c->late / (double) c->pairs : NAN;
}

void print_model(const char *const values[static N_OPTIONS], const struct model *m) {
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
        if (!m->node_watch)
                return;
        unsigned nodes = model_nodes(m), pages = (nodes + m->page_limit - 1) / m->page_limit;
        double node_list = pages * m->list_base_cost + m->node_object_cost * nodes;
        double node_events = (double) nodes * (double) USEC_PER_SEC / (double) m->node_status_period;
        printf("With the Node watch: a Node list (%u Nodes, %u page%s) costs %.0f units and carries %.1f MiB; "
               "the whole fleet relisting Nodes costs %.0f units, %.0f s of capacity. In steady state every "
               "agent receives %.2f Node events/s (%.0f KiB/s), the fleet %.0f events/s (%.1f MB/s from the "
               "apiserver)%s.\n\n",
               nodes, pages, pages == 1 ? "" : "s", node_list, nodes * (double) m->node_object_bytes / (1 << 20),
               m->agents * node_list, m->agents * node_list / m->capacity, node_events,
               node_events * m->node_object_bytes / 1024, node_events * m->agents,
               node_events * m->agents * m->node_object_bytes / 1e6,
               m->event_cost > 0 ? ", counted at event-cost each" : ", not counted in the offered cost (event-cost 0)");
}

void print_policies(const struct model *m, const struct policy policies[static _POLICY_MAX]) {
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
        printf("The write policies run pinion's reflector beside the agents' status writes. Every node starts "
               "%.2g pods a minute, through the outage too; a start's jobs are in place within %.0f s, or for "
               "%.0f%% of them (a job still pending after condition-grace) within %.0f s: one condition PATCH "
               "(False first for the slow ones) and one event POST for the Normal events within %.0f s; each "
               "pod's identity rotates every %.0f min on average, one event each. A write costs %.2g.\n",
               m->pod_start_rate, (double) m->condition_grace / (double) USEC_PER_SEC, 100 * m->slow_share,
               (double) m->slow_jobs_time / (double) USEC_PER_SEC, (double) m->event_batch / (double) USEC_PER_SEC,
               (double) m->rotation_period / (double) USEC_PER_MINUTE, m->write_cost);
        printf("- **naive-writes**: every write sent when due and retried every %.1f s on its own: no queue, no "
               "coalescing, no jitter, no token bucket.\n",
               (double) l->backoff.initial / (double) USEC_PER_SEC);
        printf("- **pinion-writes**: one queue per agent of at most %u writes (a pod's newer condition replaces "
               "its queued one; full: the oldest event is dropped), through the agent's token bucket; a failed "
               "write backs off as the reflector does and the queue waits for it; when a failure streak ends "
               "the rest of the queue waits a pause uniform in [0, the current backoff step].\n\n",
               m->write_queue);
}

void spread_add(struct spread *sp, const struct result *r) {
        sp->runs++;
        if (r->falls == 0)
                sp->survived++;
        sp->worst_peak = MAX(sp->worst_peak, r->peak_cost);
        sp->worst_max = MAX(sp->worst_max, r->max);
        sp->worst_clear = MAX(sp->worst_clear, r->writes.backlog_clear);
}

void print_table(const struct model *m, const struct result *results, const struct spread *spreads,
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

static double ratio(uint64_t x, uint64_t y) {
        return y > 0 ? (double) x / (double) y : NAN;
}

static double writes_per_agent_minute(const struct model *m, const struct write_result *w) {
        usec_t settle = sim_writes_settle(m);

        return m->warmup > settle ? (double) w->writes_before / m->agents /
                                            ((double) (m->warmup - settle) / (double) USEC_PER_MINUTE)
                                  : NAN;
}

void print_writes_table(const struct model *m, const struct result *results, const struct spread *spreads,
                        size_t n) {
        bool any = false;

        for (size_t i = 0; i < n; i++)
                any = any || results[i].writing;
        if (!any)
                return;
        printf("\nStatus writes (pinion's reflector in both rows). Steady state: per pod start, the writes of the "
               "starts at least %.0f s before the outage (their writes were all due by then); per agent, every "
               "write (rotations too) from %.0f s after the start to the outage. Peak: the highest 1 s of offered "
               "cost after the recovery, reads and writes (the writes' own highest second beside it). Backlog "
               "cleared: from the recovery until no agent holds a write that a failure held up.\n\n",
               (double) sim_writes_settle(m) / (double) USEC_PER_SEC,
               (double) sim_writes_settle(m) / (double) USEC_PER_SEC);
        printf("| policy | writes per pod start (steady) | writes/min per agent (steady) | writes during outage "
               "| peak offered cost after recovery (writes) | apiserver survived | write backlog cleared "
               "| writes outage → end | dropped (conditions) | coalesced | longest queue "
               "| %u seeds: survived, worst peak, worst cleared |\n", m->runs);
        printf("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|\n");
        for (size_t i = 0; i < n; i++) {
                const struct result *r = &results[i];
                const struct write_result *w = &r->writes;
                char clear[32], worst[32], survived[64];

                if (!r->writing)
                        continue;
                format_duration(clear, sizeof(clear), w->backlog_clear);
                format_duration(worst, sizeof(worst), spreads[i].worst_clear);
                if (r->falls == 0)
                        snprintf(survived, sizeof(survived), "yes");
                else
                        snprintf(survived, sizeof(survived), "no (fell over %u×)", r->falls);
                printf("| %s | %.2f | %.2f | %" PRIu64 " | %.2f× (%.0f/s; %.0f/s) | %s | %s | %" PRIu64
                       " | %" PRIu64 " (%" PRIu64 ") | %" PRIu64 " | %u | %u/%u, %.2f×, %s |\n",
                       r->policy, ratio(w->writes_steady, w->starts_steady), writes_per_agent_minute(m, w),
                       w->writes_outage, r->peak_cost / m->capacity, r->peak_cost, w->peak_cost, survived, clear,
                       w->writes_total, w->dropped + w->dropped_conditions, w->dropped_conditions, w->coalesced,
                       w->queue_max, spreads[i].survived, spreads[i].runs, spreads[i].worst_peak / m->capacity,
                       worst);
        }
        printf("\nWrites count requests (a retry is another); the longest queue is an agent's queued and "
               "in-flight writes (naive: its writes waiting for a retry).\n");
}

static void format_share(char *buf, size_t size, double late) {
        if (isnan(late))
                snprintf(buf, size, "—");
        else
                snprintf(buf, size, "%.2f%%", 100.0 * (1 - late));
}

void print_fanout_table(const struct model *m, const struct result *results, size_t n) {
        printf("\nPer agent. Steady state: the %.0f s before the outage, per minute. Through the outage: from "
               "its start to the end of the run. Route changes: one to some Node every second the apiserver "
               "is up; the share of (change, agent) heard within 5 s.\n\n",
               (double) m->warmup / (double) USEC_PER_SEC);
        printf("| policy | steady: requests/min | pod events/min | Node events/min | KiB/min | offered cost/s (fleet) "
               "| outage → end: requests | KiB | offered cost | route change within 5 s: steady | after recovery "
               "| latest heard after recovery |\n");
        printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
        for (size_t i = 0; i < n; i++) {
                const struct result *r = &results[i];
                const struct fanout *st = &r->steady, *rc = &r->recovery;
                char steady[32], after[32], delay[32];

                format_share(steady, sizeof(steady), late_share(&r->changes_steady));
                format_share(after, sizeof(after), late_share(&r->changes_after));
                if (r->changes_after.pairs > 0)
                        format_duration(delay, sizeof(delay), r->changes_after.max_delay);
                else
                        snprintf(delay, sizeof(delay), "—");
                printf("| %s | %.2f | %.1f | %.1f | %.0f | %.0f | %.1f | %.0f | %.0f | %s | %s | %s |\n", r->policy,
                       per_agent_minute(m, st, (double) fanout_requests(st)),
                       per_agent_minute(m, st, st->events[RESOURCE_PODS]),
                       per_agent_minute(m, st, st->events[RESOURCE_NODES]),
                       per_agent_minute(m, st, fanout_bytes(st)) / 1024,
                       st->span > 0 ? st->cost / ((double) st->span / (double) USEC_PER_SEC) : NAN,
                       (double) fanout_requests(rc) / m->agents, fanout_bytes(rc) / m->agents / 1024,
                       rc->cost / m->agents, steady, after, delay);
        }
}

void csv_write(FILE *f, const struct model *m, const struct result *r) {
        for (size_t i = 0; i < r->n_samples; i++) {
                const struct sample *x = &r->samples[i];
                fprintf(f, "%s,%g,%.3f,%g,%u,%u,%u,%u,%d,%u,%u\n", r->policy, x->t, x->offered, m->capacity,
                        x->requests, x->rejected, x->failed, x->synced, x->up, x->writes, x->backlogged);
        }
}

/* The writes' fields of a summary row, empty for a policy that does not write. */
static void summary_write_writes(FILE *f, const struct model *m, const struct result *r) {
        const struct write_result *w = &r->writes;

        if (!r->writing) {
                fputs(",,,,,,,,,,,\n", f);
                return;
        }
        fprintf(f, "%" PRIu64 ",%.6g,%.6g,%" PRIu64 ",%" PRIu64 ",%.3f,%.3f,%u,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%u\n",
                w->starts_steady, ratio(w->writes_steady, w->starts_steady), writes_per_agent_minute(m, w),
                w->writes_outage, w->writes_total, w->peak_cost,
                w->backlog_clear == USEC_INFINITY ? INFINITY : (double) w->backlog_clear / (double) USEC_PER_SEC,
                w->backlogged_end, w->dropped, w->dropped_conditions, w->coalesced, w->queue_max);
}

void summary_write(FILE *f, const struct model *m, uint64_t seed, const struct result *r) {
        const struct fanout *st = &r->steady, *rc = &r->recovery;

        fprintf(f, "%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.3f,%.3f,%u,%u,%.3f,%.3f,%.3f,", r->policy,
                seed, r->requests_outage, r->requests_total, r->peak_cost, m->capacity, r->falls, r->unsynced,
                r->p50 == USEC_INFINITY ? INFINITY : (double) r->p50 / (double) USEC_PER_SEC,
                r->p99 == USEC_INFINITY ? INFINITY : (double) r->p99 / (double) USEC_PER_SEC,
                r->max == USEC_INFINITY ? INFINITY : (double) r->max / (double) USEC_PER_SEC);
        double v[] = {
                per_agent_minute(m, st, (double) fanout_requests(st)),
                per_agent_minute(m, st, st->events[RESOURCE_PODS]),
                per_agent_minute(m, st, st->events[RESOURCE_NODES]),
                per_agent_minute(m, st, fanout_bytes(st)) / 1024,
                st->span > 0 ? st->cost / ((double) st->span / (double) USEC_PER_SEC) : NAN,
                (double) fanout_requests(rc) / m->agents,
                fanout_bytes(rc) / m->agents / 1024,
                rc->cost / m->agents,
                late_share(&r->changes_steady),
                late_share(&r->changes_after),
                r->changes_after.pairs > 0 ? (double) r->changes_after.max_delay / (double) USEC_PER_SEC : NAN,
        };
        /* an empty field: not measured (no Node watch) */
        for (size_t i = 0; i < ELEMENTSOF(v); i++)
                if (isnan(v[i]))
                        fputs(",", f);
                else
                        fprintf(f, "%.6g,", v[i]);
        summary_write_writes(f, m, r);
}
