/* SPDX-License-Identifier: MIT */
#pragma once

/* The one interface behind which the node's certificate is signed: the embedded CA
 * (signer-local.c) or a CFSSL server's authenticated sign endpoint (signer-cfssl.c).
 *
 * signer_sign() starts one request; done runs exactly once unless the request is cancelled
 * (signer_cancel with the same userdata), and may run before signer_sign() returns (the local
 * CA answers at once). The chain handed to done is the signer's raw answer (PEM): the caller
 * checks it (parse, key match, verification against signer_roots()) before it trusts it. */

#include <stdbool.h>
#include <string.h>

#include <systemd/sd-event.h>

#include "ca.h"
#include "x509.h"

struct http_client;
struct signer;

struct signer_request {
        const char *profile;    /* "node" (client certificate) or "intermediate" (a node CA) */
        X509_REQ *csr;
        EVP_PKEY *key;          /* the requester's key (its public half is what gets signed) */
        const struct cert_subject *subject;
        enum cert_usage usage;
        usec_t lifetime;
        /* The requester's current, still valid certificate and key (stable paths), or NULL: a
         * signer that can authenticate with them (kubernetes) renews with them instead of the
         * bootstrap secret. */
        const char *client_cert_file, *client_key_file;
};

/* error 0: chain_pem is the answer. Otherwise reason says what failed (for logs and status). */
typedef void (*signer_done_fn)(int error, const char *reason, const char *chain_pem, void *userdata);

struct signer_ops {
        const char *name;
        int (*sign)(struct signer *s, const struct signer_request *req, signer_done_fn done, void *userdata);
        void (*cancel)(struct signer *s, void *userdata);
        void (*free)(struct signer *s);
};

struct signer {
        const struct signer_ops *ops;
        STACK_OF(X509) *roots; /* the trust anchors, NULL until known */
        struct ca *local_ca;   /* the embedded CA (local signer), else NULL */
};

struct cfssl_settings {
        const char *url;
        const char *auth_key_file; /* hex HMAC key as cfssl's "standard" auth keys take it */
        const char *ca_file;       /* the pinned CA (PEM): TLS trust for https and the anchor of answers */
        usec_t timeout;
};

/* The embedded CA in ca_dir (created if absent). *ret_created says if it was made now. */
int signer_local_new(const char *ca_dir, const char *trust_domain, struct signer **ret, bool *ret_created,
                     char **ret_error);
struct kube_endpoint;
struct kube_settings {
        /* The apiserver, scheme://host:port; its ca_file is the cluster CA (TLS, and the trust
         * anchor of what it issues), its token_file the bootstrap token. Copied. */
        const struct kube_endpoint *endpoint;
        usec_t deadline; /* how long to wait for approval and the certificate */
};
int signer_kubernetes_new(sd_event *e, struct http_client *http, const struct kube_settings *s, struct signer **ret,
                          char **ret_error);
int signer_cfssl_new(struct http_client *http, const struct cfssl_settings *s, struct signer **ret, char **ret_error);

/* True unless url is plain http:// to something other than a loopback address (127.0.0.0/8,
 * [::1], localhost): CSRs, certificates and credentials do not cross a network in clear. */
static inline bool signer_url_ok(const char *url) {
        if (strncmp(url, "http://", 7) != 0)
                return true;
        const char *host = url + 7;
        size_t n = strcspn(host, "/?#"), hl = strcspn(host, ":/?#"); /* authority, host */
        return (hl == 9 && strncmp(host, "localhost", 9) == 0) ||
               (n >= 5 && strncmp(host, "[::1]", 5) == 0 && (n == 5 || host[5] == ':')) ||
               (hl >= 4 && strncmp(host, "127.", 4) == 0 && strspn(host, "0123456789.") == hl);
}

static inline int signer_sign(struct signer *s, const struct signer_request *req, signer_done_fn done, void *userdata) {
        return s->ops->sign(s, req, done, userdata);
}
static inline void signer_cancel(struct signer *s, void *userdata) {
        if (s)
                s->ops->cancel(s, userdata);
}
/* signer.c */
struct signer *signer_free(struct signer *s);
