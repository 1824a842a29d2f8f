/* SPDX-License-Identifier: MIT */
#pragma once

/* An issuer that lives in the agent: a CA key and certificate that sign certificates here, in
 * process. The local signer's embedded CA (ca-dir) is one, and so is the node intermediate that
 * signs workload certificates under the cfssl signer. Library-like: no logging. */

#include <stdbool.h>

#include "x509.h"

enum cert_usage {
        CERT_USAGE_CLIENT,        /* node credentials: clientAuth */
        CERT_USAGE_CLIENT_SERVER, /* workloads: clientAuth + serverAuth (mTLS both ways) */
        CERT_USAGE_CA,            /* an intermediate (pathlen 0) */
};

struct ca {
        EVP_PKEY *key;
        X509 *cert;
        STACK_OF(X509) *chain; /* cert, then its issuers up to (not including) the root */
        STACK_OF(X509) *roots; /* the trust anchors: the bundle pods get */
        /* ca_verify_issued(): the chain verified in full, and until when that holds (the first
         * notAfter of the chain and the roots). */
        usec_t chain_verified_until;
        /* Worked out once by ca_new(), being the same for every certificate issued: */
        bool name_constrained;      /* some certificate of the chain has name constraints */
        bool self_signed_root;      /* the chain is a self-signed root alone */
        X509_EXTENSION *leaf_aki;   /* authorityKeyIdentifier of what it signs (NULL: made per call) */
        usec_t not_after;           /* the CA certificate's (0: unreadable, checked per call) */
};

struct ca *ca_free(struct ca *ca);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct ca *, ca_free);

/* A CA from its parts (takes ownership of key, chain and roots; chain[0] is the CA cert). */
int ca_new(EVP_PKEY *key, STACK_OF(X509) *chain, STACK_OF(X509) *roots, struct ca **ret);

/* Loads dir/ca.key + dir/ca.crt, or creates a self-signed root there (key 0600) when neither
 * exists. A key without certificate, or a pair that does not match, is -EBADMSG: a CA is never
 * replaced behind the operator's back. *ret_created says whether it was made now. */
int ca_load_or_create(const char *dir, const char *common_name, struct ca **ret, bool *ret_created);

/* How far back notBefore is set (clock skew between peers). */
#define CA_BACKDATE (2 * USEC_PER_MINUTE)

/* Signs a certificate for pubkey with the subject and SANs of s, valid from now - CA_BACKDATE to
 * now + lifetime. A leaf's (not a CA's) public key is set by x509_set_pubkey(): written out the
 * certificate is complete, but X509_get0_pubkey() of this object is NULL for a P-256 key. */
int ca_issue(const struct ca *ca, EVP_PKEY *pubkey, const struct cert_subject *s, enum cert_usage usage,
             usec_t lifetime, X509 **ret);
/* Verifies leaf (from ca_issue) + ca->chain against ca->roots now: what a peer holding the
 * bundle will do. A chain that would not verify (an "intermediate" that is no CA, an expired
 * link) is never served. The first leaf is verified in full; what it proved of the chain is
 * kept until the chain's first notAfter, and later leaves are checked for what can differ
 * between them (their names against the chain's name constraints), a full verification being
 * mostly the cost of parsing the leaf again. 0 or -EBADMSG with a static *ret_reason. */
int ca_verify_issued(struct ca *ca, X509 *leaf, const char **ret_reason);
/* The chain a holder presents: leaf followed by ca->chain, as PEM. */
int ca_chain_pem(const struct ca *ca, X509 *leaf, char **ret);
