/* SPDX-License-Identifier: MIT */
/* The durable record of a v1 original limit under state-dir/reclaim/ (NAME.json, written
 * before the first write to the limit) and the value noted before each lowering write
 * (NAME.lowered): how a restore knows the original, and whether the limit in force is ours. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>

#include "fsutil.h"
#include "json.h"
#include "target-internal.h"

int target_record_write(struct reclaim_target *t, uint64_t limit) {
        if (t->recorded_limit == limit)
                return 0;
        /* Our lowered limit is never taken for the original (it would stay lowered for good). */
        if (!reclaim_record_may_write(t->limit_lowered, t->recorded_limit, limit))
                return -EBUSY;
        /* A record we do not hold belongs to a cgroup whose restore failed at start (the
         * section named another cgroup then): it is not ours to overwrite. */
        if (t->recorded_limit == 0 && access(t->record_path, F_OK) == 0)
                return -EEXIST;
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        /* "max" for no limit; a number otherwise (exact: limits are far below 2^53 bytes). */
        if (!o || !cJSON_AddStringToObject(o, "cgroup", t->cgroup) ||
            !(limit == UINT64_MAX ? cJSON_AddStringToObject(o, "limit", "max")
                                  : cJSON_AddNumberToObject(o, "limit", (double) limit)))
                return -ENOMEM;
        _cleanup_free_ char *text = cJSON_PrintUnformatted(o);
        if (!text)
                return -ENOMEM;
        int r = mkdir_p(t->ctx->record_dir, 0700);
        if (r < 0)
                return r;
        r = write_file_atomic(t->record_path, text, strlen(text), 0600, (uid_t) -1, (gid_t) -1);
        if (r < 0)
                return r;
        t->recorded_limit = limit;
        return 0;
}

uint64_t target_page_size(void) {
        long p = sysconf(_SC_PAGESIZE);
        return p > 0 ? (uint64_t) p : 4096;
}

/* The value we are about to lower the limit to, before the write. On failure the value is
 * unknown (0): a restore then takes any limit below the original for ours. */
void target_note_lowered(struct reclaim_target *t, uint64_t value) {
        char buf[24];
        int n = snprintf(buf, sizeof(buf), "%020" PRIu64 "\n", value);
        if (t->lowered_fd < 0)
                t->lowered_fd = open(t->lowered_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (t->lowered_fd < 0 || pwrite(t->lowered_fd, buf, (size_t) n, 0) != n) {
                log_target_debug(t, "Failed to note the lowered limit in %s: %m", t->lowered_path);
                t->last_lowered = 0;
                return;
        }
        t->last_lowered = value;
}

static int read_lowered(const char *path, uint64_t *ret) {
        _cleanup_free_ char *text = NULL;
        int r = read_file_full(path, 64, &text, NULL);
        if (r < 0)
                return r;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(text, &end, 10);
        if (errno != 0 || end == text || (*end != 0 && *end != '\n'))
                return -EINVAL;
        *ret = v;
        return 0;
}

/* Forgets the record: only once the original is in place or the cgroup is gone. */
void target_record_remove(struct reclaim_target *t) {
        if (t->limit_lowered || !t->lowered_path || (!t->recorded_limit && t->lowered_fd < 0))
                return; /* still needed, or nothing of ours (a record of another cgroup stays) */
        t->lowered_fd = safe_close(t->lowered_fd);
        if (unlink(t->lowered_path) < 0 && errno != ENOENT)
                log_target_warning_errno(t, errno, "Failed to remove %s, ignoring: %m", t->lowered_path);
        t->last_lowered = 0;
        if (!t->recorded_limit)
                return;
        if (unlink(t->record_path) < 0 && errno != ENOENT) {
                log_target_warning_errno(t, errno, "Failed to remove %s, ignoring: %m", t->record_path);
                return;
        }
        (void) fsync_directory_of(t->record_path);
        t->recorded_limit = 0;
}

/* {"cgroup": "/a/b", "limit": N | "max"} → the cgroup and the limit (UINT64_MAX for max). */
static int record_parse(const char *text, char **ret_cgroup, uint64_t *ret_limit) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_Parse(text);
        if (!o)
                return -EBADMSG;
        const cJSON *cgroup = cJSON_GetObjectItemCaseSensitive(o, "cgroup");
        const cJSON *limit = cJSON_GetObjectItemCaseSensitive(o, "limit");
        uint64_t want = 0;
        if (cJSON_IsString(limit) && streq(limit->valuestring, "max"))
                want = UINT64_MAX;
        else if (cJSON_IsNumber(limit) && limit->valuedouble >= 1 && limit->valuedouble < 9.0e15)
                want = (uint64_t) limit->valuedouble;
        if (!cJSON_IsString(cgroup) || want == 0)
                return -EINVAL;
        int r = memcg_path_normalize(cgroup->valuestring, ret_cgroup);
        if (r < 0)
                return r;
        *ret_limit = want;
        return 0;
}

/* Puts the recorded original limit back while our lowered one may be in force (limit_lowered).
 * Reads the limit first: one at or above the original needs no write. Returns 0 when the
 * original is in place (or the cgroup is gone: limit_lowered cleared), <0 when the restore
 * failed (limit_lowered stays set: the record must stay). */
int target_restore_limit(struct reclaim_target *t) {
        _cleanup_(memcg_freep) struct memcg *tmp = NULL;
        const struct memcg *cg = t->cg;
        uint64_t cur;
        int r;

        if (!t->limit_lowered)
                return 0;
        if (!t->recorded_limit) {
                t->limit_lowered = false; /* nothing was recorded, so nothing was lowered */
                return 0;
        }
        if (!cg) {
                r = memcg_open(t->cgroup, &tmp);
                if (r == -ENOENT) {
                        t->limit_lowered = false;
                        return 0;
                }
                if (r < 0)
                        return log_target_error_errno(t, r, "Cannot open %s to restore its limit: %m", t->cgroup);
                cg = tmp;
        }
        if (cg->version != MEMCG_V1) {
                t->limit_lowered = false;
                return 0;
        }
        r = memcg_read_limit(cg, &cur);
        if (r >= 0 && cur < t->recorded_limit && !reclaim_limit_is_ours(cur, t->recorded_limit, t->last_lowered, target_page_size())) {
                /* Someone set another limit since our write: theirs stays. */
                log_target_info(t, "memory.limit_in_bytes of %s is %" PRIu64 ", not the %" PRIu64 " we wrote: set by someone else, not restoring %" PRIu64,
                                t->cgroup, cur, t->last_lowered, t->recorded_limit);
                t->restore_failed = false;
                t->limit_lowered = false;
                return 0;
        }
        if (r >= 0 && cur >= t->recorded_limit)
                r = 0; /* the original (or more) is in force already */
        else
                r = memcg_set_limit(cg, t->recorded_limit);
        if (r < 0) {
                if (!memcg_exists(cg)) {
                        t->limit_lowered = false;
                        return 0;
                }
                t->restore_failed = true;
                return log_target_error_errno(t, r, "Failed to restore memory.limit_in_bytes of %s to %" PRIu64 ": %m",
                                              t->cgroup, t->recorded_limit);
        }
        if (t->restore_failed)
                log_target_info(t, "memory.limit_in_bytes of %s restored to %" PRIu64, t->cgroup, t->recorded_limit);
        t->restore_failed = false;
        t->limit_lowered = false;
        return 0;
}

/* A target starting on a cgroup whose record survived (its restore failed at start, or a
 * reload/attach in this run): the record's original is the original, and our lowered limit
 * may be in force. Never overwritten with the limit read now. */
void target_record_load(struct reclaim_target *t) {
        _cleanup_free_ char *text = NULL, *cgroup = NULL;
        uint64_t limit;

        if (t->recorded_limit)
                return;
        int r = read_file_full(t->record_path, 4096, &text, NULL);
        if (r == -ENOENT)
                return;
        if (r < 0 || record_parse(text, &cgroup, &limit) < 0) {
                log_target_warning(t, "Ignoring unreadable record %s", t->record_path);
                return; /* target_record_write() refuses to overwrite it: the state says error */
        }
        if (!streq(cgroup, t->cgroup)) {
                log_target_warning(t, "The record %s names cgroup %s, not %s: kept until that limit is restored", t->record_path,
                                   cgroup, t->cgroup);
                return;
        }
        log_target_info(t, "Recorded original limit %" PRIu64 " of %s found: restoring it before anything else", limit,
                        t->cgroup);
        if (read_lowered(t->lowered_path, &t->last_lowered) < 0)
                t->last_lowered = 0;
        t->recorded_limit = limit;
        t->limit_lowered = true;
}

int reclaim_restore_leftovers(struct reclaim_ctx *ctx) {
        _cleanup_close_ int dfd = open_directory(ctx->record_dir);
        int n = 0;
        if (dfd == -ENOENT)
                return 0;
        if (dfd < 0)
                return log_module_error_errno(MODULE, dfd, "Failed to open %s: %m", ctx->record_dir);
        (void) fsutil_cleanup_temp(ctx->record_dir);
        DIR *d = opendir_at(dfd, ".");
        if (!d)
                return log_module_error_errno(MODULE, errno, "Failed to read %s: %m", ctx->record_dir);
        struct dirent *de;
        while (read_entry(d, &de) > 0) {
                size_t len = strlen(de->d_name);
                if (len < 6 || !streq(de->d_name + len - 5, ".json"))
                        continue;
                _cleanup_free_ char *p = path_join(ctx->record_dir, de->d_name), *text = NULL, *cgroup = NULL;
                _cleanup_(memcg_freep) struct memcg *cg = NULL;
                uint64_t cur = 0, want = 0;
                int q = !p ? -ENOMEM : read_file_full(p, 4096, &text, NULL);
                if (q >= 0)
                        q = record_parse(text, &cgroup, &want);
                if (q < 0) {
                        log_module_warning(MODULE, "Ignoring %s record %s", q == -EINVAL ? "malformed" : "unreadable",
                                           p ? p : de->d_name);
                        (void) unlinkat(dfd, de->d_name, 0);
                        continue;
                }
                /* The sibling .lowered: the value we wrote last (absent: unknown). */
                _cleanup_free_ char *lowered = NULL;
                uint64_t written = 0;
                if (asprintf(&lowered, "%.*s.lowered", (int) (len - 5), de->d_name) < 0)
                        lowered = NULL;
                if (lowered) {
                        _cleanup_free_ char *lp = path_join(ctx->record_dir, lowered);
                        if (!lp || read_lowered(lp, &written) < 0)
                                written = 0;
                }
                int ro = memcg_open(cgroup, &cg);
                int rr = ro >= 0 ? memcg_read_limit(cg, &cur) : 0;
                switch (reclaim_leftover_action(ro, rr, cur, want, written, target_page_size())) {
                case LEFTOVER_KEEP:
                        log_module_error_errno(MODULE, ro < 0 ? ro : rr,
                                               "Cannot %s cgroup %s to check the limit recorded in %s, keeping the record: %m",
                                               ro < 0 ? "open" : "read", cgroup, de->d_name);
                        continue;
                case LEFTOVER_NOT_OURS:
                        log_module_info(MODULE, "The memory limit of %s is %" PRIu64 ", not the %" PRIu64
                                        " an interrupted reclaim wrote: set by someone else since, not restoring %" PRIu64,
                                        cgroup, cur, written, want);
                        break;
                case LEFTOVER_FORGET:
                        if (ro == -ENOENT)
                                log_module_info(MODULE, "%s: recorded cgroup %s is gone; nothing to restore", de->d_name,
                                                cgroup);
                        break;
                case LEFTOVER_RESTORE: {
                        int r = memcg_set_limit(cg, want);
                        if (r < 0) {
                                log_module_error_errno(MODULE, r, "Failed to restore the limit of %s to %" PRIu64 ": %m",
                                                       cgroup, want);
                                continue; /* keep the record: its target (or the next start) tries again */
                        }
                        char buf[32];
                        if (want == UINT64_MAX)
                                snprintf(buf, sizeof(buf), "max");
                        else
                                snprintf(buf, sizeof(buf), "%" PRIu64, want);
                        log_module_info(MODULE, "Restored the memory limit of %s to %s (was %" PRIu64
                                        ", left lowered by an interrupted reclaim)",
                                        cgroup, buf, cur);
                        n++;
                        break;
                }
                case _LEFTOVER_ACTION_MAX:
                        continue;
                }
                if (lowered)
                        (void) unlinkat(dfd, lowered, 0);
                (void) unlinkat(dfd, de->d_name, 0);
        }
        closedir(d);
        (void) fsync_fd(dfd);
        return n;
}
