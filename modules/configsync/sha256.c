/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>

#include "sha256.h"

void sha256_to_hex(const uint8_t sha[32], char ret[65]) {
        static const char hex[] = "0123456789abcdef";
        for (size_t i = 0; i < 32; i++) {
                ret[2 * i] = hex[sha[i] >> 4];
                ret[2 * i + 1] = hex[sha[i] & 15];
        }
        ret[64] = 0;
}

int sha256_from_hex(const char *hex, uint8_t ret[32]) {
        uint8_t out[32];

        if (strlen(hex) != 64)
                return -EINVAL;
        for (size_t i = 0; i < 32; i++) {
                int hi = OPENSSL_hexchar2int((unsigned char) hex[2 * i]);
                int lo = OPENSSL_hexchar2int((unsigned char) hex[2 * i + 1]);
                if (hi < 0 || lo < 0)
                        return -EINVAL;
                out[i] = (uint8_t) (hi << 4 | lo);
        }
        memcpy(ret, out, 32);
        return 0;
}
