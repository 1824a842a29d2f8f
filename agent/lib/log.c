/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <cjson/cJSON.h>
#define SD_JOURNAL_SUPPRESS_LOCATION
#include <systemd/sd-journal.h>

#include "json.h"
#include "log.h"
#include "string-table.h"

/* The only process-wide state besides parsed options: logging is needed before the manager
 * exists and in code that has no manager at hand. */
static int log_max_level = LOG_INFO;
static enum log_target log_target = LOG_TARGET_TEXT;
static bool log_text_timestamps = true; /* the journal stamps its own lines */

static const char *const log_level_table[] = {
        [LOG_EMERG] = "emerg", [LOG_ALERT] = "alert",   [LOG_CRIT] = "crit",
        [LOG_ERR] = "error",   [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
        [LOG_INFO] = "info",   [LOG_DEBUG] = "debug",
};

static const char *const log_target_table[_LOG_TARGET_MAX] = {
        [LOG_TARGET_AUTO] = "auto",
        [LOG_TARGET_JOURNAL] = "journal",
        [LOG_TARGET_TEXT] = "text",
        [LOG_TARGET_JSON] = "json",
};

/* Every spelling a level is accepted in, syslog's short ones too; log_level_table has the one
 * each is printed as. */
static const struct {
        const char *name;
        int level;
} log_level_names[] = {
        { "debug", LOG_DEBUG },   { "info", LOG_INFO },   { "notice", LOG_NOTICE }, { "warning", LOG_WARNING },
        { "warn", LOG_WARNING },  { "error", LOG_ERR },   { "err", LOG_ERR },       { "crit", LOG_CRIT },
        { "alert", LOG_ALERT },   { "emerg", LOG_EMERG },
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(log_level, int);
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(log_target, enum log_target);
DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(log_target, int);
DEFINE_STRING_TABLE_NAME_AT(log_target);

int log_level_from_string(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(log_level_names); i++)
                if (streq_ptr(s, log_level_names[i].name))
                        return log_level_names[i].level;
        return -EINVAL;
}

const char *log_level_name_at(size_t i) {
        return i < ELEMENTSOF(log_level_names) ? log_level_names[i].name : NULL;
}

/* systemd sets JOURNAL_STREAM=<dev>:<ino> when stderr is connected to the journal. */
static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == (dev_t) dev && st.st_ino == (ino_t) ino;
}

/* sd_journal_send() drops messages silently when journald's socket is missing, so a journal
 * that is not there means text on stderr: no line is lost. */
static bool journal_reachable(void) {
        return access("/run/systemd/journal/socket", F_OK) >= 0;
}

void log_setup(int max_level, enum log_target target) {
        log_max_level = max_level;
        log_text_timestamps = !stderr_is_journal();
        if (target == LOG_TARGET_AUTO)
                target = stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_TEXT;
        if (target == LOG_TARGET_JOURNAL && !journal_reachable())
                target = LOG_TARGET_TEXT;
        log_target = target;
}

int log_get_max_level(void) {
        return log_max_level;
}

enum log_target log_get_target(void) {
        return log_target;
}

/* The line as a person reads it: "[module] message (pod NAME)". The journal gets it as MESSAGE
 * too, beside the fields, so `journalctl -u piniond` says whose each line is. NULL on OOM. */
static char *human_line(const struct log_ctx *ctx, const char *message) {
        const char *pod = ctx ? (ctx->pod ? ctx->pod : ctx->pod_uid) : NULL;
        char prefix[256] = "";
        char *line = NULL;

        if (ctx && ctx->module)
                (void) snprintf(prefix, sizeof(prefix), "[%s] ", ctx->module);
        if ((pod ? asprintf(&line, "%s%s (pod %s)", prefix, message, pod)
                 : asprintf(&line, "%s%s", prefix, message)) < 0)
                return NULL;
        return line;
}

/* Now as ISO 8601 in UTC with frac_digits (3 or 6) decimals of the second: "2026-12-02T14:20:01.123Z". */
static void format_now(char *buf, size_t n, unsigned frac_digits) {
        struct timespec now;
        struct tm tm;
        size_t k;

        (void) clock_gettime(CLOCK_REALTIME, &now);
        (void) gmtime_r(&now.tv_sec, &tm);
        k = strftime(buf, n, "%Y-%m-%dT%H:%M:%S", &tm);
        if (frac_digits == 3)
                (void) snprintf(buf + k, n - k, ".%03ldZ", now.tv_nsec / 1000000);
        else
                (void) snprintf(buf + k, n - k, ".%06ldZ", now.tv_nsec / 1000);
}

static void write_text(int level, int error, const struct log_ctx *ctx, const char *message) {
        _cleanup_free_ char *line = human_line(ctx, message);
        char ts[64];

        if (log_text_timestamps) {
                format_now(ts, sizeof(ts), 3);
                (void) fprintf(stderr, "%s %s: %s\n", ts, log_level_table[level], line ? line : message);
        } else
                (void) fprintf(stderr, "%s: %s\n", log_level_table[level], line ? line : message);
        (void) error;
}

static void write_json(int level, int error, const struct log_ctx *ctx, const char *file, int line,
                       const char *message) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        char ts[64];

        if (!o)
                return;
        format_now(ts, sizeof(ts), 6);

        cJSON_AddStringToObject(o, "time", ts);
        cJSON_AddStringToObject(o, "level", log_level_table[level]);
        cJSON_AddStringToObject(o, "msg", message);
        if (ctx && ctx->module)
                cJSON_AddStringToObject(o, "module", ctx->module);
        if (ctx && ctx->pod_uid)
                cJSON_AddStringToObject(o, "pod_uid", ctx->pod_uid);
        if (ctx && ctx->pod)
                cJSON_AddStringToObject(o, "pod", ctx->pod);
        if (ctx && ctx->config)
                cJSON_AddStringToObject(o, "config", ctx->config);
        if (error != 0)
                cJSON_AddNumberToObject(o, "errno", errno_abs(error));
        if (log_max_level >= LOG_DEBUG) {
                cJSON_AddStringToObject(o, "code_file", file);
                cJSON_AddNumberToObject(o, "code_line", line);
        }
        _cleanup_free_ char *text = cJSON_PrintUnformatted(o);
        if (text)
                (void) fprintf(stderr, "%s\n", text);
}

static void write_journal(int level, int error, const struct log_ctx *ctx, const char *file, int line,
                          const char *func, const char *message) {
        char buf[9][256];
        struct iovec iov[10];
        size_t n = 0;
        _cleanup_free_ char *msg = NULL, *human = human_line(ctx, message);

        if (asprintf(&msg, "MESSAGE=%s", human ? human : message) < 0)
                return;
        iov[n++] = (struct iovec) { msg, strlen(msg) };

#define FIELD(fmt, ...)                                                                             \
        do {                                                                                        \
                int _len = snprintf(buf[n - 1], sizeof(buf[0]), fmt, __VA_ARGS__);                 \
                iov[n] = (struct iovec) { buf[n - 1], (size_t) MIN(_len, (int) sizeof(buf[0]) - 1) }; \
                n++;                                                                                \
        } while (0)

        FIELD("PRIORITY=%d", level);
        FIELD("CODE_FILE=%s", file);
        FIELD("CODE_LINE=%d", line);
        FIELD("CODE_FUNC=%s", func);
        if (error != 0)
                FIELD("ERRNO=%d", errno_abs(error));
        if (ctx && ctx->module)
                FIELD("MODULE=%s", ctx->module);
        if (ctx && ctx->pod_uid)
                FIELD("POD_UID=%s", ctx->pod_uid);
        if (ctx && ctx->pod)
                FIELD("POD=%s", ctx->pod);
        if (ctx && ctx->config)
                FIELD("CONFIG=%s", ctx->config);
#undef FIELD
        if (sd_journal_sendv(iov, (int) n) < 0)
                write_text(level, error, ctx, message); /* journal gone: do not lose the line */
}

int log_internal(int level, int error, const struct log_ctx *ctx, const char *file, int line,
                 const char *func, const char *format, ...) {
        char message[2048];
        va_list ap;
        int saved_errno = errno;

        if (level < 0 || (size_t) level >= ELEMENTSOF(log_level_table))
                level = LOG_ERR;

        /* %m prints the error passed in, not whatever errno happens to be. */
        if (error != 0)
                errno = errno_abs(error);
        va_start(ap, format);
        (void) vsnprintf(message, sizeof(message), format, ap);
        va_end(ap);

        switch (log_target) {
        case LOG_TARGET_JOURNAL:
                write_journal(level, error, ctx, file, line, func, message);
                break;
        case LOG_TARGET_JSON:
                write_json(level, error, ctx, file, line, message);
                break;
        case LOG_TARGET_AUTO:
        case LOG_TARGET_TEXT:
        case _LOG_TARGET_MAX:
                write_text(level, error, ctx, message);
                break;
        }

        errno = saved_errno;
        return -errno_abs(error);
}
