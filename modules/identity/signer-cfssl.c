/* SPDX-License-Identifier: MIT */
/* The cfssl signer: a CFSSL CA server's authenticated sign endpoint (/api/v1/cfssl/authsign,
 * HMAC-SHA256 over the request with a key from a file).
 *
 * Trust comes from the operator, never from the server: cfssl-ca-file is the pinned CA, the
 * anchor every answer is verified against and the TLS trust for https. Before each sign request
 * the server's /api/v1/cfssl/info certificate must chain to it (a server with another CA is a
 * signing failure that says so, before any CSR is sent). The file is re-read on every attempt,
 * so a CA rollover needs only a new file: the next retry picks it up.
 * Profiles "pinion-node" (the node's client certificate) and "pinion-intermediate" (the node CA
 * that signs workload certificates here) must exist in the server's signing config. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "fs.h"
#include "cfssl-wire.h"
#include "http.h"
#include "json.h"
#include "signer.h"

#define CFSSL_MAX_BODY (1024 * 1024)

struct cfssl_op {
        struct cfssl_signer *signer;
        struct cfssl_op *next;
        struct http_transfer *transfer;
        char *request_json; /* the sign request, sent once the root is known */
        struct curl_slist *headers; /* must outlive the transfer */
        signer_done_fn done;
        void *userdata;
        bool fetching_info;
};

struct cfssl_signer {
        struct signer base;
        struct http_client *http;
        char *url;
        char *auth_key_file;
        char *ca_file;
        usec_t timeout;
        struct cfssl_op *ops;
};

/* ---- requests ---- */

static void op_free(struct cfssl_op *op) {
        if (!op)
                return;
        struct cfssl_op **p = &op->signer->ops;
        while (*p && *p != op)
                p = &(*p)->next;
        if (*p)
                *p = op->next;
        http_transfer_cancel(op->transfer);
        curl_slist_free_all(op->headers);
        free(op->request_json);
        free(op);
}

static void op_finish(struct cfssl_op *op, int error, const char *reason, const char *chain) {
        signer_done_fn done = op->done;
        void *userdata = op->userdata;
        op->transfer = NULL; /* finished (we are in its done callback) */
        op_free(op);
        done(error, reason, chain, userdata);
}

static void on_response(struct http_client *c, const struct http_response *resp, void *userdata);

static int op_post(struct cfssl_op *op, const char *path, const char *body) {
        struct cfssl_signer *s = op->signer;
        _cleanup_free_ char *url = NULL;
        size_t n = strlen(s->url);

        if (asprintf(&url, "%.*s%s", (int) (n && s->url[n - 1] == '/' ? n - 1 : n), s->url, path) < 0)
                return -ENOMEM;
        CURL *easy = curl_easy_init();
        if (!easy)
                return -ENOMEM;
        curl_slist_free_all(op->headers);
        op->headers = curl_slist_append(NULL, "Content-Type: application/json");
        if (!op->headers) {
                curl_easy_cleanup(easy);
                return -ENOMEM;
        }
        curl_easy_setopt(easy, CURLOPT_URL, url);
        curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, body);
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, op->headers);
        curl_easy_setopt(easy, CURLOPT_TIMEOUT_MS, (long) (s->timeout / USEC_PER_MSEC));
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, (long) (s->timeout / USEC_PER_MSEC));
        curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(easy, CURLOPT_CAINFO, s->ca_file);
        return http_client_submit(s->http, easy, CFSSL_MAX_BODY, on_response, op, &op->transfer);
}

static int op_send_sign(struct cfssl_op *op) {
        struct cfssl_signer *s = op->signer;
        _cleanup_free_ char *text = NULL, *body = NULL;
        unsigned char *key = NULL;
        size_t key_size = 0, n;
        int r;

        r = fs_read_file_full(s->auth_key_file, 4096, &text, &n);
        if (r < 0)
                return r;
        r = cfssl_wire_parse_hex_key(text, &key, &key_size);
        OPENSSL_cleanse(text, n);
        if (r < 0)
                return r;
        r = cfssl_wire_authsign_body(key, key_size, op->request_json, &body);
        OPENSSL_clear_free(key, key_size);
        if (r < 0)
                return r;
        op->fetching_info = false;
        return op_post(op, "/api/v1/cfssl/authsign", body);
}

static void on_response(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct cfssl_op *op = userdata;
        struct cfssl_signer *s = op->signer;
        _cleanup_free_ char *cert = NULL, *reason = NULL;
        int r;

        op->transfer = NULL;
        if (resp->error < 0) {
                if (asprintf(&reason, "%s: %s", s->url, resp->error_message ? resp->error_message : strerror(-resp->error)) < 0)
                        reason = NULL;
                return op_finish(op, resp->error, reason, NULL);
        }
        r = cfssl_wire_parse_response(resp->body, resp->body_size, &cert, &reason);
        if (r < 0) {
                _cleanup_free_ char *full = NULL;
                if (asprintf(&full, "%s: HTTP %ld: %s", s->url, resp->status, reason ? reason : "bad answer") < 0)
                        full = NULL;
                return op_finish(op, r, full, NULL);
        }
        if (op->fetching_info) {
                _cleanup_(x509_chain_freep) STACK_OF(X509) *info = NULL;
                const char *why = NULL;
                r = x509_chain_from_pem(cert, strlen(cert), &info);
                if (r < 0)
                        return op_finish(op, r, "the CA's info has no parsable certificate", NULL);
                /* The server's CA must be the pinned one (or chain to it): otherwise whoever
                 * answers on that address could make us trust any root. */
                if (x509_verify_chain(info, s->base.roots, 0, &why) < 0) {
                        _cleanup_free_ char *msg = NULL;
                        if (asprintf(&msg, "%s serves a CA that is not the pinned cfssl-ca-file %s (%s)", s->url,
                                     s->ca_file, why ? why : "does not verify") < 0)
                                msg = NULL;
                        return op_finish(op, -EBADMSG, msg, NULL);
                }
                r = op_send_sign(op);
                if (r < 0)
                        return op_finish(op, r, "cannot send the sign request", NULL);
                return;
        }
        op_finish(op, 0, NULL, cert);
}

/* (Re-)reads the pinned CA: a new file (CA rollover) applies from the next attempt on. */
static int load_roots(struct cfssl_signer *s) {
        _cleanup_free_ char *pem = NULL;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *roots = NULL;
        size_t n;
        int r = fs_read_file_full(s->ca_file, CFSSL_MAX_BODY, &pem, &n);
        if (r >= 0)
                r = x509_chain_from_pem(pem, n, &roots);
        if (r < 0)
                return r;
        sk_X509_pop_free(s->base.roots, X509_free);
        s->base.roots = TAKE_PTR(roots);
        return 0;
}

static int cfssl_sign(struct signer *base, const struct signer_request *req, signer_done_fn done, void *userdata) {
        struct cfssl_signer *s = (struct cfssl_signer *) base;
        _cleanup_free_ char *csr = NULL;
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        int r;

        r = x509_csr_to_pem(req->csr, &csr);
        if (r < 0)
                return r;
        if (!o || !cJSON_AddStringToObject(o, "certificate_request", csr) ||
            !cJSON_AddStringToObject(o, "profile", streq(req->profile, "intermediate") ? "pinion-intermediate" : "pinion-node"))
                return -ENOMEM;
        struct cfssl_op *op = calloc(1, sizeof(*op));
        if (!op)
                return -ENOMEM;
        op->signer = s;
        op->done = done;
        op->userdata = userdata;
        op->request_json = cJSON_PrintUnformatted(o);
        op->next = s->ops;
        s->ops = op;
        if (!op->request_json) {
                op_free(op);
                return -ENOMEM;
        }
        /* The pinned CA (re-read), then the server's CA checked against it, then the request. */
        r = load_roots(s);
        if (r < 0) {
                op_free(op);
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "cannot read the pinned cfssl-ca-file %s: %s", s->ca_file,
                             r == -EBADMSG ? "not a PEM certificate" : strerror(-r)) < 0)
                        msg = NULL;
                done(r, msg, NULL, userdata);
                return 0;
        }
        op->fetching_info = true;
        r = op_post(op, "/api/v1/cfssl/info", "{}");
        if (r < 0)
                op_free(op);
        return r;
}

static void cfssl_cancel(struct signer *base, void *userdata) {
        struct cfssl_signer *s = (struct cfssl_signer *) base;
        for (struct cfssl_op *op = s->ops, *next; op; op = next) {
                next = op->next;
                if (op->userdata == userdata)
                        op_free(op);
        }
}

static void cfssl_free(struct signer *base) {
        struct cfssl_signer *s = (struct cfssl_signer *) base;
        while (s->ops)
                op_free(s->ops);
        free(s->url);
        free(s->auth_key_file);
        free(s->ca_file);
        free(s);
}

static const struct signer_ops cfssl_ops = {
        .name = "cfssl",
        .sign = cfssl_sign,
        .cancel = cfssl_cancel,
        .free = cfssl_free,
};

int signer_cfssl_new(struct http_client *http, const struct cfssl_settings *settings, struct signer **ret,
                     char **ret_error) {
        struct cfssl_signer *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->base.ops = &cfssl_ops;
        s->http = http;
        s->url = strdup(settings->url);
        s->auth_key_file = strdup(settings->auth_key_file);
        s->ca_file = strdup(settings->ca_file);
        s->timeout = settings->timeout;
        if (!s->url || !s->auth_key_file || !s->ca_file) {
                signer_free(&s->base);
                return -ENOMEM;
        }
        int r = load_roots(s);
        if (r < 0) {
                if (asprintf(ret_error, "cfssl-ca-file %s: %s", settings->ca_file,
                             r == -EBADMSG ? "not a PEM certificate" : strerror(-r)) < 0)
                        *ret_error = NULL;
                signer_free(&s->base);
                return r;
        }
        *ret = &s->base;
        return 0;
}
