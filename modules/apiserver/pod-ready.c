/* SPDX-License-Identifier: MIT */
/* The pinion.io/ready condition (pod-ready.h): decided from the pod gates, written through the
 * module's write queue. */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "log.h"
#include "pod-gates.h"
#include "pod-ready.h"
#include "pod-store.h"
#include "timer.h"

#define MODULE "apiserver"
#define CONFLICT_RETRY_MAX (30 * USEC_PER_SEC)
#define MESSAGE_MAX 1024

/* What the condition says (or should say). */
struct verdict {
        bool status;
        char *reason;
        char *message;
};

/* A pod with the gate. */
struct ready_pod {
        char *uid;
        usec_t first_seen; /* monotonic */
        usec_t last_write; /* monotonic, 0: never */
        usec_t not_before; /* monotonic: after a conflict or a refusal */
        unsigned conflicts;
        bool written;             /* `wrote` is newer than what the watch has shown */
        struct verdict wrote;     /* the last write that went through */
        struct verdict in_flight; /* the write being sent */
        bool refused_logged;
};

struct pod_ready {
        struct manager *manager;
        struct kube_writer *writer;
        struct kube_write_client client;
        usec_t grace;
        usec_t refused_retry; /* after a 403/422: RBAC or a policy may be fixed meanwhile */
        struct pod_ready_metrics metrics;
        bool observing, listening;

        struct ready_pod **pods;
        size_t n_pods;
        sd_event_source *timer;
        char *error;
        uint64_t n_written, n_conflicts, n_refused;
};

static void verdict_done(struct verdict *v) {
        v->reason = mfree(v->reason);
        v->message = mfree(v->message);
}

static bool verdict_matches(const struct verdict *v, const struct pod_condition *c) {
        return c && c->status == v->status && streq_ptr(c->reason, v->reason) && streq_ptr(c->message, v->message);
}

static bool verdict_equal(const struct verdict *a, const struct verdict *b) {
        return a->status == b->status && streq_ptr(a->reason, b->reason) && streq_ptr(a->message, b->message);
}

/* "configs" -> "ConfigPending": the gate's name, singular, capitalised. */
static int pending_reason(const char *gate, char **ret) {
        size_t n = strlen(gate);
        char *s;

        if (n > 1 && gate[n - 1] == 's')
                n--;
        if (asprintf(&s, "%.*sPending", (int) n, gate) < 0)
                return -ENOMEM;
        s[0] = (char) toupper((unsigned char) s[0]);
        for (char *c = s; *c; c++)
                if (!isalnum((unsigned char) *c))
                        *c = 'X'; /* a reason is CamelCase letters; gate names are words */
        *ret = s;
        return 0;
}

static int decide(const struct pod_ready *pr, const struct pod *p, struct verdict *ret) {
        _cleanup_free_ char *first = NULL, *reasons = NULL;
        int r;

        r = pod_gates_check_scope(pr->manager->pod_gates, p, POD_GATE_CONDITION, &first, &reasons);
        if (r < 0)
                return r;
        if (r > 0) {
                *ret = (struct verdict) { .status = true, .reason = strdup("JobsReady"),
                                          .message = strdup("every job the pod asked for is in place") };
                return ret->reason && ret->message ? 0 : -ENOMEM;
        }
        *ret = (struct verdict) { .status = false };
        r = pending_reason(first, &ret->reason);
        if (r < 0)
                return r;
        if (reasons && strlen(reasons) > MESSAGE_MAX)
                reasons[MESSAGE_MAX] = 0;
        ret->message = TAKE_PTR(reasons);
        return 0;
}

/* ---- the pods with the gate ---- */

static bool wants_condition(const struct pod_ready *pr, const struct pod *p) {
        return p && pod_has_readiness_gate(p, POD_READY_CONDITION) && startswith(strempty(p->source), POD_SOURCE_APISERVER) &&
               streq_ptr(p->node_name, pr->manager->settings.node_name);
}

static struct ready_pod *find_pod(const struct pod_ready *pr, const char *uid, size_t *ret_index) {
        for (size_t i = 0; i < pr->n_pods; i++)
                if (streq(pr->pods[i]->uid, uid)) {
                        if (ret_index)
                                *ret_index = i;
                        return pr->pods[i];
                }
        return NULL;
}

static struct ready_pod *ready_pod_free(struct ready_pod *rp) {
        if (!rp)
                return NULL;
        verdict_done(&rp->wrote);
        verdict_done(&rp->in_flight);
        free(rp->uid);
        free(rp);
        return NULL;
}

static struct ready_pod *add_pod(struct pod_ready *pr, const char *uid) {
        struct ready_pod **grown = realloc(pr->pods, (pr->n_pods + 1) * sizeof(*pr->pods));
        struct ready_pod *rp;

        if (!grown)
                return NULL;
        pr->pods = grown;
        rp = calloc(1, sizeof(*rp));
        if (!rp || !(rp->uid = strdup(uid)))
                return ready_pod_free(rp);
        rp->first_seen = now_usec(CLOCK_MONOTONIC);
        pr->pods[pr->n_pods++] = rp;
        return rp;
}

static void forget_pod(struct pod_ready *pr, const char *uid) {
        size_t i;
        struct ready_pod *rp = find_pod(pr, uid, &i);

        if (!rp)
                return;
        kube_writer_forget(pr->writer, &pr->client, uid);
        ready_pod_free(rp);
        memmove(&pr->pods[i], &pr->pods[i + 1], (pr->n_pods - i - 1) * sizeof(*pr->pods));
        pr->n_pods--;
}

/* ---- deciding when to write ---- */

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata);

static void arm_timer(struct pod_ready *pr, usec_t when) {
        int r = timer_arm(pr->manager->event, &pr->timer, CLOCK_MONOTONIC, when, USEC_PER_MSEC / 10, true, on_timer, pr);
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Cannot arm the condition timer: %m");
}

/* What the apiserver says now, as far as we know: our last write until the watch shows it. */
static const struct verdict *effective(struct ready_pod *rp, const struct pod_condition *shown, struct verdict *buf) {
        if (rp->written && verdict_matches(&rp->wrote, shown))
                rp->written = false; /* the watch caught up: from now on it is the truth */
        if (rp->written)
                return &rp->wrote;
        if (!shown)
                return NULL;
        *buf = (struct verdict) { .status = shown->status, .reason = shown->reason, .message = shown->message };
        return buf;
}

/* Whether p needs a write now; *ret_later is when to ask again if not (0: no need). */
static bool needs_write(struct pod_ready *pr, struct ready_pod *rp, const struct pod *p, usec_t now, usec_t *ret_later) {
        _cleanup_(verdict_done) struct verdict want = {};
        struct verdict buf;
        const struct verdict *have;
        usec_t at;

        *ret_later = 0;
        if (decide(pr, p, &want) < 0)
                return false;
        have = effective(rp, pod_condition_find(p, POD_READY_CONDITION), &buf);
        if (have && verdict_equal(have, &want))
                return false;
        at = rp->not_before;
        /* A False waits out the grace (the kubelet already reads a missing condition as not ready),
         * and repeats at most once per grace; a True, or a True that no longer holds, goes now. */
        if (!want.status && !(have && have->status))
                at = MAX(at, MAX(rp->first_seen + pr->grace, rp->last_write ? rp->last_write + pr->grace : 0));
        if (at > now) {
                *ret_later = at;
                return false;
        }
        return true;
}

static void consider(struct pod_ready *pr, const struct pod *p) {
        struct ready_pod *rp;
        usec_t later;

        if (!wants_condition(pr, p)) {
                if (p)
                        forget_pod(pr, p->uid);
                return;
        }
        rp = find_pod(pr, p->uid, NULL);
        if (!rp && !(rp = add_pod(pr, p->uid))) {
                log_module_error(MODULE, "Cannot follow pod %s/%s's %s condition: out of memory", p->namespace, p->name,
                                 POD_READY_CONDITION);
                return;
        }
        if (needs_write(pr, rp, p, now_usec(CLOCK_MONOTONIC), &later)) {
                int r = kube_writer_want(pr->writer, &pr->client, rp->uid);
                if (r < 0)
                        log_module_warning_errno(MODULE, r, "Cannot queue pod %s/%s's %s condition: %m", p->namespace,
                                                 p->name, POD_READY_CONDITION);
        } else {
                kube_writer_forget(pr->writer, &pr->client, rp->uid);
                if (later)
                        arm_timer(pr, later);
        }
}

static void consider_all(struct pod_ready *pr) {
        _cleanup_free_ struct pod **pods = NULL;
        size_t n = 0;

        if (pod_store_list(pr->manager->pods, &pods, &n) < 0)
                return;
        for (size_t i = 0; i < n; i++)
                consider(pr, pods[i]);
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct pod_ready *pr = userdata;
        (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        consider_all(pr);
        return 0;
}

static void on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct pod_ready *pr = userdata;

        if (!new) {
                forget_pod(pr, old->uid);
                return;
        }
        consider(pr, new);
}

static void on_gates(struct pod_gates *g, const char *uid, void *userdata) {
        struct pod_ready *pr = userdata;

        if (!uid) {
                consider_all(pr);
                return;
        }
        consider(pr, pod_store_get(pr->manager->pods, uid));
}

/* ---- the write ---- */

static int condition_patch(const struct pod *p, const struct verdict *v, bool transition, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = cJSON_CreateObject();
        cJSON *meta, *status, *conditions, *c;
        char now[32];

        if (!root || !(meta = cJSON_AddObjectToObject(root, "metadata")) ||
            !cJSON_AddStringToObject(meta, "uid", p->uid) ||
            (p->resource_version && !cJSON_AddStringToObject(meta, "resourceVersion", p->resource_version)) ||
            !(status = cJSON_AddObjectToObject(root, "status")) ||
            !(conditions = cJSON_AddArrayToObject(status, "conditions")) || !(c = cJSON_CreateObject()))
                return -ENOMEM;
        cJSON_AddItemToArray(conditions, c);
        if (!cJSON_AddStringToObject(c, "type", POD_READY_CONDITION) ||
            !cJSON_AddStringToObject(c, "status", v->status ? "True" : "False") ||
            !cJSON_AddStringToObject(c, "reason", v->reason) || !cJSON_AddStringToObject(c, "message", strempty(v->message)) ||
            !cJSON_AddNullToObject(c, "lastProbeTime"))
                return -ENOMEM;
        /* Only a change of status is a transition; a new message keeps the time it has. */
        if (transition && (json_format_rfc3339(now_usec(CLOCK_REALTIME), now, sizeof(now)) < 0 ||
                           !cJSON_AddStringToObject(c, "lastTransitionTime", now)))
                return -ENOMEM;
        *ret = cJSON_PrintUnformatted(root);
        return *ret ? 0 : -ENOMEM;
}

static int build_write(void *userdata, const char *uid, struct kube_write_request *ret) {
        struct pod_ready *pr = userdata;
        struct pod *p = pod_store_get(pr->manager->pods, uid);
        struct ready_pod *rp = find_pod(pr, uid, NULL);
        _cleanup_(verdict_done) struct verdict want = {};
        const struct pod_condition *shown;
        usec_t later;
        int r;

        if (!rp || !wants_condition(pr, p) || !needs_write(pr, rp, p, now_usec(CLOCK_MONOTONIC), &later)) {
                if (rp && later)
                        arm_timer(pr, later);
                return -ENOENT;
        }
        r = decide(pr, p, &want);
        if (r < 0)
                return r;
        shown = pod_condition_find(p, POD_READY_CONDITION);
        r = condition_patch(p, &want, !shown || shown->status != want.status, &ret->body);
        if (r < 0)
                return r;
        if (asprintf(&ret->path, "/api/v1/namespaces/%s/pods/%s/status", p->namespace, p->name) < 0)
                return -ENOMEM;
        ret->method = "PATCH";
        ret->verb = "patch";
        ret->content_type = "application/strategic-merge-patch+json";
        verdict_done(&rp->in_flight);
        rp->in_flight = want;
        want = (struct verdict) {};
        return 0;
}

static void write_done(void *userdata, const char *uid, const struct http_response *resp) {
        struct pod_ready *pr = userdata;
        struct ready_pod *rp = find_pod(pr, uid, NULL);
        struct pod *p = pod_store_get(pr->manager->pods, uid);
        usec_t now = now_usec(CLOCK_MONOTONIC);
        const char *status;

        if (!rp)
                return;
        status = rp->in_flight.status ? "True" : "False";
        if (resp->status >= 200 && resp->status < 300) {
                (void) metric_inc(pr->metrics.writes, status, "ok");
                if (p)
                        log_module_info(MODULE, "Pod %s/%s: %s is %s (%s%s%s)", p->namespace, p->name, POD_READY_CONDITION,
                                        status, rp->in_flight.reason, rp->in_flight.status ? "" : ": ",
                                        rp->in_flight.status ? "" : strempty(rp->in_flight.message));
                verdict_done(&rp->wrote);
                rp->wrote = rp->in_flight;
                rp->in_flight = (struct verdict) {};
                rp->written = true;
                rp->last_write = now;
                rp->conflicts = 0;
                rp->not_before = 0;
                rp->refused_logged = false;
                pr->error = mfree(pr->error);
                pr->n_written++;
        } else if (resp->status == 409) {
                /* The pod changed since the decision (or is another pod of that name): decide
                 * again on the store's newer object, sooner the first times. */
                (void) metric_inc(pr->metrics.writes, status, "conflict");
                pr->n_conflicts++;
                rp->conflicts = MIN(rp->conflicts + 1, 10u);
                rp->not_before = now + MIN((USEC_PER_SEC / 4) << rp->conflicts, CONFLICT_RETRY_MAX);
                arm_timer(pr, rp->not_before);
        } else if (resp->status == 404) {
                (void) metric_inc(pr->metrics.writes, status, "gone"); /* the watch will remove it */
        } else {
                _cleanup_free_ char *answer = kube_writer_describe_answer(resp);
                (void) metric_inc(pr->metrics.writes, status, "refused");
                pr->n_refused++;
                free(pr->error);
                if (asprintf(&pr->error, "cannot set %s on pods: %s", POD_READY_CONDITION, strempty(answer)) < 0)
                        pr->error = NULL;
                /* The module's state says it as a warning; this names the pod. */
                if (!rp->refused_logged && p)
                        log_module_info(MODULE, "Pod %s/%s: %s", p->namespace, p->name, strempty(pr->error));
                rp->refused_logged = true;
                rp->not_before = now + pr->refused_retry;
                arm_timer(pr, rp->not_before);
        }
}

/* ---- lifecycle ---- */

int pod_ready_new(struct manager *m, struct kube_writer *writer, usec_t grace, usec_t refused_retry,
                  const struct pod_ready_metrics *metrics, struct pod_ready **ret) {
        struct pod_ready *pr = calloc(1, sizeof(*pr));

        if (!pr)
                return -ENOMEM;
        pr->manager = m;
        pr->writer = writer;
        pr->grace = grace;
        pr->refused_retry = refused_retry;
        pr->metrics = *metrics;
        pr->client = (struct kube_write_client) { .resource = "pods/status", .build = build_write, .done = write_done,
                                                  .userdata = pr };
        *ret = pr;
        return 0;
}

struct pod_ready *pod_ready_free(struct pod_ready *pr) {
        if (!pr)
                return NULL;
        if (pr->observing)
                pod_store_remove_observer(pr->manager->pods, on_pod, pr);
        if (pr->listening)
                pod_gates_remove_listener(pr->manager->pod_gates, on_gates, pr);
        kube_writer_forget_client(pr->writer, &pr->client);
        for (size_t i = 0; i < pr->n_pods; i++)
                ready_pod_free(pr->pods[i]);
        free(pr->pods);
        sd_event_source_disable_unref(pr->timer);
        free(pr->error);
        free(pr);
        return NULL;
}

int pod_ready_start(struct pod_ready *pr) {
        int r;

        if (!pr->observing) {
                r = pod_store_add_observer(pr->manager->pods, on_pod, pr);
                if (r < 0)
                        return r;
                pr->observing = true;
        }
        if (!pr->listening) {
                r = pod_gates_add_listener(pr->manager->pod_gates, on_gates, pr);
                if (r < 0)
                        return r;
                pr->listening = true;
        }
        consider_all(pr);
        return 0;
}

void pod_ready_set_timing(struct pod_ready *pr, usec_t grace, usec_t refused_retry) {
        if (!pr)
                return;
        pr->grace = grace;
        pr->refused_retry = refused_retry;
}

const char *pod_ready_error(const struct pod_ready *pr) {
        return pr ? pr->error : NULL;
}

static void count_conditions(const struct pod_ready *pr, size_t *ret_true, size_t *ret_false, size_t *ret_none) {
        *ret_true = *ret_false = *ret_none = 0;
        for (size_t i = 0; i < pr->n_pods; i++) {
                struct pod *p = pod_store_get(pr->manager->pods, pr->pods[i]->uid);
                const struct pod_condition *c = pod_condition_find(p, POD_READY_CONDITION);
                if (!c)
                        (*ret_none)++;
                else if (c->status)
                        (*ret_true)++;
                else
                        (*ret_false)++;
        }
}

void pod_ready_collect(struct pod_ready *pr) {
        size_t t, f, none;

        if (!pr)
                return;
        count_conditions(pr, &t, &f, &none);
        (void) metric_set(pr->metrics.conditions, (double) t, "True");
        (void) metric_set(pr->metrics.conditions, (double) f, "False");
        (void) metric_set(pr->metrics.conditions, (double) none, "none");
}

int pod_ready_status(const struct pod_ready *pr, cJSON *obj) {
        size_t t, f, none;
        cJSON *o;

        count_conditions(pr, &t, &f, &none);
        if (!(o = cJSON_AddObjectToObject(obj, "readyCondition")) ||
            !cJSON_AddStringToObject(o, "type", POD_READY_CONDITION) ||
            !cJSON_AddNumberToObject(o, "pods", (double) pr->n_pods) || !cJSON_AddNumberToObject(o, "true", (double) t) ||
            !cJSON_AddNumberToObject(o, "false", (double) f) || !cJSON_AddNumberToObject(o, "unset", (double) none) ||
            !cJSON_AddNumberToObject(o, "writes", (double) pr->n_written) ||
            !cJSON_AddNumberToObject(o, "conflicts", (double) pr->n_conflicts) ||
            !cJSON_AddNumberToObject(o, "refused", (double) pr->n_refused) ||
            !json_add_string_or_null(o, "lastError", pr->error))
                return -ENOMEM;
        return 0;
}
