/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic-dir.h"
#include "clock-watch.h"
#include "cred.h"
#include "fs-acl.h"
#include "fs.h"
#include "json.h"
#include "log.h"
#include "state-version.h"
#include "strv.h"
#include "string-table.h"

#define MODULE "identity"
#define KEY_MAX (64 * 1024)
/* Each version directory holds "format": "v1\n" beside key.pem, cert.pem and ca.pem; a
 * directory without it (written before formats were) is the same version 1. */
#define CRED_FORMAT_FILE "format"
#define CRED_FORMAT_VERSION 1u
#define CERT_MAX (1024 * 1024)

static const char *const cred_state_table[_CRED_STATE_MAX] = {
        [CRED_NONE] = "none",
        [CRED_REQUESTING] = "requesting",
        [CRED_VALID] = "valid",
        [CRED_ROTATING] = "rotating",
        [CRED_EXPIRED] = "expired",
};

static DEFINE_STRING_TABLE_LOOKUP_TO_STRING(cred_state, enum cred_state);

#define log_cred_full_errno(c, level, error, fmt, ...) \
        log_module_full_errno(MODULE, level, error, "%s certificate: " fmt, (c)->name, ##__VA_ARGS__)

static void cred_set_state(struct cred *c, enum cred_state s) {
        if (c->state == s)
                return;
        log_cred_full_errno(c, s == CRED_EXPIRED ? LOG_ERR : LOG_INFO, 0, "%s → %s", cred_state_to_string(c->state),
                 cred_state_to_string(s));
        c->state = s;
        c->on_event(c, CRED_EVENT_STATE, c->userdata);
}

static void set_error(struct cred *c, const char *reason) {
        free(c->last_error);
        c->last_error = reason ? strdup(reason) : NULL;
}

static void clear_material(struct cred *c) {
        EVP_PKEY_free(c->key);
        c->key = NULL;
        sk_X509_pop_free(c->chain, X509_free);
        c->chain = NULL;
        sk_X509_pop_free(c->roots, X509_free);
        c->roots = NULL;
        x509_cert_info_done(&c->info);
}

struct cred *cred_free(struct cred *c) {
        if (!c)
                return NULL;
        signer_cancel(c->signer, c);
        sd_event_source_disable_unref(c->timer);
        clear_material(c);
        EVP_PKEY_free(c->pending_key);
        free(c->name);
        free(c->dir);
        free(c->profile);
        free(c->cn);
        free(c->org);
        free(c->key_file);
        free(c->cert_file);
        free(c->ca_file);
        free(c->version_key_file);
        free(c->version_cert_file);
        free(c->last_error);
        free(c);
        return NULL;
}

int cred_new(sd_event *e, struct signer *signer, const struct cred_config *cfg, cred_event_fn on_event, void *userdata,
             struct cred **ret) {
        _cleanup_(cred_freep) struct cred *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = e;
        c->signer = signer;
        c->usage = cfg->usage;
        c->lifetime = cfg->lifetime;
        c->on_event = on_event;
        c->userdata = userdata;
        c->name = strdup(cfg->name);
        c->dir = strdup(cfg->dir);
        c->profile = strdup(cfg->profile);
        c->cn = strdup(cfg->subject.common_name);
        c->org = cfg->subject.organization ? strdup(cfg->subject.organization) : NULL;
        c->key_file = fs_path_join(cfg->dir, "key.pem");
        c->cert_file = fs_path_join(cfg->dir, "cert.pem");
        c->ca_file = fs_path_join(cfg->dir, "ca.pem");
        if (!c->name || !c->dir || !c->profile || !c->cn || (cfg->subject.organization && !c->org) || !c->key_file ||
            !c->cert_file || !c->ca_file)
                return -ENOMEM;
        backoff_init(&c->backoff, &cfg->backoff, 0);
        *ret = TAKE_PTR(c);
        return 0;
}

/* True while a certificate is there and not expired. */
static bool cred_usable(const struct cred *c) {
        return c->chain && c->key && now_usec(CLOCK_REALTIME) < c->info.not_after;
}

int cred_write_version_file(const char *version_dir, const char *name, const char *data, mode_t mode, uid_t reader) {
        _cleanup_close_ int dfd = fs_open_directory(version_dir);
        if (dfd < 0)
                return dfd;
        _cleanup_close_ int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        int r = fs_acl_grant_fd(fd, mode, reader, (gid_t) -1);
        if (r < 0)
                return r;
        size_t n = strlen(data);
        for (size_t done = 0; done < n;) {
                ssize_t k = write(fd, data + done, n - done);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                done += (size_t) k;
        }
        return 0;
}

/* ---- checking a key and chain (from disk or from the signer) ---- */

static int check_material(struct cred *c, EVP_PKEY *key, STACK_OF(X509) *chain, STACK_OF(X509) *roots,
                          usec_t current_not_after, struct cert_info *ret_info, const char **ret_reason) {
        X509 *leaf = sk_X509_value(chain, 0);
        struct cert_info info = {};
        int r;

        if (!x509_key_matches(leaf, key))
                return (*ret_reason = "the certificate is not for this key"), -EBADMSG;
        r = x509_cert_info(leaf, &info);
        if (r < 0)
                return (*ret_reason = "the certificate's fields do not parse"), r;
        _cleanup_free_ char *want = NULL;
        if (asprintf(&want, "CN=%s%s%s", c->cn, c->org ? ",O=" : "", c->org ? c->org : "") < 0) {
                x509_cert_info_done(&info);
                return -ENOMEM;
        }
        if (!streq(info.subject, want)) {
                x509_cert_info_done(&info);
                return (*ret_reason = "the certificate names another subject"), -EBADMSG;
        }
        usec_t now = now_usec(CLOCK_REALTIME);
        if (info.not_after <= now) {
                x509_cert_info_done(&info);
                return (*ret_reason = "the certificate has expired"), -EKEYEXPIRED;
        }
        if (!roots || sk_X509_num(roots) == 0) {
                x509_cert_info_done(&info);
                return (*ret_reason = "no trust anchor to verify the certificate against"), -EBADMSG;
        }
        /* Not far in the future, and a replacement must outlive what it replaces. */
        r = x509_cert_check_times(&info, current_not_after, now, ret_reason);
        if (r < 0) {
                x509_cert_info_done(&info);
                return r;
        }
        /* A node CA must be able to sign what we will issue with it. */
        if (c->usage == CERT_USAGE_CA && !x509_is_issuing_ca(leaf)) {
                x509_cert_info_done(&info);
                return (*ret_reason = "the node CA certificate is not a CA (needs CA:TRUE and keyCertSign)"), -EBADMSG;
        }
        /* Verified as of its own start (at most CERT_MAX_FUTURE ahead, checked above), so a
         * certificate whose notBefore is a second ahead of our clock still counts; expiry was
         * checked above. */
        r = x509_verify_chain(chain, roots, MAX(info.not_before, now), ret_reason);
        if (r < 0) {
                x509_cert_info_done(&info);
                return r;
        }
        *ret_info = info;
        return 0;
}

/* ---- timing ---- */

static void schedule(struct cred *c);

/* The rotation point: a jittered 70–90% of the lifetime, so nodes bootstrapped together do not
 * renew together. The lifetime counts from `from` when that is later than notBefore: CAs backdate
 * notBefore (cfssl by 5 minutes) against clock skew, and a short-lived certificate's share
 * must be of the time it is actually ours. */
static void plan_rotation(struct cred *c, usec_t from) {
        usec_t start = MIN(MAX(c->info.not_before, from), c->info.not_after);
        usec_t life = c->info.not_after - start;
        double share = 0.7 + 0.2 * backoff_random(&c->backoff);
        c->rotate_at = start + (usec_t) ((double) life * share);
        c->next_attempt = c->rotate_at;
}

static void request(struct cred *c);

static bool in_step_grace(const struct cred *c) {
        return c->step_grace_until && now_usec(CLOCK_MONOTONIC) < c->step_grace_until;
}

/* When the timer must look at expiry: notAfter, or the end of a step's grace. */
static usec_t expiry_at(const struct cred *c) {
        if (!in_step_grace(c))
                return c->info.not_after;
        return MAX(c->info.not_after, now_usec(CLOCK_REALTIME) + (c->step_grace_until - now_usec(CLOCK_MONOTONIC)));
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct cred *c = userdata;
        /* A step forward may have fired this before the clock watch was heard: it goes first. */
        (void) clock_watch_check(c->clock);
        usec_t now = now_usec(CLOCK_REALTIME);

        if (c->chain && now >= c->info.not_after && c->state != CRED_EXPIRED && !in_step_grace(c)) {
                log_cred_full_errno(c, LOG_ERR, 0, "expired (notAfter passed without a renewal%s%s)",
                         c->last_error ? ": " : "", c->last_error ? c->last_error : "");
                cred_set_state(c, CRED_EXPIRED);
        }
        if (!c->in_flight && c->next_attempt && now >= c->next_attempt)
                request(c);
        schedule(c);
        return 0;
}

static void schedule(struct cred *c) {
        usec_t at = USEC_INFINITY;
        if (!c->in_flight && c->next_attempt)
                at = c->next_attempt;
        if (c->chain && c->state != CRED_EXPIRED)
                at = MIN(at, expiry_at(c));
        if (at == USEC_INFINITY) {
                (void) sd_event_source_set_enabled(c->timer, SD_EVENT_OFF);
                return;
        }
        if (!c->timer) {
                int r = sd_event_add_time(c->event, &c->timer, CLOCK_REALTIME, at, 10 * USEC_PER_MSEC, on_timer, c);
                if (r < 0)
                        log_cred_full_errno(c, LOG_ERR, r, "cannot arm its timer: %m");
                return;
        }
        (void) sd_event_source_set_time(c->timer, at);
        (void) sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
}

int cred_clock_stepped(struct cred *c, int64_t delta) {
        usec_t now = now_usec(CLOCK_REALTIME);
        int renew = 0;
        /* A retry's backoff waits as long as it would have: it moves with the clock. */
        if (c->next_attempt && c->next_attempt != c->rotate_at)
                c->next_attempt = (usec_t) MAX((int64_t) c->next_attempt + delta, (int64_t) now);
        if (c->chain && x509_clock_verdict(&c->info, c->rotate_at, now) != CERT_CLOCK_KEEP) {
                renew = 1;
                c->next_attempt = now;
                /* Valid just before a step forward expired it: valid while its renewal runs. */
                if (now >= c->info.not_after && (int64_t) now - delta < (int64_t) c->info.not_after)
                        c->step_grace_until = now_usec(CLOCK_MONOTONIC) + IDENTITY_STEP_GRACE;
        }
        schedule(c);
        return renew;
}

/* ---- writing and switching ---- */

/* Resolves ..data once: version_{key,cert}_file name the current version's files. Falls back to
 * the stable paths if the link cannot be read (a pair then only as safe as those). */
static void pin_version(struct cred *c) {
        _cleanup_free_ char *name = NULL, *vdir = NULL;
        char *k = NULL, *ce = NULL;
        if (atomic_dir_current(c->dir, &name) >= 0 && strncmp(name, "..", 2) == 0 && !strchr(name, '/') &&
            (vdir = fs_path_join(c->dir, name))) {
                k = fs_path_join(vdir, "key.pem");
                ce = fs_path_join(vdir, "cert.pem");
        }
        if (!k || !ce) {
                free(k);
                free(ce);
                k = strdup(c->key_file);
                ce = strdup(c->cert_file);
        }
        if (!k || !ce) { /* keep the old ones */
                free(k);
                free(ce);
                return;
        }
        free(c->version_key_file);
        free(c->version_cert_file);
        c->version_key_file = k;
        c->version_cert_file = ce;
}

static int write_material(struct cred *c, EVP_PKEY *key, STACK_OF(X509) *chain, STACK_OF(X509) *roots) {
        _cleanup_free_ char *version = NULL, *cert_pem = NULL, *ca_pem = NULL;
        char *key_pem = NULL;
        int r;

        r = x509_key_to_pem(key, &key_pem);
        if (r < 0)
                return r;
        if ((r = x509_chain_to_pem(chain, &cert_pem)) < 0 || (r = x509_chain_to_pem(roots, &ca_pem)) < 0)
                goto finish;
        r = fs_mkdir_p(c->dir, 0700);
        if (r < 0)
                goto finish;
        (void) atomic_dir_cleanup(c->dir);
        r = atomic_dir_begin(c->dir, &version);
        if (r < 0)
                goto finish;
        if ((r = cred_write_version_file(version, "key.pem", key_pem, 0600, (uid_t) -1)) < 0 ||
            (r = cred_write_version_file(version, "cert.pem", cert_pem, 0644, (uid_t) -1)) < 0 ||
            (r = cred_write_version_file(version, "ca.pem", ca_pem, 0644, (uid_t) -1)) < 0)
                goto finish;
        char format[16];
        (void) state_version_text_prefix(format, sizeof(format), CRED_FORMAT_VERSION);
        format[strlen(format) - 1] = '\n'; /* "v1\n": the version alone */
        r = cred_write_version_file(version, CRED_FORMAT_FILE, format, 0644, (uid_t) -1);
        if (r < 0)
                goto finish;
        r = atomic_dir_commit(c->dir, version, 1); /* the previous pair stays (version_*_file) */
finish:
        if (r < 0 && version)
                (void) fs_rm_rf(version);
        x509_free_secret(key_pem);
        return r;
}

static void on_signed(int error, const char *reason, const char *chain_pem, void *userdata) {
        struct cred *c = userdata;
        /* The key stays pending until a certificate for it is in place: a retry asks again with
         * the same key, which lets the kubernetes signer find the CSR it already made. */
        EVP_PKEY *key = c->pending_key;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL, *roots = NULL;
        struct cert_info info = {};
        usec_t now = now_usec(CLOCK_REALTIME);
        const char *why = reason;
        int r = error;

        c->in_flight = false;
        bool stepped = in_step_grace(c) && c->chain;
        c->step_grace_until = 0; /* a failure: an expiry the grace held off is seen at once */
        if (r >= 0) {
                r = x509_chain_from_pem(chain_pem, strlen(chain_pem), &chain);
                why = "the signer's answer is not a PEM certificate chain";
        }
        if (r >= 0 && c->signer->roots) {
                roots = sk_X509_deep_copy(c->signer->roots, X509_dup, X509_free);
                if (!roots)
                        r = -ENOMEM;
        }
        /* One issued before a step back of the clock (notBefore far ahead) is no use to peers:
         * its replacement may expire first. */
        bool replaces = cred_usable(c) && x509_clock_verdict(&c->info, c->rotate_at, now) != CERT_CLOCK_AHEAD;
        if (r >= 0)
                r = check_material(c, key, chain, roots, replaces ? c->info.not_after : 0, &info, &why);
        bool bad_answer = error >= 0 && r < 0; /* the signer answered, and we cannot use it */
        c->write_error = 0;
        if (r >= 0 && (r = write_material(c, key, chain, roots)) < 0) {
                /* Nothing of it is visible (atomic-dir): the current pair stays in place. */
                c->write_error = r;
                why = "cannot write it under state-dir";
        }
        if (r < 0) {
                _cleanup_free_ char *msg = NULL;
                x509_cert_info_done(&info); /* filled when only the write failed */
                if ((c->write_error ? asprintf(&msg, "cannot write it under %s (%s)", c->dir, strerror(-r))
                                    : asprintf(&msg, "%s (%s)", why ? why : "signing failed", strerror(-r))) < 0)
                        msg = NULL;
                set_error(c, msg ? msg : why);
                c->n_failed++;
                /* A refusal (a denied CSR, a CA that said no) or an answer we cannot use is final
                 * for this key: asking again with it would find the same CSR and the same answer.
                 * A new key makes a new request; transport errors keep the key (and the CSR). */
                if (error == -EPERM || bad_answer) {
                        EVP_PKEY_free(c->pending_key);
                        c->pending_key = NULL;
                }
                usec_t delay = backoff_next(&c->backoff, now_usec(CLOCK_MONOTONIC), 0);
                c->next_attempt = now + delay;
                log_cred_full_errno(c, LOG_WARNING, 0, "%s: %s; retrying in %.1fs%s",
                         c->write_error ? "renewal not written" : "signing failed", c->last_error,
                         (double) delay / USEC_PER_SEC,
                         cred_usable(c) ? " (the current certificate keeps serving)" : "");
                c->on_event(c, CRED_EVENT_FAILED, c->userdata);
                schedule(c);
                return;
        }

        /* On disk first, then in memory: the switch. */
        bool had = cred_usable(c) || stepped; /* expired by a step and renewed in its grace: a rotation */
        clear_material(c);
        c->key = TAKE_PTR(c->pending_key);
        c->chain = TAKE_PTR(chain);
        c->roots = TAKE_PTR(roots);
        c->info = info;
        pin_version(c);
        set_error(c, NULL);
        backoff_reset(&c->backoff);
        plan_rotation(c, now);
        had ? c->n_rotated++ : c->n_issued++;
        char until[64] = "", rot[64] = "";
        (void) json_format_rfc3339(c->info.not_after, until, sizeof(until));
        (void) json_format_rfc3339(c->rotate_at, rot, sizeof(rot));
        log_cred_full_errno(c, LOG_INFO, 0, "%s serial %s, valid until %s, renewal at %s", had ? "rotated to" : "issued",
                 c->info.serial, until, rot);
        cred_set_state(c, CRED_VALID);
        c->on_event(c, had ? CRED_EVENT_ROTATED : CRED_EVENT_ISSUED, c->userdata);
        schedule(c);
}

static void request(struct cred *c) {
        _cleanup_(X509_REQ_freep) X509_REQ *csr = NULL;
        const struct cert_subject s = { .common_name = c->cn, .organization = c->org };
        int r;

        c->next_attempt = 0;
        r = c->pending_key ? 0 : x509_key_new(&c->pending_key);
        if (r >= 0)
                r = x509_csr_new(c->pending_key, &s, &csr);
        if (r < 0) {
                on_signed(r, "cannot make a key and CSR", NULL, c);
                return;
        }
        if (c->state == CRED_VALID)
                cred_set_state(c, CRED_ROTATING);
        else if (c->state == CRED_NONE)
                cred_set_state(c, CRED_REQUESTING);
        log_cred_full_errno(c, LOG_DEBUG, 0, "asking the %s signer", c->signer->ops->name);
        const struct signer_request req = {
                .profile = c->profile,
                .csr = csr,
                .key = c->pending_key,
                .subject = &s,
                .usage = c->usage,
                .lifetime = c->lifetime,
                /* Renew with what we hold while it is valid; the bootstrap secret only for the
                 * first certificate or after an expiry. */
                .client_cert_file = !cred_usable(c) ? NULL : c->version_cert_file ? c->version_cert_file : c->cert_file,
                .client_key_file = !cred_usable(c) ? NULL : c->version_key_file ? c->version_key_file : c->key_file,
        };
        c->in_flight = true;
        r = signer_sign(c->signer, &req, on_signed, c);
        if (r < 0 && c->in_flight)
                on_signed(r, "cannot send the request", NULL, c);
}

/* ---- start: reuse what is on disk if it is sound ---- */

static int load(struct cred *c, const char **ret_reason) {
        _cleanup_free_ char *cert_pem = NULL, *ca_pem = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        _cleanup_(x509_chain_freep) STACK_OF(X509) *chain = NULL, *roots = NULL;
        char *key_pem = NULL;
        size_t kn, cn, an;
        int r;

        r = fs_read_file_full(c->key_file, KEY_MAX, &key_pem, &kn);
        if (r == -ENOENT)
                return (*ret_reason = "none on disk"), r;
        if (r < 0)
                return (*ret_reason = "cannot read key.pem"), r;
        r = x509_key_from_pem(key_pem, kn, &key);
        x509_free_secret(key_pem);
        if (r < 0)
                return (*ret_reason = "key.pem does not parse"), r;
        r = fs_read_file_full(c->cert_file, CERT_MAX, &cert_pem, &cn);
        if (r < 0)
                return (*ret_reason = "cannot read cert.pem"), r;
        r = x509_chain_from_pem(cert_pem, cn, &chain);
        if (r < 0)
                return (*ret_reason = "cert.pem does not parse"), r;
        r = fs_read_file_full(c->ca_file, CERT_MAX, &ca_pem, &an);
        if (r >= 0)
                r = x509_chain_from_pem(ca_pem, an, &roots);
        if (r < 0)
                return (*ret_reason = "ca.pem is missing or does not parse"), r;
        /* The signer's anchors win when it has them (an operator may have replaced the CA). */
        if (c->signer->roots) {
                sk_X509_pop_free(roots, X509_free);
                roots = sk_X509_deep_copy(c->signer->roots, X509_dup, X509_free);
                if (!roots)
                        return -ENOMEM;
        }
        struct cert_info info = {};
        r = check_material(c, key, chain, roots, 0, &info, ret_reason);
        if (r < 0)
                return r;
        c->key = TAKE_PTR(key);
        c->chain = TAKE_PTR(chain);
        c->roots = TAKE_PTR(roots);
        c->info = info;
        pin_version(c);
        return 0;
}

/* The published version's format: STATE_VERSION_ERR_NEWER (logged) if a newer release wrote it;
 * anything unreadable is left to load() to judge. */
static int check_format(struct cred *c) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        unsigned version = 0;

        if (asprintf(&path, "%s/%s/%s", c->dir, ATOMIC_DIR_DATA, CRED_FORMAT_FILE) < 0)
                return -ENOMEM;
        if (fs_read_file_full(path, 64, &text, NULL) < 0)
                return 0;
        if (state_version_text(text, CRED_FORMAT_VERSION, &version, NULL) != STATE_VERSION_ERR_NEWER)
                return 0;
        _cleanup_free_ char *why = state_version_describe(path, version, CRED_FORMAT_VERSION);
        log_cred_full_errno(c, LOG_ERR, 0, "%s", why ? why : "a newer release's credential");
        return STATE_VERSION_ERR_NEWER;
}

int cred_start(struct cred *c) {
        const char *reason = NULL;
        /* Before anything touches the directory: a newer release's pair stays as it is. */
        int r = check_format(c);
        if (r < 0)
                return r;
        /* What a kill during a rotation left (an unfinished version with a key in it, a stale
         * ..data_tmp) goes now: a reused pair writes nothing until its renewal, hours away. */
        r = atomic_dir_cleanup(c->dir);
        if (r > 0)
                log_cred_full_errno(c, LOG_INFO, 0, "removed %d leftover(s) of an interrupted write in %s", r, c->dir);
        r = load(c, &reason);
        if (r >= 0) {
                plan_rotation(c, 0);
                char until[64] = "";
                (void) json_format_rfc3339(c->info.not_after, until, sizeof(until));
                log_cred_full_errno(c, LOG_INFO, 0, "reusing serial %s from %s, valid until %s", c->info.serial, c->dir, until);
                cred_set_state(c, CRED_VALID);
                c->on_event(c, CRED_EVENT_ISSUED, c->userdata);
                if (c->rotate_at <= now_usec(CLOCK_REALTIME))
                        c->next_attempt = now_usec(CLOCK_REALTIME);
                schedule(c);
                return 0;
        }
        if (r == -ENOENT)
                log_cred_full_errno(c, LOG_INFO, 0, "none in %s yet, requesting one", c->dir);
        else
                log_cred_full_errno(c, LOG_WARNING, 0, "ignoring the one in %s: %s; requesting a new one", c->dir, reason);
        clear_material(c);
        request(c);
        schedule(c);
        return 0;
}

int cred_status(const struct cred *c, cJSON *o) {
        if (!cJSON_AddStringToObject(o, "state", cred_state_to_string(c->state)) ||
            !json_add_string_or_null(o, "lastError", c->last_error) ||
            !cJSON_AddNumberToObject(o, "issued", c->n_issued) || !cJSON_AddNumberToObject(o, "rotated", c->n_rotated) ||
            !cJSON_AddNumberToObject(o, "failed", c->n_failed) || !cJSON_AddStringToObject(o, "certFile", c->cert_file) ||
            !cJSON_AddStringToObject(o, "keyFile", c->key_file))
                return -ENOMEM;
        if (!c->chain)
                return 0;
        cJSON *sans = cJSON_AddArrayToObject(o, "sans");
        if (!sans || !cJSON_AddStringToObject(o, "subject", c->info.subject) ||
            !cJSON_AddStringToObject(o, "serial", c->info.serial) || !json_add_time(o, "notBefore", c->info.not_before) ||
            !json_add_time(o, "notAfter", c->info.not_after) || !json_add_time(o, "rotateAt", c->rotate_at))
                return -ENOMEM;
        STRV_FOREACH(s, c->info.sans)
                if (!cJSON_AddItemToArray(sans, cJSON_CreateString(*s)))
                        return -ENOMEM;
        return 0;
}
