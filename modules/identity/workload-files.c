/* SPDX-License-Identifier: MIT */
/* A workload's files: written (a batch of pods' with two syncfs(), a service's on its own), and
 * written again when they could not be.
 *
 * Files that could not be written (pod-tls-dir or a service's tls-dir full, most
 * often). The write is atomic-dir's: a version directory swapped in by one rename, removed when
 * it fails, so what the pod reads stays the previous certificate, whole, which is valid until
 * its notAfter (a rotation happens at 70-90% of the lifetime: time enough). The new certificate
 * stays in memory (the Workload API serves it) and its files are written again from memory
 * every WORKLOAD_WRITE_RETRY until it works: no new certificate is asked for, nothing to reset
 * once space is freed. A pod whose first certificate never reached the disk keeps its gate
 * closed, since it would find no files. Warnings name the directory; failures are counted in
 * pinion_identity_failures_total{kind="workload",reason="enospc"|"write"}. */

#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic-dir.h"
#include "fs-acl.h"
#include "fs.h"
#include "identity.h"
#include "log.h"
#include "workload-internal.h"

#define WORKLOAD_WRITE_RETRY (5 * USEC_PER_SEC)

/* A write of w's files failed: under its tls-dir (a service) or pod-tls-dir. */
static void write_failed(struct identity *id, struct workload *w, int r) {
        workload_files_failed(id, w, w->service && w->tls_dir ? w->tls_dir : id->settings->pod_tls_dir, r);
}

void workload_files_begin(struct workload *w) {
        w->write_error = 0;
}

static int on_write_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct workload *w = userdata;
        struct identity *id = w->id;
        bool was = w->write_failing;

        workload_files_begin(w);
        int r = workload_files_write(id, w);
        if (r < 0)
                write_failed(id, w, r);
        workload_files_end(id, w);
        /* A certificate whose files failed in its batch (issue_succeeded() left it unsaid). */
        if (was && !w->write_failing)
                workload_event_announce_issued(id, w);
        return 0;
}

static void arm_retry(struct identity *id, struct workload *w) {
        /* (Monotonic: a retry interval, not a point in wall-clock time.) */
        usec_t at = now_usec(CLOCK_MONOTONIC) + WORKLOAD_WRITE_RETRY;
        int r = w->write_timer ? sd_event_source_set_time(w->write_timer, at)
                               : sd_event_add_time(id->manager->event, &w->write_timer, CLOCK_MONOTONIC, at,
                                                   USEC_PER_SEC / 10, on_write_timer, w);
        if (r >= 0)
                r = sd_event_source_set_enabled(w->write_timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_workload_full_errno(w, LOG_ERR, r, "cannot arm the retry of its files: %m");
}

/* What an operator is to fix, by the error. */
static const char *write_failure_what(int error) {
        if (error == -ENOSPC || error == -EDQUOT)
                return "no space left for its files";
        if (error == -EOPNOTSUPP) /* fs-acl.h: only a service's user needs an entry */
                return "cannot let its user in to its files (the file system has no POSIX ACLs)";
        return "cannot write its files";
}

void workload_files_failed(struct identity *id, struct workload *w, const char *dir, int error) {
        _cleanup_free_ char *msg = NULL;

        w->write_error = error;
        if (asprintf(&msg, "cannot write its files under %s (%s)", strempty(dir), strerror(-error)) >= 0) {
                free(w->last_error);
                w->last_error = TAKE_PTR(msg);
        }
        (void) metric_inc(id->m_failed, "workload", identity_failure_reason(error, false));
        log_workload_full_errno(w, LOG_WARNING, error, "%s under %s: %m; %s; retrying in %us",
                                write_failure_what(error), strempty(dir),
                                w->generation > 1 ? "the previous certificate stays in place"
                                                  : "it has no certificate file yet",
                                (unsigned) (WORKLOAD_WRITE_RETRY / USEC_PER_SEC));
        workload_event_announce_failed(id, w, "Cannot write the certificate files", w->last_error);
        arm_retry(id, w);
}

void workload_files_end(struct identity *id, struct workload *w) {
        bool was = w->write_failing;

        w->write_failing = w->write_error < 0;
        if (!was || w->write_failing)
                return;
        free(w->last_error);
        w->last_error = NULL;
        if (w->write_timer)
                (void) sd_event_source_set_enabled(w->write_timer, SD_EVENT_OFF);
        log_workload_full_errno(w, LOG_INFO, 0, "its files are written again (serial %s)", strempty(w->info.serial));
        if (!w->service)
                pod_gates_changed(id->manager->pod_gates, w->uid);
}

bool workload_files_missing(const struct workload *w) {
        return w->write_failing && (w->generation <= 1 || w->new_dir);
}

/* ---- writing ---- */

/* Who besides root may read a workload's files: a service's user, else nobody ((uid_t) -1). */
static int files_reader(const struct workload *w, uid_t *ret_uid) {
        *ret_uid = (uid_t) -1;
        if (!w->user)
                return 0;
        struct passwd *pw = getpwnam(w->user);
        if (!pw)
                return -ENOENT; /* deleted since the config was read: write nothing rather than root's */
        *ret_uid = pw->pw_uid;
        return 0;
}

/* The directory stays root's with the reader let in (0750 through an ACL entry): were it the
 * user's, the user could swap a version directory for a symlink while the agent writes and have
 * root create files elsewhere. The files in it are root's too, readable by the reader the same
 * way, so handing them over takes no CAP_CHOWN and replacing them no CAP_FOWNER. A directory an
 * older agent made the user's group keeps that group, which the ACL gives nothing. */
static int own_tls_dir(const char *dir, uid_t reader) {
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        return fs_acl_grant_fd(fd, reader != (uid_t) -1 ? 0750 : 0700, reader, (gid_t) -1);
}

/* <dir>/{cert.pem,key.pem,bundle.pem} through the ..data swap, dir pod-tls-dir/<uid> for a pod
 * and the service's tls-dir for a service. The pod model does not carry the pod's user
 * (runAsUser), so a pod's files are root's alone (0600 key): a pod that cannot be root reads its
 * identity from /v1/identity instead. A service's user may read its key (0640 with the user
 * named). */
static int stage_tls_dir(struct identity *id, struct workload *w, char **ret_dir, char **ret_version) {
        _cleanup_free_ char *dir = workload_tls_dir(id, w), *version = NULL, *parent = NULL;
        uid_t reader;
        int r;

        *ret_dir = *ret_version = NULL;
        if (!dir)
                return 0;
        r = files_reader(w, &reader);
        if (r < 0)
                return r;
        if (w->generation <= 1 || w->new_dir) { /* the first write here: leftovers of an earlier run go */
                r = w->service ? fs_path_split(dir, &parent, NULL) : 0;
                if (r >= 0)
                        r = fs_mkdir_p(w->service ? parent : id->settings->pod_tls_dir, 0755);
                if (r < 0)
                        return r;
                (void) atomic_dir_cleanup(dir);
        }
        r = atomic_dir_begin(dir, &version);
        if (r < 0)
                return r;
        if (w->service && (r = own_tls_dir(dir, reader)) < 0) {
                (void) fs_rm_rf(version);
                return r;
        }
        mode_t key_mode = reader != (uid_t) -1 ? 0640 : 0600;
        if ((r = cred_write_version_file(version, "key.pem", w->key_pem, key_mode, reader)) < 0 ||
            (r = cred_write_version_file(version, "cert.pem", w->chain_pem, 0644, reader)) < 0 ||
            (r = cred_write_version_file(version, "bundle.pem", id->bundle_pem ? id->bundle_pem : "", 0644, reader)) < 0) {
                (void) fs_rm_rf(version);
                return r;
        }
        *ret_dir = TAKE_PTR(dir);
        *ret_version = TAKE_PTR(version);
        return 0;
}

static int commit_tls_dir(struct workload *w, const char *dir, const char *version, unsigned flags) {
        int r = atomic_dir_commit_flags(dir, version, 0, flags);
        if (r < 0)
                (void) fs_rm_rf(version);
        else
                w->new_dir = false;
        return r;
}

int workload_files_write(struct identity *id, struct workload *w) {
        _cleanup_free_ char *dir = NULL, *version = NULL;
        int r = stage_tls_dir(id, w, &dir, &version);
        if (r < 0 || !dir)
                return r;
        return commit_tls_dir(w, dir, version, 0);
}

static int sync_pod_tls_dir(int dfd) {
        return syncfs(dfd) < 0 ? -errno : 0;
}

/* pod-tls-dir, made if missing. */
static int open_pod_tls_dir(struct identity *id) {
        int fd = open(id->settings->pod_tls_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) {
                int r = fs_mkdir_p(id->settings->pod_tls_dir, 0755);
                if (r < 0)
                        return r;
                fd = open(id->settings->pod_tls_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        }
        return fd < 0 ? -errno : fd;
}

/* A pod's first directory, when none is there (the usual case: a new pod): built whole under a
 * staging name, to be published with one rename() (atomic_dir_stage_new()). 0 if it does not
 * apply (a directory is there: the version-by-version path cleans it up and commits). */
static int stage_new_pod_dir(struct identity *id, int dfd, struct workload *w) {
        struct stat st;

        if (w->service || w->generation > 1 || !workload_uid_ok(w->uid))
                return 0;
        if (fstatat(dfd, w->uid, &st, AT_SYMLINK_NOFOLLOW) >= 0 || errno != ENOENT)
                return 0;
        const char *bundle = id->bundle_pem ? id->bundle_pem : "";
        const struct atomic_dir_file files[] = {
                { "key.pem", w->key_pem, strlen(w->key_pem), 0600 },
                { "cert.pem", w->chain_pem, strlen(w->chain_pem), 0644 },
                { "bundle.pem", bundle, strlen(bundle), 0644 },
        };
        int r = atomic_dir_stage_new(dfd, w->uid, w->ticket, files, ELEMENTSOF(files));
        return r < 0 ? r : 1;
}

enum staged { STAGED_NOTHING, STAGED_VERSION, STAGED_NEW_DIR };

/* <dir>/{cert.pem,key.pem,bundle.pem} of a batch of pods: every new version (or new directory)
 * written, one syncfs() (the versions are on disk before any ..data points at them, a new
 * directory before it gets its name), every swap or rename, one syncfs(). Services' directories
 * are written one by one. */
static void write_tls_dirs_once(struct identity *id, struct workload **ws, const bool *staged_by_thread, size_t n) {
        _cleanup_free_ char **dirs = calloc(MAX(n, 1u), sizeof(char *)), **versions = calloc(MAX(n, 1u), sizeof(char *));
        _cleanup_free_ enum staged *how = calloc(MAX(n, 1u), sizeof(enum staged));
        _cleanup_close_ int dfd = -EBADF;
        size_t staged = 0;
        int r;

        if (!isempty(id->settings->pod_tls_dir)) {
                dfd = open_pod_tls_dir(id);
                if (dfd < 0) {
                        for (size_t i = 0; i < n; i++)
                                if (!ws[i]->service)
                                        write_failed(id, ws[i], dfd);
                }
        }
        for (size_t i = 0; i < n; i++) {
                r = 0;
                if (!dirs || !versions || !how || ws[i]->service) {
                        if (staged_by_thread[i] && dfd >= 0) /* out of memory: the slow way */
                                (void) atomic_dir_drop_staged(dfd, ws[i]->uid, ws[i]->ticket);
                        r = ws[i]->service || dfd >= 0 ? workload_files_write(id, ws[i]) : 0;
                } else if (dfd < 0)
                        r = 0; /* reported above */
                else if (staged_by_thread[i] || (r = stage_new_pod_dir(id, dfd, ws[i])) > 0)
                        how[i] = STAGED_NEW_DIR;
                else if (r == 0 && (r = stage_tls_dir(id, ws[i], &dirs[i], &versions[i])) >= 0 && dirs[i])
                        how[i] = STAGED_VERSION;
                staged += how && how[i] != STAGED_NOTHING;
                if (r < 0)
                        write_failed(id, ws[i], r);
        }
        if (staged == 0)
                return;
        /* What may not be on disk is never pointed at: it goes, as a failed fsync's would. */
        int synced = sync_pod_tls_dir(dfd);
        for (size_t i = 0; i < n; i++) {
                if (how[i] == STAGED_NOTHING)
                        continue;
                if (synced < 0) {
                        r = synced;
                        if (how[i] == STAGED_NEW_DIR)
                                (void) atomic_dir_drop_staged(dfd, ws[i]->uid, ws[i]->ticket);
                        else
                                (void) fs_rm_rf(versions[i]);
                } else if (how[i] == STAGED_NEW_DIR) {
                        r = atomic_dir_publish_new(dfd, ws[i]->uid, ws[i]->ticket);
                        if (r == -ENOENT) /* staged where the directory was before it was made anew */
                                r = workload_files_write(id, ws[i]);
                } else
                        r = commit_tls_dir(ws[i], dirs[i], versions[i], ATOMIC_DIR_SYNCED);
                if (r < 0)
                        write_failed(id, ws[i], r);
                free(dirs[i]);
                free(versions[i]);
        }
        (void) sync_pod_tls_dir(dfd);
}

void workload_files_write_batch(struct identity *id, struct workload **ws, const bool *staged_by_thread, size_t n) {
        for (size_t i = 0; i < n; i++)
                workload_files_begin(ws[i]);
        write_tls_dirs_once(id, ws, staged_by_thread, n);
        for (size_t i = 0; i < n; i++)
                workload_files_end(id, ws[i]);
}
