/* SPDX-License-Identifier: MIT */
/* The child watches over our members' paths (see member-watch.h). */

#include <errno.h>
#include <search.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "registration.h"
#include "strv.h"

enum member_watch_state {
        MEMBER_WATCH_LISTING,
        MEMBER_WATCH_ARMED,
        MEMBER_WATCH_UNWATCHED,
        _MEMBER_WATCH_STATE_MAX,
};

static const char *const member_watch_state_table[_MEMBER_WATCH_STATE_MAX] = {
        [MEMBER_WATCH_LISTING] = "listing",
        [MEMBER_WATCH_ARMED] = "armed",
        [MEMBER_WATCH_UNWATCHED] = "unwatched",
};

struct member_watch {
        struct registry *registry;
        struct member_watch *prev, *next; /* all of the registry's */
        char *path;
        enum member_watch_state state;
        struct registration *members; /* ours under path, linked through mw_next */
        size_t n_members;
};

static int mw_path_cmp(const void *a, const void *b) {
        return strcmp(((const struct member_watch *) a)->path, ((const struct member_watch *) b)->path);
}

static struct member_watch *mw_find(struct registry *r, const char *path) {
        struct member_watch key = { .path = (char *) path };
        void *node = tfind(&key, &r->by_parent, mw_path_cmp);
        return node ? *(struct member_watch **) node : NULL;
}

static void mw_set_state(struct member_watch *w, enum member_watch_state state) {
        if (w->state == state)
                return;
        log_module_debug(MODULE, "Child watch on %s: %s → %s (%zu members of ours)", w->path,
                         member_watch_state_table[w->state], member_watch_state_table[state], w->n_members);
        w->state = state;
}

static void mw_free(struct member_watch *w) {
        struct registry *r = w->registry;

        (void) tdelete(w, &r->by_parent, mw_path_cmp);
        if (w->prev)
                w->prev->next = w->next;
        else
                r->mwatches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        free(w->path);
        free(w);
}

static void on_listed(void *userdata, const struct zk_op_result *res);

/* Lists the path again, leaving a watch: LISTING, or UNWATCHED if no list can go now. */
static void mw_list(struct member_watch *w) {
        int rc = zk_ops_watch_children(w->registry->ops, w->path, on_listed, w->registry);

        mw_set_state(w, rc == ZOK ? MEMBER_WATCH_LISTING : MEMBER_WATCH_UNWATCHED);
        if (rc != ZOK && !zk_error_is_connection(rc))
                log_module_warning(MODULE, "Cannot watch %s for members deleted by someone else: %s", w->path,
                                   zerror(rc));
}

/* The member's path: everything before its last '/' ("/" for a member at the top). */
static char *member_parent(const char *znode) {
        const char *slash = strrchr(znode, '/');
        return slash && slash != znode ? strndup(znode, (size_t) (slash - znode)) : strdup("/");
}

void member_watch_add(struct registration *reg) {
        struct registry *r = reg->registry;
        _cleanup_free_ char *parent = NULL;
        struct member_watch *w;

        if (!reg->znode || reg->mwatch || !(parent = member_parent(reg->znode)))
                return;
        w = mw_find(r, parent);
        if (!w) {
                w = calloc(1, sizeof(*w));
                if (!w)
                        return;
                w->registry = r;
                w->path = TAKE_PTR(parent);
                w->state = MEMBER_WATCH_UNWATCHED;
                if (!tsearch(w, &r->by_parent, mw_path_cmp)) {
                        free(w->path);
                        free(w);
                        return;
                }
                w->next = r->mwatches;
                if (r->mwatches)
                        r->mwatches->prev = w;
                r->mwatches = w;
        }
        reg->mwatch = w;
        reg->mw_prev = NULL;
        reg->mw_next = w->members;
        if (w->members)
                w->members->mw_prev = reg;
        w->members = reg;
        w->n_members++;
        /* LISTING or ARMED already cover the new member (see member-watch.h). */
        if (w->state == MEMBER_WATCH_UNWATCHED)
                mw_list(w);
}

void member_watch_remove(struct registration *reg) {
        struct member_watch *w = reg->mwatch;

        if (!w)
                return;
        if (reg->mw_prev)
                reg->mw_prev->mw_next = reg->mw_next;
        else
                w->members = reg->mw_next;
        if (reg->mw_next)
                reg->mw_next->mw_prev = reg->mw_prev;
        reg->mwatch = NULL;
        reg->mw_prev = reg->mw_next = NULL;
        /* None of ours left: the path is not listed again (a list in flight finds no watch
         * and is ignored; the server's watch, if armed, fires once more at most). */
        if (--w->n_members == 0)
                mw_free(w);
}

static int name_cmp(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* Which of our members under w the list lacks: their paths, in a NULL-terminated array. */
static char **mw_missing(const struct member_watch *w, char *const *children, size_t n) {
        _cleanup_free_ char **sorted = n > 0 ? malloc(n * sizeof(*sorted)) : NULL;
        char **gone = calloc(w->n_members + 1, sizeof(*gone));
        size_t k = 0;

        if (!gone || (n > 0 && !sorted)) {
                free(gone);
                return NULL;
        }
        if (n > 0) {
                memcpy(sorted, children, n * sizeof(*sorted));
                qsort(sorted, n, sizeof(*sorted), name_cmp);
        }
        for (const struct registration *reg = w->members; reg; reg = reg->mw_next) {
                const char *name = strrchr(reg->znode, '/') + 1;
                if (n > 0 && bsearch(&name, sorted, n, sizeof(*sorted), name_cmp))
                        continue;
                if (!(gone[k] = strdup(reg->znode)))
                        break;
                k++;
        }
        return gone;
}

static void on_listed(void *userdata, const struct zk_op_result *res) {
        struct registry *r = userdata;
        struct member_watch *w = mw_find(r, res->path);
        _cleanup_strv_free_ char **gone = NULL;

        if (!w)
                return; /* no member of ours left there */
        if (res->rc == ZOK || res->rc == ZNONODE) {
                /* NONODE: the path itself is gone, and every member under it; no watch is left. */
                if (w->state == MEMBER_WATCH_LISTING)
                        mw_set_state(w, res->rc == ZOK ? MEMBER_WATCH_ARMED : MEMBER_WATCH_UNWATCHED);
                gone = mw_missing(w, res->rc == ZOK ? res->children : NULL, res->rc == ZOK ? res->n_children : 0);
                if (!gone)
                        log_module_warning(MODULE, "Out of memory comparing %s with our members", w->path);
        } else {
                mw_set_state(w, MEMBER_WATCH_UNWATCHED);
                if (!zk_error_is_connection(res->rc))
                        log_module_warning(MODULE, "Cannot watch %s for members deleted by someone else: %s", w->path,
                                           zerror(res->rc));
        }
        /* w may go with the last member forgotten: only paths from here on. */
        STRV_FOREACH(p, gone)
                reg_member_gone(r, *p);
}

void member_watch_event(struct registry *r, int type, const char *path) {
        struct member_watch *w = mw_find(r, path);

        /* A change under the path or the path deleted; a watch event of any other kind (or on
         * a path with no member of ours left) tells nothing about our members. */
        if (!w || (type != ZOO_CHILD_EVENT && type != ZOO_DELETED_EVENT))
                return;
        if (w->state == MEMBER_WATCH_ARMED)
                mw_list(w);
}

void member_watch_session_changed(struct registry *r, enum zk_session_state new) {
        if (new != ZK_SESSION_CONNECTED)
                return;
        for (struct member_watch *w = r->mwatches; w; w = w->next)
                if (w->state == MEMBER_WATCH_UNWATCHED)
                        mw_list(w);
}

size_t member_watch_armed_members(const struct registry *r) {
        size_t n = 0;

        for (const struct member_watch *w = r->mwatches; w; w = w->next)
                if (w->state == MEMBER_WATCH_ARMED)
                        n += w->n_members;
        return n;
}
