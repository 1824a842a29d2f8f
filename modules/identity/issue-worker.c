/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>

#include "atomic-dir.h"
#include "issue-worker.h"
#include "strv.h"

struct issue_worker {
        pthread_t thread;
        bool started;

        /* Shared with the thread, under lock. */
        pthread_mutex_t lock;
        pthread_cond_t wake;
        struct issue_job *todo, *todo_tail; /* for the thread */
        struct issue_job *done, *done_tail; /* for the loop */
        bool stop;

        /* The loop's. */
        int event_fd; /* the thread writes 1 per finished job; the loop drains it */
        sd_event_source *source;
        issue_done_fn done_fn;
        void *userdata;
        unsigned max_batch;

        /* The thread's. */
        struct ca *ca;
        EVP_PKEY_CTX *keygen;
};

/* An issuer change travels the job queue, so that it applies exactly from the next job on. */
struct issuer_change {
        struct issue_job job; /* uid NULL marks it */
        struct ca *ca;
};

static void job_free_any(struct issue_job *j) {
        if (j && !j->uid) {
                struct issuer_change *c = (struct issuer_change *) j;
                ca_free(c->ca);
                free(c);
        } else
                issue_job_free(j);
}

static void jobs_free(struct issue_job *j) {
        while (j) {
                struct issue_job *next = j->next;
                job_free_any(j);
                j = next;
        }
}

static void append(struct issue_job **head, struct issue_job **tail, struct issue_job *j) {
        j->next = NULL;
        if (*tail)
                (*tail)->next = j;
        else
                *head = j;
        *tail = j;
}

/* ---- the thread ---- */

static int fail(struct issue_job *j, int r, const char *reason) {
        j->reason = strdup(reason);
        return j->reason ? r : -ENOMEM;
}

/* What workload.c did on the loop before: key, certificate, the check against the bundle. */
static int issue(struct issue_worker *w, struct issue_job *j) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL;
        const struct cert_subject s = { .common_name = j->common_name, .uri = j->uri, .ip = j->ip, .dns = j->dns };
        const char *why = NULL;
        int r;

        if (!w->ca)
                return fail(j, -ENOKEY, "no issuer for workload certificates");
        if ((r = x509_key_generate(w->keygen, &key)) < 0 ||
            (r = ca_issue(w->ca, key, &s, CERT_USAGE_CLIENT_SERVER, j->lifetime, &cert)) < 0)
                return fail(j, r, r == -EKEYEXPIRED ? "the node's issuer (CA) has expired" : "the node's issuer could not sign");
        r = ca_verify_issued(w->ca, cert, &why);
        if (r < 0) {
                if (asprintf(&j->reason, "the node's issuer made a chain that does not verify against the bundle: %s",
                             why ? why : "unknown reason") < 0) {
                        j->reason = NULL;
                        return -ENOMEM;
                }
                return r;
        }
        if ((r = ca_chain_pem(w->ca, cert, &j->chain_pem)) < 0 || (r = x509_cert_info(cert, &j->info)) < 0 ||
            (r = x509_key_to_pem_for(key, cert, &j->key_pem)) < 0)
                return fail(j, r, "the node's issuer could not sign");
        return 0;
}

/* A new directory only: one that is there is the loop's to update, version by version. */
static int stage(struct issue_job *j) {
        /* Opened for each job: a pod-tls-dir removed and made again is the one written to. */
        _cleanup_close_ int fd = open(j->stage_parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        struct stat st;

        if (fd < 0)
                return -errno;
        if (fstatat(fd, j->stage_name, &st, AT_SYMLINK_NOFOLLOW) >= 0 || errno != ENOENT)
                return 0;
        const struct atomic_dir_file files[] = {
                { "key.pem", j->key_pem, strlen(j->key_pem), 0600 },
                { "cert.pem", j->chain_pem, strlen(j->chain_pem), 0644 },
                { "bundle.pem", j->stage_bundle, strlen(j->stage_bundle), 0644 },
        };
        int r = atomic_dir_stage_new(fd, j->stage_name, j->ticket, files, ELEMENTSOF(files));
        return r < 0 ? r : 1;
}

static void finish(struct issue_worker *w, struct issue_job *j) {
        static const uint64_t one = 1;

        pthread_mutex_lock(&w->lock);
        append(&w->done, &w->done_tail, j);
        pthread_mutex_unlock(&w->lock);
        /* Cannot fail but for an overflow of the counter, which the loop drains long before. */
        (void) !write(w->event_fd, &one, sizeof(one));
}

static void run_job(struct issue_worker *w, struct issue_job *j) {
        if (!j->uid) {
                struct issuer_change *c = (struct issuer_change *) j;
                ca_free(w->ca);
                w->ca = c->ca;
                free(c);
                return;
        }
        j->result = issue(w, j);
        ERR_clear_error();
        if (j->result >= 0 && j->stage_parent && j->stage_name && j->stage_bundle)
                j->staged = stage(j);
        finish(w, j);
}

static void *worker_main(void *userdata) {
        struct issue_worker *w = userdata;

        for (;;) {
                struct issue_job *j;

                pthread_mutex_lock(&w->lock);
                while (!w->todo && !w->stop)
                        pthread_cond_wait(&w->wake, &w->lock);
                if (w->stop) {
                        pthread_mutex_unlock(&w->lock);
                        break;
                }
                j = w->todo;
                w->todo = j->next;
                if (!w->todo)
                        w->todo_tail = NULL;
                pthread_mutex_unlock(&w->lock);

                run_job(w, j);
        }
        OPENSSL_thread_stop();
        return NULL;
}

/* ---- the loop ---- */

static int on_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct issue_worker *w = userdata;
        static const uint64_t one = 1;
        struct issue_job *jobs;
        bool more;
        uint64_t n;

        (void) !read(w->event_fd, &n, sizeof(n));
        /* At most max_batch at a time: the loop has other callers to answer between batches. */
        pthread_mutex_lock(&w->lock);
        jobs = w->done;
        struct issue_job *last = jobs;
        for (unsigned i = 1; last && last->next && i < w->max_batch; i++)
                last = last->next;
        w->done = last ? last->next : NULL;
        if (!w->done)
                w->done_tail = NULL;
        if (last)
                last->next = NULL;
        more = !!w->done;
        pthread_mutex_unlock(&w->lock);
        if (more)
                (void) !write(w->event_fd, &one, sizeof(one));
        if (jobs)
                w->done_fn(w, jobs, w->userdata);
        return 0;
}

int issue_worker_new(sd_event *e, unsigned max_batch, int64_t priority, issue_done_fn done, void *userdata,
                     struct issue_worker **ret) {
        _cleanup_(issue_worker_freep) struct issue_worker *w = NULL;
        sigset_t all, saved;
        int r;

        if (!e || !done || !ret || max_batch == 0)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->event_fd = -EBADF;
        w->done_fn = done;
        w->userdata = userdata;
        w->max_batch = max_batch;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->wake, NULL);

        r = x509_keygen_new(&w->keygen);
        if (r < 0)
                return r;
        w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->event_fd < 0)
                return -errno;
        r = sd_event_add_io(e, &w->source, w->event_fd, EPOLLIN, on_event, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(w->source, "identity-issue-worker");
        r = sd_event_source_set_priority(w->source, priority);
        if (r < 0)
                return r;

        /* Signals stay the loop's (signalfd): the thread never takes one. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        r = -pthread_create(&w->thread, NULL, worker_main, w);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r < 0)
                return r;
        w->started = true;
        *ret = TAKE_PTR(w);
        return 0;
}

struct issue_worker *issue_worker_free(struct issue_worker *w) {
        if (!w)
                return NULL;
        if (w->started) {
                pthread_mutex_lock(&w->lock);
                w->stop = true;
                pthread_cond_signal(&w->wake);
                pthread_mutex_unlock(&w->lock);
                pthread_join(w->thread, NULL);
        }
        jobs_free(w->todo);
        for (struct issue_job *j = w->done; j; j = j->next) /* never handed back */
                issue_job_drop_staged(j);
        jobs_free(w->done);
        ca_free(w->ca);
        EVP_PKEY_CTX_free(w->keygen);
        sd_event_source_disable_unref(w->source);
        if (w->event_fd >= 0)
                close(w->event_fd);
        pthread_cond_destroy(&w->wake);
        pthread_mutex_destroy(&w->lock);
        free(w);
        return NULL;
}

static void submit(struct issue_worker *w, struct issue_job *j) {
        pthread_mutex_lock(&w->lock);
        append(&w->todo, &w->todo_tail, j);
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
}

/* A copy that shares no object with ca: the loop may use or free its own meanwhile. */
static int ca_copy(const struct ca *ca, struct ca **ret) {
        EVP_PKEY *key = EVP_PKEY_dup(ca->key);
        STACK_OF(X509) *chain = sk_X509_deep_copy(ca->chain, X509_dup, X509_free);
        STACK_OF(X509) *roots = sk_X509_deep_copy(ca->roots, X509_dup, X509_free);

        ERR_clear_error();
        if (!key || !chain || !roots) {
                EVP_PKEY_free(key);
                sk_X509_pop_free(chain, X509_free);
                sk_X509_pop_free(roots, X509_free);
                return -ENOMEM;
        }
        return ca_new(key, chain, roots, ret); /* takes them, on failure too */
}

int issue_worker_set_issuer(struct issue_worker *w, const struct ca *ca) {
        struct issuer_change *c;
        int r;

        if (!w)
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        if (ca) {
                r = ca_copy(ca, &c->ca);
                if (r < 0) {
                        free(c);
                        return r;
                }
        }
        submit(w, &c->job);
        return 0;
}

int issue_worker_submit(struct issue_worker *w, struct issue_job *j) {
        if (!w || !j || !j->uid) {
                issue_job_free(j);
                return -EINVAL;
        }
        submit(w, j);
        return 0;
}
