/* SPDX-License-Identifier: MIT */
#pragma once

/* A one-shot sd-event timer kept in one source and re-armed in place: the pattern every
 * component with a "next thing due at" has (a retry, a grace, a batch's deadline). */

#include <systemd/sd-event.h>

#include "macro.h"

/* Makes *s fire once at `when` on clock, creating it on first use (then with callback and
 * userdata, which later calls do not change) or moving and re-enabling it. With `only_earlier`,
 * an enabled timer due before `when` is left as it is. Returns 0 or negative errno. */
int timer_arm(sd_event *e, sd_event_source **s, clockid_t clock, usec_t when, usec_t accuracy, bool only_earlier,
              sd_event_time_handler_t callback, void *userdata);
