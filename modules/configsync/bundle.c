/* SPDX-License-Identifier: MIT */
/* One [config.NAME]: when to sync (interval with jitter, zk-version-node after a splay, refresh,
 * SIGHUP, backoff after failures), what a sync's outcome does (publish bookkeeping, last known
 * good, state file through bundle-state.c, on-change) and how it is reported. */

#include <inttypes.h>
#include <sys/stat.h>
#include <stdio.h>

#include "atomic-dir.h"
#include "configsync.h"
#include "facts.h"
#include "fs.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "sha256.h"
#include "stage.h"
#include "strv.h"
#include "string-table.h"

static const char *const bundle_state_table[_BUNDLE_STATE_MAX] = {
        [BUNDLE_PENDING] = "pending",
        [BUNDLE_FETCHING] = "fetching",
        [BUNDLE_SYNCED] = "synced",
        [BUNDLE_FAILING] = "failing",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(bundle_state, enum bundle_state);

static void bundle_set_state(struct bundle *b, enum bundle_state s) {
        if (b->state == s)
                return;
        log_bundle_debug(b, "%s -> %s", bundle_state_to_string(b->state), bundle_state_to_string(s));
        b->state = s;
}

static struct manager *bundle_manager(const struct bundle *b) {
        return b->cs->mi->manager;
}

static void bundle_forget_cache(struct bundle *b) {
        b->etag = mfree(b->etag);
        b->have_sha = false;
        b->manifest = manifest_free(b->manifest);
}

static void bundle_unwatch(struct bundle *b) {
        /* Unwatch only through a fact that is still published: one that went is gone with its watches. */
        bool gone = b->zk && manager_lookup(bundle_manager(b), FACT_ZOOKEEPER) != zk_trigger_fact(b->zk);
        b->zk = zk_trigger_free(b->zk, gone);
}

struct bundle *bundle_free(struct bundle *b) {
        if (!b)
                return NULL;
        bundle_unwatch(b);
        b->fetch = fetch_free(b->fetch);
        b->timer = sd_event_source_disable_unref(b->timer);
        b->runner = runner_free(b->runner);
        bundle_forget_cache(b);
        free(b->version);
        free(b->version_dir);
        free(b->last_error);
        free(b->name);
        free(b);
        return NULL;
}

/* ---- scheduling ---- */

static void bundle_sync(struct bundle *b);

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct bundle *b = userdata;
        b->next_attempt = 0;
        bundle_sync(b);
        return 0;
}

static void bundle_schedule(struct bundle *b, usec_t delay) {
        int r;

        r = sd_event_source_set_time_relative(b->timer, delay);
        if (r >= 0)
                r = sd_event_source_set_enabled(b->timer, SD_EVENT_ONESHOT);
        if (r < 0) {
                log_bundle_warning_errno(b, r, "cannot arm the sync timer: %m");
                return;
        }
        b->next_attempt = now_usec(CLOCK_REALTIME) + delay;
}

/* How long until the planned sync, from the timer's own CLOCK_MONOTONIC deadline: next_attempt is
 * the wall-clock time for the status, and a step of the clock must not make a trigger wait for a
 * poll days away (or skip its splay). */
static usec_t bundle_wait_left(struct bundle *b) {
        usec_t at = 0, now = now_usec(CLOCK_MONOTONIC);
        if (sd_event_source_get_time(b->timer, &at) < 0)
                return USEC_INFINITY;
        return at > now ? at - now : 0;
}

/* The next poll: interval ± 10%, so nodes started together drift apart. */
static usec_t bundle_poll_delay(struct bundle *b) {
        usec_t i = b->settings->interval;
        return backoff_random_between(&b->backoff, i - i / 10, i + i / 10);
}

void bundle_refresh(struct bundle *b, const char *why) {
        if (b->fetch) {
                log_bundle_debug(b, "refresh (%s) during a sync: syncing again after it", why);
                b->again = true;
                return;
        }
        log_bundle_debug(b, "refresh (%s)", why);
        bundle_schedule(b, 0);
}

/* ---- zk-version-node ---- */

static void on_zk_changed(struct zk_trigger *t, int64_t old_version, int64_t new_version, void *userdata) {
        struct bundle *b = userdata;
        usec_t splay = b->settings->splay > 0 ? backoff_random_between(&b->backoff, 0, b->settings->splay) : 0;

        log_bundle_info(b, "zk-version-node %s changed (mzxid %" PRId64 " -> %" PRId64 "), syncing in %.1fs",
                    zk_trigger_path(t), old_version, new_version, (double) splay / USEC_PER_SEC);
        b->n_zk_triggers++;
        if (b->fetch)
                b->again = true;
        else if (!b->next_attempt || bundle_wait_left(b) > splay)
                bundle_schedule(b, splay);
}

/* Watches zk-version-node through zkreg's session once it is published (looked up again on
 * every sync, so a zkreg that comes up later, or a new session object, is picked up). */
static void bundle_ensure_watch(struct bundle *b) {
        const struct zookeeper_fact *zf;
        int r;

        if (!b->settings->zk_version_node)
                return;
        zf = manager_lookup(bundle_manager(b), FACT_ZOOKEEPER);
        if (b->zk && zk_trigger_fact(b->zk) == zf)
                return;
        /* A fact that went away took its watches with it. */
        b->zk = zk_trigger_free(b->zk, true);
        if (!zf) {
                log_bundle_debug(b, "no ZooKeeper session published (zkreg not running): polling only");
                return;
        }
        r = zk_trigger_new(zf, b->settings->zk_version_node, on_zk_changed, b, &b->zk);
        if (r < 0) {
                log_bundle_warning_errno(b, r, "cannot watch %s: %m", b->settings->zk_version_node);
                return;
        }
        log_bundle_info(b, "watching zk-version-node %s", b->settings->zk_version_node);
}

/* ---- outcomes ---- */

static void bundle_record_error(struct bundle *b, const struct fetch_outcome *o) {
        struct configsync_metrics *mt = &b->cs->metrics;
        const char *kind = fetch_error_kind_to_string(o->kind);

        free(b->last_error);
        b->last_error = strdup(o->message ? o->message : strerror(-o->error));
        b->last_error_kind = kind;
        b->last_error_time = now_usec(CLOCK_REALTIME);
        b->n_failures++;
        if (o->kind == FETCH_ERROR_CHECKSUM || o->kind == FETCH_ERROR_SIZE || o->kind == FETCH_ERROR_SIGNATURE)
                (void) metric_inc(mt->verify_fail, b->name, kind);
}

static int bundle_make_runner(struct bundle *b);
static void bundle_trigger_on_change(struct bundle *b);

/* The command's output goes to the agent's log, never to the agent's own stdout/stderr. */
static void on_run_output(struct runner *r, const char *stream, const char *line, void *userdata) {
        struct bundle *b = userdata;

        log_bundle_info(b, "on-change %s: %s", stream, line);
}

static void on_run_done(struct runner *r, const struct runner_result *res, void *userdata) {
        struct bundle *b = userdata;
        const char *result;

        b->have_run = true;
        b->last_run = *res;
        if (res->output_dropped > 0)
                log_bundle_warning(b, "on-change: output truncated: %zu more bytes past the first %u not logged",
                                   res->output_dropped, RUNNER_OUTPUT_MAX);
        if (res->spawn_error < 0) {
                result = "spawn-failed";
                log_bundle_warning(b, "on-change: cannot run %s: %s", b->on_change_argv[0], strerror(-res->spawn_error));
        } else if (res->timed_out) {
                result = "timeout";
                log_bundle_warning(b, "on-change: %s timed out after %.1fs and was killed", b->on_change_argv[0],
                               (double) b->settings->on_change_timeout / USEC_PER_SEC);
        } else if (res->exit_code == 0) {
                result = "success";
                log_bundle_info(b, "on-change: %s succeeded", b->on_change_argv[0]);
        } else {
                result = "failure";
                if (res->signal)
                        log_bundle_warning(b, "on-change: %s killed by signal %d", b->on_change_argv[0], res->signal);
                else
                        log_bundle_warning(b, "on-change: %s exited with status %d", b->on_change_argv[0], res->exit_code);
        }
        (void) metric_inc(b->cs->metrics.on_change, b->name, result);

        if (b->runner_stale) {
                /* on-change was changed by a reload while this run went on: the new command
                 * takes over now (nothing touches the old runner after this callback). */
                bool pending = runner_pending(r);
                b->runner_stale = false;
                if (bundle_make_runner(b) < 0)
                        log_bundle_warning(b, "on-change: cannot set up the new command");
                else if (pending)
                        bundle_trigger_on_change(b);
        }
}

static int env_push(char ***env, const char *key, const char *value) {
        char *s = NULL;
        if (asprintf(&s, "%s=%s", key, value) < 0)
                return -ENOMEM;
        if (strv_push(env, s) < 0) {
                free(s);
                return -ENOMEM;
        }
        return 0;
}

static void bundle_trigger_on_change(struct bundle *b) {
        _cleanup_strv_free_ char **env = NULL;

        if (!b->runner)
                return;
        if (env_push(&env, "PINION_CONFIG", b->name) < 0 || env_push(&env, "PINION_CONFIG_DIR", b->settings->dest) < 0 ||
            env_push(&env, "PINION_CONFIG_VERSION", strempty(b->version)) < 0)
                return log_bundle_warning(b, "on-change: out of memory");
        if (runner_trigger(b->runner, env) < 0)
                log_bundle_warning(b, "on-change: cannot arm its timer");
}

/* Once per published version: a manifest asking for group/other write is served anyway (the
 * config is what pods wait for), without those bits. */
static void bundle_warn_capped(struct bundle *b) {
        const struct manifest_file *first = NULL;
        size_t n = 0;

        for (size_t i = 0; b->manifest && i < b->manifest->n_files; i++)
                if (publish_mode_capped(b->manifest->files[i].mode) && n++ == 0)
                        first = &b->manifest->files[i];
        if (n > 0)
                log_bundle_warning(b, "%zu file(s) declare a group- or world-writable mode (first: %s, %04o): "
                                   "published without group/other write (at most %04o)",
                                   n, first->path, (unsigned) first->mode, (unsigned) PUBLISH_MODE_MAX);
}

/* The published manifest's serial, if it has one. */
static void bundle_take_serial(struct bundle *b, const struct manifest *m) {
        if (m && m->has_serial) {
                b->have_serial = true;
                b->serial = m->serial;
        }
}

/* A new version was published: it becomes the bundle's, its state is saved and on-change runs. */
static void bundle_take_version(struct bundle *b, struct fetch_outcome *o) {
        free(b->etag);
        b->etag = TAKE_PTR(o->etag);
        free(b->version);
        b->version = strdup(o->manifest->version); /* NULL (unknown) if out of memory: logged as such */
        free(b->version_dir);
        b->version_dir = TAKE_PTR(o->version_dir);
        memcpy(b->manifest_sha256, o->manifest_sha256, 32);
        b->have_sha = true;
        bundle_take_serial(b, o->manifest);
        b->n_files = o->manifest->n_files;
        b->size = o->manifest->total_size;
        manifest_free(b->manifest);
        b->manifest = TAKE_PTR(o->manifest);
        b->present = true;
        b->verified = true;
        b->published = now_usec(CLOCK_REALTIME);
        b->last_change = b->published;
        b->n_changes++;
        int r = bundle_state_save(b, o->manifest_text, o->manifest_size);
        if (r < 0)
                log_bundle_warning(b, "cannot save its state in %s (%s): the next start downloads it again",
                                   b->cs->state_dir, strerror(-r));
        bundle_warn_capped(b);
        log_bundle_info(b, "version %s published in %s (%zu files, %" PRIu64 " bytes; %u downloaded, %u reused; "
                    "%.3fs, of which %.3fs fsync and swap)",
                    b->version ? b->version : "(unknown)", b->settings->dest, b->n_files, b->size, o->files_downloaded, o->files_reused,
                    (double) o->total_usec / USEC_PER_SEC, (double) o->publish_usec / USEC_PER_SEC);
        if (o->files_damaged > 0)
                log_bundle_warning(b, "%u unchanged file(s) were missing or no longer matched their size, mode "
                                  "or sha256 in the published version (changed in place?) and were "
                                  "downloaded again", o->files_damaged);
        configsync_announce_pods(b->cs, b, POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync",
                                 "Config %s version %s published in %s (%zu files, %" PRIu64 " bytes)", b->name,
                                 b->version ?: "(unknown)", b->settings->dest, b->n_files, b->size);
        bundle_trigger_on_change(b);
}

static void on_fetch_done(struct fetch *f, struct fetch_outcome *o, void *userdata) {
        struct bundle *b = userdata;
        struct configsync_metrics *mt = &b->cs->metrics;
        bool was_present = b->present;
        usec_t now = now_usec(CLOCK_MONOTONIC);

        b->n_fetches++;
        b->bytes += o->bytes;
        b->attempted = true;
        (void) metric_add(mt->bytes, (double) o->bytes, b->name);
        (void) metric_inc(mt->fetches, b->name,
                          o->result == FETCH_FAILED ? fetch_error_kind_to_string(o->kind) : fetch_result_to_string(o->result));

        switch (o->result) {
        case FETCH_FAILED: {
                usec_t delay = backoff_next(&b->backoff, now, o->retry_after);
                bundle_record_error(b, o);
                bundle_set_state(b, BUNDLE_FAILING);
                log_bundle_warning(b, "sync failed (%s), keeping %s; retrying in %.1fs", b->last_error,
                               b->present ? "the current version" : "nothing (no version yet)",
                               (double) delay / USEC_PER_SEC);
                /* No retry delay in the note: the same failure again must read the same, so that
                 * it is counted on one Event rather than posted anew. */
                configsync_announce_pods(b->cs, b, POD_EVENT_WARNING, POD_EVENT_CONFIG_FAILED, "Sync",
                                         "Config %s: sync from %s failed: %s; %s%s", b->name, b->settings->url,
                                         strempty(b->last_error), b->present ? "keeping version " : "no version yet",
                                         b->present ? b->version ?: "(unknown)" : "");
                b->fetch = fetch_free(b->fetch);
                bundle_schedule(b, delay);
                b->again = false;
                configsync_bundle_changed(b->cs, b, false);
                return;
        }
        case FETCH_NOT_MODIFIED:
                /* Only asked with the ETag of a manifest checked under the current settings. */
                b->verified = true;
                b->n_not_modified++;
                (void) metric_inc(mt->not_modified, b->name);
                log_bundle_debug(b, "not modified");
                break;
        case FETCH_SAME: {
                /* The same bytes (and their signature checked, with public-key): the state file
                 * changes only if the ETag did; rewriting (and fsyncing) a manifest of up to
                 * MANIFEST_MAX_SIZE on every poll would stall the loop for nothing. */
                bool etag_changed = !streq_ptr(b->etag, o->etag);
                free(b->etag);
                b->etag = TAKE_PTR(o->etag);
                b->verified = true;
                etag_changed = etag_changed || (o->manifest && o->manifest->has_serial && !b->have_serial);
                bundle_take_serial(b, o->manifest);
                log_bundle_debug(b, "manifest unchanged%s", etag_changed ? " (new ETag)" : "");
                int r = b->version_dir && etag_changed ? bundle_state_save(b, o->manifest_text, o->manifest_size) : 0;
                if (r < 0)
                        log_bundle_warning(b, "cannot save its state in %s (%s): the next start downloads the manifest again",
                                           b->cs->state_dir, strerror(-r));
                break;
        }
        case FETCH_CHANGED:
                bundle_take_version(b, o);
                break;
        case _FETCH_RESULT_MAX:
                break;
        }

        backoff_reset(&b->backoff);
        b->last_success = now_usec(CLOCK_REALTIME);
        if (b->state == BUNDLE_FAILING)
                log_bundle_info(b, "sync works again");
        b->last_error = mfree(b->last_error);
        b->last_error_kind = NULL;
        bundle_set_state(b, BUNDLE_SYNCED);
        bool changed = o->result == FETCH_CHANGED;
        o = NULL; /* it lives in the fetch */
        b->fetch = fetch_free(b->fetch);
        if (b->again) {
                b->again = false;
                bundle_schedule(b, 0);
        } else
                bundle_schedule(b, bundle_poll_delay(b));
        configsync_bundle_changed(b->cs, b, b->present != was_present || changed);
}

static void bundle_sync(struct bundle *b) {
        struct http_client *http;
        struct fetch_params p;
        _cleanup_free_ char *current = NULL;
        int r;

        if (b->fetch)
                return;
        bundle_ensure_watch(b);

        /* What is published now decides what may be skipped: the cache describes it or goes. */
        r = atomic_dir_current(b->settings->dest, &current);
        if (r < 0 || !streq_ptr(current, b->version_dir)) {
                bool was_present = b->present;
                if (b->have_sha)
                        log_bundle_warning(b, "the published tree in %s changed behind our back, syncing from scratch",
                                       b->settings->dest);
                bundle_forget_cache(b);
                free(b->version_dir);
                b->version_dir = r >= 0 ? TAKE_PTR(current) : NULL;
                b->version = mfree(b->version);
                b->present = r >= 0;
                b->verified = false;
                if (b->present != was_present) {
                        if (b->present) {
                                log_bundle_info(b, "a version appeared in %s (not ours): present, unverified until the next sync",
                                            b->settings->dest);
                                configsync_announce_pods(b->cs, b, POD_EVENT_NORMAL, POD_EVENT_CONFIG_SYNCED, "Sync",
                                                         "Config %s present in %s (not published by pinion: "
                                                         "verified at the next sync)", b->name, b->settings->dest);
                        } else {
                                log_bundle_warning(b, "no version is published in %s any more (%s gone): not present",
                                               b->settings->dest, ATOMIC_DIR_DATA);
                                configsync_announce_pods(b->cs, b, POD_EVENT_WARNING, POD_EVENT_CONFIG_FAILED, "Sync",
                                                         "Config %s: no version is published in %s any more (%s gone); "
                                                         "syncing again", b->name, b->settings->dest, ATOMIC_DIR_DATA);
                        }
                        configsync_bundle_changed(b->cs, b, true);
                }
        }

        r = manager_http(bundle_manager(b), &http);
        if (r >= 0) {
                p = (struct fetch_params) {
                        .event = bundle_manager(b)->event,
                        .url = b->settings->url,
                        .ca_file = b->settings->ca_file,
                        .public_key = b->public_key,
                        .dest = b->settings->dest,
                        .timeout = b->settings->timeout,
                        .parallel = b->settings->parallel,
                        .keep_versions = b->settings->keep_versions,
                        .max_size = b->settings->max_size,
                        .limits = {
                                .max_depth = b->settings->max_depth,
                                .max_directories = b->settings->max_directories,
                                .max_entries = b->settings->max_entries,
                        },
                        .have_current_serial = b->have_serial,
                        .current_serial = b->serial,
                        .etag = b->present && b->have_sha ? b->etag : NULL,
                        .current_sha256 = b->present && b->have_sha ? b->manifest_sha256 : NULL,
                        .current = b->present ? b->manifest : NULL,
                        .current_dir = b->present ? b->version_dir : NULL,
                        .modes = b->modes,
                };
                r = fetch_start(http, &p, on_fetch_done, b, &b->fetch);
        }
        if (r < 0) {
                struct fetch_outcome o = { .result = FETCH_FAILED, .kind = FETCH_ERROR_OTHER, .error = r };
                bundle_record_error(b, &o);
                bundle_set_state(b, BUNDLE_FAILING);
                bundle_schedule(b, backoff_next(&b->backoff, now_usec(CLOCK_MONOTONIC), 0));
                log_bundle_warning_errno(b, r, "cannot start a sync: %m");
                configsync_announce_pods(b->cs, b, POD_EVENT_WARNING, POD_EVENT_CONFIG_FAILED, "Sync",
                                         "Config %s: cannot start a sync from %s: %s", b->name, b->settings->url,
                                         strerror(-r));
                return;
        }
        b->last_attempt = now_usec(CLOCK_REALTIME);
        bundle_set_state(b, BUNDLE_FETCHING);
}

/* ---- lifecycle ---- */

static int bundle_make_runner(struct bundle *b) {
        int r;

        b->runner = runner_free(b->runner);
        if (!b->on_change_argv)
                return 0;
        r = runner_new(bundle_manager(b)->event, b->on_change_argv, b->settings->quiescence,
                       b->settings->on_change_timeout, on_run_done, b, &b->runner);
        if (r >= 0)
                runner_set_output(b->runner, on_run_output);
        return r;
}

static void bundle_take_settings(struct bundle *b, size_t index) {
        struct configsync_settings *s = b->cs->settings;
        b->settings = s->bundles[index];
        b->public_key = s->keys[index];
        b->on_change_argv = s->argvs[index];
        publish_modes_init(&b->modes, s->gids[index], b->settings->world_readable);
        b->backoff.config = (struct backoff_config) {
                .initial = b->settings->backoff_initial,
                .max = b->settings->backoff_max,
                .factor = 2.0,
                .jitter = 1.0,
                .reset_after = 2 * USEC_PER_MINUTE,
        };
}

int bundle_new(struct configsync *cs, size_t index, struct bundle **ret) {
        struct bundle *b = calloc(1, sizeof(*b));
        struct backoff_config bc = {};

        if (!b)
                return -ENOMEM;
        b->cs = cs;
        b->name = strdup(cs->settings->bundles[index]->name);
        if (!b->name) {
                free(b);
                return -ENOMEM;
        }
        backoff_init(&b->backoff, &bc, 0);
        bundle_take_settings(b, index);
        *ret = b;
        return 0;
}

/* Takes away from the published tree what the rules do not allow (a tree left by an older agent,
 * or by other group/world-readable settings, is closed before the next sync rather than after). */
static void bundle_apply_modes(struct bundle *b) {
        _cleanup_free_ char *foreign = NULL;
        int r;

        /* A dest holding what pinion did not publish is left alone, not made root's (syncs
         * refuse it too). */
        if (stage_dest_foreign(b->settings->dest, &foreign) > 0)
                return log_bundle_warning(b, "dest %s holds \"%s\", which pinion did not publish: left as it is, "
                                          "and no sync publishes there (dest must be missing, empty, or a directory "
                                          "pinion published)", b->settings->dest, foreign);
        r = publish_modes_apply_tree(b->settings->dest, &b->modes);
        if (r == -EPERM)
                log_bundle_warning(b, "dest %s is group- or world-writable: left as it is, and no sync publishes "
                                   "there until it is fixed (chmod go-w %s)", b->settings->dest, b->settings->dest);
        else if (r < 0 && r != -ENOENT)
                log_bundle_warning_errno(b, r, "cannot apply the modes to the tree in %s: %m", b->settings->dest);
}

/* The bundle's counters whose label values are known at zero from its start, so a rate or an
 * alert has a zero to begin from. */
static void touch_series(const struct bundle *b) {
        const struct configsync_metrics *mt = &b->cs->metrics;
        static const char *const kinds[] = { "size", "checksum", "signature" };
        static const char *const results[] = { "success", "failure", "timeout", "spawn-failed" };

        (void) metric_touch(mt->bytes, b->name);
        (void) metric_touch(mt->not_modified, b->name);
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                (void) metric_touch(mt->verify_fail, b->name, kinds[i]);
        if (b->settings->on_change)
                for (size_t i = 0; i < ELEMENTSOF(results); i++)
                        (void) metric_touch(mt->on_change, b->name, results[i]);
}

int bundle_start(struct bundle *b) {
        const char *dest = b->settings->dest;
        _cleanup_free_ char *current = NULL;
        int r;

        touch_series(b);

        r = bundle_state_check_version(b);
        if (r < 0)
                return r;
        r = atomic_dir_cleanup(dest);
        if (r > 0)
                log_bundle_info(b, "removed %d leftover(s) of an interrupted sync in %s", r, dest);
        else if (r < 0 && r != -ENOENT)
                log_bundle_warning_errno(b, r, "cannot clean up %s: %m", dest);

        bundle_apply_modes(b);
        if (atomic_dir_current(dest, &current) >= 0) {
                struct stat st;
                _cleanup_free_ char *p = fs_path_join(dest, ATOMIC_DIR_DATA);
                b->present = true;
                b->version_dir = TAKE_PTR(current);
                if (p && lstat(p, &st) >= 0)
                        b->published = (usec_t) st.st_mtim.tv_sec * USEC_PER_SEC + (usec_t) st.st_mtim.tv_nsec / 1000;
                bundle_state_load(b);
                log_bundle_info(b, "found version %s in %s (last known good)", b->version ? b->version : b->version_dir, dest);
        }

        r = sd_event_add_time_relative(bundle_manager(b)->event, &b->timer, CLOCK_MONOTONIC, 0, 0, on_timer, b);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(b->timer, "configsync-bundle");
        r = bundle_make_runner(b);
        if (r < 0)
                return r;
        bundle_schedule(b, 0);
        return 0;
}

int bundle_update(struct bundle *b, size_t index) {
        struct bundle_settings *old = b->settings;
        EVP_PKEY *old_key = b->public_key;
        char **old_argv = b->on_change_argv;
        struct publish_modes old_modes = b->modes;
        bool source_changed, runner_changed, modes_changed;
        int r = 0;

        /* The old settings are still alive: the caller frees them after every bundle moved. */
        bundle_take_settings(b, index);
        struct bundle_settings *s = b->settings;
        source_changed = !streq(old->url, s->url) || !streq(old->dest, s->dest) ||
                         !streq_ptr(old->ca_file, s->ca_file) || !streq_ptr(old->public_key, s->public_key) ||
                         (old_key && b->public_key && EVP_PKEY_eq(old_key, b->public_key) != 1);
        modes_changed = !publish_modes_equal(&old_modes, &b->modes);
        runner_changed = !strv_equal(old_argv, b->on_change_argv) || old->quiescence != s->quiescence ||
                         old->on_change_timeout != s->on_change_timeout;
        if (modes_changed && !source_changed) {
                /* What must go goes now; what is added comes with a full download (hard links
                 * would share the old inodes' modes with the versions kept). */
                log_bundle_info(b, "group or world-readable changed: applying it now, the next sync is a full one");
                b->fetch = fetch_free(b->fetch);
                bundle_forget_cache(b);
                bundle_apply_modes(b);
        }
        if (source_changed) {
                /* What is published stays (last known good) until the new source delivers; only
                 * what let us skip work (ETag, manifest for 304s and hard links) is dropped. */
                log_bundle_info(b, "source changed: the next sync is a full one");
                b->fetch = fetch_free(b->fetch);
                bundle_forget_cache(b);
                if (!streq(old->url, s->url))
                        b->have_serial = false; /* another source, its own serials */
                b->verified = false;
                backoff_reset(&b->backoff);
        }
        if (!streq_ptr(old->zk_version_node, s->zk_version_node))
                bundle_unwatch(b);
        if (runner_changed && !runner_running(b->runner)) {
                /* Idle, but maybe in its quiescence window: the pending run goes to the new
                 * runner (with a fresh window), it is not lost. */
                bool pending = runner_pending(b->runner);
                r = bundle_make_runner(b);
                if (r >= 0 && pending && b->runner) {
                        log_bundle_info(b, "on-change changed while a run was pending: the new command runs instead");
                        bundle_trigger_on_change(b);
                } else if (r >= 0 && pending)
                        log_bundle_info(b, "on-change removed while a run was pending: nothing runs");
        } else if (runner_changed) {
                log_bundle_info(b, "on-change changed while the old command runs: the new one takes over when it ends");
                b->runner_stale = true;
        }
        return r;
}

static cJSON *run_to_json(const struct bundle *b) {
        cJSON *o = cJSON_CreateObject();
        if (!o)
                return NULL;
        cJSON_AddBoolToObject(o, "running", runner_running(b->runner));
        cJSON_AddBoolToObject(o, "pending", runner_pending(b->runner));
        cJSON_AddNumberToObject(o, "runs", runner_runs(b->runner));
        if (b->have_run) {
                json_add_time(o, "last_started", b->last_run.started);
                json_add_time(o, "last_finished", b->last_run.finished);
                if (b->last_run.spawn_error < 0)
                        cJSON_AddStringToObject(o, "last_error", strerror(-b->last_run.spawn_error));
                if (b->last_run.exit_code >= 0)
                        cJSON_AddNumberToObject(o, "last_exit_status", b->last_run.exit_code);
                else
                        cJSON_AddNullToObject(o, "last_exit_status");
                if (b->last_run.signal)
                        cJSON_AddNumberToObject(o, "last_signal", b->last_run.signal);
                cJSON_AddBoolToObject(o, "last_timed_out", b->last_run.timed_out);
        }
        return o;
}

cJSON *bundle_to_json(const struct bundle *b) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        char sha[65];

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "name", b->name);
        cJSON_AddStringToObject(o, "state", bundle_state_to_string(b->state));
        cJSON_AddBoolToObject(o, "present", b->present);
        json_add_string_or_null(o, "version", b->version);
        json_add_string_or_null(o, "version_dir", b->version_dir);
        /* Shown to operators and to the pods that declare the config: never the password a URL's
         * userinfo may carry (curl sends it as basic auth). */
        _cleanup_free_ char *url = NULL;
        (void) manifest_url_redacted(b->settings->url, &url);
        cJSON_AddItemToObject(o, "url", url ? cJSON_CreateString(url) : cJSON_CreateNull());
        cJSON_AddStringToObject(o, "dest", b->settings->dest);
        cJSON_AddBoolToObject(o, "signed", b->public_key != NULL);
        /* The published tree was checked (manifest, signature with public-key, every file) under
         * the current settings; false for a tree found at start without a matching state file or
         * kept across a change of url/dest/ca-file/public-key until the next good sync. */
        cJSON_AddBoolToObject(o, "verified", b->present && b->verified);
        json_add_time(o, "published", b->published);
        if (b->present && b->published)
                cJSON_AddNumberToObject(o, "age_seconds",
                                        (double) (now_usec(CLOCK_REALTIME) - MIN(b->published, now_usec(CLOCK_REALTIME))) / USEC_PER_SEC);
        else
                cJSON_AddNullToObject(o, "age_seconds");
        cJSON_AddNumberToObject(o, "files", (double) b->n_files);
        if (b->have_serial)
                cJSON_AddNumberToObject(o, "serial", (double) b->serial);
        cJSON_AddNumberToObject(o, "size", (double) b->size);
        if (b->have_sha) {
                sha256_to_hex(b->manifest_sha256, sha);
                cJSON_AddStringToObject(o, "manifest_sha256", sha);
        } else
                cJSON_AddNullToObject(o, "manifest_sha256");
        json_add_string_or_null(o, "etag", b->etag);
        json_add_time(o, "last_attempt", b->last_attempt);
        json_add_time(o, "last_success", b->last_success);
        json_add_time(o, "last_change", b->last_change);
        json_add_time(o, "next_attempt", b->next_attempt);
        json_add_string_or_null(o, "last_error", b->last_error);
        json_add_string_or_null(o, "last_error_kind", b->last_error_kind);
        json_add_time(o, "last_error_time", b->last_error_time);
        cJSON_AddNumberToObject(o, "fetches", b->n_fetches);
        cJSON_AddNumberToObject(o, "failures", b->n_failures);
        cJSON_AddNumberToObject(o, "not_modified", b->n_not_modified);
        cJSON_AddNumberToObject(o, "changes", b->n_changes);
        cJSON_AddNumberToObject(o, "bytes", (double) b->bytes);
        if (b->settings->zk_version_node) {
                cJSON *z = cJSON_AddObjectToObject(o, "zk_version_node");
                if (z) {
                        cJSON_AddStringToObject(z, "path", b->settings->zk_version_node);
                        int64_t v;
                        cJSON_AddBoolToObject(z, "watching", b->zk != NULL);
                        if (zk_trigger_version(b->zk, &v))
                                cJSON_AddNumberToObject(z, "mzxid", (double) v);
                        else
                                cJSON_AddNullToObject(z, "mzxid");
                        cJSON_AddNumberToObject(z, "triggers", b->n_zk_triggers);
                        if (zk_trigger_error(b->zk) < 0)
                                cJSON_AddStringToObject(z, "error", strerror(-zk_trigger_error(b->zk)));
                }
        }
        if (b->settings->on_change) {
                cJSON *r = run_to_json(b);
                if (r)
                        cJSON_AddItemToObject(o, "on_change", r);
        }
        return TAKE_PTR(o);
}
