/* SPDX-License-Identifier: MIT */
#include <curl/curl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <openssl/crypto.h>

#include "manifest.h"
#include "sha256.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

_printf_(2, 3) static int fail(char **ret_error, const char *format, ...) {
        va_list ap;

        if (ret_error) {
                char *s = NULL;
                va_start(ap, format);
                if (vasprintf(&s, format, ap) < 0)
                        s = NULL;
                va_end(ap);
                free(*ret_error);
                *ret_error = s;
        }
        return -EINVAL;
}

struct manifest *manifest_free(struct manifest *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_files; i++) {
                free(m->files[i].path);
                free(m->files[i].url);
        }
        free(m->files);
        free(m->version);
        free(m);
        return NULL;
}

const char *manifest_check_path(const char *path) {
        size_t n = strlen(path);

        if (n == 0)
                return "is empty";
        if (n > MANIFEST_MAX_PATH)
                return "is too long";
        if (path[0] == '/')
                return "is absolute";
        for (const char *p = path;;) {
                size_t len = strcspn(p, "/");
                if (len == 0)
                        return "has an empty component";
                if (len > 255)
                        return "has a component longer than 255 bytes";
                if ((len == 1 && p[0] == '.'))
                        return "has a '.' component";
                if (len == 2 && p[0] == '.' && p[1] == '.')
                        return "escapes dest ('..')";
                /* "..data", "..2026_..." and friends belong to the atomic directory. */
                if (len >= 2 && p[0] == '.' && p[1] == '.')
                        return "has a component starting with '..' (reserved)";
                for (size_t i = 0; i < len; i++)
                        if ((unsigned char) p[i] < 0x20 || p[i] == 0x7f)
                                return "has a control character";
                if (p[len] == 0)
                        break;
                p += len + 1;
        }
        return NULL;
}

static int parse_mode(const char *s, mode_t *ret) {
        unsigned long v = 0;
        size_t n = strlen(s);

        if (n == 0 || n > 4)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '7')
                        return -EINVAL;
                v = v * 8 + (unsigned long) (s[i] - '0');
        }
        if (v & ~0777UL)
                return -EPERM;
        *ret = (mode_t) v;
        return 0;
}

static int cmp_paths(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static bool has_path(char **sorted, size_t n, const char *key) {
        return bsearch(&key, sorted, n, sizeof(char *), cmp_paths) != NULL;
}

/* m's paths sorted (free() the array, not the strings). */
static int sorted_paths(const struct manifest *m, char ***ret) {
        char **sorted = malloc(MAX(m->n_files, (size_t) 1) * sizeof(char *));

        if (!sorted)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_files; i++)
                sorted[i] = m->files[i].path;
        qsort(sorted, m->n_files, sizeof(char *), cmp_paths);
        *ret = sorted;
        return 0;
}

/* No two entries with one path, and no file where another entry needs a directory ("a" and
 * "a/b"): either would make the tree depend on the order of writes. */
static int check_collisions(const struct manifest *m, char **sorted, char **ret_error) {
        for (size_t i = 1; i < m->n_files; i++)
                if (streq(sorted[i - 1], sorted[i]))
                        return fail(ret_error, "files: path \"%s\" appears twice", sorted[i]);

        for (size_t i = 0; i < m->n_files; i++) {
                _cleanup_free_ char *prefix = strdup(m->files[i].path);
                if (!prefix)
                        return -ENOMEM;
                for (char *slash = strrchr(prefix, '/'); slash; slash = strrchr(prefix, '/')) {
                        *slash = 0;
                        if (has_path(sorted, m->n_files, prefix))
                                return fail(ret_error, "files: \"%s\" is a file and a directory of \"%s\"", prefix,
                                            m->files[i].path);
                }
        }
        return 0;
}

static unsigned count_slashes(const char *s, size_t n) {
        unsigned k = 0;
        for (size_t i = 0; i < n && s[i]; i++)
                k += s[i] == '/';
        return k;
}

/* Directories and top-level entries, from the sorted paths in one pass: the paths below a
 * directory are next to each other in sorted order, so a path's directories are new but for
 * those it shares with the path before it (the slashes in their common prefix). */
static void count_tree(struct manifest *m, char *const *sorted) {
        m->n_directories = m->n_links = 0;
        for (size_t i = 0; i < m->n_files; i++) {
                const char *p = sorted[i], *q = i > 0 ? sorted[i - 1] : "";
                size_t common = 0;
                while (p[common] && p[common] == q[common])
                        common++;
                unsigned shared = count_slashes(p, common);
                m->n_directories += count_slashes(p, SIZE_MAX) - shared;
                /* A new top-level entry unless it is a directory already counted. */
                if (i == 0 || shared == 0)
                        m->n_links++;
        }
}

size_t manifest_entries(const struct manifest *m) {
        return m->n_files + m->n_directories + m->n_links;
}

static int check_limits(const struct manifest *m, const struct manifest_limits *l, char **ret_error) {
        if (m->n_directories > l->max_directories) {
                (void) fail(ret_error, "files: %zu directories, more than max-directories (%u)", m->n_directories,
                            l->max_directories);
                return -E2BIG;
        }
        if (manifest_entries(m) > l->max_entries) {
                (void) fail(ret_error,
                            "files: %zu entries (%zu files, %zu directories, %zu links in dest), more than "
                            "max-entries (%u)",
                            manifest_entries(m), m->n_files, m->n_directories, m->n_links, l->max_entries);
                return -E2BIG;
        }
        return 0;
}

/* "serial", optional: a whole number from 0 to 2^53. */
static int parse_serial(const cJSON *root, struct manifest *m, char **ret_error) {
        const cJSON *serial = cJSON_GetObjectItemCaseSensitive(root, "serial");

        if (!serial)
                return 0;
        if (!cJSON_IsNumber(serial) || !(serial->valuedouble >= 0) || serial->valuedouble > MANIFEST_MAX_SERIAL ||
            floor(serial->valuedouble) != serial->valuedouble)
                return fail(ret_error, "serial: not a whole number from 0 to 2^53");
        m->has_serial = true;
        m->serial = (uint64_t) serial->valuedouble;
        return 0;
}

static int parse_file(const cJSON *o, size_t i, struct manifest_file *f, char **ret_error) {
        const cJSON *path = cJSON_GetObjectItemCaseSensitive(o, "path");
        const cJSON *url = cJSON_GetObjectItemCaseSensitive(o, "url");
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "size");
        const cJSON *sha = cJSON_GetObjectItemCaseSensitive(o, "sha256");
        const cJSON *mode = cJSON_GetObjectItemCaseSensitive(o, "mode");
        const char *why;

        if (!cJSON_IsObject(o))
                return fail(ret_error, "files[%zu]: not an object", i);
        if (!cJSON_IsString(path))
                return fail(ret_error, "files[%zu].path: missing or not a string", i);
        if ((why = manifest_check_path(path->valuestring)))
                return fail(ret_error, "files[%zu].path: \"%.200s\" %s", i, path->valuestring, why);
        if (!cJSON_IsString(url) || isempty(url->valuestring) || strlen(url->valuestring) > 8192)
                return fail(ret_error, "files[%zu].url: missing, empty or not a string", i);
        if (!cJSON_IsNumber(size) || !(size->valuedouble >= 0) || size->valuedouble > 9007199254740992.0 ||
            floor(size->valuedouble) != size->valuedouble)
                return fail(ret_error, "files[%zu].size: not a whole number of bytes", i);
        if (!cJSON_IsString(sha) || sha256_from_hex(sha->valuestring, f->sha256) < 0)
                return fail(ret_error, "files[%zu].sha256: not 64 hex digits", i);
        f->mode = MANIFEST_DEFAULT_MODE;
        if (mode && !cJSON_IsNull(mode)) {
                int r = cJSON_IsString(mode) ? parse_mode(mode->valuestring, &f->mode) : -EINVAL;
                if (r == -EPERM)
                        return fail(ret_error, "files[%zu].mode: only permission bits (0..0777) are allowed", i);
                if (r < 0)
                        return fail(ret_error, "files[%zu].mode: not an octal string like \"0640\"", i);
        }
        f->size = (uint64_t) size->valuedouble;
        f->path = strdup(path->valuestring);
        f->url = strdup(url->valuestring);
        if (!f->path || !f->url)
                return -ENOMEM;
        return 0;
}

int manifest_parse(const char *text, size_t size, struct manifest **ret, char **ret_error) {
        return manifest_parse_limited(text, size, NULL, ret, ret_error);
}

int manifest_parse_limited(const char *text, size_t size, const struct manifest_limits *limits,
                           struct manifest **ret, char **ret_error) {
        _cleanup_(manifest_freep) struct manifest *m = NULL;
        _cleanup_free_ char **sorted = NULL;
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *version, *files, *f;
        int r;

        if (size > MANIFEST_MAX_SIZE) {
                (void) fail(ret_error, "manifest is larger than %u bytes", MANIFEST_MAX_SIZE);
                return -EFBIG;
        }
        if (memchr(text, 0, size))
                return fail(ret_error, "manifest contains a NUL byte");
        root = cJSON_ParseWithLength(text, size);
        if (!root)
                return fail(ret_error, "manifest is not valid JSON");
        if (!cJSON_IsObject(root))
                return fail(ret_error, "manifest is not a JSON object");

        version = cJSON_GetObjectItemCaseSensitive(root, "version");
        if (!cJSON_IsString(version) || isempty(version->valuestring))
                return fail(ret_error, "version: missing, empty or not a string");
        if (strlen(version->valuestring) > MANIFEST_MAX_VERSION)
                return fail(ret_error, "version: longer than %u bytes", MANIFEST_MAX_VERSION);
        for (const char *p = version->valuestring; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return fail(ret_error, "version: contains a control character");

        files = cJSON_GetObjectItemCaseSensitive(root, "files");
        if (!cJSON_IsArray(files))
                return fail(ret_error, "files: missing or not an array");
        int n = cJSON_GetArraySize(files);
        if ((unsigned) n > MANIFEST_MAX_FILES) {
                (void) fail(ret_error, "files: more than %u entries", MANIFEST_MAX_FILES);
                return -E2BIG;
        }

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->version = strdup(version->valuestring);
        if (!m->version)
                return -ENOMEM;
        r = parse_serial(root, m, ret_error);
        if (r < 0)
                return r;
        if (n > 0) {
                m->files = calloc((size_t) n, sizeof(struct manifest_file));
                if (!m->files)
                        return -ENOMEM;
        }
        size_t i = 0;
        cJSON_ArrayForEach(f, files) {
                r = parse_file(f, i, &m->files[i], ret_error);
                m->n_files = i + 1; /* so free() sees what was allocated */
                if (r < 0)
                        return r;
                if (m->total_size > UINT64_MAX - m->files[i].size)
                        return fail(ret_error, "files: sizes overflow");
                m->total_size += m->files[i].size;
                /* Before anything else looks at the paths: how deep they go bounds that work. */
                unsigned depth = count_slashes(m->files[i].path, SIZE_MAX);
                if (limits && depth > limits->max_depth) {
                        (void) fail(ret_error, "files[%zu].path: \"%.200s\" is %u directories deep, more than max-depth (%u)",
                                    i, m->files[i].path, depth, limits->max_depth);
                        return -E2BIG;
                }
                m->depth = MAX(m->depth, depth);
                i++;
        }
        r = sorted_paths(m, &sorted);
        if (r < 0)
                return r;
        count_tree(m, sorted);
        r = limits ? check_limits(m, limits, ret_error) : 0;
        if (r < 0)
                return r;
        r = check_collisions(m, sorted, ret_error);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(m);
        return 0;
}

const struct manifest_file *manifest_find(const struct manifest *m, const char *path) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_files; i++)
                if (streq(m->files[i].path, path))
                        return &m->files[i];
        return NULL;
}

static int cmp_entries(const void *a, const void *b) {
        return strcmp((*(const struct manifest_file *const *) a)->path, (*(const struct manifest_file *const *) b)->path);
}

int manifest_index(const struct manifest *m, const struct manifest_file ***ret) {
        const struct manifest_file **index;

        index = malloc(MAX(m ? m->n_files : 0, (size_t) 1) * sizeof(*index));
        if (!index)
                return -ENOMEM;
        for (size_t i = 0; m && i < m->n_files; i++)
                index[i] = &m->files[i];
        if (m && m->n_files > 1)
                qsort(index, m->n_files, sizeof(*index), cmp_entries);
        *ret = index;
        return 0;
}

const struct manifest_file *manifest_index_find(const struct manifest_file *const *index, size_t n, const char *path) {
        struct manifest_file key = { .path = (char *) path };
        const struct manifest_file *k = &key, *const *hit;

        if (!index || n == 0)
                return NULL;
        hit = bsearch(&k, index, n, sizeof(*index), cmp_entries);
        return hit ? *hit : NULL;
}

bool manifest_file_same(const struct manifest_file *a, const struct manifest_file *b) {
        return a && b && a->size == b->size && a->mode == b->mode && memcmp(a->sha256, b->sha256, 32) == 0 &&
               streq(a->path, b->path);
}

int manifest_resolve_url(const char *base, const char *ref, char **ret) {
        CURLU *u = curl_url();
        char *out = NULL, *scheme = NULL;
        int r = 0;

        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, base, 0) != CURLUE_OK ||
            curl_url_set(u, CURLUPART_URL, ref, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK)
                r = -EINVAL;
        else if (!streq(scheme, "https") && !streq(scheme, "http"))
                r = -EPROTONOSUPPORT;
        if (r == 0) {
                *ret = strdup(out);
                if (!*ret)
                        r = -ENOMEM;
        }
        curl_free(out);
        curl_free(scheme);
        curl_url_cleanup(u);
        return r;
}

int manifest_url_redacted(const char *url, char **ret) {
        CURLU *u = curl_url();
        char *out = NULL, *password = NULL;
        int r = 0;

        if (!u)
                return -ENOMEM;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
                r = -EINVAL;
        else if (curl_url_get(u, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK &&
                 (curl_url_set(u, CURLUPART_PASSWORD, "redacted", 0) != CURLUE_OK ||
                  curl_url_get(u, CURLUPART_URL, &out, 0) != CURLUE_OK))
                r = -EINVAL;
        if (r == 0) {
                /* Without a password there is nothing to hide; a URL curl cannot parse is shown
                 * only if it has no userinfo at all. */
                *ret = strdup(out ? out : url);
                if (!*ret)
                        r = -ENOMEM;
        } else if (r == -EINVAL && !strchr(url, '@')) {
                *ret = strdup(url);
                r = *ret ? 0 : -ENOMEM;
        }
        curl_free(out);
        if (password)
                OPENSSL_cleanse(password, strlen(password));
        curl_free(password);
        curl_url_cleanup(u);
        return r;
}
