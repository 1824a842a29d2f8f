/* SPDX-License-Identifier: MIT */
#pragma once

/* The standalone pod source: Kubernetes Pod objects as JSON files (*.json) in pods-dir, like
 * kubelet static pods. The directory is watched with inotify on the event loop and rescanned
 * (debounced) on change; each rescan replaces the source's pods in the store. A malformed file
 * is reported with its path and skipped, never fatal; the last good version of that file's pod
 * is dropped (the file says what the operator wants now, and it says nothing valid).
 *
 * Static pods are pods of this node: a missing spec.nodeName is set to the node name, a missing
 * metadata.uid is derived from the namespace and name (stable across restarts), and a pod with
 * no status.conditions is taken as Ready (on a VM, health checks are what gate a service).
 *
 * Each pod's source is "pods-dir:<file path>"; a rescan replaces them all under the source name
 * "pods-dir" (see pod_store_replace_source). Files over 1 MiB, and two files declaring one
 * namespace/name or uid (the later by file name is skipped), are reported in podsdir_errors(). */

#include <systemd/sd-event.h>

#include "pod-store.h"

struct podsdir;

/* Called after every rescan with the number of files loaded and the number skipped. */
typedef void (*podsdir_scan_fn)(struct podsdir *d, unsigned n_loaded, unsigned n_failed, void *userdata);

int podsdir_new(sd_event *e, struct pod_store *store, const char *dir, const char *node_name,
                struct podsdir **ret);
struct podsdir *podsdir_free(struct podsdir *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct podsdir *, podsdir_free);

void podsdir_set_scan_callback(struct podsdir *d, podsdir_scan_fn fn, void *userdata);

/* Scans now and starts watching. A missing directory is watched for via its parent, so pods
 * appear once it is created; an unreadable one is an error. */
int podsdir_start(struct podsdir *d);
/* Synchronous rescan (also what the inotify handler runs after the debounce). */
int podsdir_rescan(struct podsdir *d);

/* The last rescan's problems, one "PATH: reason" per skipped file (borrowed, NULL-terminated). */
char *const *podsdir_errors(const struct podsdir *d);
const char *podsdir_path(const struct podsdir *d);

/* The uid given to a static pod without one: a UUID-formatted hash of "namespace/name". */
int podsdir_static_uid(const char *namespace, const char *name, char **ret);
