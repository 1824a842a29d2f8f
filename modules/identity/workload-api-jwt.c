/* SPDX-License-Identifier: MIT */
/* The Workload API's JWT RPCs, on jwt.h: the caller's own JWT-SVID for the audiences it names,
 * the trust domain's JWKS as a stream (a new response on every key change), and validation of
 * a token against those keys. Admission is workload-api.c's (the security header, then the
 * caller must be a workload with an identity).
 *
 *   FetchJWTSVID with no audience                 -> INVALID_ARGUMENT
 *   FetchJWTSVID for a SPIFFE ID not the caller's  -> PERMISSION_DENIED
 *   no JWT key on this node (jwt-key-file)         -> UNAVAILABLE
 *   ValidateJWTSVID without audience or token      -> INVALID_ARGUMENT
 *   a token that does not validate                 -> INVALID_ARGUMENT, with the reason */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "json.h"
#include "jwt.h"
#include "log.h"
#include "workload-api-internal.h"

/* ---- claims: cJSON -> google.protobuf.Struct ---- */

/* Everything below is malloc'ed, so protobuf_c_message_free_unpacked() frees the whole tree.
 * Claims come from tokens signed with the trust domain's key (ours: two levels deep at most);
 * the bound keeps the recursion finite whatever a key holder signed. */
#define CLAIMS_MAX_DEPTH 16U

static Google__Protobuf__Struct *struct_from_json(const cJSON *o, unsigned depth);

static Google__Protobuf__Value *value_from_json(const cJSON *j, unsigned depth) {
        Google__Protobuf__Value *v = malloc(sizeof(*v));

        if (!v)
                return NULL;
        google__protobuf__value__init(v);
        if (depth > CLAIMS_MAX_DEPTH)
                goto fail;
        if (cJSON_IsNull(j)) {
                v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_NULL_VALUE;
                v->null_value = GOOGLE__PROTOBUF__NULL_VALUE__NULL_VALUE;
        } else if (cJSON_IsBool(j)) {
                v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_BOOL_VALUE;
                v->bool_value = cJSON_IsTrue(j);
        } else if (cJSON_IsNumber(j)) {
                v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_NUMBER_VALUE;
                v->number_value = j->valuedouble;
        } else if (cJSON_IsString(j)) {
                v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRING_VALUE;
                if (!(v->string_value = strdup(j->valuestring)))
                        goto fail;
        } else if (cJSON_IsObject(j)) {
                v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_STRUCT_VALUE;
                if (!(v->struct_value = struct_from_json(j, depth + 1)))
                        goto fail;
        } else if (cJSON_IsArray(j)) {
                Google__Protobuf__ListValue *l = malloc(sizeof(*l));
                size_t n = (size_t) cJSON_GetArraySize(j), i = 0;
                const cJSON *e;

                if (!l)
                        goto fail;
                google__protobuf__list_value__init(l);
                v->kind_case = GOOGLE__PROTOBUF__VALUE__KIND_LIST_VALUE;
                v->list_value = l;
                if (n > 0 && !(l->values = calloc(n, sizeof(*l->values))))
                        goto fail;
                cJSON_ArrayForEach(e, j) {
                        if (!(l->values[i] = value_from_json(e, depth + 1)))
                                goto fail;
                        l->n_values = ++i;
                }
        } else
                goto fail;
        return v;
fail:
        protobuf_c_message_free_unpacked(&v->base, NULL);
        return NULL;
}

static Google__Protobuf__Struct *struct_from_json(const cJSON *o, unsigned depth) {
        Google__Protobuf__Struct *s = malloc(sizeof(*s));
        size_t n = (size_t) cJSON_GetArraySize(o), i = 0;
        const cJSON *e;

        if (!s)
                return NULL;
        google__protobuf__struct__init(s);
        if (n > 0 && !(s->fields = calloc(n, sizeof(*s->fields))))
                goto fail;
        cJSON_ArrayForEach(e, o) {
                Google__Protobuf__Struct__FieldsEntry *f = malloc(sizeof(*f));

                if (!f)
                        goto fail;
                google__protobuf__struct__fields_entry__init(f);
                s->fields[i] = f;
                s->n_fields = ++i;
                if (!(f->key = strdup(e->string ?: "")) || !(f->value = value_from_json(e, depth)))
                        goto fail;
        }
        return s;
fail:
        protobuf_c_message_free_unpacked(&s->base, NULL);
        return NULL;
}

/* ---- FetchJWTBundles ---- */

int workload_api_jwt_send_bundles(struct wstream *st) {
        struct identity *id = st->api->id;
        JWTBundlesResponse__BundlesEntry entry = JWTBUNDLES_RESPONSE__BUNDLES_ENTRY__INIT;
        JWTBundlesResponse__BundlesEntry *entries[] = { &entry };
        JWTBundlesResponse resp = JWTBUNDLES_RESPONSE__INIT;
        _cleanup_free_ char *td = workload_api_trust_domain_id(id), *jwks = NULL;
        int r;

        if (!td)
                return -ENOMEM;
        r = jwt_bundle_json(id->jwt, &jwks);
        if (r < 0)
                return r;
        entry.key = td;
        entry.value = (ProtobufCBinaryData) { .len = strlen(jwks), .data = (uint8_t *) jwks };
        resp.n_bundles = 1;
        resp.bundles = entries;
        r = workload_api_send_packed(st, &resp.base);
        if (r < 0)
                return r;
        st->jwt_generation = id->jwt_generation;
        st->sent = true;
        return 0;
}

void workload_api_jwt_fetch_bundles(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        char *uid = NULL;

        if (workload_api_admit(userdata, call, &uid) < 0)
                return;
        if (!workload_api_request_parses(call, &jwtbundles_request__descriptor, msg, size)) {
                free(uid);
                return;
        }
        /* With no JWT keys yet the stream waits for them, as an SVID stream waits for issuance. */
        workload_api_open_stream(userdata, call, STREAM_JWT_BUNDLES, uid);
}

/* ---- FetchJWTSVID ---- */

static void fetch_jwt_svid(struct workload_api *api, struct grpc_call *call, const struct workload *w,
                           const JWTSVIDRequest *req) {
        struct identity *id = api->id;
        JWTSVID svid = JWTSVID__INIT;
        JWTSVID *svids[] = { &svid };
        JWTSVIDResponse resp = JWTSVIDRESPONSE__INIT;
        _cleanup_free_ char **audiences = NULL, *token = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        const char *reason = NULL;
        usec_t expires_at;
        size_t n;
        int r;

        if (req->n_audience == 0 || req->n_audience > JWT_MAX_AUDIENCES) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "audience: 1 to %d required", JWT_MAX_AUDIENCES);
                return;
        }
        if (!isempty(req->spiffe_id) && !streq_ptr(req->spiffe_id, w->spiffe)) {
                grpc_call_finish(call, GRPC_STATUS_PERMISSION_DENIED, "no identity %s for the caller", req->spiffe_id);
                return;
        }
        r = jwt_keys_can_mint(id, w, &reason);
        if (r < 0) {
                grpc_call_finish(call, GRPC_STATUS_UNAVAILABLE, "%s", r == -ENOKEY ? reason : "the caller has no SPIFFE ID yet");
                return;
        }
        audiences = calloc(req->n_audience + 1, sizeof(char *));
        if (!audiences) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        for (size_t i = 0; i < req->n_audience; i++)
                audiences[i] = req->audience[i];
        r = jwt_keys_mint(id, w, audiences, &token, &expires_at);
        if (r == -EINVAL) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "audience: each a non-empty string of at most 256 bytes");
                return;
        }
        if (r < 0) {
                grpc_call_finish(call, GRPC_STATUS_INTERNAL, "cannot mint a JWT-SVID: %s", strerror(-r));
                return;
        }
        svid.spiffe_id = w->spiffe;
        svid.svid = token;
        resp.n_svids = 1;
        resp.svids = svids;
        n = jwtsvidresponse__get_packed_size(&resp);
        buf = malloc(MAX(n, (size_t) 1));
        if (!buf) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        (void) jwtsvidresponse__pack(&resp, buf);
        r = grpc_call_send(call, buf, n);
        if (r >= 0)
                grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

void workload_api_jwt_fetch_svid(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct workload_api *api = userdata;
        _cleanup_free_ char *uid = NULL;
        JWTSVIDRequest *req;
        struct workload *w;

        if (workload_api_admit(api, call, &uid) < 0)
                return;
        req = jwtsvidrequest__unpack(NULL, size, msg);
        if (!req) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed %s", jwtsvidrequest__descriptor.name);
                return;
        }
        w = workload_find(api->id, uid);
        if (w)
                fetch_jwt_svid(api, call, w, req);
        else
                grpc_call_finish(call, GRPC_STATUS_PERMISSION_DENIED, "the workload no longer has an identity");
        jwtsvidrequest__free_unpacked(req, NULL);
}

/* ---- ValidateJWTSVID ---- */

static void validate(struct workload_api *api, struct grpc_call *call, const ValidateJWTSVIDRequest *req) {
        struct identity *id = api->id;
        ValidateJWTSVIDResponse resp = VALIDATE_JWTSVIDRESPONSE__INIT;
        _cleanup_(cJSON_Deletep) cJSON *claims = NULL;
        _cleanup_free_ char *spiffe_id = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        const char *why = NULL;
        size_t n;
        int r;

        if (isempty(req->audience) || isempty(req->svid)) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "audience and svid are required");
                return;
        }
        r = jwt_keys_validate(id, req->svid, req->audience, &spiffe_id, &claims, &why);
        if (r == -ENOKEY) {
                grpc_call_finish(call, GRPC_STATUS_UNAVAILABLE, "%s", why);
                return;
        }
        if (r == -ENOMEM) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        if (r < 0) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "token refused: %s", why ?: strerror(-r));
                return;
        }
        resp.spiffe_id = spiffe_id;
        resp.claims = struct_from_json(claims, 0);
        if (!resp.claims) {
                grpc_call_finish(call, GRPC_STATUS_INTERNAL, "cannot encode the token's claims");
                return;
        }
        n = validate_jwtsvidresponse__get_packed_size(&resp);
        buf = malloc(MAX(n, (size_t) 1));
        if (buf) {
                (void) validate_jwtsvidresponse__pack(&resp, buf);
                r = grpc_call_send(call, buf, n);
        }
        protobuf_c_message_free_unpacked(&resp.claims->base, NULL);
        if (!buf)
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
        else if (r >= 0)
                grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

void workload_api_jwt_validate_svid(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        _cleanup_free_ char *uid = NULL;
        ValidateJWTSVIDRequest *req;

        if (workload_api_admit(userdata, call, &uid) < 0)
                return;
        req = validate_jwtsvidrequest__unpack(NULL, size, msg);
        if (!req) {
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed %s", validate_jwtsvidrequest__descriptor.name);
                return;
        }
        validate(userdata, call, req);
        validate_jwtsvidrequest__free_unpacked(req, NULL);
}
