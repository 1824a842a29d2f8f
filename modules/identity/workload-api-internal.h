/* SPDX-License-Identifier: MIT */
#pragma once

/* Shared by workload-api.c (the server, the X.509 RPCs, the streams) and workload-api-jwt.c
 * (the JWT RPCs). Nothing else includes this. */

#include <stdbool.h>
#include <stdint.h>

#include "grpc-server.h"
#include "identity.h"
#include "workload.pb-c.h"

enum stream_kind {
        STREAM_X509_SVID,
        STREAM_X509_BUNDLES,
        STREAM_JWT_BUNDLES,
};

/* An open FetchX509SVID, FetchX509Bundles or FetchJWTBundles stream: what it was sent last. */
struct wstream {
        struct workload_api *api;
        struct wstream *prev, *next;
        struct grpc_call *call;
        enum stream_kind kind;
        char *uid;           /* the caller's workload: a pod's UID or "service:NAME" */
        unsigned generation; /* of the certificate sent */
        uint64_t bundle_generation;
        unsigned jwt_generation; /* of the JWT keys whose JWKS was sent */
        bool sent;
};

/* The DER a workload's responses carry, made once per certificate rather than once per
 * response (the PEM -> DER conversion is most of what a first response costs). */
struct svid_der {
        char *uid;
        unsigned generation; /* of the certificate encoded */
        ProtobufCBinaryData chain, key; /* key: wiped when dropped */
};

struct workload_api {
        struct identity *id;
        struct grpc_server *server;
        struct wstream *streams;
        uint64_t bundle_generation; /* bumps with every bundle change */
        struct svid_der *ders;
        size_t n_ders;
        char *bundle_pem;              /* the bundle bundle_der was made from */
        ProtobufCBinaryData bundle_der;
};

/* The checks every RPC makes first, in the spec's order: the security header, then the caller.
 * 0: the caller is a pod or service of this node with an identity, *ret_uid its workload's uid
 * (owned); <0: the call was finished with the spec's error. */
int workload_api_admit(struct workload_api *api, struct grpc_call *call, char **ret_uid);
/* Whether the request is the RPC's message; if not, the call is finished (INVALID_ARGUMENT). */
bool workload_api_request_parses(struct grpc_call *call, const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t size);
/* Keeps the call open as a stream of kind for workload uid (taken), sending its first response
 * now if there is one and later ones as things change. */
void workload_api_open_stream(struct workload_api *api, struct grpc_call *call, enum stream_kind kind, char *uid);
/* Packs msg and sends it on the stream, wiping the packed copy (it may hold a key). */
int workload_api_send_packed(struct wstream *st, const ProtobufCMessage *msg);
/* "spiffe://<trust domain>" (owned), the key of the spec's bundle maps. */
char *workload_api_trust_domain_id(const struct identity *id);

/* workload-api-jwt.c */
int workload_api_jwt_send_bundles(struct wstream *st);
void workload_api_jwt_fetch_svid(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata);
void workload_api_jwt_fetch_bundles(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata);
void workload_api_jwt_validate_svid(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata);
