/* SPDX-License-Identifier: MIT */
/* `[network] routing`: passes that bring the kernel's node routes and aggregates to what the
 * mode and the cluster's Nodes want. See routing.h. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <linux/rtnetlink.h>

#include "facts.h"
#include "ipam.h"
#include "json.h"
#include "log.h"
#include "manager.h"
#include "metrics.h"
#include "podnet.h"
#include "routes.h"
#include "routing.h"
#include "string-table.h"
#include "wire-internal.h"

#define ROUTING_HINT "peers on other subnets get no route: routing = bgp is the mode for routed fabrics"
/* From a Node change to its pass: the changes of a burst (a relist, many kubelets at once) make
 * one pass; well inside the 2 s a change may take to reach the kernel. */
#define PASS_DELAY (50 * USEC_PER_MSEC)

static const char *const routing_mode_table[_ROUTING_MODE_MAX] = {
        [ROUTING_NONE] = "none",
        [ROUTING_NODES] = "nodes",
        [ROUTING_BGP] = "bgp",
};
DEFINE_STRING_TABLE_LOOKUP(routing_mode, enum routing_mode);
DEFINE_STRING_TABLE_NAME_AT(routing_mode);

/* What a pass left: owned copies, for status and for telling what is new in the next pass. */
struct record {
        char *node;    /* NULL: this node's own aggregate */
        char *address; /* may be NULL */
        char *what;    /* the pod CIDR, or the route as text */
        const char *reason;
};

struct records {
        struct record *items;
        size_t n;
};

struct installed {
        struct route route;
        char *node; /* NULL: an aggregate */
};

/* The kernel's answer about a peer's address (routes_gateway_connected()). */
struct answer {
        int family;
        struct in6_addr addr;
        int connected;
};

/* Passes that a Node change starts reuse the last pass's answers (a burst of Node events must
 * not ask the kernel about every peer each time); a periodic pass and a start ask afresh, so a
 * subnet added or removed on the node counts within reconcile-interval. */
struct pass_ctx {
        struct nl *nl;
        const struct answer *known; /* sorted; NULL: ask about every address */
        size_t n_known;
        struct answer *asked;       /* this pass's answers */
        size_t n_asked;
        int error;
};

struct routing {
        struct module_instance *mi;
        enum routing_mode mode;        /* what the last pass applied */
        sd_event_source *fact_timer;   /* `nodes`: looks for FACT_CLUSTER_NODES once a second */
        sd_event_source *pass_timer;   /* a pass queued: soon, so a burst of changes makes one */
        sd_event_source *recheck_timer; /* every reconcile-interval */
        bool fact_seen;                /* FACT_CLUSTER_NODES was published at the last look */
        bool nodes_synced;             /* the last pass had a synced Node list */
        struct installed *installed;   /* the routes wanted that the kernel holds, by the last pass */
        size_t n_installed;
        struct records skipped, conflicts;
        struct answer *answers;        /* the last pass's, sorted */
        size_t n_answers;
        uint64_t passes;
        usec_t last_pass;              /* CLOCK_REALTIME */
        int last_error;                /* of the last pass's kernel work, 0: none */
        struct metrics_registration *metrics_reg;
        struct metric_family *m_routes, *m_changes, *m_skipped, *m_errors;
};

/* ---- records ---- */

static void records_clear(struct records *rs) {
        for (size_t i = 0; i < rs->n; i++) {
                free(rs->items[i].node);
                free(rs->items[i].address);
                free(rs->items[i].what);
        }
        free(rs->items);
        *rs = (struct records) {};
}

static bool records_has(const struct records *rs, const char *node, const char *address, const char *what,
                        const char *reason) {
        for (size_t i = 0; i < rs->n; i++)
                if (streq_ptr(rs->items[i].node, node) && streq_ptr(rs->items[i].address, address) &&
                    streq_ptr(rs->items[i].what, what) && streq_ptr(rs->items[i].reason, reason))
                        return true;
        return false;
}

static int records_add(struct records *rs, const char *node, const char *address, const char *what,
                       const char *reason) {
        struct record *items = reallocarray(rs->items, rs->n + 1, sizeof(*items));
        if (!items)
                return -ENOMEM;
        rs->items = items;
        struct record *r = &rs->items[rs->n];
        *r = (struct record) { .reason = reason };
        if ((node && !(r->node = strdup(node))) || (address && !(r->address = strdup(address))) ||
            (what && !(r->what = strdup(what)))) {
                free(r->node);
                free(r->address);
                free(r->what);
                return -ENOMEM;
        }
        rs->n++;
        return 0;
}

static void installed_clear(struct routing *rt) {
        for (size_t i = 0; i < rt->n_installed; i++)
                free(rt->installed[i].node);
        free(rt->installed);
        rt->installed = NULL;
        rt->n_installed = 0;
}

/* Which Node a route of the kernel's was for, as far as this run knows. */
static const char *installed_node(const struct routing *rt, const struct route *r) {
        for (size_t i = 0; i < rt->n_installed; i++)
                if (routing_plan_same_key(&rt->installed[i].route, r))
                        return rt->installed[i].node;
        return NULL;
}

/* ---- one pass ---- */

static int answer_compare(const void *a, const void *b) {
        const struct answer *x = a, *y = b;
        if (x->family != y->family)
                return x->family < y->family ? -1 : 1;
        return memcmp(&x->addr, &y->addr, sizeof(x->addr));
}

static int connected(int family, const struct in6_addr *gateway, void *userdata) {
        struct pass_ctx *ctx = userdata;
        struct answer key = { .family = family, .addr = *gateway };
        const struct answer *known = ctx->n_known ? bsearch(&key, ctx->known, ctx->n_known, sizeof(key), answer_compare) : NULL;

        key.connected = known ? known->connected : routes_gateway_connected(ctx->nl, family, gateway, NULL);
        struct answer *a = reallocarray(ctx->asked, ctx->n_asked + 1, sizeof(*a));
        if (!a)
                ctx->error = -ENOMEM;
        else {
                ctx->asked = a;
                ctx->asked[ctx->n_asked++] = key;
        }
        return key.connected;
}

/* This pass's answers are the next one's. */
static void answers_keep(struct routing *rt, struct pass_ctx *ctx) {
        if (ctx->error < 0) {
                free(ctx->asked);
                return;
        }
        if (ctx->n_asked > 0)
                qsort(ctx->asked, ctx->n_asked, sizeof(*ctx->asked), answer_compare);
        free(rt->answers);
        rt->answers = ctx->asked;
        rt->n_answers = ctx->n_asked;
}

static const char *route_owner(const struct route *r, const char *node, char *buf, size_t size) {
        if (r->type == RTN_UNREACHABLE && !node)
                return "this node's pod CIDR";
        snprintf(buf, size, "Node %s", node ? node : "(unknown)");
        return buf;
}

/* An add that found the key taken by a route that is not pinion's: left alone, told once. */
static int note_conflict(struct routing *rt, struct records *conflicts, const struct routing_change *c) {
        char text[128];
        const char *reason = "a route of another protocol has this prefix";

        routing_plan_format(&c->route, text, sizeof(text));
        if (!records_has(&rt->conflicts, c->node, NULL, text, reason)) {
                log_module_warning(MODULE, "Not installing %s for %s: %s (pinion leaves it alone)", text,
                                   c->node ? c->node : "this node's pod CIDR", reason);
                (void) metric_inc(rt->m_errors, "conflict");
        }
        return records_add(conflicts, c->node, NULL, text, reason);
}

static int apply_change(struct routing *rt, struct nl *nl, const struct routing_change *c, struct records *conflicts,
                        bool *ret_applied) {
        char text[128], who[128];
        int r = -EINVAL;

        *ret_applied = false;
        routing_plan_format(&c->route, text, sizeof(text));
        switch (c->op) {
        case ROUTING_OP_ADD:
                r = routes_add(nl, &c->route);
                if (r == -EEXIST)
                        return note_conflict(rt, conflicts, c);
                break;
        case ROUTING_OP_REPLACE:
                r = routes_replace(nl, &c->route);
                break;
        case ROUTING_OP_DELETE:
                r = routes_delete(nl, &c->route);
                break;
        case _ROUTING_OP_MAX:
                return -EINVAL;
        }
        const char *node = c->op == ROUTING_OP_DELETE ? installed_node(rt, &c->route) : c->node;
        if (r < 0) {
                log_module_warning(MODULE, "Failed to %s route %s (%s): %s; the next pass retries",
                                   routing_plan_op_to_string(c->op), text, route_owner(&c->route, node, who, sizeof(who)),
                                   strerror(-r));
                (void) metric_inc(rt->m_errors, routing_plan_op_to_string(c->op));
                rt->last_error = r;
                return 0;
        }
        static const char *const done[_ROUTING_OP_MAX] = { "added", "replaced", "removed" };
        log_module_info(MODULE, "Route %s: %s (%s)", done[c->op], text, route_owner(&c->route, node, who, sizeof(who)));
        (void) metric_inc(rt->m_changes, routing_plan_op_to_string(c->op));
        *ret_applied = true;
        return 0;
}

/* The Nodes skipped this pass; each one new is warned about once. */
static int note_skipped(struct routing *rt, const struct routing_plan *plan) {
        struct records now = {};
        int r = 0;

        for (size_t i = 0; i < plan->n_skipped && r >= 0; i++) {
                const struct routing_skip *s = &plan->skipped[i];
                const char *reason = routing_plan_reason_to_string(s->reason);
                if (!records_has(&rt->skipped, s->node, s->address, s->cidr, reason))
                        log_module_warning(MODULE, "No route to Node %s's pod CIDR %s via %s: %s%s", s->node, s->cidr,
                                           s->address ? s->address : "(no InternalIP of its family)", reason,
                                           s->reason == ROUTING_SKIP_NOT_CONNECTED ? " (" ROUTING_HINT ")" : "");
                r = records_add(&now, s->node, s->address, s->cidr, reason);
        }
        if (r < 0) {
                records_clear(&now);
                return r;
        }
        records_clear(&rt->skipped);
        rt->skipped = now;
        return 0;
}

/* The routes wanted that the kernel now holds (every want but those that failed or conflict). */
static int note_installed(struct routing *rt, const struct routing_plan *plan, const bool *failed) {
        struct installed *list = calloc(plan->n_want ? plan->n_want : 1, sizeof(*list));
        size_t n = 0;

        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < plan->n_want; i++) {
                if (failed[i])
                        continue;
                list[n].route = plan->want[i].route;
                if (plan->want[i].node && !(list[n].node = strdup(plan->want[i].node))) {
                        for (size_t j = 0; j < n; j++)
                                free(list[j].node);
                        free(list);
                        return -ENOMEM;
                }
                n++;
        }
        installed_clear(rt);
        rt->installed = list;
        rt->n_installed = n;
        return 0;
}

static const struct cluster_nodes *nodes_fact(struct routing *rt) {
        return rt->mode == ROUTING_NODES ? manager_lookup(rt->mi->manager, FACT_CLUSTER_NODES) : NULL;
}

static int plan_pass(struct routing *rt, struct pass_ctx *ctx, struct routing_plan *plan, bool *ret_nodes_known) {
        struct podnet *p = rt->mi->data;
        const struct cluster_nodes *fact = nodes_fact(rt);
        _cleanup_free_ struct route *kernel = NULL;
        size_t n_kernel = 0;
        int r;

        struct routing_plan_input in = {
                .mode = rt->mode,
                .own_cidrs = p->cidr,
                .self = rt->mi->manager->settings.node_name,
                .nodes_known = rt->mode != ROUTING_NODES || (fact && fact->synced(fact->owner)),
                .connected = connected,
                .userdata = ctx,
        };
        if (fact && in.nodes_known)
                in.n_nodes = fact->nodes(fact->owner, &in.nodes);
        if (rt->mode == ROUTING_NODES && in.nodes_known && !rt->nodes_synced)
                log_module_info(MODULE, "The cluster's Nodes are listed (%zu): node routes follow them now", in.n_nodes);
        r = routes_dump(ctx->nl, &kernel, &n_kernel);
        if (r < 0) {
                (void) metric_inc(rt->m_errors, "dump");
                return log_module_warning_errno(MODULE, r, "Cannot read the routing table: %m; the next pass retries");
        }
        r = routing_plan_desired(&in, plan);
        if (r >= 0)
                r = routing_plan_diff(plan, kernel, n_kernel, in.nodes_known);
        *ret_nodes_known = in.nodes_known;
        return r;
}

static int apply_plan(struct routing *rt, struct nl *nl, const struct routing_plan *plan) {
        _cleanup_free_ bool *failed = calloc(plan->n_want ? plan->n_want : 1, sizeof(bool));
        struct records conflicts = {};
        int r = 0;

        if (!failed)
                return -ENOMEM;
        for (size_t i = 0; i < plan->n_changes && r >= 0; i++) {
                const struct routing_change *c = &plan->changes[i];
                bool applied;
                r = apply_change(rt, nl, c, &conflicts, &applied);
                if (applied || c->op == ROUTING_OP_DELETE)
                        continue;
                for (size_t j = 0; j < plan->n_want; j++)
                        if (routing_plan_same_key(&plan->want[j].route, &c->route))
                                failed[j] = true;
        }
        if (r >= 0)
                r = note_installed(rt, plan, failed);
        if (r < 0) {
                records_clear(&conflicts);
                return r;
        }
        records_clear(&rt->conflicts);
        rt->conflicts = conflicts;
        return note_skipped(rt, plan);
}

/* fresh: ask the kernel about every peer's address, not only about new ones. */
static int routing_pass(struct routing *rt, const char *why, bool fresh) {
        struct routing_plan plan = {};
        struct nl nl = {};
        struct pass_ctx ctx = { .nl = &nl };
        bool nodes_known = false;
        int r;

        if (!fresh) {
                ctx.known = rt->answers;
                ctx.n_known = rt->n_answers;
        }
        rt->last_error = 0;
        r = wire_nl_open(&nl);
        if (r < 0) {
                rt->last_error = r;
                return log_module_warning_errno(MODULE, r, "Cannot open a route netlink socket: %m");
        }
        r = plan_pass(rt, &ctx, &plan, &nodes_known);
        if (r >= 0)
                r = apply_plan(rt, &nl, &plan);
        wire_nl_close(&nl);
        answers_keep(rt, &ctx);
        if (r < 0)
                rt->last_error = r;
        rt->nodes_synced = nodes_known;
        rt->passes++;
        rt->last_pass = now_usec(CLOCK_REALTIME);
        log_module_debug(MODULE, "Routing pass (%s): %zu change(s), %zu route(s) wanted, %zu Node(s) skipped", why,
                         plan.n_changes, plan.n_want, plan.n_skipped);
        routing_plan_done(&plan);
        return r;
}

/* ---- triggers ---- */

static int on_pass(sd_event_source *s, uint64_t usec, void *userdata) {
        struct routing *rt = userdata;
        (void) routing_pass(rt, "change", false);
        return 0;
}

static void queue_pass(struct routing *rt) {
        int enabled = SD_EVENT_OFF;

        if (!rt->pass_timer || sd_event_source_get_enabled(rt->pass_timer, &enabled) < 0 || enabled != SD_EVENT_OFF)
                return;
        if (sd_event_source_set_time_relative(rt->pass_timer, PASS_DELAY) >= 0)
                (void) sd_event_source_set_enabled(rt->pass_timer, SD_EVENT_ONESHOT);
}

static void on_nodes_changed(void *userdata) {
        queue_pass(userdata);
}

/* The fact is a pointer on the manager: looking once a second costs nothing. subscribe() says
 * whether this publication is new (-EEXIST: subscribed already). */
static int on_fact_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct routing *rt = userdata;
        const struct cluster_nodes *fact = manager_lookup(rt->mi->manager, FACT_CLUSTER_NODES);

        if (fact) {
                int r = fact->subscribe(fact->owner, on_nodes_changed, rt);
                if (r >= 0) {
                        log_module_info(MODULE, "Following the cluster's Nodes for the routes between nodes");
                        queue_pass(rt);
                } else if (r != -EEXIST)
                        log_module_warning_errno(MODULE, r, "Cannot follow the cluster's Nodes: %m; trying again");
        } else if (rt->fact_seen)
                log_module_info(MODULE, "The cluster's Nodes are no longer published (apiserver module stopped): node "
                                "routes stay as they are");
        rt->fact_seen = fact;
        (void) sd_event_source_set_time_relative(s, USEC_PER_SEC);
        return 0;
}

static int on_recheck_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        struct routing *rt = userdata;
        struct podnet *p = rt->mi->data;

        (void) routing_pass(rt, "periodic", true);
        (void) sd_event_source_set_time_relative(s, p->settings->reconcile_interval);
        return 0;
}

static void unsubscribe(struct routing *rt) {
        const struct cluster_nodes *fact = manager_lookup(rt->mi->manager, FACT_CLUSTER_NODES);
        if (fact && rt->fact_seen)
                fact->unsubscribe(fact->owner, on_nodes_changed, rt);
        rt->fact_seen = false;
}

static void triggers_stop(struct routing *rt) {
        unsubscribe(rt);
        rt->fact_timer = sd_event_source_disable_unref(rt->fact_timer);
        rt->pass_timer = sd_event_source_disable_unref(rt->pass_timer);
        rt->recheck_timer = sd_event_source_disable_unref(rt->recheck_timer);
}

static int triggers_start(struct routing *rt) {
        struct podnet *p = rt->mi->data;
        sd_event *e = rt->mi->manager->event;
        usec_t interval = p->settings->reconcile_interval;
        int r;

        r = sd_event_add_time_relative(e, &rt->pass_timer, CLOCK_MONOTONIC, PASS_DELAY, PASS_DELAY / 2, on_pass, rt);
        if (r >= 0)
                r = sd_event_source_set_enabled(rt->pass_timer, SD_EVENT_OFF);
        if (r >= 0 && rt->mode == ROUTING_NODES) {
                r = sd_event_add_time_relative(e, &rt->fact_timer, CLOCK_MONOTONIC, 0, USEC_PER_SEC / 10, on_fact_timer, rt);
                if (r >= 0)
                        r = sd_event_source_set_enabled(rt->fact_timer, SD_EVENT_ON);
        }
        if (r >= 0 && rt->mode != ROUTING_NONE && interval > 0) {
                r = sd_event_add_time_relative(e, &rt->recheck_timer, CLOCK_MONOTONIC, interval, interval / 10,
                                               on_recheck_timer, rt);
                if (r >= 0)
                        r = sd_event_source_set_enabled(rt->recheck_timer, SD_EVENT_ON);
        }
        return r;
}

/* ---- metrics ---- */

static void collect_routing(struct metrics *metrics, void *userdata) {
        struct routing *rt = userdata;
        size_t routes[2] = {}, skipped[_ROUTING_SKIP_REASON_MAX] = {};

        for (size_t i = 0; i < rt->n_installed; i++)
                if (rt->installed[i].node)
                        routes[rt->installed[i].route.family == AF_INET6]++;
        (void) metric_set(rt->m_routes, (double) routes[0], "ipv4");
        (void) metric_set(rt->m_routes, (double) routes[1], "ipv6");
        for (size_t i = 0; i < rt->skipped.n; i++)
                for (enum routing_skip_reason k = 0; k < _ROUTING_SKIP_REASON_MAX; k++)
                        if (streq(rt->skipped.items[i].reason, routing_plan_reason_to_string(k)))
                                skipped[k]++;
        for (enum routing_skip_reason k = 0; k < _ROUTING_SKIP_REASON_MAX; k++)
                (void) metric_set(rt->m_skipped, (double) skipped[k], routing_plan_reason_to_string(k));
}

static int register_metrics(struct routing *rt) {
        static const char *const family[] = { "family", NULL };
        static const char *const op[] = { "op", NULL };
        static const char *const reason[] = { "reason", NULL };
        static const char *const kind[] = { "kind", NULL };

        if (rt->metrics_reg)
                return 0;
        const struct metric_def families[] = {
                { METRIC_GAUGE, "pinion_podnet_routes", "Routes to other nodes' pod CIDRs installed (routing = nodes), by family (ipv4, ipv6); aggregates not included.", family, NULL, 0, &rt->m_routes },
                { METRIC_COUNTER, "pinion_podnet_route_changes_total", "Node routes and aggregates changed in the kernel, by op (add, replace, delete).", op, NULL, 0, &rt->m_changes },
                { METRIC_GAUGE, "pinion_podnet_route_peers_skipped", "Nodes' pod CIDRs (one per family) that get no route, by reason (not-directly-connected: routed fabrics need routing = bgp; no-route, no-internal-ip, invalid, overlaps-own-pod-cidr, duplicate-pod-cidr).", reason, NULL, 0, &rt->m_skipped },
                { METRIC_COUNTER, "pinion_podnet_route_errors_total", "Failures of the route work, by kind (dump, add, replace, delete; conflict: a route of another protocol holds a prefix pinion wants).", kind, NULL, 0, &rt->m_errors },
        };
        int r = metrics_register(rt->mi->manager->metrics, families, ELEMENTSOF(families), collect_routing, rt,
                                 &rt->metrics_reg);
        if (r < 0)
                return r;
        /* Every op and kind at zero from the start: a rate or an alert has a zero to begin from. */
        for (enum routing_op o = 0; o < _ROUTING_OP_MAX; o++) {
                (void) metric_touch(rt->m_changes, routing_plan_op_to_string(o));
                (void) metric_touch(rt->m_errors, routing_plan_op_to_string(o));
        }
        (void) metric_touch(rt->m_errors, "dump");
        (void) metric_touch(rt->m_errors, "conflict");
        return 0;
}

/* ---- lifecycle ---- */

int routing_start(struct module_instance *mi) {
        struct podnet *p = mi->data;
        struct routing *rt = p->routing;
        int r;

        if (!rt) {
                rt = p->routing = calloc(1, sizeof(*rt));
                if (!rt)
                        return -ENOMEM;
                rt->mi = mi;
        }
        r = register_metrics(rt);
        if (r < 0)
                return r;
        triggers_stop(rt);
        if (rt->mode != p->settings->routing && rt->passes > 0)
                log_module_info(MODULE, "Routing mode %s (was %s)", routing_mode_to_string(p->settings->routing),
                                routing_mode_to_string(rt->mode));
        else if (p->settings->routing != ROUTING_NONE)
                log_module_info(MODULE, "Routing mode %s", routing_mode_to_string(p->settings->routing));
        rt->mode = p->settings->routing;
        rt->nodes_synced = false;
        /* Adopts what the kernel holds: routes already right stay, so a restart makes no gap. */
        (void) routing_pass(rt, "start", true);
        return triggers_start(rt);
}

/* With no pod attached nothing on the node needs the routes; with pods they stay for the next
 * agent. */
static void remove_all(struct routing *rt) {
        enum routing_mode mode = rt->mode;

        rt->mode = ROUTING_NONE; /* a pass in `none` removes every node route and aggregate of pinion's */
        (void) routing_pass(rt, "stop", false);
        rt->mode = mode;
}

void routing_stop(struct module_instance *mi) {
        struct podnet *p = mi->data;
        struct routing *rt = p->routing;

        if (!rt)
                return;
        triggers_stop(rt);
        if (rt->passes > 0) {
                size_t pods = p->ipam ? ipam_count(p->ipam) : 0;
                if (p->ipam && pods == 0) {
                        if (rt->n_installed > 0 || rt->mode != ROUTING_NONE)
                                log_module_info(MODULE, "No pod attached: removing pinion's node routes and aggregates");
                        remove_all(rt);
                } else if (rt->n_installed > 0 || rt->mode != ROUTING_NONE)
                        log_module_info(MODULE, "%zu pod(s) attached%s: leaving pinion's node routes and aggregates "
                                        "(%zu) for the next start", pods, p->ipam ? "" : " (or unknown)",
                                        rt->n_installed);
        }
        rt->metrics_reg = metrics_registration_free(rt->metrics_reg);
}

struct routing *routing_free(struct routing *rt) {
        if (!rt)
                return NULL;
        triggers_stop(rt);
        metrics_registration_free(rt->metrics_reg);
        installed_clear(rt);
        records_clear(&rt->skipped);
        records_clear(&rt->conflicts);
        free(rt->answers);
        free(rt);
        return NULL;
}

/* ---- status ---- */

static int records_to_json(cJSON *obj, const char *name, const struct records *rs, const char *what_key) {
        cJSON *a = cJSON_AddArrayToObject(obj, name);
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < rs->n; i++) {
                const struct record *r = &rs->items[i];
                cJSON *o = cJSON_CreateObject();
                if (!o || !cJSON_AddItemToArray(a, o))
                        return cJSON_Delete(o), -ENOMEM;
                if ((r->node && !cJSON_AddStringToObject(o, "node", r->node)) ||
                    (r->address && !cJSON_AddStringToObject(o, "address", r->address)) ||
                    (r->what && !cJSON_AddStringToObject(o, what_key, r->what)) ||
                    !cJSON_AddStringToObject(o, "reason", r->reason))
                        return -ENOMEM;
        }
        return 0;
}

static int installed_to_json(cJSON *obj, const struct routing *rt) {
        cJSON *routes = cJSON_AddObjectToObject(obj, "routes"), *agg = cJSON_AddArrayToObject(obj, "aggregates");
        size_t n[2] = {};
        char text[128];

        if (!routes || !agg)
                return -ENOMEM;
        for (size_t i = 0; i < rt->n_installed; i++) {
                const struct installed *in = &rt->installed[i];
                if (in->node) {
                        n[in->route.family == AF_INET6]++;
                        continue;
                }
                cJSON *s = cJSON_CreateString(routing_plan_format(&in->route, text, sizeof(text)));
                if (!s || !cJSON_AddItemToArray(agg, s))
                        return cJSON_Delete(s), -ENOMEM;
        }
        if (!cJSON_AddNumberToObject(routes, "ipv4", (double) n[0]) || !cJSON_AddNumberToObject(routes, "ipv6", (double) n[1]))
                return -ENOMEM;
        return 0;
}

static const char *nodes_state(const struct routing *rt) {
        if (rt->mode != ROUTING_NODES)
                return NULL;
        if (rt->nodes_synced)
                return "synced";
        return rt->fact_seen ? "listing" : "waiting for the apiserver module";
}

int routing_status(const struct podnet *p, cJSON *obj) {
        const struct routing *rt = p->routing;
        cJSON *o = cJSON_AddObjectToObject(obj, "routing");
        int r;

        if (!o || !cJSON_AddStringToObject(o, "mode", routing_mode_to_string(p->settings->routing)))
                return -ENOMEM;
        if (!rt || rt->passes == 0)
                return 0;
        const char *nodes = nodes_state(rt);
        if ((nodes && !cJSON_AddStringToObject(o, "nodes", nodes)) ||
            !cJSON_AddNumberToObject(o, "passes", (double) rt->passes) ||
            !json_add_time(o, "lastPass", rt->last_pass) ||
            (rt->last_error < 0 && !cJSON_AddStringToObject(o, "lastError", strerror(-rt->last_error))))
                return -ENOMEM;
        r = installed_to_json(o, rt);
        if (r >= 0)
                r = records_to_json(o, "skipped", &rt->skipped, "podCIDR");
        if (r >= 0)
                r = records_to_json(o, "conflicts", &rt->conflicts, "route");
        if (r < 0)
                return r;
        for (size_t i = 0; i < rt->skipped.n; i++)
                if (streq(rt->skipped.items[i].reason, routing_plan_reason_to_string(ROUTING_SKIP_NOT_CONNECTED)))
                        return cJSON_AddStringToObject(o, "hint", ROUTING_HINT) ? 0 : -ENOMEM;
        return 0;
}
