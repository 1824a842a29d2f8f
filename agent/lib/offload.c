/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "offload.h"

struct offload {
        offload_fn run;
        void *job;
        offload_done_fn done;
        void *userdata;
        atomic_bool stop;
        int result;         /* written by the thread before it signals event_fd */
        int event_fd;
        sd_event_source *source;
        pthread_t thread;
        bool started, joined;
};

static void *offload_main(void *userdata) {
        struct offload *w = userdata;
        static const uint64_t one = 1;

        w->result = w->run(w->job, &w->stop);
        /* A job may use OpenSSL (configsync hashes files): its per-thread state goes with the
         * thread. */
        OPENSSL_thread_stop();
        (void) !write(w->event_fd, &one, sizeof(one));
        return NULL;
}

static void offload_join(struct offload *w) {
        if (w->started && !w->joined) {
                (void) pthread_join(w->thread, NULL);
                w->joined = true;
        }
}

static int on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct offload *w = userdata;

        /* The thread wrote event_fd as its last act: the join is immediate. */
        offload_join(w);
        w->source = sd_event_source_disable_unref(w->source);
        w->done(w, w->result, w->userdata);
        return 0;
}

struct offload *offload_free(struct offload *w) {
        if (!w)
                return NULL;
        atomic_store(&w->stop, true);
        offload_join(w);
        w->source = sd_event_source_disable_unref(w->source);
        safe_close(w->event_fd);
        free(w);
        return NULL;
}

int offload_start(sd_event *e, const char *description, offload_fn run, void *job, offload_done_fn done, void *userdata,
                  struct offload **ret) {
        _cleanup_(offload_freep) struct offload *w = NULL;
        sigset_t all, saved;
        int r;

        if (!e || !run || !done || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->run = run;
        w->job = job;
        w->done = done;
        w->userdata = userdata;
        atomic_init(&w->stop, false);
        w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->event_fd < 0)
                return negative_errno();
        r = sd_event_add_io(e, &w->source, w->event_fd, EPOLLIN, on_done, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(w->source, description);

        /* Signals stay the loop's (signalfd): the thread never takes one. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &saved);
        r = -pthread_create(&w->thread, NULL, offload_main, w);
        pthread_sigmask(SIG_SETMASK, &saved, NULL);
        if (r < 0)
                return r;
        w->started = true;
        *ret = TAKE_PTR(w);
        return 0;
}
