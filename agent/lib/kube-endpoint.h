/* SPDX-License-Identifier: MIT */
#pragma once

/* Where the apiserver is and how to authenticate to it, found in one place for every module
 * that talks to it (the pod watch, the Node's pod CIDR, the kubernetes certificate signer):
 * the configured [apiserver] url/token-file/ca-file, or in a cluster the service environment
 * (KUBERNETES_SERVICE_HOST/PORT) with the mounted service-account token and CA. Builds libcurl
 * handles for requests: TLS is always verified; the bearer token file is re-read whenever it
 * changes (projected service-account tokens rotate), so rotation needs no restart. */

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "config.h"
#include "macro.h"

#define KUBE_SERVICEACCOUNT_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

struct kube_endpoint {
        char *url; /* scheme://host:port, no trailing slash */
        char *token_file;
        char *ca_file;
        char *client_cert; /* PEM files of a client certificate, or NULL */
        char *client_key;

        char *token;          /* the last token read (wiped when replaced or freed) */
        struct stat token_st; /* identity of the file it was read from */
        unsigned token_reads;
        char token_error[PATH_MAX + 64]; /* why the last read failed, naming the file; "" if it did not */
};

/* From settings; url NULL means the in-cluster environment, where token_file and ca_file
 * default to the service account's. Returns -ENOENT with *ret_reason when there is no
 * apiserver at all (no url and not in a cluster). */
int kube_endpoint_resolve(const char *url, const char *token_file, const char *ca_file, struct kube_endpoint *ret,
                          const char **ret_reason);
/* The same from a loaded config's [apiserver] section (the last value of a key wins, an empty
 * value is unset), for modules other than apiserver that need to know where it is without
 * asking that module. token_file, if not NULL, replaces the section's (another credential for
 * the same server, such as a bootstrap token). */
int kube_endpoint_from_config(const struct config *c, const char *token_file, struct kube_endpoint *ret,
                              const char **ret_reason);
/* Whether c names an apiserver, configured or in-cluster. */
bool kube_endpoint_configured(const struct config *c);
/* Copies where and how (url, files), not the token read so far. */
int kube_endpoint_copy(const struct kube_endpoint *ep, struct kube_endpoint *ret);
void kube_endpoint_done(struct kube_endpoint *ep);
bool kube_endpoint_equal(const struct kube_endpoint *a, const struct kube_endpoint *b);

/* Re-reads the token file if it changed. Returns 1 if the token changed, 0 if not; on failure
 * -errno (-EBADMSG: empty, or more than one line) with ep->token_error saying so. */
int kube_endpoint_refresh_token(struct kube_endpoint *ep);
/* What a failed kube_endpoint_request*() returned r for, for a log line: the token file's
 * problem (naming the file) if that was it, else strerror. */
const char *kube_endpoint_strerror(const struct kube_endpoint *ep, int r);
/* Config parser (config.h) for a bearer token file: a readable file holding one non-empty
 * line, the rule kube_endpoint_refresh_token() reads it by, checked when the config is. */
int kube_endpoint_parse_token_file(const char *v, void *ret, const char **reason);
/* A GET of path_and_query ("/api/v1/pods?..."), authenticated with the endpoint's client
 * certificate if it has one, else its bearer token. *ret is owned by the caller (or by
 * http_client_submit once submitted). */
int kube_endpoint_request(struct kube_endpoint *ep, const char *path_and_query, long timeout_ms, CURL **ret);
/* The same, authenticated with the client certificate cert_file/key_file when they are given
 * (both read in the same TLS handshake), else with the bearer token. */
int kube_endpoint_request_as(struct kube_endpoint *ep, const char *path_and_query, long timeout_ms,
                             const char *cert_file, const char *key_file, CURL **ret);
