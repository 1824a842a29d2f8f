/* SPDX-License-Identifier: MIT */
#pragma once

/* The command line: the model's constants (one option each, see sim-model.h), the policies to
 * run and the output files. */

#include <stdbool.h>

#include "sim-model.h"
#include "sim-policy.h"

struct cli {
        struct model model;
        const char *values[N_OPTIONS];
        bool policies[_POLICY_MAX];
        const char *csv;
        const char *summary;
};

/* Parses argv into *c: 1 to run, 0 when --help was printed, -EINVAL after saying what is wrong
 * on stderr. */
int cli_parse(int argc, char *argv[], struct cli *c);
