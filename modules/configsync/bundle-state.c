/* SPDX-License-Identifier: MIT */
/* A bundle's state file, <state-dir>/configsync/NAME.json: the ETag, the manifest's bytes and
 * what verified them, the published serial. What lets a restart answer 304, reuse files and
 * go on refusing older manifests. */

#include <stdio.h>

#include <cjson/cJSON.h>
#include <openssl/evp.h>

#include "configsync.h"
#include "fs.h"
#include "json.h"
#include "sha256.h"
#include "state-version.h"

#define STATE_MAX_SIZE (MANIFEST_MAX_SIZE + 64U * 1024U)
/* {"version": 1, ...}; version 1 without the key is the same. */
#define STATE_VERSION 1u


static char *bundle_state_path(const struct bundle *b) {
        char *p = NULL;
        if (asprintf(&p, "%s/%s.json", b->cs->state_dir, b->name) < 0)
                return NULL;
        return p;
}

/* What verified the published tree: the sha256 of the raw public key (hex), "" without one.
 * Saved with the state and compared at start, so a public-key added or rotated while the
 * daemon was down is enforced (no 304 against a tree no key checked). */
static int key_fingerprint(EVP_PKEY *key, char ret[65]) {
        uint8_t raw[64], digest[32];
        size_t n = sizeof(raw);

        if (!key) {
                ret[0] = 0;
                return 0;
        }
        if (EVP_PKEY_get_raw_public_key(key, raw, &n) != 1 || !EVP_Digest(raw, n, digest, NULL, EVP_sha256(), NULL))
                return -EIO;
        sha256_to_hex(digest, ret);
        return 0;
}

/* The rules the published tree was made under ("file-mask:dir-mode:gid"): a tree published
 * under others is downloaded again in full, so every file gets its declared mode within them. */
static int modes_stamp(const struct publish_modes *m, char ret[64]) {
        int n = snprintf(ret, 64, "%04o:%04o:%u", (unsigned) m->file_mask, (unsigned) m->dir_mode, (unsigned) m->gid);
        return n < 0 || n >= 64 ? -EINVAL : 0;
}

int bundle_state_save(struct bundle *b, const char *manifest_text, size_t manifest_size) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        _cleanup_free_ char *path = bundle_state_path(b), *text = NULL;
        char sha[65], fp[65], modes[64];
        int r;

        if (!o || !path)
                return -ENOMEM;
        r = key_fingerprint(b->public_key, fp);
        if (r >= 0)
                r = modes_stamp(&b->modes, modes);
        if (r < 0)
                return r;
        sha256_to_hex(b->manifest_sha256, sha);
        if (state_version_json_add(o, STATE_VERSION) < 0 || !cJSON_AddStringToObject(o, "url", b->settings->url) ||
            !cJSON_AddStringToObject(o, "dest", b->settings->dest) ||
            !cJSON_AddStringToObject(o, "version_dir", b->version_dir) ||
            !json_add_string_or_null(o, "etag", b->etag) || !cJSON_AddStringToObject(o, "manifest_sha256", sha) ||
            !cJSON_AddNumberToObject(o, "published", (double) b->published) ||
            !cJSON_AddStringToObject(o, "public_key_sha256", fp) ||
            (b->have_serial && !cJSON_AddNumberToObject(o, "serial", (double) b->serial)) ||
            !cJSON_AddStringToObject(o, "modes", modes) || !json_add_string_or_null(o, "ca_file", b->settings->ca_file) ||
            !cJSON_AddItemToObject(o, "manifest", cJSON_CreateStringReference("")))
                return -ENOMEM;
        /* The manifest's exact bytes (JSON-escaped): a string keeps them whole. */
        _cleanup_free_ char *copy = strndup(manifest_text, manifest_size);
        if (!copy || !cJSON_ReplaceItemInObject(o, "manifest", cJSON_CreateString(copy)))
                return -ENOMEM;
        text = cJSON_PrintUnformatted(o);
        if (!text)
                return -ENOMEM;
        r = fs_mkdir_p(b->cs->state_dir, 0700);
        if (r < 0)
                return r;
        return fs_write_file_atomic(path, text, strlen(text), 0600, (uid_t) -1, (gid_t) -1);
}

int bundle_state_check_version(struct bundle *b) {
        _cleanup_free_ char *path = bundle_state_path(b), *text = NULL;
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;
        unsigned version = 0;
        size_t size;

        if (!path)
                return -ENOMEM;
        if (fs_read_file_full(path, STATE_MAX_SIZE, &text, &size) < 0)
                return 0; /* absent or unreadable: the load ignores it too */
        o = cJSON_ParseWithLength(text, size);
        if (!o || state_version_json(o, STATE_VERSION, &version) != STATE_VERSION_ERR_NEWER)
                return 0;
        _cleanup_free_ char *why = state_version_describe(path, version, STATE_VERSION);
        log_bundle_error(b, "%s", why ? why : "a newer release's state file");
        return STATE_VERSION_ERR_NEWER;
}

static void bundle_state_load_serial(struct bundle *b, const cJSON *serial) {
        if (cJSON_IsNumber(serial) && serial->valuedouble >= 0 && serial->valuedouble <= MANIFEST_MAX_SERIAL) {
                b->have_serial = true;
                b->serial = (uint64_t) serial->valuedouble;
        }
}

/* Adopts the saved state if it describes the tree ..data points at now; otherwise the next sync
 * starts from scratch (a full download), which is always correct. */
void bundle_state_load(struct bundle *b) {
        _cleanup_free_ char *path = bundle_state_path(b), *text = NULL;
        _cleanup_(cJSON_Deletep) cJSON *o = NULL;
        const cJSON *url, *dest, *dir, *etag, *sha, *man, *pub, *key, *ca, *modes;
        _cleanup_(manifest_freep) struct manifest *m = NULL;
        uint8_t digest[32], declared[32];
        char fp[65], stamp[64];
        size_t size;

        if (!path || fs_read_file_full(path, STATE_MAX_SIZE, &text, &size) < 0)
                return;
        o = cJSON_ParseWithLength(text, size);
        url = cJSON_GetObjectItemCaseSensitive(o, "url");
        dest = cJSON_GetObjectItemCaseSensitive(o, "dest");
        dir = cJSON_GetObjectItemCaseSensitive(o, "version_dir");
        etag = cJSON_GetObjectItemCaseSensitive(o, "etag");
        sha = cJSON_GetObjectItemCaseSensitive(o, "manifest_sha256");
        man = cJSON_GetObjectItemCaseSensitive(o, "manifest");
        pub = cJSON_GetObjectItemCaseSensitive(o, "published");
        key = cJSON_GetObjectItemCaseSensitive(o, "public_key_sha256");
        ca = cJSON_GetObjectItemCaseSensitive(o, "ca_file");
        modes = cJSON_GetObjectItemCaseSensitive(o, "modes");
        /* The serial holds for the url whatever else changed (also a state file older than the
         * tree, after a kill between the swap and its write): it only ever grows, so an older
         * one still refuses what came before it. */
        if (cJSON_IsString(url) && streq(url->valuestring, b->settings->url))
                bundle_state_load_serial(b, cJSON_GetObjectItemCaseSensitive(o, "serial"));
        if (!cJSON_IsString(url) || !cJSON_IsString(dest) || !cJSON_IsString(dir) || !cJSON_IsString(sha) ||
            !cJSON_IsString(man) || !streq(url->valuestring, b->settings->url) ||
            !streq(dest->valuestring, b->settings->dest) || !streq_ptr(dir->valuestring, b->version_dir) ||
            sha256_from_hex(sha->valuestring, declared) < 0)
                return log_bundle_debug(b, "state file does not describe the published tree, ignoring it");
        /* A state file from before public-key/ca-file were recorded counts as "no key, system CAs". */
        if (key_fingerprint(b->public_key, fp) < 0 || !streq(cJSON_IsString(key) ? key->valuestring : "", fp) ||
            !streq_ptr(cJSON_IsString(ca) ? ca->valuestring : NULL, b->settings->ca_file))
                return log_bundle_info(b, "public-key or ca-file changed since the published tree was verified: "
                                      "it stays (last known good) but counts as unverified until the manifest is "
                                      "fetched and checked again in full");
        /* A state file without modes is from an agent that published files as the manifest said. */
        if (modes_stamp(&b->modes, stamp) < 0 || !cJSON_IsString(modes) || !streq(modes->valuestring, stamp))
                return log_bundle_info(b, "the published tree was made under other group/world-readable rules "
                                      "(or by an older agent): the next sync downloads it again in full");
        size = strlen(man->valuestring);
        if (!EVP_Digest(man->valuestring, size, digest, NULL, EVP_sha256(), NULL) || memcmp(digest, declared, 32) != 0 ||
            manifest_parse(man->valuestring, size, &m, NULL) < 0)
                return log_bundle_debug(b, "state file's manifest does not check out, ignoring it");
        memcpy(b->manifest_sha256, digest, 32);
        b->have_sha = true;
        free(b->etag);
        b->etag = cJSON_IsString(etag) ? strdup(etag->valuestring) : NULL;
        free(b->version);
        b->version = strdup(m->version);
        b->n_files = m->n_files;
        b->size = m->total_size;
        if (cJSON_IsNumber(pub) && pub->valuedouble > 0)
                b->published = (usec_t) pub->valuedouble;
        manifest_free(b->manifest);
        b->manifest = TAKE_PTR(m);
        b->verified = true;
}
