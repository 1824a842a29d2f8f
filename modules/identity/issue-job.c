/* SPDX-License-Identifier: MIT */
/* A request to the issue worker and its result (issue-job.h). */

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "atomic-dir.h"
#include "issue-job.h"
#include "strv.h"

struct issue_job *issue_job_free(struct issue_job *j) {
        if (!j)
                return NULL;
        free(j->uid);
        free(j->common_name);
        free(j->uri);
        free(j->ip);
        strv_free(j->dns);
        free(j->reason);
        free(j->stage_parent);
        free(j->stage_name);
        free(j->stage_bundle);
        x509_free_secret(j->key_pem);
        free(j->chain_pem);
        x509_cert_info_done(&j->info);
        free(j);
        return NULL;
}

void issue_job_drop_staged(const struct issue_job *j) {
        if (j && j->staged > 0) { /* (an issuer change in the queue never has) */
                _cleanup_close_ int fd = open(j->stage_parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd >= 0)
                        (void) atomic_dir_drop_staged(fd, j->stage_name, j->ticket);
        }
}
