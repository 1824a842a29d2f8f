/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include "strv.h"
#include "x509.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(BIO *, BIO_free);

void x509_cert_info_done(struct cert_info *i) {
        if (!i)
                return;
        free(i->subject);
        free(i->serial);
        strv_free(i->sans);
        *i = (struct cert_info) {};
}

char *x509_hex_encode(const unsigned char *buf, size_t n) {
        static const char digits[] = "0123456789abcdef";
        char *s = malloc(n * 2 + 1);
        if (!s)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                s[2 * i] = digits[buf[i] >> 4];
                s[2 * i + 1] = digits[buf[i] & 15];
        }
        s[2 * n] = 0;
        return s;
}

char *x509_free_secret(char *s) {
        if (s) {
                OPENSSL_cleanse(s, strlen(s));
                free(s);
        }
        return NULL;
}

int x509_key_new(EVP_PKEY **ret) {
        EVP_PKEY *k = EVP_EC_gen("P-256");
        if (!k)
                return -ENOMEM;
        *ret = k;
        return 0;
}

int x509_keygen_new(EVP_PKEY_CTX **ret) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
        if (!ctx || EVP_PKEY_keygen_init(ctx) <= 0 || EVP_PKEY_CTX_set_group_name(ctx, "P-256") <= 0) {
                ERR_clear_error();
                return -ENOMEM;
        }
        *ret = TAKE_PTR(ctx);
        return 0;
}

int x509_key_generate(EVP_PKEY_CTX *ctx, EVP_PKEY **ret) {
        EVP_PKEY *k = NULL;
        if (EVP_PKEY_generate(ctx, &k) <= 0) {
                ERR_clear_error();
                return -ENOMEM;
        }
        *ret = k;
        return 0;
}

/* The BIO's contents as a malloc'ed string. */
static int bio_to_string(BIO *b, char **ret) {
        char *data;
        long n = BIO_get_mem_data(b, &data);
        if (n < 0)
                return -ENOMEM;
        char *s = malloc((size_t) n + 1);
        if (!s)
                return -ENOMEM;
        memcpy(s, data, (size_t) n);
        s[n] = 0;
        *ret = s;
        return 0;
}

/* A P-256 key's private scalar (32 bytes) and uncompressed point (65 bytes); 0 if key is not one. */
static int p256_key_parts(EVP_PKEY *key, unsigned char priv[32], unsigned char point[65]) {
        char group[64];
        size_t len = 0;
        BIGNUM *d = NULL;
        int r = 0;

        if (!EVP_PKEY_is_a(key, "EC") || EVP_PKEY_get_group_name(key, group, sizeof(group), NULL) != 1 ||
            OBJ_txt2nid(group) != NID_X9_62_prime256v1 ||
            EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, point, 65, &len) != 1 ||
            len != 65 || point[0] != 0x04)
                goto finish;
        if (priv) {
                if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &d) != 1 || BN_bn2binpad(d, priv, 32) != 32)
                        goto finish;
        }
        r = 1;
finish:
        BN_clear_free(d);
        ERR_clear_error();
        return r;
}

/* PKCS#8 of a P-256 key, laid out as OpenSSL writes it (RFC 5208 PrivateKeyInfo around an RFC
 * 5915 ECPrivateKey without parameters, the curve being in the algorithm): a fixed 138 bytes,
 * the scalar and the point at fixed offsets. */
#define P256_PKCS8_SIZE 138
#define P256_PKCS8_PRIV 36
#define P256_PKCS8_POINT 73
static const unsigned char p256_pkcs8_head[P256_PKCS8_PRIV] = {
        0x30, 0x81, 0x87, 0x02, 0x01, 0x00, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06,
        0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x04, 0x6d, 0x30, 0x6b, 0x02, 0x01, 0x01, 0x04, 0x20,
};
static const unsigned char p256_pkcs8_mid[] = { 0xa1, 0x44, 0x03, 0x42, 0x00 };

/* PEM of DER under label, base64 in lines of 64 as PEM_write does. */
static int pem_encode(const char *label, const unsigned char *der, size_t n, char **ret) {
        size_t b64 = 4 * ((n + 2) / 3), lines = (b64 + 63) / 64;
        size_t size = 2 * strlen(label) + 32 + b64 + lines + 1;
        char *out = malloc(size), *p;

        if (!out)
                return -ENOMEM;
        p = out + sprintf(out, "-----BEGIN %s-----\n", label);
        for (size_t off = 0; off < n; off += 48) {
                p += EVP_EncodeBlock((unsigned char *) p, der + off, (int) MIN(n - off, (size_t) 48));
                *p++ = '\n';
        }
        sprintf(p, "-----END %s-----\n", label);
        *ret = out;
        return 0;
}

/* OpenSSL 3.0 writes a provider key through its encoder framework, whose set-up (a search of
 * every provider's encoders) costs more than making the key: the P-256 keys this module makes
 * are written from their parts, byte for byte what PEM_write_bio_PrivateKey() writes. */
static int p256_key_to_pem(EVP_PKEY *key, char **ret) {
        unsigned char der[P256_PKCS8_SIZE];
        int r;

        if (!p256_key_parts(key, der + P256_PKCS8_PRIV, der + P256_PKCS8_POINT))
                return 0;
        memcpy(der, p256_pkcs8_head, sizeof(p256_pkcs8_head));
        memcpy(der + P256_PKCS8_PRIV + 32, p256_pkcs8_mid, sizeof(p256_pkcs8_mid));
        r = pem_encode("PRIVATE KEY", der, sizeof(der), ret);
        OPENSSL_cleanse(der, sizeof(der));
        return r < 0 ? r : 1;
}

int x509_key_to_pem_for(EVP_PKEY *key, X509 *cert, char **ret) {
        const ASN1_BIT_STRING *bits = X509_get0_pubkey_bitstr(cert);
        unsigned char der[P256_PKCS8_SIZE];
        BIGNUM *d = NULL;
        int r;

        if (!bits || ASN1_STRING_length(bits) != 65 || ASN1_STRING_get0_data(bits)[0] != 0x04 ||
            !EVP_PKEY_is_a(key, "EC") || EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_PRIV_KEY, &d) != 1 ||
            BN_bn2binpad(d, der + P256_PKCS8_PRIV, 32) != 32) {
                BN_clear_free(d);
                ERR_clear_error();
                return x509_key_to_pem(key, ret);
        }
        BN_clear_free(d);
        memcpy(der, p256_pkcs8_head, sizeof(p256_pkcs8_head));
        memcpy(der + P256_PKCS8_PRIV + 32, p256_pkcs8_mid, sizeof(p256_pkcs8_mid));
        memcpy(der + P256_PKCS8_POINT, ASN1_STRING_get0_data(bits), 65);
        r = pem_encode("PRIVATE KEY", der, sizeof(der), ret);
        OPENSSL_cleanse(der, sizeof(der));
        return r;
}

int x509_set_pubkey(X509 *cert, EVP_PKEY *key) {
        unsigned char point[65], *copy;

        /* X509_set_pubkey() encodes the key and decodes it again through OpenSSL 3.0's encoder
         * and decoder frameworks (most of the cost of issuing a certificate): a P-256 key's
         * SubjectPublicKeyInfo is set from its point directly. */
        if (!p256_key_parts(key, NULL, point))
                return X509_set_pubkey(cert, key) == 1 ? 0 : -ENOMEM;
        copy = OPENSSL_memdup(point, sizeof(point));
        if (!copy)
                return -ENOMEM;
        if (X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(cert), OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT,
                                   OBJ_nid2obj(NID_X9_62_prime256v1), copy, (int) sizeof(point)) != 1) {
                OPENSSL_free(copy);
                return -ENOMEM;
        }
        return 0;
}

int x509_key_to_pem(EVP_PKEY *key, char **ret) {
        int r = p256_key_to_pem(key, ret);
        if (r != 0)
                return r < 0 ? r : 0;
        /* A secure-heap-less mem BIO: wipe it before freeing. */
        BIO *b = BIO_new(BIO_s_mem());
        if (!b)
                return -ENOMEM;
        if (PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL) != 1)
                r = -ENOMEM;
        else
                r = bio_to_string(b, ret);
        char *data;
        long n = BIO_get_mem_data(b, &data);
        if (n > 0)
                OPENSSL_cleanse(data, (size_t) n);
        BIO_free(b);
        return r;
}

int x509_key_from_pem(const char *pem, size_t size, EVP_PKEY **ret) {
        if (size > INT_MAX)
                return -EBADMSG;
        _cleanup_(BIO_freep) BIO *b = BIO_new_mem_buf(pem, (int) size);
        if (!b)
                return -ENOMEM;
        EVP_PKEY *k = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        ERR_clear_error();
        if (!k)
                return -EBADMSG;
        if (EVP_PKEY_get_base_id(k) != EVP_PKEY_EC) {
                EVP_PKEY_free(k);
                return -EBADMSG;
        }
        *ret = k;
        return 0;
}

/* A URI or DNS name (both IA5 strings). */
static int push_ia5_name(GENERAL_NAMES *gens, int type, const char *text) {
        GENERAL_NAME *g = GENERAL_NAME_new();
        ASN1_IA5STRING *str = ASN1_IA5STRING_new();
        if (!g || !str || ASN1_STRING_set(str, text, -1) != 1) {
                GENERAL_NAME_free(g);
                ASN1_IA5STRING_free(str);
                return -ENOMEM;
        }
        GENERAL_NAME_set0_value(g, type, str);
        if (!sk_GENERAL_NAME_push(gens, g)) {
                GENERAL_NAME_free(g);
                return -ENOMEM;
        }
        return 0;
}

int x509_general_names(const struct cert_subject *s, GENERAL_NAMES **ret) {
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *gens = sk_GENERAL_NAME_new_null();
        int r;

        if (!gens)
                return -ENOMEM;
        if (s->uri && (r = push_ia5_name(gens, GEN_URI, s->uri)) < 0)
                return r;
        for (char *const *d = s->dns; d && *d; d++)
                if ((r = push_ia5_name(gens, GEN_DNS, *d)) < 0)
                        return r;
        if (s->ip) {
                ASN1_OCTET_STRING *ip = a2i_IPADDRESS(s->ip);
                ERR_clear_error();
                if (!ip)
                        return -EINVAL;
                GENERAL_NAME *g = GENERAL_NAME_new();
                if (!g) {
                        ASN1_OCTET_STRING_free(ip);
                        return -ENOMEM;
                }
                GENERAL_NAME_set0_value(g, GEN_IPADD, ip);
                if (!sk_GENERAL_NAME_push(gens, g)) {
                        GENERAL_NAME_free(g);
                        return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(gens);
        return 0;
}

static int subject_name(const struct cert_subject *s, X509_NAME **ret) {
        X509_NAME *n = X509_NAME_new();
        if (!n)
                return -ENOMEM;
        if ((s->organization &&
             X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8, (const unsigned char *) s->organization, -1, -1, 0) != 1) ||
            X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *) s->common_name, -1, -1, 0) != 1) {
                X509_NAME_free(n);
                ERR_clear_error();
                return -EINVAL;
        }
        *ret = n;
        return 0;
}

int x509_csr_new(EVP_PKEY *key, const struct cert_subject *s, X509_REQ **ret) {
        _cleanup_(X509_REQ_freep) X509_REQ *req = X509_REQ_new();
        X509_NAME *name = NULL;
        int r;

        if (!req)
                return -ENOMEM;
        r = subject_name(s, &name);
        if (r < 0)
                return r;
        r = X509_REQ_set_subject_name(req, name);
        X509_NAME_free(name);
        if (r != 1 || X509_REQ_set_version(req, 0) != 1 || X509_REQ_set_pubkey(req, key) != 1)
                return -ENOMEM;
        if (s->uri || s->ip) {
                _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *gens = NULL;
                STACK_OF(X509_EXTENSION) *exts = NULL;
                r = x509_general_names(s, &gens);
                if (r < 0)
                        return r;
                if (X509V3_add1_i2d(&exts, NID_subject_alt_name, gens, 0, X509V3_ADD_DEFAULT) != 1)
                        return -ENOMEM;
                r = X509_REQ_add_extensions(req, exts);
                sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
                if (r != 1)
                        return -ENOMEM;
        }
        if (X509_REQ_sign(req, key, EVP_sha256()) <= 0) {
                ERR_clear_error();
                return -EINVAL;
        }
        *ret = TAKE_PTR(req);
        return 0;
}

int x509_csr_to_pem(X509_REQ *req, char **ret) {
        _cleanup_(BIO_freep) BIO *b = BIO_new(BIO_s_mem());
        if (!b || PEM_write_bio_X509_REQ(b, req) != 1)
                return -ENOMEM;
        return bio_to_string(b, ret);
}

int x509_cert_to_pem(X509 *cert, char **ret) {
        /* What PEM_write_bio_X509() writes, without its BIO and encoder context per call. */
        unsigned char *der = NULL;
        int n = i2d_X509(cert, &der), r;

        if (n <= 0) {
                ERR_clear_error();
                return -ENOMEM;
        }
        r = pem_encode("CERTIFICATE", der, (size_t) n, ret);
        OPENSSL_free(der);
        return r;
}

int x509_chain_to_pem(STACK_OF(X509) *chain, char **ret) {
        _cleanup_(BIO_freep) BIO *b = BIO_new(BIO_s_mem());
        if (!b)
                return -ENOMEM;
        for (int i = 0; i < sk_X509_num(chain); i++)
                if (PEM_write_bio_X509(b, sk_X509_value(chain, i)) != 1)
                        return -ENOMEM;
        return bio_to_string(b, ret);
}

int x509_chain_from_pem(const char *pem, size_t size, STACK_OF(X509) **ret) {
        if (size > INT_MAX)
                return -EBADMSG;
        _cleanup_(BIO_freep) BIO *b = BIO_new_mem_buf(pem, (int) size);
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = sk_X509_new_null();
        if (!b || !chain)
                return -ENOMEM;
        for (;;) {
                X509 *c = PEM_read_bio_X509(b, NULL, NULL, NULL);
                if (!c) {
                        unsigned long e = ERR_peek_last_error();
                        ERR_clear_error();
                        /* The normal end is "no start line" after at least one certificate. */
                        if (sk_X509_num(chain) > 0 && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)
                                break;
                        return -EBADMSG;
                }
                if (!sk_X509_push(chain, c)) {
                        X509_free(c);
                        return -ENOMEM;
                }
        }
        *ret = TAKE_PTR(chain);
        return 0;
}

int x509_leaf_info(const char *pem, struct cert_info *ret) {
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL;
        int r = x509_chain_from_pem(pem, strlen(pem), &chain);
        if (r < 0)
                return r;
        return x509_cert_info(sk_X509_value(chain, 0), ret);
}

static int asn1_time_to_usec(const ASN1_TIME *t, usec_t *ret) {
        struct tm tm;
        if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
                return -EBADMSG;
        time_t s = timegm(&tm);
        if (s < 0)
                return -EBADMSG;
        *ret = (usec_t) s * USEC_PER_SEC;
        return 0;
}

int x509_cert_info(X509 *cert, struct cert_info *ret) {
        struct cert_info i = {};
        int r;

        r = asn1_time_to_usec(X509_get0_notBefore(cert), &i.not_before);
        if (r < 0)
                return r;
        r = asn1_time_to_usec(X509_get0_notAfter(cert), &i.not_after);
        if (r < 0)
                return r;

        _cleanup_(BIO_freep) BIO *b = BIO_new(BIO_s_mem());
        if (!b || X509_NAME_print_ex(b, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) < 0 ||
            bio_to_string(b, &i.subject) < 0)
                goto oom;

        BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL);
        char *hex = bn ? BN_bn2hex(bn) : NULL;
        BN_free(bn);
        if (!hex)
                goto oom;
        i.serial = strdup(hex);
        OPENSSL_free(hex);
        if (!i.serial)
                goto oom;

        i.sans = calloc(1, sizeof(char *));
        if (!i.sans)
                goto oom;
        GENERAL_NAMES *gens = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
        for (int k = 0; gens && k < sk_GENERAL_NAME_num(gens); k++) {
                const GENERAL_NAME *g = sk_GENERAL_NAME_value(gens, k);
                _cleanup_free_ char *s = NULL;
                if (g->type == GEN_URI || g->type == GEN_DNS) {
                        const ASN1_IA5STRING *str = g->type == GEN_URI ? g->d.uniformResourceIdentifier : g->d.dNSName;
                        if (asprintf(&s, "%s:%.*s", g->type == GEN_URI ? "URI" : "DNS", ASN1_STRING_length(str),
                                     (const char *) ASN1_STRING_get0_data(str)) < 0)
                                s = NULL;
                } else if (g->type == GEN_IPADD) {
                        char ip[INET6_ADDRSTRLEN] = "";
                        int len = ASN1_STRING_length(g->d.iPAddress);
                        if ((len != 4 && len != 16) ||
                            !inet_ntop(len == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(g->d.iPAddress), ip, sizeof(ip)))
                                continue;
                        if (asprintf(&s, "IP:%s", ip) < 0)
                                s = NULL;
                } else
                        continue;
                if (!s || strv_push(&i.sans, TAKE_PTR(s)) < 0) {
                        GENERAL_NAMES_free(gens);
                        goto oom;
                }
        }
        GENERAL_NAMES_free(gens);
        ERR_clear_error();
        *ret = i;
        return 0;
oom:
        x509_cert_info_done(&i);
        ERR_clear_error();
        return -ENOMEM;
}

int x509_key_matches(X509 *cert, EVP_PKEY *key) {
        const ASN1_BIT_STRING *bits = X509_get0_pubkey_bitstr(cert);
        EVP_PKEY *decoded = X509_get0_pubkey(cert);
        unsigned char point[65];
        int r;

        ERR_clear_error();
        if (!decoded) /* set by x509_set_pubkey(): compare the encodings */
                return bits && p256_key_parts(key, NULL, point) && ASN1_STRING_length(bits) == (int) sizeof(point) &&
                       memcmp(ASN1_STRING_get0_data(bits), point, sizeof(point)) == 0;
        r = X509_check_private_key(cert, key);
        ERR_clear_error();
        return r == 1;
}

int x509_verify_chain(STACK_OF(X509) *chain, STACK_OF(X509) *roots, usec_t at, const char **ret_reason) {
        X509_STORE *store = X509_STORE_new();
        X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        STACK_OF(X509) *untrusted = NULL;
        int r = -ENOMEM;

        if (!store || !ctx || sk_X509_num(chain) < 1)
                goto finish;
        for (int i = 0; i < sk_X509_num(roots); i++)
                if (X509_STORE_add_cert(store, sk_X509_value(roots, i)) != 1)
                        goto finish;
        untrusted = sk_X509_new_null();
        if (!untrusted)
                goto finish;
        for (int i = 1; i < sk_X509_num(chain); i++)
                if (!sk_X509_push(untrusted, sk_X509_value(chain, i)))
                        goto finish;
        if (X509_STORE_CTX_init(ctx, store, sk_X509_value(chain, 0), untrusted) != 1)
                goto finish;
        if (at > 0)
                X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(ctx), (time_t) (at / USEC_PER_SEC));
        /* The anchors are trusted as given: a CA that is itself an intermediate (a cfssl server
         * run with one) anchors the chain without its root. */
        X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx), X509_V_FLAG_PARTIAL_CHAIN);
        if (X509_verify_cert(ctx) == 1)
                r = 0;
        else {
                if (ret_reason)
                        *ret_reason = X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx));
                r = -EBADMSG;
        }
finish:
        ERR_clear_error();
        sk_X509_free(untrusted);
        X509_STORE_CTX_free(ctx);
        X509_STORE_free(store);
        return r;
}

int x509_is_issuing_ca(X509 *cert) {
        int ok = cert && X509_check_ca(cert) == 1 && (X509_get_extension_flags(cert) & EXFLAG_KUSAGE) &&
                 (X509_get_key_usage(cert) & KU_KEY_CERT_SIGN);
        ERR_clear_error();
        return ok;
}

int x509_cert_check_times(const struct cert_info *i, usec_t current_not_after, usec_t now, const char **ret_reason) {
        if (i->not_before > now + CERT_MAX_FUTURE)
                return (*ret_reason = "the certificate's notBefore is more than 5 minutes ahead of this node's clock"),
                       -EBADMSG;
        if (current_not_after > 0 && i->not_after <= current_not_after)
                return (*ret_reason = "the new certificate would expire no later than the one it replaces"), -EBADMSG;
        return 0;
}

enum cert_clock_verdict x509_clock_verdict(const struct cert_info *i, usec_t rotate_at, usec_t now) {
        if (now >= rotate_at || now >= i->not_after)
                return CERT_CLOCK_DUE;
        if (i->not_before > now + CERT_MAX_FUTURE)
                return CERT_CLOCK_AHEAD;
        return CERT_CLOCK_KEEP;
}

int x509_key_fingerprint(EVP_PKEY *key, size_t n, char **ret) {
        unsigned char *der = NULL, md[SHA256_DIGEST_LENGTH];
        int len = i2d_PUBKEY(key, &der);
        if (len <= 0)
                return -ENOMEM;
        SHA256(der, (size_t) len, md);
        OPENSSL_free(der);
        char *s = x509_hex_encode(md, MIN(n, sizeof(md)));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}
