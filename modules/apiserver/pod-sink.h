/* SPDX-License-Identifier: MIT */
#pragma once

/* The pod reflector's sink: this node's pods from the apiserver into the pod store (source
 * "apiserver"). A list replaces the source's pods, announcing only real differences; a static
 * pod (from pods-dir) keeps its uid against an apiserver pod claiming it. */

#include "pod-store.h"
#include "reflector.h"

struct pod_sink {
        struct reflector_sink sink; /* what the reflector is given */
        struct pod_store *store;
        char *node;
        char *description;
        struct pod **list;          /* the list in progress */
        size_t n_list;
};

int pod_sink_init(struct pod_sink *s, struct pod_store *store, const char *node);
void pod_sink_done(struct pod_sink *s);
