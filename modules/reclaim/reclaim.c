/* SPDX-License-Identifier: MIT */
/* reclaim: watches the memory cgroups of co-located components ([reclaim.NAME] sections, and
 * pods that opt in with the pinion.io/reclaim annotation) and reclaims their page cache before
 * it drives them into their limit (target*.c: one cgroup's state machine and episodes; plan.c:
 * the decisions; memcg.c: the cgroup files; unit-cap.c: the cap of a systemd unit's cgroup,
 * through systemd). This file is the module: config,
 * the pod observer, metrics, lifecycle; /v1/reclaim is reclaim-api.c. */

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "caps.h"
#include "config.h"
#include "fs.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "memcg.h"
#include "module.h"
#include "parse.h"
#include "reclaim.h"
#include "state-version.h"
#include "strv.h"
#include "target.h"
#include "unit-cap.h"

#define MODULE "reclaim"

#define ANNOTATION_RECLAIM "pinion.io/reclaim"
#define ANNOTATION_HIGH "pinion.io/reclaim-high"
#define ANNOTATION_TARGET "pinion.io/reclaim-target"
#define ANNOTATION_MIN_FILE "pinion.io/reclaim-min-file"
/* A static pod's cgroup is named by its config hash, not by metadata.uid (the mirror pod the
 * apiserver shows has another uid): the kubelet sets these to that hash. */
#define ANNOTATION_CONFIG_HASH "kubernetes.io/config.hash"
#define ANNOTATION_CONFIG_MIRROR "kubernetes.io/config.mirror"

/* The memory.pressure_level levels of cgroup v1, or "" for none. */
static const char *pressure_level_name_at(size_t i) {
        static const char *const levels[] = { "low", "medium", "critical", "" };
        return i < ELEMENTSOF(levels) ? levels[i] : NULL;
}

static int parse_psi(const char *v, void *ret, const char **reason) {
        unsigned long stall, window;
        char kind[8], extra;
        if (!isempty(v) && (sscanf(v, "%7s %lu %lu%c", kind, &stall, &window, &extra) != 3 ||
                            !(streq(kind, "some") || streq(kind, "full")) || window < 500000 || window > 10000000 ||
                            stall == 0 || stall > window)) {
                *reason = "expected 'some|full STALL_US WINDOW_US' with a window of 500000..10000000 µs, or empty";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

#define FIELD(f) offsetof(struct reclaim_target_settings, f)
static const struct config_key target_keys[] = {
        { "cgroup", config_parse_path, FIELD(cgroup), NULL, config_free_string },
        { "high", plan_parse_level, FIELD(high), "90%" },
        { "target", plan_parse_level, FIELD(target), "80%" },
        { "min-file", config_parse_size, FIELD(min_file), "64M" },
        { "step", config_parse_size, FIELD(step), "32M" },
        { "interval", config_parse_duration, FIELD(interval), "10s" },
        { "pressure-level", config_parse_string, FIELD(pressure_level), "medium", config_free_string,
          pressure_level_name_at },
        /* A 2 s window: without CAP_SYS_RESOURCE (piniond.service withholds it) the kernel takes
         * only multiples of 2 s (Linux 6.5, and stable kernels since, e.g. Debian 12's 6.1). */
        { "psi", parse_psi, FIELD(psi), "some 100000 2000000", config_free_string },
        {}
};
#undef FIELD

/* Consistency that does not need the limit; the rest is checked against it at run time. */
static const char *settings_check(const struct reclaim_target_settings *t) {
        bool same_kind = t->high.is_percent == t->target.is_percent;
        if (same_kind && (t->high.is_percent ? t->target.percent >= t->high.percent : t->target.bytes >= t->high.bytes))
                return "target must be below high";
        if (t->interval < 100 * USEC_PER_MSEC)
                return "interval must be at least 100ms";
        if (t->step < (UINT64_C(1) << 20))
                return "step must be at least 1M";
        return NULL;
}

static const char *target_check(const void *object) {
        const struct reclaim_target_settings *t = object;
        if (!t->cgroup)
                return "cgroup (a path under the memory hierarchy, e.g. /system.slice/kube-apiserver.service) is required";
        _cleanup_free_ char *norm = NULL;
        if (memcg_path_normalize(t->cgroup, &norm) < 0)
                return "cgroup must be a path under the memory hierarchy without '.' or '..' components";
        if (streq(norm, "/"))
                return "cgroup must not be the root of the memory hierarchy (it has no limit to reclaim toward, and v1 refuses to set one)";
        return settings_check(t);
}

static struct reclaim_settings *reclaim_settings_free(struct reclaim_settings *s) {
        if (!s)
                return NULL;
        config_instances_free(target_keys, (void **) s->targets, s->n_targets);
        free(s);
        return NULL;
}

static struct reclaim_settings *reclaim_settings_free(struct reclaim_settings *s);

static int reclaim_parse(struct config *c, struct reclaim_settings **ret, char **ret_error) {
        struct reclaim_settings *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return -ENOMEM;
        r = config_parse_instances(c, "reclaim.", target_keys, sizeof(struct reclaim_target_settings),
                                   target_check, (void ***) &s->targets, &s->n_targets, ret_error);
        if (r < 0) {
                free(s);
                return r;
        }
        /* Two sections on one cgroup would fight over its limit and its record. */
        for (size_t j = 1; j < s->n_targets; j++)
                for (size_t i = 0; i < j; i++) {
                        _cleanup_free_ char *a = NULL, *b = NULL, *section = NULL;
                        if (memcg_path_normalize(s->targets[i]->cgroup, &a) < 0 ||
                            memcg_path_normalize(s->targets[j]->cgroup, &b) < 0 || !streq(a, b))
                                continue;
                        r = asprintf(&section, "reclaim.%s", s->targets[j]->name) < 0
                                    ? -ENOMEM
                                    : config_section_error(c, section, ret_error, "cgroup %s is already watched by [reclaim.%s]",
                                                           b, s->targets[i]->name);
                        reclaim_settings_free(s);
                        return r;
                }
        *ret = s;
        return 0;
}

/* ---- targets ---- */

static struct reclaim_target *find_target(struct reclaim *rc, const char *name, const char *pod_uid) {
        for (size_t i = 0; i < rc->n_targets; i++) {
                struct reclaim_target *t = rc->targets[i];
                if (pod_uid ? streq_ptr(target_pod_uid(t), pod_uid)
                            : !target_pod_uid(t) && streq(target_name(t), name))
                        return t;
        }
        return NULL;
}

static void remove_target_at(struct reclaim *rc, size_t i) {
        target_free(rc->targets[i]);
        memmove(rc->targets + i, rc->targets + i + 1, (rc->n_targets - i - 1) * sizeof(*rc->targets));
        rc->n_targets--;
}

static int add_target(struct reclaim *rc, const struct reclaim_target_settings *s, const char *pod_uid,
                      const char *pod_cgroup_id, const char *pod) {
        _cleanup_(target_freep) struct reclaim_target *t = NULL;
        int r = target_new(&rc->ctx, s, pod_uid, pod_cgroup_id, pod, &t);
        if (r < 0)
                return r;
        struct reclaim_target **a = realloc(rc->targets, (rc->n_targets + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        rc->targets = a;
        rc->targets[rc->n_targets++] = t;
        r = target_start(TAKE_PTR(t));
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Failed to start watching %s: %m", s->name);
        return 0;
}

/* The module's state from its targets: degraded names the first target that needs an
 * operator (missing cgroup, no limit, errors); unreachable is the workload's condition,
 * reported per target, not the agent's. */
static void update_module_state(void *userdata) {
        struct reclaim *rc = userdata;
        struct module_instance *mi = rc->mi;
        if (!mi || !rc->have_hierarchy || mi->manager->stopping)
                return;
        /* A pod whose opt-in was refused needs an operator even with nothing to reclaim: its
         * error stays in view (/v1/reclaim answers only while the module is not disabled). */
        if (rc->n_targets == 0 && strv_length(rc->pod_errors) > 0) {
                module_set_state(mi, MODULE_DEGRADED, "%s", rc->pod_errors[0]);
                return;
        }
        if (rc->n_targets == 0) {
                module_set_state(mi, MODULE_DISABLED, "no [reclaim.NAME] sections configured");
                return;
        }
        for (size_t i = 0; i < rc->n_targets; i++) {
                struct reclaim_target *t = rc->targets[i];
                enum target_state s = target_state(t);
                if (target_pod_uid(t) && s == TARGET_MISSING)
                        continue; /* a pod's cgroup comes and goes with the pod */
                if (s == TARGET_MISSING || s == TARGET_UNLIMITED || s == TARGET_ERROR) {
                        module_set_state(mi, MODULE_DEGRADED, "%s: %s", target_name(t), target_state_to_string(s));
                        return;
                }
        }
        module_set_state(mi, MODULE_RUNNING, NULL);
}

/* A pod's cgroup that a section watches already: the section wins, the pod is ignored. */
static const char *cgroup_taken(void *userdata, const char *path) {
        struct reclaim *rc = userdata;
        for (size_t i = 0; i < rc->n_targets; i++)
                if (!target_pod_uid(rc->targets[i]) && streq_ptr(target_cgroup(rc->targets[i]), path))
                        return target_name(rc->targets[i]);
        return NULL;
}

/* ---- pods ---- */

static bool valid_uid(const char *uid) {
        size_t n = strlen(uid);
        if (n == 0 || n > 64)
                return false;
        return strspn(uid, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") == n;
}

/* The settings a pod asks for: the defaults of a section, changed by its annotations.
 * Returns 0 if the pod did not opt in, 1 with *ret filled, or -EINVAL with *ret_reason. */
static int pod_settings(const struct pod *p, struct reclaim_target_settings *ret, const char **ret_reason) {
        const char *v = pod_annotation(p, ANNOTATION_RECLAIM);
        bool on = false;
        if (!v)
                return 0;
        if (parse_bool(v, &on) < 0) {
                *ret_reason = ANNOTATION_RECLAIM " must be true or false";
                return -EINVAL;
        }
        if (!on)
                return 0;
        if (!valid_uid(p->uid)) {
                *ret_reason = "the pod's uid is not a Kubernetes uid";
                return -EINVAL;
        }
        struct reclaim_target_settings s = {};
        for (const struct config_key *k = target_keys; k->key; k++)
                if (k->default_value && k->parse(k->default_value, (char *) &s + k->offset, ret_reason) < 0)
                        goto fail;
        const struct {
                const char *annotation;
                config_parser_t parse;
                void *field;
        } overrides[] = {
                { ANNOTATION_HIGH, plan_parse_level, &s.high },
                { ANNOTATION_TARGET, plan_parse_level, &s.target },
                { ANNOTATION_MIN_FILE, config_parse_size, &s.min_file },
        };
        for (size_t i = 0; i < ELEMENTSOF(overrides); i++) {
                const char *a = pod_annotation(p, overrides[i].annotation);
                if (a && overrides[i].parse(a, overrides[i].field, ret_reason) < 0) {
                        *ret_reason = overrides[i].field == &s.min_file
                                              ? ANNOTATION_MIN_FILE " must be a size (e.g. 64M)"
                                              : "pinion.io/reclaim-high and -target take a percentage (90%) or a size (900M)";
                        goto fail;
                }
        }
        if ((*ret_reason = settings_check(&s)))
                goto fail;
        if (asprintf(&s.name, "pod/%s/%s", p->namespace, p->name) < 0) {
                s.name = NULL;
                *ret_reason = "out of memory";
                goto fail;
        }
        *ret = s;
        return 1;
fail:
        target_settings_done(&s);
        return -EINVAL;
}

/* What the kubelet names the pod's cgroup by: a static pod's config hash, else its uid. */
static const char *pod_cgroup_id(const struct pod *p) {
        const char *v = pod_annotation(p, ANNOTATION_CONFIG_HASH);
        if (isempty(v))
                v = pod_annotation(p, ANNOTATION_CONFIG_MIRROR);
        return isempty(v) ? p->uid : v;
}

static void pod_error_forget(struct reclaim *rc, const char *pod) {
        size_t n = strlen(pod);
        for (char **e = rc->pod_errors; e && *e; e++)
                if (strncmp(*e, pod, n) == 0 && (*e)[n] == ':') {
                        free(*e);
                        memmove(e, e + 1, (strv_length(e + 1) + 1) * sizeof(char *));
                        return;
                }
}

static void on_pod(struct pod_store *store, const struct pod *old, const struct pod *new, void *userdata) {
        struct reclaim *rc = userdata;
        const struct pod *p = new ? new : old;
        _cleanup_free_ char *pod = NULL;
        (void) store;

        if (asprintf(&pod, "%s/%s", p->namespace, p->name) < 0)
                return;
        pod_error_forget(rc, pod);
        struct reclaim_target_settings s = {};
        const char *reason = NULL;
        int r = new ? pod_settings(new, &s, &reason) : 0;
        struct reclaim_target *t = find_target(rc, NULL, p->uid);
        const char *cgroup_id = new ? pod_cgroup_id(new) : NULL;
        if (r > 0 && !valid_uid(cgroup_id)) {
                r = -EINVAL;
                reason = ANNOTATION_CONFIG_HASH " is not a config hash";
                target_settings_done(&s);
        }
        if (r > 0 && t && !streq_ptr(target_pod_cgroup_id(t), cgroup_id)) {
                /* Another cgroup name: a new target (the old one restores and goes). */
                for (size_t i = 0; i < rc->n_targets; i++)
                        if (rc->targets[i] == t) {
                                remove_target_at(rc, i);
                                break;
                        }
                t = NULL;
        }

        if (r < 0) {
                log_ctx_full_errno((&(const struct log_ctx) { .module = MODULE, .pod_uid = p->uid, .pod = pod }), LOG_WARNING,
                                   0, "Ignoring the reclaim opt-in of pod %s: %s", pod, reason);
                char *e = NULL;
                if (asprintf(&e, "%s: %s", pod, reason) >= 0)
                        (void) strv_push(&rc->pod_errors, e); /* frees e on failure */
        }
        if (r <= 0) {
                if (t) {
                        for (size_t i = 0; i < rc->n_targets; i++)
                                if (rc->targets[i] == t) {
                                        log_ctx_full_errno((&(const struct log_ctx) { .module = MODULE, .pod_uid = p->uid, .pod = pod }),
                                                           LOG_INFO, 0, "No longer watching the memory cgroup of pod %s", pod);
                                        remove_target_at(rc, i);
                                        break;
                                }
                }
                update_module_state(rc); /* a target or a pod error came or went */
                return;
        }
        if (t) {
                r = 0;
                if (!target_settings_equal(&s, target_settings(t)))
                        r = target_update(t, &s);
        } else {
                log_ctx_full_errno((&(const struct log_ctx) { .module = MODULE, .pod_uid = p->uid, .pod = pod }), LOG_INFO, 0,
                                   "Pod %s opted in to page cache reclaim", pod);
                r = add_target(rc, &s, p->uid, cgroup_id, pod);
        }
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Failed to watch the memory cgroup of pod %s: %m", pod);
        target_settings_done(&s);
        update_module_state(rc);
}

/* ---- metrics ---- */

static void collect_reclaim(struct metrics *metrics, void *userdata);

static int register_metrics(struct reclaim *rc, struct manager *m) {
        struct reclaim_metrics *ret = &rc->ctx.metrics;
        static const char *const target[] = { "target", NULL };
        static const char *const target_state[] = { "target", "state", NULL };
        static const char *const target_source[] = { "target", "source", NULL };
        static const char *const target_kind[] = { "target", "kind", NULL };
        /* Reaction times: the goal is well under 100 ms; steps are single writes. */
        static const double reaction_buckets[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10 };
        static const double step_buckets[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1 };
        const struct metric_def families[] = {
                { METRIC_GAUGE, "pinion_reclaim_limit_bytes", "The memory limit of the target's cgroup.", target, NULL, 0, &ret->limit },
                { METRIC_GAUGE, "pinion_reclaim_usage_bytes", "Memory charged to the target's cgroup.", target, NULL, 0, &ret->usage },
                { METRIC_GAUGE, "pinion_reclaim_file_bytes", "Reclaimable page cache (active + inactive file) of the target's cgroup.", target, NULL, 0, &ret->file },
                { METRIC_GAUGE, "pinion_reclaim_anon_bytes", "Usage that is not reclaimable page cache (anonymous, shmem, kernel).", target, NULL, 0, &ret->anon },
                { METRIC_GAUGE, "pinion_reclaim_target_state", "1 for the state the target is in (missing, ok, reclaiming, unreachable, unlimited, error).", target_state, NULL, 0, &ret->state },
                { METRIC_COUNTER, "pinion_reclaim_reclaims_total", "Reclaim episodes done (usage at or above high brought back toward target).", target, NULL, 0, &ret->reclaims },
                { METRIC_COUNTER, "pinion_reclaim_reclaimed_bytes_total", "Bytes the target's usage dropped through reclaim steps.", target, NULL, 0, &ret->bytes },
                { METRIC_COUNTER, "pinion_reclaim_steps_total", "Reclaim writes (v1 memory.limit_in_bytes lowered and restored, v2 memory.reclaim).", target, NULL, 0, &ret->steps },
                { METRIC_COUNTER, "pinion_reclaim_step_errors_total", "Reclaim writes the kernel refused (busy: v1 EBUSY, again: v2 EAGAIN, error).", target_kind, NULL, 0, &ret->step_errors },
                { METRIC_COUNTER, "pinion_reclaim_lowered_limit_hits_total", "v1: memory.failcnt increments while a limit the agent lowered was in force (the throttle or a step's; charges that met it, not the original).", target, NULL, 0, &ret->lowered_hits },
                { METRIC_COUNTER, "pinion_reclaim_systemd_call_failures_total", "Calls to systemd (is the cgroup its unit's, MemoryHigh= set or restored) that failed: the log says the unit and the D-Bus error.", target, NULL, 0, &ret->systemd_failures },
                { METRIC_COUNTER, "pinion_reclaim_unreachable_total", "Times the target became unreachable (anonymous memory + min-file above it).", target, NULL, 0, &ret->unreachable },
                { METRIC_COUNTER, "pinion_reclaim_wakeups_total", "Wake-ups by source (threshold, backstop, pressure-level, psi, memory-events, cap, timer, start).", target_source, NULL, 0, &ret->wakeups },
                { METRIC_HISTOGRAM, "pinion_reclaim_reaction_seconds", "From the wake-up that saw usage at or above high to the end of the reclaim.", target, reaction_buckets, ELEMENTSOF(reaction_buckets), &ret->reaction },
                { METRIC_HISTOGRAM, "pinion_reclaim_step_seconds", "How long one reclaim step's writes took (on its thread, off the loop).", target, step_buckets, ELEMENTSOF(step_buckets), &ret->step_seconds },
        };
        if (rc->metrics_reg)
                return 0;
        return metrics_register(m->metrics, families, ELEMENTSOF(families), collect_reclaim, rc, &rc->metrics_reg);
}

static void collect_reclaim(struct metrics *metrics, void *userdata) {
        struct reclaim *rc = userdata;
        (void) metrics;
        /* Gauges are rebuilt: a target gone since the last scrape disappears. */
        metric_family_reset(rc->ctx.metrics.limit);
        metric_family_reset(rc->ctx.metrics.usage);
        metric_family_reset(rc->ctx.metrics.file);
        metric_family_reset(rc->ctx.metrics.anon);
        metric_family_reset(rc->ctx.metrics.state);
        for (size_t i = 0; i < rc->n_targets; i++)
                target_collect(rc->targets[i]);
}

/* ---- the module contract ---- */

static void reclaim_free_targets(struct reclaim *rc) {
        while (rc->n_targets > 0)
                remove_target_at(rc, rc->n_targets - 1);
        rc->targets = mfree(rc->targets);
}

static int reclaim_init(struct module_instance *mi, struct config *c, char **ret_error) {
        struct reclaim *rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        int r = reclaim_parse(c, &rc->settings, ret_error);
        if (r < 0) {
                free(rc);
                return r;
        }
        rc->mi = mi;
        mi->data = rc;
        return 0;
}

/* Starts a target for every section (reusing the running ones whose settings are unchanged) and
 * drops the ones no longer configured (their limits restored). */
static int apply_sections(struct reclaim *rc) {
        for (size_t i = rc->n_targets; i > 0; i--) {
                struct reclaim_target *t = rc->targets[i - 1];
                if (target_pod_uid(t))
                        continue;
                bool keep = false;
                for (size_t j = 0; j < rc->settings->n_targets; j++)
                        keep = keep || streq(rc->settings->targets[j]->name, target_name(t));
                if (!keep) {
                        log_module_info(MODULE, "%s: no longer configured", target_name(t));
                        remove_target_at(rc, i - 1);
                }
        }
        for (size_t j = 0; j < rc->settings->n_targets; j++) {
                const struct reclaim_target_settings *s = rc->settings->targets[j];
                struct reclaim_target *t = find_target(rc, s->name, NULL);
                int r;
                if (!t)
                        r = add_target(rc, s, NULL, NULL, NULL);
                else if (!target_settings_equal(s, target_settings(t)))
                        r = target_update(t, s);
                else
                        continue;
                if (r == -EBUSY) {
                        /* check_moves() saw it restored; it failed again since: stay put. */
                        log_module_warning(MODULE, "%s: stays on %s: its original memory limit could not be restored",
                                           s->name, target_cgroup(t));
                        continue;
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

static int reclaim_start(struct module_instance *mi) {
        struct reclaim *rc = mi->data;
        struct manager *m = mi->manager;
        int r;

        r = memcg_hierarchy(&rc->version, NULL);
        if (r < 0) {
                module_set_state(mi, MODULE_DISABLED, "no memory cgroup hierarchy on this node: %s", strerror(-r));
                module_set_synced(mi);
                return 0;
        }
        rc->have_hierarchy = true;
        rc->ctx.event = m->event;
        rc->ctx.state_changed = update_module_state;
        rc->ctx.cgroup_taken = cgroup_taken;
        rc->ctx.pod_events = m->pod_events;
        rc->ctx.userdata = rc;
        free(rc->ctx.record_dir);
        rc->ctx.record_dir = fs_path_join(m->settings.state_dir, "reclaim");
        if (!rc->ctx.record_dir)
                return -ENOMEM;
        r = register_metrics(rc, m);
        if (r < 0)
                return r;
        r = reclaim_api_register(mi);
        if (r < 0)
                return r;

        /* A crash mid-step left a limit lowered: put it back before anything else. */
        r = target_record_restore_leftovers(&rc->ctx);
        if (r == STATE_VERSION_ERR_NEWER)
                return r; /* logged, with the file and its version */

        r = apply_sections(rc);
        if (r < 0)
                return r;
        r = pod_store_add_observer(m->pods, on_pod, rc);
        if (r < 0)
                return r;
        rc->observing = true;
        /* The observer hears only changes: look at the pods already there. */
        _cleanup_free_ struct pod **pods = NULL;
        size_t n = 0;
        if (pod_store_list(m->pods, &pods, &n) >= 0)
                for (size_t i = 0; i < n; i++)
                        on_pod(m->pods, NULL, pods[i], rc);
        update_module_state(rc);
        module_set_synced(mi);
        return 0;
}

/* A section moving its target to another cgroup while the original limit of the old one could
 * not be put back yet: refused (the old cgroup would keep our lowered limit for good). */
static int check_moves(struct reclaim *rc, struct config *c, const struct reclaim_settings *s, char **ret_error) {
        for (size_t j = 0; j < s->n_targets; j++) {
                struct reclaim_target *t = find_target(rc, s->targets[j]->name, NULL);
                _cleanup_free_ char *norm = NULL, *section = NULL;
                if (!t || !target_restore_pending(t))
                        continue;
                if (memcg_path_normalize(s->targets[j]->cgroup, &norm) < 0 || streq_ptr(norm, target_cgroup(t)))
                        continue;
                if (asprintf(&section, "reclaim.%s", s->targets[j]->name) < 0)
                        return -ENOMEM;
                return config_section_error(c, section, ret_error,
                                            "cannot move to cgroup %s: the original memory limit of %s could not be restored yet",
                                            norm, target_cgroup(t));
        }
        return 0;
}

static int reclaim_reload(struct module_instance *mi, struct config *c, char **ret_error) {
        struct reclaim *rc = mi->data;
        struct reclaim_settings *s = NULL;
        int r = reclaim_parse(c, &s, ret_error);
        if (r < 0)
                return r;
        r = check_moves(rc, c, s, ret_error);
        if (r < 0) {
                reclaim_settings_free(s);
                return r;
        }
        reclaim_settings_free(rc->settings);
        rc->settings = s;
        if (!rc->have_hierarchy)
                return 0;
        r = apply_sections(rc);
        if (r < 0)
                module_set_state(mi, MODULE_FAILED, "cannot apply the new [reclaim.NAME] sections: %s", strerror(-r));
        else
                update_module_state(rc);
        return 0;
}

/* Stopping restores every limit and forgets the records (target free does both). */
static int reclaim_stop(struct module_instance *mi) {
        struct reclaim *rc = mi->data;
        if (rc->observing)
                pod_store_remove_observer(mi->manager->pods, on_pod, rc);
        rc->observing = false;
        reclaim_free_targets(rc);
        rc->ctx.bus = unit_cap_bus_free(rc->ctx.bus);
        rc->routes = api_routes_free(rc->routes);
        rc->metrics_reg = metrics_registration_free(rc->metrics_reg);
        return 0;
}

static int reclaim_status(struct module_instance *mi, cJSON *obj) {
        struct reclaim *rc = mi->data;
        cJSON *names = cJSON_AddArrayToObject(obj, "targets");
        if (!names)
                return -ENOMEM;
        for (size_t i = 0; i < rc->settings->n_targets; i++)
                if (!cJSON_AddItemToArray(names, cJSON_CreateString(rc->settings->targets[i]->name)))
                        return -ENOMEM;
        if (rc->have_hierarchy) {
                size_t counts[_TARGET_STATE_MAX] = {}, pods = 0;
                for (size_t i = 0; i < rc->n_targets; i++) {
                        counts[target_state(rc->targets[i])]++;
                        pods += target_pod_uid(rc->targets[i]) != NULL;
                }
                cJSON *c = cJSON_AddObjectToObject(obj, "states");
                if (!c || !cJSON_AddNumberToObject(obj, "cgroup_version", rc->version) ||
                    !cJSON_AddNumberToObject(obj, "pods", (double) pods))
                        return -ENOMEM;
                for (int i = 0; i < _TARGET_STATE_MAX; i++)
                        if (counts[i] && !cJSON_AddNumberToObject(c, target_state_to_string(i), (double) counts[i]))
                                return -ENOMEM;
        }
        return 0;
}

static void reclaim_free(struct module_instance *mi) {
        struct reclaim *rc = mi->data;
        if (!rc)
                return;
        if (rc->observing)
                pod_store_remove_observer(mi->manager->pods, on_pod, rc);
        reclaim_free_targets(rc);
        rc->ctx.bus = unit_cap_bus_free(rc->ctx.bus);
        api_routes_free(rc->routes);
        metrics_registration_free(rc->metrics_reg);
        strv_free(rc->pod_errors);
        free(rc->ctx.record_dir);
        reclaim_settings_free(rc->settings);
        free(rc);
        mi->data = NULL;
}

/* Memory cgroup files may belong to other users (delegated cgroups): CAP_DAC_OVERRIDE, which the
 * shipped unit withholds (a drop-in grants it), is kept when granted. Any pod may opt in by
 * annotation, so the need does not depend on the settings. */
static uint64_t reclaim_capabilities(struct module_instance *mi, const struct config *c) {
        return CAP_TO_MASK64(CAP_DAC_OVERRIDE);
}

/* The routes reclaim-api.c registers, for the core to answer while they are not served. */
static const struct module_route reclaim_routes[] = {
        { "GET", "/v1/reclaim", MODULE_ROUTE_PRIVILEGED },
        {},
};

static bool reclaim_configured(const struct module_instance *mi, const struct config *c) {
        const struct reclaim *rc = mi->data;
        return rc->settings->n_targets > 0;
}

const struct module reclaim_module = {
        .name = "reclaim",
        .routes = reclaim_routes,
        .init = reclaim_init,
        .configured = reclaim_configured,
        .start = reclaim_start,
        .reload = reclaim_reload,
        .stop = reclaim_stop,
        .status = reclaim_status,
        .free = reclaim_free,
        .capabilities = reclaim_capabilities,
};
