/* SPDX-License-Identifier: MIT */
/* JWT-SVIDs: a minted token validates, its JWKS carries the key by its RFC 7638 thumbprint, and
 * every hostile token is refused for the right reason: alg none or another alg, an unknown kid,
 * bad base64url, truncated, huge, expired, wrong audience, a foreign SPIFFE ID, the signature of
 * another key, r or s out of range, a high s (the twin n-s of a valid signature), a DER
 * signature where JWS wants r||s. Tokens are forged here with OpenSSL directly, not through the
 * code under test. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "json.h"
#include "jwt.h"
#include "x509.h"

#define TD "example.org"
#define ID "spiffe://example.org/ns/default/sa/web"
#define NOW ((usec_t) 1800000000 * USEC_PER_SEC)

static char *key_pem(EVP_PKEY *k) {
        char *pem = NULL;
        assert_int_equal(x509_key_to_pem(k, &pem), 0);
        return pem;
}

static struct jwt_keyset *keyset_with(EVP_PKEY *signer) {
        struct jwt_keyset *ks = NULL;
        assert_int_equal(jwt_keyset_new(TD, &ks), 0);
        if (signer) {
                char *pem = key_pem(signer);
                assert_int_equal(jwt_keyset_set_signer_pem(ks, pem, strlen(pem)), 0);
                x509_free_secret(pem);
        }
        return ks;
}

static char *b64u(const void *data, size_t n) {
        char *out = malloc(n / 3 * 4 + 8), *o = out;
        int len = EVP_EncodeBlock((unsigned char *) out, data, (int) n);
        for (int i = 0; i < len; i++)
                if (out[i] == '+')
                        *o++ = '-';
                else if (out[i] == '/')
                        *o++ = '_';
                else if (out[i] != '=')
                        *o++ = out[i];
        *o = 0;
        return out;
}

/* P-256's group order n, big-endian. */
static const unsigned char p256_n[32] = {
        0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
        0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51,
};

/* Whether the 32-byte big-endian s is above n/2. */
static bool s_is_high(const unsigned char *s) {
        BIGNUM *v = BN_bin2bn(s, 32, NULL), *n = BN_bin2bn(p256_n, 32, NULL);
        assert_true(v && n && BN_rshift1(n, n) == 1);
        bool high = BN_cmp(v, n) > 0;
        BN_free(v), BN_free(n);
        return high;
}

/* s -> n-s in place: the other signature that verifies for the same r. */
static void s_flip(unsigned char *s) {
        BIGNUM *v = BN_bin2bn(s, 32, NULL), *n = BN_bin2bn(p256_n, 32, NULL);
        assert_true(v && n && BN_sub(v, n, v) == 1);
        assert_int_equal(BN_bn2binpad(v, s, 32), 32);
        BN_free(v), BN_free(n);
}

/* The 64 raw signature bytes of a token (its third part, base64url). */
static void token_signature(const char *token, unsigned char raw[64]) {
        const char *s64 = strrchr(token, '.') + 1;
        char padded[89];
        unsigned char out[66];
        assert_int_equal(strlen(s64), 86);
        for (size_t i = 0; i < 86; i++)
                padded[i] = s64[i] == '-' ? '+' : s64[i] == '_' ? '/' : s64[i];
        memcpy(padded + 86, "==", 3);
        assert_int_equal(EVP_DecodeBlock(out, (unsigned char *) padded, 88), 66);
        memcpy(raw, out, 64);
}

/* The token with its signature's s replaced by n-s. */
static char *token_with_flipped_s(const char *token) {
        const char *dot2 = strrchr(token, '.');
        unsigned char raw[64];
        char *t = NULL;
        token_signature(token, raw);
        s_flip(raw + 32);
        _cleanup_free_ char *s64 = b64u(raw, sizeof(raw));
        assert_true(asprintf(&t, "%.*s.%s", (int) (dot2 - token), token, s64) > 0);
        return t;
}

/* header.claims signed by key (ES256, raw r||s with the low s, as pinion mints); der: the
 * signature as OpenSSL's DER instead. */
static char *forge(EVP_PKEY *key, const char *header, const char *claims, bool der) {
        char *h = b64u(header, strlen(header)), *c = b64u(claims, strlen(claims)), *input = NULL, *token = NULL;
        unsigned char sig[80], raw[64];
        size_t n = sizeof(sig);
        assert_true(asprintf(&input, "%s.%s", h, c) > 0);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        assert_int_equal(EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key), 1);
        assert_int_equal(EVP_DigestSign(md, sig, &n, (unsigned char *) input, strlen(input)), 1);
        EVP_MD_CTX_free(md);
        const unsigned char *p = sig;
        ECDSA_SIG *s = d2i_ECDSA_SIG(NULL, &p, (long) n);
        assert_non_null(s);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(s), raw, 32), 32);
        assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(s), raw + 32, 32), 32);
        ECDSA_SIG_free(s);
        if (s_is_high(raw + 32))
                s_flip(raw + 32);
        char *encoded = der ? b64u(sig, n) : b64u(raw, sizeof(raw));
        assert_true(asprintf(&token, "%s.%s", input, encoded) > 0);
        free(h), free(c), free(input), free(encoded);
        return token;
}

static char *header_for(const struct jwt_keyset *ks, const char *alg) {
        char *h = NULL;
        assert_true(asprintf(&h, "{\"alg\":\"%s\",\"kid\":\"%s\",\"typ\":\"JWT\"}", alg, jwt_keyset_signer_kid(ks)) > 0);
        return h;
}

static int check(const struct jwt_keyset *ks, const char *token, const char *aud, const char **why) {
        *why = NULL;
        int r = jwt_validate(ks, token, aud, NOW, NULL, NULL, why);
        if (r < 0)
                assert_non_null(*why);
        return r;
}

static void test_mint_validate_round_trip(_unused_ void **state) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = NULL;
        assert_int_equal(x509_key_new(&k), 0);
        _cleanup_(jwt_keyset_freep) struct jwt_keyset *ks = keyset_with(k);
        char *auds[] = { "svc", "other", NULL }, *token = NULL, *id = NULL;
        _cleanup_(cJSON_Deletep) cJSON *claims = NULL;
        usec_t exp = 0;
        const char *why = NULL;

        assert_int_equal(jwt_mint(ks, ID, auds, NOW, 5 * USEC_PER_MINUTE, &token, &exp), 0);
        assert_true(exp == NOW + 5 * USEC_PER_MINUTE);
        assert_null(strchr(token, '='));
        assert_int_equal(jwt_validate(ks, token, "other", NOW + USEC_PER_MINUTE, &id, &claims, &why), 0);
        assert_string_equal(id, ID);
        assert_int_equal((long) cJSON_GetObjectItem(claims, "exp")->valuedouble, 1800000300);
        assert_int_equal((long) cJSON_GetObjectItem(claims, "iat")->valuedouble, 1800000000);
        /* The header as the spec has it. */
        char *dot = strchr(token, '.');
        _cleanup_free_ char *expect = NULL, *hdr = header_for(ks, "ES256"), *h64 = b64u(hdr, strlen(hdr));
        assert_true(strncmp(token, h64, (size_t) (dot - token)) == 0);
        /* Expired past the skew; within the skew still fine. */
        assert_int_equal(jwt_validate(ks, token, "svc", exp + JWT_CLOCK_SKEW - 1, NULL, NULL, &why), 0);
        assert_int_equal(jwt_validate(ks, token, "svc", exp + JWT_CLOCK_SKEW, NULL, NULL, &why), -EKEYEXPIRED);
        assert_int_equal(check(ks, token, "nope", &why), -EACCES);
        assert_int_equal(check(ks, token, "", &why), -EACCES);

        /* Nothing to mint with, bad arguments. */
        _cleanup_(jwt_keyset_freep) struct jwt_keyset *none = keyset_with(NULL);
        char *t2 = NULL, *noaud[] = { NULL }, *empty[] = { "", NULL };
        assert_int_equal(jwt_mint(none, ID, auds, NOW, USEC_PER_MINUTE, &t2, NULL), -ENOKEY);
        assert_int_equal(jwt_mint(ks, ID, noaud, NOW, USEC_PER_MINUTE, &t2, NULL), -EINVAL);
        assert_int_equal(jwt_mint(ks, ID, empty, NOW, USEC_PER_MINUTE, &t2, NULL), -EINVAL);
        assert_int_equal(jwt_mint(ks, "spiffe://other.org/x", auds, NOW, USEC_PER_MINUTE, &t2, NULL), -EINVAL);
        assert_null(t2);
        /* A set without the signing key but with its public key validates: another node. */
        _cleanup_free_ char *jwks = NULL;
        assert_int_equal(jwt_bundle_json(ks, &jwks), 0);
        assert_int_equal(jwt_keyset_add_jwks(none, jwks, strlen(jwks)), 1);
        assert_int_equal(jwt_keyset_add_jwks(none, jwks, strlen(jwks)), 0); /* known already */
        assert_int_equal(check(none, token, "svc", &why), 0);
        free(token);
        free(id);
}

static void test_jwks_and_thumbprint(_unused_ void **state) {
        /* RFC 7638's inputs for an EC key: the thumbprint is of the canonical JSON; checked
         * against a thumbprint computed independently here from the JWKS the set renders. */
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = NULL;
        assert_int_equal(x509_key_new(&k), 0);
        _cleanup_(jwt_keyset_freep) struct jwt_keyset *ks = keyset_with(k);
        _cleanup_free_ char *jwks = NULL, *canon = NULL;
        assert_int_equal(jwt_bundle_json(ks, &jwks), 0);
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_Parse(jwks);
        cJSON *key = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "keys"), 0);
        assert_string_equal(cJSON_GetObjectItem(key, "kty")->valuestring, "EC");
        assert_string_equal(cJSON_GetObjectItem(key, "crv")->valuestring, "P-256");
        assert_string_equal(cJSON_GetObjectItem(key, "use")->valuestring, "jwt-svid");
        assert_null(cJSON_GetObjectItem(key, "d")); /* never the private part */
        assert_true(asprintf(&canon, "{\"crv\":\"P-256\",\"kty\":\"EC\",\"x\":\"%s\",\"y\":\"%s\"}",
                             cJSON_GetObjectItem(key, "x")->valuestring, cJSON_GetObjectItem(key, "y")->valuestring) > 0);
        unsigned char d[32];
        assert_int_equal(EVP_Digest(canon, strlen(canon), d, NULL, EVP_sha256(), NULL), 1);
        _cleanup_free_ char *kid = b64u(d, sizeof(d));
        assert_string_equal(cJSON_GetObjectItem(key, "kid")->valuestring, kid);
        assert_string_equal(jwt_keyset_signer_kid(ks), kid);
        assert_int_equal(strlen(kid), 43);

        /* Public keys as PEM work as a bundle file too; keys of another curve do not. */
        _cleanup_(jwt_keyset_freep) struct jwt_keyset *pub = keyset_with(NULL);
        BIO *b = BIO_new(BIO_s_mem());
        char *text;
        assert_int_equal(PEM_write_bio_PUBKEY(b, k), 1);
        long n = BIO_get_mem_data(b, &text);
        assert_int_equal(jwt_keyset_add_jwks(pub, text, (size_t) n), 1);
        BIO_free(b);
        assert_int_equal(jwt_keyset_n_keys(pub), 1);
        assert_null(jwt_keyset_signer_kid(pub));
        EVP_PKEY *p384 = EVP_EC_gen("secp384r1");
        char *pem = key_pem(p384);
        assert_int_equal(jwt_keyset_set_signer_pem(pub, pem, strlen(pem)), -EINVAL);
        assert_int_equal(jwt_keyset_set_signer_pem(pub, "garbage", 7), -EBADMSG);
        x509_free_secret(pem);
        EVP_PKEY_free(p384);

        /* Hostile JWKS: a point off the curve, short coordinates, padding, not an object. */
        static const char *bad[] = {
                "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\","
                "\"y\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}]}",
                "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":\"AAAA\"}]}",
                "{\"keys\":[{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\","
                "\"y\":\"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAE\"}]}",
                "{\"keys\":{}}", "[]", "{", "",
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(jwt_keyset_add_jwks(pub, bad[i], strlen(bad[i])), -EBADMSG);
        /* Other kinds and uses are skipped, not errors. */
        static const char skipped[] = "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"AQAB\",\"e\":\"AQAB\"},"
                                      "{\"kty\":\"EC\",\"crv\":\"P-256\",\"use\":\"x509-svid\",\"x\":\"\",\"y\":\"\"}]}";
        assert_int_equal(jwt_keyset_add_jwks(pub, skipped, strlen(skipped)), 0);
        assert_int_equal(jwt_keyset_n_keys(pub), 1);
}

static void test_hostile_tokens(_unused_ void **state) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = NULL, *other = NULL;
        assert_int_equal(x509_key_new(&k), 0);
        assert_int_equal(x509_key_new(&other), 0);
        _cleanup_(jwt_keyset_freep) struct jwt_keyset *ks = keyset_with(k), *foreign = keyset_with(other);
        _cleanup_free_ char *es256 = header_for(ks, "ES256"), *good = NULL, *claims = NULL;
        const char *why;
        assert_true(asprintf(&claims, "{\"sub\":\"%s\",\"aud\":[\"svc\"],\"exp\":%d,\"iat\":%d}", ID, 1800000300, 1800000000) > 0);

        good = forge(k, es256, claims, false);
        assert_int_equal(check(ks, good, "svc", &why), 0);
        assert_int_equal(check(ks, good, "svc2", &why), -EACCES);

        struct {
                const char *name;
                char *token;
                int want;
        } cases[] = {
                { "alg none", NULL, -EKEYREJECTED },
                { "alg HS256 with the public key as secret", NULL, -EKEYREJECTED },
                { "alg RS256", NULL, -EKEYREJECTED },
                { "unknown kid", NULL, -EKEYREJECTED },
                { "no kid", NULL, -EKEYREJECTED },
                { "crit header", NULL, -EKEYREJECTED },
                { "signed by another key under our kid", NULL, -EKEYREJECTED },
                { "DER signature", NULL, -EBADMSG },
                { "expired", NULL, -EKEYEXPIRED },
                { "not yet valid", NULL, -EKEYEXPIRED },
                { "no exp", NULL, -EBADMSG },
                { "aud a number", NULL, -EACCES },
                { "sub of another trust domain", NULL, -EINVAL },
                { "sub with ..", NULL, -EINVAL },
                { "sub missing", NULL, -EINVAL },
                { "claims not an object", NULL, -EBADMSG },
        };
        _cleanup_free_ char *kidless = strdup("{\"alg\":\"ES256\"}"), *crit = NULL, *unknown = NULL;
        assert_true(asprintf(&crit, "{\"alg\":\"ES256\",\"kid\":\"%s\",\"crit\":[\"b64\"]}", jwt_keyset_signer_kid(ks)) > 0);
        assert_true(asprintf(&unknown, "{\"alg\":\"ES256\",\"kid\":\"%s\"}", jwt_keyset_signer_kid(foreign)) > 0);
        char *none_h = header_for(ks, "none"), *hs = header_for(ks, "HS256"), *rs = header_for(ks, "RS256");
        char *nh = b64u(none_h, strlen(none_h)), *nc = b64u(claims, strlen(claims));
        assert_true(asprintf(&cases[0].token, "%s.%s.", nh, nc) > 0);
        cases[1].token = forge(k, hs, claims, false);
        cases[2].token = forge(k, rs, claims, false);
        cases[3].token = forge(other, unknown, claims, false);
        cases[4].token = forge(k, kidless, claims, false);
        cases[5].token = forge(k, crit, claims, false);
        cases[6].token = forge(other, es256, claims, false);
        cases[7].token = forge(k, es256, claims, true);
        char *c;
#define CLAIMS(i, fmt, ...)                                                        \
        do {                                                                       \
                assert_true(asprintf(&c, fmt, __VA_ARGS__) > 0);                   \
                cases[i].token = forge(k, es256, c, false);                        \
                free(c);                                                           \
        } while (0)
        CLAIMS(8, "{\"sub\":\"%s\",\"aud\":\"svc\",\"exp\":%d}", ID, 1800000000 - 31);
        CLAIMS(9, "{\"sub\":\"%s\",\"aud\":\"svc\",\"exp\":%d,\"nbf\":%d}", ID, 1800000300, 1800000100);
        CLAIMS(10, "{\"sub\":\"%s\",\"aud\":\"svc\"}", ID);
        CLAIMS(11, "{\"sub\":\"%s\",\"aud\":7,\"exp\":%d}", ID, 1800000300);
        CLAIMS(12, "{\"sub\":\"%s\",\"aud\":\"svc\",\"exp\":%d}", "spiffe://example.org.evil/x", 1800000300);
        CLAIMS(13, "{\"sub\":\"%s\",\"aud\":\"svc\",\"exp\":%d}", "spiffe://example.org/ns/../x", 1800000300);
        CLAIMS(14, "{\"aud\":\"svc\",\"exp\":%d,\"x\":\"%s\"}", 1800000300, ID);
        CLAIMS(15, "[\"%s\",%d]", ID, 1);
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int r = check(ks, cases[i].token, "svc", &why);
                if (r != cases[i].want)
                        fail_msg("%s: %d (%s), want %d", cases[i].name, r, why ? why : "accepted", cases[i].want);
                free(cases[i].token);
        }
        free(none_h), free(hs), free(rs), free(nh), free(nc);

        /* Shapes: truncated anywhere, bad base64url, padding, extra parts, huge. */
        size_t len = strlen(good);
        for (size_t cut = 0; cut < len; cut += 7) {
                _cleanup_free_ char *t = strndup(good, cut);
                assert_int_not_equal(check(ks, t, "svc", &why), 0);
        }
        const char *dot2 = strrchr(good, '.');
        _cleanup_free_ char *pad = NULL, *four = NULL, *bad64 = strdup(good), *flip = strdup(good), *huge = malloc(JWT_MAX_TOKEN + 2);
        assert_true(asprintf(&pad, "%s=", good) > 0);
        assert_true(asprintf(&four, "%s.%s", good, dot2 + 1) > 0);
        bad64[3] = '+';
        flip[len - 1] = flip[len - 1] == 'A' ? 'B' : 'A'; /* stray bits or another signature */
        memset(huge, 'A', JWT_MAX_TOKEN + 1);
        huge[10] = huge[20] = '.';
        huge[JWT_MAX_TOKEN + 1] = 0;
        const char *shapes[] = { pad, four, bad64, flip, huge, "", "..", "a.b.c", "....." };
        for (size_t i = 0; i < ELEMENTSOF(shapes); i++)
                assert_int_not_equal(check(ks, shapes[i], "svc", &why), 0);
        assert_int_equal(check(ks, huge, "svc", &why), -EBADMSG);
        assert_string_equal(why, "token too long");

        /* r or s zero, or not below the group order: refused before OpenSSL sees them. */
        unsigned char raw[64];
        const char *sig_forms[] = { "zero r", "r = n", "s = 0xff..ff" };
        for (size_t i = 0; i < ELEMENTSOF(sig_forms); i++) {
                memset(raw, 0x11, sizeof(raw));
                if (i == 0)
                        memset(raw, 0, 32);
                else if (i == 1)
                        memcpy(raw, (unsigned char[32]) { 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                                          0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17, 0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x51 },
                               32);
                else
                        memset(raw + 32, 0xff, 32);
                _cleanup_free_ char *s64 = b64u(raw, sizeof(raw)), *t = NULL;
                assert_true(asprintf(&t, "%.*s.%s", (int) (dot2 - good), good, s64) > 0);
                assert_int_equal(check(ks, t, "svc", &why), -EKEYREJECTED);
                assert_string_equal(why, "signature out of range");
        }
}

/* The raw signature verifies as DER under key: whether it is a real signature, whatever the
 * code under test makes of it. */
static bool openssl_verifies(EVP_PKEY *key, const char *token) {
        const char *dot2 = strrchr(token, '.');
        unsigned char raw[64], *der = NULL;
        token_signature(token, raw);
        ECDSA_SIG *sig = ECDSA_SIG_new();
        assert_int_equal(ECDSA_SIG_set0(sig, BN_bin2bn(raw, 32, NULL), BN_bin2bn(raw + 32, 32, NULL)), 1);
        int n = i2d_ECDSA_SIG(sig, &der);
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        assert_int_equal(EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, key), 1);
        bool ok = EVP_DigestVerify(md, der, (size_t) n, (const unsigned char *) token, (size_t) (dot2 - token)) == 1;
        EVP_MD_CTX_free(md);
        OPENSSL_free(der);
        ECDSA_SIG_free(sig);
        return ok;
}

/* ECDSA's (r, s) and (r, n-s) both verify: a token minted by pinion has the low s, and its twin
 * with the high one is refused, though OpenSSL says it verifies. */
static void test_high_s_twin_is_refused(_unused_ void **state) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = NULL;
        assert_int_equal(x509_key_new(&k), 0);
        _cleanup_(jwt_keyset_freep) struct jwt_keyset *ks = keyset_with(k);
        char *auds[] = { "svc", NULL };
        const char *why;

        /* Minted: always the low s, over enough mints that OpenSSL returned high ones too (each
         * is high with probability 1/2: 2^-400 that none was). */
        for (unsigned i = 0; i < 400; i++) {
                _cleanup_free_ char *token = NULL, *twin = NULL;
                unsigned char raw[64];
                assert_int_equal(jwt_mint(ks, ID, auds, NOW, 5 * USEC_PER_MINUTE, &token, NULL), 0);
                token_signature(token, raw);
                assert_false(s_is_high(raw + 32));
                assert_int_equal(check(ks, token, "svc", &why), 0);
                twin = token_with_flipped_s(token);
                assert_true(openssl_verifies(k, twin));
                assert_int_equal(check(ks, twin, "svc", &why), -EKEYREJECTED);
                assert_non_null(strstr(why, "high-s"));
        }

        /* Forged with OpenSSL here: low validates, its high twin does not. */
        _cleanup_free_ char *es256 = header_for(ks, "ES256"), *claims = NULL, *low = NULL, *high = NULL;
        assert_true(asprintf(&claims, "{\"sub\":\"%s\",\"aud\":\"svc\",\"exp\":%d}", ID, 1800000300) > 0);
        low = forge(k, es256, claims, false);
        high = token_with_flipped_s(low);
        assert_int_equal(check(ks, low, "svc", &why), 0);
        assert_int_equal(check(ks, high, "svc", &why), -EKEYREJECTED);
        /* s exactly n/2 is the low one; n/2 + 1 is the high one. */
        unsigned char raw[64];
        token_signature(low, raw);
        BIGNUM *half = BN_bin2bn(p256_n, 32, NULL);
        assert_true(half && BN_rshift1(half, half) == 1);
        for (int plus = 0; plus <= 1; plus++) {
                assert_int_equal(BN_bn2binpad(half, raw + 32, 32), 32);
                raw[63] += (unsigned char) plus;
                _cleanup_free_ char *s64 = b64u(raw, sizeof(raw)), *t = NULL;
                assert_true(asprintf(&t, "%.*s.%s", (int) (strrchr(low, '.') - low), low, s64) > 0);
                assert_int_equal(check(ks, t, "svc", &why), -EKEYREJECTED);
                assert_string_equal(why, plus ? "high-s signature (s above n/2: the twin of a low-s one, never minted)"
                                              : "bad signature");
        }
        BN_free(half);
}

static void test_spiffe_ids(_unused_ void **state) {
        const char *ok[] = { ID, "spiffe://example.org/a", "spiffe://example.org/a.b/c-d/e_F9" };
        const char *bad[] = { "spiffe://example.org", "spiffe://example.org/", "spiffe://example.org//a",
                              "spiffe://example.org/a/", "spiffe://example.org/./a", "spiffe://example.org/a/..",
                              "spiffe://example.orga/x", "spiffe://other.org/x", "SPIFFE://example.org/x",
                              "spiffe://example.org/a%2f", "spiffe://example.org/a?b", "spiffe://example.org/a#b",
                              "spiffe://example.org:80/a", "" };
        for (size_t i = 0; i < ELEMENTSOF(ok); i++)
                assert_true(jwt_spiffe_id_valid(ok[i], TD));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (jwt_spiffe_id_valid(bad[i], TD))
                        fail_msg("accepted %s", bad[i]);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_mint_validate_round_trip),
                cmocka_unit_test(test_jwks_and_thumbprint),
                cmocka_unit_test(test_hostile_tokens),
                cmocka_unit_test(test_high_s_twin_is_refused),
                cmocka_unit_test(test_spiffe_ids),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
