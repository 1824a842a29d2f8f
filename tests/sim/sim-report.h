/* SPDX-License-Identifier: MIT */
#pragma once

/* The report: the model and the policies as Markdown, the table of results with the spread over
 * the seeds, the time series CSV (--csv) and the summary CSV (--summary-csv). */

#include <stdint.h>
#include <stdio.h>

#include "sim-model.h"
#include "sim-policy.h"
#include "sim-run.h"

/* The title, a command line that reproduces the run, and every constant with its meaning. */
void print_model(const char *const values[static N_OPTIONS], const struct model *m);
/* What each policy does, with the settings of this run. */
void print_policies(const struct model *m, const struct policy policies[static _POLICY_MAX]);

/* What the runs with other seeds add to the first one. */
struct spread {
        unsigned runs;
        unsigned survived;
        double worst_peak;
        usec_t worst_max;
        usec_t worst_clear; /* the write backlog's */
};

void spread_add(struct spread *sp, const struct result *r);
/* One row per result, compared with legacy's (NULL: legacy did not run). */
void print_table(const struct model *m, const struct result *results, const struct spread *spreads,
                 size_t n, const struct result *legacy);

/* The writes: per pod start in steady state, through the outage, at the recovery (only the
 * policies that write; nothing when none ran). */
void print_writes_table(const struct model *m, const struct result *results, const struct spread *spreads,
                        size_t n);

/* Per agent: what it received and cost in steady state (per minute) and through the outage, and
 * how fast a route change reached it (only with the Node watch). */
void print_fanout_table(const struct model *m, const struct result *results, size_t n);

#define CSV_HEADER "policy,t,offered_cost,capacity,requests,rejected,failed,synced,server_up,writes,write_backlogged\n"
/* One row per 1 s window of the result. */
void csv_write(FILE *f, const struct model *m, const struct result *r);

#define SUMMARY_HEADER                                                                             \
        "policy,seed,requests_outage,requests_total,peak_cost,capacity,falls,unsynced,sync_p50,"   \
        "sync_p99,sync_max,steady_requests_per_agent_min,steady_pod_events_per_agent_min,"           \
        "steady_node_events_per_agent_min,steady_kib_per_agent_min,steady_cost_per_s,"                \
        "recovery_requests_per_agent,recovery_kib_per_agent,recovery_cost_per_agent,"                 \
        "changes_late_share_steady,changes_late_share_after,change_max_delay_after,"                 \
        "starts_steady,writes_per_start_steady,writes_per_agent_min_steady,writes_outage,writes_total," \
        "write_peak_cost,write_backlog_clear,write_backlogged_end,writes_dropped,conditions_dropped,"   \
        "writes_coalesced,write_queue_max\n"
/* One row for the result of the run with `seed`. */
void summary_write(FILE *f, const struct model *m, uint64_t seed, const struct result *r);
