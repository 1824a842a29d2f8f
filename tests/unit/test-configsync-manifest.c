/* SPDX-License-Identifier: MIT */
/* The manifest parser and its rules (paths, sizes, modes, duplicates), URL resolution, and the
 * Ed25519 signature: decoding and verifying against a key generated here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>
#include <openssl/pem.h>

#include "manifest.h"
#include "sha256.h"
#include "signature.h"

#define SHA_A "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" /* "hello" */

static int parse(const char *text, struct manifest **ret, char **ret_error) {
        return manifest_parse(text, strlen(text), ret, ret_error);
}

static void expect_error(const char *text, const char *fragment) {
        struct manifest *m = NULL;
        char *error = NULL;
        int r = parse(text, &m, &error);

        if (r >= 0 || !error || !strstr(error, fragment))
                fail_msg("%s: expected error containing '%s', got %d '%s'", text, fragment, r, error ? error : "(null)");
        assert_null(m);
        free(error);
}

static void test_parse_good(_unused_ void **state) {
        _cleanup_(manifest_freep) struct manifest *m = NULL;
        const char *text = "{\"version\": \"2026-11-21.1\", \"files\": ["
                           "{\"path\": \"app/app.yaml\", \"url\": \"app.yaml\", \"size\": 5, \"sha256\": \"" SHA_A "\", \"mode\": \"0640\"},"
                           "{\"path\": \"top\", \"url\": \"https://cdn.example/top\", \"size\": 0, \"sha256\": \"" SHA_A "\"}]}";
        uint8_t sha[32];

        assert_int_equal(parse(text, &m, NULL), 0);
        assert_string_equal(m->version, "2026-11-21.1");
        assert_int_equal(m->n_files, 2);
        assert_string_equal(m->files[0].path, "app/app.yaml");
        assert_int_equal(m->files[0].mode, 0640);
        assert_int_equal(m->files[1].mode, MANIFEST_DEFAULT_MODE);
        assert_int_equal(m->files[0].size, 5);
        assert_int_equal(m->total_size, 5);
        assert_int_equal(sha256_from_hex(SHA_A, sha), 0);
        assert_memory_equal(m->files[0].sha256, sha, 32);
        assert_ptr_equal(manifest_find(m, "top"), &m->files[1]);
        assert_null(manifest_find(m, "nope"));
        assert_true(manifest_file_same(&m->files[0], &m->files[0]));
        assert_false(manifest_file_same(&m->files[0], &m->files[1]));

        _cleanup_(manifest_freep) struct manifest *empty = NULL;
        assert_int_equal(parse("{\"version\": \"e\", \"files\": []}", &empty, NULL), 0);
        assert_int_equal(empty->n_files, 0);
}

/* The sorted index a sync uses to find every published file: same answers as the linear
 * search, for every path of a manifest written in non-sorted order. */
static void test_index(_unused_ void **state) {
        _cleanup_(manifest_freep) struct manifest *m = NULL;
        _cleanup_free_ const struct manifest_file **index = NULL, **none = NULL;
        _cleanup_free_ char *text = NULL;
        size_t n = 2000, len = 0;
        FILE *f = open_memstream(&text, &len);

        assert_non_null(f);
        fputs("{\"version\": \"v\", \"files\": [", f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s{\"path\": \"d%zu/f%zu\", \"url\": \"u\", \"size\": %zu, \"sha256\": \"" SHA_A "\"}",
                        i ? "," : "", (i * 7919) % 97, (i * 104729) % n, i);
        fputs("]}", f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(manifest_parse(text, len, &m, NULL), 0);
        assert_int_equal(m->n_files, n);
        assert_int_equal(manifest_index(m, &index), 0);
        for (size_t i = 1; i < n; i++)
                assert_true(strcmp(index[i - 1]->path, index[i]->path) < 0);
        for (size_t i = 0; i < n; i++)
                assert_ptr_equal(manifest_index_find(index, n, m->files[i].path), &m->files[i]);
        assert_null(manifest_index_find(index, n, "d0"));
        assert_null(manifest_index_find(index, n, "zzz"));
        assert_null(manifest_index_find(index, n, ""));
        assert_null(manifest_index_find(NULL, 0, "d0/f0"));
        /* No manifest (nothing published yet): an empty index. */
        assert_int_equal(manifest_index(NULL, &none), 0);
        assert_null(manifest_index_find(none, 0, "d0/f0"));
}

#define FILE1(path) "{\"version\": \"v\", \"files\": [{\"path\": " path ", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\"}]}"

static void test_parse_refuses(_unused_ void **state) {
        expect_error("", "not valid JSON");
        expect_error("[]", "not a JSON object");
        expect_error("{\"files\": []}", "version");
        expect_error("{\"version\": \"\", \"files\": []}", "version");
        expect_error("{\"version\": \"a\\nb\", \"files\": []}", "control character");
        expect_error("{\"version\": \"v\"}", "files: missing");
        expect_error("{\"version\": \"v\", \"files\": [1]}", "files[0]: not an object");
        expect_error(FILE1("\"../etc/passwd\""), "escapes dest");
        expect_error(FILE1("\"a/../../b\""), "escapes dest");
        expect_error(FILE1("\"/etc/passwd\""), "absolute");
        expect_error(FILE1("\"a//b\""), "empty component");
        expect_error(FILE1("\"a/\""), "empty component");
        expect_error(FILE1("\"./a\""), "'.' component");
        expect_error(FILE1("\"..data\""), "reserved");
        expect_error(FILE1("\"x/..2026_01_01\""), "reserved");
        expect_error(FILE1("\"\""), "is empty");
        expect_error(FILE1("\"a\\u0001b\""), "control character");
        expect_error(FILE1("7"), "files[0].path");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"u\", \"size\": -1, \"sha256\": \"" SHA_A "\"}]}", "size");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"u\", \"size\": 1.5, \"sha256\": \"" SHA_A "\"}]}", "size");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"u\", \"size\": \"1\", \"sha256\": \"" SHA_A "\"}]}", "size");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"u\", \"size\": 1, \"sha256\": \"abc\"}]}", "sha256");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"\", \"size\": 1, \"sha256\": \"" SHA_A "\"}]}", "url");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\", \"mode\": \"4755\"}]}", "permission bits");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\", \"mode\": \"0998\"}]}", "octal");
        expect_error("{\"version\": \"v\", \"files\": [{\"path\": \"a\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\", \"mode\": 420}]}", "octal");
        expect_error("{\"version\": \"v\", \"files\": ["
                     "{\"path\": \"a\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\"},"
                     "{\"path\": \"a\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\"}]}", "appears twice");
        expect_error("{\"version\": \"v\", \"files\": ["
                     "{\"path\": \"a/b/c\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\"},"
                     "{\"path\": \"a/b\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\"}]}", "is a file and a directory");

        /* A NUL inside the text. */
        struct manifest *m = NULL;
        char *error = NULL;
        assert_int_equal(manifest_parse("{}\0x", 4, &m, &error), -EINVAL);
        free(error);
}

/* A manifest of the given paths (each a file of one byte). */
static char *manifest_of(const char *const *paths, size_t n, size_t *ret_len) {
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        assert_non_null(f);
        fputs("{\"version\": \"v\", \"files\": [", f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s{\"path\": \"%s\", \"url\": \"u\", \"size\": 1, \"sha256\": \"" SHA_A "\"}", i ? "," : "",
                        paths[i]);
        fputs("]}", f);
        assert_int_equal(fclose(f), 0);
        *ret_len = len;
        return text;
}

/* "c<i>/d/.../d/f<i>": depth directories above each of n files, every chain its own. */
static char *deep_manifest(unsigned depth, size_t n, size_t *ret_len) {
        char **paths = calloc(n, sizeof(char *));
        assert_non_null(paths);
        for (size_t i = 0; i < n; i++) {
                paths[i] = malloc(depth * 4 + 32);
                assert_non_null(paths[i]);
                char *p = paths[i];
                for (unsigned k = 0; k < depth; k++)
                        p += k == 0 ? sprintf(p, "c%zu/", i) : sprintf(p, "d/");
                sprintf(p, "f%zu", i);
        }
        char *text = manifest_of((const char *const *) paths, n, ret_len);
        for (size_t i = 0; i < n; i++)
                free(paths[i]);
        free(paths);
        return text;
}

static int parse_limited(const char *text, size_t len, unsigned depth, unsigned dirs, unsigned entries,
                         struct manifest **ret, char **ret_error) {
        struct manifest_limits l = { .max_depth = depth, .max_directories = dirs, .max_entries = entries };
        return manifest_parse_limited(text, len, &l, ret, ret_error);
}

/* What a version makes on disk is counted exactly: directories once however many files share
 * them, one link in dest per top-level entry. */
static void test_tree_counts(_unused_ void **state) {
        static const char *const paths[] = { "top", "a/b/c/f1", "a/b/c/f2", "a/b/g", "a/x", "a!/y", "z/y/x/w" };
        _cleanup_(manifest_freep) struct manifest *m = NULL;
        _cleanup_free_ char *text = NULL;
        size_t len;

        text = manifest_of(paths, ELEMENTSOF(paths), &len);
        assert_int_equal(manifest_parse(text, len, &m, NULL), 0);
        /* a, a/b, a/b/c, a!, z, z/y, z/y/x */
        assert_int_equal(m->n_directories, 7);
        /* top, a, a!, z */
        assert_int_equal(m->n_links, 4);
        assert_int_equal(m->depth, 3);
        assert_int_equal(manifest_entries(m), 7 + 7 + 4);
        assert_false(m->has_serial);
}

/* The caps: each refused with -E2BIG and its reason at the first value past it, accepted at
 * it; the depth is refused before anything else looks at the paths. */
static void test_limits(_unused_ void **state) {
        struct manifest *m = NULL;
        char *error = NULL;
        size_t len;

        /* 60 files 507 directories deep: the tree that made 30,425 directories. */
        _cleanup_free_ char *deep = deep_manifest(507, 60, &len);
        assert_int_equal(manifest_parse_limited(deep, len, &(struct manifest_limits) { MANIFEST_DEFAULT_MAX_DEPTH,
                                                MANIFEST_DEFAULT_MAX_DIRECTORIES, MANIFEST_DEFAULT_MAX_ENTRIES }, &m, &error),
                         -E2BIG);
        assert_null(m);
        assert_non_null(strstr(error, "is 507 directories deep, more than max-depth (32)"));
        error = mfree(error);
        /* Without limits it parses, and counts what it would make. */
        assert_int_equal(manifest_parse(deep, len, &m, NULL), 0);
        assert_int_equal(m->depth, 507);
        assert_int_equal(m->n_directories, 60 * 507);
        assert_int_equal(m->n_links, 60);
        m = manifest_free(m);

        _cleanup_free_ char *d8 = deep_manifest(8, 40, &len); /* 40 chains of 8 directories */
        assert_int_equal(parse_limited(d8, len, 8, 10000, 100000, &m, NULL), 0);
        assert_int_equal(m->n_directories, 320);
        m = manifest_free(m);
        assert_int_equal(parse_limited(d8, len, 7, 10000, 100000, &m, &error), -E2BIG);
        assert_non_null(strstr(error, "is 8 directories deep, more than max-depth (7)"));
        error = mfree(error);
        assert_int_equal(parse_limited(d8, len, 8, 320, 100000, &m, NULL), 0);
        m = manifest_free(m);
        assert_int_equal(parse_limited(d8, len, 8, 319, 100000, &m, &error), -E2BIG);
        assert_non_null(strstr(error, "files: 320 directories, more than max-directories (319)"));
        error = mfree(error);
        /* 40 files + 320 directories + 40 links */
        assert_int_equal(parse_limited(d8, len, 8, 10000, 400, &m, NULL), 0);
        m = manifest_free(m);
        assert_int_equal(parse_limited(d8, len, 8, 10000, 399, &m, &error), -E2BIG);
        assert_non_null(strstr(error, "files: 400 entries (40 files, 320 directories, 40 links in dest), more than max-entries (399)"));
        error = mfree(error);

        /* A flat bundle of the most files: 10,000 files and their 10,000 links fit the defaults. */
        _cleanup_free_ char *flat = deep_manifest(0, MANIFEST_MAX_FILES, &len);
        assert_int_equal(manifest_parse_limited(flat, len, &(struct manifest_limits) { MANIFEST_DEFAULT_MAX_DEPTH,
                                                MANIFEST_DEFAULT_MAX_DIRECTORIES, MANIFEST_DEFAULT_MAX_ENTRIES }, &m, NULL),
                         0);
        assert_int_equal(manifest_entries(m), 2 * MANIFEST_MAX_FILES);
        m = manifest_free(m);
}

static void test_serial(_unused_ void **state) {
        _cleanup_(manifest_freep) struct manifest *m = NULL, *zero = NULL, *top = NULL;

        assert_int_equal(parse("{\"version\": \"v\", \"serial\": 2026120201, \"files\": []}", &m, NULL), 0);
        assert_true(m->has_serial);
        assert_int_equal(m->serial, 2026120201);
        assert_int_equal(parse("{\"version\": \"v\", \"serial\": 0, \"files\": []}", &zero, NULL), 0);
        assert_true(zero->has_serial);
        assert_int_equal(zero->serial, 0);
        assert_int_equal(parse("{\"version\": \"v\", \"serial\": 9007199254740992, \"files\": []}", &top, NULL), 0);
        assert_int_equal(top->serial, UINT64_C(9007199254740992));
        expect_error("{\"version\": \"v\", \"serial\": -1, \"files\": []}", "serial: not a whole number");
        expect_error("{\"version\": \"v\", \"serial\": 1.5, \"files\": []}", "serial: not a whole number");
        expect_error("{\"version\": \"v\", \"serial\": \"7\", \"files\": []}", "serial: not a whole number");
        expect_error("{\"version\": \"v\", \"serial\": 1e300, \"files\": []}", "serial: not a whole number");
        expect_error("{\"version\": \"v\", \"serial\": null, \"files\": []}", "serial: not a whole number");
}

static void test_paths(_unused_ void **state) {
        assert_null(manifest_check_path("a"));
        assert_null(manifest_check_path("a/b.c/d"));
        assert_null(manifest_check_path(".hidden"));
        assert_null(manifest_check_path("a/.b"));
        assert_non_null(manifest_check_path(".."));
        assert_non_null(manifest_check_path("a/.."));
        char longc[300];
        memset(longc, 'x', sizeof(longc) - 1);
        longc[sizeof(longc) - 1] = 0;
        assert_non_null(manifest_check_path(longc));
}

static void test_resolve(_unused_ void **state) {
        char *u = NULL;

        assert_int_equal(manifest_resolve_url("https://h:8443/app/manifest.json", "app.yaml", &u), 0);
        assert_string_equal(u, "https://h:8443/app/app.yaml");
        free(u);
        assert_int_equal(manifest_resolve_url("https://h/app/manifest.json", "../other/x", &u), 0);
        assert_string_equal(u, "https://h/other/x");
        free(u);
        assert_int_equal(manifest_resolve_url("https://h/app/manifest.json", "/abs/y", &u), 0);
        assert_string_equal(u, "https://h/abs/y");
        free(u);
        assert_int_equal(manifest_resolve_url("https://h/app/m.json", "http://cdn/z", &u), 0);
        assert_string_equal(u, "http://cdn/z");
        free(u);
        assert_int_equal(manifest_resolve_url("https://h/app/m.json", "file:///etc/passwd", &u), -EPROTONOSUPPORT);
}

static void test_hex(_unused_ void **state) {
        uint8_t sha[32];
        char hex[65];

        assert_int_equal(sha256_from_hex(SHA_A, sha), 0);
        sha256_to_hex(sha, hex);
        assert_string_equal(hex, SHA_A);
        assert_int_equal(sha256_from_hex("2CF24DBA5FB0A30E26E83B2AC5B9E29E1B161E5C1FA7425E73043362938B9824", sha), 0);
        assert_int_equal(sha256_from_hex("zz", sha), -EINVAL);
        assert_int_equal(sha256_from_hex(SHA_A "00", sha), -EINVAL);
}

static char *b64(const uint8_t *data, size_t n) {
        char *out = malloc(4 * ((n + 2) / 3) + 1);
        EVP_EncodeBlock((unsigned char *) out, data, (int) n);
        return out;
}

static void test_signature(_unused_ void **state) {
        EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, NULL);
        EVP_PKEY *key = NULL, *pub = NULL, *other = NULL;
        const char msg[] = "{\"version\": \"v\", \"files\": []}";
        uint8_t sig[64], decoded[64];
        size_t n = sizeof(sig);

        assert_non_null(kctx);
        assert_int_equal(EVP_PKEY_keygen_init(kctx), 1);
        assert_int_equal(EVP_PKEY_keygen(kctx, &key), 1);
        assert_int_equal(EVP_PKEY_keygen(kctx, &other), 1);
        EVP_PKEY_CTX_free(kctx);

        EVP_MD_CTX *md = EVP_MD_CTX_new();
        assert_int_equal(EVP_DigestSignInit(md, NULL, NULL, NULL, key), 1);
        assert_int_equal(EVP_DigestSign(md, sig, &n, (const uint8_t *) msg, strlen(msg)), 1);
        EVP_MD_CTX_free(md);
        assert_int_equal(n, 64);

        /* The public key as PEM, through signature_key_from_pem(). */
        BIO *b = BIO_new(BIO_s_mem());
        assert_int_equal(PEM_write_bio_PUBKEY(b, key), 1);
        char *pem = NULL;
        long pem_len = BIO_get_mem_data(b, &pem);
        assert_int_equal(signature_key_from_pem(pem, (size_t) pem_len, &pub), 0);
        BIO_free(b);

        char *text = b64(sig, 64);
        char wrapped[200];
        snprintf(wrapped, sizeof(wrapped), "  %.40s\n%s\r\n", text, text + 40);
        assert_int_equal(signature_decode(wrapped, strlen(wrapped), decoded), 0);
        assert_memory_equal(decoded, sig, 64);
        assert_int_equal(signature_verify(pub, msg, strlen(msg), decoded), 0);
        /* One byte of the message changed, or another key: refused. */
        assert_int_equal(signature_verify(pub, msg, strlen(msg) - 1, decoded), -EBADMSG);
        assert_int_equal(signature_verify(other, msg, strlen(msg), decoded), -EBADMSG);
        decoded[10] ^= 1;
        assert_int_equal(signature_verify(pub, msg, strlen(msg), decoded), -EBADMSG);

        /* Not 64 bytes, not base64, data after padding. */
        char *short_sig = b64(sig, 63);
        assert_int_equal(signature_decode(short_sig, strlen(short_sig), decoded), -EINVAL);
        assert_int_equal(signature_decode("!!!!", 4, decoded), -EINVAL);
        assert_int_equal(signature_decode("", 0, decoded), -EINVAL);
        assert_int_equal(signature_decode("QQ==QQ==", 8, decoded), -EINVAL);

        /* An RSA or EC key is not an Ed25519 key. */
        EVP_PKEY *ec = EVP_EC_gen("P-256");
        b = BIO_new(BIO_s_mem());
        PEM_write_bio_PUBKEY(b, ec);
        pem_len = BIO_get_mem_data(b, &pem);
        EVP_PKEY *bad = NULL;
        assert_int_equal(signature_key_from_pem(pem, (size_t) pem_len, &bad), -EINVAL);
        assert_int_equal(signature_key_from_pem("garbage", 7, &bad), -EINVAL);
        BIO_free(b);
        EVP_PKEY_free(ec);

        free(text);
        free(short_sig);
        EVP_PKEY_free(key);
        EVP_PKEY_free(other);
        EVP_PKEY_free(pub);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse_good),
                cmocka_unit_test(test_parse_refuses),
                cmocka_unit_test(test_paths),
                cmocka_unit_test(test_resolve),
                cmocka_unit_test(test_hex),
                cmocka_unit_test(test_index),
                cmocka_unit_test(test_tree_counts),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_serial),
                cmocka_unit_test(test_signature),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
