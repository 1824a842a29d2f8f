/* SPDX-License-Identifier: MIT */
#pragma once

/* sha256 digests as text: the manifest's files[].sha256, the state file, the API. */

#include <stdint.h>

/* Lowercase hex of a sha256 (65 bytes with the NUL). */
void sha256_to_hex(const uint8_t sha[32], char ret[65]);
/* 64 hex digits, either case; -EINVAL otherwise. */
int sha256_from_hex(const char *hex, uint8_t ret[32]);
