/* SPDX-License-Identifier: MIT */
#pragma once

/* Leveled logging to the journal (structured fields), text on stderr, or JSON lines on stderr.
 *
 * Policy: LOG_INFO for state changes an operator acts on (module up/down, config reloaded,
 * registration added/removed), LOG_DEBUG for everything else. LOG_WARNING for problems the
 * agent works around ("ignoring ..."), LOG_ERR for failures that lose function.
 *
 * Every log_*_errno() call returns -abs(error), so callers can write
 *         return log_error_errno(r, "Failed to open %s: %m", path);
 * and %m prints strerror(abs(error)). Library code (agent/lib/) does not log. */

#include <stdbool.h>
#include <syslog.h>

#include "macro.h"

enum log_target {
        LOG_TARGET_AUTO,    /* journal when JOURNAL_STREAM says stderr goes there, else text */
        LOG_TARGET_JOURNAL, /* sd_journal_send with MODULE=, POD_UID=, CODE_* fields; text on
                             * stderr when journald's socket is not there */
        LOG_TARGET_TEXT,    /* "TIME LEVEL: [module] message" on stderr; no TIME when stderr is the
                             * journal (JOURNAL_STREAM), which stamps lines itself */
        LOG_TARGET_JSON,    /* one JSON object per line on stderr */
        _LOG_TARGET_MAX,
};

/* Context fields attached to one message. Any member may be NULL. */
struct log_ctx {
        const char *module;
        const char *pod_uid;
        const char *pod; /* namespace/name, for humans */
        const char *config; /* configsync's config name: CONFIG= in the journal, "config" in JSON */
};

void log_setup(int max_level, enum log_target target);
int log_get_max_level(void);
enum log_target log_get_target(void); /* AUTO is resolved: never returns LOG_TARGET_AUTO */

int log_level_from_string(const char *s); /* "debug" → LOG_DEBUG; -EINVAL if unknown */
const char *log_level_to_string(int level);
int log_target_from_string(const char *s); /* "auto" | "journal" | "text" | "json" */
/* The i-th accepted spelling, NULL after the last: the lists [agent] log-level and log-format
 * are checked against (config_choice_fn). */
const char *log_level_name_at(size_t i);
const char *log_target_name_at(size_t i);
const char *log_target_to_string(enum log_target t);

int log_internal(int level, int error, const struct log_ctx *ctx, const char *file, int line,
                 const char *func, const char *format, ...) _printf_(7, 8);

#define log_ctx_full_errno(ctx, level, error, ...)                                                  \
        ({                                                                                          \
                int _l = (level), _e = (error);                                                     \
                (_l <= log_get_max_level())                                                         \
                        ? log_internal(_l, _e, (ctx), __FILE__, __LINE__, __func__, __VA_ARGS__)    \
                        : -errno_abs(_e);                                                           \
        })

#define log_full_errno(level, error, ...) log_ctx_full_errno(NULL, level, error, __VA_ARGS__)
#define log_full(level, ...) (void) log_full_errno(level, 0, __VA_ARGS__)

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, error, __VA_ARGS__)
#define log_info_errno(error, ...) log_full_errno(LOG_INFO, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, error, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, error, __VA_ARGS__)

/* Module-scoped helpers: MODULE=<name> on every line.
 *
 * Per-object helpers all have one shape, defined beside their object from log_ctx_full_errno()
 * or log_module_full_errno(): log_<object>_full_errno(obj, level, error, fmt, ...) adds the
 * object's context (its name in the message, POD_UID=/POD= where it belongs to a pod) and
 * returns -|error| like every *_errno helper; short forms, where a file wants them, are
 * log_<object>_<level>[_errno](obj, ...). In the tree: log_target_ (reclaim), log_reg_ (zkreg),
 * log_cred_ and log_workload_ (identity), log_bundle_ (configsync), log_attachment_ (podnet). */
#define log_module_full_errno(name, level, error, ...)                                              \
        log_ctx_full_errno((&(const struct log_ctx) { .module = (name) }), level, error, __VA_ARGS__)
#define log_module_debug(name, ...) (void) log_module_full_errno(name, LOG_DEBUG, 0, __VA_ARGS__)
#define log_module_info(name, ...) (void) log_module_full_errno(name, LOG_INFO, 0, __VA_ARGS__)
#define log_module_warning(name, ...) (void) log_module_full_errno(name, LOG_WARNING, 0, __VA_ARGS__)
#define log_module_error(name, ...) (void) log_module_full_errno(name, LOG_ERR, 0, __VA_ARGS__)
#define log_module_warning_errno(name, error, ...)                                                  \
        log_module_full_errno(name, LOG_WARNING, error, __VA_ARGS__)
#define log_module_error_errno(name, error, ...) log_module_full_errno(name, LOG_ERR, error, __VA_ARGS__)
