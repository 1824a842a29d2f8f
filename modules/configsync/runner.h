/* SPDX-License-Identifier: MIT */
#pragma once

/* The on-change command: run after a new version is published, at most once per burst of
 * changes. runner_trigger() (re)arms a quiescence timer; when it fires the command runs (no
 * shell: argv from runner_split_command()), watched by sd_event_add_child; past the timeout it gets
 * SIGTERM, then SIGKILL after RUNNER_KILL_GRACE. A trigger while it runs makes it run once more
 * after it exits (after another quiescence window).
 *
 * Its stdout and stderr are pipes the runner reads, never the agent's own: each line goes to the
 * output handler (the caller logs it), at most RUNNER_OUTPUT_MAX bytes per run so a chatty command
 * cannot flood the log; the rest is read and dropped (counted in output_dropped), never left to
 * block the command. A line longer than RUNNER_LINE_MAX is handed over in pieces. */

#include <stdbool.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "macro.h"

#define RUNNER_KILL_GRACE (5 * USEC_PER_SEC)
#define RUNNER_OUTPUT_MAX (16U * 1024)
#define RUNNER_LINE_MAX 1024U

/* Splits a command line into argv without a shell. Words are separated by blanks; inside
 * '...' everything is literal; inside "..." a backslash escapes only '"' and '\'; outside quotes
 * a backslash makes the next character literal. No variables, globs, pipes or redirections.
 * -EINVAL with *ret_reason for an unterminated quote, a trailing backslash or no words. */
int runner_split_command(const char *s, char ***ret, const char **ret_reason);

struct runner_result {
        usec_t started;   /* CLOCK_REALTIME */
        usec_t finished;  /* CLOCK_REALTIME */
        int exit_code;    /* -1 if killed by a signal or not started */
        int signal;       /* the signal that ended it, 0 if none */
        bool timed_out;
        int spawn_error;  /* negative errno if it could not be started */
        size_t output_dropped; /* bytes of output past RUNNER_OUTPUT_MAX, read and not handed over */
};

struct runner;
typedef void (*runner_done_fn)(struct runner *r, const struct runner_result *res, void *userdata);
/* One line of the command's output, without its newline; control characters are replaced by
 * '?'. All of a run's output that the command wrote before it exited comes before done. */
typedef void (*runner_output_fn)(struct runner *r, const char *stream, const char *line, void *userdata);

int runner_new(sd_event *e, char **argv, usec_t quiescence, usec_t timeout, runner_done_fn done, void *userdata,
               struct runner **ret);
/* Where output lines go (userdata is runner_new's); without a handler they are dropped. */
void runner_set_output(struct runner *r, runner_output_fn output);
/* Kills a running command (SIGKILL through the event source that owns it). */
struct runner *runner_free(struct runner *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct runner *, runner_free);

/* A new version is out; env (NULL-terminated "K=V", may be NULL) is added to the command's
 * environment for the next run (the latest trigger's env wins). */
int runner_trigger(struct runner *r, char *const *env);
bool runner_running(const struct runner *r);
bool runner_pending(const struct runner *r);
unsigned runner_runs(const struct runner *r);
