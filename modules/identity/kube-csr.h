/* SPDX-License-Identifier: MIT */
#pragma once

/* The Kubernetes CSR API's wire format (certificates.k8s.io/v1), pure and fuzzed: the request
 * object, the stable name of a request, and what a CSR's status says. */

#include <stddef.h>

#include <openssl/evp.h>

#include "macro.h"

#define KUBE_CSR_PATH "/apis/certificates.k8s.io/v1/certificatesigningrequests"
#define KUBE_SIGNER_KUBELET_CLIENT "kubernetes.io/kube-apiserver-client-kubelet"

/* "node-csr-<hex>": a hash of the public key and the subject, so asking again with the same key
 * finds the request made before instead of creating a second one. */
int kube_csr_name(EVP_PKEY *key, const char *common_name, const char *organization, char **ret);
/* The CertificateSigningRequest object to POST. */
int kube_csr_body(const char *name, const char *csr_pem, const char *signer_name, usec_t lifetime, char **ret);
/* Reads a CSR object: 1 with *ret_certificate (PEM, decoded from status.certificate) once
 * issued; 0 while pending (*ret_reason may say "approved, waiting for the certificate");
 * -EPERM if Denied or Failed, -EBADMSG if malformed, with *ret_reason. */
int kube_csr_parse(const char *body, size_t size, char **ret_certificate, char **ret_reason);
