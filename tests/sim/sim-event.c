/* SPDX-License-Identifier: MIT */
/* The event queue: a binary heap of events in the order they happen. */

#include <stdlib.h>

#include "sim-event.h"

/* Ordered by time; at the same time a closing window first (so that what happens at t counts
 * in the window starting at t), then in the order scheduled. */
static bool event_before(const struct event *a, const struct event *b) {
        if (a->time != b->time)
                return a->time < b->time;
        if ((a->type == EVENT_TICK) != (b->type == EVENT_TICK))
                return a->type == EVENT_TICK;
        return a->seq < b->seq;
}

void heap_push(struct heap *h, struct event e) {
        if (h->n == h->allocated) {
                size_t n = MAX(h->allocated * 2, (size_t) 1024);
                struct event *v = realloc(h->v, n * sizeof(*v));
                if (!v) {
                        h->oom = true;
                        return;
                }
                h->v = v;
                h->allocated = n;
        }

        e.seq = h->seq++;
        size_t i = h->n++;
        while (i > 0) {
                size_t parent = (i - 1) / 2;
                if (!event_before(&e, &h->v[parent]))
                        break;
                h->v[i] = h->v[parent];
                i = parent;
        }
        h->v[i] = e;
}

bool heap_pop(struct heap *h, struct event *ret) {
        if (h->n == 0)
                return false;

        *ret = h->v[0];
        struct event last = h->v[--h->n];
        size_t i = 0;
        for (;;) {
                size_t child = 2 * i + 1;
                if (child >= h->n)
                        break;
                if (child + 1 < h->n && event_before(&h->v[child + 1], &h->v[child]))
                        child++;
                if (!event_before(&h->v[child], &last))
                        break;
                h->v[i] = h->v[child];
                i = child;
        }
        if (h->n > 0)
                h->v[i] = last;
        return true;
}
