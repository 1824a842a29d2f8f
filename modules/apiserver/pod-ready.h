/* SPDX-License-Identifier: MIT */
#pragma once

/* The pinion.io/ready condition on this node's pods that ask for it with a readiness gate
 * (spec.readinessGates: [{conditionType: pinion.io/ready}]): True once every job the pod asked
 * for is in place (the pod gates of scope POD_GATE_CONDITION: its network attachment, its
 * identity, its declared configs), False with a reason naming the first job missing
 * (NetworkPending, IdentityPending, ConfigPending) and a message naming every one.
 *
 * Written with PATCH pods/NAME/status (a strategic merge of status.conditions, keyed by type,
 * so the kubelet's conditions are untouched), with the pod's uid and resourceVersion as
 * preconditions: a decision made on a pod that changed since is refused (409) and made again on
 * the newer pod. Writes go through the module's write queue (kube-writer.h): a pod costs at most
 * one queued write, of its newest state. A pod whose jobs are all in place within
 * `condition-grace` of being seen costs one write (True); a False is written only once a job has
 * been missing that long, and at most once per grace. The kubelet reads a missing condition as
 * not ready, so nothing needs writing before then. */

#include "kube-writer.h"
#include "manager.h"

#define POD_READY_CONDITION "pinion.io/ready"

struct pod_ready;

struct pod_ready_metrics {
        struct metric_family *writes;     /* pinion_apiserver_condition_writes_total{status,result} */
        struct metric_family *conditions; /* pinion_apiserver_condition_pods{status}: set by pod_ready_collect */
};

/* refused_retry: how long a pod whose write was refused (403, 422) waits before it is tried
 * again. */
int pod_ready_new(struct manager *m, struct kube_writer *writer, usec_t grace, usec_t refused_retry,
                  const struct pod_ready_metrics *metrics, struct pod_ready **ret);
/* Stops observing and drops its queued writes. */
struct pod_ready *pod_ready_free(struct pod_ready *pr);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct pod_ready *, pod_ready_free);

/* Observes the pod store and the pod gates, and decides for the pods there now. */
int pod_ready_start(struct pod_ready *pr);
void pod_ready_set_timing(struct pod_ready *pr, usec_t grace, usec_t refused_retry);

/* Why the last write was refused for the agent's sake (403: RBAC or an admission policy, 422),
 * until one goes through; NULL otherwise. */
const char *pod_ready_error(const struct pod_ready *pr);
void pod_ready_collect(struct pod_ready *pr);
int pod_ready_status(const struct pod_ready *pr, cJSON *obj);
