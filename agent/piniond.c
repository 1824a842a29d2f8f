/* SPDX-License-Identifier: MIT */
/* piniond: parse the command line, build the manager, run the loop. Everything else lives in
 * manager.c and the modules. */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "config.h"
#include "log.h"
#include "manager-config.h"
#include "manager.h"

static void help(void) {
        printf("Usage: piniond [OPTIONS]\n\n"
               "The pinion node agent: identity, config, registration, network and memory\n"
               "support for every workload on this node.\n\n"
               "  -c, --config FILE    configuration file (default " PINION_DEFAULT_CONFIG ");\n"
               "                       drop-ins are read from conf.d/ beside it\n"
               "      --check-config   validate the configuration and exit (78 if invalid)\n"
               "      --list-config-keys\n"
               "                       print every section and key the configuration accepts,\n"
               "                       with its default, and exit\n"
               "      --version        print the version and exit\n"
               "  -h, --help           print this help and exit\n");
}

struct arguments {
        const char *config_file;
        bool check_config;
        bool list_config_keys;
};

/* Returns 1 to go on, 0 to exit successfully, negative on a usage error. */
static int parse_argv(int argc, char *argv[], struct arguments *ret) {
        enum { ARG_CHECK_CONFIG = 0x100, ARG_LIST_CONFIG_KEYS, ARG_VERSION };
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "list-config-keys", no_argument, NULL, ARG_LIST_CONFIG_KEYS },
                { "version", no_argument, NULL, ARG_VERSION },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:h", options, NULL)) >= 0)
                switch (c) {
                case 'c':
                        ret->config_file = optarg;
                        break;
                case ARG_CHECK_CONFIG:
                        ret->check_config = true;
                        break;
                case ARG_LIST_CONFIG_KEYS:
                        ret->list_config_keys = true;
                        break;
                case ARG_VERSION:
                        printf("piniond %s\n", PACKAGE_VERSION);
                        return 0;
                case 'h':
                        help();
                        return 0;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "piniond: unexpected argument '%s'\n", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

int main(int argc, char *argv[]) {
        struct arguments args = {};
        _cleanup_(manager_freep) struct manager *m = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        r = parse_argv(argc, argv, &args);
        if (r <= 0)
                return r < 0 ? 2 : EXIT_SUCCESS;

        log_setup(LOG_INFO, LOG_TARGET_AUTO);
        if (args.list_config_keys) {
                r = manager_config_list_keys(stdout);
                if (r < 0) {
                        fprintf(stderr, "piniond: cannot list the configuration keys: %s\n", strerror(-r));
                        return EXIT_FAILURE;
                }
                return EXIT_SUCCESS;
        }
        struct manager_options opts = { .config_file = args.config_file };

        if (args.check_config) {
                _cleanup_free_ char *summary = NULL;
                r = manager_config_check(&opts, &summary, &error);
                if (r < 0) {
                        fprintf(stderr, "%s\n", error ? error : strerror(-r));
                        return EXIT_CONFIG;
                }
                printf("%s\n", summary);
                return EXIT_SUCCESS;
        }

        r = manager_new(&opts, &m, &error);
        if (r < 0) {
                if (error)
                        log_error("%s", error);
                else
                        log_error_errno(r, "Failed to set up the agent: %m");
                /* Every configuration problem (unreadable file included) comes with a message. */
                return error ? EXIT_CONFIG : EXIT_FAILURE;
        }

        r = manager_start(m);
        if (r < 0) /* manager_start logged the cause */
                return r == MANAGER_ERR_UNSAFE ? EXIT_CONFIG : EXIT_FAILURE;

        return manager_run(m);
}
