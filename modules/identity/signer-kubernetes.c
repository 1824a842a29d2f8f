/* SPDX-License-Identifier: MIT */
/* The kubernetes signer: the CSR API (certificates.k8s.io/v1, signer
 * kubernetes.io/kube-apiserver-client-kubelet) authenticated with a bootstrap token, as the
 * kubelet bootstraps. The request's name comes from the key and subject (kube-csr.c), so a retry
 * with the same key finds the request it made (409 on create, then a GET) instead of making a
 * second one. After the create the signer polls the object with backoff (250 ms doubling to
 * 4 s) until it is issued, denied, or the deadline passes. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "http.h"
#include "kube-endpoint.h"
#include "kube-csr.h"
#include "signer.h"

#define KUBE_MAX_BODY (1024 * 1024)
#define POLL_FIRST (250 * USEC_PER_MSEC)
#define POLL_MAX (4 * USEC_PER_SEC)

struct kube_op {
        struct kube_signer *signer;
        struct kube_op *next;
        struct http_transfer *transfer;
        struct curl_slist *headers;
        sd_event_source *timer;
        char *name;
        char *body; /* the POST body */
        char *cert_file, *key_file; /* authenticate with the node's certificate, else the token */
        usec_t deadline, poll_delay;
        bool created;
        signer_done_fn done;
        void *userdata;
};

struct kube_signer {
        struct signer base;
        sd_event *event;
        struct http_client *http;
        struct kube_endpoint endpoint; /* the apiserver; its token file is the bootstrap token */
        usec_t deadline;
        struct kube_op *ops;
};

static void op_free(struct kube_op *op) {
        if (!op)
                return;
        struct kube_op **p = &op->signer->ops;
        while (*p && *p != op)
                p = &(*p)->next;
        if (*p)
                *p = op->next;
        http_transfer_cancel(op->transfer);
        curl_slist_free_all(op->headers);
        sd_event_source_disable_unref(op->timer);
        free(op->name);
        free(op->body);
        free(op->cert_file);
        free(op->key_file);
        free(op);
}

static void op_finish(struct kube_op *op, int error, const char *reason, const char *chain) {
        signer_done_fn done = op->done;
        void *userdata = op->userdata;
        op->transfer = NULL;
        op_free(op);
        done(error, reason, chain, userdata);
}

static void on_response(struct http_client *c, const struct http_response *resp, void *userdata);

/* The endpoint authenticates: with the node's certificate when the op has it, else with the
 * bootstrap token (the endpoint's token file). */
static int op_request(struct kube_op *op, bool post) {
        struct kube_signer *s = op->signer;
        _cleanup_free_ char *path = NULL;
        CURL *easy = NULL;
        int r;

        if (post ? asprintf(&path, KUBE_CSR_PATH) < 0 : asprintf(&path, KUBE_CSR_PATH "/%s", op->name) < 0)
                return -ENOMEM;
        r = kube_endpoint_request_as(&s->endpoint, path, 10000L, op->cert_file, op->key_file, &easy);
        if (r < 0)
                return r;
        curl_slist_free_all(op->headers);
        op->headers = curl_slist_append(NULL, "Accept: application/json");
        struct curl_slist *h = op->headers ? curl_slist_append(op->headers, "Content-Type: application/json") : NULL;
        if (!h) {
                curl_easy_cleanup(easy);
                return -ENOMEM;
        }
        curl_easy_setopt(easy, CURLOPT_HTTPHEADER, op->headers);
        curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        if (post)
                curl_easy_setopt(easy, CURLOPT_COPYPOSTFIELDS, op->body);
        return http_client_submit(s->http, easy, KUBE_MAX_BODY, on_response, op, &op->transfer);
}

static int on_poll(sd_event_source *es, uint64_t usec, void *userdata) {
        struct kube_op *op = userdata;
        int r = op_request(op, false);
        if (r < 0)
                op_finish(op, r, "cannot poll the CSR", NULL);
        return 0;
}

static void poll_later(struct kube_op *op, const char *why) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        if (now >= op->deadline) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "CSR %s: no certificate before the deadline (%s)", op->name, why ? why : "pending") < 0)
                        msg = NULL;
                return op_finish(op, -ETIMEDOUT, msg, NULL);
        }
        op->poll_delay = op->poll_delay ? MIN(op->poll_delay * 2, POLL_MAX) : POLL_FIRST;
        usec_t at = MIN(now + op->poll_delay, op->deadline);
        int r = op->timer ? sd_event_source_set_time(op->timer, at) : sd_event_add_time(op->signer->event, &op->timer, CLOCK_MONOTONIC, at, USEC_PER_MSEC, on_poll, op);
        if (r >= 0)
                r = sd_event_source_set_enabled(op->timer, SD_EVENT_ONESHOT);
        if (r < 0)
                op_finish(op, r, "cannot arm the poll timer", NULL);
}

static void on_response(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct kube_op *op = userdata;
        struct kube_signer *s = op->signer;
        _cleanup_free_ char *reason = NULL, *cert = NULL, *msg = NULL;
        int r;

        op->transfer = NULL;
        if (resp->error < 0) {
                if (asprintf(&msg, "%s: %s", s->endpoint.url, resp->error_message ? resp->error_message : strerror(-resp->error)) < 0)
                        msg = NULL;
                return op_finish(op, resp->error, msg, NULL);
        }
        if (!op->created) {
                /* 201: made now; 409: made by an earlier attempt with this key. Either way: poll. */
                if (resp->status != 201 && resp->status != 409) {
                        if (asprintf(&msg, "creating CSR %s: HTTP %ld", op->name, resp->status) < 0)
                                msg = NULL;
                        return op_finish(op, resp->status == 401 || resp->status == 403 ? -EACCES : -EIO, msg, NULL);
                }
                op->created = true;
                return poll_later(op, "created");
        }
        if (resp->status != 200) {
                if (asprintf(&msg, "reading CSR %s: HTTP %ld", op->name, resp->status) < 0)
                        msg = NULL;
                return op_finish(op, resp->status == 404 ? -ENOENT : -EIO, msg, NULL);
        }
        r = kube_csr_parse(resp->body, resp->body_size, &cert, &reason);
        if (r < 0) {
                if (asprintf(&msg, "CSR %s: %s", op->name, reason ? reason : "unreadable") < 0)
                        msg = NULL;
                return op_finish(op, r, msg, NULL);
        }
        if (r == 0)
                return poll_later(op, reason);
        op_finish(op, 0, NULL, cert);
}

static int kube_sign(struct signer *base, const struct signer_request *req, signer_done_fn done, void *userdata) {
        struct kube_signer *s = (struct kube_signer *) base;
        _cleanup_free_ char *csr = NULL;
        int r;

        r = x509_csr_to_pem(req->csr, &csr);
        if (r < 0)
                return r;
        struct kube_op *op = calloc(1, sizeof(*op));
        if (!op)
                return -ENOMEM;
        op->signer = s;
        op->done = done;
        op->userdata = userdata;
        op->deadline = now_usec(CLOCK_MONOTONIC) + s->deadline;
        op->next = s->ops;
        s->ops = op;
        if (req->client_cert_file && req->client_key_file &&
            (!(op->cert_file = strdup(req->client_cert_file)) || !(op->key_file = strdup(req->client_key_file)))) {
                op_free(op);
                return -ENOMEM;
        }
        r = kube_csr_name(req->key, req->subject->common_name, req->subject->organization, &op->name);
        if (r >= 0)
                r = kube_csr_body(op->name, csr, KUBE_SIGNER_KUBELET_CLIENT, req->lifetime, &op->body);
        if (r >= 0)
                r = op_request(op, true);
        if (r < 0) {
                op_free(op);
                /* A bootstrap token that cannot be read is named, not left a bare errno. */
                if (s->endpoint.token_error[0])
                        done(r, s->endpoint.token_error, NULL, userdata);
        }
        return r;
}

static void kube_cancel(struct signer *base, void *userdata) {
        struct kube_signer *s = (struct kube_signer *) base;
        for (struct kube_op *op = s->ops, *next; op; op = next) {
                next = op->next;
                if (op->userdata == userdata)
                        op_free(op);
        }
}

static void kube_free(struct signer *base) {
        struct kube_signer *s = (struct kube_signer *) base;
        while (s->ops)
                op_free(s->ops);
        kube_endpoint_done(&s->endpoint);
        free(s);
}

static const struct signer_ops kube_ops = {
        .name = "kubernetes",
        .sign = kube_sign,
        .cancel = kube_cancel,
        .free = kube_free,
};

int signer_kubernetes_new(sd_event *e, struct http_client *http, const struct kube_settings *settings,
                          struct signer **ret, char **ret_error) {
        const struct kube_endpoint *ep = settings->endpoint;
        _cleanup_free_ char *ca = NULL;
        size_t n;
        int r;

        if (!ep->url) {
                *ret_error = strdup("signer=kubernetes needs the apiserver: [apiserver] url, or the in-cluster environment");
                return -EINVAL;
        }
        if (!signer_url_ok(ep->url)) {
                if (asprintf(ret_error, "signer=kubernetes: %s is plain http to a non-loopback address; use https", ep->url) < 0)
                        *ret_error = NULL;
                return -EINVAL;
        }
        if (!ep->ca_file) {
                *ret_error = strdup("signer=kubernetes needs the cluster CA to verify what it issues: [apiserver] ca-file");
                return -EINVAL;
        }
        struct kube_signer *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->base.ops = &kube_ops;
        s->event = e;
        s->http = http;
        s->deadline = settings->deadline;
        r = kube_endpoint_copy(ep, &s->endpoint);
        if (r < 0) {
                signer_free(&s->base);
                return r;
        }
        /* The cluster CA is the trust anchor the issued certificate is checked against. */
        r = fs_read_file_full(ep->ca_file, 1024 * 1024, &ca, &n);
        if (r >= 0)
                r = x509_chain_from_pem(ca, n, &s->base.roots);
        if (r < 0) {
                if (asprintf(ret_error, "%s: cannot read the cluster CA: %s", ep->ca_file, strerror(-r)) < 0)
                        *ret_error = NULL;
                signer_free(&s->base);
                return r;
        }
        *ret = &s->base;
        return 0;
}
