/* SPDX-License-Identifier: MIT */
/* What the identity module announces about a pod's certificate as pod events (pod-events.h):
 * IdentityIssued for its first certificate, IdentityRotated for each one after it, both once its
 * files are written; IdentityFailed when issuing or writing fails or a certificate expires
 * without a renewal. A failure is announced once until the workload succeeds again or fails in
 * another way: the retries every few seconds (a renewal while the old certificate lasts, files
 * written again from memory) would otherwise repeat the same warning. Services ([service.NAME])
 * are not pods: nothing is announced for them. */

#include <stdlib.h>

#include "json.h"
#include "pod-events.h"
#include "workload-internal.h"

void workload_event_announce_issued(struct identity *id, struct workload *w) {
        char until[64] = "";

        if (w->service)
                return;
        w->announced_failure = mfree(w->announced_failure);
        (void) json_format_rfc3339(w->info.not_after, until, sizeof(until));
        if (w->generation <= 1)
                pod_event_emit(id->manager->pod_events, w->uid, POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ISSUED, "Issue",
                               "Issued certificate %s for %s, valid until %s", strempty(w->info.serial), strempty(w->spiffe),
                               until);
        else
                pod_event_emit(id->manager->pod_events, w->uid, POD_EVENT_NORMAL, POD_EVENT_IDENTITY_ROTATED, "Rotate",
                               "Rotated the certificate for %s to %s, valid until %s", strempty(w->spiffe),
                               strempty(w->info.serial), until);
}

void workload_event_announce_failed(struct identity *id, struct workload *w, const char *what,
                                    const char *error) {
        _cleanup_free_ char *note = NULL;

        if (w->service || asprintf(&note, "%s for %s: %s", what, strempty(w->spiffe), strempty(error)) < 0)
                return;
        if (streq_ptr(note, w->announced_failure))
                return; /* the same failure again: said already */
        pod_event_emit(id->manager->pod_events, w->uid, POD_EVENT_WARNING, POD_EVENT_IDENTITY_FAILED, "Issue", "%s", note);
        free(w->announced_failure);
        w->announced_failure = TAKE_PTR(note);
}
