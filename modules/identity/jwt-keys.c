/* SPDX-License-Identifier: MIT */
/* The trust domain's JWT keys on this node: [identity] jwt-key-file (the private key every node
 * of the trust domain shares) and jwt-bundle-file (public keys accepted besides it, published
 * ahead of a rotation), loaded at start, on reload and whenever either file changes (polled:
 * a config bundle or any file distribution replaces files by rename, which an inotify watch
 * on the file itself would lose). A load that fails keeps the set that was loaded before, so a
 * half-written or broken file never stops minting; it is logged and shown in the status.
 * Key design and rotation: docs/identity.md. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "fs.h"
#include "identity.h"
#include "json.h"
#include "log.h"

#define MODULE "identity"
#define JWT_POLL (2 * USEC_PER_SEC)
#define JWT_FILE_MAX (64 * 1024)

static bool stamp_equal(const struct jwt_file_stamp *a, const struct jwt_file_stamp *b) {
        return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime_nsec == b->mtime_nsec && a->ctime_nsec == b->ctime_nsec;
}

static struct jwt_file_stamp stamp_of(const char *path) {
        struct stat st;
        if (!path || stat(path, &st) < 0)
                return (struct jwt_file_stamp) {};
        return (struct jwt_file_stamp) {
                .exists = true,
                .dev = st.st_dev,
                .ino = st.st_ino,
                .size = st.st_size,
                .mtime_nsec = (uint64_t) st.st_mtim.tv_sec * 1000000000ULL + (uint64_t) st.st_mtim.tv_nsec,
                .ctime_nsec = (uint64_t) st.st_ctim.tv_sec * 1000000000ULL + (uint64_t) st.st_ctim.tv_nsec,
        };
}

/* The private key: root's alone. A key others can read is a key others may have copied. */
static int load_signer(struct jwt_keyset *ks, const char *path, char **ret_error) {
        char *data = NULL;
        size_t size = 0;
        struct stat st;
        int r;

        if (stat(path, &st) < 0) {
                r = -errno;
                return asprintf(ret_error, "jwt-key-file %s: %s", path, strerror(-r)) < 0 ? -ENOMEM : r;
        }
        if (st.st_mode & 0077)
                return asprintf(ret_error, "jwt-key-file %s is readable or writable by group or others (mode %04o): "
                                           "it must be 0600 or 0400", path, (unsigned) (st.st_mode & 07777)) < 0 ? -ENOMEM : -EPERM;
        r = fs_read_file_full(path, JWT_FILE_MAX, &data, &size);
        if (r >= 0) {
                r = jwt_keyset_set_signer_pem(ks, data, size);
                OPENSSL_cleanse(data, size);
                free(data);
        }
        if (r < 0 && asprintf(ret_error, "jwt-key-file %s: %s", path,
                              r == -EBADMSG ? "not a PEM private key"
                              : r == -EINVAL ? "not an EC P-256 key (ES256 needs P-256)"
                                             : strerror(-r)) < 0)
                return -ENOMEM;
        return r;
}

static int load_bundle(struct jwt_keyset *ks, const char *path, char **ret_error) {
        _cleanup_free_ char *data = NULL;
        size_t size = 0;
        int r = fs_read_file_full(path, JWT_FILE_MAX, &data, &size);
        if (r >= 0)
                r = jwt_keyset_add_jwks(ks, data, size);
        if (r < 0 && asprintf(ret_error, "jwt-bundle-file %s: %s", path,
                              r == -EBADMSG ? "neither a JWKS ({\"keys\": [...]}) nor PEM public keys"
                              : r == -EINVAL ? "a key that is not EC P-256"
                              : r == -E2BIG  ? "too many keys"
                                             : strerror(-r)) < 0)
                return -ENOMEM;
        return r;
}

/* A new set from the files the settings name; NULL with no jwt-key-file nor jwt-bundle-file. */
static int jwt_keys_read(const struct identity_settings *s, struct jwt_keyset **ret, char **ret_error) {
        _cleanup_(jwt_keyset_freep) struct jwt_keyset *ks = NULL;
        int r;
        *ret = NULL;
        if (!s->jwt_key_file && !s->jwt_bundle_file)
                return 0;
        r = jwt_keyset_new(s->trust_domain, &ks);
        if (r < 0)
                return r;
        if (s->jwt_key_file && (r = load_signer(ks, s->jwt_key_file, ret_error)) < 0)
                return r;
        if (s->jwt_bundle_file && (r = load_bundle(ks, s->jwt_bundle_file, ret_error)) < 0)
                return r;
        *ret = TAKE_PTR(ks);
        return 0;
}

static void set_error(struct identity *id, char *error) {
        free(id->jwt_error);
        id->jwt_error = error;
}

/* (Re)loads the JWT keys from the settings' files; a failure keeps the previous set and is
 * recorded in id->jwt_error. Negative only for out of memory. */
static int jwt_keys_load(struct identity *id) {
        const struct identity_settings *s = id->settings;
        struct jwt_keyset *ks = NULL;
        char *error = NULL;

        id->jwt_key_stamp = stamp_of(s->jwt_key_file);
        id->jwt_bundle_stamp = stamp_of(s->jwt_bundle_file);
        int r = jwt_keys_read(s, &ks, &error);
        if (r == -ENOMEM && !error)
                return r;
        if (r < 0) {
                log_module_error(MODULE, "JWT keys not (re)loaded, %s: %s", id->jwt ? "keeping the previous ones" : "no JWT-SVIDs",
                                 error ? error : strerror(-r));
                set_error(id, error);
                return 0;
        }
        const char *old_kid = id->jwt ? jwt_keyset_signer_kid(id->jwt) : NULL;
        const char *new_kid = ks ? jwt_keyset_signer_kid(ks) : NULL;
        if (ks)
                log_module_info(MODULE, "JWT keys loaded: signing key %s, %zu public key(s) accepted%s",
                                new_kid ? new_kid : "none (validation only)", jwt_keyset_n_keys(ks),
                                id->jwt && !streq_ptr(old_kid, new_kid) ? " (signing key changed)" : "");
        jwt_keyset_free(id->jwt);
        id->jwt = ks;
        id->jwt_generation++;
        set_error(id, NULL);
        identity_announce(id, IDENTITY_CHANGE_JWT_KEYS, NULL);
        return 0;
}

static int on_jwt_poll(sd_event_source *s, uint64_t usec, void *userdata) {
        struct identity *id = userdata;
        struct jwt_file_stamp k = stamp_of(id->settings->jwt_key_file), b = stamp_of(id->settings->jwt_bundle_file);
        if (!stamp_equal(&k, &id->jwt_key_stamp) || !stamp_equal(&b, &id->jwt_bundle_stamp)) {
                log_module_info(MODULE, "a JWT key file changed: reloading");
                if (jwt_keys_load(id) < 0)
                        log_module_error(MODULE, "out of memory reloading the JWT keys");
        }
        (void) sd_event_source_set_time_relative(s, JWT_POLL);
        return 0;
}

int jwt_keys_start(struct identity *id) {
        int r = jwt_keys_load(id);
        if (r < 0 || id->jwt_poll || (!id->settings->jwt_key_file && !id->settings->jwt_bundle_file))
                return r;
        r = sd_event_add_time_relative(id->manager->event, &id->jwt_poll, CLOCK_MONOTONIC, JWT_POLL, USEC_PER_SEC / 4,
                                       on_jwt_poll, id);
        if (r >= 0)
                r = sd_event_source_set_enabled(id->jwt_poll, SD_EVENT_ON);
        return r;
}

void jwt_keys_stop(struct identity *id) {
        id->jwt_poll = sd_event_source_disable_unref(id->jwt_poll);
        id->jwt = jwt_keyset_free(id->jwt);
        id->jwt_error = mfree(id->jwt_error);
}

const char *jwt_keys_unavailable(const struct identity *id) {
        if (id->jwt && (jwt_keyset_signer_kid(id->jwt) || jwt_keyset_n_keys(id->jwt) > 0))
                return NULL;
        if (id->jwt_error)
                return id->jwt_error;
        return "JWT-SVIDs are not configured on this node ([identity] jwt-key-file)";
}

int jwt_keys_status(const struct identity *id, cJSON *o) {
        cJSON *j = cJSON_AddObjectToObject(o, "jwt");
        if (!j || !json_add_string_or_null(j, "signingKid", id->jwt ? jwt_keyset_signer_kid(id->jwt) : NULL) ||
            !cJSON_AddNumberToObject(j, "keys", id->jwt ? (double) jwt_keyset_n_keys(id->jwt) : 0) ||
            !json_add_string_or_null(j, "error", id->jwt_error))
                return -ENOMEM;
        return 0;
}

int jwt_keys_can_mint(const struct identity *id, const struct workload *w, const char **ret_reason) {
        const char *unavailable = jwt_keys_unavailable(id);

        if (unavailable || !jwt_keyset_signer_kid(id->jwt)) {
                *ret_reason = unavailable ?: "this node has no JWT signing key (jwt-key-file)";
                return -ENOKEY;
        }
        if (!jwt_spiffe_id_valid(w->spiffe, id->settings->trust_domain))
                return -ENOENT;
        return 0;
}

int jwt_keys_mint(const struct identity *id, const struct workload *w, char *const *audiences, char **ret_token,
                  usec_t *ret_expires_at) {
        return jwt_mint(id->jwt, w->spiffe, audiences, now_usec(CLOCK_REALTIME), id->settings->jwt_svid_lifetime,
                        ret_token, ret_expires_at);
}

int jwt_keys_validate(const struct identity *id, const char *token, const char *audience, char **ret_spiffe_id,
                      cJSON **ret_claims, const char **ret_reason) {
        const char *unavailable = jwt_keys_unavailable(id);

        if (unavailable) {
                *ret_reason = unavailable;
                return -ENOKEY;
        }
        return jwt_validate(id->jwt, token, audience, now_usec(CLOCK_REALTIME), ret_spiffe_id, ret_claims, ret_reason);
}
