/* SPDX-License-Identifier: MIT */
#pragma once

/* Tells when the wall clock (CLOCK_REALTIME) was set: stepped by NTP or an operator, or moved on
 * a resume. A timerfd armed on CLOCK_REALTIME with TFD_TIMER_CANCEL_ON_SET, which the kernel
 * cancels (read() fails with ECANCELED) at every discontinuous change of the clock.
 *
 * Who needs it: code whose decisions compare wall-clock deadlines (a certificate's notBefore
 * and notAfter) with now. sd-event's CLOCK_REALTIME timers already fire at once when the clock
 * jumps past them; what they cannot do is run code that must re-judge a deadline that is no
 * longer where it was (a certificate whose notBefore went into the future, a rotation that was
 * due and now is not). Timers and backoffs that measure elapsed time use CLOCK_MONOTONIC or
 * CLOCK_BOOTTIME and need none of this. */

#include <stdbool.h>
#include <stdint.h>
#include <systemd/sd-event.h>

struct clock_watch;

/* delta: how far the wall clock moved against CLOCK_BOOTTIME since the watch was armed (or last
 * reported), in microseconds; negative for a step back. About 0 for a resume from suspend with a
 * right RTC (the kernel reports it all the same). */
typedef void (*clock_watch_fn)(struct clock_watch *w, int64_t delta, void *userdata);

/* An IO source on e at priority; fn runs once per set of steps seen. 0 or a negative errno. */
int clock_watch_new(sd_event *e, int64_t priority, clock_watch_fn fn, void *userdata, struct clock_watch **ret);
/* Runs fn now if a step happened that was not yet reported: for a CLOCK_REALTIME timer's handler
 * that may be dispatched before the watch's own event in the same loop iteration, or before the
 * kernel has cancelled the timerfd at all (it fires the timers first): a move of a second or
 * more counts then, and is not reported again when the cancel comes. true if it ran fn. */
bool clock_watch_check(struct clock_watch *w);
struct clock_watch *clock_watch_free(struct clock_watch *w);
