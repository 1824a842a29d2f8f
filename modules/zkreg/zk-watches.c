/* SPDX-License-Identifier: MIT */
/* Node watches on the agent's ZooKeeper session (see zk-watches.h).
 *
 * A watch reads its node with zoo_awexists() and a watcher. ZooKeeper keeps a pointer to the
 * watch while its watcher is registered ("armed") and while the read is in flight
 * ("pending"), so an unwatched watch is only marked cancelled and freed once neither holds:
 * when its watcher fires, or when the handle is closed (ZooKeeper then forgets watchers). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "log.h"
#include "zk-error.h"
#include "zk-watches.h"

#define MODULE "zkreg"

struct node_watch {
        struct zk_watches *owner;
        struct node_watch *prev, *next;
        char *path;
        zookeeper_node_fn fn;
        void *userdata;
        bool cancelled;
        bool armed;          /* ZooKeeper holds our watcher for this node */
        bool pending;        /* a zoo_awexists() is in flight */
        bool notify_notconn; /* -ENOTCONN is owed from the deferred source */
        bool notconn_told;   /* -ENOTCONN was reported since the last good read */
        bool notify_einval;  /* -EINVAL (bad path) is owed from the deferred source */
};

struct zk_watches {
        struct zk_session *session;
        struct node_watch *head;
        size_t n;
        unsigned walking;    /* > 0 while a loop over the list calls fn: frees wait for its end */
        sd_event_source *defer;
};

static void watch_read(struct node_watch *nw);

static void watch_free(struct node_watch *nw) {
        struct zk_watches *w = nw->owner;

        if (nw->prev)
                nw->prev->next = nw->next;
        else
                w->head = nw->next;
        if (nw->next)
                nw->next->prev = nw->prev;
        w->n--;
        free(nw->path);
        free(nw);
}

static void watch_maybe_free(struct node_watch *nw) {
        if (nw->cancelled && !nw->armed && !nw->pending && nw->owner->walking == 0)
                watch_free(nw);
}

/* A loop over the list calls fn, which may unwatch any watch (also the next one): nothing is
 * unlinked until the loop ends, then every watch that may go is freed. */
static void walk_begin(struct zk_watches *w) {
        w->walking++;
}

static void walk_end(struct zk_watches *w) {
        if (--w->walking > 0)
                return;
        for (struct node_watch *nw = w->head, *next; nw; nw = next) {
                next = nw->next;
                watch_maybe_free(nw);
        }
}

static void watch_tell_notconn(struct node_watch *nw) {
        if (nw->cancelled || nw->notconn_told)
                return;
        nw->notconn_told = true;
        nw->fn(nw->path, 0, -ENOTCONN, nw->userdata);
}

static void exists_done(int rc, const struct Stat *stat, const void *data) {
        struct node_watch *nw = (struct node_watch *) data;

        nw->pending = false;
        if (rc == ZOK || rc == ZNONODE)
                nw->armed = true;
        if (nw->cancelled) {
                watch_maybe_free(nw);
                return;
        }
        if (rc == ZOK && stat) {
                nw->notconn_told = false;
                nw->fn(nw->path, stat->mzxid, 0, nw->userdata); /* last use: fn may unwatch */
        } else if (rc == ZNONODE) {
                nw->notconn_told = false;
                nw->fn(nw->path, 0, -ENOENT, nw->userdata);
        } else if (rc == ZCLOSING) {
                /* The handle is being closed (expiry or shutdown); the state change reports it. */
        } else if (rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE ||
                   rc == ZOPERATIONTIMEOUT) {
                /* Read again on the next CONNECTED. */
                watch_tell_notconn(nw);
        } else
                nw->fn(nw->path, 0, zk_error_to_errno(rc), nw->userdata);
}

static void node_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
        struct node_watch *nw = ctx;

        (void) zh;
        (void) state;
        (void) path;
        if (type == ZOO_SESSION_EVENT)
                return; /* the watcher stays registered; session changes come through zkreg */
        nw->armed = false;
        if (nw->cancelled) {
                watch_maybe_free(nw);
                return;
        }
        watch_read(nw);
}

static void watch_read(struct node_watch *nw) {
        zhandle_t *zh = zk_session_handle(nw->owner->session);
        int rc;

        if (nw->cancelled || nw->pending)
                return;
        if (!zh || zk_session_state(nw->owner->session) != ZK_SESSION_CONNECTED)
                return;
        rc = zoo_awexists(zh, nw->path, node_watcher, nw, exists_done, nw);
        if (rc == ZOK) {
                nw->pending = true;
                zk_session_kick(nw->owner->session);
        } else if (rc == ZBADARGUMENTS) {
                /* Told from the deferred source: never before watch_node() returned the handle. */
                nw->notify_einval = true;
                if (nw->owner->defer)
                        (void) sd_event_source_set_enabled(nw->owner->defer, SD_EVENT_ONESHOT);
        } else
                log_module_debug(MODULE, "Cannot watch %s now (%s); again on the next connect", nw->path, zerror(rc));
}

static int on_defer(sd_event_source *src, void *userdata) {
        struct zk_watches *w = userdata;

        (void) src;
        walk_begin(w);
        for (struct node_watch *nw = w->head; nw; nw = nw->next) {
                if (nw->notify_einval) {
                        nw->notify_einval = false;
                        if (!nw->cancelled)
                                nw->fn(nw->path, 0, -EINVAL, nw->userdata);
                }
                if (!nw->notify_notconn)
                        continue;
                nw->notify_notconn = false;
                if (zk_session_state(w->session) != ZK_SESSION_CONNECTED)
                        watch_tell_notconn(nw);
        }
        walk_end(w);
        return 0;
}

int zk_watches_new(sd_event *e, struct zk_session *session, struct zk_watches **ret) {
        struct zk_watches *w;
        int r;

        if (!e || !session || !ret)
                return -EINVAL;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->session = session;
        r = sd_event_add_defer(e, &w->defer, on_defer, w);
        if (r < 0) {
                free(w);
                return r;
        }
        (void) sd_event_source_set_enabled(w->defer, SD_EVENT_OFF);
        *ret = w;
        return 0;
}

struct zk_watches *zk_watches_free(struct zk_watches *w) {
        if (!w)
                return NULL;
        while (w->head)
                watch_free(w->head);
        sd_event_source_disable_unref(w->defer);
        free(w);
        return NULL;
}

void zk_watches_session_changed(struct zk_watches *w, enum zk_session_state state) {
        if (!w)
                return;
        walk_begin(w);
        for (struct node_watch *nw = w->head; nw; nw = nw->next) {
                switch (state) {
                case ZK_SESSION_CONNECTED:
                        watch_read(nw);
                        break;
                case ZK_SESSION_CONNECTING:
                case ZK_SESSION_CLOSED:
                        /* A new handle (after expiry) or none: the old handle's watchers are gone. */
                        nw->armed = false;
                        nw->pending = false;
                        if (nw->cancelled) {
                                watch_maybe_free(nw);
                                break;
                        }
                        watch_tell_notconn(nw);
                        break;
                case ZK_SESSION_EXPIRED:
                        watch_tell_notconn(nw);
                        break;
                case ZK_SESSION_SUSPENDED:
                        /* The session lives on; ZooKeeper re-sends our watches on reconnect and
                         * we re-read on CONNECTED. */
                        break;
                case _ZK_SESSION_STATE_MAX:
                case _ZK_SESSION_STATE_INVALID:
                        break;
                }
        }
        walk_end(w);
}

int zk_watches_watch_node(void *zk, const char *path, zookeeper_node_fn fn, void *userdata, void **ret_watch) {
        struct zk_watches *w = zk;
        struct node_watch *nw;

        if (!w || !path || path[0] != '/' || !fn || !ret_watch)
                return -EINVAL;
        nw = calloc(1, sizeof(*nw));
        if (!nw)
                return -ENOMEM;
        nw->path = strdup(path);
        if (!nw->path) {
                free(nw);
                return -ENOMEM;
        }
        nw->owner = w;
        nw->fn = fn;
        nw->userdata = userdata;
        nw->next = w->head;
        if (w->head)
                w->head->prev = nw;
        w->head = nw;
        w->n++;

        if (zk_session_state(w->session) == ZK_SESSION_CONNECTED)
                watch_read(nw);
        else {
                nw->notify_notconn = true;
                if (w->defer)
                        (void) sd_event_source_set_enabled(w->defer, SD_EVENT_ONESHOT);
        }
        *ret_watch = nw;
        return 0;
}

void zk_watches_unwatch_node(void *zk, void *watch) {
        struct node_watch *nw = watch;

        (void) zk;
        if (!nw)
                return;
        nw->cancelled = true;
        watch_maybe_free(nw);
}

void zk_watches_cancel_all(struct zk_watches *w) {
        if (!w)
                return;
        /* Freeing a watch unlinks only that one: fetch the next entry first. */
        for (struct node_watch *nw = w->head, *next; nw; nw = next) {
                next = nw->next;
                nw->cancelled = true;
                nw->fn = NULL;
                nw->userdata = NULL;
                watch_maybe_free(nw);
        }
        if (w->defer)
                (void) sd_event_source_set_enabled(w->defer, SD_EVENT_OFF);
}

size_t zk_watches_count(const struct zk_watches *w) {
        size_t n = 0;
        if (!w)
                return 0;
        for (struct node_watch *nw = w->head; nw; nw = nw->next)
                if (!nw->cancelled)
                        n++;
        return n;
}
