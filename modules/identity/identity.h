/* SPDX-License-Identifier: MIT */
#pragma once

/* The identity module's shared state: the settings (identity.c), the node credentials
 * (cred.c), the workload certificates (workload.c) and the API routes (identity-api.c). */

#include <stdbool.h>

#include "api.h"
#include "ca.h"
#include "cred.h"
#include "facts.h"
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
};

struct workload {
        struct identity *id;
        char *uid, *ns, *name, *sa, *ip;
        char *spiffe;
        char *key_pem;   /* private: only ever to the pod itself (and its pod-tls-dir) */
        char *chain_pem;
        struct cert_info info;
        usec_t rotate_at;
        unsigned generation; /* bumps with every new certificate */
        bool queued, rotation;
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

/* identity-api.c */
/* Adds /v1/identity and /v1/identity/bundle once; stop() frees them (id->routes). */
int identity_api_register(struct identity *id);
/* The queue of /v1/identity?wait= long-polls, woken (waitq_wake) with a pod's uid when its
 * certificate changes or the pod goes away. */
int identity_waiters_new(struct identity *id);

/* workload-api.c */
/* Serves the Workload API on [identity] workload-socket (not listening is logged, not fatal). */
int workload_api_start(struct identity *id);
void workload_api_stop(struct identity *id);
/* A pod's certificate changed or the pod went: long-polls and Workload API streams hear it. */
void identity_workload_changed(struct identity *id, const char *pod_uid);
/* The trust bundle changed: every Workload API stream gets it. */
void workload_api_bundle_changed(struct identity *id);
