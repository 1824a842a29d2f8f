/* SPDX-License-Identifier: MIT */
#pragma once

/* For the unit tests that kill a writer at random instants (include after cmocka.h): a seeded
 * xorshift generator whose seed is printed, and a child process running a function forever,
 * started with a handshake and killed with SIGKILL. */

#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"

static uint64_t rng_state;

static inline uint64_t rng(void) {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        return rng_state;
}

static inline void rng_seed(void) {
        rng_state = now_usec(CLOCK_REALTIME) ^ ((uint64_t) getpid() << 40);
        if (rng_state == 0)
                rng_state = 1;
        /* Printed so a failing run can be replayed by hard-coding it. */
        print_message("# crash test seed %llu\n", (unsigned long long) rng_state);
}

/* Forks a child that runs fn(arg) forever; returns once it signalled it is running. */
static inline pid_t start_child(void (*fn)(void *arg), void *arg) {
        int p[2];
        char c;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                (void) close(p[0]);
                if (write(p[1], "r", 1) != 1)
                        _exit(2);
                (void) close(p[1]);
                fn(arg); /* only returns by _exit() */
                _exit(1);
        }

        (void) close(p[1]);
        assert_int_equal(read(p[0], &c, 1), 1);
        (void) close(p[0]);
        return pid;
}

static inline void kill_child(pid_t pid) {
        int status;

        assert_int_equal(kill(pid, SIGKILL), 0);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        /* It must have died by our hand, not by its own failure. */
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), SIGKILL);
}
