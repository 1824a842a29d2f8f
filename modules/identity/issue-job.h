/* SPDX-License-Identifier: MIT */
#pragma once

/* A job of the issue worker (issue-worker.h): what to issue and for whom, going in; the key,
 * the chain or why not, coming back. The job owns everything it points to. */

#include "ca.h"

struct issue_job {
        struct issue_job *next;

        /* in: what to issue, for whom (copies, owned by the job) */
        char *uid;             /* the workload's, looked up again when the result is back */
        unsigned ticket;       /* the request's number: a result whose workload asked again since is stale */
        unsigned issuer_generation; /* the issuer it was meant for */
        char *common_name, *uri, *ip;
        char **dns;
        usec_t lifetime;
        /* in, optional: a new directory stage_parent/stage_name for the key, the chain and
         * stage_bundle, staged by the thread (atomic_dir_stage_new(), serial: the ticket) if
         * nothing is there yet, for the loop to publish or drop. */
        char *stage_parent, *stage_name, *stage_bundle;

        /* out */
        int result;       /* 0, or negative errno with reason set */
        char *reason;     /* why not (for the workload's lastError) */
        char *key_pem;    /* private key material: wiped when the job is freed */
        char *chain_pem;
        struct cert_info info;
        int staged; /* 1: staged; 0: not (not asked, or a directory is there); negative errno */
};

struct issue_job *issue_job_free(struct issue_job *j);
/* Removes what the thread staged for j (nothing if it staged nothing): for a result not taken. */
void issue_job_drop_staged(const struct issue_job *j);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct issue_job *, issue_job_free);
