/* SPDX-License-Identifier: MIT */
/* The kinds of signer [identity] signer= names: what each needs configured, how its signer is
 * made, and where workload certificates come from with it. identity.c asks the kind instead of
 * switching on it. */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "identity.h"
#include "log.h"

#define MODULE "identity"
/* How long the kubernetes signer waits for approval and the certificate (the kubelet: 15m). */
#define KUBE_CSR_DEADLINE (15 * USEC_PER_MINUTE)

static int set_error(char **ret_error, const char *format, ...) _printf_(2, 3);
static int set_error(char **ret_error, const char *format, ...) {
        va_list ap;
        va_start(ap, format);
        if (vasprintf(ret_error, format, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return -EINVAL;
}

/* ---- local: the embedded CA in ca-dir signs the node and the workloads ---- */

static const char *local_missing(const struct identity_settings *s, const struct kube_endpoint *kube) {
        return s->ca_dir ? NULL : "signer=local needs ca-dir";
}

static int local_make(struct identity *id, char **ret_error) {
        const struct identity_settings *s = id->settings;
        _cleanup_free_ char *error = NULL;
        bool created = false;
        int r = signer_local_new(s->ca_dir, s->trust_domain, &id->signer, &created, &error);
        if (r < 0) {
                (void) set_error(ret_error, "local CA: %s", error ? error : strerror(-r));
                return r;
        }
        if (created)
                log_module_info(MODULE, "created a new local CA in %s", s->ca_dir);
        return 0;
}

static int local_issuer(struct identity *id, char **ret_error) {
        identity_set_bundle(id, id->signer->roots);
        id->issuer = id->signer->local_ca;
        id->issuer_owned = false;
        return 0;
}

/* ---- kubernetes: the CSR API signs the node; a local CA in ca-dir, if set, the workloads ---- */

static const char *kubernetes_missing(const struct identity_settings *s, const struct kube_endpoint *kube) {
        if (!s->bootstrap_token_file)
                return "signer=kubernetes needs bootstrap-token-file";
        if (!kube->url || !kube->ca_file)
                return "signer=kubernetes needs [apiserver] url and ca-file (or the in-cluster environment): the CSR "
                       "API and the CA that verifies what it issues";
        return NULL;
}

static int kubernetes_make(struct identity *id, char **ret_error) {
        struct http_client *http;
        int r = manager_http(id->manager, &http);
        if (r < 0)
                return r;
        const struct kube_settings ks = {
                .endpoint = &id->kube,
                .deadline = KUBE_CSR_DEADLINE,
        };
        return signer_kubernetes_new(id->manager->event, http, &ks, &id->signer, ret_error);
}

/* The CSR API issues no CA certificates: workloads get theirs from a local CA in ca-dir, if one
 * is configured (docs/design-notes.md). */
static int kubernetes_issuer(struct identity *id, char **ret_error) {
        const struct identity_settings *s = id->settings;
        _cleanup_free_ char *cn = NULL;
        struct ca *ca = NULL;
        bool created = false;
        int r;

        if (!s->ca_dir) {
                id->issuer_reason = strdup("signer=kubernetes issues workload certificates only with ca-dir set");
                return 0;
        }
        if (asprintf(&cn, "pinion CA %s", s->trust_domain) < 0)
                return -ENOMEM;
        r = ca_load_or_create(s->ca_dir, cn, &ca, &created);
        if (r < 0) {
                (void) set_error(ret_error, "local CA for workloads in %s: %s", s->ca_dir,
                                 r == -EBADMSG ? "ca.key and ca.crt are not a matching pair" : strerror(-r));
                return r;
        }
        if (created)
                log_module_info(MODULE, "created a new local CA for workload certificates in %s", s->ca_dir);
        identity_set_bundle(id, ca->roots);
        id->issuer = ca;
        id->issuer_owned = true;
        return 0;
}

/* ---- cfssl: cfssl signs the node certificate and a per-node CA that signs the workloads ---- */

static const char *cfssl_missing(const struct identity_settings *s, const struct kube_endpoint *kube) {
        return !s->cfssl_url            ? "signer=cfssl needs cfssl-url"
               : !s->cfssl_auth_key_file ? "signer=cfssl needs cfssl-auth-key-file (the hex HMAC key of its authsign endpoint)"
               : !s->cfssl_ca_file       ? "signer=cfssl needs cfssl-ca-file (the pinned CA certificate cfssl signs with, PEM)"
                                         : NULL;
}

static int cfssl_make(struct identity *id, char **ret_error) {
        const struct identity_settings *s = id->settings;
        struct http_client *http;
        int r = manager_http(id->manager, &http);
        if (r < 0)
                return r;
        const struct cfssl_settings cs = {
                .url = s->cfssl_url,
                .auth_key_file = s->cfssl_auth_key_file,
                .ca_file = s->cfssl_ca_file,
                .timeout = 10 * USEC_PER_SEC,
        };
        return signer_cfssl_new(http, &cs, &id->signer, ret_error);
}

static int cfssl_issuer(struct identity *id, char **ret_error) {
        int r = identity_new_cred(id, "node-ca", "intermediate", CERT_USAGE_CA, "pinion node CA ", "pinion", &id->node_ca);
        if (r < 0)
                return r;
        id->issuer_reason = strdup("waiting for the node CA from cfssl");
        return 0;
}

static const struct signer_kind kinds[] = {
        { .name = "local", .missing = local_missing, .make = local_make, .issuer = local_issuer },
        {
                .name = "kubernetes",
                .missing = kubernetes_missing,
                .make = kubernetes_make,
                .issuer = kubernetes_issuer,
                /* Approval is someone else's move (an operator or a controller), and may take
                 * long: the agent is ready meanwhile, saying what it waits for. */
                .awaits_approval = "waiting for the node's CSR to be approved and signed",
                .uses_apiserver = true,
        },
        { .name = "cfssl", .missing = cfssl_missing, .make = cfssl_make, .issuer = cfssl_issuer },
};

const char *signer_kind_name_at(size_t i) {
        return i < ELEMENTSOF(kinds) ? kinds[i].name : i == ELEMENTSOF(kinds) ? "" : NULL;
}

const struct signer_kind *signer_kind_from_name(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (streq(kinds[i].name, name))
                        return &kinds[i];
        return NULL;
}
