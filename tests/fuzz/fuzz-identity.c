/* SPDX-License-Identifier: MIT */
/* Fuzzes what the identity module parses from its CA: a CFSSL response document, the PEM
 * certificate chain a signer returns (and the fields read from it), a PEM key from disk, and a
 * Kubernetes CertificateSigningRequest object (its status).
 * The first byte picks the parser; the rest is the input. */

#include <stdlib.h>
#include <string.h>

#include "cfssl-wire.h"
#include "fuzz.h"
#include "kube-csr.h"
#include "x509.h"
#include "strv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 1)
                return 0;
        const char *text = (const char *) data + 1;
        size_t n = size - 1;
        char *copy = malloc(n + 1);
        if (!copy)
                return 0;
        memcpy(copy, text, n);
        copy[n] = 0;

        switch (data[0] % 4) {
        case 0: {
                char *cert = NULL, *reason = NULL;
                if (cfssl_wire_parse_response(copy, n, &cert, &reason) >= 0) {
                        STACK_OF(X509) *chain = NULL;
                        if (x509_chain_from_pem(cert, strlen(cert), &chain) >= 0)
                                sk_X509_pop_free(chain, X509_free);
                }
                free(cert);
                free(reason);
                break;
        }
        case 1: {
                STACK_OF(X509) *chain = NULL;
                if (x509_chain_from_pem(copy, n, &chain) >= 0) {
                        for (int i = 0; i < sk_X509_num(chain); i++) {
                                struct cert_info info = {};
                                if (x509_cert_info(sk_X509_value(chain, i), &info) >= 0)
                                        x509_cert_info_done(&info);
                        }
                        const char *reason = NULL;
                        (void) x509_verify_chain(chain, chain, 0, &reason);
                        char *pem = NULL;
                        if (x509_chain_to_pem(chain, &pem) >= 0)
                                free(pem);
                        sk_X509_pop_free(chain, X509_free);
                }
                break;
        }
        case 2: {
                EVP_PKEY *k = NULL;
                if (x509_key_from_pem(copy, n, &k) >= 0)
                        EVP_PKEY_free(k);
                unsigned char *key = NULL;
                size_t ks = 0;
                if (cfssl_wire_parse_hex_key(copy, &key, &ks) >= 0)
                        free(key);
                break;
        }
        case 3: {
                char *cert = NULL, *reason = NULL;
                if (kube_csr_parse(copy, n, &cert, &reason) > 0) {
                        STACK_OF(X509) *chain = NULL;
                        if (x509_chain_from_pem(cert, strlen(cert), &chain) >= 0)
                                sk_X509_pop_free(chain, X509_free);
                }
                free(cert);
                free(reason);
                break;
        }
        }
        free(copy);
        return 0;
}
