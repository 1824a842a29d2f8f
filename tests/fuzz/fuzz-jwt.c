/* SPDX-License-Identifier: MIT */
/* Fuzzes what JWT-SVID validation takes from strangers: a token (checked against a set whose
 * signing key is the fixed test key below, so corpus tokens signed with it reach the claims),
 * and a JWT bundle (a JWKS or PEM public keys). The first byte picks the parser, the second
 * (tokens) the audience; the rest is the input. */

#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "jwt.h"

/* A throwaway P-256 key for fuzzing only: it signs nothing anywhere else. */
static const char test_key[] = "-----BEGIN PRIVATE KEY-----\n"
                               "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgv+ZP67+ACJ3LNCIX\n"
                               "rQ+Y/dmCdBA2RCPqp8Uxo9AxlYWhRANCAATj4vrVaYeM7D6Q7gHdA42ggEbOBDEq\n"
                               "6CzVo4JHKREmpfs15OlDZjmHG15tq7sEjXAnuX6F8vT/T3KwoMr4TqZK\n"
                               "-----END PRIVATE KEY-----\n";
#define NOW ((usec_t) 1800000000 * USEC_PER_SEC)

static struct jwt_keyset *keyset(void) {
        static struct jwt_keyset *ks;
        if (!ks && (jwt_keyset_new("example.org", &ks) < 0 || jwt_keyset_set_signer_pem(ks, test_key, strlen(test_key)) < 0))
                abort();
        return ks;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        char *copy = malloc(size - 1);
        if (!copy)
                return 0;
        memcpy(copy, data + 2, size - 2);
        copy[size - 2] = 0;

        if (data[0] % 2 == 0) {
                char *id = NULL;
                cJSON *claims = NULL;
                const char *why = NULL;
                if (jwt_validate(keyset(), copy, data[1] % 2 ? "svc" : "other", NOW, &id, &claims, &why) == 0 &&
                    (!id || !claims))
                        abort();
                free(id);
                cJSON_Delete(claims);
        } else {
                struct jwt_keyset *ks = NULL;
                char *json = NULL;
                if (jwt_keyset_new("example.org", &ks) < 0)
                        abort();
                if (jwt_keyset_add_jwks(ks, copy, size - 2) >= 0 && jwt_bundle_json(ks, &json) >= 0)
                        free(json);
                jwt_keyset_free(ks);
        }
        free(copy);
        return 0;
}
