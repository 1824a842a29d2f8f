/* SPDX-License-Identifier: MIT */
#pragma once

/* What workload.c (pods' workloads, issuing, files) shares with workload-service.c (the
 * [service.NAME] workloads). */

#include <stdbool.h>

#include "identity.h"

#define MODULE "identity"

#define log_workload_full_errno(w, level, error, ...)                                                                            \
        log_ctx_full_errno((&(const struct log_ctx) { .module = MODULE, .pod_uid = (w)->uid, .pod = (w)->spiffe }), \
                           level, error, __VA_ARGS__)

/* A new workload for uid (not queued yet), or NULL without memory. */
struct workload *workload_add(struct identity *id, const char *uid);
/* Forgets w and removes its files; swaps the last workload into its slot. */
void workload_remove(struct identity *id, struct workload *w);
/* identity-clock.c: a certificate a step of the clock expired while its renewal runs. */
bool identity_clock_in_grace(const struct workload *w);
/* Its certificate counts as valid now: before notAfter, or expired by a step of the clock (one
 * not reported yet is judged first) and within the grace for its renewal. */
bool identity_clock_current(struct workload *w);
/* w's expiry is due: handles an unreported step first; true if the grace holds the expiry off
 * (its timer is armed again for the grace's end). */
bool identity_clock_hold_expiry(struct workload *w);
/* The renewal failed: the grace ends, an expiry it held off happens now. */
void identity_clock_grace_end(struct workload *w);
/* w's timer at the earlier of rotate_due and expire_due (off if neither). */
void workload_timer_arm(struct workload *w);
/* Queues w for a certificate (once). */
void workload_queue_push(struct identity *id, struct workload *w);
/* *field = a copy of value unless equal; sets *changed then. -ENOMEM. */
int workload_set_string(char **field, const char *value, bool *changed);
/* A pod uid fit to name a directory (no '/', no leading '.'). */
bool workload_uid_ok(const char *s);
/* w's directory: the service's tls-dir, or pod-tls-dir/<uid>; NULL if it has none. */
char *workload_tls_dir(struct identity *id, const struct workload *w);

/* ---- workload-files.c: a workload's files, written and written again after failures ---- */
/* Writes w's files (key, chain, bundle) from memory, synced on their own; 0 if it has no
 * directory. */
int workload_files_write(struct identity *id, struct workload *w);
/* The files of a batch of issued workloads, pods' sharing two syncfs() (staged_by_thread[i]:
 * the issue worker built ws[i]'s new directory already); failures go to workload_files_failed(). */
void workload_files_write_batch(struct identity *id, struct workload **ws, const bool *staged_by_thread, size_t n);
/* Before a batch of writes: w's outcome is unknown. */
void workload_files_begin(struct workload *w);
/* The write of w's files under dir failed (nothing of it is visible: atomic-dir): told, counted,
 * retried from memory after WORKLOAD_WRITE_RETRY. */
void workload_files_failed(struct identity *id, struct workload *w, const char *dir, int error);
/* After the batch: a workload written again after failures is told so, its retry disarmed. */
void workload_files_end(struct identity *id, struct workload *w);
/* Whether w's first files never reached the disk (its gate stays closed: the pod would find no
 * certificate). */
bool workload_files_missing(const struct workload *w);

/* ---- workload-events.c: pod events (nothing for services) ---- */
/* w's certificate is issued and its files written: IdentityIssued (its first), else
 * IdentityRotated. Clears the failure said last. */
void workload_event_announce_issued(struct identity *id, struct workload *w);
/* IdentityFailed, "<what> for <SPIFFE ID>: <error>", unless that was the last thing said. */
void workload_event_announce_failed(struct identity *id, struct workload *w, const char *what,
                                    const char *error);

/* A service's tls-dir files the agent wrote (the directory itself is the operator's). */
void workload_remove_service_files(const char *dir);
