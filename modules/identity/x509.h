/* SPDX-License-Identifier: MIT */
#pragma once

/* Keys, CSRs and certificates with OpenSSL 3: EC P-256 keys, X509_REQ, PEM in and out, the
 * fields the module reads from a certificate, chain verification with an X509_STORE, and the
 * SubjectAltName the module puts on every certificate. Library-like: no logging, negative errno
 * (-EBADMSG for anything unparsable, -ENOMEM, -EINVAL for bad arguments). */

#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "macro.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY *, EVP_PKEY_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY_CTX *, EVP_PKEY_CTX_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(X509 *, X509_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(X509_REQ *, X509_REQ_free);
DEFINE_TRIVIAL_CLEANUP_FUNC(GENERAL_NAMES *, GENERAL_NAMES_free);
static inline void x509_chain_freep(STACK_OF(X509) **p) {
        if (*p)
                sk_X509_pop_free(*p, X509_free);
}

/* What a certificate asks for: subject, SANs, lifetime, usage. */
struct cert_subject {
        const char *common_name;
        const char *organization; /* may be NULL */
        const char *uri;          /* URI SAN (spiffe://...), may be NULL */
        const char *ip;           /* IP SAN, may be NULL */
        char *const *dns;         /* DNS SANs, NULL-terminated, may be NULL */
};

/* What we read back from a certificate. */
struct cert_info {
        usec_t not_before, not_after; /* CLOCK_REALTIME */
        char *subject;                /* "CN=...,O=..." (RFC 2253) */
        char *serial;                 /* hex */
        char **sans;                  /* "URI:spiffe://...", "IP:10.1.2.3", "DNS:..." */
};
void x509_cert_info_done(struct cert_info *i);

/* A fresh EC P-256 key. */
int x509_key_new(EVP_PKEY **ret);
/* The same from a prepared generator context (x509_keygen_new), for many keys in a row: saves
 * the algorithm lookup each EVP_EC_gen() does. */
int x509_keygen_new(EVP_PKEY_CTX **ret);
int x509_key_generate(EVP_PKEY_CTX *ctx, EVP_PKEY **ret);
/* Sets cert's subjectPublicKeyInfo to key's public half. For a P-256 key the certificate then
 * holds the encoding only (X509_get0_pubkey() of it is NULL until it is parsed again): enough to
 * sign, write out and compare with x509_key_matches(), which is all a certificate just issued
 * needs; OpenSSL's chain verification wants it parsed again. */
int x509_set_pubkey(X509 *cert, EVP_PKEY *key);
/* PKCS#8 PEM. The string holds private key material: the caller wipes it (x509_free_secret). */
int x509_key_to_pem(EVP_PKEY *key, char **ret);
/* The same for a P-256 key whose public point cert already carries (x509_set_pubkey() put it
 * there): the point is taken from cert rather than encoded from the key a second time. */
int x509_key_to_pem_for(EVP_PKEY *key, X509 *cert, char **ret);
int x509_key_from_pem(const char *pem, size_t size, EVP_PKEY **ret);
/* Frees a string holding key material after wiping it. Returns NULL. */
char *x509_free_secret(char *s);

/* The SubjectAltName names for s (URI and IP); NULL-free empty stack if neither. */
int x509_general_names(const struct cert_subject *s, GENERAL_NAMES **ret);

/* A CSR signed with key, carrying the subject and SANs of s. */
int x509_csr_new(EVP_PKEY *key, const struct cert_subject *s, X509_REQ **ret);
int x509_csr_to_pem(X509_REQ *req, char **ret);
int x509_cert_to_pem(X509 *cert, char **ret);
/* Every certificate of a PEM text, in order; -EBADMSG if there is none or one does not parse. */
int x509_chain_from_pem(const char *pem, size_t size, STACK_OF(X509) **ret);
/* The chain back to PEM. */
int x509_chain_to_pem(STACK_OF(X509) *chain, char **ret);

int x509_cert_info(X509 *cert, struct cert_info *ret);
/* x509_cert_info() of the first certificate of a PEM text; -EBADMSG if it has none. */
int x509_leaf_info(const char *pem, struct cert_info *ret);
/* 1 if key is the private half of cert's public key, 0 if not. */
int x509_key_matches(X509 *cert, EVP_PKEY *key);
/* Verifies chain[0] through chain[1..] up to one of roots (each a trust anchor, self-signed or
 * not), at time `at` (CLOCK_REALTIME; 0 = now). 0 or -EBADMSG with *ret_reason (static string from OpenSSL) if given. */
int x509_verify_chain(STACK_OF(X509) *chain, STACK_OF(X509) *roots, usec_t at, const char **ret_reason);
/* 1 if cert may issue certificates: basicConstraints CA:TRUE (X509_check_ca() == 1) and a
 * keyUsage extension with keyCertSign; 0 if not. */
int x509_is_issuing_ca(X509 *cert);
/* The clock rules for a newly issued certificate: notBefore at most CERT_MAX_FUTURE ahead of now
 * (a CA with a clock far ahead must not replace a certificate that works today), and, when it is
 * to replace one that is still valid (current_not_after > 0), a later notAfter than that one's.
 * 0, or -EBADMSG with a static *ret_reason. */
#define CERT_MAX_FUTURE (5 * USEC_PER_MINUTE)
int x509_cert_check_times(const struct cert_info *i, usec_t current_not_after, usec_t now, const char **ret_reason);
/* What a certificate held across a step of the wall clock needs, judged at now:
 *  CERT_CLOCK_KEEP   its rotation point (rotate_at) is still ahead: it stays;
 *  CERT_CLOCK_DUE    now is at or past rotate_at (a step forward, expired or not): renew at once;
 *  CERT_CLOCK_AHEAD  its notBefore is more than CERT_MAX_FUTURE ahead of now (it was issued
 *                    before a step back): peers on the right time do not accept it yet, so it is
 *                    replaced at once, and the replacement may expire before it does.
 * The skew rule this completes: signers backdate notBefore (the local CA by CA_BACKDATE, 2 min;
 * cfssl and the kube-controller-manager by 5 min), a new certificate is refused if its
 * notBefore is more than CERT_MAX_FUTURE ahead, and one held is replaced on the same bound. */
enum cert_clock_verdict { CERT_CLOCK_KEEP, CERT_CLOCK_DUE, CERT_CLOCK_AHEAD };
enum cert_clock_verdict x509_clock_verdict(const struct cert_info *i, usec_t rotate_at, usec_t now);
/* A SHA-256 fingerprint of the public key, hex, first `n` bytes (for stable names). */
int x509_key_fingerprint(EVP_PKEY *key, size_t n, char **ret);
/* Hex of buf. */
char *x509_hex_encode(const unsigned char *buf, size_t n);
