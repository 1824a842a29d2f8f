/* SPDX-License-Identifier: MIT */
#pragma once

/* The observers of one model: callbacks with their userdata, told of the model's changes in the
 * order they were added. The one implementation of the rule every model follows (the pod store,
 * the pod gates, identity's and configsync's models): an observer may add and remove observers
 * from inside a call. A removed one is never called again; the entries only move once the
 * outermost walk has ended, so a walk by index stays valid while the array grows. A model
 * walks its observers between observer_list_begin() and observer_list_end(); one added during a
 * walk is past the count observer_list_begin() returned, so it hears only later changes.
 *
 * The list stores each model's own callback type as observer_list_fn (the generic function
 * type C lets any function pointer convert to and back); the model casts it back to call it. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef void (*observer_list_fn)(void);

struct observer_list_entry {
        observer_list_fn fn;
        void *userdata;
        /* The model's mark of when it was added (the pod store's generation), for a model that
         * queues changes: one added after a change was made must not hear it. 0 if unused. */
        uint64_t since;
        bool removed;
};

struct observer_list {
        struct observer_list_entry *entries;
        size_t n;
        unsigned walking; /* nesting depth of walks */
};

/* -EEXIST if the fn/userdata pair is there already, -EINVAL without fn, -ENOMEM. */
int observer_list_add(struct observer_list *l, observer_list_fn fn, void *userdata, uint64_t since);
/* Removing a pair that is not there does nothing. */
void observer_list_remove(struct observer_list *l, observer_list_fn fn, void *userdata);
/* Frees the entries (the model is going; its observers are gone or do not care). */
void observer_list_done(struct observer_list *l);
/* Whether any observer is there (one removed during a walk is not). */
bool observer_list_has_any(const struct observer_list *l);

/* A walk: the number of entries now (those added later are past it). */
size_t observer_list_begin(struct observer_list *l);
/* Copies entry i into *ret (a copy: the callback it names may add observers, which moves the
 * entries). false if it was removed, or i is past the end. */
bool observer_list_get(const struct observer_list *l, size_t i, struct observer_list_entry *ret);
/* Ends a walk; the outermost one drops the removed entries. */
void observer_list_end(struct observer_list *l);
