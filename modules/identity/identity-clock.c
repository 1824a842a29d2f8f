/* SPDX-License-Identifier: MIT */
/* Steps of the wall clock (NTP correcting a wrong clock, an operator's date -s, a VM resumed
 * days later). Certificates live on the wall clock (notBefore, notAfter), everything that waits
 * in this module lives on it too (rotation points, expiry times), and sd-event fires a
 * CLOCK_REALTIME timer as soon as the clock jumps past it. What that leaves to this file:
 *  - forward: the expiry would close a pod's gate (and withdraw its registrations) in the
 *    same instant its renewal starts. A certificate that was valid before the step gets
 *    IDENTITY_STEP_GRACE for its renewal: the gate stays open that long while the renewal runs
 *    (milliseconds: the node CA signs in process), and closes if it fails;
 *  - back: a certificate issued before the step has a notBefore in the future, which peers on
 *    the right time refuse; one more than CERT_MAX_FUTURE ahead is replaced at once (the
 *    skew rule: x509.h), and a retry planned on the old time is planned again from the new one.
 * The steps are seen through a timerfd with TFD_TIMER_CANCEL_ON_SET (clock-watch.c), at a
 * priority above every timer, and an expiry that falls due checks for an unreported step first. */
#include "clock-watch.h"
#include "identity.h"
#include "log.h"
#include "workload-internal.h"

static void on_clock_step(struct clock_watch *cw, int64_t delta, void *userdata) {
        struct identity *id = userdata;
        usec_t now = now_usec(CLOCK_REALTIME), before = (usec_t) ((int64_t) now - delta);
        unsigned due = 0, ahead = 0, kept = 0;

        for (size_t i = 0; i < id->n_workloads; i++) {
                struct workload *w = id->workloads[i];
                if (!w->chain_pem)
                        continue; /* asked for on the next issuer change or pod update, as before */
                switch (x509_clock_verdict(&w->info, w->rotate_at, now)) {
                case CERT_CLOCK_KEEP:
                        kept++;
                        /* Its rotation again at rotate_at: a retry planned on the old time is not. */
                        if (w->timer) {
                                w->rotate_due = w->rotate_at;
                                workload_timer_arm(w);
                        }
                        continue;
                case CERT_CLOCK_DUE:
                        due++;
                        break;
                case CERT_CLOCK_AHEAD:
                        ahead++;
                        break;
                }
                if (now >= w->info.not_after && before < w->info.not_after)
                        w->step_grace_until = now_usec(CLOCK_MONOTONIC) + IDENTITY_STEP_GRACE;
                workload_queue_push(id, w);
        }
        unsigned creds = 0;
        if (id->node)
                creds += cred_clock_stepped(id->node, delta) > 0;
        if (id->node_ca)
                creds += cred_clock_stepped(id->node_ca, delta) > 0;
        log_module_info(MODULE, "the wall clock moved by %+.3fs: renewing %u workload certificate(s) now (%u past their rotation "
                        "point, %u not yet valid for peers), %u kept, %u node certificate(s) renewed",
                        (double) delta / USEC_PER_SEC, due + ahead, due, ahead, kept, creds);
}

bool identity_clock_in_grace(const struct workload *w) {
        return w->step_grace_until && now_usec(CLOCK_MONOTONIC) < w->step_grace_until;
}

bool identity_clock_current(struct workload *w) {
        if (now_usec(CLOCK_REALTIME) < w->info.not_after || identity_clock_in_grace(w))
                return true;
        /* The step that expired it may have happened while the loop ran the handler asking (a
         * health result, a pod update): the clock watch has not been heard yet, and without it
         * the gate would close, and a member be withdrawn, for the instant before the grace. */
        return identity_clock_check(w->id) && identity_clock_in_grace(w);
}

bool identity_clock_hold_expiry(struct workload *w) {
        /* A step forward may have fired the timer before the clock watch was heard: the step goes first. */
        (void) identity_clock_check(w->id);
        if (!identity_clock_in_grace(w))
                return false;
        usec_t left = w->step_grace_until - now_usec(CLOCK_MONOTONIC);
        w->expire_due = now_usec(CLOCK_REALTIME) + left;
        workload_timer_arm(w);
        return true;
}

void identity_clock_grace_end(struct workload *w) {
        bool held = identity_clock_in_grace(w);
        w->step_grace_until = 0;
        if (held && w->timer) {
                w->expire_due = now_usec(CLOCK_REALTIME);
                workload_timer_arm(w);
        }
}

int identity_clock_start(struct identity *id) {
        if (id->clock)
                return 0;
        /* Above every timer: a step is judged before the timers it moved are handled. */
        return clock_watch_new(id->manager->event, SD_EVENT_PRIORITY_IMPORTANT - 10, on_clock_step, id, &id->clock);
}

void identity_clock_stop(struct identity *id) {
        id->clock = clock_watch_free(id->clock);
}

bool identity_clock_check(struct identity *id) {
        return clock_watch_check(id->clock);
}
