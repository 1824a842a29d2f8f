/* SPDX-License-Identifier: MIT */
/* The durable record of the original cap (v1 memory.limit_in_bytes, v2 memory.high) under
 * state-dir/reclaim/ — NAME.json, written before the first write to the cap — and the values
 * noted before each lowering write (NAME.lowered): how a restore knows the original, and
 * whether the value in force is still ours. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>

#include "fs.h"
#include "json.h"
#include "state-version.h"
#include "target-internal.h"

/* NAME.json: {"version": 1, "cgroup", "limit"|"high"} (version 1 without the key is the same).
 * NAME.lowered: "v2 <written> <throttle>\n" (version 1: the same without the prefix, or only
 * <written> from before the throttle). */
#define RECORD_VERSION 1u
#define LOWERED_VERSION 2u

/* The record's key for the original: "limit" (v1, as it always was) or "high" (v2). */
static const char *record_key(enum memcg_version v) {
        return v == MEMCG_V1 ? "limit" : "high";
}

static void format_cap(uint64_t v, char buf[static 24]) {
        if (v == UINT64_MAX)
                snprintf(buf, 24, "max");
        else
                snprintf(buf, 24, "%" PRIu64, v);
}

int target_record_write(struct reclaim_target *t, uint64_t value) {
        if (t->recorded_cap == value)
                return 0;
        /* Our lowered value is never taken for the original (it would stay lowered for good). */
        if (!plan_record_may_write(t->cap_lowered, t->recorded_cap, value))
                return -EBUSY;
        /* A record we do not hold belongs to a cgroup whose restore failed at start (the
         * section named another cgroup then): it is not ours to overwrite. */
        if (t->recorded_cap == 0 && access(t->record_path, F_OK) == 0)
                return -EEXIST;
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        const char *key = record_key(t->cg->version);
        /* "max" for none; a number otherwise (exact: limits are far below 2^53 bytes). */
        if (!o || state_version_json_add(o, RECORD_VERSION) < 0 || !cJSON_AddStringToObject(o, "cgroup", t->cgroup) ||
            !(value == UINT64_MAX ? cJSON_AddStringToObject(o, key, "max") : cJSON_AddNumberToObject(o, key, (double) value)))
                return -ENOMEM;
        _cleanup_free_ char *text = cJSON_PrintUnformatted(o);
        if (!text)
                return -ENOMEM;
        int r = fs_mkdir_p(t->ctx->record_dir, 0700);
        if (r < 0)
                return r;
        r = fs_write_file_atomic(t->record_path, text, strlen(text), 0600, (uid_t) -1, (gid_t) -1);
        if (r < 0)
                return r;
        t->recorded_cap = value;
        return 0;
}

int target_record_original(struct reclaim_target *t, uint64_t value) {
        int r = target_record_write(t, value);
        if (r >= 0) {
                t->record_error = mfree(t->record_error);
                return 0;
        }
        log_target_error_errno(t, r, "Failed to record the original %s in %s, not reclaiming: %m",
                               t->cg->version == MEMCG_V1 ? "limit" : "memory.high", t->record_path);
        free(t->record_error);
        if (asprintf(&t->record_error, "cannot record the original %s in %s: %s",
                     t->cg->version == MEMCG_V1 ? "limit" : "memory.high", t->record_path,
                     r == -EEXIST ? "it holds the record of another cgroup, not restored yet" : strerror(-r)) < 0)
                t->record_error = NULL;
        return r;
}

/* On failure the values are unknown (0): a restore then takes any value below the original for
 * ours. */
void target_record_note_lowered(struct reclaim_target *t, uint64_t value, uint64_t in_force) {
        char buf[64];
        int n = state_version_text_prefix(buf, sizeof(buf), LOWERED_VERSION);
        /* Always the same length: each pwrite() replaces the whole content. */
        n += snprintf(buf + n, sizeof(buf) - (size_t) n, "%020" PRIu64 " %020" PRIu64 "\n", value, in_force);
        if (t->lowered_fd < 0)
                t->lowered_fd = open(t->lowered_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (t->lowered_fd < 0 || pwrite(t->lowered_fd, buf, (size_t) n, 0) != n) {
                log_target_debug(t, "Failed to note the lowered value in %s: %m", t->lowered_path);
                t->noted[0] = t->noted[1] = 0;
                return;
        }
        t->noted[0] = value;
        t->noted[1] = in_force;
}

/* "[v2 ]<written>[ <throttle>]\n" (a file from before the throttle holds one number).
 * STATE_VERSION_ERR_NEWER (*ret_version set) for a newer release's file. */
static int read_lowered(const char *path, uint64_t ret[static 2], unsigned *ret_version) {
        _cleanup_free_ char *text = NULL;
        uint64_t v[2] = {};
        unsigned version;
        const char *p;
        int r = fs_read_file_full(path, 64, &text, NULL);
        if (r < 0)
                return r;
        r = state_version_text(text, LOWERED_VERSION, ret_version ? ret_version : &version, &p);
        if (r < 0)
                return r;
        for (size_t i = 0; i < 2; i++) {
                char *end;
                errno = 0;
                unsigned long long x = strtoull(p, &end, 10);
                if (errno != 0 || end == p)
                        return -EINVAL;
                v[i] = x;
                p = end;
                if (*p != ' ')
                        break;
                p++;
        }
        if (*p != 0 && *p != '\n')
                return -EINVAL;
        ret[0] = v[0];
        ret[1] = v[1];
        return 0;
}

/* Of the noted values, the one the cap read (cur) is, if any; else the value written last. */
static uint64_t noted_in_force(uint64_t cur, const uint64_t noted[static 2]) {
        if (noted[1] != 0 && cur == plan_limit_as_kernel_keeps(noted[1], memcg_page_size()))
                return noted[1];
        return noted[0];
}

bool target_record_cap_is_ours(const struct reclaim_target *t, uint64_t cur) {
        return plan_limit_is_ours(cur, t->recorded_cap, noted_in_force(cur, t->noted), memcg_page_size());
}

/* Forgets the record: only once the original is in place or the cgroup is gone. */
void target_record_remove(struct reclaim_target *t) {
        if (t->cap_lowered || !t->lowered_path || (!t->recorded_cap && t->lowered_fd < 0))
                return; /* still needed, or nothing of ours (a record of another cgroup stays) */
        if (unit_cap_hold_record(t))
                return; /* the restore is in flight: removed once it is done */
        t->lowered_fd = safe_close(t->lowered_fd);
        if (unlink(t->lowered_path) < 0 && errno != ENOENT)
                log_target_warning_errno(t, errno, "Failed to remove %s, ignoring: %m", t->lowered_path);
        t->noted[0] = t->noted[1] = 0;
        if (!t->recorded_cap)
                return;
        if (unlink(t->record_path) < 0 && errno != ENOENT) {
                log_target_warning_errno(t, errno, "Failed to remove %s, ignoring: %m", t->record_path);
                return;
        }
        (void) fs_fsync_directory_of(t->record_path);
        t->recorded_cap = 0;
}

/* {"cgroup": "/a/b", "limit"|"high": N | "max"} → the cgroup, the original (UINT64_MAX for
 * max) and the version it belongs to. STATE_VERSION_ERR_NEWER (*ret_format set) for a newer
 * release's record. */
static int record_parse(const char *text, char **ret_cgroup, uint64_t *ret_value, enum memcg_version *ret_version,
                        unsigned *ret_format) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_Parse(text);
        if (!o)
                return -EBADMSG;
        int r = state_version_json(o, RECORD_VERSION, ret_format);
        if (r == STATE_VERSION_ERR_NEWER)
                return r;
        if (r < 0)
                return -EINVAL;
        const cJSON *cgroup = cJSON_GetObjectItemCaseSensitive(o, "cgroup");
        enum memcg_version version = MEMCG_V1;
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(o, record_key(MEMCG_V1));
        if (!value) {
                version = MEMCG_V2;
                value = cJSON_GetObjectItemCaseSensitive(o, record_key(MEMCG_V2));
        }
        uint64_t want = 0;
        if (cJSON_IsString(value) && streq(value->valuestring, "max"))
                want = UINT64_MAX;
        else if (cJSON_IsNumber(value) && value->valuedouble >= 1 && value->valuedouble < 9.0e15)
                want = (uint64_t) value->valuedouble;
        if (!cJSON_IsString(cgroup) || want == 0)
                return -EINVAL;
        r = memcg_path_normalize(cgroup->valuestring, ret_cgroup);
        if (r < 0)
                return r;
        *ret_value = want;
        *ret_version = version;
        return 0;
}

/* Puts the recorded original back while a lowered value of ours may be in force (cap_lowered),
 * ending the throttle. Reads the cap first: one at or above the original needs no write.
 * Returns 0 when the original is in place (or the cgroup is gone: cap_lowered cleared), <0
 * when the restore failed (cap_lowered stays set: the record must stay). */
int target_record_restore(struct reclaim_target *t) {
        _cleanup_(memcg_freep) struct memcg *tmp = NULL;
        const struct memcg *cg = t->cg;
        uint64_t cur;
        int r;

        /* The throttle ends here, whatever happens: a failed restore is retried as such. */
        t->throttle = 0;
        if (!t->cap_lowered)
                return 0;
        if (!t->recorded_cap) {
                t->cap_lowered = false; /* nothing was recorded, so nothing was lowered */
                return 0;
        }
        if (!cg) {
                r = memcg_open(t->cgroup, &tmp);
                if (r == -ENOENT) {
                        t->cap_lowered = false;
                        return 0;
                }
                if (r < 0)
                        return log_target_error_errno(t, r, "Cannot open %s to restore its limit: %m", t->cgroup);
                cg = tmp;
        }
        const char *file = memcg_cap_name(cg->version);
        r = memcg_read_cap(cg, &cur);
        if (r >= 0 && cur < t->recorded_cap && !target_record_cap_is_ours(t, cur)) {
                /* Someone set another value since our write: theirs stays. */
                log_target_info(t, "%s of %s is %" PRIu64 ", not the %" PRIu64 " we wrote: set by someone else, not restoring %" PRIu64,
                                file, t->cgroup, cur, noted_in_force(cur, t->noted), t->recorded_cap);
                t->restore_failed = false;
                t->cap_lowered = false;
                return 0;
        }
        if (r >= 0)
                target_count_lowered_hits(t, cg);
        if (r >= 0 && cur >= t->recorded_cap)
                r = 0; /* the original (or more) is in force already */
        else
                r = unit_cap_write(t, cg, t->recorded_cap, true);
        if (r < 0) {
                if (!memcg_exists(cg)) {
                        t->cap_lowered = false;
                        return 0;
                }
                t->restore_failed = true;
                char buf[24];
                format_cap(t->recorded_cap, buf);
                return log_target_error_errno(t, r, "Failed to restore %s of %s to %s: %m", file, t->cgroup, buf);
        }
        if (t->restore_failed) {
                char buf[24];
                format_cap(t->recorded_cap, buf);
                log_target_info(t, "%s of %s restored to %s", file, t->cgroup, buf);
        }
        t->restore_failed = false;
        t->cap_lowered = false;
        return 0;
}

/* A target starting on a cgroup whose record survived (its restore failed at start, or a
 * reload/attach in this run): the record's original is the original, and our lowered value
 * may be in force. Never overwritten with the value read now. */
void target_record_load(struct reclaim_target *t) {
        _cleanup_free_ char *text = NULL, *cgroup = NULL;
        enum memcg_version version;
        unsigned format = 0;
        uint64_t value;

        if (t->recorded_cap)
                return;
        int r = fs_read_file_full(t->record_path, 4096, &text, NULL);
        if (r == -ENOENT)
                return;
        if (r >= 0)
                r = record_parse(text, &cgroup, &value, &version, &format);
        if (r == STATE_VERSION_ERR_NEWER) {
                /* Kept as it is (target_record_write() refuses to overwrite it). */
                _cleanup_free_ char *why = state_version_describe(t->record_path, format, RECORD_VERSION);
                log_target_error(t, "%s", why ? why : "a newer release's record");
                return;
        }
        if (r < 0) {
                log_target_warning(t, "Ignoring unreadable record %s", t->record_path);
                return; /* target_record_write() refuses to overwrite it: the state says error */
        }
        if (!streq(cgroup, t->cgroup)) {
                log_target_warning(t, "The record %s names cgroup %s, not %s: kept until that limit is restored", t->record_path,
                                   cgroup, t->cgroup);
                return;
        }
        if (version != t->cg->version) {
                /* Made under the other hierarchy (before a reboot): nothing of ours is in force. */
                log_target_info(t, "The record %s is of cgroup v%d, %s is v%d now: forgetting it", t->record_path,
                                (int) version, t->cgroup, (int) t->cg->version);
                (void) unlink(t->record_path);
                return;
        }
        char buf[24];
        format_cap(value, buf);
        log_target_info(t, "Recorded original %s %s of %s found: restoring it before anything else",
                        memcg_cap_name(version), buf, t->cgroup);
        if (read_lowered(t->lowered_path, t->noted, NULL) < 0)
                t->noted[0] = t->noted[1] = 0;
        t->recorded_cap = value;
        t->cap_lowered = true;
        unit_cap_adopt_leftover(t->ctx, t->record_path);
}

/* The sibling .lowered of record NAME (NAME.json → NAME.lowered): the values an interrupted
 * reclaim may have left in force, {0, 0} when unknown. *ret_name is its file name (NULL if it
 * cannot be named). STATE_VERSION_ERR_NEWER for a newer release's file, else 0. */
static int leftover_read_lowered(struct reclaim_ctx *ctx, const char *name, char **ret_name, uint64_t noted[static 2]) {
        _cleanup_free_ char *lowered = NULL, *lp = NULL;
        unsigned format = 0;

        noted[0] = noted[1] = 0;
        *ret_name = NULL;
        if (asprintf(&lowered, "%.*s.lowered", (int) (strlen(name) - strlen(".json")), name) < 0)
                return 0;
        lp = fs_path_join(ctx->record_dir, lowered);
        int r = lp ? read_lowered(lp, noted, &format) : -ENOMEM;
        if (r == STATE_VERSION_ERR_NEWER) {
                _cleanup_free_ char *why = state_version_describe(lp, format, LOWERED_VERSION);
                log_module_error(MODULE, "%s", why ? why : "a newer release's record");
                return r;
        }
        if (r < 0)
                noted[0] = noted[1] = 0;
        *ret_name = TAKE_PTR(lowered);
        return 0;
}

enum leftover_restore_result { LEFTOVER_RESTORE_FAILED, LEFTOVER_RESTORE_DONE, LEFTOVER_RESTORE_PENDING };

/* Puts a record's original back. A unit's own cgroup goes through systemd, asynchronously: the
 * call removes the record files once the original is back (PENDING). Anything else is written
 * directly; a failure keeps the record, so its target (or the next start) tries again. */
static enum leftover_restore_result leftover_restore(struct reclaim_ctx *ctx, struct memcg *cg, const char *cgroup,
                                                     enum memcg_version version, uint64_t want, uint64_t cur,
                                                     const char *record_path, const char *lowered) {
        char buf[24];
        format_cap(want, buf);
        _cleanup_free_ char *lp = lowered ? fs_path_join(ctx->record_dir, lowered) : NULL;
        int r = version == MEMCG_V2 ? unit_cap_restore_leftover(ctx, cgroup, want, cur, record_path, lp) : 0;
        if (r > 0)
                return LEFTOVER_RESTORE_PENDING;
        if (r < 0)
                log_module_warning_errno(MODULE, r, "Cannot restore memory.high of %s through systemd: %m; writing it directly",
                                         cgroup);
        r = memcg_write_cap(cg, want);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Failed to restore %s of %s to %s: %m",
                                       version == MEMCG_V1 ? "the limit" : "memory.high", cgroup, buf);
                return LEFTOVER_RESTORE_FAILED;
        }
        log_module_info(MODULE, "Restored %s of %s to %s (was %" PRIu64 ", left lowered by an interrupted reclaim)",
                        version == MEMCG_V1 ? "the memory limit" : "memory.high", cgroup, buf, cur);
        return LEFTOVER_RESTORE_DONE;
}

/* One record an earlier run left in record_dir: restored, forgotten or kept, as
 * plan_leftover_action() decides; a record that is settled is removed with its .lowered.
 * 1: restored (or under way), 0: not, STATE_VERSION_ERR_NEWER: a newer release's record. */
static int leftover_handle(struct reclaim_ctx *ctx, int dfd, const char *name) {
        _cleanup_free_ char *p = fs_path_join(ctx->record_dir, name), *text = NULL, *cgroup = NULL, *lowered = NULL;
        _cleanup_(memcg_freep) struct memcg *cg = NULL;
        enum memcg_version version = MEMCG_V1;
        uint64_t cur = 0, want = 0, noted[2];
        unsigned format = 0;
        int restored = 0;

        int q = !p ? -ENOMEM : fs_read_file_full(p, 4096, &text, NULL);
        if (q >= 0)
                q = record_parse(text, &cgroup, &want, &version, &format);
        if (q == STATE_VERSION_ERR_NEWER) {
                _cleanup_free_ char *why = state_version_describe(p, format, RECORD_VERSION);
                log_module_error(MODULE, "%s", why ? why : "a newer release's record");
                return q;
        }
        if (q < 0) {
                log_module_warning(MODULE, "Ignoring %s record %s", q == -EINVAL ? "malformed" : "unreadable", p ? p : name);
                (void) unlinkat(dfd, name, 0);
                return 0;
        }
        q = leftover_read_lowered(ctx, name, &lowered, noted);
        if (q < 0)
                return q;
        int ro = memcg_open(cgroup, &cg);
        if (ro >= 0 && cg->version != version) {
                /* The hierarchy changed under the record (a reboot into the other version):
                 * nothing of ours can be in force. */
                log_module_info(MODULE, "%s: recorded cgroup %s is now cgroup v%d; nothing to restore", name, cgroup,
                                (int) cg->version);
                ro = -ENOENT;
        }
        int rr = ro >= 0 ? memcg_read_cap(cg, &cur) : 0;
        uint64_t written = noted_in_force(cur, noted);
        char buf[24];
        format_cap(want, buf);
        switch (plan_leftover_action(ro, rr, cur, want, written, memcg_page_size())) {
        case LEFTOVER_KEEP:
                log_module_error_errno(MODULE, ro < 0 ? ro : rr,
                                       "Cannot %s cgroup %s to check the value recorded in %s, keeping the record: %m",
                                       ro < 0 ? "open" : "read", cgroup, name);
                return 0;
        case LEFTOVER_NOT_OURS:
                log_module_info(MODULE, "The %s of %s is %" PRIu64 ", not the %" PRIu64
                                " an interrupted reclaim wrote: set by someone else since, not restoring %s",
                                version == MEMCG_V1 ? "memory limit" : "memory.high", cgroup, cur, written, buf);
                break;
        case LEFTOVER_FORGET:
                if (ro == -ENOENT && !cg)
                        log_module_info(MODULE, "%s: recorded cgroup %s is gone; nothing to restore", name, cgroup);
                break;
        case LEFTOVER_RESTORE:
                switch (leftover_restore(ctx, cg, cgroup, version, want, cur, p, lowered)) {
                case LEFTOVER_RESTORE_PENDING:
                        return 1;
                case LEFTOVER_RESTORE_FAILED:
                        return 0;
                case LEFTOVER_RESTORE_DONE:
                        restored = 1;
                        break;
                }
                break;
        case _LEFTOVER_ACTION_MAX:
                return 0;
        }
        if (lowered)
                (void) unlinkat(dfd, lowered, 0);
        (void) unlinkat(dfd, name, 0);
        return restored;
}

int target_record_restore_leftovers(struct reclaim_ctx *ctx) {
        _cleanup_close_ int dfd = fs_open_directory(ctx->record_dir);
        int n = 0;
        if (dfd == -ENOENT)
                return 0;
        if (dfd < 0)
                return log_module_error_errno(MODULE, dfd, "Failed to open %s: %m", ctx->record_dir);
        (void) fs_cleanup_temp(ctx->record_dir);
        DIR *d = fs_opendir_at(dfd, ".");
        if (!d)
                return log_module_error_errno(MODULE, errno, "Failed to read %s: %m", ctx->record_dir);
        struct dirent *de;
        while (fs_read_entry(d, &de) > 0) {
                size_t len = strlen(de->d_name);
                if (len < 6 || !streq(de->d_name + len - 5, ".json"))
                        continue;
                int r = leftover_handle(ctx, dfd, de->d_name);
                if (r < 0) {
                        closedir(d);
                        return r;
                }
                n += r;
        }
        closedir(d);
        (void) fs_fsync_fd(dfd);
        return n;
}
