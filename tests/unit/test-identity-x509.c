/* SPDX-License-Identifier: MIT */
/* The identity module's crypto plumbing: the embedded CA (created 0600, reloaded, never replaced
 * when broken), certificates with SPIFFE/IP SANs and their usages, chain verification, key
 * matching, PEM round trips, and the CFSSL wire format. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/pem.h>

#include "ca.h"
#include "cfssl-wire.h"
#include "fs.h"
#include "kube-csr.h"
#include "signer.h"
#include "strv.h"
#include "x509.h"

static char *tmpdir(void) {
        char *d = strdup("/tmp/test-identity-XXXXXX");
        assert_non_null(mkdtemp(d));
        return d;
}

static void test_ca_created_reloaded_and_never_replaced(_unused_ void **state) {
        _cleanup_free_ char *d = tmpdir(), *key = fs_path_join(d, "ca.key"), *crt = fs_path_join(d, "ca.crt");
        struct ca *ca = NULL, *again = NULL;
        bool created = false;
        struct stat st;

        assert_int_equal(ca_load_or_create(d, "pinion CA test", &ca, &created), 0);
        assert_true(created);
        assert_int_equal(stat(key, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(ca_load_or_create(d, "pinion CA test", &again, &created), 0);
        assert_false(created);
        assert_int_equal(X509_cmp(ca->cert, again->cert), 0);
        ca_free(again);

        /* A broken key: refused, left alone. */
        assert_int_equal(fs_write_file_atomic(key, "garbage", 7, 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(ca_load_or_create(d, "pinion CA test", &again, &created), -EBADMSG);
        /* A certificate without key: refused too. */
        assert_int_equal(unlink(key), 0);
        assert_int_equal(ca_load_or_create(d, "pinion CA test", &again, &created), -EBADMSG);
        assert_int_equal(access(key, F_OK), -1);
        ca_free(ca);
        assert_int_equal(fs_rm_rf(d), 0);
}

static void test_workload_certificate(_unused_ void **state) {
        _cleanup_free_ char *d = tmpdir(), *pem = NULL, *chain_pem = NULL;
        _cleanup_(ca_freep) struct ca *ca = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL, *other = NULL;
        _cleanup_(X509_freep) X509 *cert = NULL;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL;
        struct cert_info info = {};
        const struct cert_subject s = {
                .common_name = "web.shop",
                .uri = "spiffe://example.org/ns/shop/sa/front",
                .ip = "10.9.8.7",
        };

        assert_int_equal(ca_load_or_create(d, "pinion CA test", &ca, NULL), 0);
        assert_int_equal(x509_key_new(&key), 0);
        assert_int_equal(x509_key_new(&other), 0);
        assert_int_equal(ca_issue(ca, key, &s, CERT_USAGE_CLIENT_SERVER, 3600 * USEC_PER_SEC, &cert), 0);
        assert_int_equal(x509_cert_info(cert, &info), 0);
        assert_string_equal(info.subject, "CN=web.shop");
        assert_int_equal(strv_length(info.sans), 2);
        assert_string_equal(info.sans[0], "URI:spiffe://example.org/ns/shop/sa/front");
        assert_string_equal(info.sans[1], "IP:10.9.8.7");
        /* notBefore backdated against clock skew; notAfter counts from now. */
        assert_int_equal(info.not_after - info.not_before, 3600 * USEC_PER_SEC + CA_BACKDATE);
        assert_true(info.not_before <= now_usec(CLOCK_REALTIME) - CA_BACKDATE + USEC_PER_SEC);
        assert_true(X509_check_purpose(cert, X509_PURPOSE_SSL_SERVER, 0) == 1);
        assert_true(X509_check_purpose(cert, X509_PURPOSE_SSL_CLIENT, 0) == 1);
        assert_int_equal(X509_check_ca(cert), 0);
        x509_cert_info_done(&info);

        assert_true(x509_key_matches(cert, key));
        assert_false(x509_key_matches(cert, other));

        /* PEM round trip and verification against the root, now and after expiry. */
        assert_int_equal(ca_chain_pem(ca, cert, &chain_pem), 0);
        assert_int_equal(x509_chain_from_pem(chain_pem, strlen(chain_pem), &chain), 0);
        assert_int_equal(sk_X509_num(chain), 1); /* the self-signed root is not sent along */
        assert_int_equal(x509_verify_chain(chain, ca->roots, 0, NULL), 0);
        const char *reason = NULL;
        assert_int_equal(x509_verify_chain(chain, ca->roots, now_usec(CLOCK_REALTIME) + 2 * 3600 * USEC_PER_SEC, &reason),
                         -EBADMSG);
        assert_non_null(reason);

        /* Another CA's root does not verify it. */
        _cleanup_free_ char *d2 = tmpdir();
        _cleanup_(ca_freep) struct ca *ca2 = NULL;
        assert_int_equal(ca_load_or_create(d2, "other", &ca2, NULL), 0);
        assert_int_equal(x509_verify_chain(chain, ca2->roots, 0, NULL), -EBADMSG);

        /* An intermediate (the cfssl node CA's shape): pathlen 0, and leaves chain through it. */
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ikey = NULL;
        _cleanup_(X509_freep) X509 *icert = NULL, *leaf = NULL;
        const struct cert_subject is = { .common_name = "pinion node CA n1", .organization = "pinion" };
        assert_int_equal(x509_key_new(&ikey), 0);
        assert_int_equal(ca_issue(ca, ikey, &is, CERT_USAGE_CA, 3600 * USEC_PER_SEC, &icert), 0);
        assert_int_equal(X509_check_ca(icert), 1);
        STACK_OF(X509) *ichain = sk_X509_new_null(), *iroots = sk_X509_deep_copy(ca->roots, X509_dup, X509_free);
        assert_true(X509_up_ref(icert) == 1 && sk_X509_push(ichain, icert));
        EVP_PKEY_up_ref(ikey);
        struct ca *inter = NULL;
        assert_int_equal(ca_new(ikey, ichain, iroots, &inter), 0);
        assert_int_equal(ca_issue(inter, key, &s, CERT_USAGE_CLIENT_SERVER, 7200 * USEC_PER_SEC, &leaf), 0);
        /* capped at the intermediate's own end */
        assert_true(ASN1_TIME_compare(X509_get0_notAfter(leaf), X509_get0_notAfter(icert)) <= 0);
        _cleanup_free_ char *lpem = NULL;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *lchain = NULL;
        assert_int_equal(ca_chain_pem(inter, leaf, &lpem), 0);
        assert_int_equal(x509_chain_from_pem(lpem, strlen(lpem), &lchain), 0);
        assert_int_equal(sk_X509_num(lchain), 2);
        assert_int_equal(x509_verify_chain(lchain, ca->roots, 0, NULL), 0);
        /* An intermediate given as the anchor is trusted as such (a cfssl run with one). */
        STACK_OF(X509) *only_inter = sk_X509_new_null();
        assert_true(X509_up_ref(icert) == 1 && sk_X509_push(only_inter, icert));
        assert_int_equal(x509_verify_chain(lchain, only_inter, 0, NULL), 0);
        sk_X509_pop_free(only_inter, X509_free);
        ca_free(inter);

        assert_int_equal(x509_cert_to_pem(cert, &pem), 0);
        assert_non_null(strstr(pem, "BEGIN CERTIFICATE"));
        assert_int_equal(fs_rm_rf(d), 0);
        assert_int_equal(fs_rm_rf(d2), 0);
}

/* An issuer whose "intermediate" is no CA (a signer's mistake or a hostile answer): it is not
 * taken as a node CA, and what it signs does not verify, so it is never served. */
static void test_non_ca_intermediate_is_refused(_unused_ void **state) {
        _cleanup_free_ char *d = tmpdir();
        _cleanup_(ca_freep) struct ca *root = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ikey = NULL, *key = NULL;
        _cleanup_(X509_freep) X509 *notca = NULL, *realca = NULL, *leaf = NULL, *good = NULL;
        const struct cert_subject is = { .common_name = "pinion node CA n1", .organization = "pinion" };
        const struct cert_subject s = { .common_name = "web.shop", .uri = "spiffe://example.org/ns/shop/sa/front" };
        const char *reason = NULL;

        assert_int_equal(ca_load_or_create(d, "pinion CA test", &root, NULL), 0);
        assert_true(x509_is_issuing_ca(root->cert));
        assert_int_equal(x509_key_new(&ikey), 0);
        assert_int_equal(x509_key_new(&key), 0);
        assert_int_equal(ca_issue(root, ikey, &is, CERT_USAGE_CLIENT, 3600 * USEC_PER_SEC, &notca), 0);
        assert_int_equal(ca_issue(root, ikey, &is, CERT_USAGE_CA, 3600 * USEC_PER_SEC, &realca), 0);
        assert_false(x509_is_issuing_ca(notca));
        assert_true(x509_is_issuing_ca(realca));

        /* Signing with the non-CA works mechanically; verification against the bundle fails. */
        STACK_OF(X509) *chain = sk_X509_new_null(), *roots = sk_X509_deep_copy(root->roots, X509_dup, X509_free);
        assert_true(X509_up_ref(notca) == 1 && sk_X509_push(chain, notca));
        assert_int_equal(EVP_PKEY_up_ref(ikey), 1);
        struct ca *bad = NULL;
        assert_int_equal(ca_new(ikey, chain, roots, &bad), 0);
        assert_int_equal(ca_issue(bad, key, &s, CERT_USAGE_CLIENT_SERVER, 600 * USEC_PER_SEC, &leaf), 0);
        assert_int_equal(ca_verify_issued(bad, leaf, &reason), -EBADMSG);
        assert_non_null(reason);
        ca_free(bad);

        /* The same with a real intermediate verifies. */
        chain = sk_X509_new_null();
        roots = sk_X509_deep_copy(root->roots, X509_dup, X509_free);
        assert_true(X509_up_ref(realca) == 1 && sk_X509_push(chain, realca));
        assert_int_equal(EVP_PKEY_up_ref(ikey), 1);
        struct ca *inter = NULL;
        assert_int_equal(ca_new(ikey, chain, roots, &inter), 0);
        assert_int_equal(ca_issue(inter, key, &s, CERT_USAGE_CLIENT_SERVER, 600 * USEC_PER_SEC, &good), 0);
        assert_int_equal(ca_verify_issued(inter, good, NULL), 0);
        ca_free(inter);
        assert_int_equal(fs_rm_rf(d), 0);
}

/* Only the first leaf of an issuer is verified by OpenSSL in full; each later one still has its
 * names checked against the chain's name constraints, which is what can differ between leaves. */
static void test_name_constraints_checked_for_every_leaf(_unused_ void **state) {
        _cleanup_free_ char *d = tmpdir();
        _cleanup_(ca_freep) struct ca *root = NULL, *inter = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ikey = NULL, *key = NULL;
        _cleanup_(X509_freep) X509 *ica = NULL, *good = NULL, *good2 = NULL, *bad = NULL;
        const struct cert_subject is = { .common_name = "pinion node CA n1", .organization = "pinion" };
        const struct cert_subject ok = { .common_name = "web.shop", .uri = "spiffe://example.org/ns/shop/sa/front" };
        const struct cert_subject evil = { .common_name = "web.shop", .uri = "spiffe://evil.org/ns/shop/sa/front" };
        const char *reason = NULL;
        X509V3_CTX v3;

        assert_int_equal(ca_load_or_create(d, "pinion CA test", &root, NULL), 0);
        assert_int_equal(x509_key_new(&ikey), 0);
        assert_int_equal(x509_key_new(&key), 0);
        assert_int_equal(ca_issue(root, ikey, &is, CERT_USAGE_CA, 3600 * USEC_PER_SEC, &ica), 0);
        /* The intermediate may name example.org only. */
        X509V3_set_ctx_nodb(&v3);
        X509V3_set_ctx(&v3, root->cert, ica, NULL, NULL, 0);
        X509_EXTENSION *nc = X509V3_EXT_conf_nid(NULL, &v3, NID_name_constraints, "critical,permitted;URI:example.org");
        assert_non_null(nc);
        assert_int_equal(X509_add_ext(ica, nc, -1), 1);
        X509_EXTENSION_free(nc);
        assert_true(X509_sign(ica, root->key, EVP_sha256()) > 0);

        STACK_OF(X509) *chain = sk_X509_new_null(), *roots = sk_X509_deep_copy(root->roots, X509_dup, X509_free);
        assert_true(X509_up_ref(ica) == 1 && sk_X509_push(chain, ica));
        assert_int_equal(EVP_PKEY_up_ref(ikey), 1);
        assert_int_equal(ca_new(ikey, chain, roots, &inter), 0);

        assert_int_equal(ca_issue(inter, key, &ok, CERT_USAGE_CLIENT_SERVER, 600 * USEC_PER_SEC, &good), 0);
        assert_int_equal(ca_verify_issued(inter, good, NULL), 0);
        assert_true(inter->chain_verified_until > now_usec(CLOCK_REALTIME));
        assert_int_equal(ca_issue(inter, key, &ok, CERT_USAGE_CLIENT_SERVER, 600 * USEC_PER_SEC, &good2), 0);
        assert_int_equal(ca_verify_issued(inter, good2, NULL), 0);
        assert_int_equal(ca_issue(inter, key, &evil, CERT_USAGE_CLIENT_SERVER, 600 * USEC_PER_SEC, &bad), 0);
        assert_int_equal(ca_verify_issued(inter, bad, &reason), -EBADMSG);
        assert_non_null(strstr(reason, "permitted subtree violation"));

        /* And OpenSSL agrees, verifying the written-out chain in full. */
        _cleanup_free_ char *pem = NULL;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *parsed = NULL;
        assert_int_equal(ca_chain_pem(inter, bad, &pem), 0);
        assert_int_equal(x509_chain_from_pem(pem, strlen(pem), &parsed), 0);
        assert_int_equal(x509_verify_chain(parsed, inter->roots, 0, NULL), -EBADMSG);
        assert_int_equal(fs_rm_rf(d), 0);
}

/* The P-256 key is written from its parts: byte for byte what OpenSSL's encoder writes, and it
 * reads back as the same key. */
static void test_key_pem_as_openssl_writes_it(_unused_ void **state) {
        for (unsigned i = 0; i < 20; i++) {
                _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL, *back = NULL;
                BIO *b = BIO_new(BIO_s_mem());
                char *pem = NULL, *theirs = NULL;
                long n;

                assert_int_equal(x509_key_new(&key), 0);
                assert_int_equal(x509_key_to_pem(key, &pem), 0);
                assert_non_null(b);
                assert_int_equal(PEM_write_bio_PrivateKey(b, key, NULL, NULL, 0, NULL, NULL), 1);
                n = BIO_get_mem_data(b, &theirs);
                assert_int_equal(strlen(pem), n);
                assert_memory_equal(pem, theirs, n);
                assert_int_equal(x509_key_from_pem(pem, strlen(pem), &back), 0);
                assert_int_equal(EVP_PKEY_eq(key, back), 1);
                x509_free_secret(pem);
                BIO_free(b);
        }
}

/* The clock rules a new certificate must pass before it replaces anything. */
static void test_cert_times(_unused_ void **state) {
        usec_t now = 1700000000 * USEC_PER_SEC;
        const char *reason = NULL;
        struct cert_info i = { .not_before = now - USEC_PER_MINUTE, .not_after = now + 3600 * USEC_PER_SEC };

        assert_int_equal(x509_cert_check_times(&i, 0, now, &reason), 0);
        i.not_before = now + 4 * USEC_PER_MINUTE; /* a little ahead: clock skew, accepted */
        assert_int_equal(x509_cert_check_times(&i, 0, now, &reason), 0);
        i.not_before = now + 6 * USEC_PER_MINUTE; /* far ahead: refused */
        assert_int_equal(x509_cert_check_times(&i, 0, now, &reason), -EBADMSG);
        assert_non_null(strstr(reason, "notBefore"));
        i.not_before = now;
        /* A replacement must outlive the certificate it replaces. */
        assert_int_equal(x509_cert_check_times(&i, now + 1800 * USEC_PER_SEC, now, &reason), 0);
        assert_int_equal(x509_cert_check_times(&i, now + 3600 * USEC_PER_SEC, now, &reason), -EBADMSG);
        assert_int_equal(x509_cert_check_times(&i, now + 7200 * USEC_PER_SEC, now, &reason), -EBADMSG);
        assert_non_null(strstr(reason, "no later"));
}

/* A certificate held while the wall clock steps: issued at t0 as the local CA issues it
 * (notBefore backdated by CA_BACKDATE, an hour's lifetime, rotation planned at 80%). */
static void test_clock_verdict(_unused_ void **state) {
        usec_t t0 = 1700000000 * USEC_PER_SEC, hour = 3600 * USEC_PER_SEC;
        struct cert_info i = { .not_before = t0 - CA_BACKDATE, .not_after = t0 + hour };
        usec_t rotate_at = t0 + hour * 8 / 10;

        assert_int_equal(x509_clock_verdict(&i, rotate_at, t0), CERT_CLOCK_KEEP);
        /* Forward: 2 days (past notAfter) and 50 minutes (past the rotation point only). */
        assert_int_equal(x509_clock_verdict(&i, rotate_at, t0 + 48 * hour), CERT_CLOCK_DUE);
        assert_int_equal(x509_clock_verdict(&i, rotate_at, t0 + 50 * USEC_PER_MINUTE), CERT_CLOCK_DUE);
        assert_int_equal(x509_clock_verdict(&i, rotate_at, t0 + 10 * USEC_PER_MINUTE), CERT_CLOCK_KEEP);
        /* Back: an hour puts notBefore 58 minutes ahead (peers refuse it: replace it); a few
         * minutes stay within the backdating and the skew allowed. */
        assert_int_equal(x509_clock_verdict(&i, rotate_at, t0 - hour), CERT_CLOCK_AHEAD);
        assert_int_equal(x509_clock_verdict(&i, rotate_at, t0 - 6 * USEC_PER_MINUTE), CERT_CLOCK_KEEP);
        assert_int_equal(x509_clock_verdict(&i, rotate_at, t0 - 8 * USEC_PER_MINUTE), CERT_CLOCK_AHEAD);
        /* notAfter decides even when the rotation point was planned later (a reload). */
        assert_int_equal(x509_clock_verdict(&i, t0 + 2 * hour, t0 + hour), CERT_CLOCK_DUE);
}

/* Which signer URLs may be plain http (CSRs, certificates and credentials in clear). */
static void test_signer_url_ok(_unused_ void **state) {
        assert_true(signer_url_ok("https://ca.example.org:8888"));
        assert_true(signer_url_ok("http://127.0.0.1:8888"));
        assert_true(signer_url_ok("http://127.1.2.3"));
        assert_true(signer_url_ok("http://localhost:8888/"));
        assert_true(signer_url_ok("http://[::1]:8888"));
        assert_false(signer_url_ok("http://ca.example.org:8888"));
        assert_false(signer_url_ok("http://10.0.0.1:6443"));
        assert_false(signer_url_ok("http://127.0.0.1.evil.net:8888"));
        assert_false(signer_url_ok("http://127.0.0.1@evil.net/"));
        assert_false(signer_url_ok("http://localhost.evil.net"));
        assert_false(signer_url_ok("http://[::1]@evil.net"));
        assert_false(signer_url_ok("http://[::2]:80"));
}

static void test_keys_and_csr(_unused_ void **state) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL, *back = NULL;
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        _cleanup_free_ char *csr = NULL, *fp = NULL;
        char *pem = NULL;
        const struct cert_subject s = { .common_name = "system:node:n1", .organization = "system:nodes" };

        assert_int_equal(x509_key_new(&key), 0);
        assert_int_equal(x509_key_to_pem(key, &pem), 0);
        assert_non_null(strstr(pem, "BEGIN PRIVATE KEY"));
        assert_int_equal(x509_key_from_pem(pem, strlen(pem), &back), 0);
        assert_int_equal(EVP_PKEY_eq(key, back), 1);
        x509_free_secret(pem);
        EVP_PKEY *none = NULL;
        assert_int_equal(x509_key_from_pem("garbage", 7, &none), -EBADMSG);
        assert_null(none);

        assert_int_equal(x509_csr_new(key, &s, &req), 0);
        assert_int_equal(X509_REQ_verify(req, key), 1);
        assert_int_equal(x509_csr_to_pem(req, &csr), 0);
        assert_non_null(strstr(csr, "BEGIN CERTIFICATE REQUEST"));
        assert_int_equal(x509_key_fingerprint(key, 8, &fp), 0);
        assert_int_equal(strlen(fp), 16);

        STACK_OF(X509) *chain = NULL;
        assert_int_equal(x509_chain_from_pem("", 0, &chain), -EBADMSG);
        assert_int_equal(x509_chain_from_pem(csr, strlen(csr), &chain), -EBADMSG);
        const char *bad = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert_int_equal(x509_chain_from_pem(bad, strlen(bad), &chain), -EBADMSG);
        assert_null(chain);
}

static void test_cfssl_wire(_unused_ void **state) {
        char *cert = NULL, *reason = NULL, *body = NULL;
        unsigned char *key = NULL;
        size_t n = 0;

        const char *ok = "{\"success\":true,\"result\":{\"certificate\":\"PEM\"},\"errors\":[]}";
        assert_int_equal(cfssl_wire_parse_response(ok, strlen(ok), &cert, &reason), 0);
        assert_string_equal(cert, "PEM");
        free(cert);
        cert = NULL;

        const char *refused = "{\"success\":false,\"result\":null,\"errors\":[{\"code\":2000,\"message\":\"Invalid token\"}]}";
        assert_int_equal(cfssl_wire_parse_response(refused, strlen(refused), &cert, &reason), -EPERM);
        assert_string_equal(reason, "the CA refused: Invalid token");
        assert_null(cert);
        free(reason);

        const char *bads[] = { "", "[]", "{\"success\":1}", "{\"success\":true}", "{\"success\":true,\"result\":{\"certificate\":\"\"}}" };
        for (size_t i = 0; i < ELEMENTSOF(bads); i++) {
                reason = NULL;
                assert_int_equal(cfssl_wire_parse_response(bads[i], strlen(bads[i]), &cert, &reason), -EBADMSG);
                assert_non_null(reason);
                free(reason);
        }

        assert_int_equal(cfssl_wire_parse_hex_key("  00112233445566778899aabbccddeeff\n", &key, &n), 0);
        assert_int_equal(n, 16);
        assert_int_equal(key[15], 0xff);
        /* HMAC-SHA256 over the exact request bytes, both base64 (computed with Python's hmac). */
        assert_int_equal(cfssl_wire_authsign_body(key, n, "{\"a\":1}", &body), 0);
        assert_string_equal(body, "{\"token\":\"Y27hHKA1eQ3OfbufVpW+UMsUgRIANbPUIRCNM/exjjY=\",\"request\":\"eyJhIjoxfQ==\"}");
        free(body);
        free(key);
        assert_int_equal(cfssl_wire_parse_hex_key("abc", &key, &n), -EINVAL);
        assert_int_equal(cfssl_wire_parse_hex_key("zz", &key, &n), -EINVAL);
        assert_int_equal(cfssl_wire_parse_hex_key("00 11", &key, &n), -EINVAL);
        assert_int_equal(cfssl_wire_parse_hex_key("", &key, &n), -EINVAL);
}

static void test_kube_csr(_unused_ void **state) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k1 = NULL, *k2 = NULL;
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL, *d = NULL, *body = NULL;
        char *cert = NULL, *reason = NULL;

        /* The name is a function of key and subject: the same twice, different for either. */
        assert_int_equal(x509_key_new(&k1), 0);
        assert_int_equal(x509_key_new(&k2), 0);
        assert_int_equal(kube_csr_name(k1, "system:node:n1", "system:nodes", &a), 0);
        assert_int_equal(kube_csr_name(k1, "system:node:n1", "system:nodes", &b), 0);
        assert_int_equal(kube_csr_name(k2, "system:node:n1", "system:nodes", &c), 0);
        assert_int_equal(kube_csr_name(k1, "system:node:n2", "system:nodes", &d), 0);
        assert_string_equal(a, b);
        assert_string_not_equal(a, c);
        assert_string_not_equal(a, d);
        assert_true(strncmp(a, "node-csr-", 9) == 0 && strlen(a) == 9 + 32);

        assert_int_equal(kube_csr_body(a, "PEM\n", KUBE_SIGNER_KUBELET_CLIENT, 30 * USEC_PER_SEC, &body), 0);
        assert_non_null(strstr(body, "\"signerName\":\"kubernetes.io/kube-apiserver-client-kubelet\""));
        assert_non_null(strstr(body, "\"request\":\"UEVNCg==\""));
        assert_non_null(strstr(body, "\"expirationSeconds\":600")); /* the API's minimum */

        const char *pending = "{\"kind\":\"CertificateSigningRequest\",\"status\":{}}";
        assert_int_equal(kube_csr_parse(pending, strlen(pending), &cert, &reason), 0);
        assert_string_equal(reason, "waiting for approval");
        free(reason);
        const char *approved = "{\"kind\":\"CertificateSigningRequest\",\"status\":{\"conditions\":[{\"type\":\"Approved\",\"status\":\"True\"}]}}";
        assert_int_equal(kube_csr_parse(approved, strlen(approved), &cert, &reason), 0);
        assert_string_equal(reason, "approved, waiting for the certificate");
        free(reason);
        const char *issued = "{\"kind\":\"CertificateSigningRequest\",\"status\":{\"certificate\":\"UEVNCg==\"}}";
        assert_int_equal(kube_csr_parse(issued, strlen(issued), &cert, &reason), 1);
        assert_string_equal(cert, "PEM\n");
        free(cert);
        free(reason);
        const char *denied = "{\"kind\":\"CertificateSigningRequest\",\"status\":{\"conditions\":[{\"type\":\"Denied\",\"status\":\"True\",\"message\":\"no\"}]}}";
        assert_int_equal(kube_csr_parse(denied, strlen(denied), &cert, &reason), -EPERM);
        assert_string_equal(reason, "the CSR was denied: no");
        free(reason);
        const char *bads[] = { "", "{}", "{\"kind\":\"Pod\"}",
                               "{\"kind\":\"CertificateSigningRequest\",\"status\":{\"certificate\":\"!!\"}}",
                               "{\"kind\":\"CertificateSigningRequest\",\"status\":{\"certificate\":\"AAAA\"}}",
                               "{\"kind\":\"CertificateSigningRequest\",\"status\":{\"conditions\":3}}" };
        for (size_t i = 0; i < ELEMENTSOF(bads); i++) {
                reason = NULL;
                assert_int_equal(kube_csr_parse(bads[i], strlen(bads[i]), &cert, &reason), -EBADMSG);
                free(reason);
        }
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ca_created_reloaded_and_never_replaced),
                cmocka_unit_test(test_workload_certificate),
                cmocka_unit_test(test_non_ca_intermediate_is_refused),
                cmocka_unit_test(test_name_constraints_checked_for_every_leaf),
                cmocka_unit_test(test_key_pem_as_openssl_writes_it),
                cmocka_unit_test(test_cert_times),
                cmocka_unit_test(test_clock_verdict),
                cmocka_unit_test(test_signer_url_ok),
                cmocka_unit_test(test_keys_and_csr),
                cmocka_unit_test(test_cfssl_wire),
                cmocka_unit_test(test_kube_csr),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
