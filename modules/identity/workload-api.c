/* SPDX-License-Identifier: MIT */
/* The SPIFFE Workload API (proto/workload.proto) on the agent's gRPC server: a pod asks over
 * [identity] workload-socket and gets its own X.509-SVID, key and bundle, pushed again on every
 * rotation and every bundle change. Attestation is the authorization: the caller is placed by
 * the one rule of caller.h, and only a pod of this node with an identity gets anything; the
 * socket itself is open to every local user, as the spec's clients expect.
 *
 *   no "workload.spiffe.io: true" metadata   -> INVALID_ARGUMENT
 *   a request that is not the RPC's message   -> INVALID_ARGUMENT
 *   a caller without an identity              -> PERMISSION_DENIED
 *
 * A configured systemd service ([service.NAME]) is answered for itself like a pod. The JWT RPCs
 * are in workload-api-jwt.c. */

#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "caller.h"
#include "grpc-server.h"
#include "identity-views.h"
#include "log.h"
#include "workload-api-internal.h"
#include "workload.pb-c.h"
#include "x509.h"

#define MODULE "identity"
#define SECURITY_HEADER "workload.spiffe.io"
#define WORKLOAD_SOCKET_NAME "workload.sock"

/* ---- DER from what the module keeps as PEM ---- */

static int der_append(uint8_t **buf, size_t *len, const uint8_t *der, size_t n) {
        uint8_t *grown = realloc(*buf, *len + n);

        if (!grown)
                return -ENOMEM;
        memcpy(grown + *len, der, n);
        *buf = grown;
        *len += n;
        return 0;
}

/* The certificates of pem, DER-encoded one after the other (the spec's bytes fields). */
static int certs_der(const char *pem, ProtobufCBinaryData *ret) {
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL;
        uint8_t *buf = NULL;
        size_t len = 0;
        int r;

        r = x509_chain_from_pem(pem, strlen(pem), &chain);
        if (r < 0)
                return r;
        for (int i = 0; i < sk_X509_num(chain); i++) {
                unsigned char *der = NULL;
                int n = i2d_X509(sk_X509_value(chain, i), &der);

                r = n <= 0 ? -ENOMEM : der_append(&buf, &len, der, (size_t) n);
                OPENSSL_free(der);
                if (r < 0) {
                        free(buf);
                        return r;
                }
        }
        *ret = (ProtobufCBinaryData) { .len = len, .data = buf };
        return 0;
}

/* PKCS#8 DER of the key, in memory OPENSSL_secure-free: wiped by the caller (key_der_free). */
static int key_der(const char *pem, ProtobufCBinaryData *ret) {
        EVP_PKEY *key = NULL;
        PKCS8_PRIV_KEY_INFO *p8;
        unsigned char *der = NULL;
        int n, r;

        r = x509_key_from_pem(pem, strlen(pem), &key);
        if (r < 0)
                return r;
        p8 = EVP_PKEY2PKCS8(key);
        EVP_PKEY_free(key);
        if (!p8)
                return -ENOMEM;
        n = i2d_PKCS8_PRIV_KEY_INFO(p8, &der);
        PKCS8_PRIV_KEY_INFO_free(p8);
        if (n <= 0)
                return -ENOMEM;
        *ret = (ProtobufCBinaryData) { .len = (size_t) n, .data = der };
        return 0;
}

static void key_der_free(ProtobufCBinaryData *d) {
        if (d->data)
                OPENSSL_clear_free(d->data, d->len);
        *d = (ProtobufCBinaryData) {};
}

/* Packs msg and sends it on the stream, wiping the packed copy (it may hold a key). */
int workload_api_send_packed(struct wstream *st, const ProtobufCMessage *msg) {
        size_t n = protobuf_c_message_get_packed_size(msg);
        uint8_t *buf = malloc(MAX(n, (size_t) 1));
        int r;

        if (!buf)
                return -ENOMEM;
        (void) protobuf_c_message_pack(msg, buf);
        r = grpc_call_send(st->call, buf, n);
        OPENSSL_cleanse(buf, n);
        free(buf);
        return r;
}

char *workload_api_trust_domain_id(const struct identity *id) {
        char *s = NULL;

        return asprintf(&s, "spiffe://%s", id->settings->trust_domain ?: "") < 0 ? NULL : s;
}

/* ---- streams ---- */

static void stream_free(struct wstream *st) {
        struct workload_api *api = st->api;

        if (st->prev)
                st->prev->next = st->next;
        else
                api->streams = st->next;
        if (st->next)
                st->next->prev = st->prev;
        free(st->uid);
        free(st);
}

/* The call failed or was ended: the stream is forgotten. */
static void stream_end(struct wstream *st, enum grpc_status status, const char *message) {
        if (status != GRPC_STATUS_OK || message)
                grpc_call_finish(st->call, status, "%s", message ?: "");
        stream_free(st);
}

static void on_stream_cancel(struct grpc_call *call, enum grpc_status status, void *userdata) {
        stream_free(userdata);
}

/* ---- DER made once per change ---- */

/* The bundle's DER, encoded again only when the bundle's PEM changed. */
static int bundle_der(struct workload_api *api, const ProtobufCBinaryData **ret) {
        const char *pem = api->id->bundle_pem ?: "";
        ProtobufCBinaryData d;
        char *copy;
        int r;

        if (!api->bundle_pem || !streq(api->bundle_pem, pem)) {
                r = certs_der(pem, &d);
                if (r < 0)
                        return r;
                copy = strdup(pem);
                if (!copy) {
                        free(d.data);
                        return -ENOMEM;
                }
                free(api->bundle_der.data);
                free(api->bundle_pem);
                api->bundle_der = d;
                api->bundle_pem = copy;
        }
        *ret = &api->bundle_der;
        return 0;
}

static struct svid_der *svid_der_find(struct workload_api *api, const char *uid) {
        for (size_t i = 0; i < api->n_ders; i++)
                if (streq(api->ders[i].uid, uid))
                        return &api->ders[i];
        return NULL;
}

static void svid_der_clear(struct svid_der *d) {
        free(d->chain.data);
        key_der_free(&d->key);
        d->chain = (ProtobufCBinaryData) {};
}

/* The workload is gone: its encodings (its key among them) go with it. */
static void svid_der_drop(struct workload_api *api, const char *uid) {
        struct svid_der *d = svid_der_find(api, uid);

        if (!d)
                return;
        svid_der_clear(d);
        free(d->uid);
        *d = api->ders[--api->n_ders];
}

/* The chain and key of w's current certificate as DER, encoded again only after a rotation. */
static int svid_der(struct workload_api *api, const struct workload *w, const struct svid_der **ret) {
        struct svid_der *d = svid_der_find(api, w->uid);
        ProtobufCBinaryData chain, key;
        int r;

        if (d && d->chain.data && d->generation == w->generation) {
                *ret = d;
                return 0;
        }
        r = certs_der(w->chain_pem, &chain);
        if (r < 0)
                return r;
        r = key_der(w->key_pem, &key);
        if (r < 0) {
                free(chain.data);
                return r;
        }
        if (!d) {
                struct svid_der *grown = realloc(api->ders, (api->n_ders + 1) * sizeof(*grown));
                char *uid = strdup(w->uid);

                if (grown)
                        api->ders = grown;
                if (!grown || !uid) {
                        free(uid);
                        free(chain.data);
                        key_der_free(&key);
                        return -ENOMEM;
                }
                d = &api->ders[api->n_ders++];
                *d = (struct svid_der) { .uid = uid };
        }
        svid_der_clear(d);
        d->chain = chain;
        d->key = key;
        d->generation = w->generation;
        *ret = d;
        return 0;
}

static void ders_free(struct workload_api *api) {
        while (api->n_ders > 0)
                svid_der_drop(api, api->ders[0].uid);
        free(api->ders);
        api->ders = NULL;
        free(api->bundle_der.data);
        free(api->bundle_pem);
        api->bundle_der = (ProtobufCBinaryData) {};
        api->bundle_pem = NULL;
}

static int send_svid(struct wstream *st, const struct workload *w) {
        X509SVID svid = X509_SVID__INIT;
        X509SVID *svids[] = { &svid };
        X509SVIDResponse resp = X509_SVIDRESPONSE__INIT;
        const ProtobufCBinaryData *bundle;
        const struct svid_der *d;
        int r;

        svid.spiffe_id = w->spiffe;
        r = svid_der(st->api, w, &d);
        if (r >= 0)
                r = bundle_der(st->api, &bundle);
        if (r >= 0) {
                /* Borrowed: the message is only packed, never freed. */
                svid.x509_svid = d->chain;
                svid.x509_svid_key = d->key;
                svid.bundle = *bundle;
                resp.n_svids = 1;
                resp.svids = svids;
                r = workload_api_send_packed(st, &resp.base);
        }
        if (r == -ENOBUFS || r == -ESHUTDOWN)
                return r; /* the call has ended */
        if (r < 0) {
                log_module_warning_errno(MODULE, r, "Workload API: cannot encode the SVID of %s: %m", w->spiffe);
                return r;
        }
        st->generation = w->generation;
        st->bundle_generation = st->api->bundle_generation;
        st->sent = true;
        return 0;
}

static int send_bundles(struct wstream *st) {
        struct identity *id = st->api->id;
        X509BundlesResponse__BundlesEntry entry = X509_BUNDLES_RESPONSE__BUNDLES_ENTRY__INIT;
        X509BundlesResponse__BundlesEntry *entries[] = { &entry };
        X509BundlesResponse resp = X509_BUNDLES_RESPONSE__INIT;
        _cleanup_free_ char *td = workload_api_trust_domain_id(id);
        const ProtobufCBinaryData *bundle;
        int r;

        if (!td)
                return -ENOMEM;
        r = bundle_der(st->api, &bundle);
        if (r < 0)
                return r;
        entry.key = td;
        entry.value = *bundle; /* borrowed */
        resp.n_bundles = 1;
        resp.bundles = entries;
        r = workload_api_send_packed(st, &resp.base);
        if (r < 0)
                return r;
        st->bundle_generation = st->api->bundle_generation;
        st->sent = true;
        return 0;
}

/* Sends what the stream has not seen yet. <0: the stream has ended and is gone. */
static int stream_update(struct wstream *st) {
        struct identity *id = st->api->id;
        struct workload *w;
        int r;

        if (st->kind == STREAM_X509_BUNDLES) {
                if (!id->bundle_pem || (st->sent && st->bundle_generation == st->api->bundle_generation))
                        return 0;
                r = send_bundles(st);
        } else if (st->kind == STREAM_JWT_BUNDLES) {
                if (jwt_keys_unavailable(id) || (st->sent && st->jwt_generation == id->jwt_generation))
                        return 0;
                r = workload_api_jwt_send_bundles(st);
        } else {
                w = workload_find(id, st->uid);
                if (!w) {
                        stream_end(st, GRPC_STATUS_PERMISSION_DENIED, "the workload no longer has an identity");
                        return -ENOENT;
                }
                if (!w->chain_pem || !id->bundle_pem ||
                    (st->sent && st->generation == w->generation && st->bundle_generation == st->api->bundle_generation))
                        return 0;
                r = send_svid(st, w);
        }
        if (r == -ENOBUFS || r == -ESHUTDOWN) {
                stream_free(st);
                return r;
        }
        if (r < 0) {
                stream_end(st, GRPC_STATUS_INTERNAL, "cannot encode the response");
                return r;
        }
        return 0;
}

static void update_streams(struct workload_api *api, const char *uid) {
        for (struct wstream *st = api->streams, *next; st; st = next) {
                next = st->next;
                if (!uid || (st->kind == STREAM_X509_SVID && streq(st->uid, uid)))
                        (void) stream_update(st);
        }
}

/* ---- the RPCs ---- */

/* Why a caller that is no workload gets nothing: caller_refusal()'s wording where it fits, else
 * what the Workload API's rule is (only pods and configured services have SVIDs, the host's root
 * included). */
static const char *refusal(const struct caller *c) {
        if (c->kind == CALLER_HOST || c->kind == CALLER_SOCKET_GROUP)
                return "the host has no SVID, only pods with " IDENTITY_ANNOTATION " and [service.NAME] units have";
        if (c->kind == CALLER_OUTSIDER && !c->pod_error)
                return "it runs in no pod of this node and no configured service";
        return caller_refusal(c);
}

int workload_api_admit(struct workload_api *api, struct grpc_call *call, char **ret_uid) {
        struct identity *id = api->id;
        const char *header = grpc_call_metadata(call, SECURITY_HEADER);
        _cleanup_(caller_done) struct caller c = {};
        struct workload *w;
        int r;

        if (!streq_ptr(header, "true")) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "security header missing from request (%s: true)",
                                 SECURITY_HEADER);
                return -EINVAL;
        }
        caller_resolve_manager_peer(id->manager, grpc_call_peer(call), &c);
        r = identity_caller_workload(id, &c, &w);
        if (r == -EPERM) {
                log_module_debug(MODULE, "Workload API: %s refused for pid %d: %s", grpc_call_method(call),
                                 (int) grpc_call_peer(call)->pid, caller_refusal(&c));
                grpc_call_finish(call, GRPC_STATUS_PERMISSION_DENIED, "no identity for the caller: %s", refusal(&c));
                return -EPERM;
        }
        if (r < 0) {
                if (c.kind == CALLER_POD)
                        grpc_call_finish(call, GRPC_STATUS_PERMISSION_DENIED,
                                         "this pod has no identity (annotate it %s: \"true\")", IDENTITY_ANNOTATION);
                else
                        grpc_call_finish(call, GRPC_STATUS_PERMISSION_DENIED, "this service has no identity");
                return -EPERM;
        }
        *ret_uid = strdup(w->uid);
        if (!*ret_uid) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return -ENOMEM;
        }
        return 0;
}

/* The request must be the RPC's message (all X.509 requests are empty, but must parse). */
bool workload_api_request_parses(struct grpc_call *call, const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t size) {
        ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, size, msg);

        if (!m) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed %s", d->name);
                return false;
        }
        protobuf_c_message_free_unpacked(m, NULL);
        return true;
}

void workload_api_open_stream(struct workload_api *api, struct grpc_call *call, enum stream_kind kind, char *uid) {
        struct wstream *st = calloc(1, sizeof(*st));

        if (!st) {
                free(uid);
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        *st = (struct wstream) { .api = api, .call = call, .kind = kind, .uid = uid, .next = api->streams };
        if (api->streams)
                api->streams->prev = st;
        api->streams = st;
        grpc_call_set_cancel(call, on_stream_cancel, st);
        /* The first response now if there is one; else when the model announces it. */
        (void) stream_update(st);
}

static void fetch_x509_svid(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        char *uid = NULL;

        if (workload_api_admit(userdata, call, &uid) < 0)
                return;
        if (!workload_api_request_parses(call, &x509_svidrequest__descriptor, msg, size)) {
                free(uid);
                return;
        }
        workload_api_open_stream(userdata, call, STREAM_X509_SVID, uid);
}

static void fetch_x509_bundles(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        char *uid = NULL;

        if (workload_api_admit(userdata, call, &uid) < 0)
                return;
        if (!workload_api_request_parses(call, &x509_bundles_request__descriptor, msg, size)) {
                free(uid);
                return;
        }
        workload_api_open_stream(userdata, call, STREAM_X509_BUNDLES, uid);
}

static const struct grpc_method methods[] = {
        { "/SpiffeWorkloadAPI/FetchX509SVID", fetch_x509_svid },
        { "/SpiffeWorkloadAPI/FetchX509Bundles", fetch_x509_bundles },
        { "/SpiffeWorkloadAPI/FetchJWTSVID", workload_api_jwt_fetch_svid },
        { "/SpiffeWorkloadAPI/FetchJWTBundles", workload_api_jwt_fetch_bundles },
        { "/SpiffeWorkloadAPI/ValidateJWTSVID", workload_api_jwt_validate_svid },
};

/* ---- what the model announces ---- */

static void on_identity_changed(struct identity *id, enum identity_change change, const char *uid, void *userdata) {
        struct workload_api *api = userdata;

        switch (change) {
        case IDENTITY_CHANGE_WORKLOAD:
                if (!workload_find(id, uid))
                        svid_der_drop(api, uid);
                update_streams(api, uid);
                break;
        case IDENTITY_CHANGE_BUNDLE:
                api->bundle_generation++;
                update_streams(api, NULL);
                break;
        case IDENTITY_CHANGE_JWT_KEYS:
                update_streams(api, NULL); /* FetchJWTBundles streams get the new JWKS */
                break;
        }
}

/* ---- start and stop ---- */

/* [identity] workload-socket: unset, beside the API socket; empty: none. */
static char *workload_socket_path(struct identity *id) {
        const char *set = id->settings->workload_socket, *api = api_socket_path(id->manager->api);
        _cleanup_free_ char *copy = NULL;
        char *s = NULL;

        if (set)
                return isempty(set) ? NULL : strdup(set);
        if (!api)
                return NULL;
        copy = strdup(api);
        if (!copy || asprintf(&s, "%s/%s", dirname(copy), WORKLOAD_SOCKET_NAME) < 0)
                return NULL;
        return s;
}

int workload_api_new(struct identity *id, struct workload_api **ret) {
        const struct grpc_server_options opts = {
                .name = "workload",
                .socket_gid = id->manager->socket_gid,
                .place = caller_peer_place, /* counted per pod as on the local API */
                .place_userdata = id->manager,
                .max_connections = id->manager->connection_caps.workload, /* sized to the fd limit */
                /* Its largest request, ValidateJWTSVID's, is a token of at most 8 KiB and an audience. */
                .max_recv_message = 64 * 1024,
        };
        _cleanup_free_ char *path = workload_socket_path(id);
        struct workload_api *api;
        int r;

        *ret = NULL;
        if (!path)
                return 0;
        api = calloc(1, sizeof(*api));
        if (!api)
                return -ENOMEM;
        api->id = id;
        r = grpc_server_new(id->manager->event, id->manager->metrics, &opts, &api->server);
        if (r >= 0)
                r = grpc_server_add_methods(api->server, methods, ELEMENTSOF(methods), api);
        if (r >= 0)
                r = identity_add_observer(id, on_identity_changed, api);
        if (r < 0) {
                workload_api_free(api);
                return r;
        }
        /* Every local user may connect: what they get is decided by attestation. */
        r = grpc_server_listen(api->server, path, 0666);
        if (r < 0) {
                log_module_error_errno(MODULE, r, "Workload API not served on %s: %m", path);
                workload_api_free(api);
                return 0; /* the HTTP API still serves identities */
        }
        *ret = api;
        return 0;
}

struct workload_api *workload_api_free(struct workload_api *api) {
        if (!api)
                return NULL;
        identity_remove_observer(api->id, on_identity_changed, api);
        /* Ends every call; their cancel callbacks free the streams. */
        api->server = grpc_server_free(api->server);
        while (api->streams)
                stream_free(api->streams);
        ders_free(api);
        free(api);
        return NULL;
}
