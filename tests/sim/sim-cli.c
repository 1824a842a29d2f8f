/* SPDX-License-Identifier: MIT */
/* The command line: --help, the policies to run, the output files and one option per model
 * constant. */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "sim-cli.h"

enum {
        ARG_POLICY = 0x100,
        ARG_CSV,
        ARG_SUMMARY,
        ARG_HELP,
        ARG_MODEL, /* + index into option_defs */
};

static void help(void) {
        printf("fleet-sim [OPTIONS]: a discrete-event simulation of agents watching an apiserver\n"
               "through an outage (see the comment at the top of tests/sim/fleet-sim.c).\n\n"
               "  --policy LIST       comma-separated: legacy,client-go,pinion,naive-writes,pinion-writes\n"
               "                      (default: all; the last two are pinion's reflector with the\n"
               "                      agents' status writes, naive or pinion's queue)\n"
               "  --csv FILE          offered cost per second per policy\n"
               "  --summary-csv FILE  one row of results per policy and run\n\n"
               "Model (durations take us/ms/s/m/h):\n");
        for (size_t i = 0; i < N_OPTIONS; i++)
                printf("  --%-22s %s (default %s)\n", option_defs[i].name, option_defs[i].help, option_defs[i].def);
}

static int parse_policies(const char *s, bool ret[static _POLICY_MAX]) {
        _cleanup_free_ char *copy = strdup(s);
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        memset(ret, 0, _POLICY_MAX * sizeof(bool));
        for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                int p = policy_from_name(w);
                if (p < 0)
                        return p;
                ret[p] = true;
        }
        return 0;
}

int cli_parse(int argc, char *argv[], struct cli *c) {
        struct option longopts[N_OPTIONS + 5] = {
                { "policy", required_argument, NULL, ARG_POLICY },
                { "csv", required_argument, NULL, ARG_CSV },
                { "summary-csv", required_argument, NULL, ARG_SUMMARY },
                { "help", no_argument, NULL, ARG_HELP },
        };
        int opt;

        for (size_t i = 0; i < N_OPTIONS; i++) {
                longopts[4 + i] = (struct option) { option_defs[i].name, required_argument, NULL, ARG_MODEL + (int) i };
                c->values[i] = option_defs[i].def;
        }
        for (int p = 0; p < _POLICY_MAX; p++)
                c->policies[p] = true;

        while ((opt = getopt_long(argc, argv, "", longopts, NULL)) >= 0)
                switch (opt) {
                case ARG_POLICY:
                        if (parse_policies(optarg, c->policies) < 0) {
                                fprintf(stderr, "fleet-sim: bad --policy '%s'\n", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_CSV:
                        c->csv = optarg;
                        break;
                case ARG_SUMMARY:
                        c->summary = optarg;
                        break;
                case ARG_HELP:
                        help();
                        return 0;
                default:
                        if (opt < ARG_MODEL || opt >= ARG_MODEL + (int) N_OPTIONS)
                                return -EINVAL;
                        c->values[opt - ARG_MODEL] = optarg;
                }
        if (optind < argc) {
                fprintf(stderr, "fleet-sim: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }

        for (size_t i = 0; i < N_OPTIONS; i++)
                if (option_defs[i].parse(c->values[i], (uint8_t *) &c->model + option_defs[i].offset) < 0) {
                        fprintf(stderr, "fleet-sim: bad --%s '%s'\n", option_defs[i].name, c->values[i]);
                        return -EINVAL;
                }
        const char *why = model_check(&c->model);
        if (why) {
                fprintf(stderr, "fleet-sim: %s\n", why);
                return -EINVAL;
        }
        return 1;
}
