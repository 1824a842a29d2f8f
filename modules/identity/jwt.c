/* SPDX-License-Identifier: MIT */
/* JWT-SVIDs: mint, publish the keys, validate (jwt.h). Everything a token carries is hostile
 * until its signature checks: sizes are bounded before decoding, base64url is decoded strictly
 * (no padding, no stray bits: one token has one spelling), the signature's s is the low one of
 * its two spellings (s and n-s both verify), the header is read only for alg and kid, and the
 * claims are parsed only once the signature over them holds. */

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include "json.h"
#include "jwt.h"

#define P256_BYTES 32
/* The order n of P-256, big-endian: a signature's r and s must lie in [1, n-1]. */
static const unsigned char p256_order[P256_BYTES] = {
        0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
};

/* n/2, rounded down: a signature's s must not exceed it ("low s"). ECDSA accepts (r, s) and
 * (r, n-s) alike; minting only the lower and refusing the higher gives each token one spelling,
 * so a token's text can key a replay cache or a log without a twin slipping past. */
static const unsigned char p256_half_order[P256_BYTES] = {
        0x7f, 0xff, 0xff, 0xff, 0x80, 0x00, 0x00, 0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xde, 0x73, 0x7d, 0x56, 0xd3, 0x8b, 0xcf, 0x42, 0x79, 0xdc, 0xe5, 0x61, 0x7e, 0x31, 0x92, 0xa8,
};

struct jwt_pubkey {
        EVP_PKEY *key;
        char *kid;
};

struct jwt_keyset {
        char *trust_domain;
        EVP_PKEY *signer; /* NULL: cannot mint */
        char *signer_kid;
        struct jwt_pubkey extra[JWT_MAX_KEYS]; /* accepted besides the signer's */
        size_t n_extra;
};

/* ---- base64url without padding ---- */

static const char b64u_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static char *b64u_encode(const unsigned char *p, size_t n) {
        char *out = malloc(n / 3 * 4 + 5), *o = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t) p[i] << 16 | (i + 1 < n ? (uint32_t) p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
                size_t chars = n - i >= 3 ? 4 : n - i + 1;
                for (size_t k = 0; k < chars; k++)
                        *o++ = b64u_alphabet[(v >> (18 - 6 * k)) & 63];
        }
        *o = 0;
        return out;
}

static int b64u_value(char c) {
        const char *p = c ? strchr(b64u_alphabet, c) : NULL;
        return p ? (int) (p - b64u_alphabet) : -1;
}

/* Strict: only the alphabet, no padding, and the unused low bits of the last character zero. */
static int b64u_decode(const char *s, size_t n, unsigned char **ret, size_t *ret_size) {
        if (n % 4 == 1)
                return -EBADMSG;
        unsigned char *out = malloc(n / 4 * 3 + 3);
        size_t m = 0;
        uint32_t acc = 0;
        unsigned bits = 0;
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int v = b64u_value(s[i]);
                if (v < 0) {
                        free(out);
                        return -EBADMSG;
                }
                acc = acc << 6 | (uint32_t) v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[m++] = (unsigned char) (acc >> bits);
                        acc &= (1u << bits) - 1;
                }
        }
        if (acc != 0) { /* leftover bits set: a second spelling of the same bytes */
                free(out);
                return -EBADMSG;
        }
        *ret = out;
        *ret_size = m;
        return 0;
}

/* ---- EC P-256 public keys as JWK coordinates ---- */

static bool is_p256(EVP_PKEY *key) {
        char group[64];
        return EVP_PKEY_is_a(key, "EC") &&
               EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), NULL) == 1 &&
               streq(group, SN_X9_62_prime256v1);
}

static int coordinate(EVP_PKEY *key, const char *param, unsigned char out[P256_BYTES]) {
        BIGNUM *bn = NULL;
        if (EVP_PKEY_get_bn_param(key, param, &bn) != 1)
                return -EBADMSG;
        int n = BN_bn2binpad(bn, out, P256_BYTES);
        BN_free(bn);
        return n == P256_BYTES ? 0 : -EBADMSG;
}

/* x and y, base64url. */
static int key_xy(EVP_PKEY *key, char **ret_x, char **ret_y) {
        unsigned char x[P256_BYTES], y[P256_BYTES];
        if (!is_p256(key) || coordinate(key, OSSL_PKEY_PARAM_EC_PUB_X, x) < 0 || coordinate(key, OSSL_PKEY_PARAM_EC_PUB_Y, y) < 0)
                return -EINVAL;
        *ret_x = b64u_encode(x, sizeof(x));
        *ret_y = b64u_encode(y, sizeof(y));
        if (!*ret_x || !*ret_y) {
                *ret_x = mfree(*ret_x);
                *ret_y = mfree(*ret_y);
                return -ENOMEM;
        }
        return 0;
}

/* A public key from its coordinates; OpenSSL refuses a point that is not on the curve. */
static int key_from_xy(const unsigned char *x, const unsigned char *y, EVP_PKEY **ret) {
        unsigned char point[1 + 2 * P256_BYTES] = { 0x04 };
        char group[] = SN_X9_62_prime256v1;
        memcpy(point + 1, x, P256_BYTES);
        memcpy(point + 1 + P256_BYTES, y, P256_BYTES);
        OSSL_PARAM params[] = {
                OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, group, 0),
                OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point)),
                OSSL_PARAM_END,
        };
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
        EVP_PKEY *key = NULL;
        int r = -EBADMSG;
        if (!ctx)
                return -ENOMEM;
        if (EVP_PKEY_fromdata_init(ctx) == 1 && EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) == 1) {
                EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
                if (check && EVP_PKEY_public_check(check) == 1) {
                        *ret = key;
                        key = NULL;
                        r = 0;
                }
                EVP_PKEY_CTX_free(check);
        }
        EVP_PKEY_free(key);
        EVP_PKEY_CTX_free(ctx);
        if (r < 0)
                ERR_clear_error();
        return r;
}

/* RFC 7638 thumbprint of an EC P-256 public key: base64url(SHA-256({"crv","kty","x","y"})). */
static int jwt_thumbprint(EVP_PKEY *key, char **ret) {
        _cleanup_free_ char *x = NULL, *y = NULL, *canonical = NULL;
        unsigned char digest[SHA256_DIGEST_LENGTH];
        int r = key_xy(key, &x, &y);
        if (r < 0)
                return r;
        /* RFC 7638: the required members in lexicographic order, no whitespace. */
        if (asprintf(&canonical, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}", x, y) < 0)
                return -ENOMEM;
        if (!EVP_Digest(canonical, strlen(canonical), digest, NULL, EVP_sha256(), NULL))
                return -ENOMEM;
        *ret = b64u_encode(digest, sizeof(digest));
        return *ret ? 0 : -ENOMEM;
}

/* ---- key sets ---- */

int jwt_keyset_new(const char *trust_domain, struct jwt_keyset **ret) {
        if (isempty(trust_domain))
                return -EINVAL;
        struct jwt_keyset *ks = calloc(1, sizeof(*ks));
        if (!ks || !(ks->trust_domain = strdup(trust_domain))) {
                free(ks);
                return -ENOMEM;
        }
        *ret = ks;
        return 0;
}

struct jwt_keyset *jwt_keyset_free(struct jwt_keyset *ks) {
        if (!ks)
                return NULL;
        EVP_PKEY_free(ks->signer);
        free(ks->signer_kid);
        for (size_t i = 0; i < ks->n_extra; i++) {
                EVP_PKEY_free(ks->extra[i].key);
                free(ks->extra[i].kid);
        }
        free(ks->trust_domain);
        free(ks);
        return NULL;
}

int jwt_keyset_set_signer_pem(struct jwt_keyset *ks, const char *pem, size_t size) {
        if (size > INT_MAX)
                return -EBADMSG;
        BIO *b = BIO_new_mem_buf(pem, (int) size);
        if (!b)
                return -ENOMEM;
        EVP_PKEY *key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        BIO_free(b);
        if (!key) {
                ERR_clear_error();
                return -EBADMSG;
        }
        char *kid = NULL;
        int r = is_p256(key) ? jwt_thumbprint(key, &kid) : -EINVAL;
        if (r < 0) {
                EVP_PKEY_free(key);
                return r;
        }
        EVP_PKEY_free(ks->signer);
        free(ks->signer_kid);
        ks->signer = key;
        ks->signer_kid = kid;
        return 0;
}

static EVP_PKEY *find_key(const struct jwt_keyset *ks, const char *kid) {
        if (ks->signer_kid && streq(ks->signer_kid, kid))
                return ks->signer;
        for (size_t i = 0; i < ks->n_extra; i++)
                if (streq(ks->extra[i].kid, kid))
                        return ks->extra[i].key;
        return NULL;
}

/* Takes key; 1 if added, 0 if its kid was known already (key freed). */
static int add_key(struct jwt_keyset *ks, EVP_PKEY *key, const char *kid) {
        _cleanup_free_ char *own = NULL;
        int r;
        if (!kid) {
                r = jwt_thumbprint(key, &own);
                if (r < 0) {
                        EVP_PKEY_free(key);
                        return r;
                }
                kid = own;
        }
        if (find_key(ks, kid)) {
                EVP_PKEY_free(key);
                return 0;
        }
        char *copy = strdup(kid);
        if (!copy || ks->n_extra >= JWT_MAX_KEYS) {
                free(copy);
                EVP_PKEY_free(key);
                return copy ? -E2BIG : -ENOMEM;
        }
        ks->extra[ks->n_extra++] = (struct jwt_pubkey) { key, copy };
        return 1;
}

static int decode_coordinate(const cJSON *jwk, const char *name, unsigned char out[P256_BYTES]) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(jwk, name);
        _cleanup_free_ unsigned char *raw = NULL;
        size_t n = 0;
        if (!cJSON_IsString(v) || strlen(v->valuestring) != 43 || b64u_decode(v->valuestring, 43, &raw, &n) < 0 ||
            n != P256_BYTES)
                return -EBADMSG;
        memcpy(out, raw, P256_BYTES);
        return 0;
}

static int add_jwk(struct jwt_keyset *ks, const cJSON *jwk) {
        const cJSON *kty = cJSON_GetObjectItemCaseSensitive(jwk, "kty"), *crv = cJSON_GetObjectItemCaseSensitive(jwk, "crv"),
                    *use = cJSON_GetObjectItemCaseSensitive(jwk, "use"), *kid = cJSON_GetObjectItemCaseSensitive(jwk, "kid");
        unsigned char x[P256_BYTES], y[P256_BYTES];
        EVP_PKEY *key = NULL;
        if (!cJSON_IsObject(jwk))
                return -EBADMSG;
        /* Other kinds of keys (an X.509 authority, RSA) are someone else's business. */
        if (!cJSON_IsString(kty) || !streq(kty->valuestring, "EC") || !cJSON_IsString(crv) ||
            !streq(crv->valuestring, "P-256") || (use && (!cJSON_IsString(use) || !streq(use->valuestring, "jwt-svid"))))
                return 0;
        if (kid && (!cJSON_IsString(kid) || isempty(kid->valuestring) || strlen(kid->valuestring) > 256))
                return -EBADMSG;
        int r = decode_coordinate(jwk, "x", x);
        if (r >= 0)
                r = decode_coordinate(jwk, "y", y);
        if (r >= 0)
                r = key_from_xy(x, y, &key);
        if (r < 0)
                return r;
        return add_key(ks, key, kid ? kid->valuestring : NULL);
}

static int add_jwks(struct jwt_keyset *ks, const char *json, size_t size) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_ParseWithLength(json, size);
        const cJSON *keys = cJSON_GetObjectItemCaseSensitive(o, "keys"), *jwk;
        int added = 0, r;
        if (!cJSON_IsArray(keys))
                return -EBADMSG;
        cJSON_ArrayForEach(jwk, keys) {
                r = add_jwk(ks, jwk);
                if (r < 0)
                        return r;
                added += r;
        }
        return added;
}

/* PEM "PUBLIC KEY" blocks, one after the other (what `openssl pkey -pubout` writes). */
static int add_pem_public(struct jwt_keyset *ks, const char *pem, size_t size) {
        if (size > INT_MAX)
                return -EBADMSG;
        BIO *b = BIO_new_mem_buf(pem, (int) size);
        int added = 0, r = 0, n = 0;
        EVP_PKEY *key;
        if (!b)
                return -ENOMEM;
        while (r >= 0 && (key = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL))) {
                n++;
                r = is_p256(key) ? add_key(ks, key, NULL) : (EVP_PKEY_free(key), -EINVAL);
                added += r > 0;
        }
        BIO_free(b);
        ERR_clear_error(); /* the read that ended the loop left its complaint */
        return r < 0 ? r : n == 0 ? -EBADMSG : added;
}

int jwt_keyset_add_jwks(struct jwt_keyset *ks, const char *text, size_t size) {
        size_t skip = 0;
        while (skip < size && strchr(" \t\r\n", text[skip]) && text[skip])
                skip++;
        if (skip < size && text[skip] == '{')
                return add_jwks(ks, text, size);
        return add_pem_public(ks, text, size);
}

const char *jwt_keyset_signer_kid(const struct jwt_keyset *ks) {
        return ks->signer_kid;
}

size_t jwt_keyset_n_keys(const struct jwt_keyset *ks) {
        return ks->n_extra + (ks->signer != NULL);
}

/* ---- the JWKS ---- */

static int add_jwk_object(cJSON *keys, EVP_PKEY *key, const char *kid) {
        _cleanup_free_ char *x = NULL, *y = NULL;
        cJSON *k = cJSON_CreateObject();
        int r = key_xy(key, &x, &y);
        if (!k || !cJSON_AddItemToArray(keys, k))
                return (cJSON_Delete(k), -ENOMEM);
        if (r < 0)
                return r;
        if (!cJSON_AddStringToObject(k, "kty", "EC") || !cJSON_AddStringToObject(k, "crv", "P-256") ||
            !cJSON_AddStringToObject(k, "x", x) || !cJSON_AddStringToObject(k, "y", y) ||
            !cJSON_AddStringToObject(k, "kid", kid) || !cJSON_AddStringToObject(k, "use", "jwt-svid"))
                return -ENOMEM;
        return 0;
}

int jwt_bundle(const struct jwt_keyset *ks, cJSON **ret) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        cJSON *keys = o ? cJSON_AddArrayToObject(o, "keys") : NULL;
        int r;
        if (!keys)
                return -ENOMEM;
        if (ks->signer && (r = add_jwk_object(keys, ks->signer, ks->signer_kid)) < 0)
                return r;
        for (size_t i = 0; i < ks->n_extra; i++)
                if ((r = add_jwk_object(keys, ks->extra[i].key, ks->extra[i].kid)) < 0)
                        return r;
        *ret = TAKE_PTR(o);
        return 0;
}

int jwt_bundle_json(const struct jwt_keyset *ks, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;
        int r = jwt_bundle(ks, &o);
        if (r < 0)
                return r;
        *ret = cJSON_PrintUnformatted(o);
        return *ret ? 0 : -ENOMEM;
}

/* ---- SPIFFE IDs ---- */

bool jwt_spiffe_id_valid(const char *id, const char *trust_domain) {
        static const char allowed[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_";
        size_t td = strlen(trust_domain);
        if (!id || strlen(id) > 2048 || strncmp(id, "spiffe://", 9) != 0 || strncmp(id + 9, trust_domain, td) != 0)
                return false;
        const char *p = id + 9 + td;
        if (*p != '/')
                return false;
        while (*p == '/') {
                size_t n = strspn(++p, allowed);
                if (n == 0 || (p[n] != '/' && p[n] != 0) || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return false;
                p += n;
        }
        return *p == 0;
}

/* ---- mint ---- */

static char *json_b64u(const cJSON *o) {
        _cleanup_free_ char *text = cJSON_PrintUnformatted(o);
        return text ? b64u_encode((const unsigned char *) text, strlen(text)) : NULL;
}

/* s as the low of its two spellings, big-endian into out: n-s when OpenSSL returned s > n/2. */
static int low_s(const BIGNUM *s, unsigned char out[P256_BYTES]) {
        BIGNUM *half = BN_bin2bn(p256_half_order, P256_BYTES, NULL), *n = BN_bin2bn(p256_order, P256_BYTES, NULL),
               *flipped = BN_new();
        int r = -ENOMEM;

        if (half && n && flipped) {
                if (BN_cmp(s, half) <= 0)
                        r = BN_bn2binpad(s, out, P256_BYTES) == P256_BYTES ? 0 : -EINVAL;
                else if (BN_sub(flipped, n, s) == 1)
                        r = BN_bn2binpad(flipped, out, P256_BYTES) == P256_BYTES ? 0 : -EINVAL;
        }
        BN_free(half);
        BN_free(n);
        BN_free(flipped);
        return r;
}

/* ES256 over data: the DER signature OpenSSL makes, as the raw r||s JWS wants, s made low. */
static int sign_es256(EVP_PKEY *key, const char *data, unsigned char out[2 * P256_BYTES]) {
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        unsigned char der[80];
        size_t n = sizeof(der);
        int r = -ENOMEM;
        if (md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
            EVP_DigestSign(md, der, &n, (const unsigned char *) data, strlen(data)) == 1) {
                const unsigned char *p = der;
                ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long) n);
                const BIGNUM *sr, *ss;
                if (sig) {
                        ECDSA_SIG_get0(sig, &sr, &ss);
                        r = BN_bn2binpad(sr, out, P256_BYTES) == P256_BYTES ? low_s(ss, out + P256_BYTES) : -EINVAL;
                        ECDSA_SIG_free(sig);
                }
        }
        EVP_MD_CTX_free(md);
        return r;
}

static int audiences_valid(char *const *audiences) {
        size_t n = 0;
        for (char *const *a = audiences; a && *a; a++, n++)
                if (isempty(*a) || strlen(*a) > 256)
                        return -EINVAL;
        return n >= 1 && n <= JWT_MAX_AUDIENCES ? 0 : -EINVAL;
}

int jwt_mint(const struct jwt_keyset *ks, const char *spiffe_id, char *const *audiences, usec_t now, usec_t lifetime,
             char **ret_token, usec_t *ret_expires_at) {
        if (!ks->signer)
                return -ENOKEY;
        if (!jwt_spiffe_id_valid(spiffe_id, ks->trust_domain) || audiences_valid(audiences) < 0 || lifetime < USEC_PER_SEC)
                return -EINVAL;
        usec_t iat = now / USEC_PER_SEC, exp = (now + lifetime) / USEC_PER_SEC;
        _cleanup_(cJSON_Deletep) cJSON *header = cJSON_CreateObject(), *claims = cJSON_CreateObject();
        cJSON *aud = claims ? cJSON_AddArrayToObject(claims, "aud") : NULL;
        if (!header || !aud || !cJSON_AddStringToObject(header, "alg", "ES256") ||
            !cJSON_AddStringToObject(header, "kid", ks->signer_kid) || !cJSON_AddStringToObject(header, "typ", "JWT") ||
            !cJSON_AddStringToObject(claims, "sub", spiffe_id) || !cJSON_AddNumberToObject(claims, "exp", (double) exp) ||
            !cJSON_AddNumberToObject(claims, "iat", (double) iat))
                return -ENOMEM;
        for (char *const *a = audiences; *a; a++)
                if (!cJSON_AddItemToArray(aud, cJSON_CreateString(*a)))
                        return -ENOMEM;

        _cleanup_free_ char *h = json_b64u(header), *c = json_b64u(claims), *input = NULL, *sig = NULL;
        unsigned char raw[2 * P256_BYTES];
        if (!h || !c || asprintf(&input, "%s.%s", h, c) < 0)
                return -ENOMEM;
        int r = sign_es256(ks->signer, input, raw);
        if (r < 0)
                return r;
        if (!(sig = b64u_encode(raw, sizeof(raw))) || asprintf(ret_token, "%s.%s", input, sig) < 0)
                return -ENOMEM;
        if (ret_expires_at)
                *ret_expires_at = exp * USEC_PER_SEC;
        return 0;
}

/* ---- validate ---- */

#define FAIL(err, why)                  \
        do {                            \
                if (ret_reason)         \
                        *ret_reason = why; \
                return err;             \
        } while (0)

/* r and s each in [1, n-1] (OpenSSL checks it too; this keeps the rule visible). */
static bool scalar_in_range(const unsigned char *v) {
        static const unsigned char zero[P256_BYTES];
        return memcmp(v, zero, P256_BYTES) != 0 && memcmp(v, p256_order, P256_BYTES) < 0;
}

static int verify_es256(EVP_PKEY *key, const char *data, size_t size, const unsigned char *raw) {
        ECDSA_SIG *sig = ECDSA_SIG_new();
        BIGNUM *sr = BN_bin2bn(raw, P256_BYTES, NULL), *ss = BN_bin2bn(raw + P256_BYTES, P256_BYTES, NULL);
        unsigned char *der = NULL;
        int n = -1, r = -ENOMEM;
        if (sig && sr && ss && ECDSA_SIG_set0(sig, sr, ss) == 1) {
                sr = ss = NULL; /* owned by sig now */
                n = i2d_ECDSA_SIG(sig, &der);
        }
        if (n > 0) {
                EVP_MD_CTX *md = EVP_MD_CTX_new();
                if (md)
                        r = EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key) == 1 &&
                                            EVP_DigestVerify(md, der, (size_t) n, (const unsigned char *) data, size) == 1
                                    ? 0
                                    : -EKEYREJECTED;
                EVP_MD_CTX_free(md);
        }
        OPENSSL_free(der);
        BN_free(sr);
        BN_free(ss);
        ECDSA_SIG_free(sig);
        if (r < 0) /* a refused signature is an answer, not an error to report later */
                ERR_clear_error();
        return r;
}

static cJSON *decode_json(const char *s, size_t n) {
        _cleanup_free_ unsigned char *raw = NULL;
        size_t size = 0;
        if (b64u_decode(s, n, &raw, &size) < 0)
                return NULL;
        cJSON *o = cJSON_ParseWithLength((const char *) raw, size);
        if (o && !cJSON_IsObject(o))
                o = (cJSON_Delete(o), NULL);
        return o;
}

/* The header: alg ES256 exactly, no extensions we would have to understand, a kid we know. */
static int check_header(const struct jwt_keyset *ks, const char *s, size_t n, EVP_PKEY **ret_key, const char **ret_reason) {
        _cleanup_(cJSON_Deletep) cJSON *h = decode_json(s, n);
        if (!h)
                FAIL(-EBADMSG, "malformed header");
        const cJSON *alg = cJSON_GetObjectItemCaseSensitive(h, "alg"), *kid = cJSON_GetObjectItemCaseSensitive(h, "kid"),
                    *typ = cJSON_GetObjectItemCaseSensitive(h, "typ");
        if (!cJSON_IsString(alg) || !streq(alg->valuestring, "ES256"))
                FAIL(-EKEYREJECTED, "algorithm not allowed (ES256 only)");
        if (cJSON_GetObjectItemCaseSensitive(h, "crit"))
                FAIL(-EKEYREJECTED, "critical header extensions are not supported");
        if (typ && (!cJSON_IsString(typ) || (!streq(typ->valuestring, "JWT") && !streq(typ->valuestring, "JOSE"))))
                FAIL(-EBADMSG, "typ must be JWT or JOSE");
        if (!cJSON_IsString(kid))
                FAIL(-EKEYREJECTED, "no kid");
        if (!(*ret_key = find_key(ks, kid->valuestring)))
                FAIL(-EKEYREJECTED, "unknown kid (a key not in the trust domain's bundle)");
        return 0;
}

static bool audience_matches(const cJSON *aud, const char *audience) {
        const cJSON *a;
        int n = 0;
        if (cJSON_IsString(aud))
                return streq(aud->valuestring, audience);
        if (!cJSON_IsArray(aud))
                return false;
        bool found = false;
        cJSON_ArrayForEach(a, aud) {
                if (!cJSON_IsString(a) || ++n > JWT_MAX_AUDIENCES)
                        return false;
                found = found || streq(a->valuestring, audience);
        }
        return found;
}

static int check_claims(const struct jwt_keyset *ks, const cJSON *c, const char *audience, usec_t now,
                        const char **ret_reason) {
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(c, "exp"), *nbf = cJSON_GetObjectItemCaseSensitive(c, "nbf"),
                    *sub = cJSON_GetObjectItemCaseSensitive(c, "sub"), *aud = cJSON_GetObjectItemCaseSensitive(c, "aud");
        double t = (double) now / USEC_PER_SEC, skew = (double) JWT_CLOCK_SKEW / USEC_PER_SEC;
        if (!cJSON_IsNumber(exp))
                FAIL(-EBADMSG, "no exp claim");
        if (exp->valuedouble + skew <= t)
                FAIL(-EKEYEXPIRED, "token expired");
        if (nbf && (!cJSON_IsNumber(nbf) || nbf->valuedouble - skew > t))
                FAIL(-EKEYEXPIRED, "token not valid yet (nbf)");
        if (!aud || !audience_matches(aud, audience))
                FAIL(-EACCES, "audience does not match");
        if (!cJSON_IsString(sub) || !jwt_spiffe_id_valid(sub->valuestring, ks->trust_domain))
                FAIL(-EINVAL, "sub is not a SPIFFE ID of the trust domain");
        return 0;
}

int jwt_validate(const struct jwt_keyset *ks, const char *token, const char *audience, usec_t now,
                 char **ret_spiffe_id, cJSON **ret_claims, const char **ret_reason) {
        size_t len = token ? strnlen(token, JWT_MAX_TOKEN + 1) : 0;
        EVP_PKEY *key = NULL;
        int r;
        if (isempty(audience))
                FAIL(-EACCES, "no audience to check");
        if (len == 0 || len > JWT_MAX_TOKEN)
                FAIL(-EBADMSG, len ? "token too long" : "empty token");
        const char *dot1 = memchr(token, '.', len), *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t) (dot1 + 1 - token)) : NULL;
        if (!dot2 || memchr(dot2 + 1, '.', len - (size_t) (dot2 + 1 - token)))
                FAIL(-EBADMSG, "not a compact JWS (three base64url parts)");
        r = check_header(ks, token, (size_t) (dot1 - token), &key, ret_reason);
        if (r < 0)
                return r;

        _cleanup_free_ unsigned char *sig = NULL;
        size_t n = 0;
        if (b64u_decode(dot2 + 1, len - (size_t) (dot2 + 1 - token), &sig, &n) < 0 || n != 2 * P256_BYTES)
                FAIL(-EBADMSG, "malformed signature (ES256 is 64 bytes r||s)");
        if (!scalar_in_range(sig) || !scalar_in_range(sig + P256_BYTES))
                FAIL(-EKEYREJECTED, "signature out of range");
        if (memcmp(sig + P256_BYTES, p256_half_order, P256_BYTES) > 0)
                FAIL(-EKEYREJECTED, "high-s signature (s above n/2: the twin of a low-s one, never minted)");
        r = verify_es256(key, token, (size_t) (dot2 - token), sig);
        if (r == -EKEYREJECTED)
                FAIL(r, "bad signature");
        if (r < 0)
                return r;

        _cleanup_(cJSON_Deletep) cJSON *claims = decode_json(dot1 + 1, (size_t) (dot2 - dot1 - 1));
        if (!claims)
                FAIL(-EBADMSG, "malformed claims");
        r = check_claims(ks, claims, audience, now, ret_reason);
        if (r < 0)
                return r;
        if (ret_spiffe_id &&
            !(*ret_spiffe_id = strdup(cJSON_GetObjectItemCaseSensitive(claims, "sub")->valuestring)))
                return -ENOMEM;
        if (ret_claims)
                *ret_claims = TAKE_PTR(claims);
        return 0;
}
