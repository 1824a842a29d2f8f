/* SPDX-License-Identifier: MIT */
#pragma once

/* zkreg's shared structure: the module (struct zkreg). zkreg.c: config, module contract, the
 * session and its predecessor's, metrics. zkreg-api.c: /v1/registrations. */

#include <stdbool.h>
#include <stdint.h>

#include <systemd/sd-event.h>

#include "api.h"
#include "drain-state.h"
#include "facts.h"
#include "metrics.h"
#include "module.h"
#include "registry.h"
#include "zk-session.h"
#include "zk-watches.h"

struct zkreg_settings {
        char **servers;
        usec_t session_timeout;
        char *chroot;
        double write_qps;
        unsigned max_ops_per_write;
        usec_t drain_delay;
        usec_t flap_damping;
        char **allowed_prefixes;
};

struct zkreg {
        struct module_instance *mi;
        struct zkreg_settings *settings;
        struct zk_session *session;
        struct zk_watches *watches;
        struct registry *registry;
        struct zookeeper_fact fact;
        bool published;
        struct api_routes *routes;
        struct metrics_registration *metrics_reg; /* the session families and the collector */
        bool stopping;
        sd_event_source *sync_timer; /* READY=1 does not wait for a ZooKeeper that is away */
        char *state_file;            /* <state-dir>/zkreg/session: our session, for a successor */
        struct zk_session *reaper;   /* ends the session a killed predecessor left behind */
        int64_t reap_id;
        sd_event_source *reap_timer, *reap_done;
        struct metric_family *m_session_state, *m_session_transitions;
        /* The operator's drain: <state-dir>/zkreg/drain, read at start, written before the API
         * answers. drain_error: why the file could not be read (we start drained then). */
        char *drain_file;
        struct drain_state drain;
        char *drain_error;
        struct metric_family *m_drained, *m_drain_errors;
};

/* Drain or undrain: writes the drain file first; on failure returns a negative errno with
 * *ret_error and changes nothing. */
int zkreg_set_drained(struct zkreg *z, bool drained, char **ret_error);

/* Adds /v1/registrations (once; zkreg's stop frees them with z->routes when its drain ends). */
int zkreg_api_register(struct module_instance *mi);
