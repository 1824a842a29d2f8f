/* SPDX-License-Identifier: MIT */
#pragma once

/* Counters, gauges and histograms with labels, rendered in the Prometheus text exposition
 * format 0.0.4. Families are created once (get-or-create by name) and series are looked up by
 * their label values. Every name must start with "pinion_". Collectors run just before a
 * render, to refresh gauges that are cheaper to read than to track (uptime, pool sizes). */

#include <stddef.h>

#include "macro.h"

enum metric_type {
        METRIC_COUNTER,
        METRIC_GAUGE,
        METRIC_HISTOGRAM,
        _METRIC_TYPE_MAX,
};

struct metrics;
struct metric_family;

int metrics_new(struct metrics **ret);
struct metrics *metrics_free(struct metrics *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct metrics *, metrics_free);

/* A family for the process's life (the core's own). label_names: NULL-terminated list (may be
 * NULL for none). For histograms, buckets are the
 * upper bounds in increasing order (+Inf is implicit); NULL uses the default latency buckets
 * (0.001 .. 10 seconds). Returns the existing family if name is already registered with the
 * same type, -EEXIST if with another type, -EINVAL for a bad name. */
int metrics_family(struct metrics *m, enum metric_type type, const char *name, const char *help,
                   const char *const *label_names, const double *buckets, size_t n_buckets,
                   struct metric_family **ret);

/* Metric families as a table: metrics_register() (or metrics_families()) registers each row and
 * stores the family in *f. Rows with buckets NULL use the default latency buckets (histograms
 * only). */
struct metric_def {
        enum metric_type type;
        const char *name, *help;
        const char *const *labels;
        const double *buckets;
        size_t n_buckets;
        struct metric_family **f;
};
/* The rows as metrics_family() does each: for the process's life (what outlives its module's
 * stop, such as zkreg's registry while it drains). */
int metrics_families(struct metrics *m, const struct metric_def *defs, size_t n);

/* The label values follow in the order of label_names given at creation. They are copied and
 * escaped on output. Unknown series are created on first use. Errors (ENOMEM, wrong number of
 * values: pass exactly as many as there are label names) are returned but callers usually
 * ignore them: a lost sample must not fail the operation being measured. */
int metric_add(struct metric_family *f, double value, ...);      /* counter or gauge */
int metric_set(struct metric_family *f, double value, ...);      /* gauge */
int metric_observe(struct metric_family *f, double value, ...);  /* histogram */
#define metric_inc(f, ...) metric_add((f), 1.0, ##__VA_ARGS__)
/* Makes the series exist, at zero if it is new (a histogram with no observation), so that a
 * series whose label values are known in advance is scraped from the start: a rate or an
 * alert on it then has a zero to begin from. Any type. */
int metric_touch(struct metric_family *f, ...);
/* Removes every series of a gauge family (for gauges that are fully rebuilt by a collector). */
void metric_family_reset(struct metric_family *f);

typedef void (*metrics_collector_fn)(struct metrics *m, void *userdata);
int metrics_add_collector(struct metrics *m, metrics_collector_fn fn, void *userdata);
void metrics_remove_collector(struct metrics *m, metrics_collector_fn fn, void *userdata);

/* What one owner (a module) registered: its families and its collector (collect may be NULL),
 * released together by metrics_registration_free() — a module's stop() does, so a module
 * started again registers them once more, not twice. A released family is no longer rendered
 * and forgets its series, unless metrics_family() or another registration still holds it; a
 * sample written to it meanwhile is dropped. */
struct metrics_registration;
int metrics_register(struct metrics *m, const struct metric_def *defs, size_t n, metrics_collector_fn collect,
                     void *userdata, struct metrics_registration **ret);
struct metrics_registration *metrics_registration_free(struct metrics_registration *reg);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct metrics_registration *, metrics_registration_free);
/* Families rendered and collectors registered (for tests and status). */
size_t metrics_family_count(const struct metrics *m);
size_t metrics_collector_count(const struct metrics *m);

/* Runs the collectors, then writes every family (sorted by name, series in creation order). */
int metrics_render(struct metrics *m, char **ret_text, size_t *ret_size);
