/* SPDX-License-Identifier: MIT */
#pragma once

/* The libFuzzer entry point every target defines; tests/fuzz/replay.c calls it on each corpus
 * file so the corpora also run as ordinary unit tests under gcc. */

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
