/* SPDX-License-Identifier: MIT */
#pragma once

/* A config table with one key of every typed parser, shared by the config unit test and the
 * config fuzz target. */

#include <stddef.h>

#include "config.h"

struct sample {
        usec_t timeout;
        uint64_t size;
        unsigned percent;
        bool flag;
        int64_t number;
        unsigned count;
        double ratio;
        char *name;
        char *path;
        char **list;
        mode_t mode;
        char *url;
};

#define FIELD(f) offsetof(struct sample, f)
static const struct config_key sample_keys[] = {
        { "timeout", config_parse_duration, FIELD(timeout), "10s" },
        { "size", config_parse_size, FIELD(size), "64M" },
        { "percent", config_parse_percent, FIELD(percent), "90%" },
        { "flag", config_parse_bool, FIELD(flag), "no" },
        { "number", config_parse_int, FIELD(number), "-3" },
        { "count", config_parse_uint, FIELD(count), "7" },
        { "ratio", config_parse_double, FIELD(ratio), "1.5" },
        { "name", config_parse_string, FIELD(name), "default-name", config_free_string },
        { "path", config_parse_path, FIELD(path), NULL, config_free_string },
        { "list", config_parse_strv, FIELD(list), NULL, config_free_strv },
        { "mode", config_parse_mode, FIELD(mode), "0660" },
        { "url", config_parse_url, FIELD(url), NULL, config_free_string },
        {}
};
#undef FIELD
