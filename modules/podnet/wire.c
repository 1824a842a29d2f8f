/* SPDX-License-Identifier: MIT */
/* veth + routed /32 over rtnetlink with libmnl. See wire.h. */

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/ip.h>
#include <linux/magic.h>
#include <linux/neighbour.h>
#include <linux/nsfs.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "cni.h"
#include "routes.h"
#include "wire-internal.h"

#define NL_BUF_SIZE 32768
#define ALIAS_SIZE 256 /* IFALIASZ: 255 bytes and the NUL */
/* The kernel answers a request at once; a reply that does not come in this time is lost (the
 * loop must not wait for it forever). */
#define NL_RECV_TIMEOUT_SEC 5

void wire_nl_close(struct nl *nl) {
        if (nl->sock)
                mnl_socket_close(nl->sock);
        nl->sock = NULL;
}

int wire_nl_open(struct nl *nl) {
        nl->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (!nl->sock)
                return negative_errno();
        if (mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
                int r = negative_errno();
                wire_nl_close(nl);
                return r;
        }
        struct timeval tv = { .tv_sec = NL_RECV_TIMEOUT_SEC };
        if (setsockopt(mnl_socket_get_fd(nl->sock), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
                int r = negative_errno();
                wire_nl_close(nl);
                return r;
        }
        nl->portid = mnl_socket_get_portid(nl->sock);
        nl->seq = (unsigned) time(NULL);
        return 0;
}

/* A netlink socket in the namespace netns_fd (from wire_netns_open()): setns there, open, setns
 * back. If going back fails the thread is stranded in a pod's namespace, which nothing can
 * repair: abort. */
static int nl_open_in(struct nl *nl, int host_netns_fd, int netns_fd) {
        int r;

        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return negative_errno();
        r = wire_nl_open(nl);
        if (setns(host_netns_fd, CLONE_NEWNET) < 0)
                abort();
        return r;
}

/* Sends one request and reads until its ACK (or the end of its dump), calling cb per message. */
int wire_nl_talk(struct nl *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data) {
        _cleanup_free_ char *buf = malloc(NL_BUF_SIZE);
        unsigned seq = ++nl->seq;
        int r;

        if (!buf)
                return -ENOMEM;
        nlh->nlmsg_seq = seq;
        if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
                return negative_errno();
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl->sock, buf, NL_BUF_SIZE);
                if (n < 0)
                        return (errno == EAGAIN || errno == EWOULDBLOCK) ? -ETIMEDOUT : negative_errno();
                r = mnl_cb_run(buf, (size_t) n, seq, nl->portid, cb, data);
                if (r < 0)
                        return negative_errno();
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

struct nlmsghdr *wire_msg_new(char *buf, uint16_t type, uint16_t flags) {
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | flags;
        return nlh;
}

/* ---- links ---- */

struct link_info {
        int index;
        int peer;                /* IFLA_LINK: a veth's peer's index (in the peer's namespace) */
        unsigned flags;
        unsigned mtu;
        char mac[18];
        char kind[16];           /* IFLA_INFO_KIND: "veth", "dummy", ...; "" if none */
        char alias[ALIAS_SIZE];  /* IFLA_IFALIAS, "" if none */
};

static void attr_copy_string(const struct nlattr *a, char *buf, size_t size) {
        if (mnl_attr_validate(a, MNL_TYPE_STRING) >= 0)
                snprintf(buf, size, "%.*s", (int) strnlen(mnl_attr_get_str(a), mnl_attr_get_payload_len(a)),
                         mnl_attr_get_str(a));
}

static int linkinfo_attr_cb(const struct nlattr *a, void *data) {
        struct link_info *li = data;
        if (mnl_attr_get_type(a) == IFLA_INFO_KIND)
                attr_copy_string(a, li->kind, sizeof(li->kind));
        return MNL_CB_OK;
}

static int link_attr_cb(const struct nlattr *a, void *data) {
        struct link_info *li = data;
        switch (mnl_attr_get_type(a)) {
        case IFLA_IFALIAS:
                attr_copy_string(a, li->alias, sizeof(li->alias));
                break;
        case IFLA_LINKINFO:
                if (mnl_attr_validate(a, MNL_TYPE_NESTED) >= 0)
                        mnl_attr_parse_nested(a, linkinfo_attr_cb, li);
                break;
        case IFLA_MTU:
                if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                        li->mtu = mnl_attr_get_u32(a);
                break;
        case IFLA_LINK:
                if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                        li->peer = (int) mnl_attr_get_u32(a);
                break;
        case IFLA_ADDRESS:
                if (mnl_attr_get_payload_len(a) == 6) {
                        const uint8_t *m = mnl_attr_get_payload(a);
                        snprintf(li->mac, sizeof(li->mac), "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3],
                                 m[4], m[5]);
                }
                break;
        }
        return MNL_CB_OK;
}

static int link_cb(const struct nlmsghdr *nlh, void *data) {
        struct link_info *li = data;
        const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
        if (nlh->nlmsg_type != RTM_NEWLINK || mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
                return MNL_CB_OK; /* truncated: not ours to read */
        li->index = ifi->ifi_index;
        li->flags = ifi->ifi_flags;
        mnl_attr_parse(nlh, sizeof(*ifi), link_attr_cb, li);
        return MNL_CB_OK;
}

static int link_get(struct nl *nl, const char *name, struct link_info *ret) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_GETLINK, NLM_F_ACK); /* the link, then the ACK */
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        struct link_info li = {};
        int r;

        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        r = wire_nl_talk(nl, nlh, link_cb, &li);
        if (r < 0)
                return r;
        if (li.index <= 0)
                return -ENODEV;
        *ret = li;
        return 0;
}

static int link_set_up(struct nl *nl, int index, unsigned mtu) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWLINK, NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));

        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = index;
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
        if (mtu > 0)
                mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

static int link_del_index(struct nl *nl, int index) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_DELLINK, NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        int r;

        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = index;
        r = wire_nl_talk(nl, nlh, NULL, NULL);
        return r == -ENODEV ? 0 : r;
}

/* The mark goes on right after the creation, in the message that brings the host end up: the
 * kernel takes no IFLA_IFALIAS in the message that creates a link. A crash in between leaves a
 * veth without a mark, which the retried ADD adopts (its allocation was recorded before the veth
 * was made: adopt_unmarked). The same message turns proxy ARP on (the host end answers for every
 * address it routes elsewhere: the pod may ARP for anything if its neighbour entry is flushed):
 * IPv4's per-interface settings travel in IFLA_AF_SPEC, no write under /proc/sys needed. */
static int link_set_mark_up(struct nl *nl, int index, const char *container_id) {
        char buf[MSG_BUF_SIZE], mark[ALIAS_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWLINK, NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        struct nlattr *af_spec, *inet, *conf;

        snprintf(mark, sizeof(mark), "%s%s", WIRE_MARK_PREFIX, container_id ? container_id : "");
        ifi->ifi_family = AF_UNSPEC;
        ifi->ifi_index = index;
        ifi->ifi_flags = IFF_UP;
        ifi->ifi_change = IFF_UP;
        mnl_attr_put_strz(nlh, IFLA_IFALIAS, mark);
        af_spec = mnl_attr_nest_start(nlh, IFLA_AF_SPEC);
        inet = mnl_attr_nest_start(nlh, AF_INET);
        conf = mnl_attr_nest_start(nlh, IFLA_INET_CONF);
        mnl_attr_put_u32(nlh, IPV4_DEVCONF_PROXY_ARP, 1);
        mnl_attr_nest_end(nlh, conf);
        mnl_attr_nest_end(nlh, inet);
        mnl_attr_nest_end(nlh, af_spec);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

static bool link_is_ours(const struct link_info *li, bool adopt_unmarked) {
        if (!streq(li->kind, "veth"))
                return false;
        if (strncmp(li->alias, WIRE_MARK_PREFIX, strlen(WIRE_MARK_PREFIX)) == 0)
                return true;
        return adopt_unmarked && li->alias[0] == 0;
}

/* Deletes the host interface by that name if it is pinion's (by its index: not whatever
 * might take the name in between); 0 if there is none, -ENOTUNIQ (nothing done) if the name
 * belongs to an interface pinion did not make. */
static int link_del_ours(struct nl *nl, const char *name, bool adopt_unmarked) {
        struct link_info li;
        int r;

        r = link_get(nl, name, &li);
        if (r == -ENODEV)
                return 0;
        if (r < 0)
                return r;
        if (!link_is_ours(&li, adopt_unmarked))
                return -ENOTUNIQ;
        return link_del_index(nl, li.index);
}

static int link_del(struct nl *nl, const char *name) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_DELLINK, NLM_F_ACK);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        int r;

        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
        r = wire_nl_talk(nl, nlh, NULL, NULL);
        return r == -ENODEV ? 0 : r;
}

/* A random locally administered unicast MAC address. */
static int random_mac(uint8_t mac[6]) {
        ssize_t n = getrandom(mac, 6, 0);
        if (n < 0)
                return negative_errno();
        if (n != 6)
                return -EIO;
        mac[0] = (uint8_t) ((mac[0] & ~0x01) | 0x02);
        return 0;
}

/* veth host_ifname <-> ifname, the peer created inside the namespace netns_fd.
 *
 * Both ends get a MAC address chosen here rather than by the kernel: udev gives a link whose
 * address the kernel chose at random another one a moment after it appears (systemd's
 * MACAddressPolicy=persistent, the default of 99-default.link), behind our back, and the pod's
 * static neighbour entry for the gateway would then name an address the host end no longer has:
 * every packet from the pod would be dropped. An address set at creation is left alone. */
static void format_mac(const uint8_t m[6], char buf[18]) {
        snprintf(buf, 18, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
}

/* ret: the new host end as the kernel echoes it (NLM_F_ECHO; index 0 from a kernel that does not
 * echo a link's creation, before 6.3), with the pod end's address in ret_pod_mac. */
static int veth_create(struct nl *nl, const char *host_ifname, const char *ifname, int netns_fd, unsigned mtu,
                       const uint8_t *want_pod_mac, struct link_info *ret, char ret_pod_mac[18]) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK | NLM_F_ECHO);
        struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
        struct nlattr *linkinfo, *data, *peer;
        struct ifinfomsg *pifi;
        uint8_t host_mac[6], pod_mac[6];
        int r;

        r = random_mac(host_mac);
        if (r >= 0 && !want_pod_mac)
                r = random_mac(pod_mac);
        if (r < 0)
                return r;
        if (want_pod_mac)
                memcpy(pod_mac, want_pod_mac, sizeof(pod_mac));
        ifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, host_ifname);
        mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
        mnl_attr_put(nlh, IFLA_ADDRESS, sizeof(host_mac), host_mac);
        /* One queue each way, on both ends: a veth otherwise gets one per possible CPU, each
         * with its sysfs objects made and removed, and then drops to one real queue, which
         * waits out an RCU grace period. Pod traffic uses one queue either way. */
        mnl_attr_put_u32(nlh, IFLA_NUM_TX_QUEUES, 1);
        mnl_attr_put_u32(nlh, IFLA_NUM_RX_QUEUES, 1);
        linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
        mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
        data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
        peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
        /* The peer's attributes follow its own struct ifinfomsg. */
        pifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*pifi));
        pifi->ifi_family = AF_UNSPEC;
        mnl_attr_put_strz(nlh, IFLA_IFNAME, ifname);
        mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
        mnl_attr_put(nlh, IFLA_ADDRESS, sizeof(pod_mac), pod_mac);
        mnl_attr_put_u32(nlh, IFLA_NUM_TX_QUEUES, 1);
        mnl_attr_put_u32(nlh, IFLA_NUM_RX_QUEUES, 1);
        mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t) netns_fd);
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, linkinfo);
        *ret = (struct link_info) {};
        r = wire_nl_talk(nl, nlh, link_cb, ret);
        if (r < 0)
                return r;
        format_mac(pod_mac, ret_pod_mac);
        return 0;
}

/* ---- addresses, routes, neighbours ---- */

static int addr_add(struct nl *nl, int index, uint32_t addr) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        uint32_t be = htonl(addr);

        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = 32;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (unsigned) index;
        mnl_attr_put_u32(nlh, IFA_LOCAL, be);
        mnl_attr_put_u32(nlh, IFA_ADDRESS, be);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

static int route_add(struct nl *nl, uint32_t dst, unsigned dst_len, uint32_t gw, int oif, unsigned char scope) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));

        rtm->rtm_family = AF_INET;
        rtm->rtm_dst_len = (unsigned char) dst_len;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = PINION_RTPROT;
        rtm->rtm_scope = scope;
        rtm->rtm_type = RTN_UNICAST;
        if (gw)
                rtm->rtm_flags = RTNH_F_ONLINK; /* the gateway is on the link, not in a subnet */
        if (dst_len > 0)
                mnl_attr_put_u32(nlh, RTA_DST, htonl(dst));
        if (gw)
                mnl_attr_put_u32(nlh, RTA_GATEWAY, htonl(gw));
        mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t) oif);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

static int neigh_add(struct nl *nl, int index, uint32_t addr, const char *mac) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_NEWNEIGH, NLM_F_CREATE | NLM_F_REPLACE | NLM_F_ACK);
        struct ndmsg *nd = mnl_nlmsg_put_extra_header(nlh, sizeof(*nd));
        uint8_t ll[6];

        if (cni_mac_parse(mac, ll) < 0)
                return -EINVAL;
        nd->ndm_family = AF_INET;
        nd->ndm_ifindex = index;
        nd->ndm_state = NUD_PERMANENT;
        mnl_attr_put_u32(nlh, NDA_DST, htonl(addr));
        mnl_attr_put(nlh, NDA_LLADDR, sizeof(ll), ll);
        return wire_nl_talk(nl, nlh, NULL, NULL);
}

/* ---- dumps, for CHECK ---- */

struct route_query {
        uint32_t dst;
        unsigned dst_len;
        uint32_t gw; /* 0: any / none */
        int oif;
        bool found;
};

struct route_attrs {
        uint32_t dst, gw, table;
        int oif;
};

static int route_attr_cb(const struct nlattr *a, void *data) {
        struct route_attrs *ra = data;
        if (mnl_attr_validate(a, MNL_TYPE_U32) < 0)
                return MNL_CB_OK;
        switch (mnl_attr_get_type(a)) {
        case RTA_DST:
                ra->dst = ntohl(mnl_attr_get_u32(a));
                break;
        case RTA_GATEWAY:
                ra->gw = ntohl(mnl_attr_get_u32(a));
                break;
        case RTA_OIF:
                ra->oif = (int) mnl_attr_get_u32(a);
                break;
        case RTA_TABLE:
                ra->table = mnl_attr_get_u32(a);
                break;
        }
        return MNL_CB_OK;
}

static int route_cb(const struct nlmsghdr *nlh, void *data) {
        struct route_query *q = data;
        const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
        struct route_attrs ra = {};

        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*rtm))
                return MNL_CB_OK;
        if (rtm->rtm_family != AF_INET || rtm->rtm_dst_len != q->dst_len)
                return MNL_CB_OK;
        ra.table = rtm->rtm_table;
        mnl_attr_parse(nlh, sizeof(*rtm), route_attr_cb, &ra);
        if (ra.table == RT_TABLE_MAIN && ra.dst == q->dst && ra.oif == q->oif && ra.gw == q->gw)
                q->found = true;
        return MNL_CB_OK;
}

static int route_exists(struct nl *nl, uint32_t dst, unsigned dst_len, uint32_t gw, int oif, bool *ret) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_GETROUTE, NLM_F_DUMP);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        struct route_query q = { .dst = dst_len ? dst : 0, .dst_len = dst_len, .gw = gw, .oif = oif };
        int r;

        rtm->rtm_family = AF_INET;
        r = wire_nl_talk(nl, nlh, route_cb, &q);
        if (r < 0)
                return r;
        *ret = q.found;
        return 0;
}

struct addr_query {
        int index;
        uint32_t addr;
        bool found;
};

static int addr_attr_cb(const struct nlattr *a, void *data) {
        uint32_t *local = data;
        if (mnl_attr_get_type(a) == IFA_LOCAL && mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
                *local = ntohl(mnl_attr_get_u32(a));
        return MNL_CB_OK;
}

static int addr_cb(const struct nlmsghdr *nlh, void *data) {
        struct addr_query *q = data;
        const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
        uint32_t local = 0;

        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifa))
                return MNL_CB_OK;
        if (ifa->ifa_family != AF_INET || (int) ifa->ifa_index != q->index || ifa->ifa_prefixlen != 32)
                return MNL_CB_OK;
        mnl_attr_parse(nlh, sizeof(*ifa), addr_attr_cb, &local);
        if (local == q->addr)
                q->found = true;
        return MNL_CB_OK;
}

static int addr_exists(struct nl *nl, int index, uint32_t addr, bool *ret) {
        char buf[MSG_BUF_SIZE];
        struct nlmsghdr *nlh = wire_msg_new(buf, RTM_GETADDR, NLM_F_DUMP);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        struct addr_query q = { .index = index, .addr = addr };
        int r;

        ifa->ifa_family = AF_INET;
        r = wire_nl_talk(nl, nlh, addr_cb, &q);
        if (r < 0)
                return r;
        *ret = q.found;
        return 0;
}

/* ---- sysctls ---- */

int wire_sysctl_write(const char *key, const char *value) {
        char path[256];
        _cleanup_close_ int fd = -EBADF;
        size_t n = strlen(value);

        if (snprintf(path, sizeof(path), "/proc/sys/%s", key) >= (int) sizeof(path))
                return -ENAMETOOLONG;
        fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (write(fd, value, n) != (ssize_t) n)
                return errno > 0 ? negative_errno() : -EIO;
        return 0;
}

/* Reads a /proc/sys file, without its trailing newline and blanks. */
static int wire_sysctl_read(const char *key, char *buf, size_t size) {
        char path[256];
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;

        if (size == 0 || snprintf(path, sizeof(path), "/proc/sys/%s", key) >= (int) sizeof(path))
                return -EINVAL;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, size - 1);
        if (n < 0)
                return negative_errno();
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
                n--;
        buf[n] = '\0';
        return 0;
}

/* Proxy ARP itself goes on with the link (link_set_mark_up()). */
static int host_sysctls(const char *host_ifname, bool v6) {
        char key[128];

        /* Proxy ARP answers at once, not after up to 0.8s. */
        snprintf(key, sizeof(key), "net/ipv4/neigh/%s/proxy_delay", host_ifname);
        (void) wire_sysctl_write(key, "0");
        if (v6)
                return wire6_host_sysctls(host_ifname);
        /* The host end carries no IPv6: no router solicitations, no link-local noise. */
        snprintf(key, sizeof(key), "net/ipv6/conf/%s/disable_ipv6", host_ifname);
        (void) wire_sysctl_write(key, "1");
        return 0;
}

/* ---- the operations ---- */

int wire_open_host_netns(void) {
        int fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        return fd < 0 ? negative_errno() : fd;
}

int wire_netns_open(const char *path, int host_netns_fd, int *ret_fd) {
        _cleanup_close_ int opath = -EBADF, fd = -EBADF;
        struct stat st, host;
        struct statfs sfs;
        char proc[64];

        /* O_PATH first: opening a FIFO, a device or anything else but a namespace file for real
         * could block (a FIFO without a writer) or have side effects (some devices). */
        opath = open(path, O_PATH | O_CLOEXEC);
        if (opath < 0)
                return negative_errno();
        if (fstatfs(opath, &sfs) < 0)
                return negative_errno();
        if ((unsigned long) sfs.f_type != (unsigned long) NSFS_MAGIC)
                return -EMEDIUMTYPE;
        /* The very inode the O_PATH descriptor holds, now readable (setns() needs that). */
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", opath);
        fd = open(proc, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNET)
                return -EMEDIUMTYPE; /* another kind of namespace (mnt, pid, ...) */
        if (fstat(fd, &st) < 0 || fstat(host_netns_fd, &host) < 0)
                return negative_errno();
        if (st.st_dev == host.st_dev && st.st_ino == host.st_ino)
                return -EBUSY; /* the host's own: wiring it would replace the host's default route */
        *ret_fd = TAKE_FD(fd);
        return 0;
}

bool wire_link_exists(const char *name) {
        return if_nametoindex(name) > 0;
}

int wire_add(int host_netns_fd, const struct wire_params *p, struct wire_result *ret) {
        struct nl host = {}, pod = {};
        struct link_info hl, pl;
        char pod_mac[18];
        int r;

        if (p->netns_fd < 0)
                return -EBADF;
        r = wire_nl_open(&host);
        if (r < 0)
                return r;

        /* A leftover host end from an earlier attempt for this attachment goes first (found by
         * the creation failing: the name is usually free); an interface pinion did not make
         * stays, and the ADD fails. */
        r = veth_create(&host, p->host_ifname, p->ifname, p->netns_fd, p->mtu, p->pod_mac, &hl, pod_mac);
        if (r == -EEXIST) {
                r = link_del_ours(&host, p->host_ifname, p->adopt_unmarked);
                if (r >= 0)
                        r = veth_create(&host, p->host_ifname, p->ifname, p->netns_fd, p->mtu, p->pod_mac, &hl, pod_mac);
        }
        if (r < 0) {
                wire_nl_close(&host);
                return r;
        }

        if (hl.index <= 0)
                r = link_get(&host, p->host_ifname, &hl); /* no echo */
        if (r >= 0)
                r = host_sysctls(p->host_ifname, p->has_addr6);
        if (r >= 0)
                r = link_set_mark_up(&host, hl.index, p->container_id);
        if (r >= 0 && p->addr)
                r = route_add(&host, p->addr, 32, 0, hl.index, RT_SCOPE_LINK);
        if (r >= 0 && p->has_addr6)
                r = wire6_add_host(&host, hl.index, &p->addr6);
        if (r >= 0)
                r = nl_open_in(&pod, host_netns_fd, p->netns_fd);
        /* The pod end's index is the host end's IFLA_LINK, unless the two are equal (then the
         * kernel leaves IFLA_LINK out). */
        pl = (struct link_info) { .index = hl.peer };
        if (r >= 0 && pl.index <= 0)
                r = link_get(&pod, p->ifname, &pl);
        if (r >= 0 && p->addr)
                r = addr_add(&pod, pl.index, p->addr);
        if (r >= 0 && p->has_addr6)
                r = wire6_add_pod_addr(&pod, pl.index, &p->addr6);
        if (r >= 0)
                r = link_set_up(&pod, pl.index, 0);
        if (r >= 0 && p->addr)
                r = neigh_add(&pod, pl.index, p->gateway, hl.mac);
        if (r >= 0 && p->addr)
                r = route_add(&pod, 0, 0, p->gateway, pl.index, RT_SCOPE_UNIVERSE);
        if (r >= 0 && p->has_addr6)
                r = wire6_add_pod_routes(&pod, pl.index, hl.mac);
        wire_nl_close(&pod);
        if (r < 0) {
                (void) link_del(&host, p->host_ifname);
                wire_nl_close(&host);
                return r;
        }
        wire_nl_close(&host);
        snprintf(ret->host_mac, sizeof(ret->host_mac), "%s", hl.mac);
        snprintf(ret->pod_mac, sizeof(ret->pod_mac), "%s", pod_mac);
        return 0;
}

int wire_del(const char *host_ifname) {
        struct nl host = {};
        int r;

        r = wire_nl_open(&host);
        if (r < 0)
                return r;
        r = link_del_ours(&host, host_ifname, true);
        wire_nl_close(&host);
        return r;
}

_printf_(2, 3) int wire_drift(char **ret, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = vasprintf(ret, format, ap);
        va_end(ap);
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return -EUCLEAN;
}

int wire_check(int host_netns_fd, const struct wire_params *p, char **ret_drift) {
        struct nl host = {}, pod = {};
        struct link_info hl, pl;
        char ip[INET_ADDRSTRLEN], gw[INET_ADDRSTRLEN], key[128], val[16];
        bool ok = false;
        int r;

        inet_ntop(AF_INET, &(struct in_addr) { htonl(p->addr) }, ip, sizeof(ip));
        inet_ntop(AF_INET, &(struct in_addr) { htonl(p->gateway) }, gw, sizeof(gw));

        r = wire_nl_open(&host);
        if (r < 0)
                return r;
        r = link_get(&host, p->host_ifname, &hl);
        if (r == -ENODEV) {
                r = wire_drift(ret_drift, "host interface %s is missing", p->host_ifname);
                goto out;
        }
        if (r < 0)
                goto out;
        if (!link_is_ours(&hl, true)) {
                r = wire_drift(ret_drift, "host interface %s is not pinion's (kind %s, alias \"%s\")", p->host_ifname,
                          hl.kind[0] ? hl.kind : "none", hl.alias);
                goto out;
        }
        if (!(hl.flags & IFF_UP)) {
                r = wire_drift(ret_drift, "host interface %s is down", p->host_ifname);
                goto out;
        }
        ok = true;
        r = p->addr ? route_exists(&host, p->addr, 32, 0, hl.index, &ok) : 0;
        if (r < 0)
                goto out;
        if (!ok) {
                r = wire_drift(ret_drift, "host route %s/32 dev %s is missing", ip, p->host_ifname);
                goto out;
        }
        r = p->has_addr6 ? wire6_check_host(&host, hl.index, p, ret_drift) : 0;
        if (r < 0)
                goto out;
        snprintf(key, sizeof(key), "net/ipv4/conf/%s/proxy_arp", p->host_ifname);
        if (wire_sysctl_read(key, val, sizeof(val)) < 0 || !streq(val, "1")) {
                r = wire_drift(ret_drift, "proxy_arp is off on %s", p->host_ifname);
                goto out;
        }

        r = nl_open_in(&pod, host_netns_fd, p->netns_fd);
        if (r < 0)
                goto out;
        r = link_get(&pod, p->ifname, &pl);
        if (r == -ENODEV) {
                r = wire_drift(ret_drift, "interface %s is missing in %s", p->ifname, p->netns_path);
                goto out;
        }
        if (r < 0)
                goto out;
        if (!(pl.flags & IFF_UP)) {
                r = wire_drift(ret_drift, "interface %s is down in %s", p->ifname, p->netns_path);
                goto out;
        }
        if (p->mtu && pl.mtu != p->mtu) {
                r = wire_drift(ret_drift, "interface %s has MTU %u, ADD set %u", p->ifname, pl.mtu, p->mtu);
                goto out;
        }
        if (p->pod_mac) {
                char want[18];
                snprintf(want, sizeof(want), "%02x:%02x:%02x:%02x:%02x:%02x", p->pod_mac[0], p->pod_mac[1],
                         p->pod_mac[2], p->pod_mac[3], p->pod_mac[4], p->pod_mac[5]);
                if (!streq(pl.mac, want)) {
                        r = wire_drift(ret_drift, "interface %s has MAC address %s, not %s", p->ifname, pl.mac, want);
                        goto out;
                }
        }
        r = p->has_addr6 ? wire6_check_pod(&pod, pl.index, p, ret_drift) : 0;
        if (r < 0 || !p->addr)
                goto out;
        r = addr_exists(&pod, pl.index, p->addr, &ok);
        if (r < 0)
                goto out;
        if (!ok) {
                r = wire_drift(ret_drift, "address %s/32 is missing on %s", ip, p->ifname);
                goto out;
        }
        r = route_exists(&pod, 0, 0, p->gateway, pl.index, &ok);
        if (r < 0)
                goto out;
        if (!ok)
                r = wire_drift(ret_drift, "default route via %s dev %s is missing", gw, p->ifname);
out:
        wire_nl_close(&pod);
        wire_nl_close(&host);
        return r;
}
