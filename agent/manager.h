/* SPDX-License-Identifier: MIT */
#pragma once

/* struct manager: everything the daemon owns hangs off it. The sd-event loop, the loaded config
 * and the [agent] settings, the pod store, its pods-dir source and the pod gates, the local API,
 * the metrics registry, the shared HTTP client, and the module instances. One thread, one loop. */

#include <errno.h>
#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "agent-settings.h"
#include "api.h"
#include "config.h"
#include "fd-limit.h"
#include "http.h"
#include "log.h"
#include "macro.h"
#include "metrics.h"
#include "module.h"
#include "pod-events.h"
#include "pod-gates.h"
#include "pod-store.h"
#include "pod-watch.h"
#include "podsdir.h"

/* The directories ./configure was given (--sysconfdir, --localstatedir, --runstatedir): the
 * defaults are where `make install` puts the files (the .deb: /etc, /var, /run). */
#define PINION_DEFAULT_CONFIG SYSCONFDIR "/pinion/pinion.conf"
#define PINION_DEFAULT_DROPIN_DIR SYSCONFDIR "/pinion/conf.d"

struct manager_options {
        const char *config_file; /* NULL: PINION_DEFAULT_CONFIG */
        const char *dropin_dir;  /* NULL: "<dir of config_file>/conf.d" */
};

struct manager_fact {
        char *name;
        void *value;
};

struct manager {
        sd_event *event;
        struct manager_options options; /* strings owned (copies) */

        struct config *config;
        struct agent_settings settings;
        gid_t socket_gid;
        char *own_pod_uid; /* the pod piniond runs in (a DaemonSet), NULL: none (peer-pod.h) */

        struct metrics *metrics;
        struct pod_store *pods;
        struct pod_gates *pod_gates; /* readiness for registration beyond the Ready condition */
        struct pod_events *pod_events; /* what modules did for a pod, for Kubernetes Events */
        struct podsdir *podsdir;
        struct pod_watch_hub *pod_watch; /* /v1/pods?watch=1 streams */
        struct api *api;
        /* Connections at once per server, sized at start to the open-file limit (fd-limit.h):
         * the local API's here, the gRPC servers' in the modules that create them. */
        struct connection_caps connection_caps;
        struct metrics_listener *metrics_listener; /* [agent] metrics-listen, NULL: none */
        struct http_client *http; /* created on first use: libcurl and OpenSSL cost memory */

        struct module_instance *modules; /* in start order */
        unsigned n_modules;

        struct manager_fact *facts;
        size_t n_facts;

        struct metric_family *metric_reloads;   /* pinion_config_reloads_total{result} */
        struct metric_family *metric_pods_dir_errors;
        struct metric_family *metric_released_pages;
        struct metric_family *metric_uptime, *metric_module_state, *metric_pods;
        sd_event_source *watchdog_timer;
        sd_event_source *heap_trim_timer;
        struct memory_guard *memory_guard; /* self-memory.h */
        sd_event_source *release_pages_timer; /* the second start-up page release (self-memory.h) */
        usec_t watchdog_usec;
        char **pods_dir_errors_logged; /* the problems already logged, to log each once */
        char *last_reload_error;
        bool started; /* manager_start() finished: readiness may be judged */

        usec_t start_realtime;
        usec_t start_monotonic;
        bool ready_sent;
        bool stopping;
        unsigned n_stopping; /* modules still draining */
        sd_event_source *stop_timer;
        sd_event_source *api_drain_timer; /* the API finishing what it accepted, then exit */
        char *last_status; /* last STATUS= sent, to avoid repeats */
        sd_event_source *status_timer; /* a STATUS= update due (manager_update_status_later()) */
        unsigned n_reloads, n_reload_failures;
        int exit_code;
        uint64_t caps_kept;     /* after the drop at start (agent/lib/caps.h bits) */
        uint64_t caps_dropped_set; /* what the drop at start took away (held, but not needed) */
        bool caps_dropped;      /* drop-capabilities took effect */
        bool caps_bounding;     /* the bounding set was lowered too (CAP_SETPCAP was there) */
};

/* Loads and validates the config (every module's init runs on a throwaway instance), then
 * builds the manager. Config problems come back as -EINVAL with *ret_error = "FILE:LINE: reason". */
int manager_new(const struct manager_options *opts, struct manager **ret, char **ret_error);
struct manager *manager_free(struct manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct manager *, manager_free);


/* manager_start() refused to run as configured, e.g. in a socket directory others can write, or
 * on a state file a newer release wrote: restarting cannot fix it (piniond exits 78, as for a
 * bad config). */
#define MANAGER_ERR_UNSAFE (-ENOTRECOVERABLE)

/* Opens the API socket, starts the pod source and every enabled module, arms signals and the
 * watchdog. */
int manager_start(struct manager *m);
/* Runs the loop until stopped; returns the exit code. */
int manager_run(struct manager *m);

/* SIGHUP: re-read the config; on any error log FILE:LINE and keep the old one. */
int manager_reload(struct manager *m);
/* SIGTERM/SIGINT: stop modules in reverse order within stop-timeout, then exit the loop. */
void manager_begin_stop(struct manager *m);

/* The shared HTTP client, created on first use (a node with no HTTP-speaking module never
 * initialises libcurl and its TLS library). */
int manager_http(struct manager *m, struct http_client **ret);

struct module_instance *manager_find_module(struct manager *m, const char *name);

/* Published facts: a module exposes something small (its ZooKeeper handle, the node identity)
 * by name; another finds it with manager_lookup(). The publisher keeps ownership and must
 * unpublish (value NULL) before freeing it. */
int manager_publish(struct manager *m, const char *name, void *value);
void *manager_lookup(struct manager *m, const char *name);
