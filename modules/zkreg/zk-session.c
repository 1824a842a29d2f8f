/* SPDX-License-Identifier: MIT */
/* The ZooKeeper session on the loop (see zk-session.h). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fs.h"
#include "state-version.h"
#include "log.h"
#include "zk-session.h"

#include "string-table.h"

/* How often the client may look the server names up again in normal operation (ms). */
#define ZK_RESOLUTION_DELAY_MS 10000

#define MODULE "zkreg"

struct zk_session {
        sd_event *event;
        char *host; /* servers + chroot, as zookeeper_init wants it */
        usec_t session_timeout;
        clientid_t resume;
        bool have_resume, no_restart;
        char *state_file;
        zhandle_t *zh;
        enum zk_session_state state;
        int64_t session_id;
        unsigned generation;
        char *last_error;

        sd_event_source *io;
        int io_fd;
        ino_t io_ino;
        uint32_t io_events;
        sd_event_source *timer;
        sd_event_source *kick;    /* deferred re-arm after operations were queued */
        sd_event_source *restart; /* deferred close + reopen after expiry */
        bool in_process;
        bool close_pending; /* zk_session_close() was called from inside zookeeper_process() */

        zk_session_state_fn fn;
        void *userdata;
        zk_node_event_fn node_fn;
        void *node_userdata;
        unsigned auth_failures; /* in a row: the next session waits 1s << (n-1), at most 64s */
        bool auth_wait;         /* the restart waits (authentication failed) */
};

static const char *const zk_session_state_table[_ZK_SESSION_STATE_MAX] = {
        [ZK_SESSION_CONNECTING] = "connecting",
        [ZK_SESSION_CONNECTED] = "connected",
        [ZK_SESSION_SUSPENDED] = "suspended",
        [ZK_SESSION_EXPIRED] = "expired",
        [ZK_SESSION_CLOSED] = "closed",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(zk_session_state, enum zk_session_state);

/* The negotiated session timeout (0 before CONNECTED). */
static usec_t negotiated_timeout(const struct zk_session *s) {
        if (!s->zh || s->session_id == 0)
                return 0;
        return (usec_t) zoo_recv_timeout(s->zh) * USEC_PER_MSEC;
}

static void session_set_state(struct zk_session *s, enum zk_session_state state) {
        enum zk_session_state old = s->state;

        if (old == state)
                return;
        s->state = state;
        if (state == ZK_SESSION_CONNECTED)
                log_module_info(MODULE, "ZooKeeper session %s → %s (session 0x%llx, timeout %llums, server %s)",
                                zk_session_state_to_string(old), zk_session_state_to_string(state),
                                (unsigned long long) s->session_id,
                                (unsigned long long) (negotiated_timeout(s) / USEC_PER_MSEC),
                                s->zh ? strempty(zoo_get_current_server(s->zh)) : "");
        else
                log_module_info(MODULE, "ZooKeeper session %s → %s%s%s", zk_session_state_to_string(old),
                                zk_session_state_to_string(state), s->last_error ? ": " : "",
                                strempty(s->last_error));
        if (s->fn)
                s->fn(s, old, state, s->userdata);
}

static void session_set_error(struct zk_session *s, const char *error) {
        if (streq_ptr(s->last_error, error))
                return;
        free(s->last_error);
        s->last_error = error ? strdup(error) : NULL;
}

static void session_save_state(struct zk_session *s, const clientid_t *id) {
        char text[64 + 2 * sizeof(id->passwd)];
        _cleanup_free_ char *dir = NULL;
        int n, r;

        if (!s->state_file)
                return;
        n = state_version_text_prefix(text, sizeof(text), ZK_SESSION_STATE_VERSION);
        n += snprintf(text + n, sizeof(text) - (size_t) n, "%016llx ", (unsigned long long) id->client_id);
        for (size_t i = 0; i < sizeof(id->passwd); i++)
                n += snprintf(text + n, sizeof(text) - (size_t) n, "%02x", (unsigned char) id->passwd[i]);
        n += snprintf(text + n, sizeof(text) - (size_t) n, "\n");
        r = fs_path_split(s->state_file, &dir, NULL);
        if (r >= 0)
                r = fs_mkdir_p(dir, 0700);
        if (r >= 0)
                r = fs_write_file_atomic(s->state_file, text, (size_t) n, 0600, (uid_t) -1, (gid_t) -1);
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Cannot save the session to %s (a restart after a crash will "
                                         "leave the old members until the session timeout): %m", s->state_file);
}

int zk_session_load_state(const char *path, clientid_t *ret, unsigned *ret_version) {
        _cleanup_free_ char *data = NULL;
        const char *body;
        unsigned long long sid;
        char hex[2 * sizeof(ret->passwd) + 1];
        clientid_t id = {};
        int r;

        r = fs_read_file_full(path, 4096, &data, NULL);
        if (r < 0)
                return r;
        /* Version 1 (no prefix) and 2 ("v2 ") hold the same two fields. */
        r = state_version_text(data, ZK_SESSION_STATE_VERSION, ret_version, &body);
        if (r < 0)
                return r;
        if (sscanf(body, "%16llx %32s", &sid, hex) != 2 || strlen(hex) != 2 * sizeof(id.passwd) || sid == 0)
                return -EINVAL;
        for (size_t i = 0; i < sizeof(id.passwd); i++) {
                unsigned v;
                if (sscanf(hex + 2 * i, "%2x", &v) != 1)
                        return -EINVAL;
                id.passwd[i] = (char) v;
        }
        id.client_id = (int64_t) sid;
        *ret = id;
        return 0;
}

/* The client's session watcher: runs inside zookeeper_process(). */
static void session_watcher(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
        struct zk_session *s = ctx;

        if (type != ZOO_SESSION_EVENT && zh == s->zh && s->node_fn && path) {
                s->node_fn(type, path, s->node_userdata);
                return;
        }
        if (type != ZOO_SESSION_EVENT || zh != s->zh)
                return;
        if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE) {
                const clientid_t *id = zoo_client_id(zh);
                int64_t sid = id ? id->client_id : 0;
                if (sid != s->session_id) {
                        s->session_id = sid;
                        s->generation++;
                        if (id)
                                session_save_state(s, id);
                }
                s->auth_failures = 0;
                session_set_error(s, NULL);
                session_set_state(s, ZK_SESSION_CONNECTED);
        } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE ||
                   state == ZOO_NOTCONNECTED_STATE) {
                if (s->state == ZK_SESSION_CONNECTED) {
                        session_set_error(s, "connection lost");
                        session_set_state(s, ZK_SESSION_SUSPENDED);
                }
        } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
                session_set_error(s, state == ZOO_EXPIRED_SESSION_STATE ? "session expired by the server"
                                                                         : "authentication failed");
                if (state == ZOO_AUTH_FAILED_STATE) {
                        s->auth_failures++;
                        s->auth_wait = true;
                }
                session_set_state(s, ZK_SESSION_EXPIRED);
                if (s->restart && !s->no_restart)
                        (void) sd_event_source_set_enabled(s->restart, SD_EVENT_ONESHOT);
        }
}

static void zk_log_callback(const char *message) {
        size_t n = strlen(message);
        while (n > 0 && (message[n - 1] == '\n' || message[n - 1] == '\r'))
                n--;
        log_module_debug(MODULE, "zookeeper client: %.*s", (int) n, message);
}

static void session_rearm(struct zk_session *s);
static int on_restart(sd_event_source *src, void *userdata);

/* The client queues its "connection lost" session event for the next zookeeper_process() that
 * gets as far as its completions, which one whose reconnect fails does not: a connection cut
 * while the client is reading an answer could leave the session looking connected for as long
 * as the outage lasts (every operation failing at once and tried again at once). The handle's
 * own state says it right away. */
static void session_check_connection(struct zk_session *s) {
        int state;

        if (!s->zh || s->state != ZK_SESSION_CONNECTED)
                return;
        state = zoo_state(s->zh);
        if (state == ZOO_CONNECTED_STATE || state == ZOO_READONLY_STATE || state == ZOO_EXPIRED_SESSION_STATE ||
            state == ZOO_AUTH_FAILED_STATE)
                return; /* connected, or its own event comes (an ended session is not suspended) */
        session_set_error(s, "connection lost");
        session_set_state(s, ZK_SESSION_SUSPENDED);
}

static int on_io(sd_event_source *src, int fd, uint32_t revents, void *userdata) {
        struct zk_session *s = userdata;
        int events = 0;

        (void) src;
        (void) fd;
        if (!s->zh)
                return 0;
        if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
                events |= ZOOKEEPER_READ;
        if (revents & EPOLLOUT)
                events |= ZOOKEEPER_WRITE;
        s->in_process = true;
        (void) zookeeper_process(s->zh, events);
        s->in_process = false;
        session_check_connection(s);
        if (s->close_pending)
                zk_session_close(s);
        session_rearm(s);
        return 0;
}

static int on_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct zk_session *s = userdata;

        (void) src;
        (void) usec;
        if (!s->zh) {
                if (s->state != ZK_SESSION_CLOSED)
                        return on_restart(NULL, s);
                return 0;
        }
        s->in_process = true;
        (void) zookeeper_process(s->zh, 0);
        s->in_process = false;
        session_check_connection(s);
        if (s->close_pending)
                zk_session_close(s);
        session_rearm(s);
        return 0;
}

static int on_kick(sd_event_source *src, void *userdata) {
        (void) src;
        session_rearm(userdata);
        return 0;
}

static void io_drop(struct zk_session *s) {
        s->io = sd_event_source_disable_unref(s->io);
        s->io_fd = -1;
        s->io_ino = 0;
        s->io_events = 0;
}

/* Asks the client what it waits for and points the IO source and the timer at it. The
 * client may have replaced its socket (reconnect to another server) even under the same
 * number, so the socket's inode decides whether the IO source is still the right one. */
static void session_rearm(struct zk_session *s) {
        int fd = -1, interest = 0, rc;
        struct timeval tv = {};

        if (!s->zh || s->in_process)
                return;
        rc = zookeeper_interest(s->zh, &fd, &interest, &tv);
        if (rc != ZOK && rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT && rc != ZNOTHING)
                session_set_error(s, zerror(rc));
        if (rc == ZINVALIDSTATE) {
                /* Expired or auth failed: the restart source takes it from here; no IO. */
                io_drop(s);
                if (s->restart && !s->no_restart)
                        (void) sd_event_source_set_enabled(s->restart, SD_EVENT_ONESHOT);
                return;
        }

        if (fd < 0)
                io_drop(s);
        else {
                struct stat st;
                ino_t ino = fstat(fd, &st) >= 0 ? st.st_ino : 0;
                uint32_t events = ((interest & ZOOKEEPER_READ) ? EPOLLIN : 0) |
                                  ((interest & ZOOKEEPER_WRITE) ? EPOLLOUT : 0);
                if (s->io && (fd != s->io_fd || ino != s->io_ino))
                        io_drop(s);
                if (!s->io) {
                        if (sd_event_add_io(s->event, &s->io, fd, events, on_io, s) >= 0) {
                                s->io_fd = fd;
                                s->io_ino = ino;
                                s->io_events = events;
                        }
                } else if (events != s->io_events) {
                        if (sd_event_source_set_io_events(s->io, events) < 0)
                                io_drop(s);
                        else
                                s->io_events = events;
                }
        }

        usec_t wait = (usec_t) tv.tv_sec * USEC_PER_SEC + (usec_t) tv.tv_usec;
        if (wait == 0)
                wait = 1; /* "now": still through the loop, after other sources */
        if (wait > 10 * USEC_PER_SEC)
                wait = 10 * USEC_PER_SEC;
        if (s->timer) {
                (void) sd_event_source_set_time_relative(s->timer, wait);
                (void) sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
        } else
                (void) sd_event_add_time_relative(s->event, &s->timer, CLOCK_MONOTONIC, wait, 0, on_timer, s);
}

static int session_open(struct zk_session *s) {
        int ms = (int) (s->session_timeout / USEC_PER_MSEC);

        s->session_id = 0;
        errno = 0;
        s->zh = zookeeper_init2(s->host, session_watcher, ms, s->have_resume ? &s->resume : NULL, s, 0,
                                zk_log_callback);
        s->have_resume = false; /* a new handle after expiry starts a new session */
        if (!s->zh) {
                int r = errno > 0 ? -errno : -EINVAL;
                char buf[256];
                snprintf(buf, sizeof(buf), "cannot create a ZooKeeper handle for %s: %s", s->host, strerror(-r));
                session_set_error(s, buf);
                return r;
        }
        /* The client resolves the server names again on every zookeeper_interest() by default:
         * a getaddrinfo() (with its netlink address dump) per loop pass, which was a quarter of
         * the agent's time in a burst of registrations. A DNS change is still noticed within
         * this window, and on every connection loss at once. */
        (void) zoo_set_servers_resolution_delay(s->zh, ZK_RESOLUTION_DELAY_MS);
        session_rearm(s);
        return 0;
}

/* Returns zookeeper_close()'s result (ZOK: the server acknowledged the close), or ZOK with no handle. */
static int session_close_handle(struct zk_session *s) {
        zhandle_t *zh = s->zh;

        io_drop(s);
        s->zh = NULL; /* completions run inside zookeeper_close() with ZCLOSING: they see no handle */
        if (zh)
                return zookeeper_close(zh);
        return ZOK;
}

static int on_restart(sd_event_source *src, void *userdata) {
        struct zk_session *s = userdata;

        (void) src;
        if (s->state == ZK_SESSION_CLOSED)
                return 0;
        /* The old handle is useless after expiry: close it and start a new session; the owner
         * re-registers everything when it reports CONNECTED. */
        (void) session_close_handle(s);
        if (s->auth_wait) {
                /* Authentication failed: a new session at once would fail the same way. */
                unsigned shift = s->auth_failures > 7 ? 6 : (s->auth_failures > 0 ? s->auth_failures - 1 : 0);
                usec_t delay = USEC_PER_SEC << shift;
                s->auth_wait = false;
                log_module_warning(MODULE, "ZooKeeper authentication failed; a new session in %llus",
                                   (unsigned long long) (delay / USEC_PER_SEC));
                if (s->timer) {
                        (void) sd_event_source_set_time_relative(s->timer, delay);
                        (void) sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
                } else
                        (void) sd_event_add_time_relative(s->event, &s->timer, CLOCK_MONOTONIC, delay, 0, on_timer, s);
                return 0;
        }
        if (session_open(s) < 0) {
                /* No handle: the timer runs this again (on_timer sees no handle). */
                log_module_warning(MODULE, "%s; retrying in 1s", strempty(s->last_error));
                if (s->timer) {
                        (void) sd_event_source_set_time_relative(s->timer, USEC_PER_SEC);
                        (void) sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT);
                } else
                        (void) sd_event_add_time_relative(s->event, &s->timer, CLOCK_MONOTONIC, USEC_PER_SEC, 0,
                                                          on_timer, s);
                return 0;
        }
        session_set_state(s, ZK_SESSION_CONNECTING);
        return 0;
}

int zk_session_new(sd_event *e, const struct zk_session_config *config, zk_session_state_fn fn,
                   void *userdata, struct zk_session **ret) {
        _cleanup_(zk_session_freep) struct zk_session *s = NULL;
        int r;

        if (!e || !config || !config->servers || !ret)
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(e);
        s->io_fd = -1;
        s->session_timeout = config->session_timeout;
        s->state = ZK_SESSION_CONNECTING;
        s->no_restart = config->no_restart;
        if (config->resume) {
                s->resume = *config->resume;
                s->have_resume = true;
        }
        if (config->state_file && !(s->state_file = strdup(config->state_file)))
                return -ENOMEM;
        if (asprintf(&s->host, "%s%s", config->servers,
                     config->chroot && !streq(config->chroot, "/") ? config->chroot : "") < 0) {
                s->host = NULL;
                return -ENOMEM;
        }
        r = sd_event_add_defer(e, &s->kick, on_kick, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(s->kick, SD_EVENT_OFF);
        r = sd_event_add_defer(e, &s->restart, on_restart, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(s->restart, SD_EVENT_OFF);

        zoo_set_debug_level(log_get_max_level() >= LOG_DEBUG ? ZOO_LOG_LEVEL_INFO : ZOO_LOG_LEVEL_ERROR);
        if (session_open(s) < 0) {
                /* e.g. a name that does not resolve yet: keep trying from the timer. */
                log_module_warning(MODULE, "%s; retrying in 1s", strempty(s->last_error));
                r = sd_event_add_time_relative(e, &s->timer, CLOCK_MONOTONIC, USEC_PER_SEC, 0, on_timer, s);
                if (r < 0)
                        return r;
        }
        s->fn = fn;
        s->userdata = userdata;
        *ret = TAKE_PTR(s);
        return 0;
}

void zk_session_close(struct zk_session *s) {
        if (!s || s->state == ZK_SESSION_CLOSED)
                return;
        if (s->in_process) {
                /* Not from inside the client's own call: right after it returns. */
                s->close_pending = true;
                return;
        }
        s->close_pending = false;
        bool was_connected = s->state == ZK_SESSION_CONNECTED && s->zh;
        int rc = session_close_handle(s);
        if (s->state_file && s->session_id != 0) {
                if (was_connected && rc == ZOK) {
                        /* Closed cleanly: nothing left for a successor to end. */
                        if (unlink(s->state_file) < 0 && errno != ENOENT)
                                log_module_warning_errno(MODULE, -errno, "Cannot remove %s: %m", s->state_file);
                } else
                        /* The server may still hold the session (and our members) until it
                         * expires: the next agent ends it from this file. */
                        log_module_info(MODULE, "ZooKeeper session 0x%llx not closed on the server (%s); %s "
                                        "kept for the next start to end it",
                                        (unsigned long long) s->session_id,
                                        was_connected ? zerror(rc) : zk_session_state_to_string(s->state),
                                        s->state_file);
        }
        s->timer = sd_event_source_disable_unref(s->timer);
        (void) sd_event_source_set_enabled(s->restart, SD_EVENT_OFF);
        session_set_error(s, NULL);
        session_set_state(s, ZK_SESSION_CLOSED);
}

void zk_session_set_node_event(struct zk_session *s, zk_node_event_fn fn, void *userdata) {
        if (!s)
                return;
        s->node_fn = fn;
        s->node_userdata = userdata;
}

struct zk_session *zk_session_free(struct zk_session *s) {
        if (!s)
                return NULL;
        s->fn = NULL;
        (void) session_close_handle(s);
        s->timer = sd_event_source_disable_unref(s->timer);
        s->kick = sd_event_source_disable_unref(s->kick);
        s->restart = sd_event_source_disable_unref(s->restart);
        sd_event_unref(s->event);
        free(s->host);
        free(s->state_file);
        free(s->last_error);
        free(s);
        return NULL;
}

enum zk_session_state zk_session_state(const struct zk_session *s) {
        return s ? s->state : ZK_SESSION_CLOSED;
}

zhandle_t *zk_session_handle(struct zk_session *s) {
        return s ? s->zh : NULL;
}

int64_t zk_session_id(const struct zk_session *s) {
        return s ? s->session_id : 0;
}

unsigned zk_session_generation(const struct zk_session *s) {
        return s ? s->generation : 0;
}

const char *zk_session_last_error(const struct zk_session *s) {
        return s ? s->last_error : NULL;
}

void zk_session_kick(struct zk_session *s) {
        if (s && s->kick && !s->in_process)
                (void) sd_event_source_set_enabled(s->kick, SD_EVENT_ONESHOT);
}
