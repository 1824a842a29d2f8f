/* SPDX-License-Identifier: MIT */
/* The pod address pool in memory: the free-address bitmaps, the quarantine, the allocations'
 * nodes, allocation and release. See ipam.h; the index (hash tables) is ipam-index.c's, the
 * addresses ipam-addr.c's, the files ipam-state.c's, and every change follows ipam-internal.h's
 * prepare / persist / apply steps. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipam-internal.h"
#include "json.h"

/* ---- the free-address bitmap and the quarantine ---- */

static bool bit_get(const uint64_t *bits, uint32_t o) {
        return bits[o / 64] & (UINT64_C(1) << (o % 64));
}

static void bit_set(uint64_t *bits, uint32_t o, bool v) {
        if (v)
                bits[o / 64] |= UINT64_C(1) << (o % 64);
        else
                bits[o / 64] &= ~(UINT64_C(1) << (o % 64));
}

/* Marks an IPv4 address (if in the pool) and an IPv6 pool offset (if not 0) taken or free. */
void ipam_mark(struct ipam *p, uint32_t addr, uint32_t off6, bool taken) {
        if (ipam_addr_in_pool(p, addr))
                bit_set(p->taken, addr - p->network, taken);
        if (off6 > 0)
                bit_set(p->taken6, off6, taken);
}

static const struct quarantined *q_at(const struct ipam *p, size_t i) {
        return &p->q[(p->q_head + i) % p->q_allocated];
}

static bool q_live(const struct ipam *p, const struct quarantined *q, usec_t now) {
        /* (Within quarantine either way: a clock stepped far back does not pin an address.) */
        return q->released + p->quarantine > now && q->released <= now + p->quarantine;
}

/* Frees the addresses whose quarantine is over. Releases come in time order, so the expired ones
 * are at the head; one out of order (the clock stepped) waits for those before it. */
static void quarantine_expire(struct ipam *p, usec_t now) {
        while (p->q_len > 0 && !q_live(p, q_at(p, 0), now)) {
                const struct quarantined *q = q_at(p, 0);
                struct in6_addr a6;
                ipam_addr_at_offset6(p, q->off6, &a6);
                ipam_mark(p, ipam_index_find_addr(p, q->addr) ? 0 : q->addr,
                          q->off6 > 0 && !ipam_index_find_addr6(p, &a6) ? q->off6 : 0, false);
                p->q_head = (p->q_head + 1) % p->q_allocated;
                p->q_len--;
        }
}

/* Next-fit over the offsets first..last of a bitmap, from the one after cursor, 64 at a time. */
static int next_free(const uint64_t *bits, uint32_t first, uint32_t last, uint32_t cursor, uint32_t *ret) {
        uint32_t o = cursor >= first && cursor < last ? cursor + 1 : first;
        uint64_t size = (uint64_t) last - first + 1;

        for (uint64_t seen = 0; seen < size;) {
                if (o % 64 == 0 && (uint64_t) o + 63 <= last && bits[o / 64] == UINT64_MAX) {
                        seen += 64;
                        o = (uint64_t) o + 64 > last ? first : o + 64;
                        continue;
                }
                if (!bit_get(bits, o)) {
                        *ret = o;
                        return 0;
                }
                seen++;
                o = o == last ? first : o + 1;
        }
        return -EADDRNOTAVAIL;
}

/* ---- the apply steps (see ipam-internal.h) ---- */

void ipam_apply_allocate(struct ipam *p, struct ipam_node *n, uint32_t cursor, uint32_t cursor6) {
        uint32_t off6 = n->a.has_addr6 ? ipam_addr_offset6(p, &n->a.addr6) : 0;

        n->index = p->n_nodes;
        p->nodes[p->n_nodes++] = n;
        ipam_index_insert(p, n);
        ipam_reserve_account(p, &n->a, IPAM_RESERVE_ALLOCATED);
        ipam_mark(p, n->a.addr, off6, true);
        if (n->a.addr != 0 && !ipam_addr_in_pool(p, n->a.addr))
                p->n_foreign++;
        if (off6 > 0)
                p->n_in_pool6++;
        if (ipam_addr_in_pool(p, cursor))
                p->cursor = cursor;
        if (cursor6 >= 1 && cursor6 <= p->size6)
                p->cursor6 = cursor6;
}

void ipam_apply_release(struct ipam *p, struct ipam_node *n, usec_t released, bool quarantine, char *deleting) {
        uint32_t off6 = n->a.has_addr6 ? ipam_addr_offset6(p, &n->a.addr6) : 0;
        uint32_t addr = ipam_addr_in_pool(p, n->a.addr) ? n->a.addr : 0;
        size_t i = n->index;

        ipam_index_remove(p, n);
        ipam_reserve_account(p, &n->a, IPAM_RESERVE_RELEASED);
        p->nodes[i] = p->nodes[--p->n_nodes];
        p->nodes[i]->index = i;
        if (n->a.addr != 0 && !addr)
                p->n_foreign--;
        if (off6 > 0)
                p->n_in_pool6--;
        if (quarantine && (addr || off6)) {
                /* (Its addresses stay marked taken until the entry expires.) */
                p->q[(p->q_head + p->q_len) % p->q_allocated] =
                        (struct quarantined) { .addr = addr, .off6 = off6, .released = released };
                p->q_len++;
        } else
                ipam_mark(p, addr, off6, false);
        if (deleting) {
                p->deleting[p->n_deleting++] = deleting;
                ipam_reserve_account(p, NULL, IPAM_RESERVE_DELETING);
        }
        ipam_node_free(n);
}

void ipam_apply_update(struct ipam *p, struct ipam_node *n, struct ipam_node *updated) {
        struct ipam_allocation old = n->a, new = updated->a;

        /* The identity (attachment, address, age) stays; the owner fields are swapped in, and
         * updated takes the old ones to be freed. */
        ipam_index_remove_host(p, n);
        n->a = new;
        n->a.container_id = old.container_id;
        n->a.ifname = old.ifname;
        n->a.addr = old.addr;
        n->a.has_addr6 = old.has_addr6;
        n->a.addr6 = old.addr6;
        n->a.since = old.since;
        updated->a = old;
        updated->a.container_id = new.container_id;
        updated->a.ifname = new.ifname;
        ipam_node_free(updated);
        ipam_index_insert_host(p, n);
}

void ipam_apply_link_deleted(struct ipam *p, size_t i) {
        ipam_reserve_account(p, NULL, IPAM_RESERVE_LINK_DELETED);
        free(p->deleting[i]);
        p->deleting[i] = p->deleting[--p->n_deleting];
}

/* ---- the pool ---- */

/* ---- nodes and lookups ---- */

static int set_string(char **dst, const char *v) {
        char *c = NULL;
        if (v && !(c = strdup(v)))
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

struct ipam_node *ipam_node_free(struct ipam_node *n) {
        if (!n)
                return NULL;
        free(n->a.container_id);
        free(n->a.ifname);
        free(n->a.netns);
        free(n->a.host_ifname);
        free(n->a.pod_namespace);
        free(n->a.pod_name);
        free(n->a.pod_uid);
        free(n->a.network);
        free(n);
        return NULL;
}

struct ipam_node *ipam_node_new(const char *container_id, const char *ifname, uint32_t addr, usec_t since) {
        struct ipam_node *n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        n->a.addr = addr;
        n->a.since = since;
        if (set_string(&n->a.container_id, container_id) < 0 || set_string(&n->a.ifname, ifname) < 0)
                return ipam_node_free(n);
        return n;
}

int ipam_node_set_owner(struct ipam_node *n, const struct ipam_owner *o) {
        struct ipam_allocation *a = &n->a;
        if (!o)
                return 0;
        if (set_string(&a->netns, o->netns) < 0 || set_string(&a->host_ifname, o->host_ifname) < 0 ||
            set_string(&a->pod_namespace, o->pod_namespace) < 0 || set_string(&a->pod_name, o->pod_name) < 0 ||
            set_string(&a->pod_uid, o->pod_uid) < 0 || set_string(&a->network, o->network) < 0)
                return -ENOMEM;
        a->mtu = o->mtu;
        a->netns_ino = o->netns_ino;
        return 0;
}

const struct ipam_allocation *ipam_find(const struct ipam *p, const char *container_id, const char *ifname) {
        struct ipam_node *n = ipam_index_find(p, container_id, ifname);
        return n ? &n->a : NULL;
}

const struct ipam_allocation *ipam_find_addr(const struct ipam *p, uint32_t addr) {
        struct ipam_node *n = ipam_index_find_addr(p, addr);
        return n ? &n->a : NULL;
}

const struct ipam_allocation *ipam_find_addr6(const struct ipam *p, const struct in6_addr *addr) {
        struct ipam_node *n = ipam_index_find_addr6(p, addr);
        return n ? &n->a : NULL;
}

static bool host_ifname_taken(const struct ipam *p, const char *name) {
        if (ipam_index_host_taken(p, name))
                return true;
        /* (Deletions in flight: a handful, bounded by what the reaper has queued.) */
        for (size_t i = 0; i < p->n_deleting; i++)
                if (streq(p->deleting[i], name))
                        return true;
        return false;
}

int ipam_host_ifname(const struct ipam *p, const char *container_id, const char *ifname, char ret[16]) {
        const struct ipam_allocation *a = ipam_find(p, container_id, ifname);

        if (a) {
                snprintf(ret, 16, "%s", a->host_ifname);
                return 0;
        }
        for (unsigned salt = 0; salt < 64; salt++) {
                snprintf(ret, 16, "pin%08x", ipam_index_hash(container_id, ifname, salt));
                if (!p || !host_ifname_taken(p, ret))
                        return 0;
        }
        return -EADDRINUSE;
}

struct ipam *ipam_free(struct ipam *p) {
        if (!p)
                return NULL;
        ipam_state_close(p);
        for (size_t i = 0; i < p->n_nodes; i++)
                ipam_node_free(p->nodes[i]);
        free(p->nodes);
        free(p->by_id);
        free(p->by_addr);
        free(p->by_addr6);
        free(p->by_host);
        free(p->taken);
        free(p->taken6);
        free(p->cidr4);
        free(p->cidr6);
        free(p->q);
        for (size_t i = 0; i < p->n_deleting; i++)
                free(p->deleting[i]);
        free(p->deleting);
        free(p->cidr);
        free(p->state_file);
        free(p->journal_file);
        free(p);
        return NULL;
}

int ipam_take_not_durable(struct ipam *p) {
        int r = p ? p->not_durable : 0;
        if (p)
                p->not_durable = 0;
        return r;
}

static int load_error(char **ret_error, const char *what) {
        if (ret_error) {
                free(*ret_error);
                *ret_error = strdup(what);
        }
        return -EINVAL;
}

int ipam_new(const char *cidr, usec_t quarantine, const char *state_file, struct ipam **ret, char **ret_error) {
        _cleanup_(ipam_freep) struct ipam *p = NULL;
        const char *reason = NULL;
        int r;

        p = calloc(1, sizeof(struct ipam));
        if (!p)
                return -ENOMEM;
        p->journal_fd = -EBADF;
        p->journal_limit = -1;
        r = ipam_addr_parse_pod_cidrs(cidr, &p->cidr4, &p->cidr6, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return load_error(ret_error, "invalid pod CIDR");
        p->quarantine = quarantine;
        if (p->cidr4) {
                (void) ipam_addr_parse_cidr(p->cidr4, &p->network, &p->prefix);
                p->broadcast = p->network | ~(UINT32_MAX << (32 - p->prefix));
                p->cursor = p->network;
                /* (Pages of it never touched cost no memory: a /16 is 8 KiB.) */
                if (!(p->taken = calloc(((uint64_t) p->broadcast - p->network + 1 + 63) / 64, sizeof(uint64_t))))
                        return -ENOMEM;
        }
        if (p->cidr6) {
                (void) ipam_addr_parse_cidr6(p->cidr6, &p->network6, &p->prefix6);
                p->size6 = p->prefix6 >= 112 ? (1u << (128 - p->prefix6)) - 1 : IPAM_MAX_POOL6;
                if (!(p->taken6 = calloc((p->size6 + 1 + 63) / 64, sizeof(uint64_t))))
                        return -ENOMEM;
        }
        if (!(p->cidr = strdup(cidr)) || ipam_index_reserve(p, 1, 1, 1) < 0)
                return -ENOMEM;
        if (state_file) {
                p->state_file = strdup(state_file);
                if (!p->state_file)
                        return -ENOMEM;
                r = ipam_state_open(p, ret_error);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(p);
        return 0;
}

void ipam_set_quarantine(struct ipam *p, usec_t quarantine) {
        p->quarantine = quarantine;
}

void ipam_set_journal_limit(struct ipam *p, long records) {
        p->journal_limit = records;
}

const char *ipam_cidr(const struct ipam *p) {
        return p->cidr;
}

const char *ipam_cidr4(const struct ipam *p) {
        return p->cidr4;
}

const char *ipam_cidr6(const struct ipam *p) {
        return p->cidr6;
}

bool ipam_has_family(const struct ipam *p, int family) {
        return family == AF_INET ? p->cidr4 != NULL : family == AF_INET6 ? p->size6 > 0 : false;
}

/* Why a requested address cannot be had (0: it can). */
static int check_request(struct ipam *p, uint32_t addr) {
        if (!ipam_addr_in_pool(p, addr))
                return -ERANGE;
        if (ipam_index_find_addr(p, addr))
                return -EADDRINUSE;
        if (bit_get(p->taken, addr - p->network))
                return -EBUSY; /* not allocated, so quarantined */
        return 0;
}

static int check_request6(struct ipam *p, const struct in6_addr *addr, uint32_t *ret_off) {
        uint32_t off = ipam_addr_offset6(p, addr);
        if (off == 0)
                return -ERANGE;
        if (ipam_index_find_addr6(p, addr))
                return -EADDRINUSE;
        if (bit_get(p->taken6, off))
                return -EBUSY;
        *ret_off = off;
        return 0;
}

static bool holds_request(const struct ipam_allocation *a, const uint32_t *req4, const struct in6_addr *req6) {
        return (!req4 || a->addr == *req4) && (!req6 || (a->has_addr6 && memcmp(&a->addr6, req6, sizeof(*req6)) == 0));
}

/* The addresses for a new allocation: requested, or next-fit (moving that family's cursor). */
static int pick(struct ipam *p, const uint32_t *req4, const struct in6_addr *req6, uint32_t *addr, uint32_t *off6,
                uint32_t *cursor, uint32_t *cursor6) {
        int r = 0;

        if ((req4 && !p->cidr4) || (req6 && p->size6 == 0))
                return -EAFNOSUPPORT;
        if (req4) {
                r = check_request(p, *req4);
                *addr = *req4;
        } else if (p->cidr4) {
                uint32_t o = 0;
                r = next_free(p->taken, 1, p->broadcast - p->network - 1, p->cursor - p->network, &o);
                *addr = *cursor = p->network + o;
        }
        if (r < 0)
                return r;
        if (req6)
                r = check_request6(p, req6, off6);
        else if (p->size6 > 0) {
                r = next_free(p->taken6, 1, p->size6, p->cursor6, off6);
                *cursor6 = *off6;
        }
        return r;
}

static int allocate(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                    const uint32_t *req4, const struct in6_addr *req6, usec_t now, const struct ipam_allocation **ret) {
        struct ipam_node *existing = ipam_index_find(p, container_id, ifname), *n;
        _cleanup_(cJSON_Deletep) cJSON *record = NULL;
        uint32_t addr = 0, off6 = 0, cursor = p->cursor, cursor6 = p->cursor6;
        char ip[16];
        int r;

        if (!owner || isempty(owner->host_ifname) || isempty(container_id) || isempty(ifname))
                return -EINVAL;
        if (existing) {
                /* A repeated ADD (the runtime retrying after a failure): same address, nothing
                 * changed yet (ipam_update_owner() once the repeated ADD worked). */
                if (!holds_request(&existing->a, req4, req6))
                        return -EEXIST;
                *ret = &existing->a;
                return 0;
        }

        quarantine_expire(p, now);
        r = pick(p, req4, req6, &addr, &off6, &cursor, &cursor6);
        if (r < 0)
                return r;
        if (ipam_index_reserve(p, 1, 0, 0) < 0 || !(n = ipam_node_new(container_id, ifname, addr, now)))
                return -ENOMEM;
        if (off6 > 0) {
                n->a.has_addr6 = true;
                ipam_addr_at_offset6(p, off6, &n->a.addr6);
        }
        ipam_addr_format(cursor, ip);
        if (ipam_node_set_owner(n, owner) < 0 || !(record = cJSON_CreateObject()) ||
            !cJSON_AddStringToObject(record, "op", "allocate") ||
            !cJSON_AddItemToObject(record, "allocation", ipam_state_allocation_to_json(&n->a)) ||
            !cJSON_AddStringToObject(record, "cursor", ip) || !cJSON_AddNumberToObject(record, "cursor6", cursor6)) {
                ipam_node_free(n);
                return -ENOMEM;
        }
        /* Its release's bytes are reserved with it: a DEL never finds the disk full. */
        r = ipam_state_append(p, record, false, p->release_reserve + ipam_reserve_bound(&n->a));
        if (r < 0) {
                /* Not on disk: not handed out. */
                ipam_node_free(n);
                return r;
        }
        ipam_apply_allocate(p, n, cursor, cursor6);
        ipam_state_compact_if_due(p);
        *ret = &n->a;
        return 1;
}

int ipam_allocate(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                  usec_t now, const struct ipam_allocation **ret) {
        return allocate(p, container_id, ifname, owner, NULL, NULL, now, ret);
}

int ipam_allocate_addr(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                       uint32_t addr, usec_t now, const struct ipam_allocation **ret) {
        return allocate(p, container_id, ifname, owner, &addr, NULL, now, ret);
}

int ipam_allocate_request(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner,
                          const uint32_t *addr, const struct in6_addr *addr6, usec_t now,
                          const struct ipam_allocation **ret) {
        return allocate(p, container_id, ifname, owner, addr, addr6, now, ret);
}

int ipam_update_owner(struct ipam *p, const char *container_id, const char *ifname, const struct ipam_owner *owner) {
        struct ipam_node *existing = ipam_index_find(p, container_id, ifname), *updated;
        _cleanup_(cJSON_Deletep) cJSON *record = NULL;
        int r;

        if (!existing)
                return -ENOENT;
        if (!owner || isempty(owner->host_ifname))
                return -EINVAL;
        /* A copy first: a failure half-way leaves the allocation as it was. */
        updated = ipam_node_new(container_id, ifname, existing->a.addr, existing->a.since);
        if (updated) {
                updated->a.has_addr6 = existing->a.has_addr6;
                updated->a.addr6 = existing->a.addr6;
        }
        if (!updated || ipam_node_set_owner(updated, owner) < 0 || !(record = cJSON_CreateObject()) ||
            !cJSON_AddStringToObject(record, "op", "update") ||
            !cJSON_AddItemToObject(record, "allocation", ipam_state_allocation_to_json(&updated->a))) {
                ipam_node_free(updated);
                return -ENOMEM;
        }
        r = ipam_state_append(p, record, false, p->release_reserve);
        if (r < 0) {
                ipam_node_free(updated);
                return r;
        }
        ipam_apply_update(p, existing, updated);
        ipam_state_compact_if_due(p);
        return 0;
}

int ipam_release(struct ipam *p, const char *container_id, const char *ifname, usec_t now, bool link_pending) {
        struct ipam_node *n = ipam_index_find(p, container_id, ifname);
        _cleanup_(cJSON_Deletep) cJSON *record = NULL;
        _cleanup_free_ char *deleting = NULL;
        bool quarantine = p && p->quarantine > 0;
        int r;

        if (!n)
                return 0;
        quarantine_expire(p, now);
        if (ipam_index_reserve(p, 0, 1, 1) < 0 || (link_pending && !(deleting = strdup(n->a.host_ifname))) ||
            !(record = cJSON_CreateObject()) || !cJSON_AddStringToObject(record, "op", "release") ||
            !cJSON_AddStringToObject(record, "containerID", n->a.container_id) ||
            !cJSON_AddStringToObject(record, "ifname", n->a.ifname) ||
            !cJSON_AddNumberToObject(record, "releasedAt", (double) now / USEC_PER_SEC) ||
            !cJSON_AddBoolToObject(record, "quarantine", quarantine) ||
            (deleting && !cJSON_AddStringToObject(record, "deleting", deleting)))
                return -ENOMEM;
        r = ipam_state_append(p, record, false, 0);
        if (r < 0)
                return r; /* the file still says it is allocated */
        ipam_apply_release(p, n, now, quarantine, TAKE_PTR(deleting));
        ipam_state_compact_if_due(p);
        return 1;
}

void ipam_defer_sync(struct ipam *p) {
        p->defer_sync = true;
}

void ipam_lazy_sync(struct ipam *p) {
        p->lazy_sync = true;
}

int ipam_sync(struct ipam *p) {
        p->defer_sync = p->lazy_sync = false;
        return ipam_state_sync(p);
}

int ipam_link_deleted(struct ipam *p, const char *host_ifname) {
        for (size_t i = 0; i < p->n_deleting; i++) {
                _cleanup_(cJSON_Deletep) cJSON *record = NULL;
                if (!streq(p->deleting[i], host_ifname))
                        continue;
                if (!(record = cJSON_CreateObject()) || !cJSON_AddStringToObject(record, "op", "linkDeleted") ||
                    !cJSON_AddStringToObject(record, "hostIfname", host_ifname))
                        return -ENOMEM;
                /* Left to the next flush: a lost one only repeats, at the next start, the
                 * deletion of a link that is gone. */
                int r = ipam_state_append(p, record, true, 0);
                if (r < 0)
                        return r;
                ipam_apply_link_deleted(p, i);
                ipam_state_compact_if_due(p);
                return 1;
        }
        return 0;
}

size_t ipam_n_deleting(const struct ipam *p) {
        return p ? p->n_deleting : 0;
}

const char *ipam_deleting(const struct ipam *p, size_t i) {
        return p && i < p->n_deleting ? p->deleting[i] : NULL;
}

size_t ipam_count(const struct ipam *p) {
        return p ? p->n_nodes : 0;
}

const struct ipam_allocation *ipam_get(const struct ipam *p, size_t i) {
        return p && i < p->n_nodes ? &p->nodes[i]->a : NULL;
}

void ipam_usage(const struct ipam *p, usec_t now, struct ipam_usage *ret) {
        struct ipam_usage u = { .size = p->cidr4 ? (uint64_t) p->broadcast - p->network - 1 : 0 };
        size_t with_v4 = 0;

        for (size_t i = 0; i < p->n_nodes; i++)
                with_v4 += p->nodes[i]->a.addr != 0;
        u.foreign = p->n_foreign;
        u.allocated = with_v4 - p->n_foreign;
        /* (Walks the quarantine: for status and metrics, not on the path of a change.) */
        for (size_t i = 0; i < p->q_len; i++) {
                const struct quarantined *q = q_at(p, i);
                if (ipam_addr_in_pool(p, q->addr) && !ipam_index_find_addr(p, q->addr) && q_live(p, q, now))
                        u.quarantined++;
        }
        u.free = u.size - MIN(u.size, u.allocated + u.quarantined);
        *ret = u;
}

bool ipam_usage6(const struct ipam *p, usec_t now, struct ipam_usage *ret) {
        struct ipam_usage u = { .size = p->size6, .allocated = p->n_in_pool6 };

        for (size_t i = 0; i < p->q_len; i++) {
                const struct quarantined *q = q_at(p, i);
                struct in6_addr a6;
                ipam_addr_at_offset6(p, q->off6, &a6);
                if (q->off6 > 0 && !ipam_index_find_addr6(p, &a6) && q_live(p, q, now))
                        u.quarantined++;
        }
        u.free = u.size - MIN(u.size, u.allocated + u.quarantined);
        *ret = u;
        return p->size6 > 0;
}

static cJSON *usage_to_json(const char *cidr, const struct ipam_usage *u) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "podCIDR", cidr) || !cJSON_AddNumberToObject(o, "size", (double) u->size) ||
            !cJSON_AddNumberToObject(o, "allocated", (double) u->allocated) ||
            !cJSON_AddNumberToObject(o, "quarantined", (double) u->quarantined) ||
            !cJSON_AddNumberToObject(o, "free", (double) u->free))
                return NULL;
        return TAKE_PTR(o);
}

cJSON *ipam_to_json(const struct ipam *p, usec_t now) {
        _cleanup_(cJSON_Deletep) cJSON *o = cJSON_CreateObject();
        struct ipam_usage u;
        cJSON *list;

        struct ipam_usage u6;
        bool six = ipam_usage6(p, now, &u6);
        ipam_usage(p, now, &u);
        /* One object per pool; the top level repeats the IPv4 pool's (the IPv6 one's alone). */
        if (!o || (p->cidr4 && !cJSON_AddItemToObject(o, "ipv4", usage_to_json(p->cidr4, &u))) ||
            (six && !cJSON_AddItemToObject(o, "ipv6", usage_to_json(p->cidr6, &u6))))
                return NULL;
        if (!p->cidr4)
                u = (struct ipam_usage) { .size = u6.size, .allocated = u6.allocated, .quarantined = u6.quarantined,
                                          .free = u6.free, .foreign = u.foreign };
        if (!cJSON_AddStringToObject(o, "podCIDR", p->cidr) || !cJSON_AddNumberToObject(o, "size", (double) u.size) ||
            !cJSON_AddNumberToObject(o, "allocated", (double) u.allocated) ||
            !cJSON_AddNumberToObject(o, "quarantined", (double) u.quarantined) ||
            !cJSON_AddNumberToObject(o, "free", (double) u.free) ||
            !cJSON_AddNumberToObject(o, "outsidePool", (double) u.foreign) ||
            !cJSON_AddNumberToObject(o, "interfacesBeingDeleted", (double) p->n_deleting) ||
            !(list = cJSON_AddArrayToObject(o, "allocations")))
                return NULL;
        for (size_t i = 0; i < p->n_nodes; i++) {
                const struct ipam_allocation *alloc = &p->nodes[i]->a;
                cJSON *a = ipam_state_allocation_to_json(alloc);
                if (!a || !cJSON_AddItemToArray(list, a))
                        return cJSON_Delete(a), NULL;
                cJSON_DeleteItemFromObjectCaseSensitive(a, "since");
                if (!json_add_time(a, "since", alloc->since))
                        return NULL;
        }
        return TAKE_PTR(o);
}
