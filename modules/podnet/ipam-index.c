/* SPDX-License-Identifier: MIT */
/* The allocations' index: hash tables of chains by attachment, address, IPv6 address and host
 * interface name, grown with the dense array of nodes. See ipam-internal.h. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipam-internal.h"

/* FNV-1a: stable across restarts and builds, so a host interface name can be found again. */
uint32_t ipam_index_hash(const char *a, const char *b, unsigned salt) {
        uint32_t h = 2166136261u;
        for (const char *s = a; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        h = (h ^ '/') * 16777619u;
        for (const char *s = b; s && *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        return (h ^ salt) * 16777619u;
}

static size_t bucket_id(const struct ipam *p, const char *container_id, const char *ifname) {
        return ipam_index_hash(container_id, ifname, 0) & (p->n_buckets - 1);
}

static size_t bucket_addr(const struct ipam *p, uint32_t addr) {
        return (addr * 2654435761u) & (p->n_buckets - 1);
}

static size_t bucket_addr6(const struct ipam *p, const struct in6_addr *addr) {
        uint32_t h = 2166136261u;
        for (int i = 0; i < 16; i++)
                h = (h ^ addr->s6_addr[i]) * 16777619u;
        return h & (p->n_buckets - 1);
}

static size_t bucket_host(const struct ipam *p, const char *host_ifname) {
        return ipam_index_hash(host_ifname, NULL, 1) & (p->n_buckets - 1);
}

void ipam_index_insert(struct ipam *p, struct ipam_node *n) {
        size_t b = bucket_id(p, n->a.container_id, n->a.ifname);
        n->next_id = p->by_id[b];
        p->by_id[b] = n;
        b = bucket_addr(p, n->a.addr);
        n->next_addr = p->by_addr[b];
        p->by_addr[b] = n;
        if (n->a.has_addr6) {
                b = bucket_addr6(p, &n->a.addr6);
                n->next_addr6 = p->by_addr6[b];
                p->by_addr6[b] = n;
        }
        b = bucket_host(p, n->a.host_ifname);
        n->next_host = p->by_host[b];
        p->by_host[b] = n;
}

void ipam_index_insert_host(struct ipam *p, struct ipam_node *n) {
        size_t b = bucket_host(p, n->a.host_ifname);
        n->next_host = p->by_host[b];
        p->by_host[b] = n;
}

void ipam_index_remove_host(struct ipam *p, struct ipam_node *n) {
        for (struct ipam_node **i = &p->by_host[bucket_host(p, n->a.host_ifname)]; *i; i = &(*i)->next_host)
                if (*i == n) {
                        *i = n->next_host;
                        return;
                }
}

void ipam_index_remove(struct ipam *p, struct ipam_node *n) {
        struct ipam_node **i;
        for (i = &p->by_id[bucket_id(p, n->a.container_id, n->a.ifname)]; *i; i = &(*i)->next_id)
                if (*i == n) {
                        *i = n->next_id;
                        break;
                }
        for (i = &p->by_addr[bucket_addr(p, n->a.addr)]; *i; i = &(*i)->next_addr)
                if (*i == n) {
                        *i = n->next_addr;
                        break;
                }
        for (i = n->a.has_addr6 ? &p->by_addr6[bucket_addr6(p, &n->a.addr6)] : NULL; i && *i; i = &(*i)->next_addr6)
                if (*i == n) {
                        *i = n->next_addr6;
                        break;
                }
        ipam_index_remove_host(p, n);
}

static int rehash(struct ipam *p, size_t n_buckets) {
        struct ipam_node **id = calloc(n_buckets, sizeof(*id)), **addr = calloc(n_buckets, sizeof(*addr)),
                         **addr6 = calloc(n_buckets, sizeof(*addr6)), **host = calloc(n_buckets, sizeof(*host));
        if (!id || !addr || !addr6 || !host) {
                free(id);
                free(addr);
                free(addr6);
                free(host);
                return -ENOMEM;
        }
        free(p->by_id);
        free(p->by_addr);
        free(p->by_addr6);
        free(p->by_host);
        p->by_id = id;
        p->by_addr = addr;
        p->by_addr6 = addr6;
        p->by_host = host;
        p->n_buckets = n_buckets;
        for (size_t i = 0; i < p->n_nodes; i++)
                ipam_index_insert(p, p->nodes[i]);
        return 0;
}

static void *grow(void *array, size_t *allocated, size_t need, size_t size) {
        if (need <= *allocated)
                return array;
        size_t n = MAX(need, MAX(*allocated * 2, 16u));
        void *g = reallocarray(array, n, size);
        if (g)
                *allocated = n;
        return g;
}

int ipam_index_reserve(struct ipam *p, size_t nodes, size_t quarantined, size_t deleting) {
        size_t need = p->n_nodes + nodes;
        void *g;

        if (!(g = grow(p->nodes, &p->n_nodes_allocated, need, sizeof(*p->nodes))))
                return -ENOMEM;
        p->nodes = g;
        if (need > p->n_buckets) {
                size_t b = MAX(p->n_buckets, 64u);
                while (b < need)
                        b *= 2;
                if (rehash(p, b * 2) < 0)
                        return -ENOMEM;
        }
        if (p->q_len + quarantined > p->q_allocated) {
                /* A ring: unrolled into a new array from its head. */
                size_t n = MAX(p->q_len + quarantined, MAX(p->q_allocated * 2, 16u));
                struct quarantined *q = calloc(n, sizeof(*q));
                if (!q)
                        return -ENOMEM;
                for (size_t i = 0; i < p->q_len; i++)
                        q[i] = p->q[(p->q_head + i) % p->q_allocated];
                free(p->q);
                p->q = q;
                p->q_head = 0;
                p->q_allocated = n;
        }
        if (!(g = grow(p->deleting, &p->n_deleting_allocated, p->n_deleting + deleting, sizeof(char *))))
                return -ENOMEM;
        p->deleting = g;
        return 0;
}

struct ipam_node *ipam_index_find(const struct ipam *p, const char *container_id, const char *ifname) {
        if (!p || !container_id || !ifname || p->n_buckets == 0)
                return NULL;
        for (struct ipam_node *n = p->by_id[bucket_id(p, container_id, ifname)]; n; n = n->next_id)
                if (streq(n->a.container_id, container_id) && streq(n->a.ifname, ifname))
                        return n;
        return NULL;
}

struct ipam_node *ipam_index_find_addr(const struct ipam *p, uint32_t addr) {
        if (!p || p->n_buckets == 0)
                return NULL;
        for (struct ipam_node *n = p->by_addr[bucket_addr(p, addr)]; n; n = n->next_addr)
                if (n->a.addr == addr)
                        return n;
        return NULL;
}

struct ipam_node *ipam_index_find_addr6(const struct ipam *p, const struct in6_addr *addr) {
        if (!p || p->n_buckets == 0)
                return NULL;
        for (struct ipam_node *n = p->by_addr6[bucket_addr6(p, addr)]; n; n = n->next_addr6)
                if (n->a.has_addr6 && memcmp(&n->a.addr6, addr, sizeof(*addr)) == 0)
                        return n;
        return NULL;
}

/* Whether an allocation has that host interface name. */
bool ipam_index_host_taken(const struct ipam *p, const char *name) {
        if (p->n_buckets > 0)
                for (struct ipam_node *n = p->by_host[bucket_host(p, name)]; n; n = n->next_host)
                        if (streq(n->a.host_ifname, name))
                                return true;
        return false;
}
