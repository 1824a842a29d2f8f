/* SPDX-License-Identifier: MIT */
/* The JWT-SVID routes of the local API (docs/api.md):
 *
 *   POST /v1/identity/jwt           {"audience": ["a", ...]} → a token for the caller's own pod;
 *                                   privileged callers name the pod: {"pod": "NS/NAME", ...}
 *   GET  /v1/identity/jwt-bundle    the trust domain's JWKS (public, like /v1/identity/bundle)
 *   POST /v1/identity/jwt/validate  {"token": ..., "audience": ...} → the SPIFFE ID and claims,
 *                                   or 401 with the reason (public: it uses public keys only)
 *
 * Who may mint for which pod is the same rule as GET /v1/identity (caller.h). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "caller.h"
#include "identity-views.h"
#include "json.h"
#include "log.h"

/* The request body as a JSON object, or a 400 reply. */
static int body_object(struct api_request *req, cJSON **ret) {
        size_t size = 0;
        const char *body = api_request_body(req, &size);
        cJSON *o = size ? cJSON_ParseWithLength(body, size) : NULL;
        if (!cJSON_IsObject(o)) {
                cJSON_Delete(o);
                *ret = NULL;
                return api_reply_error(req, 400, "expected a JSON object body");
        }
        *ret = o;
        return 0;
}

/* "audience": a string or a non-empty array of strings, as a NULL-terminated array borrowing
 * the strings of o; NULL if it is neither. */
static char **audiences_of(const cJSON *o) {
        const cJSON *aud = cJSON_GetObjectItemCaseSensitive(o, "audience"), *a;
        int n = cJSON_IsString(aud) ? 1 : cJSON_IsArray(aud) ? cJSON_GetArraySize(aud) : 0;
        if (n < 1 || n > JWT_MAX_AUDIENCES)
                return NULL;
        char **v = calloc((size_t) n + 1, sizeof(char *));
        size_t i = 0;
        if (!v)
                return NULL;
        if (cJSON_IsString(aud))
                v[i++] = aud->valuestring;
        else
                cJSON_ArrayForEach(a, aud) {
                        if (!cJSON_IsString(a))
                                return mfree(v);
                        v[i++] = a->valuestring;
                }
        return v;
}

/* The workload the caller may have a token for: its own pod's or service's; a privileged
 * caller's "pod". */
static int caller_workload(struct identity *id, struct api_request *req, const cJSON *body, struct workload **ret) {
        const cJSON *pod = cJSON_GetObjectItemCaseSensitive(body, "pod");
        _cleanup_(caller_done) struct caller c = {};
        *ret = NULL;
        caller_resolve(id->manager, req, &c);
        if (c.kind == CALLER_OUTSIDER || caller_pod_unknown(&c))
                return caller_reply_forbidden(req, &c, "JWT-SVID");
        if (c.kind == CALLER_POD || c.kind == CALLER_SERVICE) {
                if (pod) /* a workload asks for another: none of its business */
                        return caller_reply_forbidden(req, &c, "JWT-SVID of another pod");
                if (identity_caller_workload(id, &c, ret) < 0)
                        return c.kind == CALLER_POD
                                       ? api_reply_error(req, 404, "this pod has no identity (annotate it %s: \"true\")",
                                                         IDENTITY_ANNOTATION)
                                       : api_reply_error(req, 404, "this service has no identity");
                return 0;
        }
        if (!cJSON_IsString(pod))
                return api_reply_error(req, 400, "pod: required for a caller in no pod (\"NAMESPACE/NAME\")");
        int r = identity_find_pod(id, pod->valuestring, ret);
        if (r == -EINVAL)
                return api_reply_error(req, 400, "pod: expected NAMESPACE/NAME");
        if (r < 0)
                return api_reply_error(req, 404, "no identity for pod %s", pod->valuestring);
        return 0;
}

static int handle_mint(struct api_request *req, void *userdata) {
        struct identity *id = userdata;
        _cleanup_(cJSON_Deletep) cJSON *body = NULL, *o = NULL;
        _cleanup_free_ char **audiences = NULL;
        _cleanup_free_ char *token = NULL;
        const char *reason = NULL;
        struct workload *w = NULL;
        usec_t expires_at = 0;

        /* Who asks first: a refused caller learns nothing about its body. */
        size_t size = 0;
        const char *text = api_request_body(req, &size);
        body = size ? cJSON_ParseWithLength(text, size) : NULL;
        int r = caller_workload(id, req, cJSON_IsObject(body) ? body : NULL, &w);
        if (!w)
                return r;
        if (!cJSON_IsObject(body))
                return api_reply_error(req, 400, "expected a JSON object body");
        r = jwt_keys_can_mint(id, w, &reason);
        if (r == -ENOKEY)
                return api_reply_error(req, 503, "%s", reason);
        if (r < 0)
                return api_reply_error(req, 503, "this pod has no SPIFFE ID%s%s", w->last_error ? ": " : "",
                                       w->last_error ? w->last_error : "");
        if (!(audiences = audiences_of(body)))
                return api_reply_error(req, 400, "audience: expected a string or an array of 1 to %d strings", JWT_MAX_AUDIENCES);
        r = jwt_keys_mint(id, w, audiences, &token, &expires_at);
        if (r == -EINVAL)
                return api_reply_error(req, 400, "audience: each a non-empty string of at most 256 bytes");
        if (r < 0)
                return api_reply_error(req, 500, "cannot mint a JWT-SVID: %s", strerror(-r));
        if (!(o = cJSON_CreateObject()) || !cJSON_AddStringToObject(o, "spiffe_id", w->spiffe) ||
            !cJSON_AddStringToObject(o, "token", token) || !json_add_time(o, "expires_at", expires_at))
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, TAKE_PTR(o));
}

static int handle_bundle(struct api_request *req, void *userdata) {
        struct identity *id = userdata;
        const char *unavailable = jwt_keys_unavailable(id);
        cJSON *jwks = NULL;
        if (unavailable)
                return api_reply_error(req, 503, "%s", unavailable);
        if (jwt_bundle(id->jwt, &jwks) < 0)
                return api_reply_error(req, 500, "out of memory");
        return api_reply_json(req, 200, jwks);
}

static unsigned refusal_status(int r) {
        return r == -ENOMEM ? 500 : 401;
}

static int handle_validate(struct api_request *req, void *userdata) {
        struct identity *id = userdata;
        _cleanup_(cJSON_Deletep) cJSON *body = NULL, *claims = NULL, *o = NULL;
        _cleanup_free_ char *spiffe_id = NULL;
        const char *why = NULL;

        int r = body_object(req, &body);
        if (!body)
                return r;
        const cJSON *token = cJSON_GetObjectItemCaseSensitive(body, "token"),
                    *audience = cJSON_GetObjectItemCaseSensitive(body, "audience");
        if (!cJSON_IsString(token) || !cJSON_IsString(audience) || isempty(audience->valuestring))
                return api_reply_error(req, 400, "expected {\"token\": \"...\", \"audience\": \"...\"}");
        r = jwt_keys_validate(id, token->valuestring, audience->valuestring, &spiffe_id, &claims, &why);
        if (r == -ENOKEY)
                return api_reply_error(req, 503, "%s", why);
        if (r < 0)
                return api_reply_error(req, refusal_status(r), "token refused: %s", why ? why : strerror(-r));
        if (!(o = cJSON_CreateObject()) || !cJSON_AddStringToObject(o, "spiffe_id", spiffe_id) ||
            !cJSON_AddItemToObject(o, "claims", claims))
                return api_reply_error(req, 500, "out of memory");
        claims = NULL;
        return api_reply_json(req, 200, TAKE_PTR(o));
}

int jwt_api_register(struct identity *id, struct api_routes **ret) {
        static const struct api_route routes[] = {
                { "POST", "/v1/identity/jwt", handle_mint, false },
                { "GET", "/v1/identity/jwt-bundle", handle_bundle, false },
                { "POST", "/v1/identity/jwt/validate", handle_validate, false },
        };
        return api_add_routes(id->manager->api, routes, ELEMENTSOF(routes), id, ret);
}
