/* SPDX-License-Identifier: MIT */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "kube-endpoint.h"

#define TOKEN_MAX_SIZE (64 * 1024)

static int strdup_or_null(const char *s, char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static const char *in_cluster_host(void) {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        return isempty(host) ? NULL : host;
}

static int in_cluster_url(char **ret) {
        const char *host = in_cluster_host(), *port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host)
                return -ENOENT;
        /* An IPv6 service address needs brackets in a URL. */
        bool v6 = strchr(host, ':') != NULL;
        if (asprintf(ret, "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", isempty(port) ? "443" : port) < 0)
                return -ENOMEM;
        return 0;
}

int kube_endpoint_resolve(const char *url, const char *token_file, const char *ca_file, struct kube_endpoint *ret,
                          const char **ret_reason) {
        struct kube_endpoint ep = {};
        bool in_cluster = !url;
        int r;

        if (in_cluster) {
                r = in_cluster_url(&ep.url);
                if (r == -ENOENT) {
                        *ret_reason = "no [apiserver] url and not running in a cluster";
                        return r;
                }
        } else
                r = strdup_or_null(url, &ep.url);
        if (r >= 0)
                r = strdup_or_null(token_file ? token_file : in_cluster ? KUBE_SERVICEACCOUNT_DIR "/token" : NULL,
                                   &ep.token_file);
        if (r >= 0)
                r = strdup_or_null(ca_file ? ca_file : in_cluster ? KUBE_SERVICEACCOUNT_DIR "/ca.crt" : NULL, &ep.ca_file);
        if (r < 0) {
                kube_endpoint_done(&ep);
                return r;
        }
        size_t n = strlen(ep.url);
        while (n > 0 && ep.url[n - 1] == '/')
                ep.url[--n] = 0;
        *ret = ep;
        return 0;
}

int kube_endpoint_from_config(const struct config *c, const char *token_file, struct kube_endpoint *ret,
                              const char **ret_reason) {
        return kube_endpoint_resolve(config_value(c, "apiserver", "url"),
                                     token_file ? token_file : config_value(c, "apiserver", "token-file"),
                                     config_value(c, "apiserver", "ca-file"), ret, ret_reason);
}

bool kube_endpoint_configured(const struct config *c) {
        return config_value(c, "apiserver", "url") || in_cluster_host();
}

int kube_endpoint_copy(const struct kube_endpoint *ep, struct kube_endpoint *ret) {
        struct kube_endpoint c = {};
        int r;

        if ((r = strdup_or_null(ep->url, &c.url)) < 0 || (r = strdup_or_null(ep->token_file, &c.token_file)) < 0 ||
            (r = strdup_or_null(ep->ca_file, &c.ca_file)) < 0 || (r = strdup_or_null(ep->client_cert, &c.client_cert)) < 0 ||
            (r = strdup_or_null(ep->client_key, &c.client_key)) < 0) {
                kube_endpoint_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}

void kube_endpoint_done(struct kube_endpoint *ep) {
        free(ep->url);
        free(ep->token_file);
        free(ep->ca_file);
        free(ep->client_cert);
        free(ep->client_key);
        if (ep->token)
                explicit_bzero(ep->token, strlen(ep->token));
        free(ep->token);
        *ep = (struct kube_endpoint) {};
}

bool kube_endpoint_equal(const struct kube_endpoint *a, const struct kube_endpoint *b) {
        return streq_ptr(a->url, b->url) && streq_ptr(a->token_file, b->token_file) &&
               streq_ptr(a->ca_file, b->ca_file) && streq_ptr(a->client_cert, b->client_cert) &&
               streq_ptr(a->client_key, b->client_key);
}

/* The one rule for a token file: one non-empty line (trailing whitespace dropped). On failure
 * *ret_reason says what is wrong with the file's content or strerror. */
static int read_token(const char *path, char **ret, const char **ret_reason) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = fs_read_file_full(path, TOKEN_MAX_SIZE, &data, &size);
        if (r < 0) {
                *ret_reason = r == -EFBIG ? "larger than 64 KiB" : strerror(-r);
                return r;
        }
        /* Tokens are written with a trailing newline more often than not. */
        while (size > 0 && strchr(" \t\r\n", data[size - 1]))
                data[--size] = 0;
        if (size == 0 || strpbrk(data, "\r\n")) {
                *ret_reason = size == 0 ? "the file is empty" : "more than one line: a token file holds one token";
                explicit_bzero(data, size);
                return -EBADMSG;
        }
        *ret = TAKE_PTR(data);
        return 0;
}

int kube_endpoint_parse_token_file(const char *v, void *ret, const char **reason) {
        _cleanup_free_ char *path = NULL;
        char *token = NULL;
        int r;

        r = config_parse_file(v, &path, reason); /* absolute, a readable file, or "" (unset) */
        if (r >= 0 && path) {
                r = read_token(path, &token, reason);
                if (r < 0)
                        return r;
                explicit_bzero(token, strlen(token));
                free(token);
        }
        if (r >= 0)
                *(char **) ret = TAKE_PTR(path);
        return r;
}

const char *kube_endpoint_strerror(const struct kube_endpoint *ep, int r) {
        return ep->token_error[0] ? ep->token_error : strerror(-r);
}

static int token_failed(struct kube_endpoint *ep, int r, const char *reason) {
        (void) snprintf(ep->token_error, sizeof(ep->token_error), "token file %s: %s", ep->token_file, reason);
        return r;
}

int kube_endpoint_refresh_token(struct kube_endpoint *ep) {
        _cleanup_free_ char *data = NULL;
        const char *reason = NULL;
        struct stat st;
        int r;

        ep->token_error[0] = 0;
        if (!ep->token_file)
                return 0;
        if (stat(ep->token_file, &st) < 0)
                return token_failed(ep, -errno, strerror(errno));
        if (ep->token && st.st_dev == ep->token_st.st_dev && st.st_ino == ep->token_st.st_ino &&
            st.st_size == ep->token_st.st_size && st.st_mtim.tv_sec == ep->token_st.st_mtim.tv_sec &&
            st.st_mtim.tv_nsec == ep->token_st.st_mtim.tv_nsec)
                return 0;

        r = read_token(ep->token_file, &data, &reason);
        if (r < 0)
                return token_failed(ep, r, reason);
        if (ep->token) {
                explicit_bzero(ep->token, strlen(ep->token));
                free(ep->token);
        }
        ep->token = TAKE_PTR(data);
        ep->token_st = st;
        ep->token_reads++;
        return 1;
}

/* A watch is quiet for minutes on a quiet node, so silence proves nothing; a dead connection
 * (the peer gone, the node's address removed under it) is found by TCP: keepalive probes after
 * 30 s idle, every 10 s, and the connection given up after 3 unanswered (curl 7.88 sets no
 * probe count: the kernel's default of 9 would take 2 minutes), unacknowledged data likewise. */
static int set_dead_peer_limits(void *userdata, curl_socket_t fd, curlsocktype purpose) {
        int count = 3;
        unsigned user_timeout_ms = (30 + 3 * 10) * 1000;

        if (purpose != CURLSOCKTYPE_IPCXN)
                return CURL_SOCKOPT_OK;
        /* Not fatal: a socket that refuses them is a Unix socket or an odd stack; the defaults
         * still end a dead connection, later. */
        (void) setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
        (void) setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
        return CURL_SOCKOPT_OK;
}
int kube_endpoint_request_as(struct kube_endpoint *ep, const char *path_and_query, long timeout_ms,
                             const char *cert_file, const char *key_file, CURL **ret) {
        _cleanup_free_ char *url = NULL;
        const char *token = NULL;
        CURL *c;
        int r;

        if (!cert_file || !key_file) {
                cert_file = key_file = NULL;
                r = kube_endpoint_refresh_token(ep);
                if (r < 0 && !ep->token)
                        return r; /* never read one: cannot authenticate */
                ep->token_error[0] = 0; /* the last good token still serves */
                token = ep->token;
        }
        if (asprintf(&url, "%s%s", ep->url, path_and_query) < 0)
                return -ENOMEM;
        c = curl_easy_init();
        if (!c)
                return -ENOMEM;

        bool ok = curl_easy_setopt(c, CURLOPT_URL, url) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_USERAGENT, "pinion/" PACKAGE_VERSION) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 30L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 10L) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, set_dead_peer_limits) == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "") == CURLE_OK &&
                  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK &&
                  (timeout_ms <= 0 || curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms) == CURLE_OK) &&
                  (!ep->ca_file || curl_easy_setopt(c, CURLOPT_CAINFO, ep->ca_file) == CURLE_OK) &&
                  (!cert_file || curl_easy_setopt(c, CURLOPT_SSLCERT, cert_file) == CURLE_OK) &&
                  (!key_file || curl_easy_setopt(c, CURLOPT_SSLKEY, key_file) == CURLE_OK) &&
                  (!token || (curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BEARER) == CURLE_OK &&
                              curl_easy_setopt(c, CURLOPT_XOAUTH2_BEARER, token) == CURLE_OK));
        if (!ok) {
                curl_easy_cleanup(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}


int kube_endpoint_request(struct kube_endpoint *ep, const char *path_and_query, long timeout_ms, CURL **ret) {
        return kube_endpoint_request_as(ep, path_and_query, timeout_ms, ep->client_cert, ep->client_key, ret);
}
