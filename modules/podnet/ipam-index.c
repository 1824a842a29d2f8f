/* SPDX-License-Identifier: MIT */
/* The pool's addresses and its index: address and CIDR parsing, the IPv6 pool's offsets, the
 * allocation nodes and their hash tables (by attachment, address, host interface name). See
 * ipam.h and ipam-internal.h. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipam-internal.h"

void ipam_format_addr(uint32_t addr, char buf[16]) {
        struct in_addr in = { .s_addr = htonl(addr) };
        if (!inet_ntop(AF_INET, &in, buf, 16))
                buf[0] = '\0';
}

int ipam_parse_addr(const char *s, uint32_t *ret) {
        struct in_addr in;
        if (!s || inet_pton(AF_INET, s, &in) != 1)
                return -EINVAL;
        *ret = ntohl(in.s_addr);
        return 0;
}

void ipam_format_addr6(const struct in6_addr *addr, char buf[INET6_ADDRSTRLEN]) {
        if (!inet_ntop(AF_INET6, addr, buf, INET6_ADDRSTRLEN))
                buf[0] = '\0';
}

int ipam_parse_cidr6(const char *cidr, struct in6_addr *ret_network, unsigned *ret_prefix) {
        char addr[INET6_ADDRSTRLEN + 1], extra;
        struct in6_addr a;
        unsigned prefix;

        if (!cidr || sscanf(cidr, "%46[0-9a-fA-F:.]/%u%c", addr, &prefix, &extra) != 2 || prefix < 48 || prefix > 126 ||
            inet_pton(AF_INET6, addr, &a) != 1)
                return -EINVAL;
        for (unsigned i = 0; i < 16; i++) {
                unsigned bits = prefix > i * 8 ? MIN(8u, prefix - i * 8) : 0;
                a.s6_addr[i] &= (uint8_t) (0xff00u >> bits);
        }
        *ret_network = a;
        *ret_prefix = prefix;
        return 0;
}

int ipam_parse_pod_cidrs(const char *s, char **ret_v4, char **ret_v6, const char **reason) {
        _cleanup_free_ char *copy = s ? strdup(s) : NULL, *v4 = NULL, *v6 = NULL;
        char *save = NULL;

        if (!copy)
                return s ? -ENOMEM : -EINVAL;
        for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
                struct in6_addr n6;
                uint32_t n4;
                unsigned prefix;
                bool six = strchr(t, ':');
                if (six ? ipam_parse_cidr6(t, &n6, &prefix) < 0 : ipam_parse_cidr(t, &n4, &prefix) < 0) {
                        *reason = six ? "expected an IPv6 CIDR such as fd00:1::/64 (prefix /48 to /126)"
                                      : "expected an IPv4 CIDR such as 10.1.2.0/24 (prefix /8 to /30)";
                        return -EINVAL;
                }
                char **slot = six ? &v6 : &v4;
                if (*slot) {
                        *reason = "at most one IPv4 and one IPv6 CIDR";
                        return -EINVAL;
                }
                if (!(*slot = strdup(t)))
                        return -ENOMEM;
        }
        if (!v4 && !v6) {
                *reason = "expected an IPv4 and/or an IPv6 CIDR";
                return -EINVAL;
        }
        *ret_v4 = TAKE_PTR(v4);
        *ret_v6 = TAKE_PTR(v6);
        return 0;
}

int ipam_parse_cidr(const char *cidr, uint32_t *ret_network, unsigned *ret_prefix) {
        char addr[INET_ADDRSTRLEN + 1], extra;
        unsigned prefix;
        uint32_t a;

        if (!cidr || sscanf(cidr, "%16[0-9.]/%u%c", addr, &prefix, &extra) != 2 || prefix < 8 || prefix > 30 ||
            ipam_parse_addr(addr, &a) < 0)
                return -EINVAL;
        *ret_network = a & (UINT32_MAX << (32 - prefix));
        *ret_prefix = prefix;
        return 0;
}

bool ipam_in_pool(const struct ipam *p, uint32_t a) {
        return a > p->network && a < p->broadcast;
}

static uint32_t low32(const struct in6_addr *a) {
        return (uint32_t) a->s6_addr[12] << 24 | (uint32_t) a->s6_addr[13] << 16 | (uint32_t) a->s6_addr[14] << 8 |
               a->s6_addr[15];
}

uint32_t ipam_offset6(const struct ipam *p, const struct in6_addr *a) {
        /* (Pools hold at most 2^16 addresses: only the last 32 bits differ within one.) */
        if (p->size6 == 0 || memcmp(a->s6_addr, p->network6.s6_addr, 12) != 0)
                return 0;
        uint32_t off = low32(a) - low32(&p->network6);
        return off >= 1 && off <= p->size6 ? off : 0;
}

void ipam_addr6_at(const struct ipam *p, uint32_t offset, struct in6_addr *ret) {
        uint32_t v = low32(&p->network6) + offset;
        *ret = p->network6;
        ret->s6_addr[12] = (uint8_t) (v >> 24);
        ret->s6_addr[13] = (uint8_t) (v >> 16);
        ret->s6_addr[14] = (uint8_t) (v >> 8);
        ret->s6_addr[15] = (uint8_t) v;
}

static int set_string(char **dst, const char *v) {
        char *c = NULL;
        if (v && !(c = strdup(v)))
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

/* ---- nodes and their hash tables ---- */

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

/* FNV-1a: stable across restarts and builds, so a host interface name can be found again. */
static uint32_t fnv1a(const char *a, const char *b, unsigned salt) {
        uint32_t h = 2166136261u;
        for (const char *s = a; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        h = (h ^ '/') * 16777619u;
        for (const char *s = b; s && *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        return (h ^ salt) * 16777619u;
}

static size_t bucket_id(const struct ipam *p, const char *container_id, const char *ifname) {
        return fnv1a(container_id, ifname, 0) & (p->n_buckets - 1);
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
        return fnv1a(host_ifname, NULL, 1) & (p->n_buckets - 1);
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

/* Room for that many more of each, so that the apply step cannot fail. */
int ipam_reserve(struct ipam *p, size_t nodes, size_t quarantined, size_t deleting) {
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

struct ipam_node *ipam_node_find(const struct ipam *p, const char *container_id, const char *ifname) {
        if (!p || !container_id || !ifname || p->n_buckets == 0)
                return NULL;
        for (struct ipam_node *n = p->by_id[bucket_id(p, container_id, ifname)]; n; n = n->next_id)
                if (streq(n->a.container_id, container_id) && streq(n->a.ifname, ifname))
                        return n;
        return NULL;
}

struct ipam_node *ipam_node_find_addr(const struct ipam *p, uint32_t addr) {
        if (!p || p->n_buckets == 0)
                return NULL;
        for (struct ipam_node *n = p->by_addr[bucket_addr(p, addr)]; n; n = n->next_addr)
                if (n->a.addr == addr)
                        return n;
        return NULL;
}

struct ipam_node *ipam_node_find_addr6(const struct ipam *p, const struct in6_addr *addr) {
        if (!p || p->n_buckets == 0)
                return NULL;
        for (struct ipam_node *n = p->by_addr6[bucket_addr6(p, addr)]; n; n = n->next_addr6)
                if (n->a.has_addr6 && memcmp(&n->a.addr6, addr, sizeof(*addr)) == 0)
                        return n;
        return NULL;
}

static bool host_ifname_taken(const struct ipam *p, const char *name) {
        if (p->n_buckets > 0)
                for (struct ipam_node *n = p->by_host[bucket_host(p, name)]; n; n = n->next_host)
                        if (streq(n->a.host_ifname, name))
                                return true;
        /* (Deletions in flight: a handful, bounded by what the reaper has queued.) */
        for (size_t i = 0; i < p->n_deleting; i++)
                if (streq(p->deleting[i], name))
                        return true;
        return false;
}

const struct ipam_allocation *ipam_find_addr6(const struct ipam *p, const struct in6_addr *addr) {
        struct ipam_node *n = ipam_node_find_addr6(p, addr);
        return n ? &n->a : NULL;
}

const struct ipam_allocation *ipam_find(const struct ipam *p, const char *container_id, const char *ifname) {
        struct ipam_node *n = ipam_node_find(p, container_id, ifname);
        return n ? &n->a : NULL;
}

const struct ipam_allocation *ipam_find_addr(const struct ipam *p, uint32_t addr) {
        struct ipam_node *n = ipam_node_find_addr(p, addr);
        return n ? &n->a : NULL;
}

int ipam_host_ifname(const struct ipam *p, const char *container_id, const char *ifname, char ret[16]) {
        const struct ipam_allocation *a = ipam_find(p, container_id, ifname);

        if (a) {
                snprintf(ret, 16, "%s", a->host_ifname);
                return 0;
        }
        for (unsigned salt = 0; salt < 64; salt++) {
                snprintf(ret, 16, "pin%08x", fnv1a(container_id, ifname, salt));
                if (!p || !host_ifname_taken(p, ret))
                        return 0;
        }
        return -EADDRINUSE;
}
