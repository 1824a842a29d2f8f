/* SPDX-License-Identifier: MIT */
/* Node routes over rtnetlink with libmnl. See routes.h. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>

#include "macro.h"
#include "routes.h"
#include "wire-internal.h"

static size_t addr_size(int family) {
        return family == AF_INET ? 4 : 16;
}

/* ---- the dump ---- */

struct dump {
        struct route *routes;
        size_t n, allocated;
        int error;
};

struct route_attrs {
        const struct nlattr *dst, *gateway, *multipath;
        uint32_t table, priority;
};

static int route_attr_cb(const struct nlattr *a, void *data) {
        struct route_attrs *ra = data;
        switch (mnl_attr_get_type(a)) {
        case RTA_DST:
                ra->dst = a;
                break;
        case RTA_GATEWAY:
                ra->gateway = a;
                break;
        case RTA_MULTIPATH:
                ra->multipath = a;
                break;
        case RTA_TABLE:
                if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                        ra->table = mnl_attr_get_u32(a);
                break;
        case RTA_PRIORITY:
                if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                        ra->priority = mnl_attr_get_u32(a);
                break;
        }
        return MNL_CB_OK;
}

static bool attr_addr(const struct nlattr *a, int family, struct in6_addr *ret) {
        if (!a || mnl_attr_get_payload_len(a) != addr_size(family))
                return false;
        memcpy(ret, mnl_attr_get_payload(a), addr_size(family));
        return true;
}

static int dump_append(struct dump *d, const struct route *r) {
        if (d->n == d->allocated) {
                size_t n = d->allocated ? d->allocated * 2 : 16;
                struct route *a = reallocarray(d->routes, n, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                d->routes = a;
                d->allocated = n;
        }
        d->routes[d->n++] = *r;
        return 0;
}

static int dump_cb(const struct nlmsghdr *nlh, void *data) {
        struct dump *d = data;
        const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
        struct route_attrs ra = {};
        struct route r = {};

        if (nlh->nlmsg_type != RTM_NEWROUTE || mnl_nlmsg_get_payload_len(nlh) < sizeof(*rtm))
                return MNL_CB_OK;
        if ((rtm->rtm_family != AF_INET && rtm->rtm_family != AF_INET6) || rtm->rtm_protocol != PINION_RTPROT ||
            (rtm->rtm_flags & RTM_F_CLONED) || rtm->rtm_tos != 0)
                return MNL_CB_OK;
        ra.table = rtm->rtm_table;
        mnl_attr_parse(nlh, sizeof(*rtm), route_attr_cb, &ra);
        if (ra.table != RT_TABLE_MAIN)
                return MNL_CB_OK;
        r.family = rtm->rtm_family;
        r.dst_len = rtm->rtm_dst_len;
        r.type = rtm->rtm_type;
        r.priority = ra.priority;
        if (r.dst_len > 0 && !attr_addr(ra.dst, r.family, &r.dst))
                return MNL_CB_OK;
        r.has_gateway = attr_addr(ra.gateway, r.family, &r.gateway) || ra.multipath;
        /* A pod's own route is a device route to its veth: not a node route. */
        if (!r.has_gateway && r.type != RTN_UNREACHABLE)
                return MNL_CB_OK;
        d->error = dump_append(d, &r);
        return d->error < 0 ? MNL_CB_ERROR : MNL_CB_OK;
}

static int dump_family(struct nl *nl, int family, struct dump *d) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_GETROUTE, NLM_F_DUMP);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

        rtm->rtm_family = (unsigned char) family;
        int r = wire_nl_talk(nl, nlh, dump_cb, d);
        return d->error < 0 ? d->error : r;
}

int routes_dump(struct nl *nl, struct route **ret, size_t *ret_n) {
        struct dump d = {};
        int r;

        r = dump_family(nl, AF_INET, &d);
        if (r >= 0)
                r = dump_family(nl, AF_INET6, &d);
        if (r < 0) {
                free(d.routes);
                return r;
        }
        *ret = d.routes;
        *ret_n = d.n;
        return 0;
}

/* ---- changes ---- */

static struct nlmsghdr *route_msg(char *buf, uint16_t type, uint16_t flags, const struct route *r) {
        struct nlmsghdr *nlh = wire_msg_new(buf, type, flags | NLM_F_ACK);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

        rtm->rtm_family = (unsigned char) r->family;
        rtm->rtm_dst_len = r->dst_len;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = PINION_RTPROT;
        /* A deletion matches any scope; an added route is global. */
        rtm->rtm_scope = type == RTM_DELROUTE ? RT_SCOPE_NOWHERE : RT_SCOPE_UNIVERSE;
        rtm->rtm_type = r->type;
        if (r->dst_len > 0)
                mnl_attr_put(nlh, RTA_DST, addr_size(r->family), &r->dst);
        if (r->has_gateway && r->type == RTN_UNICAST)
                mnl_attr_put(nlh, RTA_GATEWAY, addr_size(r->family), &r->gateway);
        if (r->priority > 0)
                mnl_attr_put_u32(nlh, RTA_PRIORITY, r->priority);
        return nlh;
}

int routes_add(struct nl *nl, const struct route *r) {
        char buf[MSG_BUF_SIZE];
        return wire_nl_talk(nl, route_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL, r), NULL, NULL);
}

int routes_replace(struct nl *nl, const struct route *r) {
        char buf[MSG_BUF_SIZE];
        return wire_nl_talk(nl, route_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, r), NULL, NULL);
}

int routes_delete(struct nl *nl, const struct route *r) {
        char buf[MSG_BUF_SIZE];
        /* A multipath route of pinion's (made by hand) is matched without its gateway. */
        struct route key = *r;
        if (key.has_gateway && !memcmp(&key.gateway, &(struct in6_addr) {}, sizeof(key.gateway)))
                key.has_gateway = false;
        int k = wire_nl_talk(nl, route_msg(buf, RTM_DELROUTE, 0, &key), NULL, NULL);
        return k == -ESRCH || k == -ENOENT ? 0 : k;
}

/* ---- the kernel's own route to an address ---- */

struct lookup {
        bool found;
        unsigned char type;
        bool has_gateway;
        struct in6_addr gateway;
        int family;
};

static int lookup_cb(const struct nlmsghdr *nlh, void *data) {
        struct lookup *l = data;
        const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
        struct route_attrs ra = {};

        if (nlh->nlmsg_type != RTM_NEWROUTE || mnl_nlmsg_get_payload_len(nlh) < sizeof(*rtm))
                return MNL_CB_OK;
        mnl_attr_parse(nlh, sizeof(*rtm), route_attr_cb, &ra);
        l->found = true;
        l->type = rtm->rtm_type;
        l->has_gateway = attr_addr(ra.gateway, l->family, &l->gateway) || ra.multipath;
        return MNL_CB_OK;
}

int routes_gateway_connected(struct nl *nl, int family, const struct in6_addr *addr, struct in6_addr *ret_via) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_GETROUTE, NLM_F_ACK); /* the route, then the ACK */
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        struct lookup l = { .family = family };
        int r;

        rtm->rtm_family = (unsigned char) family;
        rtm->rtm_dst_len = (unsigned char) (addr_size(family) * 8);
        mnl_attr_put(nlh, RTA_DST, addr_size(family), addr);
        r = wire_nl_talk(nl, nlh, lookup_cb, &l);
        if (r == -EHOSTUNREACH)
                r = -ENETUNREACH;
        if (r < 0)
                return r;
        if (!l.found)
                return -ENETUNREACH;
        if (l.type == RTN_UNREACHABLE || l.type == RTN_PROHIBIT || l.type == RTN_BLACKHOLE)
                return -ENETUNREACH;
        if (l.has_gateway && ret_via)
                *ret_via = l.gateway;
        return !l.has_gateway && l.type == RTN_UNICAST;
}
