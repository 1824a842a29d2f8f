/* SPDX-License-Identifier: MIT */
/* The background fdatasync. See syncer.h. */

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "syncer.h"

struct syncer {
        pthread_t thread;
        bool thread_started;
        pthread_mutex_t lock;
        pthread_cond_t wake;   /* a flush was asked for, or quit */
        pthread_cond_t done;   /* a flush finished */
        bool quit;
        int fd;
        uint64_t requested;    /* the last ticket handed out */
        uint64_t flushed;      /* every ticket up to this one is done */
        /* Tickets whose flush failed, as one range (a later failure widens it: reporting a good
         * one as failed only makes the caller rewrite its state once more). */
        uint64_t failed_from, failed_to;
        int error;
};

static void *syncer_thread(void *userdata) {
        struct syncer *s = userdata;

        pthread_mutex_lock(&s->lock);
        for (;;) {
                while (!s->quit && s->requested == s->flushed)
                        pthread_cond_wait(&s->wake, &s->lock);
                if (s->requested == s->flushed)
                        break; /* quit, nothing left to flush */
                uint64_t from = s->flushed + 1, to = s->requested;
                int fd = s->fd;
                pthread_mutex_unlock(&s->lock);

                int r = fdatasync(fd) < 0 ? -errno : 0;

                pthread_mutex_lock(&s->lock);
                if (r < 0) {
                        if (s->failed_from == 0)
                                s->failed_from = from;
                        s->failed_to = to;
                        s->error = r;
                }
                s->flushed = to;
                pthread_cond_broadcast(&s->done);
        }
        pthread_mutex_unlock(&s->lock);
        return NULL;
}

int syncer_new(struct syncer **ret) {
        struct syncer *s = calloc(1, sizeof(struct syncer));
        int k;

        if (!s)
                return -ENOMEM;
        s->fd = -EBADF;
        pthread_mutex_init(&s->lock, NULL);
        pthread_cond_init(&s->wake, NULL);
        pthread_cond_init(&s->done, NULL);
        k = pthread_create(&s->thread, NULL, syncer_thread, s);
        if (k != 0) {
                syncer_free(s);
                return -k;
        }
        s->thread_started = true;
        *ret = s;
        return 0;
}

struct syncer *syncer_free(struct syncer *s) {
        if (!s)
                return NULL;
        if (s->thread_started) {
                pthread_mutex_lock(&s->lock);
                s->quit = true;
                pthread_cond_signal(&s->wake);
                pthread_mutex_unlock(&s->lock);
                pthread_join(s->thread, NULL);
        }
        pthread_cond_destroy(&s->done);
        pthread_cond_destroy(&s->wake);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
}

uint64_t syncer_request(struct syncer *s, int fd) {
        uint64_t ticket;

        pthread_mutex_lock(&s->lock);
        s->fd = fd;
        ticket = ++s->requested;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        return ticket;
}

int syncer_wait(struct syncer *s, uint64_t ticket) {
        int r = 0;

        pthread_mutex_lock(&s->lock);
        while (s->flushed < ticket)
                pthread_cond_wait(&s->done, &s->lock);
        if (s->failed_from > 0 && ticket >= s->failed_from && ticket <= s->failed_to)
                r = s->error;
        pthread_mutex_unlock(&s->lock);
        return r;
}

void syncer_quiesce(struct syncer *s) {
        pthread_mutex_lock(&s->lock);
        while (s->flushed < s->requested)
                pthread_cond_wait(&s->done, &s->lock);
        pthread_mutex_unlock(&s->lock);
}
