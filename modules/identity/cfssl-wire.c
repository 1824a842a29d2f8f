/* SPDX-License-Identifier: MIT */
/* The CFSSL API's wire format: the authsign envelope and the response document. Pure (no IO),
 * so the fuzz target and the unit tests link only this. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cfssl-wire.h"
#include "json.h"

int cfssl_wire_parse_hex_key(const char *text, unsigned char **ret, size_t *ret_size) {
        while (*text == ' ' || *text == '\n' || *text == '\t' || *text == '\r')
                text++;
        size_t n = strcspn(text, " \n\t\r");
        if (n == 0 || n % 2 || text[n + strspn(text + n, " \n\t\r")] != 0)
                return -EINVAL;
        long len;
        _cleanup_free_ char *copy = strndup(text, n);
        if (!copy)
                return -ENOMEM;
        unsigned char *buf = OPENSSL_hexstr2buf(copy, &len);
        OPENSSL_cleanse(copy, n); /* the key, in hex */
        if (!buf)
                return -EINVAL;
        unsigned char *out = malloc((size_t) len);
        if (!out) {
                OPENSSL_clear_free(buf, (size_t) len);
                return -ENOMEM;
        }
        memcpy(out, buf, (size_t) len);
        OPENSSL_clear_free(buf, (size_t) len);
        *ret = out;
        *ret_size = (size_t) len;
        return 0;
}

static char *base64(const unsigned char *in, size_t n) {
        char *out = malloc(4 * ((n + 2) / 3) + 1);
        if (!out)
                return NULL;
        EVP_EncodeBlock((unsigned char *) out, in, (int) n);
        return out;
}

int cfssl_wire_authsign_body(const unsigned char *key, size_t key_size, const char *request_json, char **ret) {
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned mac_len = 0;
        size_t n = strlen(request_json);

        if (!HMAC(EVP_sha256(), key, (int) key_size, (const unsigned char *) request_json, n, mac, &mac_len))
                return -ENOMEM;
        _cleanup_free_ char *token = base64(mac, mac_len), *req = base64((const unsigned char *) request_json, n);
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        if (!token || !req || !o || !cJSON_AddStringToObject(o, "token", token) ||
            !cJSON_AddStringToObject(o, "request", req))
                return -ENOMEM;
        char *s = cJSON_PrintUnformatted(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int cfssl_wire_parse_response(const char *body, size_t size, char **ret_certificate, char **ret_reason) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_ParseWithLength(body, size);
        *ret_reason = NULL;
        if (!cJSON_IsObject(o))
                return (*ret_reason = strdup("the CA's answer is not a JSON object")), -EBADMSG;
        const cJSON *success = cJSON_GetObjectItemCaseSensitive(o, "success");
        if (!cJSON_IsBool(success))
                return (*ret_reason = strdup("the CA's answer has no \"success\"")), -EBADMSG;
        if (cJSON_IsFalse(success)) {
                const cJSON *errors = cJSON_GetObjectItemCaseSensitive(o, "errors"), *e;
                const char *msg = "no reason given";
                if (!cJSON_IsArray(errors))
                        errors = NULL;
                cJSON_ArrayForEach(e, errors) {
                        const cJSON *m = cJSON_GetObjectItemCaseSensitive(e, "message");
                        if (cJSON_IsString(m)) {
                                msg = m->valuestring;
                                break;
                        }
                }
                if (asprintf(ret_reason, "the CA refused: %.200s", msg) < 0)
                        *ret_reason = NULL;
                return -EPERM;
        }
        const cJSON *result = cJSON_GetObjectItemCaseSensitive(o, "result");
        const cJSON *cert = cJSON_GetObjectItemCaseSensitive(result, "certificate");
        if (!cJSON_IsString(cert) || !cert->valuestring[0])
                return (*ret_reason = strdup("the CA's answer has no result.certificate")), -EBADMSG;
        char *c = strdup(cert->valuestring);
        if (!c)
                return -ENOMEM;
        *ret_certificate = c;
        return 0;
}

