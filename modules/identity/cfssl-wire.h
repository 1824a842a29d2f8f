/* SPDX-License-Identifier: MIT */
#pragma once

/* The CFSSL API's wire format (cfssl-wire.c): pure functions, fuzzed. */

#include <stddef.h>

#include "macro.h"

/* Parses a CFSSL API response: {"success": bool, "result": {"certificate": PEM, ...},
 * "errors": [{"code": N, "message": "..."}]}. 0 with *ret_certificate (the result's
 * "certificate"), or -EBADMSG (malformed) / -EPERM (success false) with *ret_reason. */
int cfssl_wire_parse_response(const char *body, size_t size, char **ret_certificate, char **ret_reason);
/* The authsign envelope for request_json with the HMAC-SHA256 key:
 * {"token": base64(HMAC(key, request)), "request": base64(request)}. */
int cfssl_wire_authsign_body(const unsigned char *key, size_t key_size, const char *request_json, char **ret);
/* A hex key file's text (whitespace around it ignored) → bytes. -EINVAL if not hex. */
int cfssl_wire_parse_hex_key(const char *text, unsigned char **ret, size_t *ret_size);
