/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/pem.h>

#include "macro.h"
#include "signature.h"

int signature_decode(const char *text, size_t size, uint8_t ret[SIGNATURE_ED25519_SIZE]) {
        _cleanup_free_ char *clean = NULL;
        unsigned char out[SIGNATURE_MAX_TEXT];
        size_t n = 0, pad = 0;

        if (size > SIGNATURE_MAX_TEXT)
                return -EFBIG;
        clean = malloc(size + 1);
        if (!clean)
                return -ENOMEM;
        for (size_t i = 0; i < size; i++) {
                char c = text[i];
                if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
                        continue;
                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' ||
                      c == '/' || c == '='))
                        return -EINVAL;
                if (c == '=')
                        pad++;
                else if (pad > 0)
                        return -EINVAL; /* data after padding */
                clean[n++] = c;
        }
        if (n == 0 || n % 4 != 0 || pad > 2)
                return -EINVAL;
        int len = EVP_DecodeBlock(out, (const unsigned char *) clean, (int) n);
        if (len < 0)
                return -EINVAL;
        /* EVP_DecodeBlock counts the padding as zero bytes. */
        if ((size_t) len < pad || (size_t) len - pad != SIGNATURE_ED25519_SIZE)
                return -EINVAL;
        memcpy(ret, out, SIGNATURE_ED25519_SIZE);
        return 0;
}

int signature_key_from_pem(const char *pem, size_t size, EVP_PKEY **ret) {
        BIO *b;
        EVP_PKEY *k;

        if (size > INT32_MAX)
                return -EFBIG;
        b = BIO_new_mem_buf(pem, (int) size);
        if (!b)
                return -ENOMEM;
        k = PEM_read_bio_PUBKEY(b, NULL, NULL, NULL);
        BIO_free(b);
        if (!k)
                return -EINVAL;
        if (EVP_PKEY_get_base_id(k) != EVP_PKEY_ED25519) {
                EVP_PKEY_free(k);
                return -EINVAL;
        }
        *ret = k;
        return 0;
}

int signature_key_load(const char *path, EVP_PKEY **ret) {
        _cleanup_free_ char *pem = NULL;
        FILE *f = fopen(path, "re");
        size_t n;

        if (!f)
                return negative_errno();
        pem = malloc(65536);
        if (!pem) {
                fclose(f);
                return -ENOMEM;
        }
        n = fread(pem, 1, 65535, f);
        int err = ferror(f);
        fclose(f);
        if (err)
                return -EIO;
        return signature_key_from_pem(pem, n, ret);
}

int signature_verify(EVP_PKEY *key, const void *data, size_t size, const uint8_t sig[SIGNATURE_ED25519_SIZE]) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        int r;

        if (!ctx)
                return -ENOMEM;
        /* Ed25519 is one-shot: no digest, the whole message at once. */
        if (EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) != 1)
                r = -EINVAL;
        else
                r = EVP_DigestVerify(ctx, sig, SIGNATURE_ED25519_SIZE, data, size) == 1 ? 0 : -EBADMSG;
        EVP_MD_CTX_free(ctx);
        return r;
}
