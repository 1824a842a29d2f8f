/* SPDX-License-Identifier: MIT */
#pragma once

/* The operator's drain, kept in <state-dir>/zkreg/drain so that it outlives the process: a
 * drained node that crashes, is OOM-killed or upgraded must not come back registering.
 *
 *   {"version":1,"drained":true,"since":"2026-12-02T10:43:26Z"}
 *
 * Written with fs_write_file_atomic() (a kill -9 leaves the old or the new file) before the API
 * answers; read once at start, before the first registration. No file: never drained. */

#include <stdbool.h>

#include "macro.h"
#include "state-version.h"

#define DRAIN_STATE_VERSION 1

struct drain_state {
        bool drained;
        usec_t since; /* CLOCK_REALTIME of the last change (0: not known) */
};

/* Reads path. 0 with *ret filled (absent: not drained); negative errno with *ret_error saying
 * what is wrong with the file (an unreadable file, not JSON; STATE_VERSION_ERR_NEWER for a
 * version from a newer release, which the caller must not read as anything). */
int drain_state_load(const char *path, struct drain_state *ret, char **ret_error);
/* Writes path (its directory made 0700 if missing) durably. */
int drain_state_save(const char *path, const struct drain_state *s);
/* The file's content (malloc'ed, with a final newline), NULL on ENOMEM. */
char *drain_state_format(const struct drain_state *s);
/* Parses path's content: 0, or -EINVAL with *ret_error, or STATE_VERSION_ERR_NEWER (a newer
 * release's file) with the operator's message in *ret_error. */
int drain_state_parse(const char *path, const char *text, struct drain_state *ret, char **ret_error);
