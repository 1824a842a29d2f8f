/* SPDX-License-Identifier: MIT */
#pragma once

/* Loading and validating the whole configuration: the files, the [agent] section, and every
 * module's sections (each module's init runs on a throwaway instance, which has no side
 * effects), then anything nobody claimed. Used at start, by --check-config and on SIGHUP. */

#include <stdio.h>
#include <sys/types.h>

#include "config.h"

struct manager_options;
struct agent_settings;

/* On success *ret_config and *ret_settings are filled (settings owned: agent_settings_done()).
 * On a config problem returns -EINVAL with *ret_error = "FILE:LINE: reason". */
int manager_config_load(const struct manager_options *opts, struct config **ret_config,
                        struct agent_settings *ret_settings, char **ret_error);
/* --check-config: what manager_config_load() checks, and what start would refuse that needs no
 * server: the API socket's directory and each enabled module's check(). On success *ret_summary is
 * "configuration OK (N files, M modules enabled: a, b)". */
int manager_config_check(const struct manager_options *opts, char **ret_summary, char **ret_error);
/* --list-config-keys: prints every section and key the agent accepts, as INI with each key's
 * built-in default ("key=" when it has none), in the order the agent parses them. Repeated
 * sections appear once, as [config.NAME] / [reclaim.NAME]. Taken from the parse tables
 * themselves: [agent]'s and each module's, observed while they parse an empty configuration. */
int manager_config_list_keys(FILE *out);
