/* SPDX-License-Identifier: MIT */
#pragma once

/* Small cJSON conveniences shared by the API handlers and the modules. */

#include <cjson/cJSON.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

/* Adds "key": "value", or "key": null when value is NULL. Returns the item or NULL on ENOMEM. */
cJSON *json_add_string_or_null(cJSON *o, const char *key, const char *value);
/* Formats a CLOCK_REALTIME usec_t as RFC 3339 UTC ("2026-11-21T10:42:04Z"). */
int json_format_rfc3339(usec_t t, char *buf, size_t size);
cJSON *json_add_time(cJSON *o, const char *key, usec_t realtime);
