/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

#include "json.h"
#include "kube-csr.h"
#include "x509.h"

int kube_csr_name(EVP_PKEY *key, const char *common_name, const char *organization, char **ret) {
        unsigned char *der = NULL, md[SHA256_DIGEST_LENGTH];
        int n = i2d_PUBKEY(key, &der);
        if (n <= 0)
                return -ENOMEM;
        size_t cl = strlen(common_name), ol = organization ? strlen(organization) : 0;
        unsigned char *buf = malloc((size_t) n + cl + ol + 2);
        if (!buf) {
                OPENSSL_free(der);
                return -ENOMEM;
        }
        memcpy(buf, der, (size_t) n);
        buf[n] = 0;
        memcpy(buf + n + 1, common_name, cl);
        buf[n + 1 + cl] = 0;
        if (ol)
                memcpy(buf + n + 2 + cl, organization, ol);
        OPENSSL_free(der);
        int ok = EVP_Digest(buf, (size_t) n + cl + ol + 2, md, NULL, EVP_sha256(), NULL);
        free(buf);
        if (ok != 1)
                return -ENOMEM;
        _cleanup_free_ char *hex = x509_hex_encode(md, 16);
        if (!hex || asprintf(ret, "node-csr-%s", hex) < 0)
                return -ENOMEM;
        return 0;
}

static char *base64(const char *in) {
        size_t n = strlen(in);
        char *out = malloc(4 * ((n + 2) / 3) + 1);
        if (out)
                EVP_EncodeBlock((unsigned char *) out, (const unsigned char *) in, (int) n);
        return out;
}

int kube_csr_body(const char *name, const char *csr_pem, const char *signer_name, usec_t lifetime, char **ret) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *req = base64(csr_pem);
        cJSON *meta, *spec, *usages;
        if (!o || !req || !cJSON_AddStringToObject(o, "apiVersion", "certificates.k8s.io/v1") ||
            !cJSON_AddStringToObject(o, "kind", "CertificateSigningRequest") ||
            !(meta = cJSON_AddObjectToObject(o, "metadata")) || !cJSON_AddStringToObject(meta, "name", name) ||
            !(spec = cJSON_AddObjectToObject(o, "spec")) || !cJSON_AddStringToObject(spec, "request", req) ||
            !cJSON_AddStringToObject(spec, "signerName", signer_name) ||
            !(usages = cJSON_AddArrayToObject(spec, "usages")) ||
            !cJSON_AddItemToArray(usages, cJSON_CreateString("digital signature")) ||
            !cJSON_AddItemToArray(usages, cJSON_CreateString("client auth")))
                return -ENOMEM;
        /* The minimum the API accepts is 10 minutes; a signer may still cut it shorter. */
        if (lifetime > 0 && !cJSON_AddNumberToObject(spec, "expirationSeconds",
                                                     (double) MAX(lifetime / USEC_PER_SEC, (usec_t) 600)))
                return -ENOMEM;
        char *s = cJSON_PrintUnformatted(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

static int unbase64(const char *in, char **ret) {
        size_t n = strlen(in);
        if (n == 0 || n % 4 || n > 4 * 1024 * 1024)
                return -EBADMSG;
        unsigned char *out = malloc(n / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        int k = EVP_DecodeBlock(out, (const unsigned char *) in, (int) n);
        if (k < 0) {
                free(out);
                return -EBADMSG;
        }
        /* EVP_DecodeBlock counts the padding as zero bytes. */
        for (const char *p = in + n - 1; p >= in && *p == '='; p--)
                k--;
        if (k < 0 || memchr(out, 0, (size_t) k)) {
                free(out);
                return -EBADMSG;
        }
        out[k] = 0;
        *ret = (char *) out;
        return 0;
}

int kube_csr_parse(const char *body, size_t size, char **ret_certificate, char **ret_reason) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_ParseWithLength(body, size);
        *ret_reason = NULL;
        if (!cJSON_IsObject(o) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "kind")) ||
            !streq(cJSON_GetObjectItemCaseSensitive(o, "kind")->valuestring, "CertificateSigningRequest"))
                return (*ret_reason = strdup("not a CertificateSigningRequest object")), -EBADMSG;
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(o, "status"), *c;
        const cJSON *conds = cJSON_GetObjectItemCaseSensitive(status, "conditions");
        bool approved = false;
        if (conds && !cJSON_IsArray(conds))
                return (*ret_reason = strdup("status.conditions is not a list")), -EBADMSG;
        cJSON_ArrayForEach(c, conds) {
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(c, "type");
                const cJSON *st = cJSON_GetObjectItemCaseSensitive(c, "status");
                const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c, "message");
                if (!cJSON_IsString(type) || (cJSON_IsString(st) && !streq(st->valuestring, "True")))
                        continue;
                if (streq(type->valuestring, "Denied") || streq(type->valuestring, "Failed")) {
                        if (asprintf(ret_reason, "the CSR was %s: %.200s",
                                     streq(type->valuestring, "Denied") ? "denied" : "failed",
                                     cJSON_IsString(msg) ? msg->valuestring : "no message") < 0)
                                *ret_reason = NULL;
                        return -EPERM;
                }
                if (streq(type->valuestring, "Approved"))
                        approved = true;
        }
        const cJSON *cert = cJSON_GetObjectItemCaseSensitive(status, "certificate");
        if (cert && !cJSON_IsString(cert))
                return (*ret_reason = strdup("status.certificate is not a string")), -EBADMSG;
        if (!cert || !cert->valuestring[0]) {
                *ret_reason = strdup(approved ? "approved, waiting for the certificate" : "waiting for approval");
                return 0;
        }
        int r = unbase64(cert->valuestring, ret_certificate);
        if (r < 0)
                *ret_reason = strdup("status.certificate is not base64");
        return r < 0 ? r : 1;
}
