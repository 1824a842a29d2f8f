/* SPDX-License-Identifier: MIT */
/* The Node table: what a Node object says about routes (name, InternalIP and pod CIDRs per
 * family), lists that replace the table, and watch events that change nothing dropped unheard. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "node-table.h"

static cJSON *node(const char *name, const char *v4, const char *v6, const char *cidrs, const char *heartbeat) {
        char text[1024];
        snprintf(text, sizeof(text),
                 "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"podCIDRs\":[%s]},"
                 "\"status\":{\"addresses\":[{\"type\":\"Hostname\",\"address\":\"%s\"},"
                 "{\"type\":\"ExternalIP\",\"address\":\"203.0.113.9\"}%s%s%s%s%s%s],"
                 "\"conditions\":[{\"type\":\"Ready\",\"lastHeartbeatTime\":\"%s\"}]}}",
                 name, cidrs, name, v4 ? ",{\"type\":\"InternalIP\",\"address\":\"" : "", v4 ?: "", v4 ? "\"}" : "",
                 v6 ? ",{\"type\":\"InternalIP\",\"address\":\"" : "", v6 ?: "", v6 ? "\"}" : "", heartbeat);
        cJSON *j = cJSON_Parse(text);
        assert_non_null(j);
        return j;
}

static void test_parse(void **state) {
        struct cluster_node n;
        cJSON *j = node("n1", "192.0.2.1", "2001:DB8::0:1", "\"10.1.0.0/24\",\"fd00:1::/64\"", "t1");
        assert_int_equal(node_table_parse(j, &n), 0);
        assert_string_equal(n.name, "n1");
        assert_string_equal(n.address[CLUSTER_NODE_IPV4], "192.0.2.1");
        assert_string_equal(n.address[CLUSTER_NODE_IPV6], "2001:db8::1"); /* the kernel's spelling */
        assert_string_equal(n.pod_cidr[CLUSTER_NODE_IPV4], "10.1.0.0/24");
        assert_string_equal(n.pod_cidr[CLUSTER_NODE_IPV6], "fd00:1::/64");
        node_table_entry_done(&n);
        cJSON_Delete(j);

        /* Single-stack, a bad CIDR and a bad address ignored; the older spec.podCIDR is read too. */
        j = cJSON_Parse("{\"metadata\":{\"name\":\"n2\"},\"spec\":{\"podCIDR\":\"10.2.0.0/24\",\"podCIDRs\":[\"nonsense\",\"10.9.0.0/33\"]},"
                        "\"status\":{\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"999.1.1.1\"},{\"type\":\"InternalIP\",\"address\":\"192.0.2.2\"}]}}");
        assert_int_equal(node_table_parse(j, &n), 0);
        assert_string_equal(n.address[CLUSTER_NODE_IPV4], "192.0.2.2");
        assert_null(n.address[CLUSTER_NODE_IPV6]);
        assert_string_equal(n.pod_cidr[CLUSTER_NODE_IPV4], "10.2.0.0/24");
        assert_null(n.pod_cidr[CLUSTER_NODE_IPV6]);
        node_table_entry_done(&n);
        cJSON_Delete(j);

        /* No name: not a Node. Garbage everywhere else: a Node with nothing to route. */
        j = cJSON_Parse("{\"metadata\":{},\"spec\":{}}");
        assert_int_equal(node_table_parse(j, &n), -EINVAL);
        cJSON_Delete(j);
        j = cJSON_Parse("{\"metadata\":{\"name\":\"n3\"},\"spec\":{\"podCIDRs\":7},\"status\":{\"addresses\":{\"a\":1}}}");
        assert_int_equal(node_table_parse(j, &n), 0);
        assert_null(n.address[CLUSTER_NODE_IPV4]);
        assert_null(n.pod_cidr[CLUSTER_NODE_IPV4]);
        node_table_entry_done(&n);
        cJSON_Delete(j);
}

struct heard {
        unsigned calls, wanted;
};

static void on_change(void *userdata) {
        ((struct heard *) userdata)->calls++;
}

static void on_wanted(void *userdata) {
        ((struct heard *) userdata)->wanted++;
}

static void list(struct node_table *t, cJSON **items, size_t n, int expect_changes) {
        for (size_t i = 0; i < n; i++) {
                const char *kind = NULL;
                assert_int_equal(t->sink.list_item(t, items[i], &kind), 0);
                assert_null(kind);
                cJSON_Delete(items[i]);
        }
        assert_int_equal(t->sink.list_commit(t), expect_changes);
}

static void event(struct node_table *t, enum watch_event_type type, cJSON *obj) {
        const char *kind = NULL;
        assert_int_equal(t->sink.event(t, type, obj, &kind), 0);
        assert_null(kind);
        cJSON_Delete(obj);
}

static void test_table(void **state) {
        struct node_table t;
        struct heard h = {};
        const struct cluster_node *v;

        assert_int_equal(node_table_init(&t, on_wanted, &h), 0);
        assert_false(t.fact.synced(t.fact.owner));
        assert_false(node_table_wanted(&t));
        assert_int_equal(t.fact.subscribe(t.fact.owner, on_change, &h), 0);
        assert_int_equal(t.fact.subscribe(t.fact.owner, on_change, &h), -EEXIST);
        assert_true(node_table_wanted(&t));
        assert_int_equal(h.wanted, 1);

        /* The first list is announced even when empty: "synced, no Nodes" is news. */
        list(&t, NULL, 0, 0);
        assert_true(t.fact.synced(t.fact.owner));
        assert_int_equal(h.calls, 1);

        cJSON *items[] = { node("n2", "192.0.2.2", NULL, "\"10.2.0.0/24\"", "t1"),
                           node("n1", "192.0.2.1", "2001:db8::1", "\"10.1.0.0/24\",\"fd00:1::/64\"", "t1"),
                           node("n1", "192.0.2.99", NULL, "", "t1") /* a duplicate name: the first wins */ };
        list(&t, items, 3, 2);
        assert_int_equal(h.calls, 2);
        assert_int_equal(t.fact.nodes(t.fact.owner, &v), 2);
        assert_string_equal(v[0].name, "n1");
        assert_string_equal(v[1].name, "n2");

        /* A heartbeat: dropped, nobody hears of it. */
        event(&t, WATCH_MODIFIED, node("n2", "192.0.2.2", NULL, "\"10.2.0.0/24\"", "t2"));
        assert_int_equal(h.calls, 2);
        assert_int_equal(t.n_unchanged, 1);

        /* A new address, a new Node, a deleted one: each heard once. */
        event(&t, WATCH_MODIFIED, node("n2", "192.0.2.20", NULL, "\"10.2.0.0/24\"", "t3"));
        assert_int_equal(h.calls, 3);
        event(&t, WATCH_ADDED, node("n0", "192.0.2.3", NULL, "\"10.3.0.0/24\"", "t1"));
        assert_int_equal(h.calls, 4);
        assert_int_equal(t.fact.nodes(t.fact.owner, &v), 3);
        assert_string_equal(v[0].name, "n0");
        assert_string_equal(v[2].address[CLUSTER_NODE_IPV4], "192.0.2.20");
        event(&t, WATCH_DELETED, node("n1", NULL, NULL, "", "t1"));
        assert_int_equal(h.calls, 5);
        assert_int_equal(t.fact.nodes(t.fact.owner, &v), 2);
        event(&t, WATCH_DELETED, node("n9", NULL, NULL, "", "t1")); /* unknown: nothing */
        assert_int_equal(h.calls, 5);

        /* A relist that finds the same Nodes changes nothing and is not announced. */
        cJSON *same[] = { node("n0", "192.0.2.3", NULL, "\"10.3.0.0/24\"", "t9"),
                          node("n2", "192.0.2.20", NULL, "\"10.2.0.0/24\"", "t9") };
        list(&t, same, 2, 0);
        assert_int_equal(h.calls, 5);
        /* One that lost n0 and changed n2: gone 1, changed 2 (counted on both sides). */
        cJSON *fewer[] = { node("n2", "192.0.2.21", NULL, "\"10.2.0.0/24\"", "t9") };
        list(&t, fewer, 1, 3);
        assert_int_equal(h.calls, 6);

        /* An aborted list leaves the table alone. */
        const char *kind = NULL;
        cJSON *x = node("n7", "192.0.2.7", NULL, "\"10.7.0.0/24\"", "t1");
        assert_int_equal(t.sink.list_item(&t, x, &kind), 0);
        cJSON_Delete(x);
        t.sink.list_abort(&t);
        assert_int_equal(t.fact.nodes(t.fact.owner, &v), 1);

        /* Invalid objects are skipped and counted by kind. */
        x = cJSON_Parse("{\"metadata\":{}}");
        assert_int_equal(t.sink.event(&t, WATCH_ADDED, x, &kind), 0);
        assert_string_equal(kind, "invalid-object");
        cJSON_Delete(x);

        t.fact.unsubscribe(t.fact.owner, on_change, &h);
        assert_false(node_table_wanted(&t));
        node_table_done(&t);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_table),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
