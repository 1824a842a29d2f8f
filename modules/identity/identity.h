/* SPDX-License-Identifier: MIT */
#pragma once

/* The identity module's model: the settings (identity.c), the node credentials (cred.c), the
 * workload certificates (workload.c, workload-service.c) and the JWT keys (jwt-keys.c). Its views
 * (the HTTP routes of identity-api.c and jwt-api.c, the Workload API of workload-api.c) observe
 * it through identity_add_observer() and are started and stopped by identity-views.c: no model
 * file calls a view. */

#include <stdbool.h>

#include "ca.h"
#include "cred.h"
#include "facts.h"
#include "jwt.h"
#include "kube-endpoint.h"
#include "manager.h"
#include "metrics.h"
#include "observer-list.h"
#include "signer.h"

#define IDENTITY_ANNOTATION "pinion.io/identity"

struct caller;
struct identity;
struct identity_settings;
struct identity_views;
struct clock_watch;

/* A kind of signer, as [identity] signer= names it (signer-kind.c). make() and issuer() return
 * 0, or a negative errno: with *ret_error the module fails with that reason and the daemon
 * carries on; without one (out of memory) the start fails. */
struct signer_kind {
        const char *name;
        /* What the settings (and the apiserver they would use) lack for this kind, or NULL. */
        const char *(*missing)(const struct identity_settings *s, const struct kube_endpoint *kube);
        /* Makes id->signer. */
        int (*make)(struct identity *id, char **ret_error);
        /* Once the node credential exists: the issuer of workload certificates (id->issuer and
         * the bundle, a credential that will become one, or id->issuer_reason saying why none). */
        int (*issuer)(struct identity *id, char **ret_error);
        /* Non-NULL: the node certificate waits for someone else's approval, and the module counts
         * as synced meanwhile with this as its reason. */
        const char *awaits_approval;
        /* Signs through the apiserver: a new [apiserver] url or ca-file needs a restart. */
        bool uses_apiserver;
};
const struct signer_kind *signer_kind_from_name(const char *name);
/* The i-th signer name, then "" (no signer), then NULL: [identity] signer's choices. */
const char *signer_kind_name_at(size_t i);

struct identity_settings {
        const struct signer_kind *signer; /* NULL: none */
        char *trust_domain;
        char *ca_dir;
        char *bootstrap_token_file;
        char *cfssl_url;
        char *cfssl_auth_key_file;
        char *cfssl_ca_file;
        usec_t node_cert_lifetime;
        usec_t workload_cert_lifetime;
        char *pod_tls_dir;
        char *workload_socket; /* NULL: beside the API socket; "": no Workload API */
        char *jwt_key_file;    /* the trust domain's JWT signing key (P-256 PEM), shared by its nodes */
        char *jwt_bundle_file; /* public keys accepted besides it (JWKS or PEM) */
        usec_t jwt_svid_lifetime;
};

/* What a key file was when last read: a change of any of these reloads the JWT keys. */
struct jwt_file_stamp {
        bool exists;
        dev_t dev;
        ino_t ino;
        off_t size;
        uint64_t mtime_nsec, ctime_nsec;
};

struct workload {
        struct identity *id;
        /* A pod's: uid is the pod's. A systemd service's ([service.NAME]): uid is
         * "service:NAME", name the unit, and its files go to tls_dir, owned by user. */
        char *uid, *ns, *name, *sa, *ip;
        uint64_t uid_hash; /* string_hash() of uid, for workload_find() */
        bool service;
        char *tls_dir, *user;
        char **dns_names;
        char *spiffe;
        char *key_pem;   /* private: only ever to the pod itself (and its pod-tls-dir) */
        char *chain_pem;
        struct cert_info info;
        usec_t rotate_at;
        unsigned generation; /* bumps with every new certificate */
        unsigned ticket;     /* of its last request to the issue worker: only that one counts */
        bool queued, rotation;
        bool new_dir; /* its files go to a directory not written yet (first issue, new tls-dir) */
        char *last_error;
        char *announced_failure; /* the IdentityFailed note said last (workload-events.c) */
        /* One timer per workload, at the earlier of two points (0: none): rotate_due, its
         * rotation or the retry of one, and expire_due, its notAfter (the gate closes, listeners
         * are told) or the end of a clock step's grace. One, not two: with many pods each
         * source is a few hundred bytes. */
        sd_event_source *timer;
        usec_t rotate_due, expire_due;
        /* Its files could not be written (workload-files.c): what is on disk stays, and they are
         * written again from memory on write_timer until it works. */
        int write_error;     /* this attempt's; 0: written */
        bool write_failing;  /* since an earlier attempt */
        sd_event_source *write_timer;
        usec_t step_grace_until; /* CLOCK_MONOTONIC: expired by a clock step, renewal under way */
        struct workload *queue_next;
};

struct identity {
        struct module_instance *mi;
        struct manager *manager;
        struct identity_settings *settings;

        struct signer *signer;
        struct cred *node;    /* the node's client certificate */
        struct cred *node_ca; /* cfssl: the node CA that signs workload certificates */
        struct ca *issuer;    /* signs workload certificates in process (NULL: not yet) */
        char *bundle_pem;     /* the trust bundle pods get */
        char *issuer_reason;  /* why there is no issuer */
        struct node_credentials creds;
        struct kube_endpoint kube; /* the apiserver, from [apiserver] or the in-cluster environment */
        struct metrics_registration *metrics_reg; /* the families below and the collector */
        bool published, gate_added, observing, running, issuer_owned;

        struct workload **workloads;
        size_t n_workloads;
        struct workload *queue_head, *queue_tail;
        sd_event_source *defer;
        sd_event_source *sweep_timer; /* the one pod-tls-dir sweep, once the pod store is complete */
        struct clock_watch *clock;    /* steps of the wall clock (identity-clock.c) */
        struct identity_views *views; /* owned by identity-views.c; the model never looks inside */
        struct observer_list observers; /* identity_add_observer() */
        struct backoff jitter; /* random source for rotation points */
        EVP_PKEY_CTX *keygen;  /* P-256 key generator, reused for every workload */
        struct issue_worker *worker; /* makes the workloads' keys and certificates (issue-worker.c) */
        unsigned issuer_generation;  /* bumps with every new issuer: older results are stale */
        unsigned last_ticket;        /* tickets are unique across workloads: a pod removed and
                                      * added again never takes its former self's result (nor
                                      * its staged directory, which the ticket names) */

        /* JWT-SVIDs (jwt-keys.c): the key set (NULL: none configured or none loaded yet), why the
         * last load failed, and a generation that bumps with every new set (a JWKS stream's cue). */
        struct jwt_keyset *jwt;
        char *jwt_error;
        unsigned jwt_generation;
        struct jwt_file_stamp jwt_key_stamp, jwt_bundle_stamp;
        sd_event_source *jwt_poll;

        struct metric_family *m_issued, *m_rotated, *m_failed, *m_expiry, *m_workloads;
};

/* What changed in the model, for the views that observe it (identity_add_observer()). */
enum identity_change {
        /* The workload uid (a pod's UID or "service:NAME"): its certificate was issued, rotated or
         * expired, or the workload went (workload_find() no longer finds it). */
        IDENTITY_CHANGE_WORKLOAD,
        /* The trust bundle pods get (id->bundle_pem); uid is NULL. */
        IDENTITY_CHANGE_BUNDLE,
        /* The JWT key set (id->jwt, id->jwt_generation) was loaded anew; uid is NULL. */
        IDENTITY_CHANGE_JWT_KEYS,
};

/* Called after the change, with the model in its new state; uid is valid during the call only.
 * An observer may add and remove observers from inside the call (one added there hears only
 * later changes, one removed there hears nothing more), and may change the model: a change it
 * announces is delivered to every observer at once, before the outer announcement goes on to
 * the next observer. It must not free the identity. */
typedef void (*identity_observer_fn)(struct identity *id, enum identity_change change, const char *uid,
                                     void *userdata);

/* identity.c */
/* Observers hear changes in the order they were added. -EEXIST if the fn/userdata pair is
 * already there. A view adds itself when it starts and removes itself when it stops. */
int identity_add_observer(struct identity *id, identity_observer_fn fn, void *userdata);
void identity_remove_observer(struct identity *id, identity_observer_fn fn, void *userdata);
/* Tells every observer; what the model calls after each change it makes (never a view). */
void identity_announce(struct identity *id, enum identity_change change, const char *uid);
/* The trust bundle pods get, from roots (kept if roots is NULL). */
void identity_set_bundle(struct identity *id, STACK_OF(X509) *roots);
/* The reason label of pinion_identity_failures_total: a write error's (enospc, write), else
 * expired or issue. */
const char *identity_failure_reason(int write_error, bool expired);
/* A credential of this node kept under state-dir/identity/name, named cn_prefix + the node's
 * name, with the node certificate's lifetime. */
int identity_new_cred(struct identity *id, const char *name, const char *profile, enum cert_usage usage,
                      const char *cn_prefix, const char *org, struct cred **ret);
/* The workload of pod "NAMESPACE/NAME": -EINVAL if not that shape, -ENOENT if no such pod has
 * an identity here. */
int identity_find_pod(struct identity *id, const char *ns_name, struct workload **ret);
/* The workload a caller is answered for itself: its pod's (CALLER_POD) or its service's
 * (CALLER_SERVICE). 0: *ret set. -ENOENT: that pod or service has no identity. -EPERM: the
 * caller is neither (host, socket-group, outsider). */
int identity_caller_workload(struct identity *id, const struct caller *c, struct workload **ret);

/* identity-clock.c */
int identity_clock_start(struct identity *id);
void identity_clock_stop(struct identity *id);
/* Handles a step not yet reported (see clock_watch_check()); true if there was one. */
bool identity_clock_check(struct identity *id);

/* workload.c */
void workload_on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata);
int workload_gate(const struct pod *p, void *userdata, char **ret_reason);
struct workload *workload_find(struct identity *id, const char *uid);
/* The issuer changed: queue every pod that still needs a certificate. */
void workload_issuer_changed(struct identity *id);
void workload_free_all(struct identity *id);
/* Removes pod-tls-dir/<uid>/ of pods that are not workloads (deleted while the agent was down).
 * Only once the pod store is complete. */
int workload_sweep_tls_dir(struct identity *id, unsigned *ret_removed);
usec_t workload_nearest_expiry(struct identity *id);
int workload_status(const struct workload *w, cJSON *o);

/* workload-service.c */
/* Makes the service workloads those of the agent's [service.NAME] sections: new ones queued,
 * changed ones reissued, gone ones (and their files) removed. At start and on reload. */
void workload_service_sync_all(struct identity *id);
/* The workload of the configured service for unit, or NULL. */
struct workload *workload_service_find(struct identity *id, const char *unit);

/* jwt-keys.c */
/* Loads the JWT keys from the settings' files and starts watching them; again on reload (a
 * failed load keeps the previous set and is recorded in id->jwt_error). Negative only for out
 * of memory or no timer. */
int jwt_keys_start(struct identity *id);
void jwt_keys_stop(struct identity *id);
/* Why no JWT-SVID can be minted or validated here, or NULL. */
const char *jwt_keys_unavailable(const struct identity *id);
int jwt_keys_status(const struct identity *id, cJSON *o);
/* Whether w may get a JWT-SVID now: 0; -ENOKEY with *ret_reason if this node cannot mint
 * (no keys, or no signing key); -ENOENT if w has no valid SPIFFE ID (yet). */
int jwt_keys_can_mint(const struct identity *id, const struct workload *w, const char **ret_reason);
/* A JWT-SVID for w for the NULL-terminated audiences, valid for jwt-svid-lifetime from now;
 * jwt_mint()'s errors (-EINVAL: an audience it refuses). */
int jwt_keys_mint(const struct identity *id, const struct workload *w, char *const *audiences, char **ret_token,
                  usec_t *ret_expires_at);
/* Validates token for audience now against the keys: -ENOKEY with *ret_reason when there are
 * none; else jwt_validate()'s result. */
int jwt_keys_validate(const struct identity *id, const char *token, const char *audience, char **ret_spiffe_id,
                      cJSON **ret_claims, const char **ret_reason);
