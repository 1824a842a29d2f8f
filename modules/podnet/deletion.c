/* SPDX-License-Identifier: MIT */
/* The host veths the reaper is deleting for this run, and the DELs held until theirs is gone:
 * an ADD reusing a namespace may have to wait for one, and a DEL answers only once the pod end
 * is gone from the namespace. Who answers a held DEL is the caller's (deletion_hold()): this
 * file never replies itself. */

#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include "podnet.h"
#include "wire.h"

static void deletion_free_fields(struct pending_deletion *d) {
        free(d->host_ifname);
        free(d->netns);
        free(d->container_id);
        free(d->ifname);
        free(d->waiters);
}

/* The held DELs of d learn how its deletion ended. */
static void answer_waiters(struct podnet *p, struct pending_deletion *d, int error) {
        for (size_t i = 0; i < d->n_waiters; i++) {
                if (error < 0)
                        log_module_warning(MODULE, "DEL: the veth could not be deleted: %s", strerror(-error));
                d->waiters[i].answer(p, d->waiters[i].req, error);
        }
        d->waiters = mfree(d->waiters);
        d->n_waiters = 0;
}

/* Stopping: a held DEL is answered only once its interface is gone, so the deletions it waits
 * for are done here (the reaper is stopped by now); the others stay recorded for the next
 * start. */
void deletion_clear(struct podnet *p) {
        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                if (d->n_waiters > 0) {
                        int r = wire_del(d->host_ifname);
                        if ((r >= 0 || r == -ENOTUNIQ) && p->ipam)
                                (void) ipam_link_deleted(p->ipam, d->host_ifname);
                        answer_waiters(p, d, r == -ENOTUNIQ ? 0 : r);
                }
                deletion_free_fields(d);
        }
        p->pending = mfree(p->pending);
        p->n_pending = 0;
}

/* Best effort: without the record, an ADD that hits the old pod end answers "try again later"
 * instead of waiting for it, and a DEL answers before the veth is gone. */
void deletion_add(struct podnet *p, const char *host_ifname, const char *netns, const char *container_id,
                  const char *ifname) {
        struct pending_deletion d = {};
        struct pending_deletion *grown = realloc(p->pending, (p->n_pending + 1) * sizeof(struct pending_deletion));

        if (!grown)
                return;
        p->pending = grown;
        d.host_ifname = strdup(host_ifname);
        d.netns = netns ? strdup(netns) : NULL;
        d.container_id = strdup(container_id);
        d.ifname = strdup(ifname);
        if (!d.host_ifname || !d.ifname || !d.container_id || (netns && !d.netns)) {
                deletion_free_fields(&d);
                return;
        }
        p->pending[p->n_pending++] = d;
}

/* The deletion of host_ifname is over (error: how it ended); its held DELs are answered. */
static void deletion_finish(struct podnet *p, const char *host_ifname, int error) {
        for (size_t i = 0; i < p->n_pending; i++)
                if (streq(p->pending[i].host_ifname, host_ifname)) {
                        struct pending_deletion d = p->pending[i];
                        memmove(&p->pending[i], &p->pending[i + 1], (p->n_pending - i - 1) * sizeof(struct pending_deletion));
                        p->n_pending--;
                        answer_waiters(p, &d, error);
                        deletion_free_fields(&d);
                        return;
                }
}

void deletion_done(struct podnet *p, const char *host_ifname) {
        deletion_finish(p, host_ifname, 0);
}

/* The deletion that explains an EEXIST for this ADD: its own host end, or an earlier pod end by
 * the same name in the same namespace (the runtime reused the namespace right after a DEL). */
const char *deletion_blocking(const struct podnet *p, const char *host_ifname, const char *netns, const char *ifname) {
        for (size_t i = 0; i < p->n_pending; i++) {
                const struct pending_deletion *d = &p->pending[i];
                if (streq(d->host_ifname, host_ifname) || (streq_ptr(d->netns, netns) && streq(d->ifname, ifname)))
                        return d->host_ifname;
        }
        return NULL;
}

void deletion_on_link_removed(int ifindex, const char *name, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;

        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                /* The index too: an announcement about an earlier interface by that name does not count. */
                if (d->n_waiters > 0 && d->ifindex == ifindex && streq(d->host_ifname, name)) {
                        answer_waiters(p, d, 0);
                        return;
                }
        }
}

/* The runtime gave up on a held DEL: forget it (the deletion goes on). */
static void on_del_abort(struct api_request *req, void *userdata) {
        struct podnet *p = userdata;

        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                for (size_t j = 0; j < d->n_waiters; j++)
                        if (d->waiters[j].req == req) {
                                memmove(&d->waiters[j], &d->waiters[j + 1], (d->n_waiters - j - 1) * sizeof(*d->waiters));
                                d->n_waiters--;
                                return;
                        }
        }
}

int deletion_hold(struct module_instance *mi, struct api_request *req, const char *container_id, const char *ifname,
                  deletion_answer_fn answer) {
        struct podnet *p = mi->data;

        for (size_t i = 0; i < p->n_pending; i++) {
                struct pending_deletion *d = &p->pending[i];
                if (!streq(d->container_id, container_id) || !streq(d->ifname, ifname))
                        continue;
                /* Gone already (the reaper was quick, or the namespace went): nothing to wait for. */
                int index = (int) if_nametoindex(d->host_ifname);
                if (index <= 0)
                        return 0;
                d->ifindex = index;
                struct held_del *grown = realloc(d->waiters, (d->n_waiters + 1) * sizeof(*d->waiters));
                if (!grown)
                        return -ENOMEM;
                d->waiters = grown;
                d->waiters[d->n_waiters++] = (struct held_del) { .req = req, .answer = answer };
                api_reply_suspend(req, on_del_abort, p);
                log_module_debug(MODULE, "DEL of %s/%s answers once %s is deleted", container_id, ifname, d->host_ifname);
                /* Next in line: a DEL waits for its own veth, not for the backlog. */
                if (p->reaper)
                        (void) reaper_expedite(p->reaper, d->host_ifname);
                return 1;
        }
        return 0;
}

/* A host veth the reaper deleted (on the loop). */
void deletion_on_reaped(struct reaper *r, const char *name, int error, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;
        int k;

        deletion_finish(p, name, error == -ENOTUNIQ ? 0 : error);
        if (error == -ENOTUNIQ)
                /* Ours went (or never was): whatever has the name now is someone else's. */
                log_module_warning(MODULE, "Host interface %s is not pinion's (no \"" WIRE_MARK_PREFIX "\" mark, or not "
                                   "a veth): left as it is", name);
        else if (error < 0) {
                log_module_warning(MODULE, "Failed to delete host interface %s (%s); retrying at the next start", name,
                                   strerror(-error));
                return;
        } else
                log_module_debug(MODULE, "Deleted host interface %s", name);
        k = p->ipam ? ipam_link_deleted(p->ipam, name) : 0;
        if (k < 0)
                log_module_warning(MODULE, "Failed to record that %s is deleted (%s), ignoring", name, strerror(-k));
        podnet_warn_not_durable(p);
}
