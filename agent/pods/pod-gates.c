/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pod-gates.h"

struct gate {
        char *name;
        pod_gate_fn fn;
        void *userdata;
};

struct listener {
        pod_gates_listener_fn fn;
        void *userdata;
        bool removed; /* removed during a dispatch; compacted afterwards */
};

struct pod_gates {
        struct gate *gates;
        size_t n_gates;
        struct listener *listeners;
        size_t n_listeners;
        unsigned dispatching; /* nesting depth of pod_gates_changed() */
};

int pod_gates_new(struct pod_gates **ret) {
        struct pod_gates *g;

        if (!ret)
                return -EINVAL;
        g = calloc(1, sizeof(*g));
        if (!g)
                return -ENOMEM;
        *ret = g;
        return 0;
}

struct pod_gates *pod_gates_free(struct pod_gates *g) {
        if (!g)
                return NULL;
        for (size_t i = 0; i < g->n_gates; i++)
                free(g->gates[i].name);
        free(g->gates);
        free(g->listeners);
        free(g);
        return NULL;
}

static struct gate *gate_find(const struct pod_gates *g, const char *name) {
        for (size_t i = 0; i < g->n_gates; i++)
                if (streq(g->gates[i].name, name))
                        return &g->gates[i];
        return NULL;
}

int pod_gates_add(struct pod_gates *g, const char *name, pod_gate_fn fn, void *userdata) {
        struct gate *grown;
        char *copy;

        if (!g || !name || !fn)
                return -EINVAL;
        if (gate_find(g, name))
                return -EEXIST;
        copy = strdup(name);
        if (!copy)
                return -ENOMEM;
        grown = realloc(g->gates, (g->n_gates + 1) * sizeof(struct gate));
        if (!grown) {
                free(copy);
                return -ENOMEM;
        }
        g->gates = grown;
        g->gates[g->n_gates++] = (struct gate) { .name = copy, .fn = fn, .userdata = userdata };
        pod_gates_changed(g, NULL);
        return 0;
}

void pod_gates_remove(struct pod_gates *g, const char *name) {
        struct gate *gate;

        if (!g || !name)
                return;
        gate = gate_find(g, name);
        if (!gate)
                return;
        free(gate->name);
        memmove(gate, gate + 1, (size_t) (g->gates + g->n_gates - (gate + 1)) * sizeof(struct gate));
        g->n_gates--;
        pod_gates_changed(g, NULL);
}

int pod_gates_add_listener(struct pod_gates *g, pod_gates_listener_fn fn, void *userdata) {
        struct listener *grown;

        if (!g || !fn)
                return -EINVAL;
        for (size_t i = 0; i < g->n_listeners; i++)
                if (!g->listeners[i].removed && g->listeners[i].fn == fn && g->listeners[i].userdata == userdata)
                        return -EEXIST;
        grown = realloc(g->listeners, (g->n_listeners + 1) * sizeof(struct listener));
        if (!grown)
                return -ENOMEM;
        g->listeners = grown;
        g->listeners[g->n_listeners++] = (struct listener) { .fn = fn, .userdata = userdata };
        return 0;
}

static void listeners_compact(struct pod_gates *g) {
        size_t kept = 0;

        for (size_t i = 0; i < g->n_listeners; i++)
                if (!g->listeners[i].removed)
                        g->listeners[kept++] = g->listeners[i];
        g->n_listeners = kept;
}

void pod_gates_remove_listener(struct pod_gates *g, pod_gates_listener_fn fn, void *userdata) {
        if (!g)
                return;
        for (size_t i = 0; i < g->n_listeners; i++)
                if (g->listeners[i].fn == fn && g->listeners[i].userdata == userdata)
                        g->listeners[i].removed = true;
        /* While dispatching, the array must not move under the loop: compact afterwards. */
        if (g->dispatching == 0)
                listeners_compact(g);
}

void pod_gates_changed(struct pod_gates *g, const char *uid) {
        if (!g)
                return;
        g->dispatching++;
        /* Listeners added during the dispatch land past the end we read here and are not
         * called for this change; removed ones are skipped. */
        for (size_t i = 0, n = g->n_listeners; i < n; i++)
                if (!g->listeners[i].removed)
                        g->listeners[i].fn(g, uid, g->listeners[i].userdata);
        if (--g->dispatching == 0)
                listeners_compact(g);
}

int pod_gates_check(const struct pod_gates *g, const struct pod *p, char **ret_reason) {
        if (!g || !p)
                return -EINVAL;
        for (size_t i = 0; i < g->n_gates; i++) {
                _cleanup_free_ char *reason = NULL;
                int r = g->gates[i].fn(p, g->gates[i].userdata, &reason);
                if (r > 0)
                        continue;
                if (ret_reason) {
                        char *s = NULL;
                        if (r < 0)
                                r = asprintf(&s, "%s: %s", g->gates[i].name, strerror(-r));
                        else
                                r = asprintf(&s, "%s: %s", g->gates[i].name, reason ?: "not ready");
                        if (r < 0)
                                return -ENOMEM;
                        *ret_reason = s;
                }
                return 0;
        }
        return 1;
}

size_t pod_gates_count(const struct pod_gates *g) {
        return g ? g->n_gates : 0;
}
