/* SPDX-License-Identifier: MIT */
#pragma once

/* fdatasync() of one file on a worker thread, so that the loop does other work (wiring a pod,
 * deleting a veth) while the disk flushes, and waits only if the flush is still running when it
 * must acknowledge. Measured: the IPAM journal's fdatasync took 0.2-2 ms per change on the
 * loop, a third of a CNI ADD's time in the agent; wiring the pod takes longer, so the wait is
 * mostly gone. (DESIGN.md: threads only when measured.)
 *
 * Tickets: syncer_request() returns one; syncer_wait() on it returns once an fdatasync that
 * started after the request has finished (it covers every byte written before the request),
 * with that call's error. One thread, one file at a time; the caller changes the file's fd only
 * while the syncer is idle (syncer_quiesce()). */

#include <stdint.h>

#include "macro.h"

struct syncer;

int syncer_new(struct syncer **ret);
/* Waits for the flush in progress, then stops the thread. */
struct syncer *syncer_free(struct syncer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct syncer *, syncer_free);

/* Asks for fd's data written so far to be flushed; returns the ticket (never 0). */
uint64_t syncer_request(struct syncer *s, int fd);
/* Blocks until ticket's flush is done: 0, or that fdatasync's negative errno. */
int syncer_wait(struct syncer *s, uint64_t ticket);
/* Blocks until no flush is running or asked for (before the fd is closed or replaced). */
void syncer_quiesce(struct syncer *s);
