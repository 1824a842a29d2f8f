/* SPDX-License-Identifier: MIT */
/* The on-change runner: argv splitting without a shell, one run per burst of triggers, a
 * trigger during a run gives exactly one more run, exit status and timeout recorded, output
 * handed over line by line and bounded per run. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "runner.h"
#include "strv.h"

static void expect_split(const char *s, const char *const *want) {
        char **argv = NULL;
        const char *reason = NULL;

        assert_int_equal(runner_split_command(s, &argv, &reason), 0);
        assert_int_equal(strv_length(argv), strv_length((char *const *) want));
        for (size_t i = 0; want[i]; i++)
                assert_string_equal(argv[i], want[i]);
        strv_free(argv);
}

static void test_split(_unused_ void **state) {
        const char *reason = NULL;
        char **argv = NULL;

        expect_split("systemctl reload nginx", (const char *const[]) { "systemctl", "reload", "nginx", NULL });
        expect_split("  a\t b  ", (const char *const[]) { "a", "b", NULL });
        expect_split("/bin/x 'one arg' \"two \\\"q\\\" \\\\ \\n\"", (const char *const[]) { "/bin/x", "one arg", "two \"q\" \\ \\n", NULL });
        expect_split("a\\ b c'd'\"e\"", (const char *const[]) { "a b", "cde", NULL });
        expect_split("'' x", (const char *const[]) { "", "x", NULL });
        expect_split("echo $HOME *; rm", (const char *const[]) { "echo", "$HOME", "*;", "rm", NULL });
        assert_int_equal(runner_split_command("a 'b", &argv, &reason), -EINVAL);
        assert_string_equal(reason, "unterminated ' quote");
        assert_int_equal(runner_split_command("a \"b", &argv, &reason), -EINVAL);
        assert_int_equal(runner_split_command("a\\", &argv, &reason), -EINVAL);
        assert_string_equal(reason, "trailing backslash");
        assert_int_equal(runner_split_command("   ", &argv, &reason), -EINVAL);
        assert_string_equal(reason, "no command");
        assert_null(argv);
}

struct ctx {
        unsigned done;
        struct runner_result last;
        unsigned lines, lines_before_done;
        size_t bytes, longest;
        char first[2][64]; /* the first line of stdout, of stderr */
        char last_stdout[64];
        char stdout_lines[256]; /* the first few, joined with '|' */
};

static void on_done(struct runner *r, const struct runner_result *res, void *userdata) {
        struct ctx *c = userdata;
        c->done++;
        c->last = *res;
        c->lines_before_done = c->lines;
}

static void on_output(struct runner *r, const char *stream, const char *line, void *userdata) {
        struct ctx *c = userdata;
        size_t i = strcmp(stream, "stderr") == 0;

        assert_true(strcmp(stream, "stdout") == 0 || i == 1);
        c->lines++;
        c->bytes += strlen(line);
        c->longest = MAX(c->longest, strlen(line));
        if (!c->first[i][0])
                snprintf(c->first[i], sizeof(c->first[i]), "%s", line);
        if (i == 0) {
                size_t n = strlen(c->stdout_lines);
                snprintf(c->last_stdout, sizeof(c->last_stdout), "%s", line);
                snprintf(c->stdout_lines + n, sizeof(c->stdout_lines) - n, "%s%s", n ? "|" : "", line);
        }
}

static void run_for(sd_event *e, usec_t usec) {
        usec_t end = now_usec(CLOCK_MONOTONIC) + usec;
        while (now_usec(CLOCK_MONOTONIC) < end)
                assert_true(sd_event_run(e, 20 * USEC_PER_MSEC) >= 0);
}

static unsigned count_lines(const char *path) {
        FILE *f = fopen(path, "re");
        unsigned n = 0;
        int ch;
        if (!f)
                return 0;
        while ((ch = fgetc(f)) != EOF)
                n += ch == '\n';
        fclose(f);
        return n;
}

static void test_burst(_unused_ void **state) {
        char dir[] = "/tmp/test-runner-XXXXXX", log[128], cmd[300];
        char **argv = NULL;
        const char *reason;
        sd_event *e = NULL;
        struct runner *r = NULL;
        struct ctx c = {};

        assert_non_null(mkdtemp(dir));
        snprintf(log, sizeof(log), "%s/log", dir);
        snprintf(cmd, sizeof(cmd), "/bin/sh -c 'echo \"$PINION_CONFIG_VERSION\" >> %s; sleep 0.3; exit 3'", log);
        assert_int_equal(runner_split_command(cmd, &argv, &reason), 0);
        assert_true(sd_event_default(&e) >= 0);
        assert_int_equal(runner_new(e, argv, 150 * USEC_PER_MSEC, 10 * USEC_PER_SEC, on_done, &c, &r), 0);

        /* A burst: five triggers 20ms apart → one run, with the last trigger's env. */
        for (int i = 0; i < 5; i++) {
                char v[64];
                snprintf(v, sizeof(v), "PINION_CONFIG_VERSION=v%d", i);
                assert_int_equal(runner_trigger(r, (char *const[]) { v, NULL }), 0);
                run_for(e, 20 * USEC_PER_MSEC);
        }
        assert_true(runner_pending(r));
        run_for(e, 300 * USEC_PER_MSEC);
        assert_true(runner_running(r));
        /* Triggers during the run: exactly one more run after it. */
        assert_int_equal(runner_trigger(r, (char *const[]) { (char *) "PINION_CONFIG_VERSION=w1", NULL }), 0);
        assert_int_equal(runner_trigger(r, (char *const[]) { (char *) "PINION_CONFIG_VERSION=w2", NULL }), 0);
        run_for(e, 1500 * USEC_PER_MSEC);
        assert_int_equal(c.done, 2);
        assert_int_equal(runner_runs(r), 2);
        assert_int_equal(c.last.exit_code, 3);
        assert_false(c.last.timed_out);
        assert_int_equal(count_lines(log), 2);
        FILE *f = fopen(log, "re");
        char line1[32], line2[32];
        assert_non_null(fgets(line1, sizeof(line1), f));
        assert_non_null(fgets(line2, sizeof(line2), f));
        fclose(f);
        assert_string_equal(line1, "v4\n");
        assert_string_equal(line2, "w2\n");
        assert_false(runner_pending(r));

        runner_free(r);
        strv_free(argv);
        unlink(log);
        rmdir(dir);
        sd_event_unref(e);
}

static void test_timeout_and_spawn_error(_unused_ void **state) {
        sd_event *e = NULL;
        struct runner *r = NULL;
        struct ctx c = {};

        assert_true(sd_event_default(&e) >= 0);
        assert_int_equal(runner_new(e, (char *[]) { (char *) "sleep", (char *) "30", NULL }, 10 * USEC_PER_MSEC,
                                    200 * USEC_PER_MSEC, on_done, &c, &r), 0);
        assert_int_equal(runner_trigger(r, NULL), 0);
        run_for(e, 800 * USEC_PER_MSEC);
        assert_int_equal(c.done, 1);
        assert_true(c.last.timed_out);
        assert_int_equal(c.last.signal, SIGTERM);
        assert_int_equal(c.last.exit_code, -1);
        r = runner_free(r);

        c = (struct ctx) {};
        assert_int_equal(runner_new(e, (char *[]) { (char *) "/nonexistent/hook", NULL }, 10 * USEC_PER_MSEC, 0,
                                    on_done, &c, &r), 0);
        assert_int_equal(runner_trigger(r, NULL), 0);
        run_for(e, 200 * USEC_PER_MSEC);
        assert_int_equal(c.done, 1);
        assert_int_equal(c.last.spawn_error, -ENOENT);

        /* Freed while the command runs: it is killed and reaped, nothing leaks. */
        r = runner_free(r);
        assert_int_equal(runner_new(e, (char *[]) { (char *) "sleep", (char *) "30", NULL }, 0, 0, on_done, &c, &r), 0);
        assert_int_equal(runner_trigger(r, NULL), 0);
        run_for(e, 100 * USEC_PER_MSEC);
        assert_true(runner_running(r));
        runner_free(r);
        sd_event_unref(e);
}

static void run_with_output(const char *script, struct ctx *c) {
        sd_event *e = NULL;
        struct runner *r = NULL;

        assert_true(sd_event_default(&e) >= 0);
        assert_int_equal(runner_new(e, (char *[]) { (char *) "/bin/sh", (char *) "-c", (char *) script, NULL },
                                    10 * USEC_PER_MSEC, 10 * USEC_PER_SEC, on_done, c, &r), 0);
        runner_set_output(r, on_output);
        assert_int_equal(runner_trigger(r, NULL), 0);
        for (int i = 0; i < 500 && c->done == 0; i++)
                assert_true(sd_event_run(e, 20 * USEC_PER_MSEC) >= 0);
        assert_int_equal(c->done, 1);
        runner_free(r);
        sd_event_unref(e);
}

static void test_output_lines(_unused_ void **state) {
        struct ctx c = {};

        /* Both streams, a control character, a last line without its newline: all handed over
         * before the result. */
        run_with_output("echo 'to stdout'; echo 'to stderr' >&2; printf 'tab\there esc\033[1m\r\n'; printf partial",
                        &c);
        assert_int_equal(c.last.exit_code, 0);
        assert_string_equal(c.first[0], "to stdout");
        assert_string_equal(c.first[1], "to stderr");
        assert_string_equal(c.last_stdout, "partial");
        assert_string_equal(c.stdout_lines, "to stdout|tab\there esc?[1m|partial");
        assert_int_equal(c.lines, 4);
        assert_int_equal(c.lines_before_done, 4);
        assert_int_equal(c.last.output_dropped, 0);
}

static void test_output_bounded(_unused_ void **state) {
        struct ctx c = {};

        /* seq 200000: 1,288,895 bytes. The first RUNNER_OUTPUT_MAX are handed over, the rest is
         * read (the command is not blocked on a full pipe) and counted. */
        run_with_output("seq 200000; exit 7", &c);
        assert_int_equal(c.last.exit_code, 7);
        assert_string_equal(c.first[0], "1");
        assert_true(c.bytes + c.lines <= RUNNER_OUTPUT_MAX + 1);
        assert_true(c.bytes + c.lines >= RUNNER_OUTPUT_MAX - 16);
        assert_int_equal(c.last.output_dropped + RUNNER_OUTPUT_MAX, 1288895);

        /* A line longer than RUNNER_LINE_MAX comes in pieces of at most that. */
        struct ctx l = {};
        run_with_output("head -c 3000 /dev/zero | tr '\\0' x", &l);
        assert_int_equal(l.longest, RUNNER_LINE_MAX);
        assert_int_equal(l.bytes, 3000);
        assert_int_equal(l.lines, 3);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_split),
                cmocka_unit_test(test_burst),
                cmocka_unit_test(test_timeout_and_spawn_error),
                cmocka_unit_test(test_output_lines),
                cmocka_unit_test(test_output_bounded),
        };
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
