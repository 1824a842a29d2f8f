/* SPDX-License-Identifier: MIT */
#pragma once

/* The one thread of the identity module: makes workload keys and certificates (key generation,
 * signing, the chain check, PEM) off the event loop, which measured most of the loop's time
 * while 1,000 pods got their first certificates. Jobs go in with issue_worker_submit(); results
 * come back on the loop, in order and in batches, through an eventfd. The thread shares nothing
 * with the loop: it signs with its own copy of the issuer (issue_worker_set_issuer()), and a job
 * carries copies of what it needs. It may also write a new pod directory's files under a staging
 * name no reader knows (the file system work the loop measured most of its time on next); the
 * loop decides everything else (which workload, whether a result is still wanted, publishing or
 * dropping what was staged). */

#include <systemd/sd-event.h>

#include "issue-job.h"

struct issue_worker;
/* Called on the loop with finished jobs in submission order (a list through ->next, at most
 * max_batch of them per call, a call per loop iteration); the callee owns them. */
typedef void (*issue_done_fn)(struct issue_worker *w, struct issue_job *jobs, void *userdata);

/* priority: of the results' event source on the loop. */
int issue_worker_new(sd_event *e, unsigned max_batch, int64_t priority, issue_done_fn done, void *userdata,
                     struct issue_worker **ret);
/* Stops the thread (after the job it is on) and drops every job not yet handed back, with what
 * it staged. */
struct issue_worker *issue_worker_free(struct issue_worker *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct issue_worker *, issue_worker_free);

/* Jobs submitted after this are signed by a copy of ca (NULL: none, they fail). */
int issue_worker_set_issuer(struct issue_worker *w, const struct ca *ca);
/* Takes the job (on failure too). */
int issue_worker_submit(struct issue_worker *w, struct issue_job *j);
