/* SPDX-License-Identifier: MIT */
/* Service workloads: the agent's [service.NAME] sections as workloads of their own (a systemd
 * unit's processes get spiffe://<trust-domain>/service/<unit> or the section's spiffe-id), kept
 * in step with the config at start and on reload; issued, rotated and written like pods'. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "identity.h"
#include "log.h"
#include "service.h"
#include "strv.h"
#include "workload-internal.h"

struct workload *workload_service_find(struct identity *id, const char *unit) {
        for (size_t i = 0; unit && i < id->n_workloads; i++)
                if (id->workloads[i]->service && streq(id->workloads[i]->name, unit))
                        return id->workloads[i];
        return NULL;
}

static int set_strv(char ***field, char *const *value, bool *changed) {
        if (strv_equal(*field, value))
                return 0;
        char **copy = NULL;
        if (value && strv_copy(value, &copy) < 0)
                return -ENOMEM;
        strv_free(*field);
        *field = copy;
        *changed = true;
        return 0;
}

/* The default SPIFFE ID of a unit: spiffe://<trust-domain>/service/<unit without .service>. */
static char *service_spiffe(struct identity *id, const struct service_settings *s) {
        char *spiffe = NULL;
        if (s->spiffe_id)
                return strdup(s->spiffe_id);
        if (asprintf(&spiffe, "spiffe://%s/service/%.*s", id->settings->trust_domain,
                     (int) (strlen(s->unit) - strlen(".service")), s->unit) < 0)
                return NULL;
        return spiffe;
}

static void sync_service(struct identity *id, const struct service_settings *s) {
        _cleanup_free_ char *uid = NULL, *spiffe = service_spiffe(id, s);
        bool changed = false, created = false;
        struct workload *w;

        if (!spiffe || asprintf(&uid, "service:%s", s->name) < 0) {
                log_module_error(MODULE, "out of memory tracking service %s", s->name);
                return;
        }
        w = workload_find(id, uid);
        if (w && !streq(w->name, s->unit)) { /* another unit under the same section: a new identity */
                workload_remove(id, w);
                w = NULL;
        }
        if (!w) {
                w = workload_add(id, uid);
                if (!w) {
                        log_module_error(MODULE, "out of memory tracking service %s", s->name);
                        return;
                }
                w->service = created = true;
        }
        if (w->tls_dir && !streq_ptr(w->tls_dir, s->tls_dir))
                workload_remove_service_files(w->tls_dir); /* its key goes with the old place */
        if (workload_set_string(&w->name, s->unit, &changed) < 0 || workload_set_string(&w->spiffe, spiffe, &changed) < 0 ||
            workload_set_string(&w->user, s->user, &changed) < 0 || workload_set_string(&w->tls_dir, s->tls_dir, &changed) < 0 ||
            set_strv(&w->dns_names, s->dns_names, &changed) < 0) {
                log_module_error(MODULE, "out of memory tracking service %s", s->name);
                return;
        }
        if (created)
                log_workload_full_errno(w, LOG_DEBUG, 0, "service %s asks for an identity", w->name);
        if (changed)
                w->new_dir = true; /* perhaps a new tls-dir or owner: made afresh with the next certificate */
        if (changed || !w->chain_pem)
                workload_queue_push(id, w);
}

void workload_service_sync_all(struct identity *id) {
        const struct agent_settings *a = &id->manager->settings;

        for (size_t i = 0; i < id->n_workloads;) {
                struct workload *w = id->workloads[i];
                bool keep = false;
                for (size_t j = 0; w->service && !keep && j < a->n_services; j++)
                        keep = streq(w->uid + strlen("service:"), a->services[j]->name);
                if (w->service && !keep)
                        workload_remove(id, w); /* swaps the last one into i */
                else
                        i++;
        }
        for (size_t j = 0; j < a->n_services; j++)
                sync_service(id, a->services[j]);
}
