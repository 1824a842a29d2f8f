/* SPDX-License-Identifier: MIT */
#pragma once

/* Kubernetes Events for what the node did for its pods (pod-events.h): each announcement about a
 * pod this node's apiserver knows becomes an events.k8s.io/v1 Event on that pod, with
 * reportingController pinion.io/agent and reportingInstance the node's name, so that
 * `kubectl describe pod` shows it.
 *
 * What reaches the apiserver is bounded three ways, cheapest first:
 * - a pod's start is one Event: the Normal events of a pod's first `event-batch` (its network
 *   wired, its identity issued, its configs synced) are posted together, as `Provisioned` with
 *   each part in the note (a Warning goes at once, after what was held);
 * - client-go's event recorder rules (event-correlator.h): repeats become a series on the first
 *   Event (a PATCH of its count), many different notes of one reason are combined, and a pod that
 *   keeps producing events is held to a spam budget;
 * - a node-wide budget (`event-qps`, `event-burst`): beyond it events are dropped and counted;
 *   and what waits for the apiserver is a bounded queue (`event-queue`), the oldest dropped.
 * Every write then takes its turn in the module's write queue and token bucket (kube-writer.h). */

#include "kube-writer.h"
#include "manager.h"

#define EVENT_REPORTING_CONTROLLER "pinion.io/agent"

struct event_writer;

struct event_writer_settings {
        double qps;       /* node-wide events a second */
        unsigned burst;
        usec_t batch;     /* a pod's start: how long its first Normal events are gathered */
        size_t queue_max; /* events waiting for the apiserver */
};

struct event_writer_metrics {
        struct metric_family *events; /* pinion_apiserver_events_total{type,result} */
};

int event_writer_new(struct manager *m, struct kube_writer *writer, const struct event_writer_settings *s,
                     const struct event_writer_metrics *metrics, struct event_writer **ret);
struct event_writer *event_writer_free(struct event_writer *ew);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct event_writer *, event_writer_free);

/* Observes the pod events and the pod store (a pod's entries go with it). */
int event_writer_start(struct event_writer *ew);
void event_writer_set_settings(struct event_writer *ew, const struct event_writer_settings *s);

const char *event_writer_error(const struct event_writer *ew);
int event_writer_status(const struct event_writer *ew, cJSON *obj);
