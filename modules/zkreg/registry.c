/* SPDX-License-Identifier: MIT */
/* The registrations (see registry.h): the pod store, the pod gates and the health checks give
 * each registration its wanted side; the work queues feed their steps (reg.c) to
 * ZooKeeper; drain, shutdown and /v1/registrations look at all of them. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "manager.h"
#include "registration.h"
#include "strv.h"

/* ---- the work queues ---- */

void registry_unqueue(struct registration *reg) {
        struct reg_queue *q = reg->queue;
        struct registration **pp, *prev = NULL;

        if (!q)
                return;
        for (pp = &q->head; *pp && *pp != reg; pp = &(*pp)->q_next)
                prev = *pp;
        if (*pp)
                *pp = reg->q_next;
        if (q->tail == reg)
                q->tail = prev;
        reg->q_next = NULL;
        reg->queue = NULL;
}

void registry_kick(struct registration *reg) {
        struct registry *r = reg->registry;
        struct reg_queue *q = reg_urgent(reg) ? &r->urgent : &r->normal;

        if (reg->queue == &r->normal && q == &r->urgent)
                registry_unqueue(reg); /* moves to the urgent queue below */
        if (!reg->queue) {
                reg->queue = q;
                reg->q_next = NULL;
                if (q->tail)
                        q->tail->q_next = reg;
                else
                        q->head = reg;
                q->tail = reg;
        }
        if (r->dispatch && !(r->dispatch_timer && sd_event_source_get_enabled(r->dispatch_timer, NULL) > 0))
                (void) sd_event_source_set_enabled(r->dispatch, SD_EVENT_ONESHOT);
}

static int on_dispatch(sd_event_source *src, void *userdata) {
        struct registry *r = userdata;

        (void) src;
        for (;;) {
                struct reg_queue *q = r->urgent.head ? &r->urgent : &r->normal;
                struct registration *reg = q->head;

                if (!reg)
                        break;
                q->head = reg->q_next;
                if (!q->head)
                        q->tail = NULL;
                reg->q_next = NULL;
                reg->queue = NULL;
                if (!reg_step(reg)) {
                        /* No token: back to the head of its queue; the timer resumes. */
                        reg->queue = q;
                        reg->q_next = q->head;
                        q->head = reg;
                        if (!q->tail)
                                q->tail = reg;
                        break;
                }
        }
        /* The pass's writes go out together, as the requests it paid for. */
        if (r->ops)
                zk_ops_flush(r->ops);
        write_pacer_flush(&r->pacer);
        return 0;
}

static int on_dispatch_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        (void) usec;
        return on_dispatch(src, userdata);
}

/* ---- wanted side: from the pod, its gates and its health ---- */

static void reg_evaluate(struct registration *reg);

static void on_health(struct health *h, bool ok, const char *error, bool changed, void *userdata) {
        struct registration *reg = userdata;
        struct registry *r = reg->registry;

        (void) error;
        (void) metric_inc(r->m_health, health_kind_to_string(health_get_spec(h)->kind), ok ? "ok" : "fail");
        if (changed)
                (void) log_reg_full_errno(reg, LOG_INFO, 0, "Health check of %s: %s%s%s", health_target(h),
                               health_is_healthy(h) ? "healthy" : "unhealthy", health_is_healthy(h) ? "" : ": ",
                               health_is_healthy(h) ? "" : strempty(health_reason(h)));
        /* A verdict change moves the registration; a failure while unhealthy refreshes its reason. */
        if (changed || !health_is_healthy(h))
                reg_evaluate(reg);
}

/* Sets why_not (NULL if registrable) and the wanted data. */
static void reg_compute(struct registration *reg, char **ret_why) {
        struct registry *r = reg->registry;
        const struct pod *p = reg->pod;
        _cleanup_free_ char *error = NULL;
        struct health_spec spec;
        int k;

        *ret_why = NULL;
        if (!p) {
                *ret_why = strdup("the pod is gone");
                return;
        }
        if (r->shutting_down) {
                *ret_why = strdup("the agent is stopping");
                return;
        }
        if (!serverset_path_valid(reg->parent)) {
                if (asprintf(ret_why, ANNOTATION_SERVERSET "=%s is not a valid ZooKeeper path", strempty(reg->parent)) < 0)
                        *ret_why = NULL;
                return;
        }
        {
                _cleanup_free_ char *floor = NULL;
                k = serverset_path_allowed(reg->parent, r->allowed_prefixes, p->namespace, &floor, &error);
                if (k < 0) {
                        *ret_why = error ? TAKE_PTR(error) : strdup(strerror(-k));
                        return;
                }
                free(reg->parent_floor);
                reg->parent_floor = TAKE_PTR(floor);
        }
        struct serverset_entry entry;
        k = serverset_build(p, &entry, &error);
        if (k < 0) {
                *ret_why = error ? TAKE_PTR(error) : strdup(strerror(-k));
                return;
        }
        serverset_entry_done(&reg->entry);
        reg->entry = entry;

        /* Health: (re)create the checker when its target or spec changes. */
        if (health_spec_from_pod(p, &spec, &error) < 0) {
                *ret_why = TAKE_PTR(error);
                reg->health = health_free(reg->health);
                return;
        }
        const char *ip = pod_primary_ip(p);
        unsigned port = reg->entry.port;
        if (spec.kind == HEALTH_NONE)
                reg->health = health_free(reg->health);
        else if (reg->health && !health_spec_equal(health_get_spec(reg->health), &spec) &&
                 streq_ptr(reg->health_ip, ip) && reg->health_port == port &&
                 health_update_timing(reg->health, &spec))
                ; /* only the timing changed: the same check goes on, healthy stays healthy */
        else if (!reg->health || !health_spec_equal(health_get_spec(reg->health), &spec) ||
                 !streq_ptr(reg->health_ip, ip) || reg->health_port != port) {
                struct http_client *http = NULL;
                reg->health = health_free(reg->health);
                if (manager_http(r->manager, &http) < 0 ||
                    health_new(r->event, http, &spec, ip, port, on_health, reg, &reg->health) < 0) {
                        *ret_why = strdup("cannot start the health check");
                        return;
                }
                (void) reg_set_string(&reg->health_ip, ip);
                reg->health_port = port;
        }

        if (r->drained) {
                *ret_why = strdup("drained");
                return;
        }
        if (!pod_is_ready(p)) {
                *ret_why = strdup("the pod is not Ready");
                return;
        }
        k = pod_gates_check(r->manager->pod_gates, p, &error);
        if (k <= 0) {
                if (!error && asprintf(&error, "a readiness gate is closed (%s)", k < 0 ? strerror(-k) : "no reason given") < 0)
                        error = NULL;
                *ret_why = TAKE_PTR(error);
                return;
        }
        if (reg->health && !health_is_healthy(reg->health)) {
                *ret_why = strdup(strempty(health_reason(reg->health)));
                return;
        }
}

static void reg_evaluate(struct registration *reg) {
        struct registry *r = reg->registry;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        bool was = reg->goal != REG_GOAL_NONE;
        char *why = NULL;

        reg_compute(reg, &why);
        /* A drained member keeps its goal until the drain delay has passed (reg_step ends it). */
        if (reg->goal == REG_GOAL_STOPPING && why && streq(why, "drained") && reg->pod) {
                free(why);
                registry_kick(reg);
                return;
        }
        reg->goal = why ? REG_GOAL_NONE : REG_GOAL_ALIVE;
        free(reg->why_not);
        reg->why_not = why;
        if (why)
                reg_set_error(reg, why);
        else if (!was)
                reg_set_error(reg, NULL);

        /* A pod that flaps comes back later each time. */
        usec_t hold = reg_plan_flap(&reg->flaps, was, reg->goal != REG_GOAL_NONE, now, r->config.flap_damping);
        if (hold > reg->not_before) {
                char buf[128];
                reg->not_before = hold;
                snprintf(buf, sizeof(buf), "flap damping: registering again in %llums",
                         (unsigned long long) ((hold - now) / USEC_PER_MSEC));
                reg_set_error(reg, buf);
                (void) log_reg_full_errno(reg, LOG_INFO, 0, "Pod flapping (%u times in a minute): %s", reg->flaps.count, buf);
        }
        reg_update(reg);
        registry_kick(reg);
}

/* Undrained (or shutting down): a STOPPING member wants its ALIVE data again, until the next
 * evaluation says otherwise. */
static void reg_end_drain(struct registration *reg) {
        if (reg->goal == REG_GOAL_STOPPING)
                reg->goal = REG_GOAL_ALIVE;
}

/* ---- the set of registrations ---- */

static void on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct registry *r = userdata;
        const struct pod *p = new ? new : old;
        struct registration *reg = reg_by_uid(r, p->uid);
        const char *path = new ? pod_annotation(new, ANNOTATION_SERVERSET) : NULL;

        (void) s;
        if (isempty(path)) {
                if (reg && reg->pod) {
                        reg->pod = pod_unref(reg->pod);
                        reg->health = health_free(reg->health);
                        reg_evaluate(reg);
                }
                return;
        }
        if (!reg) {
                reg = reg_new(r, new);
                if (!reg) {
                        log_module_error(MODULE, "Out of memory: cannot track pod %s/%s", new->namespace, new->name);
                        return;
                }
        }
        pod_unref(reg->pod);
        reg->pod = pod_ref((struct pod *) new);
        (void) reg_set_string(&reg->parent, path);
        reg_evaluate(reg);
}

static void on_gates(struct pod_gates *g, const char *uid, void *userdata) {
        struct registry *r = userdata;

        (void) g;
        if (uid) {
                struct registration *reg = reg_by_uid(r, uid);
                if (reg && reg->pod)
                        reg_evaluate(reg);
                return;
        }
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                if (reg->pod)
                        reg_evaluate(reg);
}

static void on_node_event(int type, const char *path, void *userdata) {
        member_watch_event(userdata, type, path);
}

static int registry_register_metrics(struct registry *r) {
        static const char *const state[] = { "state", NULL };
        static const char *const check_result[] = { "check", "result", NULL };
        const struct metric_def families[] = {
                { METRIC_GAUGE, "pinion_zookeeper_registrations",
                  "Registrations by state (unready, pending, registering, registered, stopping, deregistering).", state,
                  NULL, 0, &r->m_regs },
                { METRIC_COUNTER, "pinion_zookeeper_registrations_created_total", "Member znodes created.", NULL, NULL,
                  0, &r->m_registered_total },
                { METRIC_GAUGE, "pinion_zookeeper_watched_members",
                  "Members of ours under a path whose child watch is armed: a delete by someone else is noticed at once (the others' paths are being listed, or wait for the session).",
                  NULL, NULL, 0, &r->m_watched },
                { METRIC_COUNTER, "pinion_zookeeper_health_checks_total",
                  "Health checks run by check (tcp, http) and result (ok, fail).", check_result, NULL, 0, &r->m_health },
        };
        int k = metrics_families(r->manager->metrics, families, ELEMENTSOF(families));

        if (k < 0)
                return k;
        /* Every check and result at zero from the start (a pod with no check runs none). */
        for (enum health_kind h = HEALTH_TCP; h < _HEALTH_KIND_MAX; h++) {
                (void) metric_touch(r->m_health, health_kind_to_string(h), "ok");
                (void) metric_touch(r->m_health, health_kind_to_string(h), "fail");
        }
        return 0;
}

int registry_new(struct manager *m, struct zk_session *session, const struct registry_config *config,
                 struct registry **ret) {
        _cleanup_(registry_freep) struct registry *r = NULL;
        int k;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->manager = m;
        r->event = sd_event_ref(m->event);
        r->session = session;
        r->config = *config;
        k = strv_copy(config->allowed_prefixes, &r->allowed_prefixes);
        if (k < 0)
                return k;
        r->config.allowed_prefixes = r->allowed_prefixes;
        r->drained = config->drained;
        write_pacer_init(&r->pacer, config->write_qps, config->max_ops_per_write, now_usec(CLOCK_MONOTONIC));
        k = zk_ops_new(r->event, session, m->metrics, reg_on_orphan, r, &r->ops);
        if (k < 0)
                return k;
        zk_ops_set_max_ops(r->ops, r->pacer.max_ops);
        k = registry_register_metrics(r);
        if (k < 0)
                return k;
        k = sd_event_add_defer(r->event, &r->dispatch, on_dispatch, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_enabled(r->dispatch, SD_EVENT_OFF);
        k = sd_event_add_time(r->event, &r->dispatch_timer, CLOCK_MONOTONIC, 0, 0, on_dispatch_timer, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_enabled(r->dispatch_timer, SD_EVENT_OFF);
        k = pod_store_add_observer(m->pods, on_pod, r);
        if (k < 0)
                return k;
        r->observing = true;
        k = pod_gates_add_listener(m->pod_gates, on_gates, r);
        if (k < 0)
                return k;
        r->listening = true;
        zk_session_set_node_event(session, on_node_event, r);

        /* The pods already in the store. */
        struct pod **pods = NULL;
        size_t n = 0;
        k = pod_store_list(m->pods, &pods, &n);
        if (k < 0)
                return k;
        for (size_t i = 0; i < n; i++)
                on_pod(m->pods, NULL, pods[i], r);
        free(pods);
        *ret = TAKE_PTR(r);
        return 0;
}

struct registry *registry_free(struct registry *r) {
        if (!r)
                return NULL;
        if (r->observing)
                pod_store_remove_observer(r->manager->pods, on_pod, r);
        if (r->listening)
                pod_gates_remove_listener(r->manager->pod_gates, on_gates, r);
        zk_session_set_node_event(r->session, NULL, NULL);
        /* Operations still in flight complete when the session's handle closes, to no one. */
        r->ops = zk_ops_free(r->ops);
        while (r->regs)
                reg_free(r->regs);
        sd_event_source_disable_unref(r->dispatch);
        sd_event_source_disable_unref(r->dispatch_timer);
        sd_event_unref(r->event);
        strv_free(r->allowed_prefixes);
        free(r);
        return NULL;
}

int registry_set_config(struct registry *r, const struct registry_config *config) {
        char **prefixes = NULL;
        int k = strv_copy(config->allowed_prefixes, &prefixes);
        if (k < 0)
                return k;
        strv_free(r->allowed_prefixes);
        r->allowed_prefixes = prefixes;
        r->config = *config;
        r->config.allowed_prefixes = r->allowed_prefixes;
        write_pacer_set(&r->pacer, config->write_qps, config->max_ops_per_write, now_usec(CLOCK_MONOTONIC));
        zk_ops_set_max_ops(r->ops, r->pacer.max_ops);
        /* allowed-prefixes may have changed: check every path again. */
        for (struct registration *reg = r->regs, *next; reg; reg = next) {
                next = reg->next;
                if (reg->pod)
                        reg_evaluate(reg);
        }
        return 0;
}

void registry_session_changed(struct registry *r, enum zk_session_state old, enum zk_session_state new) {
        (void) old;
        if (!r)
                return;
        if (new == ZK_SESSION_EXPIRED || new == ZK_SESSION_CLOSED || new == ZK_SESSION_CONNECTED) {
                int64_t sid = zk_session_id(r->session);
                for (struct registration *reg = r->regs; reg; reg = reg->next)
                        reg_session_changed(reg, new, sid);
        }
        for (struct registration *reg = r->regs, *next; reg; reg = next) {
                next = reg->next;
                reg_update(reg);
                registry_kick(reg);
        }
        member_watch_session_changed(r, new);
        if (r->shutting_down && new != ZK_SESSION_CONNECTED)
                registry_check_done(r);
}

static bool registry_has_nodes(const struct registry *r) {
        for (const struct registration *reg = r->regs; reg; reg = reg->next)
                if (reg->znode || reg->inflight != REG_OP_NONE || reg->lost)
                        return true;
        return zk_ops_deleting(r->ops, NULL);
}

void registry_check_done(struct registry *r) {
        registry_done_fn done = r->done;

        if (!done)
                return;
        if (registry_has_nodes(r) && zk_session_state(r->session) == ZK_SESSION_CONNECTED)
                return;
        r->done = NULL;
        done(r, r->done_userdata);
}

int registry_shutdown(struct registry *r, registry_done_fn done, void *userdata) {
        r->shutting_down = true;
        for (struct registration *reg = r->regs; reg; reg = reg->next) {
                reg_end_drain(reg);
                reg->not_before = 0;
                reg_evaluate(reg);
        }
        if (!registry_has_nodes(r))
                return 0;
        (void) log_module_info(MODULE, "Deregistering %zu registrations before closing the session", r->n_regs);
        r->done = done;
        r->done_userdata = userdata;
        return 1;
}

void registry_abandon(struct registry *r) {
        r->shutting_down = true;
        r->done = NULL;
}

size_t registry_drain(struct registry *r) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        size_t n = 0;

        r->drained = true;
        for (struct registration *reg = r->regs; reg; reg = reg->next) {
                if (reg->goal == REG_GOAL_ALIVE && reg->znode) {
                        reg->goal = REG_GOAL_STOPPING;
                        reg->drain_until = now + r->config.drain_delay;
                        n++;
                        reg_set_error(reg, "drained: marked STOPPING, removed after drain-delay");
                }
                reg_evaluate(reg);
        }
        log_module_info(MODULE, "Drain: %zu registrations marked STOPPING, removed in %llums; no new registrations", n,
                        (unsigned long long) (r->config.drain_delay / USEC_PER_MSEC));
        return n;
}

void registry_undrain(struct registry *r) {
        r->drained = false;
        for (struct registration *reg = r->regs; reg; reg = reg->next) {
                reg_end_drain(reg);
                reg_evaluate(reg);
        }
        log_module_info(MODULE, "Undrained: registering ready pods again");
}

bool registry_drained(const struct registry *r) {
        return r && r->drained;
}

static int reg_cmp(const void *a, const void *b) {
        const struct registration *x = *(const struct registration *const *) a, *y = *(const struct registration *const *) b;
        return strcmp(x->name, y->name);
}

int registry_list_json(struct registry *r, cJSON **ret) {
        _cleanup_free_ struct registration **v = NULL;
        cJSON *arr = cJSON_CreateArray();
        size_t n = 0;

        if (!arr)
                return -ENOMEM;
        v = calloc(r->n_regs + 1, sizeof(*v));
        if (!v) {
                cJSON_Delete(arr);
                return -ENOMEM;
        }
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                v[n++] = reg;
        qsort(v, n, sizeof(*v), reg_cmp);
        for (size_t i = 0; i < n; i++) {
                struct registration *reg = v[i];
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(arr, o) || !cJSON_AddStringToObject(o, "pod", reg->name) ||
                    !cJSON_AddStringToObject(o, "uid", reg->uid) || !json_add_string_or_null(o, "path", reg->parent) ||
                    !json_add_string_or_null(o, "znode", reg->znode) ||
                    !cJSON_AddStringToObject(o, "state", reg_plan_state_to_string(reg->state)) ||
                    !json_add_time(o, "last_change", reg->last_change) ||
                    !json_add_string_or_null(o, "last_error", reg_shown_error(reg)) ||
                    !json_add_string_or_null(o, "endpoint", reg->entry.endpoint)) {
                        cJSON_Delete(arr);
                        return -ENOMEM;
                }
                if (reg->health) {
                        cJSON *h = cJSON_AddObjectToObject(o, "health");
                        if (!h || !cJSON_AddStringToObject(h, "check", health_kind_to_string(health_get_spec(reg->health)->kind)) ||
                            !cJSON_AddBoolToObject(h, "healthy", health_is_healthy(reg->health)) ||
                            !json_add_string_or_null(h, "target", health_target(reg->health))) {
                                cJSON_Delete(arr);
                                return -ENOMEM;
                        }
                }
        }
        *ret = arr;
        return 0;
}

int registry_status(struct registry *r, cJSON *obj) {
        unsigned counts[_REG_STATE_MAX] = {};
        cJSON *o;

        if (!r)
                return 0;
        for (struct registration *reg = r->regs; reg; reg = reg->next)
                counts[reg->state]++;
        o = cJSON_AddObjectToObject(obj, "registrations");
        if (!o)
                return -ENOMEM;
        for (enum reg_state s = 0; s < _REG_STATE_MAX; s++)
                if (!cJSON_AddNumberToObject(o, reg_plan_state_to_string(s), counts[s]))
                        return -ENOMEM;
        if (!cJSON_AddBoolToObject(obj, "drained", r->drained))
                return -ENOMEM;
        return 0;
}

void registry_collect_metrics(struct registry *r) {
        unsigned counts[_REG_STATE_MAX] = {};

        for (struct registration *reg = r->regs; reg; reg = reg->next)
                counts[reg->state]++;
        for (enum reg_state s = 0; s < _REG_STATE_MAX; s++)
                (void) metric_set(r->m_regs, counts[s], reg_plan_state_to_string(s));
        (void) metric_set(r->m_watched, member_watch_armed_members(r));
}
