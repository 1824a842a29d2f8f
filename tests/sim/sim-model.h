/* SPDX-License-Identifier: MIT */
#pragma once

/* The model's constants (the comment at the top of fleet-sim.c says what each one means), the
 * table of options that names, parses and documents every one of them, and the checks a parsed
 * model must pass. */

#include <stddef.h>
#include <stdint.h>

#include "macro.h"

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
        /* the Node watch of `[network] routing = nodes`: a second reflector per agent, listing and
         * watching every Node, sharing the agent's token bucket */
        unsigned node_watch; /* 0 or 1 */
        unsigned nodes;      /* 0: one per agent */
        unsigned page_limit;
        double node_object_cost;
        usec_t node_relist_spread;
        usec_t node_relist_after;
        usec_t node_page_interval;
        unsigned node_fresh_watch; /* 0 or 1 */
        usec_t node_status_period;
        unsigned node_object_bytes;
        usec_t pod_event_period;
        unsigned pod_object_bytes;
        double event_cost;
        /* the writes of the naive-writes and pinion-writes policies: pod conditions and events */
        double pod_start_rate;    /* pod starts per node per minute */
        double slow_share;        /* of starts whose jobs outlast condition_grace */
        usec_t condition_grace;
        usec_t slow_jobs_time;
        usec_t event_batch;
        usec_t rotation_period;   /* 0: no rotations */
        unsigned write_queue;
        double write_cost;
};

typedef int (*option_parser)(const char *s, void *ret);

struct option_def {
        const char *name;
        option_parser parse;
        size_t offset;
        const char *def;
        const char *help;
};

/* The rows of option_defs (sim-model.c checks the count when it compiles): a constant, so that
 * arrays of one value per option need no allocation. */
#define N_OPTIONS 52

/* One row per constant of struct model, in the order --help and the report list them. */
extern const struct option_def option_defs[];

/* Node objects a Node list returns. */
unsigned model_nodes(const struct model *m);

/* NULL when the model is consistent, else what is wrong, naming the options. */
const char *model_check(const struct model *m);
