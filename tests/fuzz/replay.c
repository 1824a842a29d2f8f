/* SPDX-License-Identifier: MIT */
/* Replays fuzz corpora as ordinary tests (built with gcc, with or without sanitizers): calls
 * LLVMFuzzerTestOneInput on every file named on the command line or found (sorted) in a named
 * directory, and prints TAP, one "ok N - file" per input. Without arguments it replays
 * CORPUS_DIR, the target's committed corpus. A crash, a sanitizer report or a leak fails the
 * test; an unreadable input is "not ok". */

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static unsigned n_tests, n_failed;

static int read_file(const char *path, uint8_t **ret, size_t *ret_size) {
        FILE *f = fopen(path, "re");
        uint8_t *buf = NULL;
        size_t size = 0, cap = 0;

        if (!f)
                return -errno;
        for (;;) {
                if (size == cap) {
                        cap = cap ? cap * 2 : 4096;
                        uint8_t *grown = realloc(buf, cap);
                        if (!grown) {
                                free(buf);
                                fclose(f);
                                return -ENOMEM;
                        }
                        buf = grown;
                }
                size_t got = fread(buf + size, 1, cap - size, f);
                size += got;
                if (got == 0)
                        break;
        }
        int r = ferror(f) ? -EIO : 0;
        fclose(f);
        if (r < 0) {
                free(buf);
                return r;
        }
        *ret = buf;
        *ret_size = size;
        return 0;
}

static void replay_file(const char *path) {
        uint8_t *data = NULL;
        size_t size = 0;
        int r;

        r = read_file(path, &data, &size);
        n_tests++;
        if (r < 0) {
                n_failed++;
                printf("not ok %u - %s: %s\n", n_tests, path, strerror(-r));
                return;
        }
        /* Exactly the input's bytes: ASan catches a read past the end. */
        uint8_t *exact = malloc(size ? size : 1);
        if (!exact) {
                free(data);
                n_failed++;
                printf("not ok %u - %s: out of memory\n", n_tests, path);
                return;
        }
        memcpy(exact, data, size);
        free(data);
        fflush(stdout);
        (void) LLVMFuzzerTestOneInput(exact, size);
        free(exact);
        printf("ok %u - %s\n", n_tests, path);
        fflush(stdout);
}

static void replay_path(const char *path) {
        struct stat st;

        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode)) {
                replay_file(path);
                return;
        }

        struct dirent **entries = NULL;
        int n = scandir(path, &entries, NULL, alphasort);
        if (n < 0) {
                n_tests++;
                n_failed++;
                printf("not ok %u - %s: %s\n", n_tests, path, strerror(errno));
                return;
        }
        for (int i = 0; i < n; i++) {
                const char *name = entries[i]->d_name;
                if (name[0] != '.') {
                        size_t len = strlen(path) + 1 + strlen(name) + 1;
                        char *full = malloc(len);
                        if (full) {
                                snprintf(full, len, "%s/%s", path, name);
                                if (stat(full, &st) == 0 && S_ISREG(st.st_mode))
                                        replay_file(full);
                                free(full);
                        }
                }
                free(entries[i]);
        }
        free(entries);
}

int main(int argc, char *argv[]) {
        if (argc > 1)
                for (int i = 1; i < argc; i++)
                        replay_path(argv[i]);
        else
                replay_path(CORPUS_DIR);

        if (n_tests == 0) {
                printf("1..0 # SKIP no inputs\n");
                return 0;
        }
        printf("1..%u\n", n_tests);
        return n_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
