/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "observer-list.h"
#include "pod-store.h"
#include "strv.h"

/* pod_store_set_ips(): the ips this node gave a pod, applied over its source's object. */
struct overlay {
        char *uid;             /* match by uid, or (NULL) by namespace/name */
        char *namespace, *name;
        char **ips;
        struct pod *source_pod; /* the source's own object while the pod is in the store */
};

struct change {
        uint64_t generation;
        struct pod *old; /* a reference each */
        struct pod *new;
};

struct pod_store {
        /* The same pods twice, each holding the store's one reference in by_uid: by_uid sorted by
         * uid for get(), by_name sorted by namespace/name/uid for find() and list(). */
        struct pod **by_uid;
        struct pod **by_name;
        size_t n_pods, allocated;

        /* Each entry's since: events up to that generation happened before the observer was
         * added, so it never gets them, even if they are still queued for delivery. */
        struct observer_list observers;

        /* Changes made while observers run (an observer may modify the store) are queued and
         * delivered in order by the outermost dispatch, so every observer sees every change in the
         * order it happened. */
        struct change *queue;
        size_t n_queue, queue_head, allocated_queue;

        uint64_t generation;

        struct overlay *overlays;
        size_t n_overlays;
};

int pod_store_new(struct pod_store **ret) {
        struct pod_store *s;

        if (!ret)
                return -EINVAL;
        s = calloc(1, sizeof(struct pod_store));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

struct pod_store *pod_store_free(struct pod_store *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_pods; i++)
                pod_unref(s->by_uid[i]);
        free(s->by_uid);
        free(s->by_name);
        for (size_t i = s->queue_head; i < s->n_queue; i++) {
                pod_unref(s->queue[i].old);
                pod_unref(s->queue[i].new);
        }
        free(s->queue);
        observer_list_done(&s->observers);
        for (size_t i = 0; i < s->n_overlays; i++) {
                free(s->overlays[i].uid);
                free(s->overlays[i].namespace);
                free(s->overlays[i].name);
                strv_free(s->overlays[i].ips);
                pod_unref(s->overlays[i].source_pod);
        }
        free(s->overlays);
        free(s);
        return NULL;
}

int pod_store_add_observer(struct pod_store *s, pod_observer_fn fn, void *userdata) {
        if (!s)
                return -EINVAL;
        return observer_list_add(&s->observers, (observer_list_fn) fn, userdata, s->generation);
}

void pod_store_remove_observer(struct pod_store *s, pod_observer_fn fn, void *userdata) {
        if (s)
                observer_list_remove(&s->observers, (observer_list_fn) fn, userdata);
}

static void store_dispatch(struct pod_store *s) {
        /* Only a dispatch walks the observers: one is running, and it delivers this change after
         * the current one. */
        if (s->observers.walking > 0)
                return;
        (void) observer_list_begin(&s->observers);

        while (s->queue_head < s->n_queue) {
                struct change c = s->queue[s->queue_head++];

                /* Observers added while this runs hear the changes made after they were added. */
                for (size_t i = 0; i < s->observers.n; i++) {
                        struct observer_list_entry o;
                        if (!observer_list_get(&s->observers, i, &o) || o.since >= c.generation)
                                continue;
                        ((pod_observer_fn) o.fn)(s, c.old, c.new, o.userdata);
                }
                pod_unref(c.old);
                pod_unref(c.new);
        }

        s->n_queue = s->queue_head = 0;
        observer_list_end(&s->observers);
}

/* Reserves room for one more pod and one more queued change, so that a change, once begun,
 * cannot fail half-way. */
static int store_reserve(struct pod_store *s, bool pod) {
        if (pod && s->n_pods >= s->allocated) {
                size_t n = MAX(s->allocated * 2, 16u);
                struct pod **a = realloc(s->by_uid, n * sizeof(struct pod *));
                if (!a)
                        return -ENOMEM;
                s->by_uid = a;
                a = realloc(s->by_name, n * sizeof(struct pod *));
                if (!a)
                        return -ENOMEM;
                s->by_name = a;
                s->allocated = n;
        }
        if (s->n_queue >= s->allocated_queue) {
                size_t n = MAX(s->allocated_queue * 2, 8u);
                struct change *q = realloc(s->queue, n * sizeof(struct change));
                if (!q)
                        return -ENOMEM;
                s->queue = q;
                s->allocated_queue = n;
        }
        return 0;
}

/* Takes over the references of old and new. */
static void store_announce(struct pod_store *s, struct pod *old, struct pod *new) {
        s->generation++;
        s->queue[s->n_queue++] = (struct change) {
                .generation = s->generation,
                .old = old,
                .new = new,
        };
        store_dispatch(s);
}

static int compare_name(const char *ns_a, const char *name_a, const char *uid_a, const struct pod *b) {
        int c = strcmp(ns_a, b->namespace);
        if (c != 0)
                return c;
        c = strcmp(name_a, b->name);
        if (c != 0)
                return c;
        /* A NULL uid sorts before every uid: find() searches for the first of a name. */
        return uid_a ? strcmp(uid_a, b->uid) : -1;
}

/* Lower bound: the index of the first pod not less than the key. */
static size_t index_by_uid(const struct pod_store *s, const char *uid, bool *ret_found) {
        size_t lo = 0, hi = s->n_pods;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (strcmp(s->by_uid[mid]->uid, uid) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = lo < s->n_pods && streq(s->by_uid[lo]->uid, uid);
        return lo;
}

static size_t index_by_name(const struct pod_store *s, const char *namespace, const char *name, const char *uid) {
        size_t lo = 0, hi = s->n_pods;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (compare_name(namespace, name, uid, s->by_name[mid]) > 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static void array_insert(struct pod **a, size_t n, size_t at, struct pod *p) {
        memmove(a + at + 1, a + at, (n - at) * sizeof(struct pod *));
        a[at] = p;
}

static void array_delete(struct pod **a, size_t n, size_t at) {
        memmove(a + at, a + at + 1, (n - at - 1) * sizeof(struct pod *));
}

static void name_index_delete(struct pod_store *s, const struct pod *p) {
        size_t i = index_by_name(s, p->namespace, p->name, p->uid);
        array_delete(s->by_name, s->n_pods, i);
}

static void name_index_insert(struct pod_store *s, struct pod *p) {
        size_t i = index_by_name(s, p->namespace, p->name, p->uid);
        array_insert(s->by_name, s->n_pods, i, p);
}

static bool pod_valid_for_store(const struct pod *p) {
        return p && !isempty(p->uid) && p->namespace && p->name;
}

static bool overlay_matches(const struct overlay *o, const struct pod *p) {
        return o->uid ? streq(o->uid, p->uid) : streq(o->namespace, p->namespace) && streq(o->name, p->name);
}

static struct overlay *overlay_for(const struct pod_store *s, const struct pod *p) {
        for (size_t i = 0; i < s->n_overlays; i++)
                if (overlay_matches(&s->overlays[i], p))
                        return &s->overlays[i];
        return NULL;
}

/* The object the store keeps for a source's p: p itself, or a copy carrying the overlay's ips
 * (one reference in *ret either way). The overlay remembers p for when it is cleared. */
static int overlay_apply(struct pod_store *s, struct pod *p, struct pod **ret) {
        struct overlay *o = overlay_for(s, p);
        int r;

        if (o && !strv_equal(p->ips, o->ips)) {
                r = pod_copy_with_ips(p, o->ips, ret);
                if (r < 0)
                        return r;
        } else
                *ret = pod_ref(p);
        if (o && o->source_pod != p) {
                pod_unref(o->source_pod);
                o->source_pod = pod_ref(p);
        }
        return 0;
}

static int store_put(struct pod_store *s, struct pod *p);

int pod_store_put(struct pod_store *s, struct pod *p) {
        _cleanup_(pod_unrefp) struct pod *kept = NULL;
        int r;

        if (!s || !pod_valid_for_store(p))
                return -EINVAL;
        r = overlay_apply(s, p, &kept);
        if (r < 0)
                return r;
        return store_put(s, kept);
}

static int store_put(struct pod_store *s, struct pod *p) {
        struct pod *old;
        bool found;
        size_t i;
        int r;

        i = index_by_uid(s, p->uid, &found);
        if (!found) {
                r = store_reserve(s, true);
                if (r < 0)
                        return r;
                array_insert(s->by_uid, s->n_pods, i, pod_ref(p));
                name_index_insert(s, p);
                s->n_pods++;
                store_announce(s, NULL, pod_ref(p));
                return 1;
        }

        old = s->by_uid[i];
        if (old == p)
                return 0;

        if (pod_equal(old, p)) {
                /* Nothing an observer cares about changed; keep the newer object quietly so that
                 * resource_version stays current. Same uid/namespace/name: same index slots. */
                s->by_name[index_by_name(s, old->namespace, old->name, old->uid)] = pod_ref(p);
                s->by_uid[i] = p;
                pod_unref(old);
                return 0;
        }

        r = store_reserve(s, false);
        if (r < 0)
                return r;
        /* Namespace or name may differ (a static pod file that declares its uid). */
        name_index_delete(s, old);
        s->n_pods--;
        name_index_insert(s, p);
        s->n_pods++;
        s->by_uid[i] = pod_ref(p);
        store_announce(s, old, pod_ref(p));
        return 1;
}

int pod_store_remove(struct pod_store *s, const char *uid) {
        struct pod *old;
        bool found;
        size_t i;
        int r;

        if (!s || !uid)
                return -EINVAL;

        i = index_by_uid(s, uid, &found);
        if (!found)
                return 0;

        r = store_reserve(s, false);
        if (r < 0)
                return r;
        old = s->by_uid[i];
        struct overlay *o = overlay_for(s, old);
        if (o)
                o->source_pod = pod_unref(o->source_pod);
        name_index_delete(s, old);
        array_delete(s->by_uid, s->n_pods, i);
        s->n_pods--;
        store_announce(s, old, NULL);
        return 1;
}

/* "pods-dir" owns "pods-dir" and "pods-dir:/etc/pinion/pods.d/web.json". */
static bool source_owns(const char *source, const char *pod_source) {
        size_t n = strlen(source);
        return pod_source && strncmp(pod_source, source, n) == 0 && (pod_source[n] == '\0' || pod_source[n] == ':');
}

static int compare_pod_uid(const void *a, const void *b) {
        return strcmp((*(struct pod *const *) a)->uid, (*(struct pod *const *) b)->uid);
}

int pod_store_replace_source(struct pod_store *s, const char *source, struct pod **pods, size_t n) {
        _cleanup_free_ struct pod **wanted = NULL;
        struct pod **gone = NULL;
        size_t n_gone = 0;
        int r, changes = 0;

        if (!s || isempty(source) || strchr(source, ':') || (n > 0 && !pods))
                return -EINVAL;

        /* Check everything before changing anything. */
        for (size_t i = 0; i < n; i++) {
                if (!pod_valid_for_store(pods[i]))
                        return -EINVAL;
                if (pods[i]->source && !source_owns(source, pods[i]->source))
                        return -EINVAL;
        }
        wanted = malloc(MAX(n, 1u) * sizeof(struct pod *));
        if (!wanted)
                return -ENOMEM;
        if (n > 0)
                memcpy(wanted, pods, n * sizeof(struct pod *));
        qsort(wanted, n, sizeof(struct pod *), compare_pod_uid);
        for (size_t i = 1; i < n; i++)
                if (streq(wanted[i - 1]->uid, wanted[i]->uid))
                        return -EINVAL; /* which one was meant? */

        for (size_t i = 0; i < n; i++)
                if (!pods[i]->source) {
                        pods[i]->source = strdup(source);
                        if (!pods[i]->source)
                                return -ENOMEM;
                }

        /* Remove first, then put: a pod re-created under a new uid goes away before its
         * successor appears, as observers would expect (no two registrations for one name). */
        gone = malloc(MAX(s->n_pods, 1u) * sizeof(struct pod *));
        if (!gone)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_pods; i++) {
                struct pod *p = s->by_uid[i];
                if (source_owns(source, p->source) &&
                    !bsearch(&p, wanted, n, sizeof(struct pod *), compare_pod_uid))
                        gone[n_gone++] = pod_ref(p);
        }

        r = 0;
        for (size_t i = 0; i < n_gone; i++) {
                if (r >= 0) {
                        r = pod_store_remove(s, gone[i]->uid);
                        changes += r > 0;
                }
                pod_unref(gone[i]);
        }
        free(gone);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                r = pod_store_put(s, pods[i]);
                if (r < 0)
                        return r;
                changes += r;
        }
        return changes;
}

int pod_store_set_ips(struct pod_store *s, const char *uid, const char *namespace, const char *name,
                      char *const *ips) {
        struct overlay *o = NULL;
        struct pod *current = NULL;
        _cleanup_(pod_unrefp) struct pod *source = NULL;
        int r;

        if (!s || (isempty(uid) && (isempty(namespace) || isempty(name))))
                return -EINVAL;
        if (isempty(uid))
                uid = NULL;

        for (size_t i = 0; i < s->n_overlays; i++) {
                struct overlay *x = &s->overlays[i];
                if (streq_ptr(x->uid, uid) && (uid || (streq(x->namespace, namespace) && streq(x->name, name)))) {
                        o = x;
                        break;
                }
        }
        current = uid ? pod_store_get(s, uid) : pod_store_find(s, namespace, name);

        if (!ips) {
                if (!o)
                        return 0;
                /* Back to the source's own object (the store's if it never needed a copy). */
                source = o->source_pod ? TAKE_PTR(o->source_pod) : pod_ref(current);
                free(o->uid);
                free(o->namespace);
                free(o->name);
                strv_free(o->ips);
                *o = s->overlays[--s->n_overlays];
                return source ? store_put(s, source) : 0;
        }

        if (!o) {
                struct overlay *grown = realloc(s->overlays, (s->n_overlays + 1) * sizeof(struct overlay));
                if (!grown)
                        return -ENOMEM;
                s->overlays = grown;
                o = &s->overlays[s->n_overlays];
                *o = (struct overlay) {};
                if ((uid && !(o->uid = strdup(uid))) || (namespace && !(o->namespace = strdup(namespace))) ||
                    (name && !(o->name = strdup(name)))) {
                        free(o->uid);
                        free(o->namespace);
                        return -ENOMEM;
                }
                s->n_overlays++;
        }
        char **copy = NULL;
        r = strv_copy(ips, &copy);
        if (r < 0)
                return r;
        strv_free(o->ips);
        o->ips = copy;
        if (!current)
                return 0;
        /* Re-put the source's object so the overlay applies (and is announced if it changed). */
        source = o->source_pod ? pod_ref(o->source_pod) : pod_ref(current);
        return pod_store_put(s, source);
}

struct pod *pod_store_get(const struct pod_store *s, const char *uid) {
        bool found;
        size_t i;

        if (!s || !uid)
                return NULL;
        i = index_by_uid(s, uid, &found);
        return found ? s->by_uid[i] : NULL;
}

struct pod *pod_store_get_by_cgroup(const struct pod_store *s, const char *uid, const char *node_name) {
        struct pod *match = NULL;

        struct pod *p = pod_store_get(s, uid);
        if (p || !s || !uid)
                return p;
        /* A static pod: two pods claiming one can tell us nothing about which it is. */
        for (size_t i = 0; i < s->n_pods; i++)
                if (pod_is_static_pod(s->by_uid[i], uid, node_name)) {
                        if (match)
                                return NULL;
                        match = s->by_uid[i];
                }
        return match;
}

struct pod *pod_store_find(const struct pod_store *s, const char *namespace, const char *name) {
        size_t i;

        if (!s || !namespace || !name)
                return NULL;
        i = index_by_name(s, namespace, name, NULL);
        if (i < s->n_pods && streq(s->by_name[i]->namespace, namespace) && streq(s->by_name[i]->name, name))
                return s->by_name[i];
        return NULL;
}

size_t pod_store_size(const struct pod_store *s) {
        return s ? s->n_pods : 0;
}

size_t pod_store_count_source(const struct pod_store *s, const char *source) {
        size_t n = 0;
        for (size_t i = 0; s && i < s->n_pods; i++)
                if (source_owns(source, s->by_uid[i]->source))
                        n++;
        return n;
}

int pod_store_list(const struct pod_store *s, struct pod ***ret, size_t *ret_n) {
        struct pod **a;

        if (!s || !ret || !ret_n)
                return -EINVAL;
        a = malloc(MAX(s->n_pods, 1u) * sizeof(struct pod *));
        if (!a)
                return -ENOMEM;
        if (s->n_pods > 0)
                memcpy(a, s->by_name, s->n_pods * sizeof(struct pod *));
        *ret = a;
        *ret_n = s->n_pods;
        return 0;
}

uint64_t pod_store_generation(const struct pod_store *s) {
        return s ? s->generation : 0;
}
