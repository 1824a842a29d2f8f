/* SPDX-License-Identifier: MIT */
#pragma once

/* Values as people write them, shared by the config parsers, the API ("?wait=30s") and
 * pinionctl ("--timeout 2m"). Each returns 0 and sets *ret, or -EINVAL/-ERANGE leaving it. */

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

/* "800ms", "30s", "2m", "1h", "1d", "1m 30s"; a bare number is seconds (as in systemd). */
int parse_duration(const char *s, usec_t *ret);
/* "4096", "64K", "512M", "2G", "1T" (binary; "MB"/"MiB" accepted alike). */
int parse_size(const char *s, uint64_t *ret);
/* "90%", 0..100. */
int parse_percent(const char *s, unsigned *ret);
/* yes/no, true/false, on/off, 1/0 (any case). */
int parse_bool(const char *s, bool *ret);
