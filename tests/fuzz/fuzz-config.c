/* SPDX-License-Identifier: MIT */
/* Fuzzes the config loader (agent/lib/config.c: the INI text of pinion.conf and its drop-ins) and
 * every typed parser, through a section table [s], repeated sections [i.NAME] and a section
 * parsed into a new object [n], as the manager and the modules do. */

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../config-sample.h"
#include "config.h"
#include "fuzz.h"


struct named {
        char *name; /* first member, set by config_parse_instances */
        char *url;
        unsigned keep;
        char **paths;
};

#define FIELD(f) offsetof(struct named, f)
static const struct config_key named_keys[] = {
        { "url", config_parse_url, FIELD(url), NULL, config_free_string },
        { "keep", config_parse_uint, FIELD(keep), "1" },
        { "paths", config_parse_strv, FIELD(paths), NULL, config_free_strv },
        {}
};
#undef FIELD

static const char *named_check(const void *object) {
        const struct named *n = object;
        return n->url ? NULL : "url is required";
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct config *c = NULL;
        char *error = NULL;
        struct sample s = {};
        void **objects = NULL, *object = NULL;
        size_t n = 0;

        /* config_load_string takes a C string; an embedded NUL ends the text early. */
        char *text = malloc(size + 1);
        if (!text)
                return 0;
        memcpy(text, data, size);
        text[size] = 0;

        if (config_load_string("fuzz.conf", text, &c, &error) < 0)
                goto out;

        (void) config_has_section(c, "s");
        /* On failure too the fields parsed so far are the caller's to free. */
        (void) config_parse_section(c, "s", sample_keys, &s, &error);
        config_free_fields(sample_keys, &s);
        free(error);
        error = NULL;

        if (config_parse_instances(c, "i.", named_keys, sizeof(struct named), named_check, &objects, &n,
                                   &error) >= 0)
                config_instances_free(named_keys, objects, n);
        free(error);
        error = NULL;

        if (config_parse_section_new(c, "n", named_keys + 1, sizeof(struct named), &object, &error) >= 0)
                config_object_free(named_keys + 1, object);
        free(error);
        error = NULL;

        (void) config_section_error(c, "s", &error, "fuzz %d", 1);
        free(error);
        error = NULL;

        (void) config_check_unclaimed(c, &error);
out:
        free(error);
        config_free(c);
        free(text);
        return 0;
}
