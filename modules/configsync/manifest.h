/* SPDX-License-Identifier: MIT */
#pragma once

/* A config bundle's manifest (DESIGN.md "Config bundles") and what checks it: the JSON parser
 * with every rule on paths and sizes, and the URL resolution of file entries (the detached
 * signature over it is signature.h's). Outside input, so no logging here and a fuzz target
 * (tests/fuzz/fuzz-configsync-manifest.c). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

#define MANIFEST_MAX_SIZE (16U << 20)      /* bytes of manifest JSON */
/* Files per bundle. Publishing fsyncs every file (in stage.c's thread), measured on the CI VM:
 * 0.44 s for 1,000 files, 5.5 s for 10,000, 22 s for 20,000. 10,000 keeps a publication within
 * seconds; split larger trees into several [config.NAME]. */
#define MANIFEST_MAX_FILES 10000U
#define MANIFEST_MAX_PATH 1024U             /* bytes of one path */
#define MANIFEST_MAX_VERSION 256U           /* bytes of the version string */
#define MANIFEST_DEFAULT_MODE 0644
#define MANIFEST_MAX_SERIAL 9007199254740992.0 /* 2^53: every whole number up to it is exact in JSON */

/* What one version of a bundle may make on disk, checked before anything is written: the
 * declared bytes are capped by max-size, but empty files cost inodes and directories too (60
 * empty files 507 directories deep are 30,425 directories). Per [config.NAME] (max-depth,
 * max-directories, max-entries); the defaults fit any config tree a person writes. */
#define MANIFEST_DEFAULT_MAX_DEPTH 32U          /* directories above a file */
#define MANIFEST_DEFAULT_MAX_DIRECTORIES 2000U  /* directories in a version */
#define MANIFEST_DEFAULT_MAX_ENTRIES 20000U     /* inodes: files + directories + links in dest */

struct manifest_limits {
        unsigned max_depth;
        unsigned max_directories;
        unsigned max_entries;
};

struct manifest_file {
        char *path;  /* relative to dest, normalised: no "", ".", ".." components, no leading '/' */
        char *url;   /* as written (relative to the manifest's URL or absolute) */
        uint64_t size;
        uint8_t sha256[32];
        mode_t mode; /* permission bits only (no setuid/setgid/sticky) */
};

struct manifest {
        char *version;
        bool has_serial;   /* "serial": a whole number that only ever grows (the rollback check) */
        uint64_t serial;
        struct manifest_file *files;
        size_t n_files;
        uint64_t total_size;
        /* What the version makes on disk besides its files. */
        size_t n_directories;
        size_t n_links;    /* top-level entries: each is a link dest/<entry> -> ..data/<entry> */
        unsigned depth;    /* the deepest file's directories */
};

/* Parses and validates a manifest. -EINVAL (or -E2BIG for too many files or past a limit,
 * -EFBIG for too much text) with *ret_error (if not NULL) saying what is wrong, e.g.
 * "files[3].path: escapes dest". limits NULL: only the fixed ones (MANIFEST_MAX_*). */
int manifest_parse_limited(const char *text, size_t size, const struct manifest_limits *limits,
                           struct manifest **ret, char **ret_error);
int manifest_parse(const char *text, size_t size, struct manifest **ret, char **ret_error);
/* Inodes a version of m makes: files, directories and the links in dest. */
size_t manifest_entries(const struct manifest *m);
struct manifest *manifest_free(struct manifest *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct manifest *, manifest_free);

/* NULL if path is acceptable as a file path inside dest, else why not (a static string). */
const char *manifest_check_path(const char *path);
/* Finds a file by path (linear: for one-off lookups; a sync looks up every file through
 * manifest_index()). */
const struct manifest_file *manifest_find(const struct manifest *m, const char *path);
/* An array of pointers to m's files sorted by path (free() it; m must outlive it), and a
 * binary search in it: n lookups in O(n log n) instead of O(n^2). */
int manifest_index(const struct manifest *m, const struct manifest_file ***ret);
const struct manifest_file *manifest_index_find(const struct manifest_file *const *index, size_t n, const char *path);
/* True if a and b describe the same bytes and mode at that path. */
bool manifest_file_same(const struct manifest_file *a, const struct manifest_file *b);

/* ref resolved against base (RFC 3986, through libcurl's URL API); only http(s) results. */
int manifest_resolve_url(const char *base, const char *ref, char **ret);
/* url for people to read (the API, pinionctl): a password in its userinfo
 * ("https://user:secret@host/...") is replaced by "redacted". -EINVAL if it cannot be parsed
 * and has userinfo (then it is not shown at all). */
int manifest_url_redacted(const char *url, char **ret);
