/* SPDX-License-Identifier: MIT */
#pragma once

/* One job off the event loop, on a thread of its own, its result back on the loop through an
 * eventfd: work that may block for long (a sync's file-system work, which grows with the
 * manifest; a reclaim write, which waits inside the kernel for writeback) while the loop goes
 * on serving. The thread touches nothing but the job it was given, which the caller keeps
 * unchanged until done runs or offload_free() returns. */

#include <stdatomic.h>
#include <stdbool.h>

#include <systemd/sd-event.h>

#include "macro.h"

struct offload;

/* Runs in the thread. stop turns true when the caller gives up: the work returns at its next
 * convenient point (-ECANCELED) and leaves whatever it made for the caller to remove. */
typedef int (*offload_fn)(void *job, const atomic_bool *stop);
/* Runs on the loop with run's result; may free w. */
typedef void (*offload_done_fn)(struct offload *w, int result, void *userdata);

/* description names the loop's event source (sd-event's debug output). */
int offload_start(sd_event *e, const char *description, offload_fn run, void *job, offload_done_fn done, void *userdata,
                  struct offload **ret);
/* Stops the work (it sees stop at its next check), waits for the thread and frees w; done is
 * not called. */
struct offload *offload_free(struct offload *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct offload *, offload_free);

static inline bool offload_stopped(const atomic_bool *stop) {
        return stop && atomic_load_explicit(stop, memory_order_relaxed);
}
