/* SPDX-License-Identifier: MIT */
#pragma once

/* One sync of one bundle: the manifest (conditional on the ETag of what is published), its
 * signature, then every file in parallel (bounded), each streamed to disk through sha256 and
 * checked against its declared size, into a new version directory that is published with the
 * atomic "..data" swap. Files whose path, size, sha256 and mode match the published version are
 * hard-linked from it instead of downloaded. The requests run on the loop; the file-system work
 * that grows with the manifest (directories, hashing reused files, fsync, swap, removal) runs
 * in a thread (stage.h), after the manifest passed its limits (manifest_limits).
 *
 * Nothing is published unless every check passed; on any failure the new version directory is
 * removed and the published one is untouched. The done callback runs exactly once (never from
 * inside fetch_start()), from the loop; the fetch may be freed from inside it. */

#include <stdint.h>

#include <openssl/evp.h>
#include <systemd/sd-event.h>

#include "http.h"
#include "macro.h"
#include "manifest.h"
#include "publish-modes.h"

struct fetch;

struct fetch_params {
        sd_event *event;         /* where the file-system work reports back */
        const char *url;
        const char *ca_file;     /* NULL: the system trust store */
        EVP_PKEY *public_key;    /* NULL: no signature required */
        const char *dest;
        usec_t timeout;          /* per request */
        unsigned parallel;       /* files in flight at once */
        unsigned keep_versions;
        uint64_t max_size;       /* refuse bundles larger than this */
        struct manifest_limits limits; /* refuse bundles that make more on disk than this */
        bool have_current_serial;      /* the published manifest's serial: an older one is refused */
        uint64_t current_serial;
        const char *etag;        /* of the published manifest, for If-None-Match; may be NULL */
        const uint8_t *current_sha256;      /* sha256 of the published manifest's bytes, or NULL */
        const struct manifest *current;     /* the published manifest, for reuse; may be NULL */
        const char *current_dir;            /* its version directory name ("..2026_..."); may be NULL */
        struct publish_modes modes;         /* who may read what is published */
};

enum fetch_result {
        FETCH_CHANGED,     /* a new version was published */
        FETCH_NOT_MODIFIED,/* 304: nothing else was fetched */
        FETCH_SAME,        /* 200 with the published manifest's exact bytes */
        FETCH_FAILED,
        _FETCH_RESULT_MAX,
};

/* Why a fetch failed: a label for metrics. */
enum fetch_error_kind {
        FETCH_ERROR_NONE,
        FETCH_ERROR_CONNECT,   /* refused, unreachable, reset */
        FETCH_ERROR_TIMEOUT,
        FETCH_ERROR_TLS,
        FETCH_ERROR_HTTP,      /* a status other than 200/304 */
        FETCH_ERROR_TRUNCATED, /* the body ended early */
        FETCH_ERROR_MANIFEST,  /* invalid manifest (includes paths escaping dest) */
        FETCH_ERROR_SIGNATURE,
        FETCH_ERROR_SIZE,      /* a body larger or smaller than declared */
        FETCH_ERROR_CHECKSUM,
        FETCH_ERROR_DISK,      /* writing or publishing failed (EIO, EROFS, ...) */
        FETCH_ERROR_ENOSPC,    /* writing failed: no space left in dest (ENOSPC, EDQUOT) */
        FETCH_ERROR_DEST,      /* dest is unusable or unsafe (group- or world-writable, not a directory, not ours) */
        FETCH_ERROR_LIMIT,     /* the manifest makes more on disk than its limits allow */
        FETCH_ERROR_ROLLBACK,  /* the manifest's serial is not newer than the published one's */
        FETCH_ERROR_OTHER,
        _FETCH_ERROR_KIND_MAX,
};

struct fetch_outcome {
        enum fetch_result result;
        enum fetch_error_kind kind;
        int error;             /* negative errno when FAILED */
        char *message;         /* what failed, for people (owned by the fetch) */
        long http_status;      /* of the failing or the manifest request */
        usec_t retry_after;    /* a server's Retry-After, 0 if none */
        char *etag;            /* of the manifest answered now (NULL if none); owned by the fetch */
        char *manifest_text;   /* CHANGED/SAME: the manifest's bytes (owned by the fetch) */
        size_t manifest_size;
        uint8_t manifest_sha256[32];
        struct manifest *manifest; /* CHANGED/SAME: parsed (owned by the fetch) */
        char *version_dir;     /* CHANGED: the published directory's name */
        uint64_t bytes;        /* body bytes received (manifest, signature, files) */
        unsigned files_downloaded, files_reused;
        unsigned files_damaged; /* unchanged in the manifest but not on disk: downloaded again */
        usec_t total_usec;     /* from the manifest request to the outcome */
        usec_t publish_usec;   /* CHANGED: fsync + swap + prune */
};

typedef void (*fetch_done_fn)(struct fetch *f, struct fetch_outcome *o, void *userdata);

int fetch_start(struct http_client *http, const struct fetch_params *p, fetch_done_fn done, void *userdata,
                struct fetch **ret);
/* Cancels what is in flight (done is not called) and removes an unpublished version dir. */
struct fetch *fetch_free(struct fetch *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct fetch *, fetch_free);

/* The outcome's owned pointers may be taken (TAKE_PTR) by the done callback to keep them. */
const char *fetch_result_to_string(enum fetch_result r);
const char *fetch_error_kind_to_string(enum fetch_error_kind k);
