/* SPDX-License-Identifier: MIT */
#pragma once

/* A bundle's detached Ed25519 signature: base64 in <manifest url>.sig over the manifest's exact
 * bytes, checked with the [config.NAME] public-key. Outside input, like the manifest: no
 * logging here, and the decoder is fuzzed with it (tests/fuzz/fuzz-configsync-manifest.c). */

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#define SIGNATURE_ED25519_SIZE 64U
#define SIGNATURE_MAX_TEXT 4096U /* bytes of a .sig file */

/* The .sig file: base64 (surrounding whitespace and line breaks allowed) of exactly 64 bytes. */
int signature_decode(const char *text, size_t size, uint8_t ret[SIGNATURE_ED25519_SIZE]);
/* Loads an Ed25519 public key (PEM SubjectPublicKeyInfo). -EINVAL if it is another kind. */
int signature_key_load(const char *path, EVP_PKEY **ret);
int signature_key_from_pem(const char *pem, size_t size, EVP_PKEY **ret);
/* 0 if sig is key's Ed25519 signature over data, -EBADMSG if not, other negative errno. */
int signature_verify(EVP_PKEY *key, const void *data, size_t size, const uint8_t sig[SIGNATURE_ED25519_SIZE]);
