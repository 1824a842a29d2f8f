/* SPDX-License-Identifier: MIT */
/* Reconciliation: releasing the allocations of attachments that are gone although no DEL came.
 * That happens: podman deletes the namespace after a failed DEL (the agent was down during
 * `podman rm`) and never retries, and its libcni sends no GC. So the agent looks for itself, at
 * start, every reconcile-interval, and GC shares the release path below.
 *
 * An attachment is gone when both hold:
 *   - its namespace: the CNI_NETNS path recorded at ADD no longer exists, or no longer is a
 *     network namespace (the file a runtime bind-mounts onto stays behind after the unmount),
 *     or is another namespace than the one wired (its inode, recorded at ADD: a recycled path);
 *   - its host veth is gone. A veth pair lives as long as both ends' namespaces do: destroying a
 *     namespace deletes its interfaces, and each veth takes its peer along. A host end that
 *     still exists therefore has its pod end in a live namespace (perhaps one a process holds
 *     after the runtime removed its path), and the attachment is kept.
 * The runtime itself is not asked (no CRI client in the agent): the two facts are sufficient
 * evidence, because a live attachment always has its namespace, and that namespace holds the
 * pod end while anything uses it. An allocation younger than gc-grace is left alone, like GC
 * does. Passes run on the loop, as the CNI requests do: no ADD is ever half-way during one.
 *
 * GC is the runtime's word that an attachment is no longer valid (CNI 1.1): it needs no
 * evidence from the kernel, but goes through the same grace rule and release path (the veth
 * is deleted with it, so no interface keeps a released address). */

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "manager.h"
#include "podnet.h"
#include "string-table.h"
#include "wire.h"

static const char *const release_reason_table[_RELEASE_REASON_MAX] = {
        [RELEASE_GC] = "gc",
        [RELEASE_NETNS_GONE] = "netns-gone",
        [RELEASE_NETNS_REPLACED] = "netns-replaced",
};
static DEFINE_STRING_TABLE_LOOKUP_TO_STRING(release_reason, enum release_reason);

static const char *const release_reason_text[_RELEASE_REASON_MAX] = {
        [RELEASE_GC] = "the runtime's GC did not list it as valid",
        [RELEASE_NETNS_GONE] = "its network namespace and its host interface are gone",
        [RELEASE_NETNS_REPLACED] = "its network namespace path now holds another namespace (or none) and its host "
                                   "interface is gone",
};

bool reconcile_attachment_young(const struct podnet *p, const struct ipam_allocation *a, usec_t now) {
        usec_t grace = p->settings->gc_grace;
        return a->since + grace > now && a->since < now + grace;
}

int reconcile_release(struct module_instance *mi, const struct ipam_allocation *a, enum release_reason reason,
                      char **ret_error) {
        struct podnet *p = mi->data;
        /* Copies: the release frees the allocation's strings. */
        _cleanup_free_ char *cid = strdup(a->container_id), *ifn = strdup(a->ifname);
        int r;

        if (!cid || !ifn)
                return -ENOMEM;
        r = attachment_remove(mi, cid, ifn, release_reason_text[reason], ret_error);
        if (r < 0)
                return r;
        p->released[reason]++;
        if (p->metrics_reg)
                (void) metric_inc(p->m_reconciled, release_reason_to_string(reason));
        return 0;
}

void reconcile_touch_metrics(struct podnet *p) {
        for (enum release_reason r = 0; r < _RELEASE_REASON_MAX; r++)
                (void) metric_touch(p->m_reconciled, release_reason_to_string(r));
}

/* What the recorded CNI_NETNS path leads to. Opened O_PATH: a FIFO or device put there is not
 * opened for real. An error other than a missing path proves nothing: live. */
static int netns_verdict(const struct ipam_allocation *a, enum release_reason *ret) {
        _cleanup_close_ int fd = -EBADF;
        struct statfs sfs;
        struct stat st;

        if (!a->netns)
                return 0; /* nothing recorded to look at */
        fd = open(a->netns, O_PATH | O_CLOEXEC);
        if (fd < 0) {
                if (errno != ENOENT && errno != ENOTDIR)
                        return 0;
                *ret = RELEASE_NETNS_GONE;
                return 1;
        }
        if (fstatfs(fd, &sfs) < 0 || fstat(fd, &st) < 0)
                return 0;
        if ((unsigned long) sfs.f_type != (unsigned long) NSFS_MAGIC || (a->netns_ino > 0 && st.st_ino != a->netns_ino)) {
                *ret = RELEASE_NETNS_REPLACED;
                return 1;
        }
        return 0;
}

/* 1 with the reason if a is gone (see the top of the file), 0 if it is or may be live. */
static int attachment_gone(const struct podnet *p, const struct ipam_allocation *a, usec_t now,
                           enum release_reason *ret) {
        if (reconcile_attachment_young(p, a, now))
                return 0;
        if (netns_verdict(a, ret) <= 0)
                return 0;
        /* The namespace may be dying (its cleanup runs in a kernel worker): the veth decides. */
        return !wire_link_exists(a->host_ifname);
}

/* One pass over the allocations: each one older than gc-grace whose namespace and host veth are
 * both gone is released. Returns how many were released. */
static unsigned reconcile_pass(struct module_instance *mi, const char *why) {
        struct podnet *p = mi->data;
        usec_t now = now_usec(CLOCK_REALTIME);
        unsigned released = 0, failed = 0;

        if (!p->ipam || p->stopped)
                return 0;
        for (size_t i = 0; i < ipam_count(p->ipam);) {
                const struct ipam_allocation *a = ipam_get(p->ipam, i);
                _cleanup_free_ char *error = NULL;
                enum release_reason reason;

                if (attachment_gone(p, a, now, &reason) <= 0) {
                        i++;
                        continue;
                }
                int r = reconcile_release(mi, a, reason, &error);
                if (r < 0) {
                        log_module_warning(MODULE, "Failed to release a gone attachment (%s); the next pass retries",
                                           error ? error : strerror(-r));
                        failed++;
                        i++;
                        continue;
                }
                released++; /* the next one moved into index i */
        }
        p->reconcile_runs++;
        p->reconcile_last = now;
        podnet_warn_not_durable(p);
        if (released > 0 || failed > 0)
                log_module_info(MODULE, "Reconciliation (%s) released %u allocation(s) of gone attachments%s", why,
                                released, failed ? ", some failed" : "");
        else
                log_module_debug(MODULE, "Reconciliation (%s): every allocation is live", why);
        return released;
}

static int on_reconcile_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct module_instance *mi = userdata;
        struct podnet *p = mi->data;

        (void) reconcile_pass(mi, "periodic");
        if (sd_event_source_set_time_relative(s, p->settings->reconcile_interval) >= 0)
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
        return 0;
}

void reconcile_stop(struct podnet *p) {
        p->reconcile_timer = sd_event_source_disable_unref(p->reconcile_timer);
}

int reconcile_start(struct module_instance *mi) {
        struct podnet *p = mi->data;
        usec_t interval = p->settings->reconcile_interval;

        reconcile_stop(p);
        (void) reconcile_pass(mi, "start");
        if (interval == 0)
                return 0;
        return sd_event_add_time_relative(mi->manager->event, &p->reconcile_timer, CLOCK_MONOTONIC, interval,
                                          interval / 10, on_reconcile_timer, mi);
}

int reconcile_status(const struct podnet *p, cJSON *obj) {
        cJSON *o = cJSON_AddObjectToObject(obj, "reconcile"), *rel;

        if (!o || !cJSON_AddNumberToObject(o, "intervalSeconds", (double) p->settings->reconcile_interval / USEC_PER_SEC) ||
            !cJSON_AddNumberToObject(o, "runs", (double) p->reconcile_runs) ||
            !(rel = cJSON_AddObjectToObject(o, "released")))
                return -ENOMEM;
        if (p->reconcile_last > 0 &&
            !cJSON_AddNumberToObject(o, "lastRun", (double) p->reconcile_last / USEC_PER_SEC))
                return -ENOMEM;
        for (enum release_reason r = 0; r < _RELEASE_REASON_MAX; r++)
                if (!cJSON_AddNumberToObject(rel, release_reason_to_string(r), (double) p->released[r]))
                        return -ENOMEM;
        return 0;
}
