/* SPDX-License-Identifier: MIT */
/* The IPv6 half of a pod's wiring: a routed /128 beside (or instead of) the /32, the pod's
 * default route via the host end's link-local address. See wire.h. No DAD anywhere: the pod's
 * address is pinion's alone, and a tentative address would hold the pod's traffic back ~1s. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <linux/if_addr.h>
#include <linux/neighbour.h>
#include <linux/rtnetlink.h>

#include "cni.h"
#include "routes.h"
#include "wire-internal.h"

static struct in6_addr gateway(void) {
        struct in6_addr gw;
        (void) inet_pton(AF_INET6, WIRE6_GATEWAY, &gw);
        return gw;
}

int wire6_host_sysctls(const char *host_ifname) {
        static const char *const settings[][2] = {
                { "addr_gen_mode", "1" }, /* no link-local of its own: WIRE6_GATEWAY is added */
                { "accept_ra", "0" },
                { "disable_ipv6", "0" },
        };
        char key[128];

        for (size_t i = 0; i < ELEMENTSOF(settings); i++) {
                snprintf(key, sizeof(key), "net/ipv6/conf/%s/%s", host_ifname, settings[i][0]);
                int r = wire_sysctl_write(key, settings[i][1]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int addr6_add(struct nl *nl, int index, const struct in6_addr *a, unsigned prefixlen) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));

        ifa->ifa_family = AF_INET6;
        ifa->ifa_prefixlen = (unsigned char) prefixlen;
        ifa->ifa_flags = IFA_F_NODAD;
        ifa->ifa_scope = IN6_IS_ADDR_LINKLOCAL(a) ? RT_SCOPE_LINK : RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned) index;
        mnl_attr_put(nlh, IFA_LOCAL, sizeof(*a), a);
        mnl_attr_put(nlh, IFA_ADDRESS, sizeof(*a), a);
        mnl_attr_put_u32(nlh, IFA_FLAGS, IFA_F_NODAD);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

static int route6_add(struct nl *nl, const struct in6_addr *dst, unsigned dst_len, const struct in6_addr *gw, int oif) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

        rtm->rtm_family = AF_INET6;
        rtm->rtm_dst_len = (unsigned char) dst_len;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = PINION_RTPROT;
        rtm->rtm_scope = RT_SCOPE_UNIVERSE;
        rtm->rtm_type = RTN_UNICAST;
        if (dst_len > 0)
                mnl_attr_put(nlh, RTA_DST, sizeof(*dst), dst);
        if (gw)
                mnl_attr_put(nlh, RTA_GATEWAY, sizeof(*gw), gw);
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t) oif);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

static int neigh6_add(struct nl *nl, int index, const struct in6_addr *addr, const char *mac) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof(*nd));
        uint8_t ll[6];

        if (cni_mac_parse(mac, ll) < 0)
                return -EINVAL;
        nd->ndm_family = AF_INET6;
        nd->ndm_ifindex = index;
        nd->ndm_state = NUD_PERMANENT;
        mnl_attr_put(nlh, NDA_DST, sizeof(*addr), addr);
        mnl_attr_put(nlh, NDA_LLADDR, sizeof(ll), ll);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

int wire6_add_host(struct nl *host, int host_index, const struct in6_addr *pod) {
        struct in6_addr gw = gateway();
        int r = addr6_add(host, host_index, &gw, 64);
        return r < 0 ? r : route6_add(host, pod, 128, NULL, host_index);
}

int wire6_add_pod_addr(struct nl *pod, int pod_index, const struct in6_addr *addr) {
        return addr6_add(pod, pod_index, addr, 128);
}

int wire6_add_pod_routes(struct nl *pod, int pod_index, const char *host_mac) {
        struct in6_addr gw = gateway();
        int r = neigh6_add(pod, pod_index, &gw, host_mac);
        return r < 0 ? r : route6_add(pod, NULL, 0, &gw, pod_index);
}

/* ---- CHECK ---- */

struct query6 {
        int index;
        unsigned len;
        const struct in6_addr *addr, *gw; /* gw NULL: none */
        bool found;
};

static bool attr_is(const struct nlattr *a, const struct in6_addr *want) {
        return want && mnl_attr_get_payload_len(a) == sizeof(*want) && memcmp(mnl_attr_get_payload(a), want, sizeof(*want)) == 0;
}

struct route6_attrs {
        const struct query6 *q;
        bool dst, gw;
        int oif;
        uint32_t table;
};

static int route6_attr_cb(const struct nlattr *a, void *data) {
        struct route6_attrs *ra = data;
        switch (mnl_attr_get_type(a)) {
        case RTA_DST:
                ra->dst = attr_is(a, ra->q->addr);
                break;
        case RTA_GATEWAY:
                ra->gw = attr_is(a, ra->q->gw);
                break;
        case RTA_OIF:
                if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                        ra->oif = (int) mnl_attr_get_u32(a);
                break;
        case RTA_TABLE:
                if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                        ra->table = mnl_attr_get_u32(a);
                break;
        }
        return MNL_CB_OK;
}

static int route6_cb(const struct nlmsghdr *nlh, void *data) {
        struct query6 *q = data;
        const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
        struct route6_attrs ra = { .q = q };

        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*rtm) || rtm->rtm_family != AF_INET6 || rtm->rtm_dst_len != q->len)
                return MNL_CB_OK;
        ra.table = rtm->rtm_table;
        mnl_attr_parse(nlh, sizeof(*rtm), route6_attr_cb, &ra);
        if (ra.table == RT_TABLE_MAIN && ra.oif == q->index && (q->len == 0 || ra.dst) && (!q->gw || ra.gw))
                q->found = true;
        return MNL_CB_OK;
}

static int addr6_attr_cb(const struct nlattr *a, void *data) {
        struct query6 *q = data;
        if ((mnl_attr_get_type(a) == IFA_ADDRESS || mnl_attr_get_type(a) == IFA_LOCAL) && attr_is(a, q->addr))
                q->found = true;
        return MNL_CB_OK;
}

static int addr6_cb(const struct nlmsghdr *nlh, void *data) {
        struct query6 *q = data;
        const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);

        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifa) || ifa->ifa_family != AF_INET6 ||
            (int) ifa->ifa_index != q->index || ifa->ifa_prefixlen != q->len)
                return MNL_CB_OK;
        mnl_attr_parse(nlh, sizeof(*ifa), addr6_attr_cb, q);
        return MNL_CB_OK;
}

static int dump6(struct nl *nl, uint16_t type, struct query6 *q) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, type, NLM_F_DUMP);

        if (type == RTM_GETROUTE) {
                struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
                rtm->rtm_family = AF_INET6;
                return wire_nl_talk(nl, nlh, route6_cb, q);
        }
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET6;
        return wire_nl_talk(nl, nlh, addr6_cb, q);
}

int wire6_check_host(struct nl *host, int host_index, const struct wire_params *p, char **ret_drift) {
        struct in6_addr gw = gateway();
        struct query6 route = { .index = host_index, .len = 128, .addr = &p->addr6 };
        struct query6 addr = { .index = host_index, .len = 64, .addr = &gw };
        char ip[INET6_ADDRSTRLEN];
        int r;

        inet_ntop(AF_INET6, &p->addr6, ip, sizeof(ip));
        if ((r = dump6(host, RTM_GETROUTE, &route)) < 0 || (r = dump6(host, RTM_GETADDR, &addr)) < 0)
                return r;
        if (!route.found)
                return wire_drift(ret_drift, "host route %s/128 dev %s is missing", ip, p->host_ifname);
        if (!addr.found)
                return wire_drift(ret_drift, "the gateway address " WIRE6_GATEWAY "/64 is missing on %s", p->host_ifname);
        return 0;
}

int wire6_check_pod(struct nl *pod, int pod_index, const struct wire_params *p, char **ret_drift) {
        struct in6_addr gw = gateway();
        struct query6 addr = { .index = pod_index, .len = 128, .addr = &p->addr6 };
        struct query6 route = { .index = pod_index, .len = 0, .gw = &gw };
        char ip[INET6_ADDRSTRLEN];
        int r;

        inet_ntop(AF_INET6, &p->addr6, ip, sizeof(ip));
        if ((r = dump6(pod, RTM_GETADDR, &addr)) < 0 || (r = dump6(pod, RTM_GETROUTE, &route)) < 0)
                return r;
        if (!addr.found)
                return wire_drift(ret_drift, "address %s/128 is missing on %s", ip, p->ifname);
        if (!route.found)
                return wire_drift(ret_drift, "default route via " WIRE6_GATEWAY " dev %s is missing", p->ifname);
        return 0;
}
