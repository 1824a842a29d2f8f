/* SPDX-License-Identifier: MIT */
/* The cap's writer: systemd's D-Bus API for a cgroup that is a unit's own, the cgroup file
 * otherwise (unit-cap.h). Everything here is asynchronous but freeing the connection at stop,
 * which waits a bounded time for the restores still in flight. */
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "json.h"
#include "target-internal.h"
#include "unit-cap.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"
/* PID 1's own socket: root only, there without a D-Bus daemon (systemctl uses it too). */
#define SYSTEMD_PRIVATE "unix:path=/run/systemd/private"
/* How long a call may wait for PID 1 (a daemon-reload can keep it busy for seconds); the
 * target's checks are put off meanwhile, the cap stays what it was. */
#define CALL_TIMEOUT (10 * USEC_PER_SEC)
/* After systemd's answer, how often and how long memory.high is read until it shows the value
 * (systemd writes the cgroup after it answers). */
#define VERIFY_INTERVAL (5 * USEC_PER_MSEC)
#define VERIFY_TRIES 400
/* At stop: how long restores still in flight are waited for. */
#define FLUSH_TIMEOUT (5 * USEC_PER_SEC)

enum call_kind {
        CALL_CHECK, /* Get ControlGroup of the unit */
        CALL_SET,   /* SetUnitProperties(runtime, MemoryHigh=value) */
};

struct unit_call {
        struct unit_bus *bus;
        struct unit_call *prev, *next;
        sd_bus_slot *slot;
        struct reclaim_target *t; /* NULL: detached (a leftover, or its target went) */
        enum call_kind kind;
        char *unit, *cgroup;
        uint64_t value, was;
        bool restore;
        bool leftover;
        /* Detached restores remove the record files once the original is back, if the record
         * is still the one of that restore (a target may have written a new one since). */
        char *record_path, *lowered_path;
        dev_t record_dev;
        ino_t record_ino;
};

struct unit_bus {
        sd_event *event;
        sd_bus *bus;
        struct unit_call *calls;
};

static const char *const owner_names[] = {
        [CAP_OWNER_CGROUPFS] = "cgroupfs",
        [CAP_OWNER_CHECKING] = "checking",
        [CAP_OWNER_SYSTEMD] = "systemd",
};

static bool has_suffix(const char *s, size_t n, const char *suffix) {
        size_t k = strlen(suffix);
        return n > k && memcmp(s + n - k, suffix, k) == 0;
}

static const char *unit_interface(const char *unit) {
        size_t n = strlen(unit);
        if (has_suffix(unit, n, ".service"))
                return "org.freedesktop.systemd1.Service";
        if (has_suffix(unit, n, ".scope"))
                return "org.freedesktop.systemd1.Scope";
        return "org.freedesktop.systemd1.Slice";
}

/* ---- the connection ---- */

static int bus_connect(sd_event *e, sd_bus **ret) {
        sd_bus *b = NULL;
        int r = sd_bus_new(&b);
        if (r >= 0)
                r = sd_bus_set_address(b, SYSTEMD_PRIVATE);
        if (r >= 0)
                r = sd_bus_start(b);
        if (r < 0) {
                log_module_info(MODULE, "Cannot connect to systemd's private socket (%s): using the system bus", strerror(-r));
                b = sd_bus_flush_close_unref(b);
                r = sd_bus_open_system(&b);
                if (r < 0)
                        return r;
        }
        r = sd_bus_attach_event(b, e, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0) {
                sd_bus_flush_close_unref(b);
                return r;
        }
        *ret = b;
        return 0;
}

/* The module's connection, made (or made again after systemd re-executed: it closes its
 * private socket's connections) at first need. */
static int bus_get(struct reclaim_ctx *ctx, struct unit_bus **ret) {
        struct unit_bus *b = ctx->bus;
        if (!b) {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return -ENOMEM;
                b->event = ctx->event;
                ctx->bus = b;
        }
        if (b->bus && sd_bus_is_open(b->bus) <= 0) {
                /* Closed: every call on it had its (synthetic) answer already. */
                (void) sd_bus_detach_event(b->bus);
                b->bus = sd_bus_flush_close_unref(b->bus);
        }
        if (!b->bus) {
                int r = bus_connect(b->event, &b->bus);
                if (r < 0)
                        return r;
        }
        *ret = b;
        return 0;
}

static struct unit_call *call_free(struct unit_call *c) {
        if (!c)
                return NULL;
        sd_bus_slot_unref(c->slot);
        if (c->bus) {
                if (c->prev)
                        c->prev->next = c->next;
                else
                        c->bus->calls = c->next;
                if (c->next)
                        c->next->prev = c->prev;
        }
        free(c->unit);
        free(c->cgroup);
        free(c->record_path);
        free(c->lowered_path);
        free(c);
        return NULL;
}

static struct unit_call *call_new(struct unit_bus *b, enum call_kind kind, const char *unit, const char *cgroup) {
        struct unit_call *c = calloc(1, sizeof(*c));
        if (!c)
                return NULL;
        c->kind = kind;
        c->unit = strdup(unit);
        c->cgroup = strdup(cgroup);
        if (!c->unit || !c->cgroup)
                return call_free(c);
        c->bus = b;
        c->next = b->calls;
        if (b->calls)
                b->calls->prev = c;
        b->calls = c;
        return c;
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error);

static int call_send(struct unit_call *c) {
        sd_bus *bus = c->bus->bus;
        c->slot = sd_bus_slot_unref(c->slot);
        if (c->kind == CALL_CHECK) {
                _cleanup_free_ char *path = NULL;
                int r = sd_bus_path_encode(SYSTEMD_PATH "/unit", c->unit, &path);
                if (r < 0)
                        return r;
                return sd_bus_call_method_async(bus, &c->slot, SYSTEMD_DEST, path, "org.freedesktop.DBus.Properties", "Get",
                                                on_reply, c, "ss", unit_interface(c->unit), "ControlGroup");
        }
        sd_bus_message *m = NULL;
        int r = sd_bus_message_new_method_call(bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER, "SetUnitProperties");
        /* runtime=true: /run/systemd/system.control, never the unit file; MemoryHigh is "t"
         * (UINT64_MAX: infinity, memory.high "max"). */
        if (r >= 0)
                r = sd_bus_message_append(m, "sb", c->unit, 1);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sv)");
        if (r >= 0)
                r = sd_bus_message_append(m, "(sv)", "MemoryHigh", "t", c->value);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_call_async(bus, &c->slot, m, on_reply, c, CALL_TIMEOUT);
        sd_bus_message_unref(m);
        return r;
}

static void format_value(uint64_t v, char buf[static 24]) {
        if (v == UINT64_MAX)
                snprintf(buf, 24, "infinity");
        else
                snprintf(buf, 24, "%" PRIu64, v);
}

static char *error_text(const sd_bus_error *e) {
        char *s = NULL;
        if (asprintf(&s, "%s: %s", e->name, e->message ? e->message : "(no message)") < 0)
                return NULL;
        return s;
}

/* ---- detached calls: leftovers at start, restores whose target went ---- */

static void detached_remove_record(struct unit_call *c) {
        struct stat st;
        if (!c->record_path || stat(c->record_path, &st) < 0 || st.st_dev != c->record_dev || st.st_ino != c->record_ino)
                return; /* gone already, or a new record of a target since */
        if (c->lowered_path)
                (void) unlink(c->lowered_path);
        (void) unlink(c->record_path);
}

/* The direct write, for a leftover whose cgroup systemd does not own after all (or cannot be
 * asked about). */
static void detached_write_directly(struct unit_call *c) {
        _cleanup_(memcg_freep) struct memcg *cg = NULL;
        char buf[24];
        format_value(c->value, buf);
        int r = memcg_open(c->cgroup, &cg);
        if (r == -ENOENT) {
                detached_remove_record(c);
                return;
        }
        if (r >= 0)
                r = memcg_write_cap(cg, c->value);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Failed to restore memory.high of %s to %s: %m", c->cgroup, buf);
                return;
        }
        log_module_info(MODULE, "Restored memory.high of %s to %s (was %" PRIu64 ", left lowered by an interrupted reclaim)",
                        c->cgroup, buf, c->was);
        detached_remove_record(c);
}

/* true: the call goes on (sent again as the next stage). */
static bool detached_done(struct unit_call *c, sd_bus_message *m, const sd_bus_error *e) {
        char buf[24];
        format_value(c->value, buf);
        if (c->kind == CALL_CHECK) {
                const char *cg = NULL;
                if (e)
                        log_module_warning(MODULE, "Cannot ask systemd whether %s is the cgroup of %s (%s: %s): restoring memory.high directly",
                                           c->cgroup, c->unit, e->name, strempty(e->message));
                else if (sd_bus_message_read(m, "v", "s", &cg) >= 0 && streq_ptr(cg, c->cgroup)) {
                        c->kind = CALL_SET;
                        int r = call_send(c);
                        if (r >= 0)
                                return true;
                        log_module_warning_errno(MODULE, r, "Cannot call systemd to restore MemoryHigh= of %s: %m; restoring memory.high directly",
                                                 c->unit);
                }
                detached_write_directly(c);
                return false;
        }
        if (!c->restore) {
                /* A lowering whose target went: the restore sent after it decides. */
                if (e)
                        log_module_debug(MODULE, "MemoryHigh=%s of %s: %s: %s", buf, c->unit, e->name, strempty(e->message));
                return false;
        }
        if (e) {
                log_module_error(MODULE, "Failed to restore MemoryHigh= of %s to %s through systemd (%s: %s): keeping the record for the next start",
                                 c->unit, buf, e->name, strempty(e->message));
                return false;
        }
        if (c->leftover)
                log_module_info(MODULE, "Restored memory.high of %s to %s (was %" PRIu64 ", left lowered by an interrupted reclaim) through systemd: MemoryHigh= of %s",
                                c->cgroup, buf, c->was, c->unit);
        else
                log_module_debug(MODULE, "MemoryHigh= of %s restored to %s", c->unit, buf);
        detached_remove_record(c);
        return false;
}

/* ---- a target's calls ---- */

static uint64_t expected_cap(uint64_t v) {
        return v == UINT64_MAX ? v : plan_limit_as_kernel_keeps(v, memcg_page_size());
}

static bool verifying(const struct reclaim_target *t) {
        int enabled = SD_EVENT_OFF;
        return t->cap.verify && sd_event_source_get_enabled(t->cap.verify, &enabled) >= 0 && enabled != SD_EVENT_OFF;
}

/* The call is done: what was put off while it was in flight happens now. */
static void cap_done(struct reclaim_target *t) {
        if (t->cap.call || verifying(t) || t->cap.owner == CAP_OWNER_CHECKING)
                return;
        if (t->cap.remove_record && !t->cap_lowered) {
                t->cap.remove_record = false;
                target_record_remove(t);
        }
        if (t->cap.step_put_off) {
                t->cap.step_put_off = false;
                if (t->in_episode && t->step_src)
                        (void) sd_event_source_set_enabled(t->step_src, SD_EVENT_ONESHOT);
        }
        if (t->cap.replay >= 0) {
                int source = t->cap.replay;
                t->cap.replay = -1;
                target_check(t, (enum wake_source) source);
        }
}

static int on_verify(sd_event_source *s, uint64_t usec, void *userdata) {
        struct reclaim_target *t = userdata;
        uint64_t cur;
        (void) usec;
        (void) s;
        if (t->cg && t->cap.verify_left > 0 && memcg_read_cap(t->cg, &cur) >= 0 && cur != expected_cap(t->cap.verify_value)) {
                t->cap.verify_left--;
                if (sd_event_source_set_time_relative(t->cap.verify, VERIFY_INTERVAL) >= 0 &&
                    sd_event_source_set_enabled(t->cap.verify, SD_EVENT_ONESHOT) >= 0)
                        return 0;
        }
        (void) sd_event_source_set_enabled(t->cap.verify, SD_EVENT_OFF);
        cap_done(t);
        return 0;
}

/* After systemd's answer: waits for memory.high to show value (it writes the cgroup after it
 * answers), then the call is done. */
static void verify_start(struct reclaim_target *t, uint64_t value) {
        uint64_t cur;
        if (!t->cg || (memcg_read_cap(t->cg, &cur) >= 0 && cur == expected_cap(value)))
                return cap_done(t);
        int r = t->cap.verify ? sd_event_source_set_time_relative(t->cap.verify, VERIFY_INTERVAL)
                              : sd_event_add_time_relative(t->ctx->event, &t->cap.verify, CLOCK_MONOTONIC, VERIFY_INTERVAL, 0,
                                                           on_verify, t);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->cap.verify, SD_EVENT_ONESHOT);
        if (r < 0)
                return cap_done(t);
        t->cap.verify_left = VERIFY_TRIES;
        t->cap.verify_value = value;
}

static void count_failure(struct reclaim_target *t) {
        (void) metric_inc(t->ctx->metrics.systemd_failures, t->settings.name);
}

static void set_error(struct reclaim_target *t, const sd_bus_error *e) {
        free(t->cap.error);
        t->cap.error = e ? error_text(e) : NULL;
        if (e)
                count_failure(t);
}

static void target_check_done(struct reclaim_target *t, struct unit_call *c, sd_bus_message *m, const sd_bus_error *e) {
        const char *cg = NULL;
        t->cap.call = NULL;
        if (e) {
                log_target_warning(t, "Cannot ask systemd whether %s is the cgroup of %s (%s: %s): writing memory.high directly",
                                   t->cgroup, c->unit, e->name, strempty(e->message));
                set_error(t, e);
                t->cap.owner = CAP_OWNER_CGROUPFS;
        } else if (sd_bus_message_read(m, "v", "s", &cg) >= 0 && streq_ptr(cg, t->cgroup)) {
                log_target_info(t, "memory.high of %s is set through systemd: MemoryHigh= of %s", t->cgroup, c->unit);
                t->cap.owner = CAP_OWNER_SYSTEMD;
        } else {
                log_target_info(t, "%s is not the cgroup of a loaded %s (systemd says %s): writing memory.high directly", t->cgroup,
                                c->unit, isempty(cg) ? "none" : cg);
                t->cap.owner = CAP_OWNER_CGROUPFS;
                t->cap.unit = mfree(t->cap.unit);
        }
        cap_done(t);
}

static void target_set_done(struct reclaim_target *t, struct unit_call *c, const sd_bus_error *e) {
        char buf[24];
        format_value(c->value, buf);
        if (e)
                log_target_warning(t, "systemd refused MemoryHigh=%s for %s (%s: %s)%s", buf, c->unit, e->name,
                                   strempty(e->message), c->restore ? ": the restore is retried" : ": restoring the original");
        if (t->cap.call != c)
                return; /* a later call decides */
        t->cap.call = NULL;
        set_error(t, e);
        if (!e)
                return verify_start(t, c->value);
        if (c->restore) {
                /* As a failed direct restore: our value may be in force, the record stays, and
                 * target_check() retries after a backoff. */
                t->cap_lowered = true;
                t->restore_failed = true;
                t->cap.remove_record = false;
                target_hold_after_error(t);
        } else {
                /* As a failed direct lowering: the original back (it may well be in force), and
                 * the throttle tried again after the backoff: nothing else may wake an idle
                 * target, and systemd may say yes then (a unit unmasked, PID 1 less busy). */
                (void) target_record_restore(t);
                target_hold_after_error(t);
        }
        cap_done(t);
}

static int on_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        struct unit_call *c = userdata;
        const sd_bus_error *e = sd_bus_message_is_method_error(m, NULL) ? sd_bus_message_get_error(m) : NULL;
        (void) ret_error;
        c->slot = sd_bus_slot_unref(c->slot);
        struct reclaim_target *t = c->t;
        if (!t) {
                if (!detached_done(c, m, e))
                        call_free(c);
                return 0;
        }
        if (c->kind == CALL_CHECK)
                target_check_done(t, c, m, e);
        else
                target_set_done(t, c, e);
        call_free(c);
        return 0;
}

/* ---- the target's interface ---- */

/* Sends the target's call of kind about unit (CALL_SET: value, restore) and makes it the call
 * whose answer decides; a failure to send is counted and kept as the target's owner_error. */
static int target_call_start(struct reclaim_target *t, enum call_kind kind, const char *unit, uint64_t value, bool restore) {
        struct unit_bus *b;
        int r = bus_get(t->ctx, &b);
        struct unit_call *c = r < 0 ? NULL : call_new(b, kind, unit, t->cgroup);
        if (c) {
                c->t = t;
                c->value = value;
                c->restore = restore;
                r = call_send(c);
                if (r < 0)
                        c = call_free(c);
        } else if (r >= 0)
                r = -ENOMEM;
        if (r < 0) {
                count_failure(t);
                free(t->cap.error);
                t->cap.error = strdup(strerror(-r));
                return r;
        }
        t->cap.call = c;
        return 0;
}

void unit_cap_attach(struct reclaim_target *t) {
        _cleanup_free_ char *unit = NULL;

        unit_cap_detach(t);
        if (t->cg->version != MEMCG_V2 || sd_booted() <= 0)
                return;
        int r = unit_name_from_cgroup(t->cgroup, &unit);
        if (r <= 0)
                return;
        r = target_call_start(t, CALL_CHECK, unit, 0, false);
        if (r < 0) {
                log_target_warning_errno(t, r, "Cannot reach systemd to ask whether %s is the cgroup of %s: %m; writing memory.high directly",
                                         t->cgroup, unit);
                return;
        }
        t->cap.owner = CAP_OWNER_CHECKING;
        t->cap.unit = TAKE_PTR(unit);
}

void unit_cap_detach(struct reclaim_target *t) {
        struct unit_bus *b = t->ctx->bus;
        bool verify_pending = verifying(t);

        t->cap.verify = sd_event_source_disable_unref(t->cap.verify);
        for (struct unit_call *c = b ? b->calls : NULL, *next; c; c = next) {
                next = c->next;
                if (c->t != t)
                        continue;
                c->t = NULL;
                if (c->kind == CALL_CHECK) {
                        call_free(c);
                        continue;
                }
                struct stat st;
                if (c == t->cap.call && c->restore && t->cap.remove_record && stat(t->record_path, &st) >= 0) {
                        c->record_path = strdup(t->record_path);
                        c->lowered_path = strdup(t->lowered_path);
                        c->record_dev = st.st_dev;
                        c->record_ino = st.st_ino;
                        t->cap.remove_record = false;
                }
        }
        t->cap.call = NULL;
        if (verify_pending && t->cap.remove_record && !t->cap_lowered) {
                /* systemd said yes: the original is back, only its write was not seen yet. */
                t->cap.remove_record = false;
                t->cap.owner = CAP_OWNER_CGROUPFS;
                target_record_remove(t);
        }
        t->cap.owner = CAP_OWNER_CGROUPFS;
        t->cap.unit = mfree(t->cap.unit);
        t->cap.remove_record = false;
        t->cap.step_put_off = false;
        t->cap.replay = -1;
}

void unit_cap_free(struct reclaim_target *t) {
        unit_cap_detach(t);
        t->cap.error = mfree(t->cap.error);
}

int unit_cap_write(struct reclaim_target *t, const struct memcg *cg, uint64_t value, bool restore) {
        if (t->cap.owner != CAP_OWNER_SYSTEMD || cg != t->cg)
                return memcg_write_cap(cg, value);
        int r = target_call_start(t, CALL_SET, t->cap.unit, value, restore);
        if (r < 0)
                log_target_warning_errno(t, r, "Cannot call systemd to set MemoryHigh= of %s: %m", t->cap.unit);
        return r;
}

bool unit_cap_busy(struct reclaim_target *t, int source) {
        if (!t->cap.call && !verifying(t) && t->cap.owner != CAP_OWNER_CHECKING)
                return false;
        if (source < 0)
                t->cap.step_put_off = true;
        else if (t->cap.replay != WAKE_START)
                t->cap.replay = source;
        return true;
}

bool unit_cap_hold_record(struct reclaim_target *t) {
        if (!t->cap.call && !verifying(t))
                return false;
        t->cap.remove_record = true;
        return true;
}

int unit_cap_to_json(const struct reclaim_target *t, cJSON *o) {
        if (!cJSON_AddStringToObject(o, "owner", owner_names[t->cap.owner]) || !json_add_string_or_null(o, "unit", t->cap.unit) ||
            !json_add_string_or_null(o, "owner_error", t->cap.error))
                return -ENOMEM;
        return 0;
}

/* ---- leftovers, and the end ---- */

int unit_cap_restore_leftover(struct reclaim_ctx *ctx, const char *cgroup, uint64_t want, uint64_t was,
                              const char *record_path, const char *lowered_path) {
        _cleanup_free_ char *unit = NULL;
        struct unit_bus *b;
        struct stat st;

        if (sd_booted() <= 0)
                return 0;
        int r = unit_name_from_cgroup(cgroup, &unit);
        if (r <= 0)
                return r;
        r = bus_get(ctx, &b);
        if (r < 0)
                return r;
        if (stat(record_path, &st) < 0)
                return -errno;
        struct unit_call *c = call_new(b, CALL_CHECK, unit, cgroup);
        if (!c)
                return -ENOMEM;
        c->value = want;
        c->was = was;
        c->restore = c->leftover = true;
        c->record_path = strdup(record_path);
        c->lowered_path = lowered_path ? strdup(lowered_path) : NULL;
        c->record_dev = st.st_dev;
        c->record_ino = st.st_ino;
        r = !c->record_path ? -ENOMEM : call_send(c);
        if (r < 0) {
                call_free(c);
                return r;
        }
        return 1;
}

void unit_cap_adopt_leftover(struct reclaim_ctx *ctx, const char *record_path) {
        for (struct unit_call *c = ctx->bus ? ctx->bus->calls : NULL; c; c = c->next)
                if (!c->t && streq_ptr(c->record_path, record_path)) {
                        c->record_path = mfree(c->record_path);
                        c->lowered_path = mfree(c->lowered_path);
                }
}

struct unit_bus *unit_cap_bus_free(struct unit_bus *b) {
        if (!b)
                return NULL;
        usec_t end = now_usec(CLOCK_MONOTONIC) + FLUSH_TIMEOUT;
        while (b->bus && b->calls) {
                usec_t now = now_usec(CLOCK_MONOTONIC);
                if (now >= end)
                        break;
                int r = sd_bus_process(b->bus, NULL);
                if (r < 0)
                        break;
                if (r == 0 && sd_bus_wait(b->bus, end - now) < 0)
                        break;
        }
        if (b->calls)
                log_module_warning(MODULE, "systemd did not answer in time: the next start restores what it did not");
        while (b->calls) {
                if (b->calls->t)
                        b->calls->t->cap.call = NULL;
                call_free(b->calls);
        }
        if (b->bus) {
                (void) sd_bus_detach_event(b->bus);
                sd_bus_flush_close_unref(b->bus);
        }
        free(b);
        return NULL;
}
