/* SPDX-License-Identifier: MIT */
#pragma once

/* A node credential: a key and certificate the node holds for itself, kept under state-dir and
 * renewed through a signer. The node's client certificate is one; under the cfssl signer the
 * node CA that signs workload certificates is another.
 *
 * State machine (cred_set_state logs every transition):
 *   NONE ──start──▶ (valid on disk) VALID | (else) REQUESTING
 *   REQUESTING ──signed──▶ VALID          failure: retry with backoff, stays REQUESTING
 *   VALID ──rotation point (jittered 70–90% of the lifetime)──▶ ROTATING
 *   ROTATING ──signed──▶ VALID            failure: backoff, the old certificate keeps serving
 *   VALID/ROTATING ──notAfter passes──▶ EXPIRED (still renewing with backoff) ──signed──▶ VALID
 *
 * On disk: <dir>/..data -> ..<version>/{key.pem (0600), cert.pem, ca.pem, format ("v1")}
 * (atomic-dir.h; the format is checked at start: a newer one is refused, untouched), so a
 * kill at any instant leaves the old pair or the new pair. A new certificate is written first
 * and only then switched to in memory: there is never a moment without a valid one. A key or
 * certificate that does not parse, does not match, does not verify against the trust anchors or
 * names another subject is never used: it is replaced. */

#include <stdbool.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "backoff.h"
#include "signer.h"

enum cred_state {
        CRED_NONE,
        CRED_REQUESTING,
        CRED_VALID,
        CRED_ROTATING,
        CRED_EXPIRED,
        _CRED_STATE_MAX,
};

enum cred_event {
        CRED_EVENT_ISSUED,  /* first certificate (also after an expiry) */
        CRED_EVENT_ROTATED, /* replaced a valid one */
        CRED_EVENT_FAILED,  /* a signing attempt failed */
        CRED_EVENT_STATE,   /* state changed */
};

struct cred;
typedef void (*cred_event_fn)(struct cred *c, enum cred_event ev, void *userdata);

struct cred_config {
        const char *name;    /* "node", "node-ca": for logs and the directory name */
        const char *dir;     /* the atomic directory, e.g. <state-dir>/identity/node */
        const char *profile; /* signer profile: "node" or "intermediate" */
        enum cert_usage usage;
        struct cert_subject subject;
        usec_t lifetime;
        struct backoff_config backoff;
};

struct clock_watch;

struct cred {
        char *name, *dir, *profile, *cn, *org;
        char *key_file, *cert_file, *ca_file; /* stable paths through ..data */
        /* key.pem and cert.pem inside the current version directory (..data resolved once):
         * two opens of these can never straddle a rotation and get a mismatched pair. The
         * previous version is kept until the next rotation, so a reader holding these paths has
         * a whole rotation period to pick up the new ones. */
        char *version_key_file, *version_cert_file;
        enum cert_usage usage;
        usec_t lifetime;
        sd_event *event;
        struct signer *signer;

        enum cred_state state;
        EVP_PKEY *key;
        STACK_OF(X509) *chain;
        STACK_OF(X509) *roots; /* what the chain was verified against (written as ca.pem) */
        struct cert_info info;
        usec_t rotate_at;      /* CLOCK_REALTIME */

        bool in_flight;
        usec_t step_grace_until; /* CLOCK_MONOTONIC: expired by a clock step, renewal under way */
        struct clock_watch *clock; /* the module's (not owned): a step is handled before an expiry */
        EVP_PKEY *pending_key;
        usec_t next_attempt;   /* CLOCK_REALTIME; 0 = none planned */
        char *last_error;
        int write_error;       /* the last attempt's write error (ENOSPC: the disk is full); 0: none */
        struct backoff backoff;
        sd_event_source *timer;
        unsigned n_issued, n_rotated, n_failed;

        cred_event_fn on_event;
        void *userdata;
};

/* Creates version_dir/name (which must not exist) with data and mode, the creator's, with
 * reader (unless (uid_t) -1) granted mode's group bits (fs-acl.h); no fsync of its own:
 * atomic_dir_commit() fsyncs the whole version before publishing it. */
int cred_write_version_file(const char *version_dir, const char *name, const char *data, mode_t mode, uid_t reader);

int cred_new(sd_event *e, struct signer *signer, const struct cred_config *cfg, cred_event_fn on_event, void *userdata,
             struct cred **ret);
struct cred *cred_free(struct cred *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct cred *, cred_free);

/* Loads what is on disk (reusing a valid certificate) or asks the signer for one. */
int cred_start(struct cred *c);
/* How long a certificate that a forward step of the clock expired counts as valid while its
 * renewal runs (cred_clock_stepped(), identity-clock.c). */
#define IDENTITY_STEP_GRACE (30 * USEC_PER_SEC)
/* The wall clock moved by delta (usec, negative: back): a renewal at once if the certificate is
 * due or not yet valid (x509_clock_verdict()), retries keep their wait. 1 if it renews. */
int cred_clock_stepped(struct cred *c, int64_t delta);
/* Fills a status object: state, subject, serial, SANs, notBefore/notAfter, rotateAt, lastError. */
int cred_status(const struct cred *c, cJSON *o);
