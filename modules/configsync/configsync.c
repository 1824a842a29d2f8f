/* SPDX-License-Identifier: MIT */
/* configsync: downloads, verifies and atomically swaps in the config bundles pods declare
 * ([config.NAME] sections), keeps them current, and holds back pods whose declared configs are
 * not on disk yet (the "configs" pod gate). This file: the config table, the module contract,
 * the gate, the metrics, and what the module announces to its observers (a bundle changed or
 * went, the module stopped). One bundle's life is in bundle.c; the API, configsync-api.c, is an
 * observer: nothing here calls into it but its registration at start. */

#include <grp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "caps.h"
#include "config.h"
#include "configsync.h"
#include "fs.h"
#include "log.h"
#include "manager.h"
#include "pod-events.h"
#include "pod-gates.h"
#include "pod-store.h"
#include "signature.h"
#include "stage.h"
#include "strv.h"

/* A group by name, or by number (the gid a pod runs as need not have a name on the host). */
static int group_resolve(const char *v, gid_t *ret) {
        struct group *g = getgrnam(v);
        char *end = NULL;
        unsigned long n;

        if (g) {
                *ret = g->gr_gid;
                return 0;
        }
        errno = 0;
        n = strtoul(v, &end, 10);
        if (errno != 0 || end == v || *end != 0 || v[0] == '-' || n >= (gid_t) -1)
                return -ESRCH;
        *ret = (gid_t) n;
        return 0;
}

static int parse_group(const char *v, void *ret, const char **reason) {
        gid_t gid;

        if (!isempty(v) && group_resolve(v, &gid) < 0) {
                *reason = "no such group (a group name or a numeric gid)";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

#define FIELD(f) offsetof(struct bundle_settings, f)
static const struct config_key bundle_keys[] = {
        { "url", config_parse_url, FIELD(url), NULL, config_free_string },
        { "ca-file", config_parse_file, FIELD(ca_file), NULL, config_free_string, .names_file = true },
        { "public-key", config_parse_path, FIELD(public_key), NULL, config_free_string },
        { "dest", config_parse_path, FIELD(dest), NULL, config_free_string },
        { "interval", config_parse_duration, FIELD(interval), "60s" },
        { "zk-version-node", config_parse_path, FIELD(zk_version_node), NULL, config_free_string },
        { "splay", config_parse_duration, FIELD(splay), "10s" },
        { "on-change", config_parse_string, FIELD(on_change), NULL, config_free_string },
        { "on-change-timeout", config_parse_duration, FIELD(on_change_timeout), "30s" },
        { "quiescence", config_parse_duration, FIELD(quiescence), "2s" },
        { "keep-versions", config_parse_uint, FIELD(keep_versions), "3" },
        { "timeout", config_parse_duration, FIELD(timeout), "60s" },
        { "parallel", config_parse_uint, FIELD(parallel), "8" },
        { "max-size", config_parse_size, FIELD(max_size), "1G" },
        /* manifest.h's MANIFEST_DEFAULT_MAX_* */
        { "max-depth", config_parse_uint, FIELD(max_depth), "32" },
        { "max-directories", config_parse_uint, FIELD(max_directories), "2000" },
        { "max-entries", config_parse_uint, FIELD(max_entries), "20000" },
        { "backoff-initial", config_parse_duration, FIELD(backoff_initial), "1s" },
        { "backoff-max", config_parse_duration, FIELD(backoff_max), "5m" },
        { "group", parse_group, FIELD(group), NULL, config_free_string },
        { "world-readable", config_parse_bool, FIELD(world_readable), "no" },
        {}
};
#undef FIELD

static const char *bundle_check(const void *object) {
        const struct bundle_settings *b = object;
        _cleanup_strv_free_ char **argv = NULL;
        const char *reason = NULL;

        if (!b->url)
                return "url (the bundle manifest) is required";
        if (!b->dest)
                return "dest (where the files are published) is required";
        if (streq(b->dest, "/"))
                return "dest may not be /";
        if (b->interval < USEC_PER_SEC)
                return "interval must be at least 1s";
        if (b->timeout < 100 * USEC_PER_MSEC)
                return "timeout must be at least 100ms";
        if (b->parallel < 1 || b->parallel > 64)
                return "parallel must be between 1 and 64";
        if (b->keep_versions > 100)
                return "keep-versions must be at most 100";
        if (b->max_depth > MANIFEST_MAX_PATH / 2)
                return "max-depth must be at most 512 (a path has at most 1024 bytes)";
        if (b->max_entries < 1)
                return "max-entries must be at least 1";
        if (b->backoff_initial == 0 || b->backoff_max < b->backoff_initial)
                return "needs 0 < backoff-initial <= backoff-max";
        if (b->splay > USEC_PER_HOUR)
                return "splay must be at most 1h";
        if (b->on_change && runner_split_command(b->on_change, &argv, &reason) < 0)
                return reason ? reason : "on-change: cannot be split into words";
        return NULL;
}

static struct configsync_settings *configsync_settings_free(struct configsync_settings *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_bundles; i++) {
                if (s->keys)
                        EVP_PKEY_free(s->keys[i]);
                if (s->argvs)
                        strv_free(s->argvs[i]);
        }
        free(s->keys);
        free(s->argvs);
        free(s->gids);
        config_instances_free(bundle_keys, (void **) s->bundles, s->n_bundles);
        free(s);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(struct configsync_settings *, configsync_settings_free);

/* True if path is dir or inside it (absolute paths as config_parse_path leaves them; trailing
 * slashes ignored). */
static bool path_within(const char *path, const char *dir) {
        size_t n = strlen(dir), m = strlen(path);
        while (n > 1 && dir[n - 1] == '/')
                n--;
        while (m > 1 && path[m - 1] == '/')
                m--;
        return m >= n && strncmp(path, dir, n) == 0 && (m == n || path[n] == '/');
}

static int configsync_parse(struct config *c, struct configsync_settings **ret, char **ret_error) {
        _cleanup_(configsync_settings_freep) struct configsync_settings *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        r = config_parse_instances(c, "config.", bundle_keys, sizeof(struct bundle_settings), bundle_check,
                                   (void ***) &s->bundles, &s->n_bundles, ret_error);
        if (r < 0)
                return r;
        s->keys = calloc(MAX(s->n_bundles, (size_t) 1), sizeof(EVP_PKEY *));
        s->argvs = calloc(MAX(s->n_bundles, (size_t) 1), sizeof(char **));
        s->gids = calloc(MAX(s->n_bundles, (size_t) 1), sizeof(gid_t));
        if (!s->keys || !s->argvs || !s->gids)
                return -ENOMEM;

        for (size_t i = 0; i < s->n_bundles; i++) {
                struct bundle_settings *b = s->bundles[i];
                _cleanup_free_ char *section = NULL;
                const char *reason = NULL;

                if (asprintf(&section, "config.%s", b->name) < 0)
                        return -ENOMEM;
                s->gids[i] = (gid_t) -1;
                if (b->group && group_resolve(b->group, &s->gids[i]) < 0)
                        return config_section_error(c, section, ret_error, "group %s: no such group", b->group);
                if (b->public_key) {
                        r = signature_key_load(b->public_key, &s->keys[i]);
                        if (r < 0)
                                return config_section_error(c, section, ret_error,
                                                            "public-key %s: %s", b->public_key,
                                                            r == -EINVAL ? "not an Ed25519 public key (PEM)" : strerror(-r));
                }
                if (b->on_change) {
                        r = runner_split_command(b->on_change, &s->argvs[i], &reason);
                        if (r < 0)
                                return r == -ENOMEM ? r : config_section_error(c, section, ret_error, "on-change: %s", reason);
                }
                for (size_t j = 0; j < i; j++) {
                        const char *other = s->bundles[j]->dest;
                        bool inside = path_within(b->dest, other), outside = path_within(other, b->dest);
                        if (inside && outside)
                                return config_section_error(c, section, ret_error, "dest %s is also [config.%s]'s dest",
                                                            b->dest, s->bundles[j]->name);
                        /* One bundle's swap or cleanup would replace or remove the other's tree. */
                        if (inside || outside)
                                return config_section_error(c, section, ret_error,
                                                            "dest %s is %s [config.%s]'s dest %s (nested dests are refused)",
                                                            b->dest, inside ? "inside" : "the parent of",
                                                            s->bundles[j]->name, other);
                }
        }
        *ret = TAKE_PTR(s);
        return 0;
}

struct bundle *configsync_find(struct configsync *cs, const char *name) {
        for (size_t i = 0; cs && i < cs->n_bundles; i++)
                if (streq(cs->bundles[i]->name, name))
                        return cs->bundles[i];
        return NULL;
}

/* ---- observers ---- */

int configsync_add_observer(struct configsync *cs, configsync_observer_fn fn, void *userdata) {
        return observer_list_add(&cs->observers, (observer_list_fn) fn, userdata, 0);
}

void configsync_remove_observer(struct configsync *cs, configsync_observer_fn fn, void *userdata) {
        observer_list_remove(&cs->observers, (observer_list_fn) fn, userdata);
}

static void configsync_announce(struct configsync *cs, enum configsync_event event, struct bundle *b) {
        /* Those added from inside a call hear only later changes. */
        for (size_t i = 0, n = observer_list_begin(&cs->observers); i < n; i++) {
                struct observer_list_entry o;
                if (observer_list_get(&cs->observers, i, &o))
                        ((configsync_observer_fn) o.fn)(cs, event, b, o.userdata);
        }
        observer_list_end(&cs->observers);
}

/* Observers hear that b goes (why: BUNDLE_REMOVED or BUNDLE_STOPPED) while it is still whole,
 * no longer among cs->bundles; then it is freed. */
static void configsync_drop_bundle(struct configsync *cs, struct bundle *b, enum configsync_event why) {
        if (!b)
                return;
        configsync_announce(cs, why, b);
        bundle_free(b);
}

/* ---- the pod gate ---- */

int configsync_pod_configs(const struct pod *p, char ***ret_names) {
        *ret_names = NULL;
        return strv_split(strempty(pod_annotation(p, CONFIGSYNC_ANNOTATION)), ", \t", ret_names) < 0 ? -ENOMEM : 0;
}

/* Closed for a pod whose pinion.io/configs names a config that is not present, or not
 * configured on this node (also when there is no [config.*] at all: a pod that declares a
 * config needs it, and starting it without would be the failure this module exists to prevent). */
int configsync_gate_check(struct configsync *cs, const struct pod *p, char **ret_reason) {
        _cleanup_strv_free_ char **names = NULL;
        int r;

        r = configsync_pod_configs(p, &names);
        if (r < 0)
                return r;
        if (!names || !names[0])
                return 1;
        if (cs->stopping) {
                char *reason = strdup("the config module is stopping");
                if (!reason)
                        return -ENOMEM;
                *ret_reason = reason;
                return 0;
        }
        STRV_FOREACH(n, names) {
                struct bundle *b = configsync_find(cs, *n);
                char *reason = NULL;

                if (!b)
                        r = asprintf(&reason, "config %s is not configured on this node (no [config.%s])", *n, *n);
                else if (!b->present)
                        r = asprintf(&reason, "config %s is not present yet%s%s%s", *n, b->last_error ? " (" : "",
                                     strempty(b->last_error), b->last_error ? ")" : "");
                else
                        continue;
                if (r < 0)
                        return -ENOMEM;
                *ret_reason = reason;
                return 0;
        }
        return 1;
}

static int configs_gate(const struct pod *p, void *userdata, char **ret_reason) {
        return configsync_gate_check(userdata, p, ret_reason);
}

/* ---- pod events ---- */

/* Whether p's pinion.io/configs names config. */
static bool pod_declares(const struct pod *p, const char *config) {
        _cleanup_strv_free_ char **names = NULL;

        return configsync_pod_configs(p, &names) >= 0 && strv_contains(names, config);
}

/* A pod that arrives starting (Pending) while a config it declares is present already hears so,
 * as pods present at the publication did: its start's story names every config it has. A pod
 * already running (the agent restarted) was told before. */
static void on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct configsync *cs = userdata;
        _cleanup_strv_free_ char **names = NULL;

        if (old || !new || !streq_ptr(new->phase, "Pending") || !pod_events_observed(cs->mi->manager->pod_events) ||
            configsync_pod_configs(new, &names) < 0)
                return;
        STRV_FOREACH(n, names) {
                const struct bundle *b = configsync_find(cs, *n);
                if (b && b->present)
                        pod_event_emit(cs->mi->manager->pod_events, new->uid, POD_EVENT_NORMAL,
                                       POD_EVENT_CONFIG_SYNCED, "Sync", "Config %s version %s present in %s", b->name,
                                       b->version ?: "(unknown)", b->settings->dest);
        }
}

void configsync_announce_pods(struct configsync *cs, const struct bundle *b, enum pod_event_type type,
                              const char *reason, const char *action, const char *format, ...) {
        struct manager *m = cs->mi->manager;
        _cleanup_free_ char *note = NULL;
        struct pod **pods = NULL;
        size_t n = 0;
        va_list ap;
        int r;

        if (!pod_events_observed(m->pod_events))
                return; /* nobody to tell: not even the pods are looked at */
        va_start(ap, format);
        r = vasprintf(&note, format, ap);
        va_end(ap);
        if (r < 0 || pod_store_list(m->pods, &pods, &n) < 0)
                return; /* out of memory: the bundle's log line says it */
        /* Held: an observer may change the store (and drop a pod) from inside its call. */
        for (size_t i = 0; i < n; i++)
                pod_ref(pods[i]);
        for (size_t i = 0; i < n; i++) {
                if (pod_declares(pods[i], b->name))
                        pod_event_emit(m->pod_events, pods[i]->uid, type, reason, action, "%s", note);
                pod_unref(pods[i]);
        }
        free(pods);
}

/* ---- module state ---- */

static void configsync_update_state(struct configsync *cs) {
        struct module_instance *mi = cs->mi;
        size_t n_failing = 0, n_attempted = 0;
        const struct bundle *first_failing = NULL;

        if (cs->n_bundles == 0) {
                module_set_state(mi, MODULE_DISABLED,
                                 "no [config.NAME] sections configured");
                module_set_synced(mi);
                return;
        }
        for (size_t i = 0; i < cs->n_bundles; i++) {
                const struct bundle *b = cs->bundles[i];
                if (b->attempted)
                        n_attempted++;
                if (b->state == BUNDLE_FAILING || (b->state == BUNDLE_FETCHING && b->last_error)) {
                        n_failing++;
                        if (!first_failing)
                                first_failing = b;
                }
        }
        if (first_failing)
                module_set_state(mi, MODULE_DEGRADED, "%zu of %zu configs failing; config %s: %s", n_failing,
                                 cs->n_bundles, first_failing->name, strempty(first_failing->last_error));
        else if (n_attempted < cs->n_bundles)
                module_set_state(mi, MODULE_STARTING, NULL);
        else
                module_set_state(mi, MODULE_RUNNING, NULL);
        if (n_attempted == cs->n_bundles)
                module_set_synced(mi);
}

void configsync_bundle_changed(struct configsync *cs, struct bundle *b, bool presence_changed) {
        configsync_update_state(cs);
        configsync_announce(cs, CONFIGSYNC_EVENT_BUNDLE_CHANGED, b);
        if (presence_changed && cs->gate_added)
                pod_gates_changed(cs->mi->manager->pod_gates, NULL);
}

/* ---- metrics ---- */

static void collect_configsync(struct metrics *m, void *userdata) {
        struct configsync *cs = userdata;
        usec_t now = now_usec(CLOCK_REALTIME);

        metric_family_reset(cs->metrics.version);
        metric_family_reset(cs->metrics.age);
        metric_family_reset(cs->metrics.published);
        metric_family_reset(cs->metrics.present);
        for (size_t i = 0; i < cs->n_bundles; i++) {
                const struct bundle *b = cs->bundles[i];
                (void) metric_set(cs->metrics.present, b->present ? 1 : 0, b->name);
                if (!b->present)
                        continue;
                (void) metric_set(cs->metrics.version, 1, b->name, b->version ? b->version : "");
                if (b->published) {
                        (void) metric_set(cs->metrics.published, (double) b->published / USEC_PER_SEC, b->name);
                        (void) metric_set(cs->metrics.age, (double) (now - MIN(now, b->published)) / USEC_PER_SEC, b->name);
                }
        }
}

static int configsync_register_metrics(struct configsync *cs) {
        static const char *const config[] = { "config", NULL };
        static const char *const config_result[] = { "config", "result", NULL };
        static const char *const config_kind[] = { "config", "kind", NULL };
        static const char *const config_version[] = { "config", "version", NULL };
        struct configsync_metrics *mt = &cs->metrics;
        const struct metric_def families[] = {
                { METRIC_COUNTER, "pinion_configsync_fetches_total", "Syncs of a config bundle by result (changed, not-modified, same, or the failure kind: connect, timeout, tls, http, truncated, manifest, signature, size, checksum, enospc (no space left in dest), disk (any other write error), dest, other).", config_result, NULL, 0, &mt->fetches },
                { METRIC_COUNTER, "pinion_configsync_bytes_total", "Bytes received for a config bundle (manifest, signature and files).", config, NULL, 0, &mt->bytes },
                { METRIC_COUNTER, "pinion_configsync_not_modified_total", "Manifest requests answered 304 Not Modified.", config, NULL, 0, &mt->not_modified },
                { METRIC_COUNTER, "pinion_configsync_verification_failures_total", "Files or manifests refused by verification, by kind (size, checksum, signature).", config_kind, NULL, 0, &mt->verify_fail },
                { METRIC_GAUGE, "pinion_configsync_version_info", "The published version of each config (value 1).", config_version, NULL, 0, &mt->version },
                { METRIC_GAUGE, "pinion_configsync_version_timestamp_seconds", "When the published version was published, seconds since the Unix epoch.", config, NULL, 0, &mt->published },
                { METRIC_GAUGE, "pinion_configsync_version_age_seconds", "Seconds since the published version was published.", config, NULL, 0, &mt->age },
                { METRIC_GAUGE, "pinion_configsync_present", "1 if a version of the config is published in its dest.", config, NULL, 0, &mt->present },
                { METRIC_COUNTER, "pinion_configsync_on_change_runs_total", "on-change command runs by result (success, failure, timeout, spawn-failed).", config_result, NULL, 0, &mt->on_change },
        };
        struct metrics *m = cs->mi->manager->metrics;

        if (cs->metrics_reg)
                return 0;
        return metrics_register(m, families, ELEMENTSOF(families), collect_configsync, cs, &cs->metrics_reg);
}

/* ---- the module contract ---- */

/* The bundles leave cs->bundles first: observers told of one never find it, nor one freed. */
static void configsync_drop_bundles(struct configsync *cs) {
        _cleanup_free_ struct bundle **bundles = TAKE_PTR(cs->bundles);
        size_t n = cs->n_bundles;

        cs->n_bundles = 0;
        for (size_t i = 0; i < n; i++)
                configsync_drop_bundle(cs, bundles[i], CONFIGSYNC_EVENT_BUNDLE_STOPPED);
}

static struct configsync *configsync_free_data(struct configsync *cs) {
        if (!cs)
                return NULL;
        configsync_drop_bundles(cs);
        if (cs->gate_added)
                pod_gates_remove(cs->mi->manager->pod_gates, CONFIGSYNC_GATE);
        if (cs->observing_pods)
                pod_store_remove_observer(cs->mi->manager->pods, on_pod, cs);
        metrics_registration_free(cs->metrics_reg);
        configsync_announce(cs, CONFIGSYNC_EVENT_STOPPED, NULL);
        configsync_settings_free(cs->settings);
        observer_list_done(&cs->observers);
        free(cs->state_dir);
        free(cs);
        return NULL;
}

static int configsync_init(struct module_instance *mi, struct config *c, char **ret_error) {
        struct configsync *cs = calloc(1, sizeof(*cs));
        int r;

        if (!cs)
                return -ENOMEM;
        cs->mi = mi;
        r = configsync_parse(c, &cs->settings, ret_error);
        if (r < 0) {
                free(cs);
                return r;
        }
        mi->data = cs;
        return 0;
}


static int configsync_make_bundles(struct configsync *cs) {
        cs->bundles = calloc(MAX(cs->settings->n_bundles, (size_t) 1), sizeof(struct bundle *));
        if (!cs->bundles)
                return -ENOMEM;
        for (size_t i = 0; i < cs->settings->n_bundles; i++) {
                int r = bundle_new(cs, i, &cs->bundles[i]);
                if (r < 0)
                        return r;
                cs->n_bundles++;
        }
        return 0;
}

static int configsync_start(struct module_instance *mi) {
        struct configsync *cs = mi->data;
        struct manager *m = mi->manager;
        sigset_t mask;
        int r;

        /* sd_event_add_child() needs SIGCHLD blocked; the on-change child gets a clean mask. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_module_error_errno(CONFIGSYNC_MODULE, errno, "Cannot block SIGCHLD: %m");

        free(cs->state_dir);
        cs->state_dir = fs_path_join(m->settings.state_dir, "configsync");
        if (!cs->state_dir)
                return -ENOMEM;
        /* A kill during a state write leaves its temp file; nothing else would ever remove it. */
        (void) fs_cleanup_temp(cs->state_dir);
        r = configsync_register_metrics(cs);
        if (r < 0)
                return r;
        /* Always: a pod that declares configs is held back even with no [config.*] here. (A
         * stopped module keeps its gate, closed: started again, it opens it again.) */
        if (!cs->gate_added) {
                r = pod_gates_add(m->pod_gates, CONFIGSYNC_GATE, configs_gate, cs);
                if (r < 0)
                        return log_module_error_errno(CONFIGSYNC_MODULE, r, "Cannot add the pod gate: %m");
                cs->gate_added = true;
        }
        if (!cs->observing_pods) {
                r = pod_store_add_observer(m->pods, on_pod, cs);
                if (r < 0)
                        return log_module_error_errno(CONFIGSYNC_MODULE, r, "Cannot observe the pods: %m");
                cs->observing_pods = true;
        }
        cs->stopping = false;
        r = configsync_api_register(mi);
        if (r < 0)
                return r;
        r = configsync_make_bundles(cs);
        for (size_t i = 0; r >= 0 && i < cs->n_bundles; i++) {
                r = bundle_start(cs->bundles[i]);
                if (r < 0)
                        log_module_error_errno(CONFIGSYNC_MODULE, r, "config %s: cannot start: %m", cs->bundles[i]->name);
        }
        if (r < 0) {
                /* The module is FAILED and not started: nothing of it may keep running (a later
                 * reload would free the settings those bundles borrow). */
                configsync_drop_bundles(cs);
                return r;
        }
        cs->started = true;
        configsync_update_state(cs);
        pod_gates_changed(m->pod_gates, NULL);
        return 0;
}

static int configsync_reload(struct module_instance *mi, struct config *c, char **ret_error) {
        struct configsync *cs = mi->data;
        _cleanup_(configsync_settings_freep) struct configsync_settings *s = NULL, *old = NULL;
        _cleanup_free_ struct bundle **bundles = NULL, **gone = NULL;
        _cleanup_free_ bool *kept = NULL;
        size_t n = 0, n_gone = 0;
        int r;

        r = configsync_parse(c, &s, ret_error);
        if (r < 0)
                return r;
        if (!cs->started) {
                old = cs->settings;
                cs->settings = TAKE_PTR(s);
                return 0;
        }

        bundles = calloc(MAX(s->n_bundles, (size_t) 1), sizeof(struct bundle *));
        kept = calloc(MAX(cs->n_bundles, (size_t) 1), sizeof(bool));
        gone = calloc(MAX(cs->n_bundles, (size_t) 1), sizeof(struct bundle *));
        if (!bundles || !kept || !gone)
                return -ENOMEM;
        old = cs->settings;
        cs->settings = TAKE_PTR(s);
        /* Keep the bundles that stay (their runtime state, waiters and watch), make the new
         * ones, drop the ones that went (their files stay on disk: removing a section is not a
         * request to delete what pods may be reading). The new array is built aside and
         * cs->bundles stays whole until it is swapped in: lookups (the gate, the API) never see
         * a half-moved array. */
        for (size_t i = 0; i < cs->settings->n_bundles; i++) {
                struct bundle *b = NULL;
                for (size_t j = 0; j < cs->n_bundles; j++)
                        if (!kept[j] && streq(cs->bundles[j]->name, cs->settings->bundles[i]->name)) {
                                kept[j] = true;
                                b = cs->bundles[j];
                                break;
                        }
                if (b) {
                        r = bundle_update(b, i);
                        bundles[n++] = b;
                        if (r < 0)
                                log_module_warning_errno(CONFIGSYNC_MODULE, r, "config %s: on-change: %m", b->name);
                        continue;
                }
                r = bundle_new(cs, i, &b);
                if (r >= 0) {
                        bundles[n++] = b;
                        r = bundle_start(b);
                }
                if (r < 0)
                        log_module_warning_errno(CONFIGSYNC_MODULE, r, "config %s: cannot start: %m",
                                                 cs->settings->bundles[i]->name);
        }
        for (size_t j = 0; j < cs->n_bundles; j++)
                if (!kept[j])
                        gone[n_gone++] = cs->bundles[j];
        free(cs->bundles);
        cs->bundles = TAKE_PTR(bundles);
        cs->n_bundles = n;
        for (size_t j = 0; j < n_gone; j++) {
                log_module_info(CONFIGSYNC_MODULE, "config %s removed from the configuration (its files stay in %s)",
                                gone[j]->name, gone[j]->settings->dest);
                configsync_drop_bundle(cs, gone[j], CONFIGSYNC_EVENT_BUNDLE_REMOVED);
        }

        /* SIGHUP is also "look again now". */
        for (size_t i = 0; i < cs->n_bundles; i++)
                bundle_refresh(cs->bundles[i], "reload");
        configsync_update_state(cs);
        pod_gates_changed(mi->manager->pod_gates, NULL);
        return 0;
}

static int configsync_stop(struct module_instance *mi) {
        struct configsync *cs = mi->data;

        /* Downloads in flight are abandoned (their version directories removed); the published
         * trees stay as they are. */
        configsync_drop_bundles(cs);
        /* The gate stays registered until free, closed for every pod that declares configs
         * ("stopping"): modules stopped after this one (zkreg) must not see it open. */
        cs->stopping = true;
        cs->started = false;
        configsync_announce(cs, CONFIGSYNC_EVENT_STOPPED, NULL);
        cs->metrics_reg = metrics_registration_free(cs->metrics_reg);
        return 0;
}

static int configsync_status(struct module_instance *mi, cJSON *obj) {
        struct configsync *cs = mi->data;
        cJSON *names = cJSON_AddArrayToObject(obj, "configs");
        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i < cs->settings->n_bundles; i++)
                if (!cJSON_AddItemToArray(names, cJSON_CreateString(cs->settings->bundles[i]->name)))
                        return -ENOMEM;
        return 0;
}

static void configsync_free(struct module_instance *mi) {
        mi->data = configsync_free_data(mi->data);
}

/* On-change commands may signal workloads of other uids. A dest in a directory of another owner
 * takes CAP_DAC_OVERRIDE and CAP_FOWNER, which the shipped unit withholds (a drop-in grants
 * them): kept when granted. Handing bundles to a group takes none (ACL entries, fs-acl.h). */
static uint64_t configsync_capabilities(struct module_instance *mi, const struct config *c) {
        const struct configsync *cs = mi->data;
        return !cs->settings || cs->settings->n_bundles == 0 ? 0
                : CAP_TO_MASK64(CAP_KILL) | CAP_TO_MASK64(CAP_DAC_OVERRIDE) | CAP_TO_MASK64(CAP_FOWNER);
}

/* The routes configsync-api.c registers, for the core to answer while they are not served. */
static const struct module_route configsync_routes[] = {
        { "GET", "/v1/configs", MODULE_ROUTE_OWN },
        { "GET", "/v1/configs/{}", MODULE_ROUTE_OWN },
        { "POST", "/v1/configs/{}/refresh", MODULE_ROUTE_PRIVILEGED },
        {},
};

static bool configsync_configured(const struct module_instance *mi, const struct config *c) {
        const struct configsync *cs = mi->data;
        return cs->settings->n_bundles > 0;
}

/* Each bundle's dest as every sync judges it (stage_check_dest()). */
static int configsync_check(const struct module_instance *mi, const struct config *c, char **ret_error) {
        const struct configsync *cs = mi->data;

        for (size_t i = 0; i < cs->settings->n_bundles; i++) {
                const struct bundle_settings *b = cs->settings->bundles[i];
                _cleanup_free_ char *section = NULL;
                const char *file;
                unsigned line;
                int r = stage_check_dest(b->dest);

                if (r >= 0 || r == -ENOENT)
                        continue;
                if (asprintf(&section, "config.%s", b->name) < 0)
                        return -ENOMEM;
                (void) config_key_where(c, section, "dest", &file, &line);
                return config_error(ret_error, file, line, "dest %s: %s", b->dest,
                                    r == -EPERM ? "group- or world-writable: every sync would refuse to publish there "
                                                  "(chmod go-w)"
                                                : strerror(-r));
        }
        return 0;
}

const struct module configsync_module = {
        .name = "configsync",
        .routes = configsync_routes,
        .deps = (const char *const[]) { "zkreg", NULL },
        .init = configsync_init,
        .configured = configsync_configured,
        .check = configsync_check,
        .start = configsync_start,
        .reload = configsync_reload,
        .stop = configsync_stop,
        .status = configsync_status,
        .free = configsync_free,
        .capabilities = configsync_capabilities,
};
