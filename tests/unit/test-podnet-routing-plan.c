/* SPDX-License-Identifier: MIT */
/* The routing decisions (modules/podnet/routing-plan.c): the routes wanted from the cluster's
 * Nodes and the node's own pod CIDRs, and the changes from what the kernel holds. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <linux/rtnetlink.h>

#include "routing-plan.h"

/* The fake kernel's answer: addresses in 192.168.1.0/24 and fd00:1::/64 are directly
 * connected, 10.99.0.0/16 goes through a gateway, anything else has no route. */
static unsigned n_asked;
static int fake_connected(int family, const struct in6_addr *gw, void *userdata) {
        char s[INET6_ADDRSTRLEN];
        n_asked++;
        inet_ntop(family, gw, s, sizeof(s));
        if (strncmp(s, "192.168.1.", 10) == 0 || strncmp(s, "fd00:1::", 8) == 0)
                return 1;
        if (strncmp(s, "10.99.", 6) == 0)
                return 0;
        return -ENETUNREACH;
}

static struct routing_plan_input input(enum routing_mode mode, const struct cluster_node *nodes, size_t n) {
        return (struct routing_plan_input) {
                .mode = mode, .own_cidrs = "10.244.1.0/24,fd00:244:1::/64", .self = "a",
                .nodes_known = true, .nodes = nodes, .n_nodes = n, .connected = fake_connected,
        };
}

static const char *fmt(const struct route *r) {
        static char buf[8][128];
        static unsigned i;
        return routing_plan_format(r, buf[i++ % 8], sizeof(buf[0]));
}

static bool wants(const struct routing_plan *p, const char *text, const char *node) {
        for (size_t i = 0; i < p->n_want; i++)
                if (strcmp(fmt(&p->want[i].route), text) == 0 &&
                    (node ? p->want[i].node && strcmp(p->want[i].node, node) == 0 : !p->want[i].node))
                        return true;
        return false;
}

static bool skips(const struct routing_plan *p, const char *node, enum routing_skip_reason reason) {
        for (size_t i = 0; i < p->n_skipped; i++)
                if (strcmp(p->skipped[i].node, node) == 0 && p->skipped[i].reason == reason)
                        return true;
        return false;
}

static struct route parse(const char *cidr, const char *gw) {
        struct route r;
        assert_int_equal(routing_plan_parse_prefix(cidr, &r), 0);
        if (gw) {
                r.type = RTN_UNICAST;
                r.has_gateway = true;
                assert_int_equal(inet_pton(r.family, gw, &r.gateway), 1);
        } else
                r.type = RTN_UNREACHABLE;
        return r;
}

static size_t count_op(const struct routing_plan *p, enum routing_op op) {
        size_t n = 0;
        for (size_t i = 0; i < p->n_changes; i++)
                n += p->changes[i].op == op;
        return n;
}

static bool changes(const struct routing_plan *p, enum routing_op op, const char *text) {
        for (size_t i = 0; i < p->n_changes; i++)
                if (p->changes[i].op == op && strcmp(fmt(&p->changes[i].route), text) == 0)
                        return true;
        return false;
}

static const struct cluster_node cluster[] = {
        { "a", { "192.168.1.1", "fd00:1::1" }, { "10.244.1.0/24", "fd00:244:1::/64" } },
        { "b", { "192.168.1.2", "fd00:1::2" }, { "10.244.2.0/24", "fd00:244:2::/64" } },
        { "c", { "192.168.1.3", NULL }, { "10.244.3.0/24", NULL } },        /* single-stack */
        { "d", { "10.99.0.4", NULL }, { "10.244.4.0/24", NULL } },          /* routed: bgp */
        { "e", { "192.168.1.5", NULL }, { "10.244.5.0/24", "fd00:244:5::/64" } }, /* no IPv6 address */
        { "f", { "192.168.1.6", NULL }, { "10.244.2.0/24", NULL } },        /* b's CIDR */
        { "g", { "192.168.1.7", NULL }, { "10.244.1.0/25", NULL } },        /* inside ours */
        { "h", { "172.31.0.8", NULL }, { "10.244.8.0/24", NULL } },         /* no route */
        { "i", { "not-an-ip", NULL }, { "10.244.9.0/24", NULL } },
        { "j", { "192.168.1.10", NULL }, { NULL, NULL } },                  /* no pod CIDR yet */
};

static void test_desired(void **state) {
        struct routing_plan_input in = input(ROUTING_NODES, cluster, sizeof(cluster) / sizeof(cluster[0]));
        struct routing_plan p;

        n_asked = 0;
        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_true(wants(&p, "unreachable 10.244.1.0/24", NULL));
        assert_true(wants(&p, "unreachable fd00:244:1::/64", NULL));
        assert_true(wants(&p, "10.244.2.0/24 via 192.168.1.2", "b"));
        assert_true(wants(&p, "fd00:244:2::/64 via fd00:1::2", "b"));
        assert_true(wants(&p, "10.244.3.0/24 via 192.168.1.3", "c"));
        assert_true(wants(&p, "10.244.5.0/24 via 192.168.1.5", "e"));
        assert_int_equal(p.n_want, 6);
        assert_true(skips(&p, "d", ROUTING_SKIP_NOT_CONNECTED));
        assert_true(skips(&p, "e", ROUTING_SKIP_NO_ADDRESS));
        assert_true(skips(&p, "f", ROUTING_SKIP_DUPLICATE));
        assert_true(skips(&p, "g", ROUTING_SKIP_OWN_CIDR));
        assert_true(skips(&p, "h", ROUTING_SKIP_NO_ROUTE));
        assert_true(skips(&p, "i", ROUTING_SKIP_INVALID));
        assert_int_equal(p.n_skipped, 6);
        /* The kernel is asked only about addresses that could get a route: b (x2), c, d, e, h. */
        assert_int_equal(n_asked, 6);
        routing_plan_done(&p);
}

static void test_modes(void **state) {
        struct routing_plan_input in = input(ROUTING_BGP, cluster, sizeof(cluster) / sizeof(cluster[0]));
        struct routing_plan p;

        /* bgp: the aggregates only (BIRD installs the peers' routes). */
        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(p.n_want, 2);
        assert_int_equal(p.n_skipped, 0);
        routing_plan_done(&p);
        /* none: nothing at all. */
        in.mode = ROUTING_NONE;
        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(p.n_want, 0);
        routing_plan_done(&p);
        /* nodes, list not synced: aggregates only, and no kernel question. */
        in.mode = ROUTING_NODES;
        in.nodes_known = false;
        n_asked = 0;
        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(p.n_want, 2);
        assert_int_equal(n_asked, 0);
        routing_plan_done(&p);
        /* IPv4 only node. */
        in.own_cidrs = "10.244.1.0/24";
        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(p.n_want, 1);
        assert_true(wants(&p, "unreachable 10.244.1.0/24", NULL));
        routing_plan_done(&p);
}

static void test_diff(void **state) {
        struct routing_plan_input in = input(ROUTING_NODES, cluster, 3); /* a, b, c */
        struct routing_plan p;
        struct route kernel[] = {
                parse("10.244.1.0/24", NULL),                 /* our aggregate: right */
                parse("10.244.2.0/24", "192.168.1.99"),       /* b moved: replace */
                parse("10.244.3.0/24", "192.168.1.3"),        /* right */
                parse("10.244.77.0/24", "192.168.1.77"),      /* a Node gone: delete */
                parse("fd00:244:9::/64", NULL),               /* an old aggregate: delete */
        };

        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(routing_plan_diff(&p, kernel, 5, true), 0);
        assert_true(changes(&p, ROUTING_OP_ADD, "unreachable fd00:244:1::/64"));
        assert_true(changes(&p, ROUTING_OP_ADD, "fd00:244:2::/64 via fd00:1::2"));
        assert_true(changes(&p, ROUTING_OP_REPLACE, "10.244.2.0/24 via 192.168.1.2"));
        assert_true(changes(&p, ROUTING_OP_DELETE, "10.244.77.0/24 via 192.168.1.77"));
        assert_true(changes(&p, ROUTING_OP_DELETE, "unreachable fd00:244:9::/64"));
        assert_int_equal(p.n_changes, 5);
        routing_plan_done(&p);

        /* The list unknown: node routes stay, aggregates are still brought right. */
        in.nodes_known = false;
        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(routing_plan_diff(&p, kernel, 5, false), 0);
        assert_int_equal(count_op(&p, ROUTING_OP_DELETE), 1);
        assert_true(changes(&p, ROUTING_OP_DELETE, "unreachable fd00:244:9::/64"));
        assert_int_equal(count_op(&p, ROUTING_OP_REPLACE), 0);
        assert_int_equal(count_op(&p, ROUTING_OP_ADD), 1);
        routing_plan_done(&p);

        /* none: every route of pinion's goes. */
        in.mode = ROUTING_NONE;
        in.nodes_known = true;
        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(routing_plan_diff(&p, kernel, 5, true), 0);
        assert_int_equal(count_op(&p, ROUTING_OP_DELETE), 5);
        assert_int_equal(p.n_changes, 5);
        routing_plan_done(&p);
}

/* A second pass over what the first installed changes nothing (a restart makes no gap). */
static void test_steady(void **state) {
        struct routing_plan_input in = input(ROUTING_NODES, cluster, sizeof(cluster) / sizeof(cluster[0]));
        struct routing_plan p, q;
        struct route kernel[16];

        assert_int_equal(routing_plan_desired(&in, &p), 0);
        assert_int_equal(routing_plan_diff(&p, NULL, 0, true), 0);
        assert_int_equal(count_op(&p, ROUTING_OP_ADD), p.n_want);
        assert_true(p.n_want <= 16);
        for (size_t i = 0; i < p.n_want; i++)
                kernel[p.n_want - 1 - i] = p.want[i].route; /* in another order */
        assert_int_equal(routing_plan_desired(&in, &q), 0);
        assert_int_equal(routing_plan_diff(&q, kernel, p.n_want, true), 0);
        assert_int_equal(q.n_changes, 0);
        routing_plan_done(&p);
        routing_plan_done(&q);
}

static void test_prefix(void **state) {
        struct route r;
        char buf[128];

        assert_int_equal(routing_plan_parse_prefix("10.244.7.9/24", &r), 0);
        assert_string_equal(routing_plan_format(&r, buf, sizeof(buf)), "10.244.7.0/24 via (none)");
        assert_int_equal(routing_plan_parse_prefix("fd00:7::1/64", &r), 0);
        assert_int_equal(r.family, AF_INET6);
        assert_int_equal(r.dst_len, 64);
        /* As the kernel reports an IPv6 route added without a metric, so a dump compares equal. */
        assert_int_equal(r.priority, ROUTES_IPV6_DEFAULT_METRIC);
        assert_int_equal(routing_plan_parse_prefix("10.0.0.0/33", &r), -EINVAL);
        assert_int_equal(routing_plan_parse_prefix("10.0.0.0", &r), -EINVAL);
        assert_int_equal(routing_plan_parse_prefix("10.0.0.0/", &r), -EINVAL);
        assert_int_equal(routing_plan_parse_prefix("10.0.0.0/8x", &r), -EINVAL);
        assert_int_equal(routing_plan_parse_prefix("x/8", &r), -EINVAL);
        /* A different priority is another key; the gateway is not part of it. */
        struct route a = parse("10.1.0.0/16", "192.168.1.1"), b = parse("10.1.0.0/16", "192.168.1.2");
        assert_true(routing_plan_same_key(&a, &b));
        assert_false(routing_plan_same_route(&a, &b));
        b.priority = 10;
        assert_false(routing_plan_same_key(&a, &b));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_desired),
                cmocka_unit_test(test_modes),
                cmocka_unit_test(test_diff),
                cmocka_unit_test(test_steady),
                cmocka_unit_test(test_prefix),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
