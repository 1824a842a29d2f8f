/* SPDX-License-Identifier: MIT */
#pragma once

/* The standalone pod source: Kubernetes Pod objects as JSON files (*.json) in pods-dir, like
 * kubelet static pods. The directory is read in full at start and watched with inotify on the
 * event loop; after that each file is read on its own when its event says it is complete
 * (IN_CLOSE_WRITE, IN_MOVED_TO, a link made by IN_CREATE) and dropped on IN_DELETE or
 * IN_MOVED_FROM, so a change costs one file however many there are. A file written in place is
 * never read half-way. The directory is read in full again only when events cannot say what
 * changed: the inotify queue overflowed, the directory was replaced, or an atomic writer's
 * "..data" link moved (debounced).
 *
 * A malformed file is reported with its path and skipped, never fatal; a file that was good and
 * turns bad keeps its last good pod (a half-saved edit does not take a running pod away) and is
 * reported until it is fixed or removed.
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

/* Called after every rescan and every single-file change, with the number of pods published and
 * the number of problems (podsdir_errors()). */
typedef void (*podsdir_scan_fn)(struct podsdir *d, unsigned n_loaded, unsigned n_failed, void *userdata);

int podsdir_new(sd_event *e, struct pod_store *store, const char *dir, const char *node_name,
                struct podsdir **ret);
struct podsdir *podsdir_free(struct podsdir *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct podsdir *, podsdir_free);

void podsdir_set_scan_callback(struct podsdir *d, podsdir_scan_fn fn, void *userdata);

/* Scans now and starts watching. A missing directory is watched for via its parent, so pods
 * appear once it is created; an unreadable one is an error. */
int podsdir_start(struct podsdir *d);
/* Synchronous full read of the directory (start, reload, overflow, a replaced directory). */
int podsdir_rescan(struct podsdir *d);

/* The current problems, one "PATH: reason" per skipped file (borrowed, NULL-terminated). */
char *const *podsdir_errors(const struct podsdir *d);
const char *podsdir_path(const struct podsdir *d);

/* The uid given to a static pod without one: a UUID-formatted hash of "namespace/name". */
int podsdir_file_static_uid(const char *namespace, const char *name, char **ret);
