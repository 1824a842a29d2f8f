/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "observer-list.h"
#include "pod-gates.h"

struct gate {
        char *name;
        pod_gate_fn fn;
        void *userdata;
        unsigned scope; /* POD_GATE_* */
};

struct pod_gates {
        struct gate *gates;
        size_t n_gates;
        struct observer_list listeners;
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
        observer_list_done(&g->listeners);
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
        return pod_gates_add_scoped(g, name, fn, userdata, POD_GATE_ALL);
}

int pod_gates_add_scoped(struct pod_gates *g, const char *name, pod_gate_fn fn, void *userdata, unsigned scope) {
        struct gate *grown;
        char *copy;

        if (!g || !name || !fn || (scope & POD_GATE_ALL) == 0)
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
        g->gates[g->n_gates++] = (struct gate) { .name = copy, .fn = fn, .userdata = userdata, .scope = scope };
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
        if (!g)
                return -EINVAL;
        return observer_list_add(&g->listeners, (observer_list_fn) fn, userdata, 0);
}

void pod_gates_remove_listener(struct pod_gates *g, pod_gates_listener_fn fn, void *userdata) {
        if (g)
                observer_list_remove(&g->listeners, (observer_list_fn) fn, userdata);
}

void pod_gates_changed(struct pod_gates *g, const char *uid) {
        if (!g)
                return;
        /* Listeners added during the walk are not called for this change. */
        for (size_t i = 0, n = observer_list_begin(&g->listeners); i < n; i++) {
                struct observer_list_entry o;
                if (observer_list_get(&g->listeners, i, &o))
                        ((pod_gates_listener_fn) o.fn)(g, uid, o.userdata);
        }
        observer_list_end(&g->listeners);
}

/* One gate's answer as "NAME: reason". */
static int gate_reason(const struct gate *gate, int r, const char *reason, char **ret) {
        if (r < 0)
                return asprintf(ret, "%s: %s", gate->name, strerror(-r)) < 0 ? -ENOMEM : 0;
        return asprintf(ret, "%s: %s", gate->name, reason ?: "not ready") < 0 ? -ENOMEM : 0;
}

int pod_gates_check(const struct pod_gates *g, const struct pod *p, char **ret_reason) {
        if (!g || !p)
                return -EINVAL;
        for (size_t i = 0; i < g->n_gates; i++) {
                _cleanup_free_ char *reason = NULL;
                int r;

                if (!(g->gates[i].scope & POD_GATE_REGISTRATION))
                        continue;
                r = g->gates[i].fn(p, g->gates[i].userdata, &reason);
                if (r > 0)
                        continue;
                if (ret_reason && gate_reason(&g->gates[i], r, reason, ret_reason) < 0)
                        return -ENOMEM;
                return 0;
        }
        return 1;
}

int pod_gates_check_scope(const struct pod_gates *g, const struct pod *p, unsigned scope, char **ret_first,
                          char **ret_reasons) {
        _cleanup_free_ char *first = NULL, *all = NULL;

        if (!g || !p)
                return -EINVAL;
        for (size_t i = 0; i < g->n_gates; i++) {
                _cleanup_free_ char *reason = NULL, *one = NULL;
                int r;

                if (!(g->gates[i].scope & scope))
                        continue;
                r = g->gates[i].fn(p, g->gates[i].userdata, &reason);
                if (r > 0)
                        continue;
                if (!first && !(first = strdup(g->gates[i].name)))
                        return -ENOMEM;
                if (!ret_reasons)
                        break;
                if (gate_reason(&g->gates[i], r, reason, &one) < 0)
                        return -ENOMEM;
                if (!all)
                        all = TAKE_PTR(one);
                else {
                        char *joined;
                        if (asprintf(&joined, "%s; %s", all, one) < 0)
                                return -ENOMEM;
                        free(all);
                        all = joined;
                }
        }
        if (!first)
                return 1;
        if (ret_first)
                *ret_first = TAKE_PTR(first);
        if (ret_reasons)
                *ret_reasons = TAKE_PTR(all);
        return 0;
}

size_t pod_gates_count(const struct pod_gates *g) {
        return g ? g->n_gates : 0;
}
