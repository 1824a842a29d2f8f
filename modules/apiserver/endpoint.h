/* SPDX-License-Identifier: MIT */
#pragma once

/* Where the apiserver is and how to authenticate to it: the configured url/token-file/ca-file,
 * or in a cluster the service environment (KUBERNETES_SERVICE_HOST/PORT) and the mounted
 * service-account token and CA; optionally the node's client certificate. Builds libcurl
 * handles for requests: TLS is always verified; the bearer token file is re-read whenever it
 * changes (projected service-account tokens rotate), so rotation needs no restart. */

#include <stdbool.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "macro.h"

#define SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct apiserver_endpoint {
        char *url; /* scheme://host:port, no trailing slash */
        char *token_file;
        char *ca_file;
        char *client_cert; /* PEM files of a client certificate, or NULL */
        char *client_key;

        char *token;          /* the last token read */
        struct stat token_st; /* identity of the file it was read from */
        unsigned token_reads;
};

/* From settings (url may be NULL: then the in-cluster environment). *ret_reason says why not
 * when it returns -ENOENT (no apiserver configured). */
int apiserver_endpoint_resolve(const char *url, const char *token_file, const char *ca_file,
                               struct apiserver_endpoint *ret, const char **ret_reason);
void apiserver_endpoint_done(struct apiserver_endpoint *ep);
bool apiserver_endpoint_equal(const struct apiserver_endpoint *a, const struct apiserver_endpoint *b);

/* A GET of path_and_query ("/api/v1/pods?..."), authenticated; *ret is owned by the caller
 * (or by http_client_submit once submitted). */
int apiserver_endpoint_request(struct apiserver_endpoint *ep, const char *path_and_query, long timeout_ms,
                               CURL **ret);
/* Re-reads the token file if it changed. Returns 1 if the token changed, 0 if not. */
int apiserver_endpoint_refresh_token(struct apiserver_endpoint *ep);
