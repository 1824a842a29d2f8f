/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/x509v3.h>

#include "ca.h"
#include "fs.h"

#define CA_LIFETIME (10ULL * 365 * 24 * USEC_PER_HOUR)

struct ca *ca_free(struct ca *ca) {
        if (!ca)
                return NULL;
        EVP_PKEY_free(ca->key);
        X509_free(ca->cert);
        sk_X509_pop_free(ca->chain, X509_free);
        sk_X509_pop_free(ca->roots, X509_free);
        X509_EXTENSION_free(ca->leaf_aki);
        free(ca);
        return NULL;
}

static X509_EXTENSION *make_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
        X509V3_CTX ctx;
        X509V3_set_ctx_nodb(&ctx);
        X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
        return X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
}

/* What every certificate this CA issues shares, worked out once. */
static void ca_precompute(struct ca *ca) {
        for (int i = 0; i < sk_X509_num(ca->chain); i++)
                if (X509_get_ext_by_NID(sk_X509_value(ca->chain, i), NID_name_constraints, -1) >= 0)
                        ca->name_constrained = true;
        ca->self_signed_root = sk_X509_num(ca->chain) == 1 && X509_check_issued(ca->cert, ca->cert) == X509_V_OK;
        /* The issuer's key identifier: the subject plays no part in it. */
        ca->leaf_aki = make_ext(NULL, ca->cert, NID_authority_key_identifier, "keyid:always");
        struct tm tm;
        if (ASN1_TIME_to_tm(X509_get0_notAfter(ca->cert), &tm) == 1 && timegm(&tm) > 0)
                ca->not_after = (usec_t) timegm(&tm) * USEC_PER_SEC;
        ERR_clear_error();
}

int ca_new(EVP_PKEY *key, STACK_OF(X509) *chain, STACK_OF(X509) *roots, struct ca **ret) {
        struct ca *ca = calloc(1, sizeof(*ca));
        if (!ca || sk_X509_num(chain) < 1) {
                free(ca);
                EVP_PKEY_free(key);
                sk_X509_pop_free(chain, X509_free);
                sk_X509_pop_free(roots, X509_free);
                return ca ? -EINVAL : -ENOMEM;
        }
        ca->key = key;
        ca->chain = chain;
        ca->roots = roots;
        ca->cert = sk_X509_value(chain, 0);
        X509_up_ref(ca->cert);
        ca_precompute(ca);
        *ret = ca;
        return 0;
}

static int add_ext(X509 *cert, X509 *issuer, int nid, const char *value) {
        X509_EXTENSION *ext = make_ext(cert, issuer, nid, value);
        if (!ext)
                return -ENOMEM;
        int r = X509_add_ext(cert, ext, -1);
        X509_EXTENSION_free(ext);
        return r == 1 ? 0 : -ENOMEM;
}

static int set_serial(X509 *cert) {
        unsigned char buf[16];
        if (RAND_bytes(buf, sizeof(buf)) != 1)
                return -EIO;
        buf[0] &= 0x7f; /* positive */
        buf[0] |= 0x01; /* and never shorter than 16 bytes' worth of randomness suggests */
        BIGNUM *bn = BN_bin2bn(buf, sizeof(buf), NULL);
        if (!bn)
                return -ENOMEM;
        int ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert)) != NULL;
        BN_free(bn);
        return ok ? 0 : -ENOMEM;
}

/* A certificate skeleton: version 3, random serial, subject, validity [now-CA_BACKDATE, now+lifetime]. */
static int cert_skeleton(EVP_PKEY *pubkey, const struct cert_subject *s, usec_t lifetime, bool leaf, X509 **ret) {
        X509 *cert = X509_new();
        int r = -ENOMEM;

        if (!cert)
                goto fail;
        /* Filled in place (X509_set_subject_name() would copy a name through DER and back). */
        X509_NAME *name = X509_get_subject_name(cert);
        if ((s->organization && X509_NAME_add_entry_by_NID(name, NID_organizationName, MBSTRING_UTF8,
                                                           (const unsigned char *) s->organization, -1, -1, 0) != 1) ||
            X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8, (const unsigned char *) s->common_name, -1, -1,
                                       0) != 1) {
                r = -EINVAL;
                goto fail;
        }
        if (X509_set_version(cert, 2) != 1 ||
            (leaf ? x509_set_pubkey(cert, pubkey) < 0 : X509_set_pubkey(cert, pubkey) != 1))
                goto fail;
        r = set_serial(cert);
        if (r < 0)
                goto fail;
        /* notBefore a little in the past: a peer whose clock is behind ours still accepts it. */
        if (!X509_gmtime_adj(X509_getm_notBefore(cert), -(long) (CA_BACKDATE / USEC_PER_SEC)) ||
            !X509_time_adj_ex(X509_getm_notAfter(cert), 0, (long) (lifetime / USEC_PER_SEC), NULL)) {
                r = -ENOMEM;
                goto fail;
        }
        *ret = cert;
        return 0;
fail:
        ERR_clear_error();
        X509_free(cert);
        return r;
}

static int add_ca_extensions(const struct ca *ca, X509 *cert) {
        int r;
        if ((r = add_ext(cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0")) < 0 ||
            (r = add_ext(cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign")) < 0 ||
            (r = add_ext(cert, ca->cert, NID_subject_key_identifier, "hash")) < 0 ||
            (r = add_ext(cert, ca->cert, NID_authority_key_identifier, "keyid:always")) < 0)
                return r;
        return 0;
}

static int add_i2d(X509 *cert, int nid, void *value, bool critical) {
        return value && X509_add1_ext_i2d(cert, nid, value, critical, X509V3_ADD_APPEND) == 1 ? 0 : -ENOMEM;
}

/* A leaf's extensions, the same as add_ext() makes from "critical,CA:FALSE",
 * "critical,digitalSignature", "clientAuth[,serverAuth]", "hash" and "keyid:always", built from
 * their structures rather than parsed from text for every certificate. */
static int add_leaf_extensions(const struct ca *ca, X509 *cert, enum cert_usage usage) {
        BASIC_CONSTRAINTS *bc = BASIC_CONSTRAINTS_new();
        ASN1_BIT_STRING *ku = ASN1_BIT_STRING_new();
        EXTENDED_KEY_USAGE *eku = sk_ASN1_OBJECT_new_null();
        ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
        const ASN1_BIT_STRING *pub = X509_get0_pubkey_bitstr(cert);
        unsigned char md[SHA_DIGEST_LENGTH];
        int r = -ENOMEM;

        if (!bc || !ku || !eku || !ski || !pub || ASN1_BIT_STRING_set_bit(ku, 0, 1) != 1 ||
            !sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_client_auth)) ||
            (usage == CERT_USAGE_CLIENT_SERVER && !sk_ASN1_OBJECT_push(eku, OBJ_nid2obj(NID_server_auth))) ||
            !EVP_Digest(ASN1_STRING_get0_data(pub), (size_t) ASN1_STRING_length(pub), md, NULL, EVP_sha1(), NULL) ||
            ASN1_OCTET_STRING_set(ski, md, sizeof(md)) != 1)
                goto finish;
        if (add_i2d(cert, NID_basic_constraints, bc, true) < 0 || add_i2d(cert, NID_key_usage, ku, true) < 0 ||
            add_i2d(cert, NID_ext_key_usage, eku, false) < 0 || add_i2d(cert, NID_subject_key_identifier, ski, false) < 0)
                goto finish;
        r = ca->leaf_aki ? (X509_add_ext(cert, ca->leaf_aki, -1) == 1 ? 0 : -ENOMEM)
                         : add_ext(cert, ca->cert, NID_authority_key_identifier, "keyid:always");
finish:
        ERR_clear_error();
        BASIC_CONSTRAINTS_free(bc);
        ASN1_BIT_STRING_free(ku);
        sk_ASN1_OBJECT_free(eku); /* the objects are OpenSSL's static ones */
        ASN1_OCTET_STRING_free(ski);
        return r;
}

int ca_issue(const struct ca *ca, EVP_PKEY *pubkey, const struct cert_subject *s, enum cert_usage usage,
             usec_t lifetime, X509 **ret) {
        _cleanup_(X509_freep) X509 *cert = NULL;
        int r;

        /* An expired issuer would only make certificates that are dead on arrival. */
        if (ca->not_after > 0 ? now_usec(CLOCK_REALTIME) >= ca->not_after
                              : X509_cmp_current_time(X509_get0_notAfter(ca->cert)) <= 0)
                return -EKEYEXPIRED;
        /* Never past the issuer's own end: a chain is only as valid as its shortest link. */
        r = cert_skeleton(pubkey, s, lifetime, usage != CERT_USAGE_CA, &cert);
        if (r < 0)
                return r;
        if (ASN1_TIME_compare(X509_get0_notAfter(cert), X509_get0_notAfter(ca->cert)) > 0 &&
            X509_set1_notAfter(cert, X509_get0_notAfter(ca->cert)) != 1)
                return -ENOMEM;
        if (X509_set_issuer_name(cert, X509_get_subject_name(ca->cert)) != 1)
                return -ENOMEM;

        r = usage == CERT_USAGE_CA ? add_ca_extensions(ca, cert) : add_leaf_extensions(ca, cert, usage);
        if (r < 0)
                return r;
        if (s->uri || s->ip) {
                _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *gens = NULL;
                r = x509_general_names(s, &gens);
                if (r < 0)
                        return r;
                if (X509_add1_ext_i2d(cert, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) != 1)
                        return -ENOMEM;
        }
        if (X509_sign(cert, ca->key, EVP_sha256()) <= 0) {
                ERR_clear_error();
                return -EINVAL;
        }
        *ret = TAKE_PTR(cert);
        return 0;
}

static int make_root(const char *common_name, EVP_PKEY **ret_key, X509 **ret_cert) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL;
        const struct cert_subject s = { .common_name = common_name, .organization = "pinion" };
        int r;

        r = x509_key_new(&key);
        if (r < 0)
                return r;
        r = cert_skeleton(key, &s, CA_LIFETIME, false, &cert);
        if (r < 0)
                return r;
        if (X509_set_issuer_name(cert, X509_get_subject_name(cert)) != 1)
                return -ENOMEM;
        if ((r = add_ext(cert, cert, NID_basic_constraints, "critical,CA:TRUE")) < 0 ||
            (r = add_ext(cert, cert, NID_key_usage, "critical,keyCertSign,cRLSign")) < 0 ||
            (r = add_ext(cert, cert, NID_subject_key_identifier, "hash")) < 0)
                return r;
        if (X509_sign(cert, key, EVP_sha256()) <= 0) {
                ERR_clear_error();
                return -EINVAL;
        }
        *ret_key = TAKE_PTR(key);
        *ret_cert = TAKE_PTR(cert);
        return 0;
}

int ca_load_or_create(const char *dir, const char *common_name, struct ca **ret, bool *ret_created) {
        _cleanup_free_ char *key_path = fs_path_join(dir, "ca.key"), *cert_path = fs_path_join(dir, "ca.crt");
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL, *roots = NULL;
        bool created = false;
        int r;

        if (!key_path || !cert_path)
                return -ENOMEM;
        bool have_key = access(key_path, F_OK) >= 0, have_cert = access(cert_path, F_OK) >= 0;
        if (!have_key && !have_cert) {
                _cleanup_(X509_freep) X509 *cert = NULL;
                _cleanup_free_ char *cert_pem = NULL;
                char *key_pem = NULL;

                r = fs_mkdir_p(dir, 0700);
                if (r < 0)
                        return r;
                r = make_root(common_name, &key, &cert);
                if (r < 0)
                        return r;
                r = x509_key_to_pem(key, &key_pem);
                if (r < 0)
                        return r;
                r = x509_cert_to_pem(cert, &cert_pem);
                if (r < 0) {
                        x509_free_secret(key_pem);
                        return r;
                }
                /* The key first: a kill between the two leaves a key without certificate, which
                 * the next start reports instead of silently making a second CA. */
                r = fs_write_file_atomic(key_path, key_pem, strlen(key_pem), 0600, (uid_t) -1, (gid_t) -1);
                x509_free_secret(key_pem);
                if (r < 0)
                        return r;
                r = fs_write_file_atomic(cert_path, cert_pem, strlen(cert_pem), 0644, (uid_t) -1, (gid_t) -1);
                if (r < 0)
                        return r;
                created = true;
        } else if (!have_key || !have_cert)
                return -EBADMSG;

        _cleanup_free_ char *cert_pem = NULL;
        char *key_pem = NULL;
        size_t n;
        r = fs_read_file_full(key_path, 64 * 1024, &key_pem, &n);
        if (r < 0)
                return r;
        if (!key)
                r = x509_key_from_pem(key_pem, n, &key);
        x509_free_secret(key_pem);
        if (r < 0)
                return r;
        r = fs_read_file_full(cert_path, 1024 * 1024, &cert_pem, &n);
        if (r < 0)
                return r;
        r = x509_chain_from_pem(cert_pem, n, &chain);
        if (r < 0)
                return r;
        if (!x509_key_matches(sk_X509_value(chain, 0), key))
                return -EBADMSG;
        /* The root of this chain is the trust anchor (a self-signed CA: itself). */
        r = x509_chain_from_pem(cert_pem, n, &roots);
        if (r < 0)
                return r;
        while (sk_X509_num(roots) > 1)
                X509_free(sk_X509_shift(roots));
        r = ca_new(TAKE_PTR(key), TAKE_PTR(chain), TAKE_PTR(roots), ret);
        if (r < 0)
                return r;
        if (ret_created)
                *ret_created = created;
        return 0;
}

/* The leaf's names against every name constraint of the chain above it. */
static int check_name_constraints(const struct ca *ca, X509 *leaf, const char **ret_reason) {
        /* Caches the leaf's extensions (its SANs), which NAME_CONSTRAINTS_check() reads. */
        if (X509_check_purpose(leaf, -1, 0) != 1) {
                ERR_clear_error();
                return -ENOMEM;
        }
        for (int i = 0; i < sk_X509_num(ca->chain); i++) {
                NAME_CONSTRAINTS *nc = X509_get_ext_d2i(sk_X509_value(ca->chain, i), NID_name_constraints, NULL, NULL);
                int r = nc ? NAME_CONSTRAINTS_check(leaf, nc) : X509_V_OK;

                NAME_CONSTRAINTS_free(nc);
                ERR_clear_error();
                if (r != X509_V_OK) {
                        if (ret_reason)
                                *ret_reason = X509_verify_cert_error_string(r);
                        return -EBADMSG;
                }
        }
        return 0;
}

/* The first notAfter of the chain and the roots: until then, a chain that verified still does. */
static usec_t chain_not_after(const struct ca *ca) {
        usec_t until = USEC_INFINITY;
        STACK_OF(X509) *const sets[] = { ca->chain, ca->roots };

        for (size_t s = 0; s < ELEMENTSOF(sets); s++)
                for (int i = 0; i < sk_X509_num(sets[s]); i++) {
                        struct tm tm;
                        if (ASN1_TIME_to_tm(X509_get0_notAfter(sk_X509_value(sets[s], i)), &tm) != 1)
                                return 0;
                        until = MIN(until, (usec_t) timegm(&tm) * USEC_PER_SEC);
                }
        return until;
}

/* leaf + ca->chain verified by OpenSSL, on a copy of leaf parsed from its DER (ca_issue() left
 * its key encoded only). */
static int verify_full(const struct ca *ca, X509 *leaf, const char **ret_reason) {
        _cleanup_(X509_freep) X509 *parsed = NULL;
        unsigned char *der = NULL;
        const unsigned char *p;
        int n = i2d_X509(leaf, &der), r = -ENOMEM;

        if (n <= 0) {
                ERR_clear_error();
                return -ENOMEM;
        }
        p = der;
        parsed = d2i_X509(NULL, &p, n);
        OPENSSL_free(der);
        if (!parsed) {
                ERR_clear_error();
                return -ENOMEM;
        }

        STACK_OF(X509) *chain = sk_X509_new_null();
        if (chain && sk_X509_push(chain, parsed)) {
                r = 0;
                for (int i = 0; r == 0 && i < sk_X509_num(ca->chain); i++)
                        if (!sk_X509_push(chain, sk_X509_value(ca->chain, i)))
                                r = -ENOMEM;
                if (r == 0)
                        r = x509_verify_chain(chain, ca->roots, 0, ret_reason);
        }
        sk_X509_free(chain); /* borrowed certificates */
        return r;
}

int ca_verify_issued(struct ca *ca, X509 *leaf, const char **ret_reason) {
        usec_t now = now_usec(CLOCK_REALTIME);
        int r;

        if (now < ca->chain_verified_until)
                return ca->name_constrained ? check_name_constraints(ca, leaf, ret_reason) : 0;
        r = verify_full(ca, leaf, ret_reason);
        if (r < 0)
                return r;
        ca->chain_verified_until = chain_not_after(ca);
        return 0;
}

int ca_chain_pem(const struct ca *ca, X509 *leaf, char **ret) {
        _cleanup_free_ char *a = NULL, *b = NULL;
        int r = x509_cert_to_pem(leaf, &a);
        if (r < 0)
                return r;
        /* A self-signed root is not sent along: the peer has it in its bundle. */
        if (ca->self_signed_root) {
                *ret = TAKE_PTR(a);
                return 0;
        }
        r = x509_chain_to_pem(ca->chain, &b);
        if (r < 0)
                return r;
        char *s = malloc(strlen(a) + strlen(b) + 1);
        if (!s)
                return -ENOMEM;
        strcpy(stpcpy(s, a), b);
        *ret = s;
        return 0;
}
