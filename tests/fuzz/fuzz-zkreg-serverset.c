/* SPDX-License-Identifier: MIT */
/* Fuzzes the ServerSet member parser (modules/zkreg/serverset.c): zkreg reads back the data of
 * every member under a ServerSet path after a connection loss during a create (to recognise its
 * own), and anyone with write access to that path decides those bytes. */

#include <string.h>

#include "fuzz.h"
#include "serverset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        struct serverset_member m;

        if (serverset_parse((const char *) data, size, &m) == 0) {
                /* the result is bounded and terminated */
                if (strnlen(m.host, sizeof(m.host)) >= sizeof(m.host) || strnlen(m.status, sizeof(m.status)) >= sizeof(m.status) ||
                    m.port == 0)
                        __builtin_trap();
        }
        /* the path check sees annotation values of any shape too */
        if (size < 2048) {
                char path[2048];
                memcpy(path, data, size);
                path[size] = 0;
                (void) serverset_path_valid(path);
        }
        return 0;
}
