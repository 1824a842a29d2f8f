/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fs.h"
#include "runner.h"
#include "strv.h"

extern char **environ;

enum { STREAM_STDOUT, STREAM_STDERR, _STREAM_MAX };
static const char *const stream_names[_STREAM_MAX] = { "stdout", "stderr" };

/* The read end of one of the command's output pipes and the line being gathered. */
struct runner_stream {
        sd_event_source *source; /* owns the fd */
        size_t len;
        char line[RUNNER_LINE_MAX + 1];
};

/* Enough to drain what a command that has exited left in its pipe (64 KiB by default), bounded
 * for a process it left behind that keeps writing. */
#define RUNNER_DRAIN_MAX (1024U * 1024)

struct runner {
        sd_event *event;
        char **argv;
        char **env; /* from the latest trigger */
        usec_t quiescence, timeout;
        runner_done_fn done;
        runner_output_fn output;
        void *userdata;
        struct runner_stream streams[_STREAM_MAX];
        size_t output_used; /* of this run's RUNNER_OUTPUT_MAX */

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

static void stream_emit(struct runner *r, size_t i) {
        struct runner_stream *s = &r->streams[i];

        if (s->len == 0)
                return;
        s->line[s->len] = 0;
        s->len = 0;
        if (r->output)
                r->output(r, stream_names[i], s->line, r->userdata);
}

/* Splits bytes into lines within the run's budget; past it they are only counted. */
static void stream_take(struct runner *r, size_t i, const char *p, size_t n) {
        struct runner_stream *s = &r->streams[i];
        size_t k;

        for (k = 0; k < n && r->output_used < RUNNER_OUTPUT_MAX; k++) {
                unsigned char c = (unsigned char) p[k];

                r->output_used++;
                if (c == '\n') {
                        stream_emit(r, i);
                        continue;
                }
                if (c == '\r')
                        continue;
                /* A log line holds text: no terminal escapes, no NUL cutting it short. */
                s->line[s->len++] = (c < 0x20 && c != '\t') || c == 0x7f ? '?' : (char) c;
                if (s->len == RUNNER_LINE_MAX)
                        stream_emit(r, i);
        }
        if (k < n) {
                stream_emit(r, i);
                r->current.output_dropped += n - k;
        }
}

static void stream_close(struct runner *r, size_t i) {
        stream_emit(r, i);
        r->streams[i].source = sd_event_source_disable_unref(r->streams[i].source);
}

/* Reads what the pipe holds, at most max bytes; at its end (every writer gone) or on an error
 * the stream is closed. */
static void stream_read(struct runner *r, size_t i, size_t max) {
        char buf[4096];

        for (size_t total = 0; r->streams[i].source && total < max;) {
                ssize_t n = read(sd_event_source_get_io_fd(r->streams[i].source), buf, sizeof(buf));
                if (n > 0) {
                        stream_take(r, i, buf, (size_t) n);
                        total += (size_t) n;
                } else if (n < 0 && errno == EINTR)
                        continue;
                else if (n < 0 && errno == EAGAIN)
                        return;
                else
                        stream_close(r, i);
        }
}

static int on_output(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct runner *r = userdata;

        for (size_t i = 0; i < _STREAM_MAX; i++)
                if (r->streams[i].source == s)
                        stream_read(r, i, 64 * 1024);
        return 0;
}

/* The pipes of a new run; write_fds[i] become the command's fd 1 and 2 (the parent closes them
 * once it is spawned). A process the previous run left holding its pipes loses them here. */
static int streams_open(struct runner *r, posix_spawn_file_actions_t *fa, int write_fds[static _STREAM_MAX]) {
        int k;

        r->output_used = 0;
        for (size_t i = 0; i < _STREAM_MAX; i++) {
                int p[2];

                stream_close(r, i);
                if (pipe2(p, O_CLOEXEC) < 0)
                        return -errno;
                write_fds[i] = p[1];
                /* Only our end: the command writes to a blocking pipe, as to a terminal. */
                if (fcntl(p[0], F_SETFL, O_NONBLOCK) < 0) {
                        k = -errno;
                        (void) close(p[0]);
                        return k;
                }
                k = sd_event_add_io(r->event, &r->streams[i].source, p[0], EPOLLIN, on_output, r);
                if (k < 0) {
                        (void) close(p[0]);
                        return k;
                }
                (void) sd_event_source_set_io_fd_own(r->streams[i].source, true);
                k = posix_spawn_file_actions_adddup2(fa, p[1], STDOUT_FILENO + (int) i);
                if (k != 0)
                        return -k;
        }
        return 0;
}

void runner_set_output(struct runner *r, runner_output_fn output) {
        r->output = output;
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
        /* Whoever owns the handler's userdata may be half gone: nothing more is handed over. */
        r->output = NULL;
        for (size_t i = 0; i < _STREAM_MAX; i++)
                stream_close(r, i);
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
        /* What it wrote is in the pipes: its lines come before its result. A pipe still held
         * by a process it left behind stays open until that lets go or the next run starts. */
        for (size_t i = 0; i < _STREAM_MAX; i++)
                stream_read(r, i, RUNNER_DRAIN_MAX);
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
        int write_fds[_STREAM_MAX] = { -1, -1 };
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
        r2 = streams_open(r, &fa, write_fds);
        if (r2 < 0) {
                for (size_t i = 0; i < _STREAM_MAX; i++) {
                        safe_close(write_fds[i]);
                        stream_close(r, i);
                }
                posix_spawn_file_actions_destroy(&fa);
                posix_spawnattr_destroy(&attr);
                return r2;
        }
        /* The command gets the usual umask 0022 (posix_spawn has no attribute for it; the loop's
         * thread is the only one that creates files but for identity's issuing thread, which sets
         * every mode it wants with fchmod()), not the service's UMask=0077: a script that
         * renders files for a workload makes them readable as it would from a shell. */
        mode_t umask_was = umask(0022);
        r2 = posix_spawnp(&pid, r->argv[0], &fa, &attr, r->argv, env ? env : (char *[]) { NULL });
        (void) umask(umask_was);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&attr);
        for (size_t i = 0; i < _STREAM_MAX; i++)
                safe_close(write_fds[i]);
        if (r2 != 0) {
                for (size_t i = 0; i < _STREAM_MAX; i++)
                        stream_close(r, i);
                return -r2;
        }

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
