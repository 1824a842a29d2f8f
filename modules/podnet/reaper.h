/* SPDX-License-Identifier: MIT */
#pragma once

/* Deletes host veths off the loop. Measured: RTM_DELLINK of a veth blocks its caller 20-30 ms
 * (the kernel's netdev_run_todo waits for RCU and references after rtnl is released, so other
 * netlink work, e.g. the next ADD's veth, is not held up meanwhile). A CNI DEL would hold the
 * whole loop there; instead the loop releases the address, hands the deletion to this one
 * worker thread and holds the DEL's request (not the loop) until it is done. The thread only calls wire_del(); each result comes back to the
 * loop through an eventfd (DESIGN.md: threads only when measured, results through an eventfd),
 * where done() runs. The names being deleted are persisted by the caller (ipam), so a deletion
 * interrupted by a crash is retried at the next start. */

#include <systemd/sd-event.h>

#include "macro.h"

struct reaper;

/* Runs on the loop for every finished deletion (error: 0 or negative errno; a missing link is 0). */
typedef void (*reaper_done_fn)(struct reaper *r, const char *name, int error, void *userdata);

int reaper_new(sd_event *e, reaper_done_fn done, void *userdata, struct reaper **ret);
/* Stops the thread after the deletion in progress; queued ones are dropped (still persisted). */
struct reaper *reaper_free(struct reaper *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct reaper *, reaper_free);

int reaper_queue(struct reaper *r, const char *name);
/* Moves name to the front of the queue, without waiting (a DEL is waiting for it): 0, or
 * -ENOENT if it is not queued (in progress already, or done). */
int reaper_expedite(struct reaper *r, const char *name);
/* Deletions queued or in progress. */
unsigned reaper_pending(const struct reaper *r);
/* Blocks until the deletion of name (queued or in progress) is done, then runs the done
 * callbacks: name goes to the front of the queue, so this waits for at most two deletions (the
 * one in progress and name's), not the whole backlog. -ENOENT if name was not pending. */
int reaper_wait(struct reaper *r, const char *name);
