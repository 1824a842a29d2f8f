/* SPDX-License-Identifier: MIT */
#pragma once

/* One piece of a sync's file-system work off the event loop: making a version's directories,
 * hashing the files it reuses, fsyncing it, the swap, removing what failed. That work grows
 * with the manifest (30,425 directories made and fsynced took the loop 9.9 s), so a thread of
 * its own does it while the loop goes on serving; the result comes back on the loop through
 * an eventfd. The thread touches nothing but the job it was given, which the caller keeps
 * unchanged until done runs or fswork_free() returns. */

#include <stdatomic.h>
#include <stdbool.h>

#include <systemd/sd-event.h>

#include "macro.h"

struct fswork;

/* Runs in the thread. stop turns true when the caller gives up: the work returns at its next
 * convenient point (-ECANCELED) and leaves whatever it made for the caller to remove. */
typedef int (*fswork_fn)(void *job, const atomic_bool *stop);
/* Runs on the loop with run's result; may free w. */
typedef void (*fswork_done_fn)(struct fswork *w, int result, void *userdata);

int fswork_start(sd_event *e, fswork_fn run, void *job, fswork_done_fn done, void *userdata, struct fswork **ret);
/* Stops the work (it sees stop at its next check), waits for the thread and frees w; done is
 * not called. */
struct fswork *fswork_free(struct fswork *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct fswork *, fswork_free);

static inline bool fswork_stopped(const atomic_bool *stop) {
        return stop && atomic_load_explicit(stop, memory_order_relaxed);
}
