/* SPDX-License-Identifier: MIT */
/* The local signer: an embedded CA under ca-dir, for standalone machines and the demo. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signer.h"

static int local_sign(struct signer *s, const struct signer_request *req, signer_done_fn done, void *userdata) {
        _cleanup_(X509_freep) X509 *cert = NULL;
        _cleanup_free_ char *pem = NULL;
        int r;

        /* The CSR is checked as any CA would: signed by the key it carries. */
        EVP_PKEY *pub = X509_REQ_get0_pubkey(req->csr);
        if (!pub || X509_REQ_verify(req->csr, pub) != 1) {
                done(-EBADMSG, "the CSR's signature does not verify", NULL, userdata);
                return 0;
        }
        r = ca_issue(s->local_ca, pub, req->subject, req->usage, req->lifetime, &cert);
        if (r >= 0)
                r = ca_chain_pem(s->local_ca, cert, &pem);
        if (r < 0) {
                done(r, "the local CA could not sign", NULL, userdata);
                return 0;
        }
        done(0, NULL, pem, userdata);
        return 0;
}

static void local_cancel(struct signer *s, void *userdata) {
        /* Nothing is ever pending. */
}

static void local_free(struct signer *s) {
        free(s);
}

static const struct signer_ops local_ops = {
        .name = "local",
        .sign = local_sign,
        .cancel = local_cancel,
        .free = local_free,
};

int signer_local_new(const char *ca_dir, const char *trust_domain, struct signer **ret, bool *ret_created,
                     char **ret_error) {
        _cleanup_free_ char *cn = NULL;
        struct ca *ca = NULL;
        int r;

        if (asprintf(&cn, "pinion CA %s", trust_domain) < 0)
                return -ENOMEM;
        r = ca_load_or_create(ca_dir, cn, &ca, ret_created);
        if (r < 0) {
                if (asprintf(ret_error, "%s: %s", ca_dir,
                             r == -EBADMSG ? "ca.key and ca.crt are not a matching key and certificate (refusing to "
                                             "replace a CA; remove both to start a new one)"
                                           : strerror(-r)) < 0)
                        *ret_error = NULL;
                return r;
        }
        struct signer *s = calloc(1, sizeof(*s));
        if (!s) {
                ca_free(ca);
                return -ENOMEM;
        }
        s->ops = &local_ops;
        s->local_ca = ca;
        s->roots = sk_X509_deep_copy(ca->roots, X509_dup, X509_free);
        if (!s->roots)
                return signer_free(s), -ENOMEM;
        *ret = s;
        return 0;
}
