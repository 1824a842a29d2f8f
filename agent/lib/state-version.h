/* SPDX-License-Identifier: MIT */
#pragma once

/* The format version every file under state-dir carries, and the one rule that classifies it,
 * so that an agent never misreads a file another release wrote:
 *   - no version: the format of the release before versions were written (version 1);
 *   - a version this binary knows (1..current): read it;
 *   - a newer one: refused with STATE_VERSION_ERR_NEWER. Its owner leaves the file as it is
 *     (never rewritten, never removed) and the agent exits with EX_CONFIG (78), naming the file
 *     and the version, so a downgrade never silently drops what a newer release recorded.
 *
 * JSON files carry {"version": N, ...} (a key older readers ignore). Text files begin with
 * "v<N> " (or "v<N>\n"); a text file that does not is version 1. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* A file written by a newer release than this binary reads. */
#define STATE_VERSION_ERR_NEWER (-EPROTONOSUPPORT)
/* What a file without a version is. */
#define STATE_VERSION_UNVERSIONED 1u

/* root's "version": *ret_version = its value (STATE_VERSION_UNVERSIONED if absent). Returns 0 if
 * 1..current, STATE_VERSION_ERR_NEWER if above current (*ret_version set: for the message),
 * -EBADMSG if it is not a whole number >= 1. */
int state_version_json(const cJSON *root, unsigned current, unsigned *ret_version);
/* Adds "version": version to o. Returns 0 or -ENOMEM. */
int state_version_json_add(cJSON *o, unsigned version);

/* The "v<N> " prefix of text: as state_version_json(); *ret_body (optional) points past the
 * prefix (at text itself when there is none). */
int state_version_text(const char *text, unsigned current, unsigned *ret_version, const char **ret_body);
/* Writes "v<N> " into buf (size >= 12). Returns its length. */
int state_version_text_prefix(char *buf, size_t size, unsigned version);

/* The operator's message for a refused file (free it): names the file, its version and ours,
 * and what to do. NULL on ENOMEM. */
char *state_version_describe(const char *path, unsigned found, unsigned current);
