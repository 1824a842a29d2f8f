/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's one ZooKeeper session: the single-threaded C client (zookeeper_st) driven by
 * zookeeper_interest()/zookeeper_process() on an sd-event IO source and a timer. No thread.
 *
 * Session states (an explicit machine; every transition is logged and reported to the owner):
 *
 *   CONNECTING  a handle exists, no session established yet (first connect or after expiry)
 *   CONNECTED   the session is established and the connection is up
 *   SUSPENDED   the session exists but the connection is down; the client is reconnecting and
 *               the server keeps our ephemeral nodes until the session timeout
 *   EXPIRED     the server ended the session: our ephemeral nodes are gone. The handle is
 *               closed and a new one opened (→ CONNECTING) from a deferred source
 *   CLOSED      zk_session_close() was called (shutdown), or no handle could be made
 *
 * Operations are submitted with the zoo_a*() calls on zk_session_handle() while CONNECTED;
 * the caller then calls zk_session_kick() so the IO source asks for writability. */

#include <stdint.h>

#include <systemd/sd-event.h>
#include <zookeeper/zookeeper.h>

#include "macro.h"

enum zk_session_state {
        ZK_SESSION_CONNECTING,
        ZK_SESSION_CONNECTED,
        ZK_SESSION_SUSPENDED,
        ZK_SESSION_EXPIRED,
        ZK_SESSION_CLOSED,
        _ZK_SESSION_STATE_MAX,
        _ZK_SESSION_STATE_INVALID = -EINVAL,
};

const char *zk_session_state_to_string(enum zk_session_state s);

struct zk_session;

/* Called after every transition, also from inside the ZooKeeper client's session watcher
 * (inside zookeeper_process()): the owner may submit operations; zk_session_close() called
 * there takes effect when the client returns. */
typedef void (*zk_session_state_fn)(struct zk_session *s, enum zk_session_state old,
                                    enum zk_session_state new, void *userdata);

struct zk_session_config {
        const char *servers;   /* "h1:p1,h2:p2" */
        const char *chroot;    /* "/pinion" or NULL */
        usec_t session_timeout;
        /* Resume this session instead of starting one (the server says EXPIRED if it is gone). */
        const clientid_t *resume;
        /* Do not open a new session after expiry: stay EXPIRED (for a one-shot resume). */
        bool no_restart;
        /* Where to keep the established session's id and password (0600, written on every new
         * session, removed by zk_session_close()), so that the next agent can end a session a
         * killed one left behind — and with it that agent's members — at once. NULL: nowhere. */
        const char *state_file;
};

/* The state_file's format: "v2 <id, 16 hex digits> <password, 32 hex digits>\n"; version 1 is
 * the same without the prefix. */
#define ZK_SESSION_STATE_VERSION 2u

/* Reads a state_file written by a session: -ENOENT if there is none, -EINVAL or -EBADMSG if
 * garbled, STATE_VERSION_ERR_NEWER (*ret_version set) if a newer release wrote it. */
int zk_session_load_state(const char *path, clientid_t *ret, unsigned *ret_version);

/* Opens a handle and starts connecting (the first transition comes from the loop). */
int zk_session_new(sd_event *e, const struct zk_session_config *config, zk_session_state_fn fn,
                   void *userdata, struct zk_session **ret);
/* Closes the handle (pending completions run with ZCLOSING) and frees. */
struct zk_session *zk_session_free(struct zk_session *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct zk_session *, zk_session_free);

/* Ends the session (the server deletes our ephemeral nodes at once) → CLOSED. Called from a
 * completion or watcher (inside zookeeper_process()), it takes effect when that returns. */
void zk_session_close(struct zk_session *s);

/* Node events of watches set with watch=1 (e.g. zoo_aexists(zh, path, 1, ...)): type is
 * ZOO_DELETED_EVENT etc. Runs inside zookeeper_process(), like a completion. NULL: none. */
typedef void (*zk_node_event_fn)(int type, const char *path, void *userdata);
void zk_session_set_node_event(struct zk_session *s, zk_node_event_fn fn, void *userdata);

enum zk_session_state zk_session_state(const struct zk_session *s);
/* The handle, or NULL when there is none (CLOSED, or between expiry and the new handle). */
zhandle_t *zk_session_handle(struct zk_session *s);
/* The established session's id (0 before the first CONNECTED of this handle). */
int64_t zk_session_id(const struct zk_session *s);
/* How many sessions this object has established (1 after the first CONNECTED; +1 after each
 * expiry and re-establishment). */
unsigned zk_session_generation(const struct zk_session *s);
/* Why we are not connected (the last client error), or NULL. */
const char *zk_session_last_error(const struct zk_session *s);
/* Re-arms the IO source after operations were queued (so pending writes go out). */
void zk_session_kick(struct zk_session *s);
