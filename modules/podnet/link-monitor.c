/* SPDX-License-Identifier: MIT */
/* Link removal announcements in the host namespace. See link-monitor.h. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/rtnetlink.h>

#include "link-monitor.h"

/* Room for a burst of announcements (a GC deleting hundreds of veths); set with
 * SO_RCVBUFFORCE (podnet has CAP_NET_ADMIN), else the default stays: lost ones only delay. */
#define MONITOR_RCVBUF (1024 * 1024)

struct link_monitor {
        struct mnl_socket *sock;
        sd_event_source *io;
        link_monitor_fn removed;
        void *userdata;
};

static int attr_cb(const struct nlattr *a, void *data) {
        const char **name = data;
        if (mnl_attr_get_type(a) == IFLA_IFNAME && mnl_attr_validate(a, MNL_TYPE_STRING) >= 0 &&
            strnlen(mnl_attr_get_str(a), mnl_attr_get_payload_len(a)) < mnl_attr_get_payload_len(a))
                *name = mnl_attr_get_str(a);
        return MNL_CB_OK;
}

static int msg_cb(const struct nlmsghdr *nlh, void *data) {
        struct link_monitor *m = data;
        const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
        const char *name = NULL;

        if (nlh->nlmsg_type != RTM_DELLINK || mnl_nlmsg_get_payload_len(nlh) < sizeof(*ifi))
                return MNL_CB_OK;
        mnl_attr_parse(nlh, sizeof(*ifi), attr_cb, &name);
        if (name)
                m->removed(ifi->ifi_index, name, m->userdata);
        return MNL_CB_OK;
}

static int on_readable(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        struct link_monitor *m = userdata;
        char buf[8192]; /* MNL_SOCKET_BUFFER_SIZE for 4K pages; a link message is far smaller */

        for (;;) {
                ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (n < 0) {
                        /* ENOBUFS: some were lost; the deletions' completions answer for them. */
                        if (errno == EINTR || errno == ENOBUFS)
                                continue;
                        return 0; /* EAGAIN: all read */
                }
                if (n == 0)
                        return 0;
                (void) mnl_cb_run(buf, (size_t) n, 0, 0, msg_cb, m);
        }
}

int link_monitor_new(sd_event *e, link_monitor_fn removed, void *userdata, struct link_monitor **ret) {
        _cleanup_(link_monitor_freep) struct link_monitor *m = calloc(1, sizeof(struct link_monitor));
        int size = MONITOR_RCVBUF, r;

        if (!m)
                return -ENOMEM;
        m->removed = removed;
        m->userdata = userdata;
        m->sock = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (!m->sock)
                return negative_errno();
        if (mnl_socket_bind(m->sock, RTMGRP_LINK, MNL_SOCKET_AUTOPID) < 0)
                return negative_errno();
        (void) setsockopt(mnl_socket_get_fd(m->sock), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
        r = sd_event_add_io(e, &m->io, mnl_socket_get_fd(m->sock), EPOLLIN, on_readable, m);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(m);
        return 0;
}

struct link_monitor *link_monitor_free(struct link_monitor *m) {
        if (!m)
                return NULL;
        sd_event_source_disable_unref(m->io);
        if (m->sock)
                mnl_socket_close(m->sock);
        free(m);
        return NULL;
}
