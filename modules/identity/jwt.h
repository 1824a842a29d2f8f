/* SPDX-License-Identifier: MIT */
#pragma once

/* JWT-SVIDs (SPIFFE JWT-SVID spec): minted with the trust domain's ES256 key (EC P-256), their
 * public keys published as the trust domain's JWKS (SPIFFE bundle format, "use": "jwt-svid"),
 * validated against those keys. A token is the JWS compact serialisation, base64url without
 * padding: header {"alg":"ES256","kid":..,"typ":"JWT"}, claims {"sub","aud","exp","iat"}, and the
 * signature as the raw r||s (64 bytes) JWS wants, not OpenSSL's DER.
 *
 * A key set is what one agent knows of its trust domain: the signing key (optional: without one
 * nothing is minted, -ENOKEY) and the public keys tokens are accepted from (the signing key's,
 * plus any published ahead of a rotation). kid = the RFC 7638 thumbprint of the public key.
 *
 * Library-like: no logging, no clock of its own (callers pass now, CLOCK_REALTIME), negative
 * errno. The gRPC Workload API service and the HTTP routes reach the same three functions,
 * jwt_mint(), jwt_bundle_json() and jwt_validate(), through the node's key set (jwt-keys.c). */

#include <stddef.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "macro.h"

#define JWT_MAX_TOKEN 8192            /* longer tokens are refused before any parsing */
#define JWT_MAX_AUDIENCES 16          /* per token, minted or accepted */
#define JWT_MAX_KEYS 32               /* public keys in a set */
#define JWT_CLOCK_SKEW (30 * USEC_PER_SEC)

struct jwt_keyset;

/* An empty set for trust_domain (a lowercase DNS name). */
int jwt_keyset_new(const char *trust_domain, struct jwt_keyset **ret);
struct jwt_keyset *jwt_keyset_free(struct jwt_keyset *ks);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct jwt_keyset *, jwt_keyset_free);

/* The signing key, from PEM (PKCS#8 or SEC1 "EC PRIVATE KEY"); it must be P-256 (-EINVAL if it
 * is another curve or kind). Its public key joins the accepted keys. Replaces an earlier one
 * (whose public key is no longer accepted unless added otherwise). -EBADMSG: not a key. */
int jwt_keyset_set_signer_pem(struct jwt_keyset *ks, const char *pem, size_t size);
/* Accepted public keys from a JWKS ({"keys":[...]}): EC P-256 keys with x and y; keys of another
 * kind or "use" are skipped, a malformed P-256 key (bad base64, not on the curve) is -EBADMSG.
 * Returns the number of keys added (one already in the set is not added twice). */
int jwt_keyset_add_jwks(struct jwt_keyset *ks, const char *json, size_t size);
/* Whether the set can mint; the signing key's kid (NULL: none). */
const char *jwt_keyset_signer_kid(const struct jwt_keyset *ks);
size_t jwt_keyset_n_keys(const struct jwt_keyset *ks);

/* A token for spiffe_id (of ks's trust domain) for the NULL-terminated audiences (1 to
 * JWT_MAX_AUDIENCES non-empty strings), issued at now, expiring at now + lifetime (whole
 * seconds). -ENOKEY: no signing key; -EINVAL: bad ID or audiences. */
int jwt_mint(const struct jwt_keyset *ks, const char *spiffe_id, char *const *audiences, usec_t now, usec_t lifetime,
             char **ret_token, usec_t *ret_expires_at);

/* The JWKS of the set's public keys, as JSON text (the signer's first). */
int jwt_bundle_json(const struct jwt_keyset *ks, char **ret);
/* The same as an object, for callers that embed it. */
int jwt_bundle(const struct jwt_keyset *ks, cJSON **ret);

/* Checks token for audience at now: the JWS shape and base64url, alg ES256 (nothing else; "none"
 * never), a kid of the set, the signature, exp (with JWT_CLOCK_SKEW; required), nbf if present,
 * aud (a string or array) containing audience, sub a SPIFFE ID of the trust domain.
 * 0 with the SPIFFE ID and the claims (both owned; either pointer may be NULL); else
 * -EBADMSG (malformed), -EKEYREJECTED (alg, kid or signature), -EKEYEXPIRED (expired or not yet
 * valid), -EACCES (audience), -EINVAL (sub), with a static *ret_reason if given. */
int jwt_validate(const struct jwt_keyset *ks, const char *token, const char *audience, usec_t now,
                 char **ret_spiffe_id, cJSON **ret_claims, const char **ret_reason);

/* Whether id is spiffe://<trust_domain>/<path> with a non-empty path of segments of
 * [A-Za-z0-9._-], none empty, "." or "..". */
bool jwt_spiffe_id_valid(const char *id, const char *trust_domain);
