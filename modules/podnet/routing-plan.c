/* SPDX-License-Identifier: MIT */
/* The routes this node should have and the changes that get the kernel there. See
 * routing-plan.h. */

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <linux/rtnetlink.h>

#include "macro.h"
#include "routing-plan.h"
#include "string-table.h"

static const char *const routing_plan_reason_table[_ROUTING_SKIP_REASON_MAX] = {
        [ROUTING_SKIP_NOT_CONNECTED] = "not-directly-connected",
        [ROUTING_SKIP_NO_ROUTE] = "no-route",
        [ROUTING_SKIP_NO_ADDRESS] = "no-internal-ip",
        [ROUTING_SKIP_INVALID] = "invalid",
        [ROUTING_SKIP_OWN_CIDR] = "overlaps-own-pod-cidr",
        [ROUTING_SKIP_DUPLICATE] = "duplicate-pod-cidr",
};
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(routing_plan_reason, enum routing_skip_reason);

static const char *const routing_plan_op_table[_ROUTING_OP_MAX] = {
        [ROUTING_OP_ADD] = "add",
        [ROUTING_OP_REPLACE] = "replace",
        [ROUTING_OP_DELETE] = "delete",
};
DEFINE_STRING_TABLE_LOOKUP_TO_STRING(routing_plan_op, enum routing_op);

static size_t addr_size(int family) {
        return family == AF_INET ? 4 : 16;
}

/* ---- prefixes ---- */

static int parse_addr(const char *s, int family, struct in6_addr *ret) {
        *ret = (struct in6_addr) {};
        return inet_pton(family, s, ret) == 1 ? 0 : -EINVAL;
}

int routing_plan_parse_prefix(const char *s, struct route *ret) {
        char addr[INET6_ADDRSTRLEN];
        const char *slash = strchr(s, '/');
        char *end;

        if (!slash || (size_t) (slash - s) >= sizeof(addr))
                return -EINVAL;
        memcpy(addr, s, (size_t) (slash - s));
        addr[slash - s] = 0;
        *ret = (struct route) {};
        ret->family = strchr(addr, ':') ? AF_INET6 : AF_INET;
        if (parse_addr(addr, ret->family, &ret->dst) < 0)
                return -EINVAL;
        errno = 0;
        unsigned long len = strtoul(slash + 1, &end, 10);
        if (errno || end == slash + 1 || *end || len > addr_size(ret->family) * 8)
                return -EINVAL;
        ret->dst_len = (unsigned char) len;
        ret->priority = ret->family == AF_INET6 ? ROUTES_IPV6_DEFAULT_METRIC : 0;
        /* Clear the host bits: the kernel refuses a destination with them set. */
        for (size_t bit = len; bit < addr_size(ret->family) * 8; bit++)
                ret->dst.s6_addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
        return 0;
}

const char *routing_plan_format(const struct route *r, char *buf, size_t size) {
        char dst[INET6_ADDRSTRLEN] = "?", gw[INET6_ADDRSTRLEN] = "?";

        (void) inet_ntop(r->family, &r->dst, dst, sizeof(dst));
        if (r->type == RTN_UNREACHABLE)
                snprintf(buf, size, "unreachable %s/%u", dst, r->dst_len);
        else {
                (void) inet_ntop(r->family, &r->gateway, gw, sizeof(gw));
                snprintf(buf, size, "%s/%u via %s", dst, r->dst_len, r->has_gateway ? gw : "(none)");
        }
        return buf;
}

/* Whether the shorter of the two prefixes contains the other. */
static bool prefixes_overlap(const struct route *a, const struct route *b) {
        if (a->family != b->family)
                return false;
        unsigned len = MIN(a->dst_len, b->dst_len);
        for (unsigned bit = 0; bit < len; bit++) {
                uint8_t m = (uint8_t) (0x80u >> (bit % 8));
                if ((a->dst.s6_addr[bit / 8] & m) != (b->dst.s6_addr[bit / 8] & m))
                        return false;
        }
        return true;
}

static int key_compare(const struct route *a, const struct route *b) {
        if (a->family != b->family)
                return a->family < b->family ? -1 : 1;
        if (a->dst_len != b->dst_len)
                return a->dst_len < b->dst_len ? -1 : 1;
        int c = memcmp(&a->dst, &b->dst, sizeof(a->dst));
        if (c != 0)
                return c;
        return a->priority == b->priority ? 0 : a->priority < b->priority ? -1 : 1;
}

bool routing_plan_same_key(const struct route *a, const struct route *b) {
        return key_compare(a, b) == 0;
}

bool routing_plan_same_route(const struct route *a, const struct route *b) {
        return routing_plan_same_key(a, b) && a->type == b->type && a->has_gateway == b->has_gateway &&
               (!a->has_gateway || !memcmp(&a->gateway, &b->gateway, addr_size(a->family)));
}

/* ---- what is wanted ---- */

static int push_want(struct routing_plan *plan, const struct route *r, const char *node) {
        struct routing_want *w = reallocarray(plan->want, plan->n_want + 1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        plan->want = w;
        plan->want[plan->n_want++] = (struct routing_want) { .route = *r, .node = node };
        return 0;
}

static int push_skip(struct routing_plan *plan, const char *node, const char *address, const char *cidr,
                     enum routing_skip_reason reason) {
        struct routing_skip *s = reallocarray(plan->skipped, plan->n_skipped + 1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        plan->skipped = s;
        plan->skipped[plan->n_skipped++] = (struct routing_skip) {
                .node = node, .address = address, .cidr = cidr, .reason = reason,
        };
        return 0;
}

/* This node's pod CIDRs, comma or blank separated, as unreachable routes. */
static int own_prefixes(const char *cidrs, struct route ret[static 2], size_t *ret_n) {
        char buf[256];
        size_t n = 0;

        *ret_n = 0;
        if (!cidrs)
                return 0;
        if (strlen(cidrs) >= sizeof(buf))
                return -EINVAL;
        strcpy(buf, cidrs);
        for (char *save = NULL, *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
                if (n == 2 || routing_plan_parse_prefix(t, &ret[n]) < 0)
                        return -EINVAL;
                ret[n++].type = RTN_UNREACHABLE;
        }
        *ret_n = n;
        return 0;
}

/* A Node's pod CIDR of one family, before the kernel is asked about its address. */
struct candidate {
        struct route route;
        const struct cluster_node *node;
        int family_index;
        size_t order; /* the Node's place in the table (sorted by name): the first of duplicates wins */
};

static int candidate_compare(const void *a, const void *b) {
        const struct candidate *x = a, *y = b;
        int c = key_compare(&x->route, &y->route);
        return c != 0 ? c : x->order < y->order ? -1 : x->order > y->order;
}

/* The reason a Node's pod CIDR of family index f gets no route before asking the kernel, or -1
 * with *c filled in. */
static int node_candidate(const struct cluster_node *node, int f, const struct route *own, size_t n_own,
                          struct candidate *c) {
        int family = f == CLUSTER_NODE_IPV4 ? AF_INET : AF_INET6;

        if (!node->address[f])
                return ROUTING_SKIP_NO_ADDRESS;
        if (routing_plan_parse_prefix(node->pod_cidr[f], &c->route) < 0 || c->route.family != family ||
            parse_addr(node->address[f], family, &c->route.gateway) < 0)
                return ROUTING_SKIP_INVALID;
        for (size_t i = 0; i < n_own; i++)
                if (prefixes_overlap(&own[i], &c->route))
                        return ROUTING_SKIP_OWN_CIDR;
        c->route.type = RTN_UNICAST;
        c->route.has_gateway = true;
        c->node = node;
        c->family_index = f;
        return -1;
}

static int candidates_collect(const struct routing_plan_input *in, const struct route *own, size_t n_own,
                              struct routing_plan *plan, struct candidate **ret, size_t *ret_n) {
        _cleanup_free_ struct candidate *cs = NULL;
        size_t n = 0;

        if (in->n_nodes > 0 && !(cs = calloc(in->n_nodes * _CLUSTER_NODE_FAMILY_MAX, sizeof(*cs))))
                return -ENOMEM;
        for (size_t i = 0; i < in->n_nodes; i++) {
                const struct cluster_node *node = &in->nodes[i];
                if (!node->name || (in->self && streq(node->name, in->self)))
                        continue;
                for (int f = 0; f < _CLUSTER_NODE_FAMILY_MAX; f++) {
                        if (!node->pod_cidr[f])
                                continue;
                        cs[n].order = i;
                        int reason = node_candidate(node, f, own, n_own, &cs[n]);
                        if (reason < 0) {
                                n++;
                                continue;
                        }
                        int r = push_skip(plan, node->name, node->address[f], node->pod_cidr[f], reason);
                        if (r < 0)
                                return r;
                }
        }
        *ret = TAKE_PTR(cs);
        *ret_n = n;
        return 0;
}

static int node_routes(const struct routing_plan_input *in, const struct route *own, size_t n_own,
                       struct routing_plan *plan) {
        _cleanup_free_ struct candidate *cs = NULL;
        size_t n = 0;
        int r;

        r = candidates_collect(in, own, n_own, plan, &cs, &n);
        if (r < 0)
                return r;
        if (n > 0)
                qsort(cs, n, sizeof(*cs), candidate_compare);
        for (size_t i = 0; i < n; i++) {
                const struct candidate *c = &cs[i];
                const char *address = c->node->address[c->family_index], *cidr = c->node->pod_cidr[c->family_index];
                int reason = -1;

                if (i > 0 && routing_plan_same_key(&cs[i - 1].route, &c->route))
                        reason = ROUTING_SKIP_DUPLICATE;
                else {
                        int k = in->connected(c->route.family, &c->route.gateway, in->userdata);
                        reason = k < 0 ? ROUTING_SKIP_NO_ROUTE : k == 0 ? ROUTING_SKIP_NOT_CONNECTED : -1;
                }
                r = reason >= 0 ? push_skip(plan, c->node->name, address, cidr, reason)
                                : push_want(plan, &c->route, c->node->name);
                if (r < 0)
                        return r;
        }
        return 0;
}

int routing_plan_desired(const struct routing_plan_input *in, struct routing_plan *plan) {
        struct route own[2];
        size_t n_own = 0;
        int r;

        *plan = (struct routing_plan) {};
        if (in->mode == ROUTING_NONE)
                return 0;
        r = own_prefixes(in->own_cidrs, own, &n_own);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_own; i++) {
                r = push_want(plan, &own[i], NULL);
                if (r < 0)
                        goto fail;
        }
        if (in->mode == ROUTING_NODES && in->nodes_known) {
                r = node_routes(in, own, n_own, plan);
                if (r < 0)
                        goto fail;
        }
        return 0;
fail:
        routing_plan_done(plan);
        return r;
}

/* ---- what to change ---- */

static int push_change(struct routing_plan *plan, enum routing_op op, const struct route *r, const char *node) {
        struct routing_change *c = reallocarray(plan->changes, plan->n_changes + 1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        plan->changes = c;
        plan->changes[plan->n_changes++] = (struct routing_change) { .op = op, .route = *r, .node = node };
        return 0;
}

static int route_compare(const void *a, const void *b) {
        return key_compare(a, b);
}

int routing_plan_diff(struct routing_plan *plan, const struct route *kernel, size_t n_kernel, bool nodes_known) {
        _cleanup_free_ struct route *sorted = NULL;
        _cleanup_free_ bool *wanted = NULL;
        int r;

        if (n_kernel > 0) {
                sorted = malloc(n_kernel * sizeof(*kernel));
                wanted = calloc(n_kernel, sizeof(*wanted));
                if (!sorted || !wanted)
                        return -ENOMEM;
                memcpy(sorted, kernel, n_kernel * sizeof(*kernel));
                qsort(sorted, n_kernel, sizeof(*sorted), route_compare);
        }
        for (size_t i = 0; i < plan->n_want; i++) {
                const struct routing_want *w = &plan->want[i];
                const struct route *k = n_kernel ? bsearch(&w->route, sorted, n_kernel, sizeof(*sorted), route_compare) : NULL;

                if (k)
                        wanted[k - sorted] = true;
                if (k && routing_plan_same_route(k, &w->route))
                        continue;
                r = push_change(plan, k ? ROUTING_OP_REPLACE : ROUTING_OP_ADD, &w->route, w->node);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < n_kernel; i++) {
                if (wanted[i] || (!nodes_known && sorted[i].type != RTN_UNREACHABLE))
                        continue;
                r = push_change(plan, ROUTING_OP_DELETE, &sorted[i], NULL);
                if (r < 0)
                        return r;
        }
        return 0;
}

void routing_plan_done(struct routing_plan *plan) {
        free(plan->want);
        free(plan->skipped);
        free(plan->changes);
        *plan = (struct routing_plan) {};
}
