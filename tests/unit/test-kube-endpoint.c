/* SPDX-License-Identifier: MIT */
/* kube-endpoint.c: where the apiserver is (configured or in-cluster), read from settings and
 * from a config, and the bearer token as it rotates. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "fs.h"
#include "kube-endpoint.h"

static void no_cluster(void) {
        assert_int_equal(unsetenv("KUBERNETES_SERVICE_HOST"), 0);
        assert_int_equal(unsetenv("KUBERNETES_SERVICE_PORT"), 0);
}

static void test_configured(void **state) {
        struct kube_endpoint ep = {};
        const char *reason = NULL;

        no_cluster();
        assert_int_equal(kube_endpoint_resolve("https://api.example:6443//", "/t", "/ca", &ep, &reason), 0);
        assert_string_equal(ep.url, "https://api.example:6443"); /* paths are appended to it */
        assert_string_equal(ep.token_file, "/t");
        assert_string_equal(ep.ca_file, "/ca");
        kube_endpoint_done(&ep);

        /* A configured url takes nothing from a service account it did not name. */
        assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1", 1), 0);
        assert_int_equal(kube_endpoint_resolve("http://127.0.0.1:8080", NULL, NULL, &ep, &reason), 0);
        assert_string_equal(ep.url, "http://127.0.0.1:8080");
        assert_null(ep.token_file);
        assert_null(ep.ca_file);
        kube_endpoint_done(&ep);
        no_cluster();
}

static void test_in_cluster(void **state) {
        struct kube_endpoint ep = {};
        const char *reason = NULL;

        no_cluster();
        assert_int_equal(kube_endpoint_resolve(NULL, NULL, NULL, &ep, &reason), -ENOENT);
        assert_string_equal(reason, "no [apiserver] url and not running in a cluster");
        assert_null(ep.url);

        assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1), 0);
        assert_int_equal(kube_endpoint_resolve(NULL, NULL, NULL, &ep, &reason), 0);
        assert_string_equal(ep.url, "https://10.96.0.1:443");
        assert_string_equal(ep.token_file, KUBE_SERVICEACCOUNT_DIR "/token");
        assert_string_equal(ep.ca_file, KUBE_SERVICEACCOUNT_DIR "/ca.crt");
        kube_endpoint_done(&ep);

        /* An IPv6 service address is bracketed; configured files win over the mounted ones. */
        assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1), 0);
        assert_int_equal(setenv("KUBERNETES_SERVICE_PORT", "6443", 1), 0);
        assert_int_equal(kube_endpoint_resolve(NULL, "/bootstrap", "/my-ca", &ep, &reason), 0);
        assert_string_equal(ep.url, "https://[fd00::1]:6443");
        assert_string_equal(ep.token_file, "/bootstrap");
        assert_string_equal(ep.ca_file, "/my-ca");
        kube_endpoint_done(&ep);
        no_cluster();
}

static void test_from_config(void **state) {
        _cleanup_(config_freep) struct config *c = NULL, *empty = NULL;
        _cleanup_free_ char *error = NULL;
        struct kube_endpoint ep = {}, copy = {};
        const char *reason = NULL;

        no_cluster();
        assert_int_equal(config_load_string("test.conf",
                                            "[apiserver]\nurl=https://old:1\nurl=https://api:6443/\n"
                                            "token-file=/sa-token\nca-file=/cluster-ca\n",
                                            &c, &error),
                         0);
        assert_true(kube_endpoint_configured(c));
        assert_int_equal(kube_endpoint_from_config(c, NULL, &ep, &reason), 0);
        assert_string_equal(ep.url, "https://api:6443"); /* the last value wins */
        assert_string_equal(ep.token_file, "/sa-token");
        assert_string_equal(ep.ca_file, "/cluster-ca");
        kube_endpoint_done(&ep);

        /* Another credential for the same server. */
        assert_int_equal(kube_endpoint_from_config(c, "/bootstrap-token", &ep, &reason), 0);
        assert_string_equal(ep.token_file, "/bootstrap-token");
        assert_string_equal(ep.ca_file, "/cluster-ca");
        assert_int_equal(kube_endpoint_copy(&ep, &copy), 0);
        assert_true(kube_endpoint_equal(&ep, &copy));
        free(copy.ca_file);
        copy.ca_file = NULL;
        assert_false(kube_endpoint_equal(&ep, &copy));
        kube_endpoint_done(&copy);
        kube_endpoint_done(&ep);

        /* An empty url is unset: no apiserver unless the environment names one. */
        assert_int_equal(config_load_string("empty.conf", "[apiserver]\nurl=\n", &empty, &error), 0);
        assert_false(kube_endpoint_configured(empty));
        assert_int_equal(kube_endpoint_from_config(empty, NULL, &ep, &reason), -ENOENT);
        assert_int_equal(setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1), 0);
        assert_true(kube_endpoint_configured(empty));
        assert_int_equal(kube_endpoint_from_config(empty, NULL, &ep, &reason), 0);
        assert_string_equal(ep.url, "https://10.96.0.1:443");
        kube_endpoint_done(&ep);
        no_cluster();
}

static void write_text(const char *path, const char *text) {
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

static void test_token(void **state) {
        char dir[] = "/tmp/test-kube-endpoint.XXXXXX", path[64], tmp[64];
        struct kube_endpoint ep = {};
        const char *reason = NULL;
        CURL *easy = NULL;
        char *url = NULL;
        char expect[PATH_MAX + 128];

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/token", dir);
        snprintf(tmp, sizeof(tmp), "%s/token.new", dir);
        no_cluster();
        assert_int_equal(kube_endpoint_resolve("https://api:6443", path, NULL, &ep, &reason), 0);

        /* No token yet: a request cannot be authenticated, and the error names the file. */
        assert_int_equal(kube_endpoint_request(&ep, "/api/v1/pods", 1000, &easy), -ENOENT);
        snprintf(expect, sizeof(expect), "token file %s: No such file or directory", path);
        assert_string_equal(kube_endpoint_strerror(&ep, -ENOENT), expect);
        write_text(path, "");
        assert_int_equal(kube_endpoint_request(&ep, "/api/v1/pods", 1000, &easy), -EBADMSG);
        snprintf(expect, sizeof(expect), "token file %s: the file is empty", path);
        assert_string_equal(kube_endpoint_strerror(&ep, -EBADMSG), expect);
        assert_int_equal(unlink(path), 0);
        /* ... unless it names a client certificate, which needs no token. */
        assert_int_equal(kube_endpoint_request_as(&ep, "/api/v1/nodes/n1", 1000, "/cert", "/key", &easy), 0);
        assert_int_equal(curl_easy_getinfo(easy, CURLINFO_EFFECTIVE_URL, &url), CURLE_OK);
        assert_string_equal(url, "https://api:6443/api/v1/nodes/n1");
        curl_easy_cleanup(easy);
        assert_int_equal(ep.token_reads, 0);

        write_text(path, "first\n");
        assert_int_equal(kube_endpoint_refresh_token(&ep), 1);
        assert_string_equal(ep.token, "first"); /* the newline is not part of it */
        assert_int_equal(kube_endpoint_refresh_token(&ep), 0);
        assert_int_equal(kube_endpoint_request(&ep, "/api/v1/pods", 1000, &easy), 0);
        curl_easy_cleanup(easy);
        assert_int_equal(ep.token_reads, 1); /* unchanged file: not read again */

        /* A rotation (a new file renamed over the old one, as kubelet does) is seen. */
        write_text(tmp, "second");
        assert_int_equal(rename(tmp, path), 0);
        assert_int_equal(kube_endpoint_refresh_token(&ep), 1);
        assert_string_equal(ep.token, "second");

        /* Unusable tokens are refused; the last good one stays. */
        write_text(tmp, "\n\n");
        assert_int_equal(rename(tmp, path), 0);
        assert_int_equal(kube_endpoint_refresh_token(&ep), -EBADMSG);
        write_text(tmp, "two\nlines");
        assert_int_equal(rename(tmp, path), 0);
        assert_int_equal(kube_endpoint_refresh_token(&ep), -EBADMSG);
        snprintf(expect, sizeof(expect), "token file %s: more than one line: a token file holds one token", path);
        assert_string_equal(ep.token_error, expect);
        assert_string_equal(ep.token, "second");
        assert_int_equal(kube_endpoint_request(&ep, "/api/v1/pods", 1000, &easy), 0);
        curl_easy_cleanup(easy);
        /* Served by the last good token: no failure to report. */
        assert_string_equal(kube_endpoint_strerror(&ep, -ENOMEM), strerror(ENOMEM));

        kube_endpoint_done(&ep);
        assert_null(ep.token);
        assert_int_equal(fs_rm_rf(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_configured),
                cmocka_unit_test(test_in_cluster),
                cmocka_unit_test(test_from_config),
                cmocka_unit_test(test_token),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
