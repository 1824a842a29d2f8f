/* SPDX-License-Identifier: MIT */
/* identity: bootstraps the node certificate through a signer (the embedded CA or a CFSSL
 * server), then issues and rotates a certificate per pod that asks for one, and hands each only
 * to its own pod. This file holds the config, the module contract, the model's observers and
 * the wiring between the node credentials (cred.c), the workload certificates (workload.c) and
 * the views (identity-views.c). */

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caller.h"
#include "caps.h"
#include "config.h"
#include "facts.h"
#include "fs.h"
#include "identity-views.h"
#include "issue-worker.h"
#include "json.h"
#include "kube-endpoint.h"
#include "log.h"
#include "module.h"
#include "socket-trust.h"

#define MODULE "identity"

/* v is one of signer_kind_name_at's (the key's choices); "" is no signer. */
static int parse_signer(const char *v, void *ret, const char **reason) {
        *(const struct signer_kind **) ret = signer_kind_from_name(v);
        return 0;
}

/* cfssl-url: https, or plain http only to a loopback address (a cfssl on the same machine):
 * anything else would send the node's CSRs and take its certificates over a network in clear. */
static int parse_cfssl_url(const char *v, void *ret, const char **reason) {
        if (!signer_url_ok(v)) {
                *reason = "plain http:// only to a loopback address (127.0.0.0/8, [::1], localhost); "
                          "use https:// for a remote cfssl";
                return -EINVAL;
        }
        return config_parse_url(v, ret, reason);
}

/* workload-socket: a path, or empty for no Workload API (unset: beside the API socket). */
static int parse_workload_socket(const char *v, void *ret, const char **reason) {
        if (isempty(v)) {
                *(char **) ret = strdup("");
                return *(char **) ret ? 0 : -ENOMEM;
        }
        return config_parse_path(v, ret, reason);
}

#define FIELD(f) offsetof(struct identity_settings, f)
static const struct config_key identity_keys[] = {
        { "signer", parse_signer, FIELD(signer), "", NULL, signer_kind_name_at },
        { "trust-domain", config_parse_string, FIELD(trust_domain), NULL, config_free_string },
        { "ca-dir", config_parse_path, FIELD(ca_dir), NULL, config_free_string },
        { "bootstrap-token-file", config_parse_path, FIELD(bootstrap_token_file), NULL, config_free_string },
        { "cfssl-url", parse_cfssl_url, FIELD(cfssl_url), NULL, config_free_string },
        { "cfssl-auth-key-file", config_parse_file, FIELD(cfssl_auth_key_file), NULL, config_free_string,
          .names_file = true },
        { "cfssl-ca-file", config_parse_file, FIELD(cfssl_ca_file), NULL, config_free_string, .names_file = true },
        { "node-cert-lifetime", config_parse_duration, FIELD(node_cert_lifetime), "24h" },
        { "workload-cert-lifetime", config_parse_duration, FIELD(workload_cert_lifetime), "1h" },
        { "pod-tls-dir", config_parse_path, FIELD(pod_tls_dir), PINION_RUNTIME_DIR "/pods", config_free_string },
        { "jwt-key-file", config_parse_path, FIELD(jwt_key_file), NULL, config_free_string },
        { "jwt-bundle-file", config_parse_path, FIELD(jwt_bundle_file), NULL, config_free_string },
        { "jwt-svid-lifetime", config_parse_duration, FIELD(jwt_svid_lifetime), "5m" },
        { "workload-socket", parse_workload_socket, FIELD(workload_socket), NULL, config_free_string },
        {}
};
#undef FIELD

static struct identity_settings *identity_settings_free(struct identity_settings *s) {
        return config_object_free(identity_keys, s);
}

/* The apiserver the kubernetes signer talks to, found as the apiserver module finds it (read
 * from the config, not through that module: modules meet only through facts), with the
 * bootstrap token as its credential. No apiserver at all: an empty endpoint. */
static int identity_kube_endpoint(const struct config *c, const struct identity_settings *s, struct kube_endpoint *ret) {
        const char *reason = NULL;
        int r = kube_endpoint_from_config(c, s->bootstrap_token_file, ret, &reason);
        if (r == -ENOENT) {
                *ret = (struct kube_endpoint) {};
                return 0;
        }
        return r;
}

/* The settings, and the apiserver a signer would use. What a signer needs is checked here, so
 * a typo fails at load, not at 3 am. */
static int identity_parse(struct config *c, struct identity_settings **ret, struct kube_endpoint *ret_kube,
                          char **ret_error) {
        struct identity_settings *s = NULL;
        struct kube_endpoint kube = {};
        int r;

        r = config_parse_section_new(c, "identity", identity_keys, sizeof(*s), (void **) &s, ret_error);
        if (r < 0)
                return r;
        r = identity_kube_endpoint(c, s, &kube);
        if (r < 0) {
                identity_settings_free(s);
                return r;
        }
        const char *missing = s->signer && !s->trust_domain
                                      ? "a signer needs trust-domain (the SPIFFE trust domain, e.g. example.org)"
                              : s->signer ? s->signer->missing(s, &kube)
                                          : NULL;
        if (!missing && s->trust_domain && strspn(s->trust_domain, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(s->trust_domain))
                missing = "trust-domain must be a lowercase DNS name (letters, digits, '.', '-')";
        /* 10s is for tests and demos; fleets use hours. */
        if (!missing && (s->node_cert_lifetime < 10 * USEC_PER_SEC || s->workload_cert_lifetime < 10 * USEC_PER_SEC))
                missing = "certificate lifetimes must be at least 10s";
        /* JWT-SVIDs are bearer tokens: a stolen one works until it expires, so they stay short. */
        if (!missing && (s->jwt_svid_lifetime < 10 * USEC_PER_SEC || s->jwt_svid_lifetime > 24 * USEC_PER_HOUR))
                missing = "jwt-svid-lifetime must be between 10s and 24h";
        if (!missing && (s->jwt_key_file || s->jwt_bundle_file) && !s->trust_domain)
                missing = "jwt-key-file and jwt-bundle-file need trust-domain";
        if (missing) {
                kube_endpoint_done(&kube);
                identity_settings_free(s);
                return config_section_error(c, "identity", ret_error, "%s", missing);
        }
        *ret = s;
        *ret_kube = kube;
        return 0;
}

/* ---- observers ---- */

int identity_add_observer(struct identity *id, identity_observer_fn fn, void *userdata) {
        return observer_list_add(&id->observers, (observer_list_fn) fn, userdata, 0);
}

void identity_remove_observer(struct identity *id, identity_observer_fn fn, void *userdata) {
        observer_list_remove(&id->observers, (observer_list_fn) fn, userdata);
}

void identity_announce(struct identity *id, enum identity_change change, const char *uid) {
        /* Those added from inside a call hear only later changes. */
        for (size_t i = 0, n = observer_list_begin(&id->observers); i < n; i++) {
                struct observer_list_entry o;
                if (observer_list_get(&id->observers, i, &o))
                        ((identity_observer_fn) o.fn)(id, change, uid, o.userdata);
        }
        observer_list_end(&id->observers);
}

/* ---- state ---- */

static void update_state(struct identity *id) {
        struct module_instance *mi = id->mi;
        struct cred *n = id->node;
        char until[64] = "";

        if (!n)
                return;
        (void) json_format_rfc3339(n->info.not_after, until, sizeof(until));
        switch (n->state) {
        case CRED_NONE:
        case CRED_REQUESTING:
                if (n->n_failed > 0) {
                        module_set_state(mi, MODULE_DEGRADED, "cannot get the node certificate: %s", n->last_error);
                        module_set_synced(mi);
                } else if (id->settings->signer->awaits_approval) {
                        module_set_state(mi, MODULE_STARTING, "%s", id->settings->signer->awaits_approval);
                        module_set_synced(mi);
                } else
                        module_set_state(mi, MODULE_STARTING, NULL);
                return;
        case CRED_EXPIRED:
                module_set_state(mi, MODULE_FAILED, "the node certificate expired at %s; renewing: %s", until,
                                 n->last_error ? n->last_error : "in progress");
                module_set_synced(mi);
                return;
        case CRED_VALID:
        case CRED_ROTATING:
        case _CRED_STATE_MAX:
                break;
        }
        module_set_synced(mi);
        if (n->last_error)
                module_set_state(mi, MODULE_DEGRADED, "node certificate renewal failing (valid until %s): %s", until,
                                 n->last_error);
        else if (id->node_ca && id->node_ca->last_error)
                module_set_state(mi, MODULE_DEGRADED, "node CA for workload certificates: %s", id->node_ca->last_error);
        else if (!id->issuer && id->node_ca) /* (kubernetes without ca-dir has none by design) */
                module_set_state(mi, MODULE_DEGRADED, "no issuer for workload certificates: %s",
                                 id->issuer_reason ? id->issuer_reason : "not yet");
        else if (id->issuer && X509_cmp_current_time(X509_get0_notAfter(id->issuer->cert)) <= 0)
                module_set_state(mi, MODULE_DEGRADED, "the issuer of workload certificates (%s) has expired",
                                 id->node_ca ? "the node CA" : "the local CA");
        else
                module_set_state(mi, MODULE_RUNNING, NULL);
}

void identity_set_bundle(struct identity *id, STACK_OF(X509) *roots) {
        char *pem = NULL;
        if (roots && x509_chain_to_pem(roots, &pem) >= 0) {
                bool changed = !streq_ptr(pem, id->bundle_pem);

                free(id->bundle_pem);
                id->bundle_pem = pem;
                if (changed)
                        identity_announce(id, IDENTITY_CHANGE_BUNDLE, NULL);
        }
}

static void set_issuer(struct identity *id, struct ca *ca, bool owned, const char *reason) {
        if (id->issuer_owned)
                ca_free(id->issuer);
        id->issuer = ca;
        id->issuer_owned = owned;
        free(id->issuer_reason);
        id->issuer_reason = reason ? strdup(reason) : NULL;
        if (ca)
                workload_issuer_changed(id);
        pod_gates_changed(id->manager->pod_gates, NULL);
}

/* cfssl: the node CA's key and chain become the in-process issuer of workload certificates. */
static void node_ca_to_issuer(struct identity *id, struct cred *c) {
        struct ca *ca = NULL;
        STACK_OF(X509) *chain = sk_X509_deep_copy(c->chain, X509_dup, X509_free);
        STACK_OF(X509) *roots = sk_X509_deep_copy(c->roots, X509_dup, X509_free);
        if (!chain || !roots || EVP_PKEY_up_ref(c->key) != 1) {
                /* Nothing was handed over: free what was made. */
                if (chain)
                        sk_X509_pop_free(chain, X509_free);
                if (roots)
                        sk_X509_pop_free(roots, X509_free);
                log_module_error(MODULE, "out of memory switching to the new node CA");
                return;
        }
        if (ca_new(c->key, chain, roots, &ca) < 0) { /* ca_new frees its arguments on failure */
                log_module_error(MODULE, "out of memory switching to the new node CA");
                return;
        }
        identity_set_bundle(id, c->roots);
        set_issuer(id, ca, true, NULL);
}

static void on_cred_event(struct cred *c, enum cred_event ev, void *userdata) {
        struct identity *id = userdata;
        const char *kind = c == id->node ? "node" : "node-ca";

        switch (ev) {
        case CRED_EVENT_ISSUED:
        case CRED_EVENT_ROTATED:
                if (c->n_issued + c->n_rotated > 0)
                        (void) metric_inc(ev == CRED_EVENT_ISSUED ? id->m_issued : id->m_rotated, kind);
                if (c == id->node) {
                        /* The version directory's own files, not the ..data paths: the apiserver
                         * module hands curl the key and the certificate as two paths, and two
                         * opens through ..data could straddle a rotation. Picked up at its next
                         * lookup; the previous version stays on disk until the next rotation. */
                        id->creds.cert_file = c->version_cert_file ? c->version_cert_file : c->cert_file;
                        id->creds.key_file = c->version_key_file ? c->version_key_file : c->key_file;
                        if (!id->published && manager_publish(id->manager, FACT_NODE_CREDENTIALS, &id->creds) >= 0)
                                id->published = true;
                        if (!id->bundle_pem)
                                identity_set_bundle(id, c->roots);
                } else
                        node_ca_to_issuer(id, c);
                break;
        case CRED_EVENT_FAILED:
                (void) metric_inc(id->m_failed, kind, identity_failure_reason(c->write_error, false));
                break;
        case CRED_EVENT_STATE:
                break;
        }
        update_state(id);
}

const char *identity_failure_reason(int write_error, bool expired) {
        if (write_error == -ENOSPC || write_error == -EDQUOT)
                return "enospc";
        return write_error < 0 ? "write" : expired ? "expired" : "issue";
}

static void collect_identity(struct metrics *metrics, void *userdata) {
        struct identity *id = userdata;
        usec_t t = workload_nearest_expiry(id), now = now_usec(CLOCK_REALTIME);
        size_t issued = 0;

        if (id->node && id->node->chain)
                t = MIN(t, id->node->info.not_after);
        if (id->node_ca && id->node_ca->chain)
                t = MIN(t, id->node_ca->info.not_after);
        for (size_t i = 0; i < id->n_workloads; i++)
                issued += id->workloads[i]->chain_pem != NULL;
        metric_family_reset(id->m_expiry);
        if (t != USEC_INFINITY)
                (void) metric_set(id->m_expiry, ((double) t - (double) now) / USEC_PER_SEC);
        (void) metric_set(id->m_workloads, (double) issued);
}

static int register_metrics(struct identity *id) {
        static const char *const kind[] = { "kind", NULL };
        static const char *const kind_reason[] = { "kind", "reason", NULL };
        const struct metric_def families[] = {
                { METRIC_COUNTER, "pinion_identity_certificates_issued_total", "Certificates issued by kind (node, node-ca, workload), rotations not counted.", kind, NULL, 0, &id->m_issued },
                { METRIC_COUNTER, "pinion_identity_certificates_rotated_total", "Certificates replaced before they expired, by kind.", kind, NULL, 0, &id->m_rotated },
                { METRIC_COUNTER, "pinion_identity_failures_total", "Failed attempts to get, issue or write a certificate, by kind and reason: issue (the signer could not, or its answer was unusable), expired (notAfter passed without a renewal), enospc (its files could not be written: no space left), write (any other write error).", kind_reason, NULL, 0, &id->m_failed },
                { METRIC_GAUGE, "pinion_identity_next_expiry_seconds", "Seconds until the nearest certificate (node or workload) expires; negative once expired.", NULL, NULL, 0, &id->m_expiry },
                { METRIC_GAUGE, "pinion_identity_workload_certificates", "Pods holding a workload certificate.", NULL, NULL, 0, &id->m_workloads },
        };
        static const char *const kinds[] = { "node", "node-ca", "workload" };
        static const char *const reasons[] = { "issue", "expired", "enospc", "write" };
        int r;

        if (id->metrics_reg)
                return 0;
        r = metrics_register(id->manager->metrics, families, ELEMENTSOF(families), collect_identity, id,
                             &id->metrics_reg);
        if (r < 0)
                return r;
        /* Every kind and reason at zero from the start: a rate or an alert has a zero to begin from. */
        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                (void) metric_touch(id->m_issued, kinds[k]);
                (void) metric_touch(id->m_rotated, kinds[k]);
                for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
                        (void) metric_touch(id->m_failed, kinds[k], reasons[i]);
        }
        return 0;
}

/* ---- the module contract ---- */

static int identity_init(struct module_instance *mi, struct config *c, char **ret_error) {
        struct identity *id = calloc(1, sizeof(*id));
        if (!id)
                return -ENOMEM;
        int r = identity_parse(c, &id->settings, &id->kube, ret_error);
        if (r < 0) {
                free(id);
                return r;
        }
        id->mi = mi;
        id->manager = mi->manager;
        mi->data = id;
        return 0;
}

int identity_new_cred(struct identity *id, const char *name, const char *profile, enum cert_usage usage,
                      const char *cn_prefix, const char *org, struct cred **ret) {
        _cleanup_free_ char *base = fs_path_join(id->manager->settings.state_dir, "identity"), *dir = NULL, *cn = NULL;
        if (!base || !(dir = fs_path_join(base, name)) || asprintf(&cn, "%s%s", cn_prefix, id->manager->settings.node_name) < 0)
                return -ENOMEM;
        const struct cred_config cfg = {
                .name = name,
                .dir = dir,
                .profile = profile,
                .usage = usage,
                .subject = { .common_name = cn, .organization = org },
                .lifetime = id->settings->node_cert_lifetime,
                .backoff = {
                        .initial = USEC_PER_SEC,
                        .max = 2 * USEC_PER_MINUTE,
                        .factor = 2.0,
                        .jitter = 0.5,
                        .reset_after = 5 * USEC_PER_MINUTE,
                },
        };
        return cred_new(id->manager->event, id->signer, &cfg, on_cred_event, id, ret);
}

int identity_find_pod(struct identity *id, const char *ns_name, struct workload **ret) {
        const char *slash = strchr(ns_name, '/');
        if (!slash || slash == ns_name || !slash[1])
                return -EINVAL;
        _cleanup_free_ char *ns = strndup(ns_name, (size_t) (slash - ns_name));
        if (!ns)
                return -ENOMEM;
        struct pod *p = pod_store_find(id->manager->pods, ns, slash + 1);
        struct workload *w = p ? workload_find(id, p->uid) : NULL;
        if (!w)
                return -ENOENT;
        *ret = w;
        return 0;
}

int identity_caller_workload(struct identity *id, const struct caller *c, struct workload **ret) {
        struct workload *w;

        switch (c->kind) {
        case CALLER_POD:
                w = workload_find(id, c->pod_uid);
                break;
        case CALLER_SERVICE:
                w = workload_service_find(id, c->unit);
                break;
        default:
                return -EPERM;
        }
        if (!w)
                return -ENOENT;
        *ret = w;
        return 0;
}

/* The pod-tls-dir sweep waits for a complete pod store: the pods-dir is read before modules
 * start, and the apiserver module must have listed its pods (RUNNING; DEGRADED may mean it
 * never listed them, and sweeping then would take the files of running pods). */
static int on_sweep_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct identity *id = userdata;
        struct module_instance *api = manager_find_module(id->manager, "apiserver");
        if (api && api->state != MODULE_RUNNING && api->state != MODULE_DISABLED) {
                (void) sd_event_source_set_time_relative(s, USEC_PER_SEC);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }
        unsigned n = 0;
        int r = workload_sweep_tls_dir(id, &n);
        if (r < 0)
                log_module_warning_errno(MODULE, r, "cannot sweep %s: %m", id->settings->pod_tls_dir);
        if (n > 0)
                log_module_info(MODULE, "removed %u leftover pod directories from %s (pods gone while the agent was down)",
                                n, id->settings->pod_tls_dir);
        id->sweep_timer = sd_event_source_disable_unref(id->sweep_timer);
        return 0;
}

/* A step's failure: with a reason, the module fails and the daemon carries on; without one
 * (out of memory), the start fails. */
static int identity_failed(struct identity *id, int r, const char *reason) {
        if (!reason && r == -ENOMEM)
                return r;
        module_set_state(id->mi, MODULE_FAILED, "%s", reason ? reason : strerror(-r));
        module_set_synced(id->mi);
        return 0;
}

/* The node credential, requested through the signer. */
static int identity_make_node_cred(struct identity *id) {
        int r = identity_new_cred(id, "node", "node", CERT_USAGE_CLIENT, "system:node:", "system:nodes", &id->node);
        if (r < 0)
                return r;
        id->creds.cert_file = id->node->cert_file;
        id->creds.key_file = id->node->key_file;
        return 0;
}

/* Where the module meets the rest of the agent: the pod gate, the pod store, the views. */
static int identity_hook_up(struct identity *id) {
        struct manager *m = id->manager;
        int r;

        r = pod_gates_add(m->pod_gates, "identity", workload_gate, id);
        if (r < 0)
                return r;
        id->gate_added = true;
        r = pod_store_add_observer(m->pods, workload_on_pod, id);
        if (r < 0)
                return r;
        id->observing = true;
        return identity_views_start(id);
}

/* The pods already in the store, the pod-tls-dir sweep, the first node certificate. */
static int identity_begin(struct identity *id) {
        struct manager *m = id->manager;
        _cleanup_free_ struct pod **pods = NULL;
        size_t n = 0;
        int r;

        id->running = true;
        module_set_state(id->mi, MODULE_STARTING, NULL);
        if (pod_store_list(m->pods, &pods, &n) >= 0)
                for (size_t i = 0; i < n; i++)
                        workload_on_pod(m->pods, NULL, pods[i], id);
        workload_service_sync_all(id);
        workload_issuer_changed(id);
        if (!isempty(id->settings->pod_tls_dir) && !id->sweep_timer) {
                r = sd_event_add_time_relative(m->event, &id->sweep_timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC / 10,
                                               on_sweep_timer, id);
                if (r < 0)
                        log_module_warning_errno(MODULE, r, "cannot arm the pod-tls-dir sweep, skipping it: %m");
        }
        r = identity_clock_start(id);
        if (r < 0) /* certificates still renew on time, only not at once after a step */
                log_module_warning_errno(MODULE, r, "cannot watch the wall clock for steps: %m");
        id->node->clock = id->clock;
        if (id->node_ca)
                id->node_ca->clock = id->clock;
        r = cred_start(id->node);
        if (r >= 0 && id->node_ca)
                r = cred_start(id->node_ca);
        return r;
}

static int identity_start(struct module_instance *mi) {
        struct identity *id = mi->data;
        const struct signer_kind *kind = id->settings->signer;
        _cleanup_free_ char *error = NULL;
        int r;

        if (!kind) {
                module_set_state(mi, MODULE_DISABLED, "no [identity] signer configured");
                module_set_synced(mi);
                return 0;
        }
        r = kind->make(id, &error);
        if (r < 0)
                return identity_failed(id, r, error);
        backoff_init(&id->jitter, &BACKOFF_CONFIG_CLIENT_GO, 0);
        r = x509_keygen_new(&id->keygen);
        if (r < 0)
                return r;
        r = register_metrics(id); /* before the credentials: they count what they get */
        if (r < 0)
                return r;
        r = identity_make_node_cred(id);
        if (r < 0)
                return r;
        r = kind->issuer(id, &error);
        if (r < 0)
                return identity_failed(id, r, error);
        r = identity_hook_up(id);
        if (r < 0)
                return r;
        r = jwt_keys_start(id);
        if (r < 0)
                return r;
        return identity_begin(id);
}

static void identity_teardown(struct identity *id) {
        struct manager *m = id->manager;
        id->running = false;
        identity_views_stop(id);
        id->metrics_reg = metrics_registration_free(id->metrics_reg);
        if (id->published) {
                (void) manager_publish(m, FACT_NODE_CREDENTIALS, NULL);
                id->published = false;
        }
        if (id->gate_added) {
                pod_gates_remove(m->pod_gates, "identity");
                id->gate_added = false;
        }
        if (id->observing) {
                pod_store_remove_observer(m->pods, workload_on_pod, id);
                id->observing = false;
        }
        id->defer = sd_event_source_disable_unref(id->defer);
        id->worker = issue_worker_free(id->worker);
        id->sweep_timer = sd_event_source_disable_unref(id->sweep_timer);
        identity_clock_stop(id);
        workload_free_all(id);
        id->node = cred_free(id->node);
        id->node_ca = cred_free(id->node_ca);
        if (id->issuer_owned)
                ca_free(id->issuer);
        id->issuer = NULL;
        id->issuer_reason = mfree(id->issuer_reason);
        id->signer = signer_free(id->signer);
        EVP_PKEY_CTX_free(id->keygen);
        id->keygen = NULL;
        jwt_keys_stop(id);
}

static int identity_reload(struct module_instance *mi, struct config *c, char **ret_error) {
        struct identity *id = mi->data;
        struct identity_settings *s = NULL;
        _cleanup_(kube_endpoint_done) struct kube_endpoint kube = {};
        int r = identity_parse(c, &s, &kube, ret_error);
        if (r < 0)
                return r;
        struct identity_settings *o = id->settings;
        bool same = s->signer == o->signer && streq_ptr(s->trust_domain, o->trust_domain) &&
                    streq_ptr(s->ca_dir, o->ca_dir) && streq_ptr(s->cfssl_url, o->cfssl_url) &&
                    streq_ptr(s->cfssl_auth_key_file, o->cfssl_auth_key_file) &&
                    streq_ptr(s->cfssl_ca_file, o->cfssl_ca_file) &&
                    streq_ptr(s->bootstrap_token_file, o->bootstrap_token_file) && streq_ptr(s->pod_tls_dir, o->pod_tls_dir) &&
                    streq_ptr(s->workload_socket, o->workload_socket);
        if (!same && o->signer) {
                identity_settings_free(s);
                if (asprintf(ret_error, "[identity]: changing the signer, trust-domain, CA, pod-tls-dir or workload-socket needs a restart "
                                        "(only the lifetimes apply on reload)") < 0)
                        *ret_error = NULL;
                return -EBUSY;
        }
        if (o->signer && o->signer->uses_apiserver && !kube_endpoint_equal(&kube, &id->kube)) {
                identity_settings_free(s);
                if (asprintf(ret_error, "[identity]: a new apiserver url or ca-file for signer=kubernetes needs a restart") < 0)
                        *ret_error = NULL;
                return -EBUSY;
        }
        kube_endpoint_done(&id->kube);
        id->kube = kube;
        kube = (struct kube_endpoint) {};
        /* New lifetimes apply from the next certificate on. */
        if (id->node)
                id->node->lifetime = s->node_cert_lifetime;
        if (id->node_ca)
                id->node_ca->lifetime = s->node_cert_lifetime;
        id->settings = s;
        identity_settings_free(o);
        if (!same) /* was disabled: start now */
                return identity_start(mi);
        if (id->running) {
                workload_service_sync_all(id); /* the agent's [service.NAME] sections are the new ones by now */
                /* The JWT key files may have moved: read them again (a broken one keeps the old keys). */
                return jwt_keys_start(id);
        }
        return 0;
}

static int identity_stop(struct module_instance *mi) {
        identity_teardown(mi->data);
        return 0;
}

static int identity_status(struct module_instance *mi, cJSON *obj) {
        struct identity *id = mi->data;
        struct identity_settings *s = id->settings;
        if (s->trust_domain && !cJSON_AddStringToObject(obj, "trustDomain", s->trust_domain))
                return -ENOMEM;
        if (!id->node)
                return 0;
        cJSON *node = cJSON_AddObjectToObject(obj, "node");
        if (!node || cred_status(id->node, node) < 0 || !cJSON_AddStringToObject(obj, "signer", id->signer->ops->name))
                return -ENOMEM;
        size_t issued = 0;
        for (size_t i = 0; i < id->n_workloads; i++)
                issued += id->workloads[i]->chain_pem != NULL;
        if (!cJSON_AddNumberToObject(obj, "workloads", (double) id->n_workloads) ||
            !cJSON_AddNumberToObject(obj, "workloadsIssued", (double) issued))
                return -ENOMEM;
        return jwt_keys_status(id, obj);
}

static void identity_free(struct module_instance *mi) {
        struct identity *id = mi->data;
        if (!id)
                return;
        identity_teardown(id);
        observer_list_done(&id->observers); /* every view removed itself in the teardown */
        free(id->bundle_pem);
        free(id->issuer_reason);
        kube_endpoint_done(&id->kube);
        identity_settings_free(id->settings);
        free(id);
        mi->data = NULL;
}

/* The routes identity-api.c and jwt-api.c register, for the core to answer while they are not
 * served. */
static const struct module_route identity_routes[] = {
        { "GET", "/v1/identity", MODULE_ROUTE_WORKLOAD },
        { "GET", "/v1/identity/bundle", MODULE_ROUTE_PUBLIC },
        { "POST", "/v1/identity/jwt", MODULE_ROUTE_WORKLOAD },
        { "GET", "/v1/identity/jwt-bundle", MODULE_ROUTE_PUBLIC },
        { "POST", "/v1/identity/jwt/validate", MODULE_ROUTE_PUBLIC },
        {},
};

static bool identity_configured(const struct module_instance *mi, const struct config *c) {
        const struct identity *id = mi->data;
        return id->settings->signer != NULL;
}

/* The Workload API socket's directory; unset, it is the API socket's, checked with [agent]. */
static int identity_check(const struct module_instance *mi, const struct config *c, char **ret_error) {
        const struct identity *id = mi->data;
        const char *path = id->settings->workload_socket;
        return isempty(path) ? 0 : module_check_socket_dir(c, "identity", "workload-socket", path, ret_error);
}

const struct module identity_module = {
        .name = "identity",
        .routes = identity_routes,
        .deps = (const char *const[]) { "apiserver", NULL },
        .init = identity_init,
        .configured = identity_configured,
        .check = identity_check,
        .start = identity_start,
        .reload = identity_reload,
        .stop = identity_stop,
        .status = identity_status,
        .free = identity_free,
};
