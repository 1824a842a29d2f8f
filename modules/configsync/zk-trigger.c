/* SPDX-License-Identifier: MIT */
#include "zk-trigger.h"

struct zk_trigger {
        const struct zookeeper_fact *fact;
        char *path;
        void *watch;
        zk_trigger_fn fn;
        void *userdata;
        bool seen;
        int64_t version;
        int error;
};

static void on_node(const char *path, int64_t mzxid, int error, void *userdata) {
        struct zk_trigger *t = userdata;
        bool first = !t->seen;
        int64_t v, old;

        t->error = error == -ENOENT ? 0 : error;
        if (error < 0 && error != -ENOENT)
                return; /* no session (or another problem): the next report tells */
        v = error == -ENOENT ? -1 : mzxid;
        old = t->version;
        t->seen = true;
        t->version = v;
        if (!first && v != old)
                t->fn(t, old, v, t->userdata);
}

int zk_trigger_new(const struct zookeeper_fact *fact, const char *path, zk_trigger_fn fn, void *userdata,
                   struct zk_trigger **ret) {
        struct zk_trigger *t;
        int r;

        if (!fact || !fact->watch_node || !fact->unwatch_node || isempty(path) || path[0] != '/' || !fn)
                return -EINVAL;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->fact = fact;
        t->fn = fn;
        t->userdata = userdata;
        t->path = strdup(path);
        if (!t->path) {
                free(t);
                return -ENOMEM;
        }
        r = fact->watch_node(fact->zk, path, on_node, t, &t->watch);
        if (r < 0) {
                free(t->path);
                free(t);
                return r;
        }
        *ret = t;
        return 0;
}

struct zk_trigger *zk_trigger_free(struct zk_trigger *t, bool forget) {
        if (!t)
                return NULL;
        if (!forget && t->watch)
                t->fact->unwatch_node(t->fact->zk, t->watch);
        free(t->path);
        free(t);
        return NULL;
}

const struct zookeeper_fact *zk_trigger_fact(const struct zk_trigger *t) {
        return t ? t->fact : NULL;
}

const char *zk_trigger_path(const struct zk_trigger *t) {
        return t ? t->path : NULL;
}

bool zk_trigger_version(const struct zk_trigger *t, int64_t *ret) {
        if (!t || !t->seen)
                return false;
        *ret = t->version;
        return true;
}

int zk_trigger_error(const struct zk_trigger *t) {
        return t ? t->error : 0;
}
