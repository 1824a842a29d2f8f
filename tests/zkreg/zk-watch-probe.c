/* SPDX-License-Identifier: MIT */
/* A test driver for the FACT_ZOOKEEPER watches (modules/zkreg/zk-watches.c) on the real session
 * code (zk-session.c): connects to the servers in argv[1], watches every path in argv[2..] and
 * prints one line per report on stdout:
 *     watch PATH MZXID ERROR        (ERROR is 0 or a negative errno)
 *     session STATE SESSION-ID      (on every session transition)
 * Lines on stdin: "unwatch PATH" stops a watch, "watch PATH" adds one; "unpublish" does what
 * zkreg does when it unpublishes the fact (every watch ends; the watchers' state is freed, so
 * a later call is a use-after-free the ASan build reports) and prints "unpublished"; "close"
 * closes the session; EOF exits.
 * tests/integration/test_zkreg_fact.py drives it against a real ZooKeeper. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <systemd/sd-event.h>

#include "log.h"
#include "zk-session.h"
#include "zk-watches.h"

struct probe {
        struct zk_session *session;
        struct zk_watches *watches;
        struct zookeeper_fact fact;
        char *paths[64];
        void *handles[64];
        size_t n;
        struct probe *watcher; /* what on_node gets: a copy that "unpublish" frees */
};

static void on_node(const char *path, int64_t mzxid, int error, void *userdata) {
        struct probe *p = userdata;
        (void) p->n; /* a watcher's state: freed at "unpublish" (see main) */
        printf("watch %s %lld %d\n", path, (long long) mzxid, error);
        fflush(stdout);
}

static void on_state(struct zk_session *s, enum zk_session_state old, enum zk_session_state new, void *userdata) {
        struct probe *p = userdata;
        (void) old;
        zk_watches_session_changed(p->watches, new);
        printf("session %s 0x%llx\n", zk_session_state_to_string(new), (unsigned long long) zk_session_id(s));
        fflush(stdout);
}

static int add_watch(struct probe *p, const char *path) {
        if (p->n >= 64)
                return -ENOSPC;
        p->paths[p->n] = strdup(path);
        int r = p->fact.watch_node(p->fact.zk, path, on_node, p->watcher, &p->handles[p->n]);
        if (r < 0) {
                printf("error watch %s %d\n", path, r);
                fflush(stdout);
                free(p->paths[p->n]);
                return r;
        }
        p->n++;
        return 0;
}

static int on_stdin(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct probe *p = userdata;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        (void) revents;
        if (n <= 0)
                return sd_event_exit(sd_event_source_get_event(src), 0);
        buf[n] = 0;
        for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
                if (strncmp(line, "unwatch ", 8) == 0) {
                        for (size_t i = 0; i < p->n; i++)
                                if (p->handles[i] && strcmp(p->paths[i], line + 8) == 0) {
                                        p->fact.unwatch_node(p->fact.zk, p->handles[i]);
                                        p->handles[i] = NULL;
                                }
                        printf("unwatched %s\n", line + 8);
                        fflush(stdout);
                } else if (strncmp(line, "watch ", 6) == 0)
                        (void) add_watch(p, line + 6);
                else if (strcmp(line, "unpublish") == 0) {
                        /* As configsync does when the fact is gone: free, never unwatch. */
                        zk_watches_cancel_all(p->watches);
                        p->watcher = mfree(p->watcher);
                        for (size_t i = 0; i < p->n; i++)
                                p->handles[i] = NULL;
                        printf("unpublished\n");
                        fflush(stdout);
                } else if (strcmp(line, "close") == 0)
                        zk_session_close(p->session);
        }
        return 0;
}

int main(int argc, char **argv) {
        struct probe p = {};
        sd_event *e = NULL;
        sd_event_source *in = NULL;
        int r;

        if (argc < 2) {
                fprintf(stderr, "usage: %s SERVERS [PATH...]\n", argv[0]);
                return 2;
        }
        log_setup(getenv("PROBE_DEBUG") ? LOG_DEBUG : LOG_WARNING, LOG_TARGET_TEXT);
        p.watcher = calloc(1, sizeof(*p.watcher));
        if (!p.watcher)
                return 1;
        if (sd_event_default(&e) < 0)
                return 1;
        struct zk_session_config cfg = { .servers = argv[1], .chroot = getenv("PROBE_CHROOT"),
                                         .session_timeout = 4 * USEC_PER_SEC };
        r = zk_session_new(e, &cfg, on_state, &p, &p.session);
        if (r < 0)
                return 1;
        r = zk_watches_new(e, p.session, &p.watches);
        if (r < 0)
                return 1;
        p.fact = (struct zookeeper_fact) { .zk = p.watches, .watch_node = zk_watches_watch_node,
                                           .unwatch_node = zk_watches_unwatch_node };
        for (int i = 2; i < argc; i++)
                (void) add_watch(&p, argv[i]);
        if (sd_event_add_io(e, &in, STDIN_FILENO, EPOLLIN, on_stdin, &p) < 0)
                return 1;
        r = sd_event_loop(e);
        sd_event_source_unref(in);
        p.session = zk_session_free(p.session);
        p.watches = zk_watches_free(p.watches);
        for (size_t i = 0; i < p.n; i++)
                free(p.paths[i]);
        free(p.watcher);
        sd_event_unref(e);
        return r < 0 ? 1 : 0;
}
