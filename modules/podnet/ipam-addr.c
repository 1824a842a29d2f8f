/* SPDX-License-Identifier: MIT */
/* Addresses as the pools see them: IPv4 addresses in host byte order, CIDRs (the prefix lengths
 * a pool may have), the IPv6 pool's offsets. See ipam.h and ipam-internal.h. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ipam-internal.h"

void ipam_addr_format(uint32_t addr, char buf[16]) {
        struct in_addr in = { .s_addr = htonl(addr) };
        if (!inet_ntop(AF_INET, &in, buf, 16))
                buf[0] = '\0';
}

int ipam_addr_parse(const char *s, uint32_t *ret) {
        struct in_addr in;
        if (!s || inet_pton(AF_INET, s, &in) != 1)
                return -EINVAL;
        *ret = ntohl(in.s_addr);
        return 0;
}

void ipam_addr_format6(const struct in6_addr *addr, char buf[INET6_ADDRSTRLEN]) {
        if (!inet_ntop(AF_INET6, addr, buf, INET6_ADDRSTRLEN))
                buf[0] = '\0';
}

int ipam_addr_parse_cidr6(const char *cidr, struct in6_addr *ret_network, unsigned *ret_prefix) {
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

int ipam_addr_parse_pod_cidrs(const char *s, char **ret_v4, char **ret_v6, const char **reason) {
        _cleanup_free_ char *copy = s ? strdup(s) : NULL, *v4 = NULL, *v6 = NULL;
        char *save = NULL;

        if (!copy)
                return s ? -ENOMEM : -EINVAL;
        for (char *t = strtok_r(copy, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
                struct in6_addr n6;
                uint32_t n4;
                unsigned prefix;
                bool six = strchr(t, ':');
                if (six ? ipam_addr_parse_cidr6(t, &n6, &prefix) < 0 : ipam_addr_parse_cidr(t, &n4, &prefix) < 0) {
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

int ipam_addr_parse_cidr(const char *cidr, uint32_t *ret_network, unsigned *ret_prefix) {
        char addr[INET_ADDRSTRLEN + 1], extra;
        unsigned prefix;
        uint32_t a;

        if (!cidr || sscanf(cidr, "%16[0-9.]/%u%c", addr, &prefix, &extra) != 2 || prefix < 8 || prefix > 30 ||
            ipam_addr_parse(addr, &a) < 0)
                return -EINVAL;
        *ret_network = a & (UINT32_MAX << (32 - prefix));
        *ret_prefix = prefix;
        return 0;
}

bool ipam_addr_in_pool(const struct ipam *p, uint32_t a) {
        return a > p->network && a < p->broadcast;
}

static uint32_t low32(const struct in6_addr *a) {
        return (uint32_t) a->s6_addr[12] << 24 | (uint32_t) a->s6_addr[13] << 16 | (uint32_t) a->s6_addr[14] << 8 |
               a->s6_addr[15];
}

uint32_t ipam_addr_offset6(const struct ipam *p, const struct in6_addr *a) {
        /* (Pools hold at most 2^16 addresses: only the last 32 bits differ within one.) */
        if (p->size6 == 0 || memcmp(a->s6_addr, p->network6.s6_addr, 12) != 0)
                return 0;
        uint32_t off = low32(a) - low32(&p->network6);
        return off >= 1 && off <= p->size6 ? off : 0;
}

void ipam_addr_at_offset6(const struct ipam *p, uint32_t offset, struct in6_addr *ret) {
        uint32_t v = low32(&p->network6) + offset;
        *ret = p->network6;
        ret->s6_addr[12] = (uint8_t) (v >> 24);
        ret->s6_addr[13] = (uint8_t) (v >> 16);
        ret->s6_addr[14] = (uint8_t) (v >> 8);
        ret->s6_addr[15] = (uint8_t) v;
}
