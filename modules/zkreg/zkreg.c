/* SPDX-License-Identifier: MIT */
/* zkreg: registers ready, healthy pods in ZooKeeper as ServerSet members over one
 * single-threaded ZooKeeper session on the loop (zk-session.c), and publishes that session's
 * node watches to other modules (FACT_ZOOKEEPER, zk-watches.c). The registrations themselves
 * are in registry.c (the set, fed by the pod store) and reg.c (each one's state
 * machine), their decisions in reg-plan.c, their ZooKeeper operations in zk-ops.c,
 * health checks in health.c, the ServerSet format in serverset.c, /v1/registrations in
 * zkreg-api.c. */

#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "facts.h"
#include "fs.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "module.h"
#include "registry.h"
#include "serverset.h"
#include "state-version.h"
#include "write-pacer.h"
#include "zkreg.h"
#include "zk-session.h"
#include "zk-watches.h"

#define MODULE "zkreg"

#define FIELD(f) offsetof(struct zkreg_settings, f)
static const struct config_key zkreg_keys[] = {
        { "servers", config_parse_strv, FIELD(servers), NULL, config_free_strv },
        { "session-timeout", config_parse_duration, FIELD(session_timeout), "16s" },
        { "chroot", config_parse_path, FIELD(chroot), NULL, config_free_string },
        { "write-qps", config_parse_double, FIELD(write_qps), "50" },
        { "max-ops-per-write", config_parse_uint, FIELD(max_ops_per_write), "250" },
        { "drain-delay", config_parse_duration, FIELD(drain_delay), "5s" },
        { "flap-damping", config_parse_duration, FIELD(flap_damping), "1s" },
        { "allowed-prefixes", config_parse_strv, FIELD(allowed_prefixes), NULL, config_free_strv },
        {}
};
#undef FIELD

static int zkreg_parse(struct config *c, struct zkreg_settings **ret, char **ret_error) {
        struct zkreg_settings *s = NULL;
        const char *problem = NULL;
        int r;

        r = config_parse_section_new(c, "zookeeper", zkreg_keys, sizeof(*s), (void **) &s, ret_error);
        if (r < 0)
                return r;
        STRV_FOREACH(server, s->servers)
                if (!strchr(*server, ':') || strchr(*server, '/') || strchr(*server, ','))
                        problem = "servers must be host:port entries (put the chroot in chroot=)";
        if (s->write_qps <= 0 || s->write_qps > 1e6)
                problem = "write-qps must be > 0 and <= 1000000";
        if (s->max_ops_per_write < 1 || s->max_ops_per_write > WRITE_PACER_MAX_OPS_LIMIT)
                problem = "max-ops-per-write must be between 1 and 1000";
        if (s->session_timeout < 2 * USEC_PER_SEC || s->session_timeout > 10 * USEC_PER_MINUTE)
                problem = "session-timeout must be between 2s and 10m";
        if (s->drain_delay > 10 * USEC_PER_MINUTE)
                problem = "drain-delay must be at most 10m";
        if (s->flap_damping > 10 * USEC_PER_MINUTE)
                problem = "flap-damping must be at most 10m";
        STRV_FOREACH(prefix, s->allowed_prefixes)
                if (!serverset_prefix_valid(*prefix))
                        problem = "allowed-prefixes must be absolute ZooKeeper paths (\"/\" or /a/b, "
                                  "optionally with ${namespace}), at most 16 segments deep";
        if (problem) {
                config_object_free(zkreg_keys, s);
                return config_section_error(c, "zookeeper", ret_error, "%s", problem);
        }
        *ret = s;
        return 0;
}

static bool settings_same_session(const struct zkreg_settings *a, const struct zkreg_settings *b) {
        size_t n = 0;
        STRV_FOREACH(x, a->servers)
                n++;
        STRV_FOREACH(x, b->servers)
                n--;
        if (n != 0 || !streq_ptr(a->chroot, b->chroot) || a->session_timeout != b->session_timeout)
                return false;
        for (size_t i = 0; a->servers && a->servers[i]; i++)
                if (!streq(a->servers[i], b->servers[i]))
                        return false;
        return true;
}

static struct zkreg *zkreg_free_data(struct zkreg *z) {
        if (!z)
                return NULL;
        z->sync_timer = sd_event_source_disable_unref(z->sync_timer);
        z->reap_timer = sd_event_source_disable_unref(z->reap_timer);
        z->reap_done = sd_event_source_disable_unref(z->reap_done);
        z->reaper = zk_session_free(z->reaper);
        free(z->state_file);
        free(z->drain_file);
        free(z->drain_error);
        api_routes_free(z->routes);
        metrics_registration_free(z->metrics_reg);
        z->registry = registry_free(z->registry);
        z->session = zk_session_free(z->session); /* closes the handle: no watcher fires after */
        z->watches = zk_watches_free(z->watches);
        config_object_free(zkreg_keys, z->settings);
        free(z);
        return NULL;
}

static int zkreg_init(struct module_instance *mi, struct config *c, char **ret_error) {
        struct zkreg *z = calloc(1, sizeof(*z));
        if (!z)
                return -ENOMEM;
        int r = zkreg_parse(c, &z->settings, ret_error);
        if (r < 0) {
                free(z);
                return r;
        }
        z->mi = mi;
        mi->data = z;
        return 0;
}

/* Module state from the session: RUNNING while connected, DEGRADED with the reason otherwise. */
static void zkreg_update_state(struct zkreg *z) {
        struct module_instance *mi = z->mi;
        enum zk_session_state st = zk_session_state(z->session);

        if (z->stopping)
                return;
        switch (st) {
        case ZK_SESSION_CONNECTED:
                module_set_state(mi, MODULE_RUNNING, NULL);
                module_set_synced(mi);
                break;
        case ZK_SESSION_CONNECTING:
                if (zk_session_generation(z->session) == 0 && mi->state == MODULE_STARTING &&
                    !zk_session_last_error(z->session))
                        break; /* first connect: give it the sync grace period */
                __attribute__((fallthrough));
        case ZK_SESSION_SUSPENDED:
        case ZK_SESSION_EXPIRED:
        case ZK_SESSION_CLOSED:
                module_set_state(mi, MODULE_DEGRADED, "ZooKeeper session %s%s%s (servers %s)",
                                 zk_session_state_to_string(st), zk_session_last_error(z->session) ? ": " : "",
                                 strempty(zk_session_last_error(z->session)), z->settings->servers[0]);
                break;
        case _ZK_SESSION_STATE_MAX:
        case _ZK_SESSION_STATE_INVALID:
                break;
        }
}

static void on_session_state(struct zk_session *s, enum zk_session_state old, enum zk_session_state new,
                             void *userdata) {
        struct zkreg *z = userdata;

        (void) s;
        (void) metric_inc(z->m_session_transitions, zk_session_state_to_string(new));
        for (enum zk_session_state i = 0; i < _ZK_SESSION_STATE_MAX; i++)
                (void) metric_set(z->m_session_state, i == new ? 1 : 0, zk_session_state_to_string(i));
        zk_watches_session_changed(z->watches, new);
        registry_session_changed(z->registry, old, new);
        zkreg_update_state(z);
}

static int on_sync_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct zkreg *z = userdata;

        (void) src;
        (void) usec;
        if (!z->mi->synced) {
                module_set_state(z->mi, MODULE_DEGRADED, "ZooKeeper not reachable yet (servers %s)%s%s",
                                 z->settings->servers[0], zk_session_last_error(z->session) ? ": " : "",
                                 strempty(zk_session_last_error(z->session)));
                module_set_synced(z->mi);
        }
        return 0;
}

static void collect_zkreg(struct metrics *metrics, void *userdata) {
        struct module_instance *mi = userdata;
        struct zkreg *z = mi->data;

        (void) metrics;
        (void) z;
        if (z && z->registry) {
                registry_collect_metrics(z->registry);
                (void) metric_set(z->m_drained, registry_drained(z->registry) ? 1 : 0);
        }
}

static int zkreg_register_metrics(struct zkreg *z) {
        static const char *const state[] = { "state", NULL };
        static const char *const op[] = { "op", NULL };
        const struct metric_def families[] = {
                { METRIC_GAUGE, "pinion_zookeeper_session_state", "1 for the ZooKeeper session's current state (connecting, connected, suspended, expired, closed), else 0.", state, NULL, 0, &z->m_session_state },
                { METRIC_COUNTER, "pinion_zookeeper_session_transitions_total", "ZooKeeper session state transitions by the state entered.", state, NULL, 0, &z->m_session_transitions },
                { METRIC_GAUGE, "pinion_zookeeper_drained",
                  "1 while this node is drained (pinionctl drain; kept across restarts), else 0.", NULL, NULL, 0,
                  &z->m_drained },
                { METRIC_COUNTER, "pinion_zookeeper_drain_file_errors_total",
                  "Failures of the drain file <state-dir>/zkreg/drain by op (load: at start, the node starts "
                  "drained; save: the drain or undrain was refused).", op, NULL, 0, &z->m_drain_errors },
        };
        int r;

        if (z->metrics_reg)
                return 0;
        r = metrics_register(z->mi->manager->metrics, families, ELEMENTSOF(families), collect_zkreg, z->mi,
                             &z->metrics_reg);
        if (r < 0)
                return r;
        for (enum zk_session_state i = 0; i < _ZK_SESSION_STATE_MAX; i++)
                (void) metric_set(z->m_session_state, i == ZK_SESSION_CONNECTING ? 1 : 0, zk_session_state_to_string(i));
        (void) metric_touch(z->m_drain_errors, "load");
        (void) metric_touch(z->m_drain_errors, "save");
        return 0;
}

/* ---- the predecessor's session ----
 * An agent killed with -9 leaves its session (and members) alive until the session timeout; a
 * restarted agent would register next to them. So each agent keeps its session's id and
 * password in <state-dir>/zkreg/session; the next one resumes that session if it still lives
 * and closes it, which deletes the old members at once. */

static int on_reap_done(sd_event_source *src, void *userdata) {
        struct zkreg *z = userdata;
        (void) src;
        z->reap_timer = sd_event_source_disable_unref(z->reap_timer);
        z->reaper = zk_session_free(z->reaper);
        return 0;
}

static void on_reaper_state(struct zk_session *s, enum zk_session_state old, enum zk_session_state new,
                            void *userdata) {
        struct zkreg *z = userdata;

        (void) old;
        if (new == ZK_SESSION_CONNECTED) {
                if (zk_session_id(s) == z->reap_id)
                        log_module_info(MODULE, "Closing session 0x%llx left by the previous agent: its members go now",
                                        (unsigned long long) z->reap_id);
                zk_session_close(s);
        } else if (new == ZK_SESSION_EXPIRED) {
                log_module_debug(MODULE, "The previous agent's session 0x%llx has already expired",
                                 (unsigned long long) z->reap_id);
                (void) sd_event_source_set_enabled(z->reap_done, SD_EVENT_ONESHOT);
        } else if (new == ZK_SESSION_CLOSED)
                (void) sd_event_source_set_enabled(z->reap_done, SD_EVENT_ONESHOT);
}

static int on_reap_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        struct zkreg *z = userdata;
        (void) src;
        (void) usec;
        log_module_debug(MODULE, "Giving up on the previous agent's session 0x%llx (it expires by itself)",
                         (unsigned long long) z->reap_id);
        return on_reap_done(NULL, z);
}

/* A kill during a write of the session file leaves its temp file; nothing else would ever
 * remove it (one more after every such kill). */
static void zkreg_remove_temp_files(const char *state_file) {
        _cleanup_free_ char *dir = NULL;

        if (fs_path_split(state_file, &dir, NULL) >= 0)
                (void) fs_cleanup_temp(dir);
}

/* Returns STATE_VERSION_ERR_NEWER for a session file of a newer release (left as it is: no
 * session is opened, which would overwrite it); 0 otherwise. */
static int zkreg_reap_previous(struct zkreg *z, const char *servers) {
        struct manager *m = z->mi->manager;
        unsigned version = 0;
        clientid_t id;
        int r;

        r = zk_session_load_state(z->state_file, &id, &version);
        if (r == -ENOENT)
                return 0;
        if (r == STATE_VERSION_ERR_NEWER) {
                _cleanup_free_ char *why = state_version_describe(z->state_file, version, ZK_SESSION_STATE_VERSION);
                log_module_error(MODULE, "%s", why ? why : "a newer release's session file");
                return r;
        }
        if (r < 0) {
                log_module_warning_errno(MODULE, r, "Ignoring %s: %m", z->state_file);
                return 0;
        }
        z->reap_id = id.client_id;
        struct zk_session_config cfg = {
                .servers = servers,
                .chroot = z->settings->chroot,
                .session_timeout = z->settings->session_timeout,
                .resume = &id,
                .no_restart = true,
        };
        if (sd_event_add_defer(m->event, &z->reap_done, on_reap_done, z) < 0 ||
            sd_event_add_time_relative(m->event, &z->reap_timer, CLOCK_MONOTONIC, z->settings->session_timeout + 5 * USEC_PER_SEC,
                                       0, on_reap_timeout, z) < 0 ||
            zk_session_new(m->event, &cfg, on_reaper_state, z, &z->reaper) < 0) {
                log_module_warning(MODULE, "Cannot try to close the previous agent's session 0x%llx; its members expire by themselves",
                                   (unsigned long long) z->reap_id);
                z->reap_timer = sd_event_source_disable_unref(z->reap_timer);
                return 0;
        }
        (void) sd_event_source_set_enabled(z->reap_done, SD_EVENT_OFF);
        return 0;
}

static int zkreg_open_session(struct zkreg *z) {
        struct manager *m = z->mi->manager;
        _cleanup_free_ char *servers = NULL;
        size_t len = 0;
        int r;

        STRV_FOREACH(sv, z->settings->servers)
                len += strlen(*sv) + 1;
        servers = calloc(1, len + 1);
        if (!servers)
                return -ENOMEM;
        STRV_FOREACH(sv, z->settings->servers) {
                if (servers[0])
                        strcat(servers, ",");
                strcat(servers, *sv);
        }
        if (!z->state_file && asprintf(&z->state_file, "%s/zkreg/session", m->settings.state_dir) < 0) {
                z->state_file = NULL;
                return -ENOMEM;
        }
        zkreg_remove_temp_files(z->state_file);
        r = zkreg_reap_previous(z, servers);
        if (r < 0)
                return r;
        struct zk_session_config cfg = {
                .servers = servers,
                .chroot = z->settings->chroot,
                .session_timeout = z->settings->session_timeout,
                .state_file = z->state_file,
        };
        r = zk_session_new(m->event, &cfg, on_session_state, z, &z->session);
        if (r < 0)
                return r;
        if (!z->watches) {
                r = zk_watches_new(m->event, z->session, &z->watches);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- the operator's drain (drain-state.h) ---- */

/* Before the first registration. A file of a newer release stops the agent (exit 78, the file
 * untouched), as every state file does. A file we cannot read fails safe: the node starts drained (an
 * operator who drained it must not see it take traffic because the file broke), says why at
 * error level and in /v1/status, and the next drain or undrain writes the file anew. */
static int zkreg_load_drain(struct zkreg *z) {
        _cleanup_free_ char *error = NULL;
        char since[32] = "an unknown time";
        int r;

        if (!z->drain_file && asprintf(&z->drain_file, "%s/zkreg/drain", z->mi->manager->settings.state_dir) < 0) {
                z->drain_file = NULL;
                return -ENOMEM;
        }
        z->drain_error = mfree(z->drain_error);
        r = drain_state_load(z->drain_file, &z->drain, &error);
        if (r == STATE_VERSION_ERR_NEWER) {
                /* A newer release's operator intent: neither guessed nor rewritten (state-version.h). */
                log_module_error(MODULE, "%s", error ? error : z->drain_file);
                return r;
        }
        if (r < 0) {
                z->drain = (struct drain_state) { .drained = true };
                if (asprintf(&z->drain_error, "%s: %s", z->drain_file, error ? error : strerror(-r)) < 0)
                        z->drain_error = NULL;
                (void) metric_inc(z->m_drain_errors, "load");
                log_module_error(MODULE, "Cannot use the drain file %s (%s): starting drained, registering nothing; "
                                 "`pinionctl undrain` (or drain) writes it anew", z->drain_file,
                                 error ? error : strerror(-r));
                return 0;
        }
        if (z->drain.drained) {
                if (z->drain.since)
                        (void) json_format_rfc3339(z->drain.since, since, sizeof(since));
                log_module_info(MODULE, "Drained since %s (%s): registering nothing until `pinionctl undrain`", since,
                                z->drain_file);
        }
        return 0;
}

int zkreg_set_drained(struct zkreg *z, bool drained, char **ret_error) {
        /* Draining a drained node keeps its since: the operator's intent dates from the first. */
        struct drain_state s = {
                .drained = drained,
                .since = z->drain.drained == drained && z->drain.since && !z->drain_error ? z->drain.since
                                                                                      : now_usec(CLOCK_REALTIME),
        };
        int r = drain_state_save(z->drain_file, &s);
        if (r < 0) {
                (void) metric_inc(z->m_drain_errors, "save");
                log_module_warning_errno(MODULE, r, "Cannot save the %s to %s, so it is refused: %m",
                                         drained ? "drain" : "undrain", z->drain_file);
                if (ret_error && asprintf(ret_error, "cannot save the %s to %s: %s; nothing changed",
                                          drained ? "drain" : "undrain", z->drain_file, strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        z->drain = s;
        z->drain_error = mfree(z->drain_error);
        return 0;
}

static struct registry_config registry_config_from(const struct zkreg_settings *s) {
        return (struct registry_config) {
                .write_qps = s->write_qps,
                .max_ops_per_write = s->max_ops_per_write,
                .drain_delay = s->drain_delay,
                .flap_damping = s->flap_damping,
                .allowed_prefixes = s->allowed_prefixes,
        };
}

static int zkreg_start(struct module_instance *mi) {
        struct zkreg *z = mi->data;
        struct manager *m = mi->manager;
        int r;

        if (!z->settings->servers) {
                module_set_state(mi, MODULE_DISABLED, "no [zookeeper] servers configured");
                module_set_synced(mi);
                return 0;
        }
        r = zkreg_register_metrics(z);
        if (r < 0)
                return r;
        /* The drain first: a newer release's drain file stops the start before the session
         * file is touched. */
        r = zkreg_load_drain(z);
        if (r < 0)
                return r;
        r = zkreg_open_session(z);
        if (r < 0)
                return r;

        struct registry_config rc = registry_config_from(z->settings);
        rc.drained = z->drain.drained;
        r = registry_new(m, z->session, &rc, &z->registry);
        if (r < 0)
                return r;
        r = zkreg_api_register(mi);
        if (r < 0)
                return r;

        z->fact = (struct zookeeper_fact) {
                .zk = z->watches,
                .watch_node = zk_watches_watch_node,
                .unwatch_node = zk_watches_unwatch_node,
        };
        r = manager_publish(m, FACT_ZOOKEEPER, &z->fact);
        if (r < 0)
                return r;
        z->published = true;

        usec_t grace = z->settings->session_timeout < 5 * USEC_PER_SEC ? z->settings->session_timeout : 5 * USEC_PER_SEC;
        r = sd_event_add_time_relative(m->event, &z->sync_timer, CLOCK_MONOTONIC, grace, 0, on_sync_timer, z);
        if (r < 0)
                return r;
        module_set_state(mi, MODULE_STARTING, NULL);
        return 0;
}

static int zkreg_reload(struct module_instance *mi, struct config *c, char **ret_error) {
        struct zkreg *z = mi->data;
        struct zkreg_settings *s = NULL;
        int r = zkreg_parse(c, &s, ret_error);
        if (r < 0)
                return r;

        if (!z->session) {
                /* Was disabled: start now if configured. */
                config_object_free(zkreg_keys, z->settings);
                z->settings = s;
                if (!s->servers)
                        return 0;
                r = zkreg_start(mi);
                if (r < 0)
                        module_set_state(mi, MODULE_FAILED, "cannot start: %s", strerror(-r));
                return 0;
        }
        if (!s->servers || !settings_same_session(s, z->settings)) {
                config_object_free(zkreg_keys, s);
                if (ret_error)
                        *ret_error = strdup("[zookeeper] servers, chroot and session-timeout take effect at restart "
                                            "(a new session would drop every registration at once)");
                return -EBUSY;
        }
        struct registry_config rc = registry_config_from(s);
        int k = registry_set_config(z->registry, &rc);
        if (k < 0) {
                config_object_free(zkreg_keys, s);
                return k;
        }
        config_object_free(zkreg_keys, z->settings);
        z->settings = s;
        return 0;
}

/* What the module registered with the core goes once it has stopped: /v1/registrations and the
 * session's metrics show the drain while it lasts. */
static void zkreg_stopped(struct zkreg *z) {
        z->routes = api_routes_free(z->routes);
        z->metrics_reg = metrics_registration_free(z->metrics_reg);
}

static void on_registry_drained(struct registry *r, void *userdata) {
        struct zkreg *z = userdata;

        (void) r;
        /* Every node of ours is deleted: close the session, so nothing of ours lingers. */
        zk_session_close(z->session);
        zkreg_stopped(z);
        module_stopped(z->mi);
}

static int zkreg_stop(struct module_instance *mi) {
        struct zkreg *z = mi->data;

        if (!z->session)
                return 0;
        z->stopping = true;
        z->sync_timer = sd_event_source_disable_unref(z->sync_timer);
        if (z->published) {
                (void) manager_publish(mi->manager, FACT_ZOOKEEPER, NULL);
                z->published = false;
                /* A watcher treats a vanished fact as having taken its watches (facts.h). */
                zk_watches_cancel_all(z->watches);
        }
        if (zk_session_state(z->session) != ZK_SESSION_CONNECTED) {
                /* Nothing can be deleted now; closing the handle ends what it can. */
                registry_abandon(z->registry);
                zk_session_close(z->session);
                zkreg_stopped(z);
                return 0;
        }
        if (registry_shutdown(z->registry, on_registry_drained, z) == 0) {
                zk_session_close(z->session);
                zkreg_stopped(z);
                return 0;
        }
        return 1;
}

static int zkreg_status(struct module_instance *mi, cJSON *obj) {
        struct zkreg *z = mi->data;
        cJSON *servers = cJSON_AddArrayToObject(obj, "servers");
        if (!servers)
                return -ENOMEM;
        STRV_FOREACH(server, z->settings->servers)
                if (!cJSON_AddItemToArray(servers, cJSON_CreateString(*server)))
                        return -ENOMEM;
        if (!z->session)
                return 0;
        char sid[32];
        snprintf(sid, sizeof(sid), "0x%llx", (unsigned long long) zk_session_id(z->session));
        if (!cJSON_AddStringToObject(obj, "session", zk_session_state_to_string(zk_session_state(z->session))) ||
            !cJSON_AddStringToObject(obj, "session_id", sid) ||
            !cJSON_AddNumberToObject(obj, "sessions_established", zk_session_generation(z->session)) ||
            !cJSON_AddNumberToObject(obj, "watched_nodes", (double) zk_watches_count(z->watches)))
                return -ENOMEM;
        if (zk_session_last_error(z->session) &&
            !cJSON_AddStringToObject(obj, "session_error", zk_session_last_error(z->session)))
                return -ENOMEM;
        if (!json_add_time(obj, "drained_since", registry_drained(z->registry) ? z->drain.since : 0) ||
            (z->drain_error && !cJSON_AddStringToObject(obj, "drain_error", z->drain_error)))
                return -ENOMEM;
        return registry_status(z->registry, obj);
}

static void zkreg_free(struct module_instance *mi) {
        struct zkreg *z = mi->data;

        if (z && z->published) {
                (void) manager_publish(mi->manager, FACT_ZOOKEEPER, NULL);
                z->published = false;
                zk_watches_cancel_all(z->watches);
        }
        mi->data = zkreg_free_data(z);
}

/* The routes zkreg-api.c registers, for the core to answer while they are not served. */
static const struct module_route zkreg_routes[] = {
        { "GET", "/v1/registrations", MODULE_ROUTE_OWN },
        { "POST", "/v1/registrations/drain", MODULE_ROUTE_PRIVILEGED },
        { "POST", "/v1/registrations/undrain", MODULE_ROUTE_PRIVILEGED },
        {},
};

static bool zkreg_configured(const struct module_instance *mi, const struct config *c) {
        const struct zkreg *z = mi->data;
        return z->settings->servers != NULL;
}

const struct module zkreg_module = {
        .name = "zkreg",
        .routes = zkreg_routes,
        .init = zkreg_init,
        .configured = zkreg_configured,
        .start = zkreg_start,
        .reload = zkreg_reload,
        .stop = zkreg_stop,
        .status = zkreg_status,
        .free = zkreg_free,
};
