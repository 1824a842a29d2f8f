/* SPDX-License-Identifier: MIT */
/* A workload's files that could not be written (pod-tls-dir or a service's tls-dir full, most
 * often). The write is atomic-dir's: a version directory swapped in by one rename, removed when
 * it fails, so what the pod reads stays the previous certificate, whole, which is valid until
 * its notAfter (a rotation happens at 70-90% of the lifetime: time enough). The new certificate
 * stays in memory (the Workload API serves it) and its files are written again from memory
 * every WORKLOAD_WRITE_RETRY until it works: no new certificate is asked for, nothing to reset
 * once space is freed. A pod whose first certificate never reached the disk keeps its gate
 * closed, since it would find no files. Warnings name the directory; failures are counted in
 * pinion_identity_failures_total{kind="workload",reason="enospc"|"write"}. */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "workload-internal.h"

#define WORKLOAD_WRITE_RETRY (5 * USEC_PER_SEC)

void workload_files_begin(struct workload *w) {
        w->write_error = 0;
}

static int on_write_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct workload *w = userdata;
        struct identity *id = w->id;
        bool was = w->write_failing;

        workload_files_begin(w);
        int r = workload_write_tls_dir(id, w);
        if (r < 0)
                workload_files_failed(id, w, w->service && w->tls_dir ? w->tls_dir : id->settings->pod_tls_dir, r);
        workload_files_end(id, w);
        /* A certificate whose files failed in its batch (issue_succeeded() left it unsaid). */
        if (was && !w->write_failing)
                workload_event_announce_issued(id, w);
        return 0;
}

static void arm_retry(struct identity *id, struct workload *w) {
        /* (Monotonic: a retry interval, not a point in wall-clock time.) */
        usec_t at = now_usec(CLOCK_MONOTONIC) + WORKLOAD_WRITE_RETRY;
        int r = w->write_timer ? sd_event_source_set_time(w->write_timer, at)
                               : sd_event_add_time(id->manager->event, &w->write_timer, CLOCK_MONOTONIC, at,
                                                   USEC_PER_SEC / 10, on_write_timer, w);
        if (r >= 0)
                r = sd_event_source_set_enabled(w->write_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_workload_full_errno(w, LOG_ERR, r, "cannot arm the retry of its files: %m");
}

void workload_files_failed(struct identity *id, struct workload *w, const char *dir, int error) {
        _cleanup_free_ char *msg = NULL;
        bool full = error == -ENOSPC || error == -EDQUOT;

        w->write_error = error;
        if (asprintf(&msg, "cannot write its files under %s (%s)", strempty(dir), strerror(-error)) >= 0) {
                free(w->last_error);
                w->last_error = TAKE_PTR(msg);
        }
        (void) metric_inc(id->m_failed, "workload", identity_failure_reason(error, false));
        log_workload_full_errno(w, LOG_WARNING, error, "%s under %s: %m; %s; retrying in %us",
                                full ? "no space left for its files" : "cannot write its files", strempty(dir),
                                w->generation > 1 ? "the previous certificate stays in place"
                                                  : "the pod has no certificate file yet",
                                (unsigned) (WORKLOAD_WRITE_RETRY / USEC_PER_SEC));
        workload_event_announce_failed(id, w, "Cannot write the certificate files", w->last_error);
        arm_retry(id, w);
}

void workload_files_end(struct identity *id, struct workload *w) {
        bool was = w->write_failing;

        w->write_failing = w->write_error < 0;
        if (!was || w->write_failing)
                return;
        free(w->last_error);
        w->last_error = NULL;
        if (w->write_timer)
                (void) sd_event_source_set_enabled(w->write_timer, SD_EVENT_OFF);
        log_workload_full_errno(w, LOG_INFO, 0, "its files are written again (serial %s)", strempty(w->info.serial));
        if (!w->service)
                pod_gates_changed(id->manager->pod_gates, w->uid);
}

bool workload_files_missing(const struct workload *w) {
        return w->write_failing && (w->generation <= 1 || w->new_dir);
}
