/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "node-table.h"

#define MODULE "apiserver"
#define NODE_CIDRS_MAX 8 /* spec.podCIDRs holds at most one per family; a few more are ignored */

/* ---- parsing ---- */

static bool is_cidr(const char *s, int family) {
        char addr[INET6_ADDRSTRLEN + 1], extra;
        unsigned char bin[16];
        unsigned prefix;

        if (family == AF_INET)
                return sscanf(s, "%16[0-9.]/%u%c", addr, &prefix, &extra) == 2 && prefix >= 8 && prefix <= 30 &&
                       inet_pton(AF_INET, addr, bin) == 1;
        return sscanf(s, "%46[0-9a-fA-F:.]/%u%c", addr, &prefix, &extra) == 2 && prefix >= 48 && prefix <= 126 &&
               inet_pton(AF_INET6, addr, bin) == 1;
}

void node_table_pod_cidrs(const cJSON *node, const char **ret_v4, const char **ret_v6) {
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(node, "spec");
        const cJSON *one = cJSON_GetObjectItemCaseSensitive(spec, "podCIDR");
        const cJSON *many = cJSON_GetObjectItemCaseSensitive(spec, "podCIDRs"), *c;
        const char *candidates[1 + NODE_CIDRS_MAX] = { cJSON_IsString(one) ? one->valuestring : NULL };
        size_t n = 1;

        *ret_v4 = *ret_v6 = NULL;
        if (cJSON_IsArray(many))
                cJSON_ArrayForEach(c, many)
                        if (n < ELEMENTSOF(candidates) && cJSON_IsString(c))
                                candidates[n++] = c->valuestring;
        for (size_t i = 0; i < n; i++) {
                if (candidates[i] && !*ret_v4 && is_cidr(candidates[i], AF_INET))
                        *ret_v4 = candidates[i];
                if (candidates[i] && !*ret_v6 && is_cidr(candidates[i], AF_INET6))
                        *ret_v6 = candidates[i];
        }
}

/* status.addresses' first InternalIP of the family, in the kernel's spelling (so a change of
 * spelling is no change), NULL if none. */
static int internal_ip(const cJSON *node, int family, char **ret) {
        const cJSON *status = cJSON_GetObjectItemCaseSensitive(node, "status");
        const cJSON *addresses = cJSON_GetObjectItemCaseSensitive(status, "addresses"), *a;
        unsigned char bin[16];
        char text[INET6_ADDRSTRLEN];

        *ret = NULL;
        if (!cJSON_IsArray(addresses))
                return 0;
        cJSON_ArrayForEach(a, addresses) {
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(a, "type");
                const cJSON *address = cJSON_GetObjectItemCaseSensitive(a, "address");
                if (!cJSON_IsString(type) || !streq(type->valuestring, "InternalIP") || !cJSON_IsString(address) ||
                    inet_pton(family, address->valuestring, bin) != 1)
                        continue;
                if (!inet_ntop(family, bin, text, sizeof(text)))
                        continue;
                *ret = strdup(text);
                return *ret ? 0 : -ENOMEM;
        }
        return 0;
}

static int strdup_or_null(const char *s, const char **ret) {
        *ret = NULL;
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

void node_table_entry_done(struct cluster_node *n) {
        free((char *) n->name);
        for (size_t f = 0; f < _CLUSTER_NODE_FAMILY_MAX; f++) {
                free((char *) n->address[f]);
                free((char *) n->pod_cidr[f]);
        }
        *n = (struct cluster_node) {};
}

int node_table_parse(const cJSON *node, struct cluster_node *ret) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(node, "metadata");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(meta, "name");
        const char *v4, *v6;
        char *a4 = NULL, *a6 = NULL;
        struct cluster_node n = {};

        if (!cJSON_IsString(name) || isempty(name->valuestring))
                return -EINVAL;
        node_table_pod_cidrs(node, &v4, &v6);
        int r = internal_ip(node, AF_INET, &a4);
        if (r >= 0)
                r = internal_ip(node, AF_INET6, &a6);
        n.address[CLUSTER_NODE_IPV4] = a4;
        n.address[CLUSTER_NODE_IPV6] = a6;
        if (r >= 0)
                r = strdup_or_null(name->valuestring, &n.name);
        if (r >= 0)
                r = strdup_or_null(v4, &n.pod_cidr[CLUSTER_NODE_IPV4]);
        if (r >= 0)
                r = strdup_or_null(v6, &n.pod_cidr[CLUSTER_NODE_IPV6]);
        if (r < 0) {
                node_table_entry_done(&n);
                return r;
        }
        *ret = n;
        return 0;
}

static bool entry_equal(const struct cluster_node *a, const struct cluster_node *b) {
        if (!streq_ptr(a->name, b->name))
                return false;
        for (size_t f = 0; f < _CLUSTER_NODE_FAMILY_MAX; f++)
                if (!streq_ptr(a->address[f], b->address[f]) || !streq_ptr(a->pod_cidr[f], b->pod_cidr[f]))
                        return false;
        return true;
}

static int entry_compare(const void *a, const void *b) {
        return strcmp(((const struct cluster_node *) a)->name, ((const struct cluster_node *) b)->name);
}

/* The index of name in a sorted array, or where it would go (*ret_found false). */
static size_t entries_find(const struct cluster_node *v, size_t n, const char *name, bool *ret_found) {
        size_t lo = 0, hi = n;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                int c = strcmp(v[mid].name, name);
                if (c == 0) {
                        *ret_found = true;
                        return mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *ret_found = false;
        return lo;
}

/* Entries of a that b lacks or holds otherwise (both sorted). */
static size_t entries_not_in(const struct cluster_node *a, size_t n_a, const struct cluster_node *b, size_t n_b) {
        size_t n = 0;
        for (size_t i = 0; i < n_a; i++) {
                bool found;
                size_t at = entries_find(b, n_b, a[i].name, &found);
                if (!found || !entry_equal(&b[at], &a[i]))
                        n++;
        }
        return n;
}

/* ---- announcing ---- */

static void table_announce(struct node_table *t) {
        t->n_changes++;
        for (size_t i = 0, n = observer_list_begin(&t->observers); i < n; i++) {
                struct observer_list_entry o;
                if (observer_list_get(&t->observers, i, &o))
                        ((cluster_nodes_fn) o.fn)(o.userdata);
        }
        observer_list_end(&t->observers);
}

static const char *or_none(const char *s) {
        return s ?: "-";
}

static void log_entry(const char *what, const struct cluster_node *n) {
        log_module_debug(MODULE, "Node %s %s: InternalIP %s %s, pod CIDRs %s %s", n->name, what,
                         or_none(n->address[CLUSTER_NODE_IPV4]), or_none(n->address[CLUSTER_NODE_IPV6]),
                         or_none(n->pod_cidr[CLUSTER_NODE_IPV4]), or_none(n->pod_cidr[CLUSTER_NODE_IPV6]));
}

/* ---- the reflector's sink ---- */

static void table_free_entries(struct cluster_node *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                node_table_entry_done(&v[i]);
        free(v);
}

static int node_table_list_item(void *userdata, const cJSON *item, const char **ret_kind) {
        struct node_table *t = userdata;
        struct cluster_node n;

        int r = node_table_parse(item, &n);
        if (r == -EINVAL) {
                log_module_warning(MODULE, "Ignoring a Node without a name in the list");
                *ret_kind = "invalid-object";
                return 0;
        }
        if (r < 0)
                return r;
        struct cluster_node *grown = realloc(t->list, (t->n_list + 1) * sizeof(*grown));
        if (!grown) {
                node_table_entry_done(&n);
                return -ENOMEM;
        }
        t->list = grown;
        t->list[t->n_list++] = n;
        return 0;
}

static void node_table_list_abort(void *userdata) {
        struct node_table *t = userdata;
        table_free_entries(t->list, t->n_list);
        t->list = NULL;
        t->n_list = 0;
}

static int node_table_list_commit(void *userdata) {
        struct node_table *t = userdata;

        if (t->n_list > 0)
                qsort(t->list, t->n_list, sizeof(*t->list), entry_compare);
        /* Duplicate names (a server bug) would break the lookup: keep the first. */
        size_t k = 0;
        for (size_t i = 0; i < t->n_list; i++) {
                if (k > 0 && streq(t->list[k - 1].name, t->list[i].name)) {
                        node_table_entry_done(&t->list[i]);
                        continue;
                }
                t->list[k++] = t->list[i];
        }
        t->n_list = k;
        /* Added or changed, plus gone (a changed one counts twice: it is both). */
        size_t changes = entries_not_in(t->list, t->n_list, t->nodes, t->n_nodes) +
                         entries_not_in(t->nodes, t->n_nodes, t->list, t->n_list);
        bool differs = !t->synced || changes > 0;
        table_free_entries(t->nodes, t->n_nodes);
        t->nodes = t->list;
        t->n_nodes = t->n_list;
        t->list = NULL;
        t->n_list = 0;
        t->synced = true;
        if (differs)
                table_announce(t);
        return (int) MIN(changes, (size_t) INT_MAX);
}

static int node_table_event(void *userdata, enum watch_event_type type, const cJSON *object, const char **ret_kind) {
        struct node_table *t = userdata;
        struct cluster_node n;
        bool found;

        int r = node_table_parse(object, &n);
        if (r == -EINVAL) {
                log_module_warning(MODULE, "Ignoring a Node without a name (%s event)",
                                   watch_stream_event_type_to_string(type));
                *ret_kind = "invalid-object";
                return 0;
        }
        if (r < 0)
                return r;
        size_t at = entries_find(t->nodes, t->n_nodes, n.name, &found);
        if (type == WATCH_DELETED) {
                node_table_entry_done(&n);
                if (!found)
                        return 0;
                log_entry("deleted", &t->nodes[at]);
                node_table_entry_done(&t->nodes[at]);
                memmove(t->nodes + at, t->nodes + at + 1, (t->n_nodes - at - 1) * sizeof(*t->nodes));
                t->n_nodes--;
        } else if (found && entry_equal(&t->nodes[at], &n)) {
                /* A heartbeat or a condition: nothing a route depends on. */
                node_table_entry_done(&n);
                t->n_unchanged++;
                return 0;
        } else if (found) {
                log_entry("changed", &n);
                node_table_entry_done(&t->nodes[at]);
                t->nodes[at] = n;
        } else {
                struct cluster_node *grown = realloc(t->nodes, (t->n_nodes + 1) * sizeof(*grown));
                if (!grown) {
                        node_table_entry_done(&n);
                        return -ENOMEM;
                }
                t->nodes = grown;
                memmove(t->nodes + at + 1, t->nodes + at, (t->n_nodes - at) * sizeof(*t->nodes));
                t->nodes[at] = n;
                t->n_nodes++;
                log_entry("added", &n);
        }
        table_announce(t);
        return 0;
}

static size_t node_table_count(void *userdata) {
        struct node_table *t = userdata;
        return t->n_nodes;
}

/* ---- the fact ---- */

static int fact_subscribe(void *owner, cluster_nodes_fn fn, void *userdata) {
        struct node_table *t = owner;
        int r = observer_list_add(&t->observers, (observer_list_fn) fn, userdata, 0);
        if (r >= 0 && t->wanted)
                t->wanted(t->wanted_userdata);
        return r;
}

static void fact_unsubscribe(void *owner, cluster_nodes_fn fn, void *userdata) {
        struct node_table *t = owner;
        observer_list_remove(&t->observers, (observer_list_fn) fn, userdata);
}

static bool fact_synced(void *owner) {
        const struct node_table *t = owner;
        return t->synced;
}

static size_t fact_nodes(void *owner, const struct cluster_node **ret) {
        const struct node_table *t = owner;
        *ret = t->nodes;
        return t->n_nodes;
}

bool node_table_wanted(const struct node_table *t) {
        return observer_list_has_any(&t->observers);
}

int node_table_init(struct node_table *t, void (*wanted)(void *userdata), void *userdata) {
        *t = (struct node_table) {
                .sink = {
                        .resource = "nodes",
                        .description = "the cluster's Nodes",
                        .list_item = node_table_list_item,
                        .list_commit = node_table_list_commit,
                        .list_abort = node_table_list_abort,
                        .event = node_table_event,
                        .count = node_table_count,
                },
                .fact = {
                        .subscribe = fact_subscribe,
                        .unsubscribe = fact_unsubscribe,
                        .synced = fact_synced,
                        .nodes = fact_nodes,
                },
                .wanted = wanted,
                .wanted_userdata = userdata,
        };
        t->sink.userdata = t;
        t->fact.owner = t;
        return 0;
}

void node_table_done(struct node_table *t) {
        node_table_list_abort(t);
        table_free_entries(t->nodes, t->n_nodes);
        observer_list_done(&t->observers);
        free(t->sink.selector);
        *t = (struct node_table) {};
}
