/* SPDX-License-Identifier: MIT */
/* The metrics port: a TCP socket handed to an anonymous local API that has one route. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metrics-listen.h"
#include "parse.h"

/* A scrape is one short GET: no body worth reading. */
#define METRICS_LISTEN_MAX_BODY 4096U

struct metrics_listener {
        char *address;
        struct api *api;
};

static int parse_port(const char *s, uint16_t *ret) {
        char *end = NULL;
        unsigned long v;

        if (!s || s[0] < '0' || s[0] > '9')
                return -EINVAL;
        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno != 0 || *end != 0 || v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t) v;
        return 0;
}

int metrics_listen_parse(const char *text, struct sockaddr_storage *ret, socklen_t *ret_len, const char **ret_reason) {
        struct sockaddr_storage ss = {};
        _cleanup_free_ char *host = NULL;
        const char *port;
        uint16_t p;
        socklen_t len;

        *ret_reason = "expected ADDR:PORT with a numeric IPv4 address, or [ADDR]:PORT with an IPv6 one";
        if (isempty(text))
                return -EINVAL;
        if (text[0] == '[') {
                const char *close = strchr(text, ']');
                if (!close || close[1] != ':')
                        return -EINVAL;
                host = strndup(text + 1, (size_t) (close - text - 1));
                port = close + 2;
        } else {
                const char *colon = strrchr(text, ':');
                if (!colon)
                        return -EINVAL;
                host = strndup(text, (size_t) (colon - text));
                port = colon + 1;
        }
        if (!host)
                return -ENOMEM;
        if (parse_port(port, &p) < 0) {
                *ret_reason = "expected a port from 1 to 65535 after the address";
                return -EINVAL;
        }
        if (text[0] == '[') {
                struct sockaddr_in6 *sa = (struct sockaddr_in6 *) &ss;
                if (inet_pton(AF_INET6, host, &sa->sin6_addr) != 1)
                        return -EINVAL;
                sa->sin6_family = AF_INET6;
                sa->sin6_port = htons(p);
                len = sizeof(*sa);
        } else {
                struct sockaddr_in *sa = (struct sockaddr_in *) &ss;
                if (inet_pton(AF_INET, host, &sa->sin_addr) != 1)
                        return -EINVAL;
                sa->sin_family = AF_INET;
                sa->sin_port = htons(p);
                len = sizeof(*sa);
        }
        *ret_reason = NULL;
        if (ret)
                *ret = ss;
        if (ret_len)
                *ret_len = len;
        return 0;
}

bool metrics_listen_privileged_port(const char *address) {
        struct sockaddr_storage ss;
        const char *reason = NULL;
        uint16_t port;

        if (isempty(address) || metrics_listen_parse(address, &ss, NULL, &reason) < 0)
                return false;
        port = ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &ss)->sin6_port : ((struct sockaddr_in *) &ss)->sin_port;
        return ntohs(port) < 1024;
}

static int tcp_listen(const char *address, int *ret_fd) {
        struct sockaddr_storage ss;
        const char *reason = NULL;
        _cleanup_close_ int fd = -EBADF;
        socklen_t len;
        int one = 1, r;

        r = metrics_listen_parse(address, &ss, &len, &reason);
        if (r < 0)
                return r;
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return -errno;
        if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0)
                return -errno;
        /* [::]:PORT is IPv6 only: IPv4 scrapers are served by an IPv4 address of their own. */
        if (ss.ss_family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &ss, len) < 0 || listen(fd, SOMAXCONN) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int metrics_listen_new(sd_event *e, struct metrics *metrics, const char *address, api_handler_fn handler,
                         void *userdata, struct metrics_listener **ret) {
        const struct api_route routes[] = {
                { "GET", "/metrics", handler, false },
        };
        _cleanup_(metrics_listen_freep) struct metrics_listener *l = NULL;
        int fd = -EBADF, r;

        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        l->address = strdup(address);
        if (!l->address)
                return -ENOMEM;
        r = tcp_listen(address, &fd);
        if (r < 0)
                return r;
        const struct api_options opts = {
                .listen_fd = fd,
                .socket_gid = (gid_t) -1,
                .max_body = METRICS_LISTEN_MAX_BODY,
                .anonymous = true,
                .max_connections = METRICS_LISTEN_MAX_CONNECTIONS,
                .max_connections_per_source = METRICS_LISTEN_MAX_CONNECTIONS_PER_SOURCE,
        };
        r = api_new(e, &opts, metrics, &l->api);
        if (r < 0) {
                safe_close(fd); /* still ours: api_new() takes it only on success */
                return r;
        }
        r = api_add_routes(l->api, routes, ELEMENTSOF(routes), userdata, NULL);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(l);
        return 0;
}

struct metrics_listener *metrics_listen_free(struct metrics_listener *l) {
        if (!l)
                return NULL;
        api_free(l->api);
        free(l->address);
        free(l);
        return NULL;
}

const char *metrics_listen_address(const struct metrics_listener *l) {
        return l ? l->address : NULL;
}
