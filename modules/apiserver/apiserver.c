/* SPDX-License-Identifier: MIT */
/* apiserver: watches this node's pods (list + watch with bookmarks) with a token bucket and
 * jittered backoff, feeding the pod store. This file holds its config and its place in the
 * module contract; the client lands with its issue. Until then the module reports itself
 * disabled, saying why. */

#include <stddef.h>
#include <stdlib.h>

#include "config.h"
#include "module.h"

struct apiserver_settings {
        char *url;
        char *token_file;
        char *ca_file;
        double qps;
        unsigned burst;
        usec_t backoff_initial;
        usec_t backoff_max;
        usec_t backoff_reset;
        double backoff_jitter;
        usec_t watch_timeout_min;
};

#define FIELD(f) offsetof(struct apiserver_settings, f)
static const struct config_key apiserver_keys[] = {
        { "url", config_parse_url, FIELD(url), NULL, config_free_string },
        { "token-file", config_parse_path, FIELD(token_file), NULL, config_free_string },
        { "ca-file", config_parse_path, FIELD(ca_file), NULL, config_free_string },
        { "qps", config_parse_double, FIELD(qps), "5" },
        { "burst", config_parse_uint, FIELD(burst), "10" },
        { "backoff-initial", config_parse_duration, FIELD(backoff_initial), "800ms" },
        { "backoff-max", config_parse_duration, FIELD(backoff_max), "30s" },
        { "backoff-reset", config_parse_duration, FIELD(backoff_reset), "2m" },
        { "backoff-jitter", config_parse_double, FIELD(backoff_jitter), "1.0" },
        { "watch-timeout-min", config_parse_duration, FIELD(watch_timeout_min), "5m" },
        {}
};
#undef FIELD

static struct apiserver_settings *apiserver_settings_free(struct apiserver_settings *s) {
        return config_object_free(apiserver_keys, s);
}

static int apiserver_parse(struct config *c, struct apiserver_settings **ret, char **ret_error) {
        struct apiserver_settings *s = NULL;
        int r;

        r = config_parse_section_new(c, "apiserver", apiserver_keys, sizeof(*s), (void **) &s, ret_error);
        if (r < 0)
                return r;
        if (s->qps <= 0 || s->burst == 0 || s->backoff_initial == 0 || s->backoff_max < s->backoff_initial) {
                config_object_free(apiserver_keys, s);
                return config_section_error(c, "apiserver", ret_error,
                                            "needs qps > 0, burst > 0 and 0 < backoff-initial <= backoff-max");
        }
        *ret = s;
        return 0;
}

static void apiserver_apply(struct module_instance *mi) {
        struct apiserver_settings *s = mi->data;

        if (!s->url && !getenv("KUBERNETES_SERVICE_HOST"))
                module_set_state(mi, MODULE_DISABLED, "no [apiserver] url and not running in a cluster");
        else
                module_set_state(mi, MODULE_DISABLED, "the apiserver client is not part of this build yet");
        module_set_synced(mi);
}

static int apiserver_status(struct module_instance *mi, cJSON *obj) {
        struct apiserver_settings *s = mi->data;
        if (s->url && !cJSON_AddStringToObject(obj, "url", s->url))
                return -ENOMEM;
        return 0;
}

DEFINE_SETTINGS_MODULE(apiserver, struct apiserver_settings, NULL);
