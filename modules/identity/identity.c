/* SPDX-License-Identifier: MIT */
/* identity: bootstraps the node certificate through a signer (local CA, Kubernetes CSR API or
 * cfssl), then issues and rotates a certificate per pod that asks for one. This file holds its
 * config and its place in the module contract; the work lands with its issue. */

#include <stddef.h>
#include <stdlib.h>

#include "config.h"
#include "module.h"

enum signer_kind {
        SIGNER_NONE,
        SIGNER_LOCAL,
        SIGNER_KUBERNETES,
        SIGNER_CFSSL,
};

struct identity_settings {
        enum signer_kind signer;
        char *trust_domain;
        char *ca_dir;
        char *bootstrap_token_file;
        char *cfssl_url;
        char *cfssl_auth_key_file;
        usec_t node_cert_lifetime;
        usec_t workload_cert_lifetime;
        char *pod_tls_dir;
};

static int parse_signer(const char *v, void *ret, const char **reason) {
        static const char *const names[] = {
                [SIGNER_NONE] = "", [SIGNER_LOCAL] = "local", [SIGNER_KUBERNETES] = "kubernetes",
                [SIGNER_CFSSL] = "cfssl",
        };
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (streq(v, names[i])) {
                        *(enum signer_kind *) ret = (enum signer_kind) i;
                        return 0;
                }
        *reason = "expected local, kubernetes or cfssl";
        return -EINVAL;
}

#define FIELD(f) offsetof(struct identity_settings, f)
static const struct config_key identity_keys[] = {
        { "signer", parse_signer, FIELD(signer), "" },
        { "trust-domain", config_parse_string, FIELD(trust_domain), NULL, config_free_string },
        { "ca-dir", config_parse_path, FIELD(ca_dir), NULL, config_free_string },
        { "bootstrap-token-file", config_parse_path, FIELD(bootstrap_token_file), NULL, config_free_string },
        { "cfssl-url", config_parse_url, FIELD(cfssl_url), NULL, config_free_string },
        { "cfssl-auth-key-file", config_parse_path, FIELD(cfssl_auth_key_file), NULL, config_free_string },
        { "node-cert-lifetime", config_parse_duration, FIELD(node_cert_lifetime), "24h" },
        { "workload-cert-lifetime", config_parse_duration, FIELD(workload_cert_lifetime), "1h" },
        { "pod-tls-dir", config_parse_path, FIELD(pod_tls_dir), "/run/pinion/pods", config_free_string },
        {}
};
#undef FIELD

/* The checks a signer needs before anything can work, so a typo fails at load, not at 3 am. */
static const char *identity_missing(const struct identity_settings *s) {
        switch (s->signer) {
        case SIGNER_NONE:
                return NULL;
        case SIGNER_LOCAL:
                return s->ca_dir ? NULL : "signer=local needs ca-dir";
        case SIGNER_KUBERNETES:
                return s->bootstrap_token_file ? NULL : "signer=kubernetes needs bootstrap-token-file";
        case SIGNER_CFSSL:
                return s->cfssl_url ? NULL : "signer=cfssl needs cfssl-url";
        }
        return NULL;
}

static struct identity_settings *identity_settings_free(struct identity_settings *s) {
        return config_object_free(identity_keys, s);
}

static int identity_parse(struct config *c, struct identity_settings **ret, char **ret_error) {
        struct identity_settings *s = NULL;
        int r;

        r = config_parse_section_new(c, "identity", identity_keys, sizeof(*s), (void **) &s, ret_error);
        if (r < 0)
                return r;
        const char *missing = identity_missing(s);
        if (!missing && s->signer != SIGNER_NONE && !s->trust_domain)
                missing = "a signer needs trust-domain (the SPIFFE trust domain, e.g. example.org)";
        if (!missing && (s->node_cert_lifetime < USEC_PER_MINUTE || s->workload_cert_lifetime < USEC_PER_MINUTE))
                missing = "certificate lifetimes must be at least 1m";
        if (missing) {
                config_object_free(identity_keys, s);
                return config_section_error(c, "identity", ret_error, "%s", missing);
        }
        *ret = s;
        return 0;
}

static void identity_apply(struct module_instance *mi) {
        struct identity_settings *s = mi->data;

        if (s->signer == SIGNER_NONE)
                module_set_state(mi, MODULE_DISABLED, "no [identity] signer configured");
        else
                module_set_state(mi, MODULE_DISABLED, "certificate issuing is not part of this build yet");
        module_set_synced(mi);
}

static int identity_status(struct module_instance *mi, cJSON *obj) {
        struct identity_settings *s = mi->data;
        if (s->trust_domain && !cJSON_AddStringToObject(obj, "trustDomain", s->trust_domain))
                return -ENOMEM;
        return 0;
}

DEFINE_SETTINGS_MODULE(identity, struct identity_settings, ((const char *const[]) { "apiserver", NULL }));
