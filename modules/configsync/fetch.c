/* SPDX-License-Identifier: MIT */
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "fetch.h"
#include "fs.h"
#include "offload.h"
#include "sha256.h"
#include "signature.h"
#include "stage.h"
#include "string-table.h"

#define FETCH_BUFFER_SIZE (256L * 1024L)
#define FETCH_USER_AGENT "piniond-configsync/" PACKAGE_VERSION

enum fetch_phase {
        PHASE_MANIFEST,
        PHASE_SIGNATURE,
        PHASE_CHECK,   /* check_manifest in its thread */
        PHASE_PREPARE, /* stage_prepare in its thread */
        PHASE_FILES,
        PHASE_PUBLISH, /* stage_publish in its thread */
        PHASE_CLEANUP, /* failed: stage_remove in its thread, then done */
        PHASE_DONE,
};

struct fetch_file {
        struct fetch *fetch;
        const struct manifest_file *mf;
        struct http_transfer *transfer;
        CURL *easy;
        int fd;
        EVP_MD_CTX *md;
        uint64_t received;
        int write_error;    /* negative errno from write() */
        bool oversize;
        bool bad_status;
};

struct fetch {
        sd_event *event;
        struct http_client *http;
        fetch_done_fn done;
        void *userdata;

        char *url, *ca_file, *dest, *etag, *current_dir;
        EVP_PKEY *public_key;
        usec_t timeout;
        unsigned parallel, keep_versions;
        uint64_t max_size;
        struct manifest_limits limits;
        bool have_current_serial;
        uint64_t current_serial;
        struct publish_modes modes;
        bool have_current_sha;
        uint8_t current_sha256[32];
        const struct manifest *current; /* borrowed: the caller keeps it until done */

        enum fetch_phase phase;
        struct http_transfer *transfer; /* manifest or signature */
        struct curl_slist *headers;

        bool have_signature;  /* the manifest's, decoded, for check_manifest */
        uint8_t signature[SIGNATURE_ED25519_SIZE];
        enum fetch_error_kind check_kind; /* why check_manifest refused it */
        char *check_error;
        struct stage stage;   /* the version directory */
        struct offload *work;  /* the stage's step in flight */
        struct fetch_file *files;
        size_t next_file, n_active, n_finished;

        struct fetch_outcome out;
        usec_t started;
};

static const char *const fetch_result_table[_FETCH_RESULT_MAX] = {
        [FETCH_CHANGED] = "changed",
        [FETCH_NOT_MODIFIED] = "not-modified",
        [FETCH_SAME] = "same",
        [FETCH_FAILED] = "failed",
};

static const char *const fetch_error_kind_table[_FETCH_ERROR_KIND_MAX] = {
        [FETCH_ERROR_NONE] = "none",
        [FETCH_ERROR_CONNECT] = "connect",
        [FETCH_ERROR_TIMEOUT] = "timeout",
        [FETCH_ERROR_TLS] = "tls",
        [FETCH_ERROR_HTTP] = "http",
        [FETCH_ERROR_TRUNCATED] = "truncated",
        [FETCH_ERROR_MANIFEST] = "manifest",
        [FETCH_ERROR_SIGNATURE] = "signature",
        [FETCH_ERROR_SIZE] = "size",
        [FETCH_ERROR_CHECKSUM] = "checksum",
        [FETCH_ERROR_DISK] = "disk",
        [FETCH_ERROR_ENOSPC] = "enospc",
        [FETCH_ERROR_DEST] = "dest",
        [FETCH_ERROR_LIMIT] = "limit",
        [FETCH_ERROR_ROLLBACK] = "rollback",
        [FETCH_ERROR_OTHER] = "other",
};

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(fetch_result, enum fetch_result);

DEFINE_STRING_TABLE_LOOKUP_TO_STRING(fetch_error_kind, enum fetch_error_kind);

static void file_release(struct fetch_file *ff) {
        http_transfer_cancel(ff->transfer);
        ff->transfer = NULL;
        ff->fd = safe_close(ff->fd);
        EVP_MD_CTX_free(ff->md);
        ff->md = NULL;
}

/* Stops every request and the stage's step in flight (waiting for the thread); the version
 * directory, if any, stays for stage_remove. */
static void fetch_stop(struct fetch *f) {
        http_transfer_cancel(f->transfer);
        f->transfer = NULL;
        if (f->files) {
                struct manifest *m = f->out.manifest;
                for (size_t i = 0; m && i < m->n_files; i++)
                        file_release(&f->files[i]);
                f->files = mfree(f->files);
        }
        f->work = offload_free(f->work);
}

static void fetch_release(struct fetch *f) {
        fetch_stop(f);
        if (f->stage.version_dir)
                /* Never published: it goes, whatever it holds. Here only when the thread that
                 * would remove it cannot be had, or the fetch is cancelled (a reload, the stop). */
                (void) fs_rm_rf(f->stage.version_dir);
        stage_done(&f->stage);
}

struct fetch *fetch_free(struct fetch *f) {
        if (!f)
                return NULL;
        fetch_release(f);
        curl_slist_free_all(f->headers);
        free(f->url);
        free(f->ca_file);
        free(f->dest);
        free(f->etag);
        free(f->current_dir);
        EVP_PKEY_free(f->public_key);
        free(f->check_error);
        free(f->out.message);
        free(f->out.etag);
        free(f->out.manifest_text);
        manifest_free(f->out.manifest);
        free(f->out.version_dir);
        free(f);
        return NULL;
}

static void fetch_report(struct fetch *f) {
        f->phase = PHASE_DONE;
        f->out.total_usec = now_usec(CLOCK_MONOTONIC) - f->started;
        f->done(f, &f->out, f->userdata);
}

static void on_removed(struct offload *w, int r, void *userdata) {
        struct fetch *f = userdata;

        /* What could not be removed is a leftover the cleanup at the next start removes. */
        f->work = offload_free(f->work);
        stage_done(&f->stage);
        fetch_report(f);
}

/* A failure reports once the unpublished version directory is gone (removed off the loop). */
static void fetch_finish(struct fetch *f) {
        if (f->out.result == FETCH_FAILED) {
                fetch_stop(f);
                if (f->stage.version_dir &&
                    offload_start(f->event, "configsync-work", stage_remove, &f->stage, on_removed, f, &f->work) >= 0) {
                        f->phase = PHASE_CLEANUP;
                        return;
                }
                fetch_release(f);
        }
        fetch_report(f);
}

_printf_(4, 5) static void fetch_fail(struct fetch *f, enum fetch_error_kind kind, int error, const char *format, ...) {
        va_list ap;
        char *s = NULL;

        va_start(ap, format);
        if (vasprintf(&s, format, ap) < 0)
                s = NULL;
        va_end(ap);
        /* A full disk is told apart (its own kind, the directory named): it heals by itself once
         * space is freed, and the operator must know where. */
        if (kind == FETCH_ERROR_DISK && (error == -ENOSPC || error == -EDQUOT)) {
                char *with_dir = NULL;
                kind = FETCH_ERROR_ENOSPC;
                if (asprintf(&with_dir, "no space left in %s: %s", f->dest, strempty(s)) >= 0) {
                        free(s);
                        s = with_dir;
                }
        }
        free(f->out.message);
        f->out.message = s;
        f->out.result = FETCH_FAILED;
        f->out.kind = kind;
        f->out.error = error < 0 ? error : -EIO;
        fetch_finish(f);
}

static enum fetch_error_kind kind_of_transport_error(int error) {
        switch (error) {
        case -ETIMEDOUT:
                return FETCH_ERROR_TIMEOUT;
        case -ECONNREFUSED:
        case -EHOSTUNREACH:
        case -ECONNRESET:
                return FETCH_ERROR_CONNECT;
        case -EPROTO:
                return FETCH_ERROR_TLS;
        case -EPIPE:
                return FETCH_ERROR_TRUNCATED;
        default:
                return FETCH_ERROR_OTHER;
        }
}

/* A failed request: the transport's error if there was one, else the HTTP status. */
static void fail_response(struct fetch *f, const char *what, const struct http_response *resp) {
        f->out.http_status = resp->status;
        if (resp->error != 0)
                fetch_fail(f, kind_of_transport_error(resp->error), resp->error, "%s: %s", what,
                           resp->error_message ? resp->error_message : strerror(-resp->error));
        else {
                f->out.retry_after = http_response_retry_after(resp);
                fetch_fail(f, FETCH_ERROR_HTTP, -EBADMSG, "%s: HTTP %ld", what, resp->status);
        }
}

static int easy_new(struct fetch *f, const char *url, CURL **ret) {
        CURL *e = curl_easy_init();
        long ms = (long) MAX(f->timeout / USEC_PER_MSEC, (usec_t) 1);

        if (!e)
                return -ENOMEM;
        if (curl_easy_setopt(e, CURLOPT_URL, url) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, ms) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, MIN(ms, 10000L)) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 1L) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_MAXREDIRS, 5L) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
            /* An https source never redirects to plain http (which would bypass its TLS). */
            curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR,
                             strncasecmp(f->url, "https:", 6) == 0 ? "https" : "http,https") != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_USERAGENT, FETCH_USER_AGENT) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_BUFFERSIZE, FETCH_BUFFER_SIZE) != CURLE_OK ||
            (f->ca_file && curl_easy_setopt(e, CURLOPT_CAINFO, f->ca_file) != CURLE_OK)) {
                curl_easy_cleanup(e);
                return -EINVAL;
        }
        *ret = e;
        return 0;
}

/* ---- files ---- */

static void files_pump(struct fetch *f);

static size_t file_write(char *data, size_t size, size_t nmemb, void *userdata) {
        struct fetch_file *ff = userdata;
        size_t n = size * nmemb;
        long status = 0;

        if (ff->received == 0) {
                (void) curl_easy_getinfo(ff->easy, CURLINFO_RESPONSE_CODE, &status);
                if (status != 200) {
                        ff->bad_status = true;
                        return 0;
                }
        }
        if (n > ff->mf->size - ff->received) {
                ff->oversize = true;
                return 0;
        }
        if (EVP_DigestUpdate(ff->md, data, n) != 1) {
                ff->write_error = -ENOMEM;
                return 0;
        }
        for (size_t done = 0; done < n;) {
                ssize_t k = write(ff->fd, data + done, n - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        ff->write_error = negative_errno();
                        return 0;
                }
                done += (size_t) k;
        }
        ff->received += n;
        return n;
}

static void file_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct fetch_file *ff = userdata;
        struct fetch *f = ff->fetch;
        const struct manifest_file *mf = ff->mf;
        uint8_t sha[32];
        unsigned len = 0;
        int r;

        ff->transfer = NULL;
        f->n_active--;
        f->out.bytes += ff->received;

        if (ff->write_error < 0)
                return fetch_fail(f, FETCH_ERROR_DISK, ff->write_error, "%s: writing: %s", mf->path,
                                  strerror(-ff->write_error));
        if (ff->bad_status || (resp->error == 0 && resp->status != 200))
                return fail_response(f, mf->path,
                                     &(struct http_response) { .status = resp->status, .easy = resp->easy });
        if (ff->oversize)
                return fetch_fail(f, FETCH_ERROR_SIZE, -EFBIG, "%s: larger than the %" PRIu64 " bytes declared",
                                  mf->path, mf->size);
        if (resp->error != 0)
                return fail_response(f, mf->path, resp);
        if (ff->received != mf->size)
                return fetch_fail(f, FETCH_ERROR_SIZE, -EBADMSG, "%s: %" PRIu64 " bytes, %" PRIu64 " declared",
                                  mf->path, ff->received, mf->size);
        if (EVP_DigestFinal_ex(ff->md, sha, &len) != 1 || len != 32)
                return fetch_fail(f, FETCH_ERROR_OTHER, -EIO, "%s: sha256 failed", mf->path);
        if (memcmp(sha, mf->sha256, 32) != 0) {
                char got[65], want[65];
                sha256_to_hex(sha, got);
                sha256_to_hex(mf->sha256, want);
                return fetch_fail(f, FETCH_ERROR_CHECKSUM, -EBADMSG, "%s: sha256 %s, manifest says %s", mf->path,
                                  got, want);
        }
        r = publish_modes_set_fd(ff->fd, publish_modes_file(&f->modes, mf->mode), f->modes.gid);
        if (r < 0)
                return fetch_fail(f, FETCH_ERROR_DISK, r, "%s: setting its mode and ACL: %s%s", mf->path, strerror(-r),
                                  publish_modes_error_hint(r));
        /* Start the write-back now, without waiting for it: the fsync before publishing then
         * finds most of the bundle on disk already instead of writing it all at once. */
        (void) sync_file_range(ff->fd, 0, 0, SYNC_FILE_RANGE_WRITE);
        file_release(ff);
        f->n_finished++;
        f->out.files_downloaded++;
        files_pump(f);
}

static int file_start(struct fetch *f, struct fetch_file *ff) {
        _cleanup_free_ char *url = NULL;
        CURL *e = NULL;
        int r;

        r = manifest_resolve_url(f->url, ff->mf->url, &url);
        if (r < 0)
                return r;
        ff->fd = openat(f->stage.vfd, ff->mf->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (ff->fd < 0)
                return negative_errno();
        ff->md = EVP_MD_CTX_new();
        if (!ff->md || EVP_DigestInit_ex(ff->md, EVP_sha256(), NULL) != 1)
                return -ENOMEM;
        r = easy_new(f, url, &e);
        if (r < 0)
                return r;
        ff->easy = e;
        if (curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, file_write) != CURLE_OK ||
            curl_easy_setopt(e, CURLOPT_WRITEDATA, ff) != CURLE_OK) {
                curl_easy_cleanup(e);
                return -EINVAL;
        }
        r = http_client_submit(f->http, e, 0, file_done, ff, &ff->transfer);
        if (r < 0)
                return r;
        f->n_active++;
        return 0;
}

static void on_published(struct offload *w, int r, void *userdata) {
        struct fetch *f = userdata;

        f->work = offload_free(f->work);
        f->out.publish_usec = f->stage.publish_usec;
        if (r < 0)
                return fetch_fail(f, f->stage.kind, r, "%s", f->stage.message ? f->stage.message : strerror(-r));
        f->out.version_dir = TAKE_PTR(f->stage.published_name);
        f->out.result = FETCH_CHANGED;
        fetch_finish(f);
}

static void publish(struct fetch *f) {
        int r;

        f->phase = PHASE_PUBLISH;
        r = offload_start(f->event, "configsync-work", stage_publish, &f->stage, on_published, f, &f->work);
        if (r < 0)
                fetch_fail(f, FETCH_ERROR_OTHER, r, "publishing: %s", strerror(-r));
}

static void files_pump(struct fetch *f) {
        const struct manifest *m = f->out.manifest;
        int r;

        if (f->phase != PHASE_FILES)
                return;
        while (f->n_active < f->parallel && f->next_file < m->n_files) {
                struct fetch_file *ff = &f->files[f->next_file++];
                if (f->stage.reused[ff - f->files])
                        continue; /* counted in n_finished already */
                r = file_start(f, ff);
                if (r < 0) {
                        enum fetch_error_kind k = r == -ENOSPC || r == -EIO || r == -EDQUOT || r == -EROFS ||
                                                                  r == -EEXIST || r == -ENOTDIR || r == -EISDIR
                                                          ? FETCH_ERROR_DISK
                                                          : FETCH_ERROR_OTHER;
                        return fetch_fail(f, k, r, "%s: %s", ff->mf->path, strerror(-r));
                }
        }
        if (f->n_finished == m->n_files)
                publish(f);
}

static void on_prepared(struct offload *w, int r, void *userdata) {
        struct fetch *f = userdata;

        f->work = offload_free(f->work);
        f->out.files_damaged = f->stage.files_damaged;
        if (r < 0)
                return fetch_fail(f, f->stage.kind, r, "%s", f->stage.message ? f->stage.message : strerror(-r));
        f->out.files_reused = f->stage.files_reused;
        f->n_finished = f->stage.files_reused;
        f->phase = PHASE_FILES;
        files_pump(f);
}

static void files_begin(struct fetch *f) {
        const struct manifest *m = f->out.manifest;
        int r;

        if (m->total_size > f->max_size)
                return fetch_fail(f, FETCH_ERROR_MANIFEST, -EFBIG,
                                  "manifest: the bundle's %" PRIu64 " bytes exceed max-size (%" PRIu64 ")",
                                  m->total_size, f->max_size);
        if (m->n_files > 0) {
                f->files = calloc(m->n_files, sizeof(struct fetch_file));
                if (!f->files)
                        return fetch_fail(f, FETCH_ERROR_OTHER, -ENOMEM, "out of memory");
        }
        for (size_t i = 0; i < m->n_files; i++)
                f->files[i] = (struct fetch_file) { .fetch = f, .mf = &m->files[i], .fd = -EBADF };

        f->stage.dest = f->dest;
        f->stage.current_dir = f->current ? f->current_dir : NULL;
        f->stage.manifest = m;
        f->stage.current = f->current;
        f->stage.modes = f->modes;
        f->stage.keep_versions = f->keep_versions;
        f->phase = PHASE_PREPARE;
        r = offload_start(f->event, "configsync-work", stage_prepare, &f->stage, on_prepared, f, &f->work);
        if (r < 0)
                return fetch_fail(f, FETCH_ERROR_OTHER, r, "starting the file-system work: %s", strerror(-r));
}

/* ---- manifest and signature ---- */

/* A manifest other than the published one must carry a newer serial if the published one has
 * a serial: an older manifest, however well signed, is a rollback. */
static int check_serial(struct fetch *f, const struct manifest *m) {
        if (!f->have_current_serial)
                return 0;
        if (!m->has_serial) {
                fetch_fail(f, FETCH_ERROR_ROLLBACK, -ESTALE,
                           "manifest: no serial, but the published version has serial %" PRIu64
                           ": refusing what may be an older manifest (a rollback)",
                           f->current_serial);
                return -ESTALE;
        }
        if (m->serial <= f->current_serial) {
                fetch_fail(f, FETCH_ERROR_ROLLBACK, -ESTALE,
                           "manifest: serial %" PRIu64 " is not newer than the published version's %" PRIu64
                           ": refusing a rollback (to go back, publish the older files with a higher serial)",
                           m->serial, f->current_serial);
                return -ESTALE;
        }
        return 0;
}

/* In a thread: up to 16 MiB of manifest are hashed, their signature checked and the JSON
 * parsed, work that grows with the manifest and so stays off the loop. */
static int check_manifest(void *userdata, const atomic_bool *stop) {
        struct fetch *f = userdata;
        _cleanup_free_ char *error = NULL;
        int r;

        if (!EVP_Digest(f->out.manifest_text, f->out.manifest_size, f->out.manifest_sha256, NULL, EVP_sha256(), NULL)) {
                f->check_kind = FETCH_ERROR_OTHER;
                return -EIO;
        }
        if (f->have_signature) {
                r = signature_verify(f->public_key, f->out.manifest_text, f->out.manifest_size, f->signature);
                if (r < 0) {
                        f->check_kind = FETCH_ERROR_SIGNATURE;
                        if (asprintf(&f->check_error, "signature: %s",
                                     r == -EBADMSG ? "does not verify with public-key" : strerror(-r)) < 0)
                                f->check_error = NULL;
                        return r;
                }
        }
        r = manifest_parse_limited(f->out.manifest_text, f->out.manifest_size, &f->limits, &f->out.manifest, &error);
        if (r < 0) {
                f->check_kind = r == -E2BIG ? FETCH_ERROR_LIMIT : FETCH_ERROR_MANIFEST;
                if (asprintf(&f->check_error, "manifest: %s", error ? error : strerror(-r)) < 0)
                        f->check_error = NULL;
        }
        return r;
}

static void on_checked(struct offload *w, int r, void *userdata) {
        struct fetch *f = userdata;

        f->work = offload_free(f->work);
        if (r < 0)
                return fetch_fail(f, f->check_kind, r, "%s", f->check_error ? f->check_error : strerror(-r));
        if (f->have_current_sha && memcmp(f->current_sha256, f->out.manifest_sha256, 32) == 0) {
                f->out.result = FETCH_SAME;
                return fetch_finish(f);
        }
        if (check_serial(f, f->out.manifest) < 0)
                return;
        files_begin(f);
}

static void manifest_accept(struct fetch *f) {
        int r;

        f->phase = PHASE_CHECK;
        r = offload_start(f->event, "configsync-work", check_manifest, f, on_checked, f, &f->work);
        if (r < 0)
                fetch_fail(f, FETCH_ERROR_OTHER, r, "checking the manifest: %s", strerror(-r));
}

static void signature_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct fetch *f = userdata;
        uint8_t sig[SIGNATURE_ED25519_SIZE];
        int r;

        f->transfer = NULL;
        f->out.bytes += resp->body_size;
        if (resp->error == -EFBIG)
                return fetch_fail(f, FETCH_ERROR_SIGNATURE, -EBADMSG, "signature: larger than %u bytes",
                                  SIGNATURE_MAX_TEXT);
        if (resp->error != 0 || resp->status != 200)
                return fail_response(f, "signature", resp);
        r = signature_decode(resp->body, resp->body_size, sig);
        if (r < 0)
                return fetch_fail(f, FETCH_ERROR_SIGNATURE, -EBADMSG, "signature: not the base64 of 64 bytes");
        memcpy(f->signature, sig, sizeof(sig));
        f->have_signature = true;
        manifest_accept(f);
}

static void manifest_done(struct http_client *c, const struct http_response *resp, void *userdata) {
        struct fetch *f = userdata;
        const char *etag;
        int r;

        f->transfer = NULL;
        f->out.bytes += resp->body_size;
        f->out.http_status = resp->status;
        if (resp->error == -EFBIG)
                return fetch_fail(f, FETCH_ERROR_MANIFEST, -EFBIG, "manifest: larger than %u bytes",
                                  MANIFEST_MAX_SIZE);
        if (resp->error != 0)
                return fail_response(f, "manifest", resp);
        if (resp->status == 304 && f->etag) {
                f->out.result = FETCH_NOT_MODIFIED;
                f->out.etag = strdup(f->etag);
                return fetch_finish(f);
        }
        if (resp->status != 200)
                return fail_response(f, "manifest", resp);

        etag = http_response_header(resp, "ETag");
        if (etag && !(f->out.etag = strdup(etag)))
                return fetch_fail(f, FETCH_ERROR_OTHER, -ENOMEM, "out of memory");
        f->out.manifest_text = malloc(resp->body_size + 1);
        if (!f->out.manifest_text)
                return fetch_fail(f, FETCH_ERROR_OTHER, -ENOMEM, "out of memory");
        memcpy(f->out.manifest_text, resp->body, resp->body_size);
        f->out.manifest_text[resp->body_size] = 0;
        f->out.manifest_size = resp->body_size;

        if (!f->public_key)
                return manifest_accept(f);

        _cleanup_free_ char *sig_url = NULL;
        CURL *e = NULL;
        f->phase = PHASE_SIGNATURE;
        if (asprintf(&sig_url, "%s.sig", f->url) < 0)
                return fetch_fail(f, FETCH_ERROR_OTHER, -ENOMEM, "out of memory");
        r = easy_new(f, sig_url, &e);
        if (r >= 0)
                r = http_client_submit(f->http, e, SIGNATURE_MAX_TEXT, signature_done, f, &f->transfer);
        if (r < 0)
                return fetch_fail(f, FETCH_ERROR_OTHER, r, "signature: %s", strerror(-r));
}

static int strdup_opt(const char *s, char **ret) {
        if (!s) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int fetch_start(struct http_client *http, const struct fetch_params *p, fetch_done_fn done, void *userdata,
                struct fetch **ret) {
        _cleanup_(fetch_freep) struct fetch *f = NULL;
        CURL *e = NULL;
        int r;

        if (!http || !p || !p->event || !p->url || !p->dest || !done || p->parallel == 0)
                return -EINVAL;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        stage_init(&f->stage);
        f->event = p->event;
        f->http = http;
        f->done = done;
        f->userdata = userdata;
        f->timeout = p->timeout;
        f->parallel = p->parallel;
        f->keep_versions = p->keep_versions;
        f->max_size = p->max_size;
        f->limits = p->limits;
        f->have_current_serial = p->have_current_serial;
        f->current_serial = p->current_serial;
        f->modes = p->modes;
        f->current = p->current;
        if (p->current_sha256) {
                memcpy(f->current_sha256, p->current_sha256, 32);
                f->have_current_sha = true;
        }
        if (strdup_opt(p->url, &f->url) < 0 || strdup_opt(p->ca_file, &f->ca_file) < 0 ||
            strdup_opt(p->dest, &f->dest) < 0 || strdup_opt(p->etag, &f->etag) < 0 ||
            strdup_opt(p->current_dir, &f->current_dir) < 0)
                return -ENOMEM;
        if (p->public_key) {
                if (EVP_PKEY_up_ref(p->public_key) != 1)
                        return -ENOMEM;
                f->public_key = p->public_key;
        }

        r = easy_new(f, f->url, &e);
        if (r < 0)
                return r;
        if (f->etag) {
                _cleanup_free_ char *h = NULL;
                if (asprintf(&h, "If-None-Match: %s", f->etag) < 0) {
                        curl_easy_cleanup(e);
                        return -ENOMEM;
                }
                f->headers = curl_slist_append(NULL, h);
                if (!f->headers || curl_easy_setopt(e, CURLOPT_HTTPHEADER, f->headers) != CURLE_OK) {
                        curl_easy_cleanup(e);
                        return -ENOMEM;
                }
        }
        f->phase = PHASE_MANIFEST;
        f->started = now_usec(CLOCK_MONOTONIC);
        r = http_client_submit(http, e, MANIFEST_MAX_SIZE, manifest_done, f, &f->transfer);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(f);
        return 0;
}
