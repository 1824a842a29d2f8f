/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "observer-list.h"

int observer_list_add(struct observer_list *l, observer_list_fn fn, void *userdata, uint64_t since) {
        struct observer_list_entry *grown;

        if (!l || !fn)
                return -EINVAL;
        for (size_t i = 0; i < l->n; i++)
                if (!l->entries[i].removed && l->entries[i].fn == fn && l->entries[i].userdata == userdata)
                        return -EEXIST;
        grown = realloc(l->entries, (l->n + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        l->entries = grown;
        l->entries[l->n++] = (struct observer_list_entry) { .fn = fn, .userdata = userdata, .since = since };
        return 0;
}

static void compact(struct observer_list *l) {
        size_t kept = 0;

        for (size_t i = 0; i < l->n; i++)
                if (!l->entries[i].removed)
                        l->entries[kept++] = l->entries[i];
        l->n = kept;
}

void observer_list_remove(struct observer_list *l, observer_list_fn fn, void *userdata) {
        if (!l)
                return;
        for (size_t i = 0; i < l->n; i++) {
                struct observer_list_entry *e = &l->entries[i];
                if (e->removed || e->fn != fn || e->userdata != userdata)
                        continue;
                /* During a walk, indexes must stay stable: mark now, compact at its end. */
                e->removed = true;
                if (l->walking == 0)
                        compact(l);
                return;
        }
}

void observer_list_done(struct observer_list *l) {
        if (!l)
                return;
        free(l->entries);
        *l = (struct observer_list) {};
}

bool observer_list_has_any(const struct observer_list *l) {
        for (size_t i = 0; i < l->n; i++)
                if (!l->entries[i].removed)
                        return true;
        return false;
}

size_t observer_list_begin(struct observer_list *l) {
        l->walking++;
        return l->n;
}

bool observer_list_get(const struct observer_list *l, size_t i, struct observer_list_entry *ret) {
        if (i >= l->n || l->entries[i].removed)
                return false;
        *ret = l->entries[i];
        return true;
}

void observer_list_end(struct observer_list *l) {
        if (l->walking > 0 && --l->walking == 0)
                compact(l);
}
