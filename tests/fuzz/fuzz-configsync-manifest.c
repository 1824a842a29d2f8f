/* SPDX-License-Identifier: MIT */
/* configsync's outside input: the manifest a server sends (manifest_parse, and every accepted
 * path re-checked), and the detached signature file (signature_decode) over the same bytes. */
#include "fuzz.h"
#include "manifest.h"
#include "signature.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct manifest *m = NULL;
        char *error = NULL;
        uint8_t sig[SIGNATURE_ED25519_SIZE];

        if (size > (1U << 20))
                return 0;
        if (manifest_parse((const char *) data, size, &m, &error) >= 0) {
                /* Whatever parses must satisfy the rules the writer relies on. */
                for (size_t i = 0; i < m->n_files; i++) {
                        if (manifest_check_path(m->files[i].path) || (m->files[i].mode & ~0777U))
                                __builtin_trap();
                        if (manifest_find(m, m->files[i].path) != &m->files[i])
                                __builtin_trap();
                }
        } else if (!error)
                __builtin_trap(); /* every refusal says why */
        manifest_free(m);
        free(error);
        (void) signature_decode((const char *) data, size, sig);
        return 0;
}
