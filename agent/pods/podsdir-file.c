/* SPDX-License-Identifier: MIT */
/* One pod file of pods-dir read into a pod: the checks on what the name points at, the JSON, and
 * what a static pod is given by the agent (node name, uid, Ready). Nothing here knows about other
 * files or the store; podsdir.c decides what a file's pod means for them. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "fs.h"
#include "podsdir-internal.h"
#include "podsdir.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

/* The plain SHA-256 of "namespace/name", its first 16 bytes printed as 8-4-4-4-12 hex: stable
 * across restarts and hosts, so a pod keeps its identity and registrations when the agent
 * restarts. (No version bits are forced: anyone can recompute it with sha256sum.) */
int podsdir_file_static_uid(const char *namespace, const char *name, char **ret) {
        _cleanup_free_ char *key = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        char *uid;

        if (isempty(namespace) || isempty(name) || !ret)
                return -EINVAL;
        if (asprintf(&key, "%s/%s", namespace, name) < 0)
                return -ENOMEM;
        if (EVP_Digest(key, strlen(key), md, &md_len, EVP_sha256(), NULL) != 1 || md_len < 16)
                return -EIO;

        if (asprintf(&uid,
                     "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     md[0], md[1], md[2], md[3], md[4], md[5], md[6], md[7], md[8], md[9], md[10],
                     md[11], md[12], md[13], md[14], md[15]) < 0)
                return -ENOMEM;
        *ret = uid;
        return 0;
}

/* metadata.namespace/name as far as they are well-typed; parsing proper reports the rest. */
static int static_uid_for(const cJSON *obj, char **ret) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(obj, "metadata");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
        const cJSON *ns = cJSON_GetObjectItemCaseSensitive(meta, "namespace");

        if (!cJSON_IsString(name) || isempty(name->valuestring)) {
                *ret = NULL;
                return 0;
        }
        return podsdir_file_static_uid(cJSON_IsString(ns) && !isempty(ns->valuestring) ? ns->valuestring : "default",
                                  name->valuestring, ret);
}

/* A file says what the operator wants on this node; fill in what only the agent knows. */
static int static_pod_defaults(const char *node_name, struct pod *p, const char *path) {
        if (!p->node_name && node_name) {
                p->node_name = strdup(node_name);
                if (!p->node_name)
                        return -ENOMEM;
        }

        if (p->n_conditions == 0) {
                free(p->conditions);
                p->conditions = calloc(1, sizeof(struct pod_condition));
                if (!p->conditions)
                        return -ENOMEM;
                p->conditions[0].type = strdup("Ready");
                if (!p->conditions[0].type)
                        return -ENOMEM;
                p->conditions[0].status = true;
                p->n_conditions = 1;
        }

        free(p->source);
        if (asprintf(&p->source, PODSDIR_SOURCE ":%s", path) < 0) {
                p->source = NULL;
                return -ENOMEM;
        }
        return 0;
}

static bool only_whitespace(const char *p, const char *end) {
        for (; p < end; p++)
                if (*p != ' ' && *p != '\t' && *p != '\r' && *p != '\n')
                        return false;
        return true;
}

/* cJSON ends a string at a NUL, escaped or raw: {"name": "a\u0000b"} would be read as "a", a
 * file that names one pod and is served as another. No field of a pod holds a NUL. */
static bool holds_nul(const char *data, size_t size) {
        if (memchr(data, 0, size))
                return true;
        for (size_t i = 0; i + 1 < size; i++)
                if (data[i] == '\\') {
                        if (data[i + 1] == 'u' && size - i >= 6 && memcmp(data + i + 2, "0000", 4) == 0)
                                return true;
                        i++; /* the escaped character: in "\\u0000" the pair is a backslash */
                }
        return false;
}

static int parse_pod_file(const char *node_name, const char *path, const char *data, size_t size,
                          struct pod **ret, char **ret_reason) {
        _cleanup_(cJSON_Deletep) cJSON *obj = NULL;
        _cleanup_(pod_unrefp) struct pod *p = NULL;
        _cleanup_free_ char *fallback = NULL;
        const char *end = NULL;
        int r;

        obj = cJSON_ParseWithLengthOpts(data, size, &end, false);
        if (!obj || !end || !only_whitespace(end, data + size)) {
                /* Let the pod parser phrase it, so both sources say the same thing. */
                r = pod_parse_json_text(data, size, NULL, &p, ret_reason);
                if (r >= 0) {
                        *ret_reason = strdup("invalid JSON");
                        return *ret_reason ? -EINVAL : -ENOMEM;
                }
                return r;
        }
        if (holds_nul(data, size)) {
                *ret_reason = strdup("a string holds a NUL character (\\u0000)");
                return *ret_reason ? -EINVAL : -ENOMEM;
        }

        r = static_uid_for(obj, &fallback);
        if (r < 0)
                return r;
        r = pod_parse_json(obj, fallback, &p, ret_reason);
        if (r < 0)
                return r;
        r = static_pod_defaults(node_name, p, path);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(p);
        return 0;
}

int podsdir_file_load(int dir_fd, const char *name, const char *path, const char *node_name, struct pod **ret,
                      char **ret_reason) {
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -EBADF;
        char proc[64];
        struct stat st;
        size_t size;
        int r;

        /* Follow symlinks: a directory laid out by an atomic writer (..data) holds links. Refuse
         * anything but regular files: reading a FIFO would block the loop. The check and the read
         * are of one inode (O_PATH, then reopened through /proc): a name checked, then opened,
         * may have become a FIFO in between. */
        fd = openat(dir_fd, name, O_PATH | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                r = negative_errno();
        else if (!S_ISREG(st.st_mode))
                r = -EBADFD;
        else {
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                r = fs_read_file_full(proc, PODSDIR_MAX_FILE_SIZE, &data, &size);
        }

        if (r == -ENOMEM)
                return r;
        /* Gone before it could be read (renamed away, deleted): not a problem of the file, and its
         * own event follows. A dangling link, though, is there and is reported. */
        if (r == -ENOENT && fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
                return -ENOENT;
        if (r == -EBADFD)
                *ret_reason = strdup("not a regular file");
        else if (r == -EFBIG)
                *ret_reason = strdup("larger than 1 MiB, refused");
        else if (r < 0)
                *ret_reason = strdup(strerror(-r));
        if (r < 0)
                return *ret_reason ? -EINVAL : -ENOMEM;

        return parse_pod_file(node_name, path, data, size, ret, ret_reason);
}

bool podsdir_file_is_pod_name(const char *name) {
        size_t n = strlen(name);
        /* Dotfiles are editors' temp files and atomic writers' internals. */
        return name[0] != '.' && n > 5 && streq(name + n - 5, ".json");
}

