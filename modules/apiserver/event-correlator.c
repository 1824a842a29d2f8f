/* SPDX-License-Identifier: MIT */
/* The event correlator (event-correlator.h): three bounded LRU caches in one hash table.
 *
 *   spam       key uid                                     a token bucket
 *   aggregate  key uid, type, reason, action               when the last similar event came, and
 *                                                          the hashes of the distinct notes seen
 *   log        key uid, type, reason, action, note         the series: its Event's name, count and
 *              (or the "combined" mark instead of a note)  first occurrence
 *
 * A key is its fields joined by NULs (no field holds one), so equal keys mean equal fields and the
 * pod's uid is always the key's first string. */

#include <limits.h>
#include <math.h>

#include "event-correlator.h"
#include "string-table.h"
#include "token-bucket.h"

#define AGGREGATE_MAX_EVENTS_LIMIT 1024U
#define TABLE_MIN_BUCKETS 16U

enum entry_kind {
        ENTRY_SPAM,
        ENTRY_AGGREGATE,
        ENTRY_LOG,
        _ENTRY_KIND_MAX,
};

/* What follows the key in the same allocation: an aggregate entry's note hashes, a log entry's
 * Event name. */
struct entry {
        struct entry *hash_next;
        struct entry *lru_prev, *lru_next; /* among entries of its kind; head = most recently used */
        uint64_t hash;
        uint32_t key_len;
        uint8_t kind;
        union {
                struct token_bucket bucket; /* spam */
                struct {
                        usec_t last;      /* realtime of the last similar event */
                        unsigned n_notes; /* distinct notes kept: at most aggregate_max_events - 1 */
                } aggregate;
                struct {
                        usec_t first_seen;
                        unsigned count; /* occurrences, suppressed ones included */
                } log;
        };
        char key[]; /* key_len bytes, a NUL, then the tail */
};

struct lru {
        struct entry *head, *tail;
        size_t n;
};

struct event_correlator {
        struct event_correlator_settings settings;
        struct entry **buckets;
        size_t n_buckets; /* a power of two */
        size_t n_entries;
        struct lru lru[_ENTRY_KIND_MAX];
};

static const char *const event_correlator_verdict_table[_EVENT_VERDICT_MAX] = {
        [EVENT_VERDICT_CREATE] = "create",
        [EVENT_VERDICT_SERIES] = "series",
        [EVENT_VERDICT_DROP] = "drop",
};
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(event_correlator_verdict, enum event_verdict);

/* ---- entries ---- */

static size_t entry_tail_offset(size_t key_len) {
        /* aligned for the aggregate entry's uint64_t note hashes */
        return (offsetof(struct entry, key) + key_len + 1 + 7) & ~(size_t) 7;
}

static uint64_t *entry_notes(struct entry *e) {
        return (uint64_t *) ((char *) e + entry_tail_offset(e->key_len));
}

static char *entry_name(struct entry *e) {
        return (char *) e + entry_tail_offset(e->key_len);
}

static uint64_t key_hash(enum entry_kind kind, const char *key, size_t len) {
        uint64_t h = STRING_HASH_INIT ^ (uint64_t) kind;

        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char) key[i]) * UINT64_C(1099511628211);
        return h;
}

static struct entry *entry_new(enum entry_kind kind, const char *key, size_t len, uint64_t hash, size_t tail_size) {
        struct entry *e;

        if (len > UINT32_MAX)
                return NULL;
        e = calloc(1, entry_tail_offset(len) + tail_size);
        if (!e)
                return NULL;
        e->kind = (uint8_t) kind;
        e->hash = hash;
        e->key_len = (uint32_t) len;
        memcpy(e->key, key, len);
        return e;
}

/* ---- the hash table ---- */

static struct entry **table_slot(struct event_correlator *c, uint64_t hash) {
        return &c->buckets[hash & (c->n_buckets - 1)];
}

static struct entry *table_find(struct event_correlator *c, enum entry_kind kind, const char *key, size_t len,
                                uint64_t hash) {
        for (struct entry *e = *table_slot(c, hash); e; e = e->hash_next)
                if (e->hash == hash && e->kind == kind && e->key_len == len && memcmp(e->key, key, len) == 0)
                        return e;
        return NULL;
}

/* Doubles the buckets once there are as many entries; without memory it keeps the old ones
 * (longer chains, same answers). */
static void table_maybe_grow(struct event_correlator *c) {
        struct entry **buckets;
        size_t n;

        if (c->n_entries < c->n_buckets || c->n_buckets > SIZE_MAX / 2 / sizeof(struct entry *))
                return;
        n = c->n_buckets * 2;
        buckets = calloc(n, sizeof(struct entry *));
        if (!buckets)
                return;
        for (size_t i = 0; i < c->n_buckets; i++)
                while (c->buckets[i]) {
                        struct entry *e = c->buckets[i];
                        c->buckets[i] = e->hash_next;
                        e->hash_next = buckets[e->hash & (n - 1)];
                        buckets[e->hash & (n - 1)] = e;
                }
        free(c->buckets);
        c->buckets = buckets;
        c->n_buckets = n;
}

/* ---- LRU lists, one per kind ---- */

static void lru_unlink(struct lru *l, struct entry *e) {
        if (e->lru_prev)
                e->lru_prev->lru_next = e->lru_next;
        else
                l->head = e->lru_next;
        if (e->lru_next)
                e->lru_next->lru_prev = e->lru_prev;
        else
                l->tail = e->lru_prev;
        e->lru_prev = e->lru_next = NULL;
        l->n--;
}

static void lru_push_front(struct lru *l, struct entry *e) {
        e->lru_prev = NULL;
        e->lru_next = l->head;
        if (l->head)
                l->head->lru_prev = e;
        else
                l->tail = e;
        l->head = e;
        l->n++;
}

static void entry_touch(struct event_correlator *c, struct entry *e) {
        struct lru *l = &c->lru[e->kind];

        if (l->head == e)
                return;
        lru_unlink(l, e);
        lru_push_front(l, e);
}

static void entry_remove(struct event_correlator *c, struct entry *e) {
        struct entry **p = table_slot(c, e->hash);

        while (*p != e)
                p = &(*p)->hash_next;
        *p = e->hash_next;
        lru_unlink(&c->lru[e->kind], e);
        c->n_entries--;
        free(e);
}

/* Adds e as the most recently used of its kind, forgetting the least recently used one if the
 * kind's cache is full. */
static void entry_insert(struct event_correlator *c, struct entry *e) {
        struct lru *l = &c->lru[e->kind];
        struct entry **slot;

        if (l->n >= c->settings.cache_max)
                entry_remove(c, l->tail);
        table_maybe_grow(c);
        slot = table_slot(c, e->hash);
        e->hash_next = *slot;
        *slot = e;
        lru_push_front(l, e);
        c->n_entries++;
}

/* ---- lifetime ---- */

static bool settings_valid(const struct event_correlator_settings *s) {
        return s->aggregate_max_events >= 1 && s->aggregate_max_events <= AGGREGATE_MAX_EVENTS_LIMIT &&
               s->spam_burst >= 1 && s->cache_max >= 1 && !isnan(s->spam_qps) && s->spam_qps >= 0;
}

int event_correlator_new(const struct event_correlator_settings *s, struct event_correlator **ret) {
        struct event_correlator *c;

        if (!s || !ret || !settings_valid(s))
                return -EINVAL;
        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->settings = *s;
        c->n_buckets = TABLE_MIN_BUCKETS;
        c->buckets = calloc(c->n_buckets, sizeof(struct entry *));
        if (!c->buckets) {
                free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

struct event_correlator *event_correlator_free(struct event_correlator *c) {
        if (!c)
                return NULL;
        for (size_t k = 0; k < _ENTRY_KIND_MAX; k++)
                while (c->lru[k].head)
                        entry_remove(c, c->lru[k].head);
        free(c->buckets);
        return mfree(c);
}

size_t event_correlator_size(const struct event_correlator *c) {
        return c ? c->n_entries : 0;
}

/* ---- keys ---- */

/* "uid\0<type>reason\0action": the similar-event key; the spam key is its first string. */
static char *aggregate_key_new(const struct pod_event *ev, size_t *ret_len) {
        size_t u = strlen(ev->uid), r = strlen(ev->reason), a = strlen(ev->action);
        char *k = malloc(u + 1 + 1 + r + 1 + a + 1), *p = k;

        if (!k)
                return NULL;
        p = mempcpy(p, ev->uid, u + 1);
        *p++ = ev->type == POD_EVENT_WARNING ? 'W' : 'N';
        p = mempcpy(p, ev->reason, r + 1);
        p = mempcpy(p, ev->action, a);
        *p = 0;
        *ret_len = (size_t) (p - k);
        return k;
}

/* The dedup key: the similar-event key, then "\0N<note>" for an event of its own or "\0C" for
 * the combined one (whose note changes with every event it absorbs). */
static char *log_key_new(const char *aggregate_key, size_t aggregate_len, const char *note, bool combined,
                         size_t *ret_len) {
        size_t n = combined ? 0 : strlen(note);
        char *k = malloc(aggregate_len + 2 + n + 1), *p = k;

        if (!k)
                return NULL;
        p = mempcpy(p, aggregate_key, aggregate_len + 1);
        *p++ = combined ? 'C' : 'N';
        p = mempcpy(p, combined ? "" : note, n);
        *p = 0;
        *ret_len = (size_t) (p - k);
        return k;
}

/* Copies at most max bytes of s, cut on a UTF-8 boundary. */
static char *strdup_utf8_cut(const char *prefix, const char *s, size_t max) {
        size_t pl = strlen(prefix), n = strlen(s);
        char *t;

        if (pl > max)
                return NULL;
        if (n > max - pl) {
                n = max - pl;
                while (n > 0 && ((unsigned char) s[n] & 0xC0) == 0x80)
                        n--;
        }
        t = malloc(pl + n + 1);
        if (!t)
                return NULL;
        memcpy(t, prefix, pl);
        memcpy(t + pl, s, n);
        t[pl + n] = 0;
        return t;
}

/* ---- the decision ---- */

/* Where an event stands against the aggregation cache, worked out before anything changes. */
struct aggregation {
        struct entry *entry; /* NULL: new_entry will be inserted */
        struct entry *new_entry;
        uint64_t note_hash;
        bool fresh;    /* no similar event within the window: the distinct notes start again */
        bool known;    /* the note is among the distinct notes kept */
        bool combined; /* the event is posted as the combined one */
};

static bool aggregation_has_note(struct entry *g, uint64_t note_hash) {
        const uint64_t *notes = entry_notes(g);

        for (unsigned i = 0; i < g->aggregate.n_notes; i++)
                if (notes[i] == note_hash)
                        return true;
        return false;
}

/* client-go keeps a set of the distinct notes and combines once it holds aggregate_max_events,
 * then drops an arbitrary member. Dropping the newcomer instead makes the choice reproducible:
 * the first max-1 distinct notes of a window keep their own Events, every other note is
 * combined. A note is kept as a 64-bit hash: a collision only counts two notes as one. */
static void aggregation_judge(struct event_correlator *c, struct entry *g, const char *note, usec_t now,
                              struct aggregation *ret) {
        const struct event_correlator_settings *s = &c->settings;
        unsigned distinct;

        ret->entry = g;
        ret->note_hash = key_hash(ENTRY_AGGREGATE, note, strlen(note));
        /* A clock that went back is still within the window (a negative interval in client-go). */
        ret->fresh = !g || (now > g->aggregate.last && now - g->aggregate.last > s->aggregate_window);
        ret->known = !ret->fresh && aggregation_has_note(g, ret->note_hash);
        distinct = ret->fresh ? 0 : g->aggregate.n_notes;
        ret->combined = !ret->known && distinct + 1 >= s->aggregate_max_events;
}

static void aggregation_record(struct event_correlator *c, struct aggregation *a, usec_t now) {
        struct entry *g = a->entry;

        if (!g) {
                g = a->entry = TAKE_PTR(a->new_entry);
                entry_insert(c, g);
        } else
                entry_touch(c, g);
        if (a->fresh)
                g->aggregate.n_notes = 0;
        if (!a->known && !a->combined)
                entry_notes(g)[g->aggregate.n_notes++] = a->note_hash;
        g->aggregate.last = now;
}

static bool pod_event_valid(const struct pod_event *ev) {
        return ev && ev->uid && ev->uid[0] && ev->reason && ev->reason[0] && ev->action && ev->note &&
               (ev->type == POD_EVENT_NORMAL || ev->type == POD_EVENT_WARNING);
}

/* The entries and strings an observation may need, allocated before any state changes so that
 * running out of memory leaves the correlator as it was. */
struct observation {
        char *aggregate_key, *log_key;
        size_t aggregate_len, uid_len, log_len;
        uint64_t spam_hash, aggregate_hash, log_hash;
        struct entry *spam, *new_spam;
        struct aggregation aggregation;
        struct entry *log, *new_log;
        char *note, *name; /* what the decision will say */
};

static void observation_done(struct observation *o) {
        free(o->aggregate_key);
        free(o->log_key);
        free(o->new_spam);
        free(o->aggregation.new_entry);
        free(o->new_log);
        free(o->note);
        free(o->name);
}

static int observation_prepare(struct event_correlator *c, const struct pod_event *ev, const char *new_name,
                               usec_t now, struct observation *o) {
        struct aggregation *a = &o->aggregation;
        size_t name_len = strlen(new_name);

        o->aggregate_key = aggregate_key_new(ev, &o->aggregate_len);
        if (!o->aggregate_key)
                return -ENOMEM;

        o->uid_len = strlen(ev->uid);
        o->spam_hash = key_hash(ENTRY_SPAM, o->aggregate_key, o->uid_len);
        o->spam = table_find(c, ENTRY_SPAM, o->aggregate_key, o->uid_len, o->spam_hash);
        if (!o->spam) {
                o->new_spam = entry_new(ENTRY_SPAM, o->aggregate_key, o->uid_len, o->spam_hash, 0);
                if (!o->new_spam)
                        return -ENOMEM;
                token_bucket_init(&o->new_spam->bucket, c->settings.spam_qps, c->settings.spam_burst, now);
        }

        o->aggregate_hash = key_hash(ENTRY_AGGREGATE, o->aggregate_key, o->aggregate_len);
        aggregation_judge(c, table_find(c, ENTRY_AGGREGATE, o->aggregate_key, o->aggregate_len, o->aggregate_hash),
                          ev->note, now, a);
        if (!a->entry) {
                a->new_entry = entry_new(ENTRY_AGGREGATE, o->aggregate_key, o->aggregate_len, o->aggregate_hash,
                                         (c->settings.aggregate_max_events - 1) * sizeof(uint64_t));
                if (!a->new_entry)
                        return -ENOMEM;
        }

        o->log_key = log_key_new(o->aggregate_key, o->aggregate_len, ev->note, a->combined, &o->log_len);
        if (!o->log_key)
                return -ENOMEM;
        o->log_hash = key_hash(ENTRY_LOG, o->log_key, o->log_len);
        o->log = table_find(c, ENTRY_LOG, o->log_key, o->log_len, o->log_hash);
        if (!o->log) {
                o->new_log = entry_new(ENTRY_LOG, o->log_key, o->log_len, o->log_hash, name_len + 1);
                if (!o->new_log)
                        return -ENOMEM;
                memcpy(entry_name(o->new_log), new_name, name_len + 1);
        }

        o->note = strdup_utf8_cut(a->combined ? EVENT_CORRELATOR_COMBINED_PREFIX : "", ev->note, POD_EVENT_NOTE_MAX);
        o->name = strdup(o->log ? entry_name(o->log) : new_name);
        if (!o->note || !o->name)
                return -ENOMEM;
        return 0;
}

/* Records the occurrence in the dedup cache: a series goes on counting even while its events are
 * suppressed (the count says how often it happened); a first occurrence that is suppressed leaves
 * nothing behind, so that the next one creates the Event rather than patching one never made. */
static enum event_verdict observation_log(struct event_correlator *c, struct observation *o, bool allowed,
                                          usec_t now) {
        struct entry *l = o->log;

        if (l) {
                entry_touch(c, l);
                if (l->log.count < UINT_MAX)
                        l->log.count++;
                return allowed ? EVENT_VERDICT_SERIES : EVENT_VERDICT_DROP;
        }
        if (!allowed)
                return EVENT_VERDICT_DROP;
        l = o->log = TAKE_PTR(o->new_log);
        l->log.count = 1;
        l->log.first_seen = now;
        entry_insert(c, l);
        return EVENT_VERDICT_CREATE;
}

static void observation_decide(struct observation *o, enum event_verdict verdict, struct event_decision *ret) {
        *ret = (struct event_decision) { .verdict = verdict };
        if (verdict == EVENT_VERDICT_DROP)
                return;
        ret->note = TAKE_PTR(o->note);
        ret->name = TAKE_PTR(o->name);
        ret->count = o->log->log.count;
        ret->first_seen = o->log->log.first_seen;
}

int event_correlator_observe(struct event_correlator *c, const struct pod_event *ev, const char *new_name, usec_t now,
                             struct event_decision *ret) {
        struct observation o = {};
        enum event_verdict verdict;
        bool allowed;
        int r;

        if (!ret)
                return -EINVAL;
        *ret = (struct event_decision) { .verdict = EVENT_VERDICT_DROP };
        if (!c || !pod_event_valid(ev) || !new_name || !new_name[0])
                return -EINVAL;

        r = observation_prepare(c, ev, new_name, now, &o);
        if (r < 0)
                goto finish;

        /* client-go's order: aggregate, count, then filter; all three caches learn of the event
         * whether or not it is posted. */
        aggregation_record(c, &o.aggregation, now);
        if (!o.spam) {
                o.spam = TAKE_PTR(o.new_spam);
                entry_insert(c, o.spam);
        } else
                entry_touch(c, o.spam);
        allowed = token_bucket_try_take(&o.spam->bucket, now, NULL);
        verdict = observation_log(c, &o, allowed, now);
        observation_decide(&o, verdict, ret);
finish:
        observation_done(&o);
        return r;
}

/* ---- forgetting ---- */

void event_correlator_forget_name(struct event_correlator *c, const char *name) {
        struct entry *e, *next;

        if (!c || !name)
                return;
        for (e = c->lru[ENTRY_LOG].head; e; e = next) {
                next = e->lru_next;
                if (streq(entry_name(e), name))
                        entry_remove(c, e);
        }
}

void event_correlator_forget_pod(struct event_correlator *c, const char *uid) {
        struct entry *e, *next;

        if (!c || !uid)
                return;
        for (size_t k = 0; k < _ENTRY_KIND_MAX; k++)
                for (e = c->lru[k].head; e; e = next) {
                        next = e->lru_next;
                        /* every key starts with the uid and a NUL */
                        if (streq(e->key, uid))
                                entry_remove(c, e);
                }
}
