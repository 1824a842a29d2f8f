/* SPDX-License-Identifier: MIT */
/* Workload certificates: every pod annotated pinion.io/identity=true gets a key and a certificate
 * naming spiffe://<trust-domain>/ns/<namespace>/sa/<serviceaccount> (plus its IP once known),
 * signed in process by the node's issuer, rotated at a jittered 70–90% of the lifetime, removed
 * with the pod.
 *
 * Issuing is queued: the pod observer only marks a pod; a deferred event source hands the
 * queue to the issue worker (issue-worker.c: key, signature, chain check off the loop; for a
 * new pod also its directory, staged under a name no reader knows) in batches of ISSUE_BATCH;
 * results come back in batches too, whose files share one syncfs() before and one after their
 * ..data swaps or, for new pods, the renames that publish them: a crash leaves each old or
 * new, whole. */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic-dir.h"
#include "fs.h"
#include "identity.h"
#include "issue-worker.h"
#include "json.h"
#include "log.h"
#include "service.h"
#include "strv.h"
#include "workload-internal.h"

#define ISSUE_BATCH 64
/* Results taken per loop iteration: a new pod's directory costs a rename (the thread wrote it),
 * one whose directory exists ~0.1 ms to write; a batch shares two syncfs(). */
#define ISSUE_RESULTS_BATCH 16
#define WORKLOAD_RETRY (5 * USEC_PER_SEC)

struct workload *workload_find(struct identity *id, const char *uid) {
        /* Every pod's gate and every certificate looks its workload up: hashes first. */
        uint64_t h = string_hash(STRING_HASH_INIT, uid);
        for (size_t i = 0; i < id->n_workloads; i++)
                if (id->workloads[i]->uid_hash == h && streq(id->workloads[i]->uid, uid))
                        return id->workloads[i];
        return NULL;
}

/* Namespace and service account names are DNS labels in Kubernetes; static pods are held to
 * the same, so nothing odd ends up inside a URI. */
static bool dns_name_ok(const char *s) {
        if (!s || !*s || strlen(s) > 253)
                return false;
        for (const char *p = s; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
                        return false;
        return true;
}

bool workload_uid_ok(const char *s) {
        return s && *s && s[0] != '.' && !strchr(s, '/') && strlen(s) < 128;
}

static void queue_remove(struct identity *id, struct workload *w) {
        if (!w->queued)
                return;
        struct workload **p = &id->queue_head, *prev = NULL;
        while (*p && *p != w) {
                prev = *p;
                p = &(*p)->queue_next;
        }
        if (*p)
                *p = w->queue_next;
        if (id->queue_tail == w)
                id->queue_tail = prev;
        w->queue_next = NULL;
        w->queued = false;
}

void workload_queue_push(struct identity *id, struct workload *w) {
        if (w->queued)
                return;
        w->queued = true;
        w->queue_next = NULL;
        if (id->queue_tail)
                id->queue_tail->queue_next = w;
        else
                id->queue_head = w;
        id->queue_tail = w;
        if (id->issuer && id->defer)
                (void) sd_event_source_set_enabled(id->defer, SD_EVENT_ON);
}

static struct workload *workload_free(struct workload *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->timer);
        sd_event_source_disable_unref(w->write_timer);
        free(w->uid);
        free(w->ns);
        free(w->name);
        free(w->sa);
        free(w->ip);
        free(w->spiffe);
        free(w->tls_dir);
        free(w->user);
        strv_free(w->dns_names);
        x509_free_secret(w->key_pem);
        free(w->chain_pem);
        x509_cert_info_done(&w->info);
        free(w->last_error);
        free(w->announced_failure);
        free(w);
        return NULL;
}

char *workload_tls_dir(struct identity *id, const struct workload *w) {
        if (w->service)
                return w->tls_dir ? strdup(w->tls_dir) : NULL;
        if (!id->settings->pod_tls_dir || !*id->settings->pod_tls_dir || !workload_uid_ok(w->uid))
                return NULL;
        return fs_path_join(id->settings->pod_tls_dir, w->uid);
}

/* What the agent wrote in a service's tls-dir, and the directory if nothing else is left: the
 * operator named it, so nothing of anyone else's in it goes. */
void workload_remove_service_files(const char *dir) {
        static const char *const links[] = { "cert.pem", "key.pem", "bundle.pem", ATOMIC_DIR_DATA, "..data_tmp" };
        _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        struct dirent *de;

        if (dfd < 0)
                return;
        for (size_t i = 0; i < ELEMENTSOF(links); i++)
                (void) unlinkat(dfd, links[i], 0);
        DIR *d = fs_opendir_at(dfd, ".");
        if (!d)
                return;
        while (fs_read_entry(d, &de) > 0) { /* the version directories: "..<timestamp>" */
                struct stat st;
                if (startswith(de->d_name, "..") && !streq(de->d_name, "..") &&
                    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 && S_ISDIR(st.st_mode))
                        (void) fs_rm_rf_at(dfd, de->d_name);
        }
        closedir(d);
        (void) rmdir(dir);
}

void workload_remove(struct identity *id, struct workload *w) {
        queue_remove(id, w);
        for (size_t i = 0; i < id->n_workloads; i++)
                if (id->workloads[i] == w) {
                        id->workloads[i] = id->workloads[--id->n_workloads];
                        break;
                }
        _cleanup_free_ char *dir = workload_tls_dir(id, w);
        if (dir && w->service)
                workload_remove_service_files(dir);
        else if (dir)
                (void) fs_rm_rf(dir);
        log_workload_full_errno(w, LOG_INFO, 0, "%s gone: certificate dropped", w->service ? "service" : "pod");
        _cleanup_free_ char *uid = strdup(w->uid);
        bool pod = !w->service;
        workload_free(w);
        if (uid) {
                /* The gate no longer concerns the pod (it is gone or wants no identity). */
                if (pod)
                        pod_gates_changed(id->manager->pod_gates, uid);
                identity_announce(id, IDENTITY_CHANGE_WORKLOAD, uid);
        }
}

/* A pod UID as Kubernetes (a UUID) or a static pod's hash spells it. */
static bool looks_like_pod_uid(const char *s) {
        size_t n = strlen(s);
        return n >= 8 && n <= 64 && strspn(s, "0123456789abcdef-") == n && s[0] != '-';
}

static bool staged_in_flight(const char *uid, unsigned ticket, void *userdata) {
        const struct workload *w = workload_find(userdata, uid);
        return w && w->ticket == ticket;
}

int workload_sweep_tls_dir(struct identity *id, unsigned *ret_removed) {
        const char *base = id->settings->pod_tls_dir;
        unsigned removed = 0;
        int ret = 0;

        *ret_removed = 0;
        if (!base || !*base)
                return 0;
        _cleanup_close_ int dfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (dfd < 0)
                return errno == ENOENT ? 0 : -errno;
        /* New directories a kill caught before they got their name; not those the issuing
         * thread staged for the requests in flight now. */
        int r = atomic_dir_sweep_staged(dfd, staged_in_flight, id);
        if (r < 0)
                ret = r;
        else
                removed += (unsigned) r;
        DIR *d = fs_opendir_at(dfd, ".");
        if (!d)
                return -errno;
        struct dirent *de;
        while ((r = fs_read_entry(d, &de)) > 0) {
                struct stat st;
                /* Only real directories named like a pod UID that no current workload owns; a
                 * symlink is never followed nor touched. */
                if (!looks_like_pod_uid(de->d_name) || workload_find(id, de->d_name) ||
                    fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
                        continue;
                r = fs_rm_rf_at(dfd, de->d_name);
                if (r < 0 && ret == 0)
                        ret = r;
                else if (r >= 0)
                        removed++;
        }
        if (r < 0 && ret == 0)
                ret = r;
        closedir(d);
        *ret_removed = removed;
        return ret;
}

void workload_free_all(struct identity *id) {
        for (size_t i = 0; i < id->n_workloads; i++)
                workload_free(id->workloads[i]);
        free(id->workloads);
        id->workloads = NULL;
        id->n_workloads = 0;
        id->queue_head = id->queue_tail = NULL;
}

static void set_error(struct workload *w, const char *e) {
        free(w->last_error);
        w->last_error = e ? strdup(e) : NULL;
}

static void schedule_rotation(struct identity *id, struct workload *w);

static bool spiffe_in_trust_domain(const char *spiffe, const char *td) {
        size_t n = strlen(td);
        return spiffe && strncmp(spiffe, "spiffe://", 9) == 0 && strncmp(spiffe + 9, td, n) == 0 && spiffe[9 + n] == '/';
}

/* What a certificate for w asks for, as a job for the issue worker; -EINVAL (and w->last_error)
 * if w cannot have one. */
static int make_job(struct identity *id, struct workload *w, struct issue_job **ret) {
        _cleanup_(issue_job_freep) struct issue_job *j = NULL;

        if (!w->service && (!dns_name_ok(w->ns) || !dns_name_ok(w->sa))) {
                set_error(w, "namespace and service account must be DNS names to go into a SPIFFE ID");
                return -EINVAL;
        }
        if (!spiffe_in_trust_domain(w->spiffe, id->settings->trust_domain)) {
                set_error(w, "its SPIFFE ID is not in this node's trust domain");
                return -EINVAL;
        }
        j = calloc(1, sizeof(*j));
        if (!j || !(j->uid = strdup(w->uid)) || !(j->uri = strdup(w->spiffe)) || (w->ip && !(j->ip = strdup(w->ip))) ||
            (w->dns_names && strv_copy(w->dns_names, &j->dns) < 0))
                return -ENOMEM;
        if (w->service ? !(j->common_name = strdup(w->name)) : asprintf(&j->common_name, "%s.%s", w->name, w->ns) < 0) {
                j->common_name = NULL;
                return -ENOMEM;
        }
        if (strlen(j->common_name) > 64)
                j->common_name[64] = 0; /* the X.520 upper bound on a common name */
        j->lifetime = id->settings->workload_cert_lifetime;
        j->ticket = w->ticket = ++id->last_ticket;
        if (!w->service && w->generation == 0 && !isempty(id->settings->pod_tls_dir) && workload_uid_ok(w->uid)) {
                /* A new pod: the thread writes its directory too (else the loop does). */
                j->stage_parent = strdup(id->settings->pod_tls_dir);
                j->stage_name = strdup(w->uid);
                j->stage_bundle = strdup(id->bundle_pem ? id->bundle_pem : "");
        }
        j->issuer_generation = id->issuer_generation;
        *ret = TAKE_PTR(j);
        return 0;
}

/* notAfter passed without a renewal: the gate (which compares with the clock) is closed now, and
 * whoever acts on it must hear so without waiting for some other event. */
static void expired(struct identity *id, struct workload *w) {
        log_workload_full_errno(w, LOG_WARNING, 0, "certificate for %s expired without a renewal (%s): identity gate closed", w->spiffe,
                     w->last_error ? w->last_error : id->issuer ? "renewal pending" : id->issuer_reason ? id->issuer_reason : "no issuer");
        (void) metric_inc(id->m_failed, "workload", identity_failure_reason(0, true));
        workload_event_announce_failed(id, w, "Certificate expired without a renewal",
                                       w->last_error ?: id->issuer ? "renewal pending" : id->issuer_reason ?: "no issuer");
        if (!w->service)
                pod_gates_changed(id->manager->pod_gates, w->uid);
        identity_announce(id, IDENTITY_CHANGE_WORKLOAD, w->uid);
        workload_queue_push(id, w); /* issue again as soon as the issuer can */
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct workload *w = userdata;
        usec_t now = now_usec(CLOCK_REALTIME);

        if (w->rotate_due && now >= w->rotate_due) {
                w->rotate_due = 0;
                w->rotation = true;
                workload_queue_push(w->id, w);
        }
        if (w->expire_due && now >= w->expire_due) {
                w->expire_due = 0;
                if (identity_clock_hold_expiry(w))
                        return 0; /* expired by a step of the clock, its renewal under way */
                workload_timer_arm(w); /* a retry planned past notAfter stays */
                expired(w->id, w);     /* last: telling others may end in w's removal */
                return 0;
        }
        workload_timer_arm(w); /* the clock went back since the loop looked, or the other point is left */
        return 0;
}

void workload_timer_arm(struct workload *w) {
        usec_t at = MIN(w->rotate_due ?: USEC_INFINITY, w->expire_due ?: USEC_INFINITY);
        int r;

        if (at == USEC_INFINITY) {
                if (w->timer)
                        (void) sd_event_source_set_enabled(w->timer, SD_EVENT_OFF);
                return;
        }
        r = w->timer ? sd_event_source_set_time(w->timer, at)
                     : sd_event_add_time(w->id->manager->event, &w->timer, CLOCK_REALTIME, at, USEC_PER_SEC / 10, on_timer, w);
        if (r >= 0)
                r = sd_event_source_set_enabled(w->timer, SD_EVENT_ONESHOT);
        if (r < 0)
                log_workload_full_errno(w, LOG_ERR, r, "cannot arm its timer: %m");
}

static void schedule_rotation(struct identity *id, struct workload *w) {
        /* The share is of the time it is actually ours: from now (just issued), not from a
         * backdated notBefore. */
        usec_t now = now_usec(CLOCK_REALTIME);
        usec_t start = MIN(MAX(w->info.not_before, now), w->info.not_after);
        usec_t life = w->info.not_after - start;
        w->rotate_at = start + (usec_t) ((double) life * (0.7 + 0.2 * backoff_random(&id->jitter)));
        w->rotate_due = w->rotate_at;
        w->expire_due = w->info.not_after;
        workload_timer_arm(w);
}

static void retry_rotation(struct workload *w) {
        w->rotate_due = now_usec(CLOCK_REALTIME) + WORKLOAD_RETRY;
        workload_timer_arm(w);
}

static bool holds_valid_certificate(const struct workload *w) {
        return w->chain_pem && now_usec(CLOCK_REALTIME) < w->info.not_after;
}

static void issue_failed(struct identity *id, struct workload *w, bool had, int r) {
        (void) metric_inc(id->m_failed, "workload", identity_failure_reason(0, false));
        log_workload_full_errno(w, LOG_WARNING, r, "cannot issue its certificate: %s (%m)", w->last_error ? w->last_error : "");
        workload_event_announce_failed(id, w, "Cannot issue a certificate", w->last_error ?: strerror(-r));
        /* A later issuer change or pod update tries again; one that still holds a certificate
         * also retries on a timer while it lasts. */
        if (had)
                retry_rotation(w);
}

static void issue_succeeded(struct identity *id, struct workload *w, bool had) {
        (void) metric_inc(had ? id->m_rotated : id->m_issued, "workload");
        schedule_rotation(id, w);
        char until[64] = "";
        (void) json_format_rfc3339(w->info.not_after, until, sizeof(until));
        log_workload_full_errno(w, LOG_DEBUG, 0, "%s serial %s for %s, valid until %s", had ? "rotated to" : "issued", w->info.serial,
                     w->spiffe, until);
        if (!w->write_failing) /* else announced once its files are written (workload-files.c) */
                workload_event_announce_issued(id, w);
        if (!had && !w->service)
                pod_gates_changed(id->manager->pod_gates, w->uid);
        identity_announce(id, IDENTITY_CHANGE_WORKLOAD, w->uid);
}

static void submit(struct identity *id, struct workload *w) {
        struct issue_job *j = NULL;
        int r = make_job(id, w, &j);

        if (r >= 0)
                r = issue_worker_submit(id->worker, j);
        if (r < 0) {
                if (!w->last_error)
                        set_error(w, "out of memory");
                issue_failed(id, w, holds_valid_certificate(w), r);
        }
}

static int on_defer(sd_event_source *s, void *userdata) {
        struct identity *id = userdata;

        for (unsigned n = 0; id->issuer && id->worker && id->queue_head && n < ISSUE_BATCH; n++) {
                struct workload *w = id->queue_head;
                queue_remove(id, w);
                submit(id, w);
        }
        if (!id->issuer || !id->worker || !id->queue_head)
                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
        return 0;
}

/* Takes the job's certificate and key. */
static void install(struct workload *w, struct issue_job *j) {
        x509_free_secret(w->key_pem);
        free(w->chain_pem);
        x509_cert_info_done(&w->info);
        w->key_pem = TAKE_PTR(j->key_pem);
        w->chain_pem = TAKE_PTR(j->chain_pem);
        w->info = j->info;
        j->info = (struct cert_info) {};
        /* Only the API's answers show them: parsed again there rather than held for every pod. */
        w->info.subject = mfree(w->info.subject);
        w->info.sans = strv_free(w->info.sans);
        w->generation++;
        set_error(w, NULL);
}

/* Results of the worker: the last request of a workload that is still here, for the issuer
 * that is still the one, is taken; anything else is dropped (and asked again if the issuer
 * changed meanwhile). */
static void on_issued(struct issue_worker *worker, struct issue_job *jobs, void *userdata) {
        struct identity *id = userdata;
        size_t n = 0, m = 0;
        for (const struct issue_job *j = jobs; j; j = j->next)
                n++;
        _cleanup_free_ struct workload **done = calloc(MAX(n, 1u), sizeof(struct workload *));
        _cleanup_free_ bool *had = calloc(MAX(n, 1u), sizeof(bool)), *staged = calloc(MAX(n, 1u), sizeof(bool));
        _cleanup_strv_free_ char **uids = calloc(n + 1, sizeof(char *));

        while (jobs) {
                _cleanup_(issue_job_freep) struct issue_job *j = jobs;
                struct workload *w = workload_find(id, j->uid);

                jobs = j->next;
                bool keep_staged = false;
                if (!w || j->ticket != w->ticket)
                        ;
                else if (!id->issuer || j->issuer_generation != id->issuer_generation)
                        workload_queue_push(id, w);
                else if (j->result < 0 || !done || !had || !uids || !staged) {
                        set_error(w, j->result < 0 ? (j->reason ? j->reason : "the node's issuer could not sign") : "out of memory");
                        identity_clock_grace_end(w);
                        issue_failed(id, w, holds_valid_certificate(w), j->result < 0 ? j->result : -ENOMEM);
                } else {
                        /* Expired by a step and renewed within the grace: a rotation, its gate never closed. */
                        had[m] = holds_valid_certificate(w) || (w->chain_pem && identity_clock_in_grace(w));
                        w->step_grace_until = 0;
                        /* Staged for the place and bundle of now, or written again here. */
                        keep_staged = staged[m] = j->staged > 0 && streq_ptr(j->stage_parent, id->settings->pod_tls_dir) &&
                                                  streq(j->stage_bundle, id->bundle_pem ? id->bundle_pem : "");
                        install(w, j);
                        uids[m] = TAKE_PTR(j->uid);
                        done[m++] = w;
                }
                if (!keep_staged)
                        issue_job_drop_staged(j);
        }
        workload_files_write_batch(id, done, staged, m);
        /* Telling others may end in anything, a workload's removal too: look each up again. */
        for (size_t i = 0; i < m; i++) {
                struct workload *w = workload_find(id, uids[i]);
                if (w)
                        issue_succeeded(id, w, had[i]);
        }
}

void workload_issuer_changed(struct identity *id) {
        int r;

        if (!id->worker) {
                /* Results, like requests, below the API and IO: a batch waits for what is ready. */
                r = issue_worker_new(id->manager->event, ISSUE_RESULTS_BATCH, SD_EVENT_PRIORITY_IDLE, on_issued, id,
                                     &id->worker);
                if (r < 0) {
                        log_module_error_errno(MODULE, r, "cannot start the issuing thread: %m");
                        return;
                }
        }
        /* Results for the previous issuer are stale from here on; the worker signs with a copy
         * of this one from the next job on. */
        id->issuer_generation++;
        r = issue_worker_set_issuer(id->worker, id->issuer);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "cannot hand the issuer to the issuing thread: %m");
                return;
        }
        if (!id->defer) {
                r = sd_event_add_defer(id->manager->event, &id->defer, on_defer, id);
                if (r < 0) {
                        log_module_error_errno(MODULE, r, "cannot add the issuing source: %m");
                        return;
                }
                /* Beside the API and IO, not below: handing requests over costs microseconds,
                 * and the thread then signs while the loop goes on reading pod files (below,
                 * it sat idle until 1,000 new pod files had all been read). */
                (void) sd_event_source_set_priority(id->defer, SD_EVENT_PRIORITY_NORMAL);
                (void) sd_event_source_set_enabled(id->defer, SD_EVENT_OFF);
        }
        for (size_t i = 0; i < id->n_workloads; i++) {
                struct workload *w = id->workloads[i];
                if (!w->chain_pem || now_usec(CLOCK_REALTIME) >= w->info.not_after)
                        workload_queue_push(id, w);
        }
        if (id->issuer && id->queue_head)
                (void) sd_event_source_set_enabled(id->defer, SD_EVENT_ON);
}

struct workload *workload_add(struct identity *id, const char *uid) {
        struct workload *w = calloc(1, sizeof(*w));
        struct workload **a = w ? realloc(id->workloads, (id->n_workloads + 1) * sizeof(*a)) : NULL;
        if (a)
                id->workloads = a;
        if (!w || !a || !(w->uid = strdup(uid))) {
                workload_free(w);
                return NULL;
        }
        id->workloads[id->n_workloads++] = w;
        w->id = id;
        w->uid_hash = string_hash(STRING_HASH_INIT, w->uid);
        return w;
}

static bool wants_identity(const struct pod *p) {
        return p && streq_ptr(pod_annotation(p, IDENTITY_ANNOTATION), "true");
}

int workload_set_string(char **field, const char *value, bool *changed) {
        if (streq_ptr(*field, value))
                return 0;
        char *copy = NULL;
        if (value && !(copy = strdup(value)))
                return -ENOMEM;
        free(*field);
        *field = copy;
        *changed = true;
        return 0;
}

void workload_on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata) {
        struct identity *id = userdata;
        const char *uid = new ? new->uid : old->uid;
        struct workload *w = workload_find(id, uid);

        if (!wants_identity(new)) {
                if (w)
                        workload_remove(id, w);
                return;
        }
        bool created = false, changed = false;
        if (!w) {
                w = workload_add(id, uid);
                if (!w) {
                        log_module_error(MODULE, "out of memory tracking pod %s", uid);
                        return;
                }
                created = true;
        }
        _cleanup_free_ char *spiffe = NULL;
        if (asprintf(&spiffe, "spiffe://%s/ns/%s/sa/%s", id->settings->trust_domain, new->namespace,
                     new->service_account) < 0 ||
            workload_set_string(&w->ns, new->namespace, &changed) < 0 || workload_set_string(&w->name, new->name, &changed) < 0 ||
            workload_set_string(&w->sa, new->service_account, &changed) < 0 ||
            workload_set_string(&w->ip, pod_primary_ip(new), &changed) < 0 || workload_set_string(&w->spiffe, spiffe, &changed) < 0) {
                log_module_error(MODULE, "out of memory tracking pod %s", uid);
                return;
        }
        if (created)
                log_workload_full_errno(w, LOG_DEBUG, 0, "pod %s/%s asks for an identity", w->ns, w->name);
        if (changed || !w->chain_pem)
                workload_queue_push(id, w);
        if (created)
                pod_gates_changed(id->manager->pod_gates, uid);
}

int workload_gate(const struct pod *p, void *userdata, char **ret_reason) {
        struct identity *id = userdata;
        if (!wants_identity(p))
                return 1;
        struct workload *w = workload_find(id, p->uid);
        if (w && w->chain_pem && identity_clock_current(w) && !workload_files_missing(w))
                return 1;
        const char *why = w && w->last_error ? w->last_error : id->issuer ? "certificate not issued yet" : id->issuer_reason;
        if (ret_reason)
                *ret_reason = strdup(why ? why : "certificate not issued yet");
        return 0;
}

usec_t workload_nearest_expiry(struct identity *id) {
        usec_t t = USEC_INFINITY;
        for (size_t i = 0; i < id->n_workloads; i++)
                if (id->workloads[i]->chain_pem)
                        t = MIN(t, id->workloads[i]->info.not_after);
        return t;
}

int workload_status(const struct workload *w, cJSON *o) {
        if (!cJSON_AddStringToObject(o, "uid", w->uid) || !json_add_string_or_null(o, "namespace", w->ns) ||
            !json_add_string_or_null(o, "service", w->service ? w->name : NULL) ||
            !json_add_string_or_null(o, "name", w->name) || !json_add_string_or_null(o, "id", w->spiffe) ||
            !cJSON_AddStringToObject(o, "state", !w->chain_pem ? (w->last_error ? "failed" : "pending")
                                                 : now_usec(CLOCK_REALTIME) >= w->info.not_after ? "expired" : "issued") ||
            !json_add_string_or_null(o, "lastError", w->last_error))
                return -ENOMEM;
        if (!w->chain_pem)
                return 0;
        _cleanup_(x509_cert_info_done) struct cert_info names = {};
        cJSON *sans = cJSON_AddArrayToObject(o, "sans");
        if (x509_leaf_info(w->chain_pem, &names) < 0 || !sans || !cJSON_AddStringToObject(o, "subject", names.subject) ||
            !cJSON_AddStringToObject(o, "serial", w->info.serial) || !json_add_time(o, "notBefore", w->info.not_before) ||
            !json_add_time(o, "notAfter", w->info.not_after) || !json_add_time(o, "rotateAt", w->rotate_at) ||
            !cJSON_AddNumberToObject(o, "generation", w->generation))
                return -ENOMEM;
        STRV_FOREACH(s, names.sans)
                if (!cJSON_AddItemToArray(sans, cJSON_CreateString(*s)))
                        return -ENOMEM;
        return 0;
}

/* ---- systemd services ([service.NAME]) ---- */
