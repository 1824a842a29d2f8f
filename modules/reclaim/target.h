/* SPDX-License-Identifier: MIT */
#pragma once

/* target: one watched memory cgroup ([reclaim.NAME] or an opted-in pod) and its state machine.
 *
 *   missing ──cgroup appears──▶ ok ◀──episode done── reclaiming
 *      ▲                         │ ──usage ≥ high──▶     │
 *      └──cgroup removed─────────┴───────────────────────┘
 *   unreachable: anon + min-file keep usage at/above high (or the goal above target): reported,
 *                never reclaimed into; unlimited: percentages of no limit; error: reads fail.
 *
 * Two mechanisms, one per concern:
 * - The throttle (target-throttle.c): while the floor (anon + min-file + headroom) is below
 *   high, a lowered cap is kept in force so that a writer faster than any reaction — dd at
 *   GiB/s, its cache dirty — reclaims its own page cache in its own context before the limit:
 *   v1 memory.limit_in_bytes just under halfway between high and the limit, v2 memory.high at
 *   high.
 *   Given back when anonymous memory needs the room (the floor reaches high), on stop, reload
 *   or removal, and after a kill -9 at the next start.
 * - Episodes toward target: a few bounded steps from a deferred source (one write each: v1
 *   lowers memory.limit_in_bytes below the throttle to make the kernel reclaim, then puts the
 *   throttle back at once; v2 writes memory.reclaim), so that anonymous memory finds room
 *   between target and the throttle.
 *
 * Wake-ups are events: v1 a usage threshold at high, one at the backstop (halfway to the limit,
 * just above the throttle: it fires when there is none) and memory.pressure_level (eventfds through
 * cgroup.event_control); v2 a PSI trigger on memory.pressure and inotify on memory.events (whose
 * "high" count the throttle makes change at high); both inotify on the cap's file, which systemd
 * rewrites on daemon-reload and set-property (the throttle is lowered again at once). A slow timer (interval) is the safety net
 * and retries a missing cgroup. Before the first write to the cap its original is recorded
 * durably under state-dir/reclaim/ (target-record.c), so a crash never leaves it lowered:
 * target_record_restore_leftovers() puts it back at start. */

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "macro.h"
#include "memcg.h"
#include "metrics.h"
#include "plan.h"

struct reclaim_target_settings {
        char *name; /* first: set by config_parse_instances() */
        char *cgroup;
        struct reclaim_level high;
        struct reclaim_level target;
        uint64_t min_file;
        uint64_t step;
        usec_t interval;
        char *pressure_level; /* v1 memory.pressure_level level */
        char *psi;            /* v2 PSI trigger */
};

enum target_state {
        TARGET_MISSING,
        TARGET_OK,
        TARGET_RECLAIMING,
        TARGET_UNREACHABLE,
        TARGET_UNLIMITED,
        TARGET_ERROR,
        _TARGET_STATE_MAX,
        _TARGET_STATE_INVALID = -EINVAL,
};

enum wake_source {
        WAKE_THRESHOLD, /* v1 usage threshold at high */
        WAKE_BACKSTOP,  /* v1 usage threshold halfway between high and the limit (no throttle) */
        WAKE_PRESSURE,  /* v1 memory.pressure_level */
        WAKE_PSI,       /* v2 memory.pressure trigger */
        WAKE_EVENTS,    /* v2 memory.events changed */
        WAKE_CAP,       /* someone else wrote the cap (systemd re-applying its unit, an operator) */
        WAKE_TIMER,     /* the safety net */
        WAKE_SETTLE,    /* shortly after an episode that ended short of its goal */
        WAKE_START,     /* attaching */
        _WAKE_SOURCE_MAX,
};

struct reclaim_metrics {
        struct metric_family *limit, *usage, *file, *anon, *state;                /* gauges */
        struct metric_family *reclaims, *bytes, *steps, *unreachable, *wakeups;  /* counters */
        struct metric_family *step_errors, *lowered_hits, *systemd_failures;
        struct metric_family *reaction, *step_seconds;                           /* histograms */
};

/* What every target shares: the loop, the metrics, where originals are recorded. */
struct pod_events;

struct reclaim_ctx {
        sd_event *event;
        char *record_dir; /* state-dir/reclaim */
        struct unit_bus *bus; /* to systemd, made at first need (unit-cap.c) */
        struct reclaim_metrics metrics;
        /* Called after a target's state changed (the module sums them up). */
        void (*state_changed)(void *userdata);
        struct pod_events *pod_events; /* a pod's episode that ends unreachable is announced here */
        /* The name of the section that watches this cgroup already, or NULL (pods only). */
        const char *(*cgroup_taken)(void *userdata, const char *path);
        void *userdata;
};

struct reclaim_target;

/* settings are copied. pod_uid non-NULL: the cgroup is found by pod_cgroup_id (the uid if
 * NULL; a static pod's config hash: the kubelet names its cgroup by that) and settings->cgroup
 * is unused; pod names the pod for logs ("namespace/name"). */
int target_new(struct reclaim_ctx *ctx, const struct reclaim_target_settings *settings,
               const char *pod_uid, const char *pod_cgroup_id, const char *pod, struct reclaim_target **ret);
/* Restores the original cap (ending the throttle), forgets the record, closes every source. */
struct reclaim_target *target_free(struct reclaim_target *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct reclaim_target *, target_free);

int target_start(struct reclaim_target *t);
/* Applies new settings (same name); re-arms everything. */
int target_update(struct reclaim_target *t, const struct reclaim_target_settings *settings);

const char *target_name(const struct reclaim_target *t);
/* The cgroup path in use (NULL for a pod whose cgroup was not found yet). */
const char *target_cgroup(const struct reclaim_target *t);
/* Our lowered cap may still be in force on the cgroup (a restore failed): the target cannot
 * move to another cgroup until it is put back. */
bool target_restore_pending(const struct reclaim_target *t);
const char *target_pod_uid(const struct reclaim_target *t);
const char *target_pod_cgroup_id(const struct reclaim_target *t);
const struct reclaim_target_settings *target_settings(const struct reclaim_target *t);
enum target_state target_state(const struct reclaim_target *t);
cJSON *target_to_json(struct reclaim_target *t);
/* Refreshes the gauges of this target (collector). */
void target_collect(struct reclaim_target *t);

/* At start: puts back every original cap recorded under record_dir (left lowered by a crash:
 * the throttle, or a step's value) and removes the records. Returns how many were restored;
 * logs each. STATE_VERSION_ERR_NEWER (logged; that record and the ones after it left alone)
 * for a record a newer release wrote. */
int target_record_restore_leftovers(struct reclaim_ctx *ctx);

/* target-settings.c */
int target_settings_copy(const struct reclaim_target_settings *s, struct reclaim_target_settings *ret);
void target_settings_done(struct reclaim_target_settings *s);
bool target_settings_equal(const struct reclaim_target_settings *a, const struct reclaim_target_settings *b);

const char *target_state_to_string(enum target_state s);
