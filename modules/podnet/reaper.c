/* SPDX-License-Identifier: MIT */
/* The veth deletion worker. See reaper.h. */

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "reaper.h"
#include "wire.h"

struct job {
        char *name;
        int error;
};

struct reaper {
        sd_event_source *io;
        int efd;
        reaper_done_fn done;
        void *userdata;

        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t wake;     /* work queued, or quit */
        pthread_cond_t idle;     /* a job finished */
        bool quit;
        /* Under lock: todo (queued), busy (the one in progress), finished (for the loop). */
        struct job *todo;
        size_t n_todo;
        bool busy;
        const char *current;     /* the name being deleted (owned by the thread) while busy */
        struct job *finished;
        size_t n_finished;
};

static int push(struct job **a, size_t *n, struct job j) {
        struct job *grown = realloc(*a, (*n + 1) * sizeof(struct job));
        if (!grown)
                return -ENOMEM;
        *a = grown;
        (*a)[(*n)++] = j;
        return 0;
}

static void *reaper_thread(void *userdata) {
        struct reaper *r = userdata;

        pthread_mutex_lock(&r->lock);
        for (;;) {
                while (!r->quit && r->n_todo == 0)
                        pthread_cond_wait(&r->wake, &r->lock);
                if (r->quit)
                        break;
                struct job j = r->todo[0];
                memmove(r->todo, r->todo + 1, (r->n_todo - 1) * sizeof(struct job));
                r->n_todo--;
                r->busy = true;
                r->current = j.name;
                pthread_mutex_unlock(&r->lock);

                j.error = wire_del(j.name);

                pthread_mutex_lock(&r->lock);
                r->busy = false;
                r->current = NULL;
                if (push(&r->finished, &r->n_finished, j) < 0)
                        free(j.name); /* lost: retried at the next start (persisted) */
                pthread_cond_broadcast(&r->idle);
                uint64_t one = 1;
                (void) !write(r->efd, &one, sizeof(one));
        }
        pthread_mutex_unlock(&r->lock);
        return NULL;
}

/* On the loop: run done() for what the thread finished. */
static void reaper_dispatch(struct reaper *r) {
        struct job *jobs;
        size_t n;

        pthread_mutex_lock(&r->lock);
        jobs = r->finished;
        n = r->n_finished;
        r->finished = NULL;
        r->n_finished = 0;
        pthread_mutex_unlock(&r->lock);
        for (size_t i = 0; i < n; i++) {
                r->done(r, jobs[i].name, jobs[i].error, r->userdata);
                free(jobs[i].name);
        }
        free(jobs);
}

static int on_eventfd(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct reaper *r = userdata;
        uint64_t v;
        (void) !read(r->efd, &v, sizeof(v));
        reaper_dispatch(r);
        return 0;
}

int reaper_new(sd_event *e, reaper_done_fn done, void *userdata, struct reaper **ret) {
        _cleanup_(reaper_freep) struct reaper *r = NULL;
        int k;

        r = calloc(1, sizeof(struct reaper));
        if (!r)
                return -ENOMEM;
        r->done = done;
        r->userdata = userdata;
        pthread_mutex_init(&r->lock, NULL);
        pthread_cond_init(&r->wake, NULL);
        pthread_cond_init(&r->idle, NULL);
        r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->efd < 0)
                return negative_errno();
        k = sd_event_add_io(e, &r->io, r->efd, EPOLLIN, on_eventfd, r);
        if (k < 0)
                return k;
        k = pthread_create(&r->thread, NULL, reaper_thread, r);
        if (k != 0)
                return -k;
        r->thread_started = true;
        *ret = TAKE_PTR(r);
        return 0;
}

struct reaper *reaper_free(struct reaper *r) {
        if (!r)
                return NULL;
        if (r->thread_started) {
                pthread_mutex_lock(&r->lock);
                r->quit = true;
                pthread_cond_broadcast(&r->wake);
                pthread_mutex_unlock(&r->lock);
                pthread_join(r->thread, NULL);
        }
        for (size_t i = 0; i < r->n_todo; i++)
                free(r->todo[i].name);
        free(r->todo);
        for (size_t i = 0; i < r->n_finished; i++)
                free(r->finished[i].name);
        free(r->finished);
        sd_event_source_disable_unref(r->io);
        safe_close(r->efd);
        pthread_cond_destroy(&r->idle);
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        free(r);
        return NULL;
}

int reaper_queue(struct reaper *r, const char *name) {
        struct job j = { .name = strdup(name) };
        int k;

        if (!j.name)
                return -ENOMEM;
        pthread_mutex_lock(&r->lock);
        k = push(&r->todo, &r->n_todo, j);
        if (k >= 0)
                pthread_cond_signal(&r->wake);
        pthread_mutex_unlock(&r->lock);
        if (k < 0)
                free(j.name);
        return k;
}

unsigned reaper_pending(const struct reaper *r) {
        unsigned n;
        pthread_mutex_lock((pthread_mutex_t *) &r->lock);
        n = (unsigned) r->n_todo + r->busy + (unsigned) r->n_finished;
        pthread_mutex_unlock((pthread_mutex_t *) &r->lock);
        return n;
}

static ssize_t todo_index(const struct reaper *r, const char *name) {
        for (size_t i = 0; i < r->n_todo; i++)
                if (streq(r->todo[i].name, name))
                        return (ssize_t) i;
        return -1;
}

/* Under lock: name to the front of the queue, next after at most the one in progress. */
static ssize_t to_front(struct reaper *r, const char *name) {
        ssize_t i = todo_index(r, name);
        if (i > 0) {
                struct job j = r->todo[i];
                memmove(r->todo + 1, r->todo, (size_t) i * sizeof(struct job));
                r->todo[0] = j;
        }
        return i;
}

int reaper_expedite(struct reaper *r, const char *name) {
        ssize_t i;

        pthread_mutex_lock(&r->lock);
        i = to_front(r, name);
        pthread_mutex_unlock(&r->lock);
        return i < 0 ? -ENOENT : 0;
}

int reaper_wait(struct reaper *r, const char *name) {
        bool waited = false;

        pthread_mutex_lock(&r->lock);
        (void) to_front(r, name);
        while (todo_index(r, name) >= 0 || (r->busy && streq(r->current, name))) {
                waited = true;
                pthread_cond_wait(&r->idle, &r->lock);
        }
        pthread_mutex_unlock(&r->lock);
        reaper_dispatch(r);
        return waited ? 0 : -ENOENT;
}
