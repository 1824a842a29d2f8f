/* SPDX-License-Identifier: MIT */
/* The model's constants as command-line options: the value parsers, the table that names and
 * documents every constant, and the consistency checks of a parsed model. */

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "parse.h"
#include "sim-model.h"

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

const struct option_def option_defs[] = {
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
        { "legacy-retry", parse_duration_option, FIELD(legacy_retry), "1s", "legacy (and naive writes): fixed wait after a failure" },
        { "backoff-initial", parse_duration_option, FIELD(backoff_initial), "800ms", "pinion: [apiserver] backoff-initial" },
        { "backoff-max", parse_duration_option, FIELD(backoff_max), "30s", "pinion: [apiserver] backoff-max" },
        { "backoff-factor", parse_double, FIELD(backoff_factor), "2",
          "pinion: backoff growth factor (no config key: the agent uses 2)" },
        { "backoff-jitter", parse_double, FIELD(backoff_jitter), "1.0", "pinion: [apiserver] backoff-jitter" },
        { "backoff-reset", parse_duration_option, FIELD(backoff_reset), "2m", "pinion: [apiserver] backoff-reset" },
        { "qps", parse_double, FIELD(qps), "5", "pinion: [apiserver] qps (token bucket rate)" },
        { "burst", parse_double, FIELD(burst), "10", "pinion: [apiserver] burst (token bucket size)" },
        { "node-watch", parse_unsigned, FIELD(node_watch), "0",
          "1: every agent also lists and watches all Nodes ([network] routing = nodes), sharing its token bucket" },
        { "nodes", parse_unsigned, FIELD(nodes), "0", "Node objects a Node list returns (0: one per agent)" },
        { "page-limit", parse_unsigned, FIELD(page_limit), "500",
          "objects per list page (the reflector's limit=): each page is a request through the token bucket" },
        { "node-object-cost", parse_double, FIELD(node_object_cost), "1",
          "cost per object a Node list returns (1: a consistent read, like a pod's; less if served from the watch cache)" },
        { "node-relist-spread", parse_duration_option, FIELD(node_relist_spread), "0",
          "Node reflector: a 410 relists after a pause uniform in [0, max(this, the current backoff step)]" },
        { "node-relist-after", parse_duration_option, FIELD(node_relist_after), "0",
          "node-fresh-watch: the deferred full relist comes after a pause uniform in [this, this + node-relist-spread]" },
        { "node-page-interval", parse_duration_option, FIELD(node_page_interval), "0",
          "Node reflector: the pause between the pages of a list (0: the next page at once, through the token bucket)" },
        { "node-fresh-watch", parse_unsigned, FIELD(node_fresh_watch), "0",
          "1: on 410 the Node reflector first lists with limit=1 (a fresh resourceVersion) and watches from it at once; the full relist follows after node-relist-after + a pause uniform in [0, node-relist-spread]" },
        { "node-status-period", parse_duration_option, FIELD(node_status_period), "5m",
          "each kubelet posts its Node's status this often (nodeStatusReportFrequency): a MODIFIED event to every Node watcher" },
        { "node-object-bytes", parse_unsigned, FIELD(node_object_bytes), "7000", "bytes of one Node in JSON (a list item or a watch event)" },
        { "pod-event-period", parse_duration_option, FIELD(pod_event_period), "30m",
          "each of a node's pods changes this often (an event on its node's pod watch)" },
        { "pod-object-bytes", parse_unsigned, FIELD(pod_object_bytes), "4000", "bytes of one pod in JSON" },
        { "event-cost", parse_double, FIELD(event_cost), "0",
          "cost of sending one watch event to one watcher (0: not counted, as the pod-watch model did)" },
        { "pod-start-rate", parse_double, FIELD(pod_start_rate), "1",
          "writes: pod starts per node per minute (Poisson; they go on through an outage)" },
        { "slow-share", parse_double, FIELD(slow_share), "0.1",
          "writes: share of pod starts with a job still pending after condition-grace (a False PATCH, then True)" },
        { "condition-grace", parse_duration_option, FIELD(condition_grace), "2s",
          "writes: the other starts' jobs are in place at a time uniform in [0, this) after the start (one True PATCH)" },
        { "slow-jobs-time", parse_duration_option, FIELD(slow_jobs_time), "5s",
          "writes: the slow share's jobs are in place at a time uniform in [condition-grace, this] after the start" },
        { "event-batch", parse_duration_option, FIELD(event_batch), "5s",
          "writes: a pod's Normal events arriving within this of the first are merged into one event POST, sent this long after the first" },
        { "rotation-period", parse_duration_option, FIELD(rotation_period), "40m",
          "writes: each pod's identity rotates on average this often, an event each (0: none)" },
        { "write-queue", parse_unsigned, FIELD(write_queue), "256",
          "pinion writes: bound of an agent's write queue (full: its oldest event is dropped)" },
        { "write-cost", parse_double, FIELD(write_cost), "1", "apiserver cost of one write (a status PATCH or an event POST)" },
};

_Static_assert(ELEMENTSOF(option_defs) == N_OPTIONS, "N_OPTIONS counts the rows of option_defs");

unsigned model_nodes(const struct model *m) {
        return m->nodes > 0 ? m->nodes : m->agents;
}

const char *model_check(const struct model *m) {
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
        if (m->node_watch > 1 || m->node_fresh_watch > 1)
                return "--node-watch and --node-fresh-watch are 0 or 1";
        if (m->page_limit == 0 || m->node_status_period == 0 || m->pod_event_period == 0)
                return "--page-limit, --node-status-period and --pod-event-period must be positive";
        if (m->slow_share > 1 || m->write_queue == 0)
                return "--slow-share is a share in [0, 1] and --write-queue at least 1";
        if (m->slow_jobs_time < m->condition_grace)
                return "--slow-jobs-time must be at least --condition-grace";
        return NULL;
}
