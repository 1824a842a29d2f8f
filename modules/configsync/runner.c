/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "fs.h"
#include "runner.h"
#include "strv.h"

extern char **environ;

struct runner {
        sd_event *event;
        char **argv;
        char **env; /* from the latest trigger */
        usec_t quiescence, timeout;
        runner_done_fn done;
        void *userdata;

        sd_event_source *quiet_timer;
        sd_event_source *child;
        sd_event_source *kill_timer;
        pid_t pid;
        bool pending;   /* triggered while running: run again afterwards */
        bool triggered; /* the quiescence timer is armed */
        bool term_sent;
        unsigned runs;
        struct runner_result current;
};

int runner_split_command(const char *s, char ***ret, const char **ret_reason) {
        _cleanup_strv_free_ char **argv = NULL;
        _cleanup_free_ char *word = NULL;
        size_t n = 0;
        bool in_word = false;
        int r;

        word = malloc(strlen(s) + 1);
        if (!word)
                return -ENOMEM;
        for (const char *p = s;; p++) {
                char c = *p;
                if (c == 0 || c == ' ' || c == '\t' || c == '\n') {
                        if (in_word) {
                                word[n] = 0;
                                r = strv_extend(&argv, word);
                                if (r < 0)
                                        return r;
                                n = 0;
                                in_word = false;
                        }
                        if (c == 0)
                                break;
                        continue;
                }
                in_word = true;
                if (c == '\'') {
                        const char *end = strchr(p + 1, '\'');
                        if (!end) {
                                *ret_reason = "unterminated ' quote";
                                return -EINVAL;
                        }
                        memcpy(word + n, p + 1, (size_t) (end - p - 1));
                        n += (size_t) (end - p - 1);
                        p = end;
                } else if (c == '"') {
                        for (p++;; p++) {
                                if (*p == 0) {
                                        *ret_reason = "unterminated \" quote";
                                        return -EINVAL;
                                }
                                if (*p == '"')
                                        break;
                                if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
                                        p++;
                                word[n++] = *p;
                        }
                } else if (c == '\\') {
                        if (p[1] == 0) {
                                *ret_reason = "trailing backslash";
                                return -EINVAL;
                        }
                        word[n++] = *++p;
                } else
                        word[n++] = c;
        }
        if (strv_length(argv) == 0) {
                *ret_reason = "no command";
                return -EINVAL;
        }
        *ret = TAKE_PTR(argv);
        return 0;
}

static void runner_kill_sources(struct runner *r) {
        r->kill_timer = sd_event_source_disable_unref(r->kill_timer);
        /* The source owns the process (set_child_process_own): unref kills and reaps it. */
        r->child = sd_event_source_disable_unref(r->child);
        r->pid = 0;
}

struct runner *runner_free(struct runner *r) {
        if (!r)
                return NULL;
        runner_kill_sources(r);
        r->quiet_timer = sd_event_source_disable_unref(r->quiet_timer);
        strv_free(r->argv);
        strv_free(r->env);
        sd_event_unref(r->event);
        free(r);
        return NULL;
}

static int runner_arm(struct runner *r) {
        int k;

        r->triggered = true;
        k = sd_event_source_set_time_relative(r->quiet_timer, r->quiescence);
        if (k >= 0)
                k = sd_event_source_set_enabled(r->quiet_timer, SD_EVENT_ONESHOT);
        return MIN(k, 0);
}

static void runner_finished(struct runner *r) {
        struct runner_result res = r->current;

        res.finished = now_usec(CLOCK_REALTIME);
        runner_kill_sources(r);
        r->runs++;
        if (r->pending) {
                r->pending = false;
                (void) runner_arm(r);
        }
        r->done(r, &res, r->userdata);
}

static int on_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        struct runner *r = userdata;

        if (si->si_code == CLD_EXITED) {
                r->current.exit_code = si->si_status;
                r->current.signal = 0;
        } else {
                r->current.exit_code = -1;
                r->current.signal = si->si_status;
        }
        /* It has been reaped: nothing left for the source to kill. */
        (void) sd_event_source_set_child_process_own(s, false);
        runner_finished(r);
        return 0;
}

static int on_kill_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct runner *r = userdata;

        if (!r->child)
                return 0;
        r->current.timed_out = true;
        if (!r->term_sent) {
                r->term_sent = true;
                (void) sd_event_source_send_child_signal(r->child, SIGTERM, NULL, 0);
                (void) sd_event_source_set_time_relative(s, RUNNER_KILL_GRACE);
                return sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        }
        (void) sd_event_source_send_child_signal(r->child, SIGKILL, NULL, 0);
        return 0;
}

static int runner_spawn(struct runner *r) {
        _cleanup_strv_free_ char **env = NULL;
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t attr;
        sigset_t none, all;
        pid_t pid;
        int r2;

        for (char **e = environ; e && *e; e++) {
                if (startswith(*e, "PINION_CONFIG") || startswith(*e, "NOTIFY_SOCKET=") ||
                    startswith(*e, "WATCHDOG_") || startswith(*e, "LISTEN_"))
                        continue;
                if (strv_extend(&env, *e) < 0)
                        return -ENOMEM;
        }
        STRV_FOREACH(e, r->env)
                if (strv_extend(&env, *e) < 0)
                        return -ENOMEM;

        sigemptyset(&none);
        sigfillset(&all);
        posix_spawnattr_init(&attr);
        posix_spawn_file_actions_init(&fa);
        (void) posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
        (void) posix_spawnattr_setsigmask(&attr, &none);
        (void) posix_spawnattr_setsigdefault(&attr, &all);
        (void) posix_spawnattr_setpgroup(&attr, 0);
        (void) posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        /* The command gets the usual umask 0022 (posix_spawn has no attribute for it; the loop's
         * thread is the only one that creates files but for identity's issuing thread, which sets
         * every mode it wants with fchmod()), not the service's UMask=0077: a script that
         * renders files for a workload makes them readable as it would from a shell. */
        mode_t umask_was = umask(0022);
        r2 = posix_spawnp(&pid, r->argv[0], &fa, &attr, r->argv, env ? env : (char *[]) { NULL });
        (void) umask(umask_was);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        if (r2 != 0)
                return -r2;

        r->pid = pid;
        r2 = sd_event_add_child(r->event, &r->child, pid, WEXITED, on_child, r);
        if (r2 < 0) {
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                r->pid = 0;
                return r2;
        }
        (void) sd_event_source_set_child_process_own(r->child, true);
        if (r->timeout > 0) {
                r2 = sd_event_add_time_relative(r->event, &r->kill_timer, CLOCK_MONOTONIC, r->timeout, 0,
                                                on_kill_timer, r);
                if (r2 < 0)
                        return r2; /* the child is owned by its source and will be reaped */
        }
        return 0;
}

static int on_quiet(sd_event_source *s, uint64_t usec, void *userdata) {
        struct runner *r = userdata;
        int k;

        r->triggered = false;
        if (r->child) {
                r->pending = true;
                return 0;
        }
        r->term_sent = false;
        r->current = (struct runner_result) { .started = now_usec(CLOCK_REALTIME), .exit_code = -1 };
        k = runner_spawn(r);
        if (k < 0) {
                r->current.spawn_error = k;
                if (!r->child)
                        runner_finished(r);
        }
        return 0;
}

int runner_new(sd_event *e, char **argv, usec_t quiescence, usec_t timeout, runner_done_fn done, void *userdata,
               struct runner **ret) {
        _cleanup_(runner_freep) struct runner *r = NULL;
        int k;

        if (!e || strv_length(argv) == 0 || !done)
                return -EINVAL;
        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->event = sd_event_ref(e);
        r->quiescence = quiescence;
        r->timeout = timeout;
        r->done = done;
        r->userdata = userdata;
        k = strv_copy(argv, &r->argv);
        if (k < 0)
                return k;
        k = sd_event_add_time_relative(e, &r->quiet_timer, CLOCK_MONOTONIC, quiescence, 0, on_quiet, r);
        if (k < 0)
                return k;
        (void) sd_event_source_set_enabled(r->quiet_timer, SD_EVENT_OFF);
        *ret = TAKE_PTR(r);
        return 0;
}

int runner_trigger(struct runner *r, char *const *env) {
        char **copy = NULL;
        int k;

        k = strv_copy(env, &copy);
        if (k < 0)
                return k;
        strv_free(r->env);
        r->env = copy;
        return runner_arm(r);
}

bool runner_running(const struct runner *r) {
        return r && r->child;
}

bool runner_pending(const struct runner *r) {
        return r && (r->pending || r->triggered);
}

unsigned runner_runs(const struct runner *r) {
        return r ? r->runs : 0;
}
