/* SPDX-License-Identifier: MIT */
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

#include <systemd/sd-daemon.h>

#include "caller.h"
#include "fs.h"
#include "log.h"
#include "manager-api.h"
#include "manager-caps.h"
#include "metrics-listen.h"
#include "manager-config.h"
#include "manager.h"
#include "peer-pod.h"
#include "self-memory.h"
#include "state-version.h"
#include "socket-trust.h"

/* ---- lifecycle notifications (sd_notify is a no-op without NOTIFY_SOCKET) ---- */

static void manager_update_status(struct manager *m) {
        unsigned counts[_MODULE_STATE_MAX] = {};
        _cleanup_free_ char *status = NULL;

        for (unsigned i = 0; i < m->n_modules; i++)
                counts[m->modules[i].state]++;
        if (asprintf(&status, "%s; modules: %u running, %u degraded, %u failed, %u disabled; %zu pods",
                     m->stopping ? "stopping" : m->ready_sent ? "ready" : "starting",
                     counts[MODULE_RUNNING], counts[MODULE_DEGRADED], counts[MODULE_FAILED],
                     counts[MODULE_DISABLED], pod_store_size(m->pods)) < 0)
                return;
        if (streq_ptr(status, m->last_status))
                return;
        (void) sd_notifyf(false, "STATUS=%s", status);
        free(m->last_status);
        m->last_status = TAKE_PTR(status);
}

static int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        manager_update_status(userdata);
        return 0;
}

/* The pod count changes with every pod file: 1,000 files added at once were 1,000 messages to
 * systemd. STATUS= is for a person reading `systemctl status`: one message at most every
 * STATUS_COALESCE carries the count. */
#define STATUS_COALESCE (100 * USEC_PER_MSEC)
static void manager_update_status_later(struct manager *m) {
        int r;

        if (!m->status_timer) {
                r = sd_event_add_time_relative(m->event, &m->status_timer, CLOCK_MONOTONIC, STATUS_COALESCE, 0,
                                               on_status_timer, m);
                if (r >= 0)
                        (void) sd_event_source_set_description(m->status_timer, "status");
        } else if (sd_event_source_get_enabled(m->status_timer, NULL) > 0)
                return; /* already due */
        else
                r = sd_event_source_set_time_relative(m->status_timer, STATUS_COALESCE);
        if (r >= 0)
                r = sd_event_source_set_enabled(m->status_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                manager_update_status(m);
}

/* READY=1 once the config is loaded, the API listens, and every module finished its first
 * sync (or said why it could not). Logs what it still waits for. */
static void manager_check_ready(struct manager *m) {
        if (m->ready_sent || !m->started || m->stopping)
                return;
        for (unsigned i = 0; i < m->n_modules; i++)
                if (!m->modules[i].synced) {
                        log_debug("Not ready yet: module %s has not finished its first sync",
                                  m->modules[i].module->name);
                        return;
                }
        m->ready_sent = true;
        (void) sd_notify(false, "READY=1");
        log_info("Ready: serving on %s, %zu pods known", m->settings.socket, pod_store_size(m->pods));
        if (m->settings.release_startup_pages &&
            self_memory_release_startup_pages(m->event, m->metric_released_pages, &m->release_pages_timer) < 0)
                log_info("Start-up pages: no second pass once settled (cannot add a timer)");
}

static void manager_module_changed(struct manager *m) {
        manager_check_ready(m);
        manager_update_status(m);
}

/* ---- published facts ---- */

int manager_publish(struct manager *m, const char *name, void *value) {
        for (size_t i = 0; i < m->n_facts; i++)
                if (streq(m->facts[i].name, name)) {
                        m->facts[i].value = value;
                        return 0;
                }
        if (!value)
                return 0;
        struct manager_fact *grown = realloc(m->facts, (m->n_facts + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        m->facts = grown;
        m->facts[m->n_facts].name = strdup(name);
        if (!m->facts[m->n_facts].name)
                return -ENOMEM;
        m->facts[m->n_facts++].value = value;
        return 0;
}

void *manager_lookup(struct manager *m, const char *name) {
        for (size_t i = 0; i < m->n_facts; i++)
                if (streq(m->facts[i].name, name))
                        return m->facts[i].value;
        return NULL;
}

int manager_http(struct manager *m, struct http_client **ret) {
        if (!m->http) {
                int r = http_client_new(m->event, &m->http);
                if (r < 0)
                        return r;
        }
        *ret = m->http;
        return 0;
}

struct module_instance *manager_find_module(struct manager *m, const char *name) {
        for (unsigned i = 0; i < m->n_modules; i++)
                if (streq(m->modules[i].module->name, name))
                        return &m->modules[i];
        return NULL;
}

/* ---- construction ---- */

static void manager_apply_logging(const struct agent_settings *s) {
        log_setup(log_level_from_string(s->log_level), (enum log_target) log_target_from_string(s->log_format));
}

static void manager_on_module_event(struct module_instance *mi, enum module_event event, void *userdata);

static int manager_create_modules(struct manager *m, char **ret_error) {
        _cleanup_free_ unsigned *order = calloc(module_table_size, sizeof(unsigned));
        int r;

        if (!order)
                return -ENOMEM;
        r = module_order(module_table, module_table_size, order, ret_error);
        if (r < 0)
                return r;
        m->modules = calloc(module_table_size, sizeof(struct module_instance));
        if (!m->modules)
                return -ENOMEM;
        for (unsigned i = 0; i < module_table_size; i++) {
                struct module_instance *mi = &m->modules[i];
                *mi = (struct module_instance) {
                        .module = module_table[order[i]],
                        .manager = m,
                        .state = MODULE_STARTING,
                        .state_since = m->start_realtime,
                        .owner_fn = manager_on_module_event,
                        .owner_userdata = m,
                };
                m->n_modules++;
                r = mi->module->init(mi, m->config, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int manager_options_copy(struct manager *m, const struct manager_options *opts) {
        if (opts->config_file && !(m->options.config_file = strdup(opts->config_file)))
                return -ENOMEM;
        if (opts->dropin_dir && !(m->options.dropin_dir = strdup(opts->dropin_dir)))
                return -ENOMEM;
        return 0;
}

/* The pod piniond itself runs in (a DaemonSet pod): root and socket-group there are judged by
 * their credentials, so that `kubectl exec` into the agent's pod keeps working (caller.h). */
static void manager_find_own_pod(struct manager *m) {
        _cleanup_(peer_pod_done) struct peer_pod self = {};
        struct stat mine, init;
        int r = peer_pod_self_lookup(NULL, m->settings.pod_cgroup_roots, &self);

        /* In a cgroup namespace of its own, every cgroup outside ours reads "/.." and nobody
         * there can be placed: say so instead of refusing pods in silence. */
        if (stat("/proc/self/ns/cgroup", &mine) == 0 && stat("/proc/1/ns/cgroup", &init) == 0 &&
            mine.st_ino != init.st_ino)
                log_warning("piniond runs in a cgroup namespace of its own: callers outside its cgroup cannot be "
                            "placed and are refused as outsiders (run it in the host's cgroup namespace)");
        if (r < 0)
                log_warning_errno(r, "Cannot tell which pod piniond runs in, taking none: %m");
        if (!streq_ptr(m->own_pod_uid, self.uid))
                log_info("piniond runs in %s%s", self.uid ? "pod " : "no pod", strempty(self.uid));
        free(m->own_pod_uid);
        m->own_pod_uid = TAKE_PTR(self.uid);
}

int manager_new(const struct manager_options *opts, struct manager **ret, char **ret_error) {
        _cleanup_(manager_freep) struct manager *m = NULL;
        int r;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->start_realtime = now_usec(CLOCK_REALTIME);
        m->start_monotonic = now_usec(CLOCK_MONOTONIC);

        r = manager_options_copy(m, opts);
        if (r < 0)
                return r;
        r = manager_config_load(&m->options, &m->config, &m->settings, ret_error);
        if (r < 0)
                return r;
        manager_apply_logging(&m->settings);
        r = agent_settings_socket_gid(&m->settings, &m->socket_gid);
        if (r < 0)
                return log_error_errno(r, "socket-group %s vanished: %m", m->settings.socket_group);
        manager_find_own_pod(m);

        r = sd_event_default(&m->event);
        if (r < 0)
                return log_error_errno(r, "Failed to create the event loop: %m");
        r = metrics_new(&m->metrics);
        if (r >= 0)
                r = pod_store_new(&m->pods);
        if (r >= 0)
                r = pod_gates_new(&m->pod_gates);
        if (r >= 0)
                r = pod_events_new(&m->pod_events);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the core: %m");

        r = manager_create_modules(m, ret_error);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(m);
        return 0;
}

struct manager *manager_free(struct manager *m) {
        if (!m)
                return NULL;

        for (unsigned i = m->n_modules; i > 0; i--) {
                struct module_instance *mi = &m->modules[i - 1];
                if (mi->data)
                        mi->module->free(mi);
                free(mi->reason);
        }
        free(m->modules);

        pod_watch_hub_free(m->pod_watch); /* ends its streams: before the API goes */
        metrics_listen_free(m->metrics_listener);
        api_free(m->api);
        podsdir_free(m->podsdir);
        http_client_free(m->http);
        pod_gates_free(m->pod_gates);
        pod_events_free(m->pod_events);
        pod_store_free(m->pods);
        metrics_free(m->metrics);
        sd_event_source_unref(m->stop_timer);
        sd_event_source_unref(m->api_drain_timer);
        sd_event_source_unref(m->watchdog_timer);
        sd_event_source_unref(m->heap_trim_timer);
        self_memory_guard_free(m->memory_guard);
        sd_event_source_unref(m->release_pages_timer);
        sd_event_source_disable_unref(m->status_timer);
        sd_event_unref(m->event);

        for (size_t i = 0; i < m->n_facts; i++)
                free(m->facts[i].name);
        free(m->facts);
        strv_free(m->pods_dir_errors_logged);
        free(m->last_reload_error);
        free(m->own_pod_uid);
        free(m->last_status);
        config_free(m->config);
        agent_settings_done(&m->settings);
        free((char *) m->options.config_file);
        free((char *) m->options.dropin_dir);
        free(m);
        return NULL;
}

/* ---- the pod source ---- */

static void manager_pods_scanned(struct podsdir *d, unsigned n_loaded, unsigned n_failed, void *userdata) {
        struct manager *m = userdata;
        char *const *errors = podsdir_errors(d);

        /* Each problem is logged once, when it appears, not on every rescan. */
        STRV_FOREACH(e, errors)
                if (!strv_contains(m->pods_dir_errors_logged, *e))
                        log_warning("Ignoring pod file %s", *e);
        strv_free(m->pods_dir_errors_logged);
        if (strv_copy(errors, &m->pods_dir_errors_logged) < 0)
                m->pods_dir_errors_logged = NULL;

        (void) metric_set(m->metric_pods_dir_errors, (double) n_failed);
        log_debug("Scanned %s: %u pods loaded, %u files skipped", podsdir_path(d), n_loaded, n_failed);
        manager_update_status_later(m);
}

static void manager_pod_changed(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        const struct pod *p = new ? new : old;
        _cleanup_free_ char *name = NULL;

        if (asprintf(&name, "%s/%s", p->namespace, p->name) < 0)
                return;
        const struct log_ctx ctx = { .pod_uid = p->uid, .pod = name };
        if (!old)
                log_ctx_full_errno(&ctx, LOG_INFO, 0, "Pod added (%s)", strempty(p->source));
        else if (!new)
                log_ctx_full_errno(&ctx, LOG_INFO, 0, "Pod removed");
        else
                log_ctx_full_errno(&ctx, LOG_DEBUG, 0, "Pod updated");
}

static int manager_start_pods_dir(struct manager *m) {
        int r;

        m->podsdir = podsdir_free(m->podsdir);
        r = podsdir_new(m->event, m->pods, m->settings.pods_dir, m->settings.node_name, &m->podsdir);
        if (r < 0)
                return log_error_errno(r, "Failed to set up pods-dir %s: %m", m->settings.pods_dir);
        podsdir_set_scan_callback(m->podsdir, manager_pods_scanned, m);
        r = podsdir_start(m->podsdir);
        if (r < 0)
                /* Not fatal: the apiserver may still feed pods, and the operator sees it in status. */
                log_warning_errno(r, "Cannot watch pods-dir %s, ignoring: %m", m->settings.pods_dir);
        return 0;
}

/* ---- signals, stop, reload ---- */

/* The API keeps answering while modules drain (pinionctl works during a stop); only at the end
 * does it stop accepting and finish what it had accepted, so nothing that reached the agent is
 * dropped: with socket activation, what connects after that waits in the socket's backlog for
 * the next piniond (a restart loses no request). A client that connected but sends nothing
 * holds the exit for at most this long. */
#define API_DRAIN_TIMEOUT (2 * USEC_PER_SEC)

static void on_api_idle(void *userdata) {
        struct manager *m = userdata;
        (void) sd_event_exit(m->event, 0);
}

static int on_api_drain_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;
        log_notice("Closing %u API connections still without an answer after %llus", api_busy(m->api),
                   (unsigned long long) (API_DRAIN_TIMEOUT / USEC_PER_SEC));
        return sd_event_exit(m->event, 0);
}

static void manager_exit_when_api_drained(struct manager *m) {
        if (m->api_drain_timer)
                return; /* draining already */
        if (!m->api || api_quiesce(m->api, on_api_idle, m) == 0 ||
            sd_event_add_time_relative(m->event, &m->api_drain_timer, CLOCK_MONOTONIC, API_DRAIN_TIMEOUT, 0,
                                       on_api_drain_timeout, m) < 0)
                (void) sd_event_exit(m->event, 0);
}

static int on_stop_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;

        for (unsigned i = 0; i < m->n_modules; i++)
                if (m->modules[i].state == MODULE_STOPPING)
                        log_module_warning(m->modules[i].module->name, "did not stop within stop-timeout, giving up");
        manager_exit_when_api_drained(m);
        return 0;
}

static void manager_module_stopped(struct manager *m) {
        if (!m->stopping || m->n_stopping == 0)
                return;
        if (--m->n_stopping == 0) {
                log_info("All modules stopped");
                manager_exit_when_api_drained(m);
        }
}

/* What every module instance tells its owner (module.h). */
static void manager_on_module_event(struct module_instance *mi, enum module_event event, void *userdata) {
        struct manager *m = userdata;

        switch (event) {
        case MODULE_EVENT_STATE:
        case MODULE_EVENT_SYNCED:
                manager_module_changed(m);
                break;
        case MODULE_EVENT_STOPPED:
                manager_module_stopped(m);
                break;
        }
}

void manager_begin_stop(struct manager *m) {
        int r;

        if (m->stopping)
                return;
        m->stopping = true;
        (void) sd_notify(false, "STOPPING=1");
        log_info("Stopping (stop-timeout %llus)", (unsigned long long) (m->settings.stop_timeout / USEC_PER_SEC));

        for (unsigned i = m->n_modules; i > 0; i--) {
                struct module_instance *mi = &m->modules[i - 1];
                if (!mi->started || mi->state == MODULE_DISABLED) {
                        /* Nothing runs: no drain, and its state keeps saying why. */
                        if (mi->started)
                                (void) mi->module->stop(mi);
                        continue;
                }
                module_set_state(mi, MODULE_STOPPING, NULL);
                r = mi->module->stop(mi);
                if (r > 0) {
                        m->n_stopping++;
                        continue;
                }
                if (r < 0)
                        log_module_warning_errno(mi->module->name, r, "stop failed, ignoring: %m");
                module_set_state(mi, MODULE_STOPPED, NULL);
        }
        manager_update_status(m);

        if (m->n_stopping == 0) {
                manager_exit_when_api_drained(m);
                return;
        }
        r = sd_event_add_time_relative(m->event, &m->stop_timer, CLOCK_MONOTONIC, m->settings.stop_timeout, 0,
                                       on_stop_timeout, m);
        if (r < 0)
                manager_exit_when_api_drained(m);
}

static void manager_reload_failed(struct manager *m, int r, const char *error) {
        m->n_reload_failures++;
        (void) metric_inc(m->metric_reloads, "failure");
        free(m->last_reload_error);
        m->last_reload_error = error ? strdup(error) : strdup(strerror(-r));
        if (error)
                log_error("Reload refused, keeping the running config: %s", error);
        else
                log_error_errno(r, "Reload failed, keeping the running config: %m");
}

/* Keys that cannot change under a running daemon: tell the operator instead of half-applying. */
static void manager_warn_restart_keys(const struct agent_settings *old, const struct agent_settings *new) {
        if (!streq_ptr(old->socket, new->socket))
                log_warning("socket changed to %s: takes effect on restart, still serving on %s", new->socket,
                            old->socket);
        if (!streq_ptr(old->state_dir, new->state_dir) || !streq_ptr(old->runtime_dir, new->runtime_dir))
                log_warning("state-dir/runtime-dir changed: takes effect on restart");
        if (!streq_ptr(old->node_name, new->node_name))
                log_warning("node-name changed to %s: takes effect on restart", new->node_name);
        if (old->drop_capabilities != new->drop_capabilities)
                log_warning("drop-capabilities changed: takes effect on restart");
}

int manager_reload(struct manager *m) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *error = NULL;
        struct agent_settings s = {};
        gid_t gid;
        int r;

        log_info("Reloading configuration");
        r = manager_config_load(&m->options, &c, &s, &error);
        if (r >= 0)
                r = agent_settings_socket_gid(&s, &gid);
        if (r < 0) {
                manager_reload_failed(m, r, error);
                agent_settings_done(&s);
                return r;
        }

        manager_warn_restart_keys(&m->settings, &s);
        bool pods_dir_changed = !streq_ptr(m->settings.pods_dir, s.pods_dir);
        /* Keep the values that need a restart; take the rest. */
        SWAP_FIELD(s.socket, m->settings.socket);
        SWAP_FIELD(s.state_dir, m->settings.state_dir);
        SWAP_FIELD(s.runtime_dir, m->settings.runtime_dir);
        SWAP_FIELD(s.node_name, m->settings.node_name);
        agent_settings_done(&m->settings);
        m->settings = s;
        m->socket_gid = gid;
        manager_apply_logging(&m->settings);
        self_memory_guard_set_watermark(m->memory_guard, m->settings.memory_watermark);
        manager_find_own_pod(m);
        if (m->api) {
                (void) api_set_access(m->api, m->settings.socket_mode, m->socket_gid);
                (void) manager_api_metrics_listen(m);
        }

        for (unsigned i = 0; i < m->n_modules; i++) {
                struct module_instance *mi = &m->modules[i];
                _cleanup_free_ char *refusal = NULL;
                r = mi->module->reload(mi, c, &refusal);
                if (r < 0)
                        log_module_warning(mi->module->name, "refused the new config, keeping its old one: %s",
                                           refusal ? refusal : strerror(-r));
        }
        config_free(m->config);
        m->config = TAKE_PTR(c);
        manager_caps_check(m);

        if (pods_dir_changed)
                (void) manager_start_pods_dir(m);
        else if (m->podsdir)
                (void) podsdir_rescan(m->podsdir);

        m->n_reloads++;
        m->last_reload_error = mfree(m->last_reload_error);
        (void) metric_inc(m->metric_reloads, "success");
        log_info("Configuration reloaded");
        manager_update_status(m);
        return 0;
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        struct manager *m = userdata;

        switch (si->ssi_signo) {
        case SIGHUP:
                (void) manager_reload(m);
                break;
        case SIGTERM:
        case SIGINT:
                log_info("Received %s", si->ssi_signo == SIGTERM ? "SIGTERM" : "SIGINT");
                manager_begin_stop(m);
                break;
        }
        return 0;
}

static int manager_setup_signals(struct manager *m) {
        static const int signals[] = { SIGTERM, SIGINT, SIGHUP };
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        for (size_t i = 0; i < ELEMENTSOF(signals); i++)
                sigaddset(&mask, signals[i]);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return -errno;
        for (size_t i = 0; i < ELEMENTSOF(signals); i++) {
                r = sd_event_add_signal(m->event, NULL, signals[i], on_signal, m);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- watchdog ---- */

/* WATCHDOG=1 from a loop timer at half of WATCHDOG_USEC: it fires only while the loop turns,
 * so a stuck loop gets us restarted. (sd_event_set_watchdog() pings somewhere between 1/2 and
 * 3/4 of the period; half leaves systemd a full half period of margin.) */
static int on_watchdog(sd_event_source *s, uint64_t usec, void *userdata) {
        struct manager *m = userdata;

        (void) sd_notify(false, "WATCHDOG=1");
        return sd_event_source_set_time_relative(s, m->watchdog_usec / 2);
}

static int manager_setup_watchdog(struct manager *m) {
        int r = sd_watchdog_enabled(false, &m->watchdog_usec);
        if (r <= 0)
                return r;
        r = sd_event_add_time_relative(m->event, &m->watchdog_timer, CLOCK_MONOTONIC, m->watchdog_usec / 2,
                                       USEC_PER_MSEC, on_watchdog, m);
        if (r < 0)
                return r;
        r = sd_event_source_set_enabled(m->watchdog_timer, SD_EVENT_ON);
        if (r < 0)
                return r;
        log_debug("Watchdog: pinging every %llums", (unsigned long long) (m->watchdog_usec / 2 / USEC_PER_MSEC));
        return 0;
}

/* ---- start and run ---- */

static int manager_listen_fd(void) {
        int n = sd_listen_fds(true);
        if (n <= 0)
                return -EBADF;
        if (n > 1)
                log_warning("Got %d sockets from the service manager, using the first", n);
        if (sd_is_socket_unix(SD_LISTEN_FDS_START, SOCK_STREAM, 1, NULL, 0) <= 0) {
                log_warning("The socket passed by the service manager is not a listening Unix stream socket, ignoring it");
                return -EBADF;
        }
        return SD_LISTEN_FDS_START;
}

/* The directory the socket is bound in must be one only the agent can change: whoever can
 * write there can move the socket aside and listen in its place. */
static int manager_prepare_socket_dir(struct manager *m) {
        _cleanup_free_ char *socket_dir = NULL;
        char why[SOCKET_TRUST_WHY_MAX] = "";
        const char *slash = strrchr(m->settings.socket, '/');
        int r;

        if (slash && slash != m->settings.socket) {
                struct stat st;
                socket_dir = strndup(m->settings.socket, (size_t) (slash - m->settings.socket));
                if (!socket_dir)
                        return -ENOMEM;
                /* Only a missing one is made here: whatever is there is judged below. */
                r = lstat(socket_dir, &st) < 0 && errno == ENOENT ? fs_mkdir_p(socket_dir, 0755) : 0;
                if (r < 0)
                        return log_error_errno(r, "Failed to create %s: %m", socket_dir);
        }
        r = socket_trust_dir_prepare(m->settings.socket, why, sizeof(why));
        if (r == -EPERM) {
                log_error("Refusing to serve on %s: %s", m->settings.socket, why);
                return MANAGER_ERR_UNSAFE;
        }
        if (r < 0)
                return log_error_errno(r, "Failed to prepare the socket directory: %s", why);
        return 0;
}

/* <runtime-dir>/pinion.sock, where clients of old found the socket, points into sockets/. */
static void manager_legacy_link(struct manager *m) {
        int r = socket_trust_legacy_link(m->settings.runtime_dir, m->settings.socket);
        if (r == -EEXIST)
                log_warning("Not linking %s/%s to the socket: something else is there", m->settings.runtime_dir,
                            strrchr(m->settings.socket, '/') + 1);
        else if (r < 0)
                log_warning_errno(r, "Failed to link the legacy socket path in %s, ignoring: %m",
                                  m->settings.runtime_dir);
        else if (r > 0)
                log_debug("Linked %s/%s to the socket", m->settings.runtime_dir, strrchr(m->settings.socket, '/') + 1);
}

/* Before any server listens: the soft open-file limit goes up to the hard one, and the servers'
 * connection caps are sized to what it is, so that callers within their caps cannot take the
 * descriptors the agent needs for itself. */
static void manager_size_connection_caps(struct manager *m) {
        uint64_t before = 0, after = 0;
        struct connection_caps *c = &m->connection_caps;
        char raised[64] = "";
        int r = fd_limit_raise(&before, &after);

        if (r < 0)
                log_warning_errno(r, "Failed to raise the open-file limit from %llu, ignoring: %m",
                                  (unsigned long long) before);
        /* Unreadable (it never is): the defaults, as before the limit was looked at. */
        fd_limit_connection_caps(after > 0 ? after : UINT64_MAX, c);
        if (after > before)
                (void) snprintf(raised, sizeof(raised), " (soft limit raised from %llu)", (unsigned long long) before);
        log_info("Open files: %llu%s; connections at once: local API %u, Workload API %u, CSI %u per server%s",
                 (unsigned long long) after, raised, c->api, c->workload, c->csi,
                 c->scaled ? " (scaled down to fit the limit; raise LimitNOFILE for the defaults)" : "");
}

static int manager_start_api(struct manager *m) {
        int listen_fd = manager_listen_fd();
        int r;

        r = manager_prepare_socket_dir(m);
        if (r < 0)
                return r;

        struct api_options opts = {
                .socket_path = m->settings.socket,
                .socket_mode = m->settings.socket_mode,
                .socket_gid = m->socket_gid,
                .listen_fd = listen_fd,
                .max_connections = m->connection_caps.api,
        };
        r = api_new(m->event, &opts, m->metrics, &m->api);
        if (r < 0)
                return log_error_errno(r, "Failed to serve the local API on %s: %m", m->settings.socket);
        api_set_place_fn(m->api, caller_peer_place, m);
        manager_legacy_link(m);
        r = manager_api_register(m);
        if (r < 0)
                return log_error_errno(r, "Failed to register the API routes: %m");
        log_info("Local API listening on %s%s", m->settings.socket, listen_fd >= 0 ? " (socket activation)" : "");
        return manager_api_metrics_listen(m);
}

static int manager_create_dirs(struct manager *m) {
        int r = fs_mkdir_p(m->settings.runtime_dir, 0755);
        if (r < 0)
                return log_error_errno(r, "Failed to create runtime-dir %s: %m", m->settings.runtime_dir);
        r = fs_mkdir_p(m->settings.state_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "Failed to create state-dir %s: %m", m->settings.state_dir);
        return 0;
}

static int manager_register_metrics(struct manager *m) {
        static const char *const result_label[] = { "result", NULL };
        int r;

        r = metrics_family(m->metrics, METRIC_COUNTER, "pinion_config_reloads_total",
                           "Configuration reloads by result (success, failure).", result_label, NULL, 0,
                           &m->metric_reloads);
        if (r >= 0) {
                (void) metric_touch(m->metric_reloads, "success");
                (void) metric_touch(m->metric_reloads, "failure");
                r = metrics_family(m->metrics, METRIC_GAUGE, "pinion_pods_dir_errors",
                                   "Pod files in pods-dir skipped at the last scan because they are invalid.",
                                   NULL, NULL, 0, &m->metric_pods_dir_errors);
        }
        if (r >= 0)
                r = metrics_family(m->metrics, METRIC_COUNTER, "pinion_startup_pages_released_bytes_total",
                                   "File-backed memory given back to the kernel once the agent was ready "
                                   "([agent] release-startup-pages).",
                                   NULL, NULL, 0, &m->metric_released_pages);
        if (r >= 0)
                r = manager_api_register_metrics(m);
        return r;
}

/* A module that finds a state file of a newer release (STATE_VERSION_ERR_NEWER, logged by the
 * module with the file and its version) stops the agent: running without that state would
 * undo what the newer release recorded. */
static int manager_start_modules(struct manager *m) {
        for (unsigned i = 0; i < m->n_modules; i++) {
                struct module_instance *mi = &m->modules[i];
                int r = mi->module->start(mi);
                if (r == STATE_VERSION_ERR_NEWER) {
                        module_set_state(mi, MODULE_FAILED, "a state file is of a newer release");
                        return MANAGER_ERR_UNSAFE;
                }
                if (r < 0) {
                        module_set_state(mi, MODULE_FAILED, "start failed: %s", strerror(-r));
                        module_set_synced(mi);
                        continue;
                }
                mi->started = true;
        }
        return 0;
}

int manager_start(struct manager *m) {
        int r;

        r = manager_create_dirs(m);
        if (r < 0)
                return r;
        r = manager_register_metrics(m);
        if (r < 0)
                return log_error_errno(r, "Failed to register metrics: %m");
        r = manager_setup_signals(m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handling: %m");
        r = manager_setup_watchdog(m);
        if (r < 0)
                log_warning_errno(r, "Failed to set up the watchdog, ignoring: %m");
        r = self_memory_setup_heap(m->event, &m->heap_trim_timer);
        if (r < 0)
                log_warning_errno(r, "Failed to set up heap trimming, ignoring: %m");
        r = self_memory_guard_new(m->event, m->metrics, m->settings.memory_watermark, &m->memory_guard);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the memory guard: %m");

        r = pod_store_add_observer(m->pods, manager_pod_changed, m);
        if (r >= 0)
                r = pod_watch_hub_new(m->event, m->pods, &m->pod_watch);
        if (r < 0)
                return log_error_errno(r, "Failed to observe the pod store: %m");
        manager_size_connection_caps(m);
        r = manager_start_api(m);
        if (r < 0)
                return r;
        r = manager_start_pods_dir(m);
        if (r < 0)
                return r;

        manager_caps_drop(m);
        r = manager_start_modules(m);
        if (r < 0)
                return r;
        m->started = true;
        manager_check_ready(m);
        manager_update_status(m);
        return 0;
}

int manager_run(struct manager *m) {
        int r = sd_event_loop(m->event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m"), EXIT_FAILURE;
        log_info("Exiting");
        return m->exit_code;
}
