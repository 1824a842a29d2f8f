/* SPDX-License-Identifier: MIT */
#include "timer.h"

int timer_arm(sd_event *e, sd_event_source **s, clockid_t clock, usec_t when, usec_t accuracy, bool only_earlier,
              sd_event_time_handler_t callback, void *userdata) {
        int enabled = SD_EVENT_OFF, r;
        uint64_t current;

        if (!*s)
                return sd_event_add_time(e, s, clock, when, accuracy, callback, userdata);
        if (only_earlier && sd_event_source_get_enabled(*s, &enabled) >= 0 && enabled != SD_EVENT_OFF &&
            sd_event_source_get_time(*s, &current) >= 0 && current <= when)
                return 0;
        r = sd_event_source_set_time(*s, when);
        if (r < 0)
                return r;
        return sd_event_source_set_enabled(*s, SD_EVENT_ONESHOT);
}
