/* SPDX-License-Identifier: MIT */
#pragma once

/* The identity module's shared state: the settings (identity.c), the node credentials
 * (cred.c), the workload certificates (workload.c) and the API routes (identity-api.c). */

#include <stdbool.h>

#include "api.h"
#include "ca.h"
#include "cred.h"
#include "facts.h"
#include "jwt.h"
#include "kube-endpoint.h"
#include "manager.h"
#include "metrics.h"
#include "signer.h"
#include "waitq.h"

#define IDENTITY_ANNOTATION "pinion.io/identity"

struct identity;
struct identity_settings;
struct workload_api;

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
        sd_event_source *timer;
        sd_event_source *expiry_timer; /* at notAfter: the gate closes, listeners are told */
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
        struct api_routes *routes;
        struct metrics_registration *metrics_reg; /* the families below and the collector */
        bool published, gate_added, observing, running, issuer_owned;

        struct workload **workloads;
        size_t n_workloads;
        struct workload *queue_head, *queue_tail;
        sd_event_source *defer;
        sd_event_source *sweep_timer; /* the one pod-tls-dir sweep, once the pod store is complete */
        struct waitq *waiters; /* /v1/identity?wait= long-polls, keyed by pod uid */
        struct workload_api *wapi; /* the SPIFFE Workload API server (workload-api.c); NULL: none */
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

/* identity.c */
/* The trust bundle pods get, from roots (kept if roots is NULL). */
void identity_set_bundle(struct identity *id, STACK_OF(X509) *roots);
/* A credential of this node kept under state-dir/identity/name, named cn_prefix + the node's
 * name, with the node certificate's lifetime. */
int identity_new_cred(struct identity *id, const char *name, const char *profile, enum cert_usage usage,
                      const char *cn_prefix, const char *org, struct cred **ret);

/* workload.c */
void workloads_on_pod(struct pod_store *s, const struct pod *old, const struct pod *new, void *userdata);
int workloads_gate(const struct pod *p, void *userdata, char **ret_reason);
struct workload *workload_find(struct identity *id, const char *uid);
/* The issuer changed: queue every pod that still needs a certificate. */
void workloads_issuer_changed(struct identity *id);
void workloads_free_all(struct identity *id);
/* Removes pod-tls-dir/<uid>/ of pods that are not workloads (deleted while the agent was down).
 * Only once the pod store is complete. */
int workloads_sweep_tls_dir(struct identity *id, unsigned *ret_removed);
usec_t workloads_nearest_expiry(struct identity *id);
int workload_status(const struct workload *w, cJSON *o);
/* Makes the service workloads those of the agent's [service.NAME] sections: new ones queued,
 * changed ones reissued, gone ones (and their files) removed. At start and on reload. */
void workloads_sync_services(struct identity *id);
/* The workload of the configured service for unit, or NULL. */
struct workload *workload_find_unit(struct identity *id, const char *unit);

/* jwt-keys.c */
/* (Re)loads the JWT keys from the settings' files; a failure keeps the previous set and is
 * recorded in id->jwt_error. Negative only for out of memory. */
int identity_jwt_load(struct identity *id);
/* Loads and starts watching the files. */
int identity_jwt_start(struct identity *id);
void identity_jwt_stop(struct identity *id);
/* Why no JWT-SVID can be minted or validated here, or NULL. */
const char *identity_jwt_unavailable(const struct identity *id);
int identity_jwt_status(const struct identity *id, cJSON *o);

/* jwt-api.c: the JWT-SVID routes (registered by identity_api_register) */
int identity_handle_jwt(struct api_request *req, void *userdata);
int identity_handle_jwt_bundle(struct api_request *req, void *userdata);
int identity_handle_jwt_validate(struct api_request *req, void *userdata);

/* identity-api.c */
/* Adds /v1/identity and /v1/identity/bundle once; stop() frees them (id->routes). */
int identity_api_register(struct identity *id);
/* The workload of pod "NAMESPACE/NAME": -EINVAL if not that shape, -ENOENT if no such pod has
 * an identity here. */
int identity_find_pod(struct identity *id, const char *ns_name, struct workload **ret);
struct caller;
/* The workload a caller is answered for itself: its pod's (CALLER_POD) or its service's
 * (CALLER_SERVICE). 0: *ret set. -ENOENT: that pod or service has no identity. -EPERM: the
 * caller is neither (host, socket-group, outsider). */
int identity_caller_workload(struct identity *id, const struct caller *c, struct workload **ret);
/* The queue of /v1/identity?wait= long-polls, woken (waitq_wake) with a pod's uid when its
 * certificate changes or the pod goes away. */
int identity_waiters_new(struct identity *id);

/* workload-api.c */
/* Serves the Workload API on [identity] workload-socket (not listening is logged, not fatal). */
int workload_api_start(struct identity *id);
void workload_api_stop(struct identity *id);
/* A workload's certificate changed or the workload went (uid: a pod's UID or "service:NAME"):
 * long-polls and Workload API streams hear it. */
void identity_workload_changed(struct identity *id, const char *uid);
/* The trust bundle changed: every Workload API stream gets it. */
void workload_api_bundle_changed(struct identity *id);
/* The JWT keys changed (identity_jwt_load()): FetchJWTBundles streams get the new JWKS. */
void workload_api_jwt_bundle_changed(struct identity *id);
