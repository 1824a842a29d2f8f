/* SPDX-License-Identifier: MIT */
#pragma once

/* configsync's shared structures: the module (struct configsync) and one struct bundle per
 * [config.NAME]. configsync.c: config, module contract, pod gate, metrics, and what the module
 * announces about its bundles (configsync_add_observer()). bundle.c: one bundle's state
 * machine, triggers (interval, zk-version-node, refresh, SIGHUP), last known good and
 * on-change; bundle-state.c: its state file. configsync-api.c: /v1/configs, a view that
 * observes the bundles. fetch.c: one sync's requests; stage.c: its file-system work, run off
 * the loop by agent/lib/offload.c; manifest.c: the manifest and its limits, signature.c its signature;
 * runner.c: the on-change command. */

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <systemd/sd-event.h>

#include "backoff.h"
#include "fetch.h"
#include "log.h"
#include "metrics.h"
#include "module.h"
#include "observer-list.h"
#include "pod-events.h"
#include "runner.h"
#include "zk-trigger.h"

#define CONFIGSYNC_MODULE "configsync"
#define CONFIGSYNC_ANNOTATION "pinion.io/configs"
#define CONFIGSYNC_GATE "configs"

struct bundle_settings {
        char *name; /* first: set by config_parse_instances() */
        char *url;
        char *ca_file;
        char *public_key;
        char *dest;
        usec_t interval;
        char *zk_version_node;
        usec_t splay;
        char *on_change;
        usec_t on_change_timeout;
        usec_t quiescence;
        unsigned keep_versions;
        usec_t timeout;
        unsigned parallel;
        uint64_t max_size;
        unsigned max_depth;       /* struct manifest_limits */
        unsigned max_directories;
        unsigned max_entries;
        usec_t backoff_initial;
        usec_t backoff_max;
        char *group;         /* owner group of the published tree (name or number), group-readable */
        bool world_readable; /* other host users may read it */
};

struct configsync_settings {
        struct bundle_settings **bundles;
        size_t n_bundles;
        /* Resolved at parse time (validation): index-aligned with bundles. */
        EVP_PKEY **keys;
        char ***argvs;
        gid_t *gids; /* group=, (gid_t) -1 without */
};

struct configsync_metrics {
        struct metric_family *fetches;       /* {config,result} */
        struct metric_family *bytes;         /* {config} */
        struct metric_family *not_modified;  /* {config} */
        struct metric_family *verify_fail;   /* {config,kind} */
        struct metric_family *version;       /* {config,version} = 1 */
        struct metric_family *published;     /* {config} timestamp */
        struct metric_family *age;           /* {config} seconds */
        struct metric_family *present;       /* {config} 0/1 */
        struct metric_family *on_change;     /* {config,result} */
};

enum bundle_state {
        BUNDLE_PENDING,  /* not tried yet since start */
        BUNDLE_FETCHING,
        BUNDLE_SYNCED,   /* the last sync succeeded */
        BUNDLE_FAILING,  /* the last sync failed: the last known good (if any) stays; retrying */
        _BUNDLE_STATE_MAX,
        _BUNDLE_STATE_INVALID = -EINVAL,
};

struct bundle {
        struct configsync *cs;
        char *name;
        struct bundle_settings *settings; /* borrowed from cs->settings */
        EVP_PKEY *public_key;             /* borrowed from cs->settings */
        char **on_change_argv;            /* borrowed from cs->settings */
        struct publish_modes modes;       /* from group= and world-readable= */

        enum bundle_state state;
        bool present;          /* dest/..data points at a version */
        bool verified;         /* that version was checked under the current url/ca-file/public-key */
        bool attempted;        /* a first sync finished (well or not) */
        char *version;         /* the manifest's version, NULL if unknown (tree from before a restart without state) */
        char *version_dir;     /* "..2026_..." */
        usec_t published;      /* CLOCK_REALTIME when the version was published (or found at start) */
        char *etag;
        bool have_sha;
        uint8_t manifest_sha256[32];
        struct manifest *manifest;
        bool have_serial;      /* the published manifest's serial (kept while url stays) */
        uint64_t serial;
        size_t n_files;
        uint64_t size;

        struct fetch *fetch;
        bool again;            /* a refresh arrived during a fetch */
        sd_event_source *timer;
        usec_t next_attempt;   /* CLOCK_REALTIME, 0 if none */
        struct backoff backoff;

        char *last_error;
        const char *last_error_kind;
        usec_t last_error_time, last_attempt, last_success, last_change;
        unsigned n_fetches, n_failures, n_changes, n_not_modified;
        uint64_t bytes;

        struct runner *runner;
        bool runner_stale;     /* a reload changed on-change during a run: replace it when it ends */
        bool have_run;
        struct runner_result last_run;

        struct zk_trigger *zk; /* zk-version-node, while zkreg publishes its session */
        unsigned n_zk_triggers;
};

/* What the module announces. */
enum configsync_event {
        /* About one bundle, b: */
        CONFIGSYNC_EVENT_BUNDLE_CHANGED, /* a sync ended, or what is published in dest changed (b->present) */
        CONFIGSYNC_EVENT_BUNDLE_REMOVED, /* a reload removed its [config.NAME]; b goes (below) */
        CONFIGSYNC_EVENT_BUNDLE_STOPPED, /* the module stops, could not start or is freed; b goes */
        /* About the module, b NULL: it stopped (or is freed) and every bundle went before. What
         * serves a running module (its API) lets go of what it holds. */
        CONFIGSYNC_EVENT_STOPPED,
};

/* b is valid during the call; one that goes is no longer among cs->bundles and is freed after
 * it. An observer may add and remove observers (itself too) from inside the call, one added
 * there hears only later events, a removed one is not called again; it must not change the bundles or free the module. */
typedef void (*configsync_observer_fn)(struct configsync *cs, enum configsync_event event, struct bundle *b,
                                       void *userdata);

struct configsync_api;

struct configsync {
        struct module_instance *mi;
        struct configsync_settings *settings;
        struct bundle **bundles;
        size_t n_bundles;
        struct configsync_metrics metrics;
        char *state_dir; /* <state-dir>/configsync */
        struct observer_list observers; /* configsync_add_observer() */
        struct configsync_api *api; /* configsync-api.c's, while it serves; NULL: not serving */
        struct metrics_registration *metrics_reg; /* metrics above and the collector */
        bool started, stopping, gate_added, observing_pods;
};

const char *bundle_state_to_string(enum bundle_state s);

/* configsync.c: the "configs" gate's answer for p (1 open, 0 closed with *ret_reason). */
struct pod;
int configsync_gate_check(struct configsync *cs, const struct pod *p, char **ret_reason);
/* Announces a pod event (pod-events.h: POD_EVENT_CONFIG_*) to every pod in the store whose
 * pinion.io/configs declares b; nothing is looked at while no one observes pod events. */
void configsync_announce_pods(struct configsync *cs, const struct bundle *b, enum pod_event_type type,
                              const char *reason, const char *action, const char *format, ...) _printf_(6, 7);
/* The bundle of [config.NAME], or NULL. */
struct bundle *configsync_find(struct configsync *cs, const char *name);
/* The configs pod p declares (pinion.io/configs, split on commas and blanks), the one reading
 * the gate, the pods' events and the API share; *ret_names is NULL when it declares none. */
int configsync_pod_configs(const struct pod *p, char ***ret_names);
/* A bundle's sync ended or its published tree changed: the module's state, the observers
 * (CONFIGSYNC_EVENT_BUNDLE_CHANGED) and, if presence_changed, the pod gate hear of it. */
void configsync_bundle_changed(struct configsync *cs, struct bundle *b, bool presence_changed);
/* Subscribes fn to every bundle's events; -EEXIST if the same fn/userdata pair already is. */
int configsync_add_observer(struct configsync *cs, configsync_observer_fn fn, void *userdata);
void configsync_remove_observer(struct configsync *cs, configsync_observer_fn fn, void *userdata);

/* bundle.c */
int bundle_new(struct configsync *cs, size_t index, struct bundle **ret);
struct bundle *bundle_free(struct bundle *b);
int bundle_start(struct bundle *b);
/* Takes new settings (same name). Drops the cached manifest/ETag when what it depends on
 * (url, dest, ca-file, public-key) changed, recreates the on-change runner if its settings did. */
int bundle_update(struct bundle *b, size_t index);
/* Fetch as soon as possible (API refresh, SIGHUP); a fetch in progress runs again after. */
void bundle_refresh(struct bundle *b, const char *why);
cJSON *bundle_to_json(const struct bundle *b);

#define log_bundle_full_errno(b, level, error, fmt, ...)                                            \
        log_ctx_full_errno((&(const struct log_ctx) { .module = CONFIGSYNC_MODULE, .config = (b)->name }), level, \
                           error, "config %s: " fmt, (b)->name, ##__VA_ARGS__)
#define log_bundle_debug(b, ...) (void) log_bundle_full_errno(b, LOG_DEBUG, 0, __VA_ARGS__)
#define log_bundle_info(b, ...) (void) log_bundle_full_errno(b, LOG_INFO, 0, __VA_ARGS__)
#define log_bundle_warning(b, ...) (void) log_bundle_full_errno(b, LOG_WARNING, 0, __VA_ARGS__)
#define log_bundle_error(b, ...) (void) log_bundle_full_errno(b, LOG_ERR, 0, __VA_ARGS__)
#define log_bundle_warning_errno(b, e, ...) log_bundle_full_errno(b, LOG_WARNING, e, __VA_ARGS__)

/* bundle-state.c: the state file. Saving writes (and fsyncs) it; loading adopts it only if it
 * describes the tree ..data points at (the serial: whenever the url is the same). */
int bundle_state_save(struct bundle *b, const char *manifest_text, size_t manifest_size);
void bundle_state_load(struct bundle *b);
/* STATE_VERSION_ERR_NEWER (logged, with the path and the version) if a newer release wrote the
 * state file: the bundle must not start (a sync would overwrite it); 0 otherwise. */
int bundle_state_check_version(struct bundle *b);

/* configsync-api.c: serves /v1/configs, observing the module for its long-polls (in cs->api),
 * until the module announces CONFIGSYNC_EVENT_STOPPED. Idempotent. */
int configsync_api_register(struct module_instance *mi);
