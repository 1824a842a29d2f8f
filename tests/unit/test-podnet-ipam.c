/* SPDX-License-Identifier: MIT */
/* The pod address pool (modules/podnet/ipam.c): allocation, quarantine, persistence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sys/stat.h>

#include "fsutil.h"
#include "ipam.h"

#define SEC USEC_PER_SEC

/* Linked with -Wl,--wrap=fsync: a directory's fsync fails while fail_dir_fsync is set. */
int __real_fsync(int fd);
int __wrap_fsync(int fd);
static bool fail_dir_fsync;
int __wrap_fsync(int fd) {
        struct stat st;
        if (fail_dir_fsync && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
                errno = EIO;
                return -1;
        }
        return __real_fsync(fd);
}

static const struct ipam_owner owner = { .host_ifname = "pin00000000", .pod_namespace = "ns", .pod_name = "p", .pod_uid = "u" };

static char *addr_of(const struct ipam_allocation *a) {
        static char buf[16];
        ipam_format_addr(a->addr, buf);
        return buf;
}

static void test_allocate_release(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL;
        const struct ipam_allocation *a, *b;
        struct ipam_usage u;

        assert_int_equal(ipam_new("10.9.0.0/30", 10 * SEC, NULL, &p, NULL), 0);
        ipam_usage(p, 0, &u);
        assert_int_equal(u.size, 2); /* .1 and .2: not the network, not the broadcast */
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &owner, 100 * SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.9.0.1");
        /* The same attachment again: the same address. */
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &owner, 100 * SEC, &b), 0);
        assert_ptr_equal(a, b);
        assert_int_equal(ipam_allocate(p, "c2", "eth0", &owner, 100 * SEC, &b), 1);
        assert_string_equal(addr_of(b), "10.9.0.2");
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &owner, 100 * SEC, &b), -ENOSPC);

        /* Released addresses wait out the quarantine. */
        assert_int_equal(ipam_release(p, "c1", "eth0", 100 * SEC, false), 1);
        assert_int_equal(ipam_release(p, "c1", "eth0", 100 * SEC, false), 0);
        ipam_usage(p, 105 * SEC, &u);
        assert_int_equal(u.allocated, 1);
        assert_int_equal(u.quarantined, 1);
        assert_int_equal(u.free, 0);
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &owner, 105 * SEC, &b), -ENOSPC);
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &owner, 111 * SEC, &b), 1);
        assert_string_equal(addr_of(b), "10.9.0.1");
        assert_null(ipam_find(p, "c1", "eth0"));
        assert_non_null(ipam_find(p, "c3", "eth0"));
}

static void test_distinct_many(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL;
        const struct ipam_allocation *a;
        char id[32];

        assert_int_equal(ipam_new("10.10.0.0/24", 30 * SEC, NULL, &p, NULL), 0);
        for (int i = 0; i < 254; i++) {
                snprintf(id, sizeof(id), "c%d", i);
                assert_int_equal(ipam_allocate(p, id, "eth0", &owner, SEC, &a), 1);
        }
        for (size_t i = 0; i < ipam_count(p); i++)
                for (size_t j = i + 1; j < ipam_count(p); j++)
                        assert_int_not_equal(ipam_get(p, i)->addr, ipam_get(p, j)->addr);
        assert_int_equal(ipam_allocate(p, "more", "eth0", &owner, SEC, &a), -ENOSPC);
}

static void test_persistence(void **state) {
        char dir[] = "/tmp/test-podnet-ipam.XXXXXX";
        _cleanup_free_ char *file = NULL;
        const struct ipam_allocation *a;
        struct ipam *p = NULL;
        char *error = NULL;

        assert_non_null(mkdtemp(dir));
        file = path_join(dir, "allocations.json");
        assert_int_equal(ipam_new("10.11.0.0/24", 30 * SEC, file, &p, NULL), 0);
        struct ipam_owner o = owner;
        o.netns = "/var/run/netns/x";
        o.netns_ino = 4026532999; /* nsfs inodes are this large: above 2^31 */
        o.host_ifname = "pin12345678";
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &o, 50 * SEC, &a), 1);
        assert_int_equal(ipam_allocate(p, "c2", "eth0", &o, 50 * SEC, &a), 1);
        assert_int_equal(ipam_release(p, "c1", "eth0", 60 * SEC, true), 1);
        p = ipam_free(p);

        /* A restart: the allocation, its owner, the quarantine and the cursor come back. */
        assert_int_equal(ipam_new("10.11.0.0/24", 30 * SEC, file, &p, NULL), 0);
        assert_int_equal(ipam_count(p), 1);
        a = ipam_find(p, "c2", "eth0");
        assert_non_null(a);
        assert_string_equal(addr_of(a), "10.11.0.2");
        assert_string_equal(a->host_ifname, "pin12345678");
        assert_string_equal(a->pod_uid, "u");
        assert_string_equal(a->netns, "/var/run/netns/x");
        assert_true(a->netns_ino == 4026532999);
        /* c1's host interface was still being deleted: recorded, its name not handed out. */
        assert_int_equal(ipam_n_deleting(p), 1);
        assert_string_equal(ipam_deleting(p, 0), "pin12345678");
        char name[16];
        assert_int_equal(ipam_host_ifname(p, "c9", "eth0", name), 0);
        assert_int_equal(ipam_link_deleted(p, "pin12345678"), 1);
        assert_int_equal(ipam_link_deleted(p, "pin12345678"), 0);
        assert_int_equal(ipam_n_deleting(p), 0);
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &o, 70 * SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.11.0.3"); /* .1 is quarantined; next-fit from .2 */
        p = ipam_free(p);

        /* A damaged file is refused, never overwritten. */
        assert_int_equal(write_file_atomic(file, "{\"version\":1,\"allocations\":7}", 30, 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(ipam_new("10.11.0.0/24", 30 * SEC, file, &p, &error), -EBADMSG);
        assert_non_null(error);
        free(error);
        error = NULL;
        assert_int_equal(write_file_atomic(file, "garbage", 7, 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(ipam_new("10.11.0.0/24", 30 * SEC, file, &p, &error), -EBADMSG);
        free(error);
        assert_int_equal(rm_rf(dir), 0);
}

static void test_host_ifname(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL;
        const struct ipam_allocation *a;
        char n1[16], n2[16];

        assert_int_equal(ipam_new("10.12.0.0/24", 0, NULL, &p, NULL), 0);
        assert_int_equal(ipam_host_ifname(p, "c1", "eth0", n1), 0);
        assert_int_equal(strlen(n1), 11);
        assert_int_equal(ipam_host_ifname(p, "c1", "eth0", n2), 0);
        assert_string_equal(n1, n2); /* stable */
        assert_int_equal(ipam_host_ifname(p, "c1", "eth1", n2), 0);
        assert_string_not_equal(n1, n2);
        struct ipam_owner o = owner;
        o.host_ifname = n2;
        assert_int_equal(ipam_allocate(p, "c1", "eth1", &o, SEC, &a), 1);
        /* Another attachment that hashed to a taken name would get another one. */
        assert_int_equal(ipam_host_ifname(p, "c1", "eth1", n1), 0);
        assert_string_equal(n1, n2);
        uint32_t net;
        unsigned prefix;
        assert_int_equal(ipam_parse_cidr("10.1.2.3/16", &net, &prefix), 0);
        assert_int_equal(net, 0x0a010000);
        assert_int_equal(prefix, 16);
        assert_int_equal(ipam_parse_cidr("10.1.2.3/31", &net, &prefix), -EINVAL);
        assert_int_equal(ipam_parse_cidr("10.1.2/24", &net, &prefix), -EINVAL);
}

/* A repeated allocation leaves the allocation as it was (a repeated ADD that then fails must not
 * change it); ipam_update_owner() records the owner of one that worked, on disk too. */
static void test_repeated_allocate_and_update_owner(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL, *again = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX";
        _cleanup_free_ char *file = NULL;
        const struct ipam_allocation *a, *b;
        struct ipam_owner o1 = owner, o2 = owner;

        assert_non_null(mkdtemp(dir));
        assert_true(asprintf(&file, "%s/state.json", dir) > 0);
        o1.netns = "/var/run/netns/one";
        o2.netns = "/var/run/netns/two";
        o2.pod_uid = "u2";
        o1.network = "net1";
        o1.mtu = 1500;
        o2.network = "net2";
        o2.mtu = 1400;
        assert_int_equal(ipam_new("10.13.0.0/24", 0, file, &p, NULL), 0);
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &o1, SEC, &a), 1);
        uint32_t addr = a->addr;
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &o2, 2 * SEC, &b), 0);
        assert_ptr_equal(a, b);
        assert_string_equal(b->netns, "/var/run/netns/one");
        assert_string_equal(b->pod_uid, "u");
        assert_string_equal(b->network, "net1");
        assert_int_equal(b->mtu, 1500);
        assert_int_equal(b->since, SEC);

        assert_int_equal(ipam_update_owner(p, "c1", "eth0", &o2), 0);
        b = ipam_find(p, "c1", "eth0");
        assert_int_equal(b->addr, addr);
        assert_string_equal(b->netns, "/var/run/netns/two");
        assert_string_equal(b->pod_uid, "u2");
        assert_int_equal(b->since, SEC);
        assert_int_equal(ipam_update_owner(p, "nope", "eth0", &o2), -ENOENT);

        assert_int_equal(ipam_new("10.13.0.0/24", 0, file, &again, NULL), 0);
        b = ipam_find(again, "c1", "eth0");
        assert_non_null(b);
        assert_string_equal(b->netns, "/var/run/netns/two");
        assert_string_equal(b->pod_uid, "u2");
        /* The network and the MTU it was wired with survive a restart (GC and CHECK use them). */
        assert_string_equal(b->network, "net2");
        assert_int_equal(b->mtu, 1400);
        assert_int_equal(unlink(file), 0);
        assert_int_equal(rmdir(dir), 0);
}

/* The state file was renamed into place but its directory's fsync failed: the change stands in
 * memory as on disk (no rollback), and the caller learns of it once. */
static void test_renamed_but_not_durable(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL, *again = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX";
        _cleanup_free_ char *file = NULL;
        const struct ipam_allocation *a;
        bool renamed = false;

        assert_non_null(mkdtemp(dir));
        assert_true(asprintf(&file, "%s/state.json", dir) > 0);
        /* The core function first: the failure after the rename is told apart. */
        fail_dir_fsync = true;
        assert_int_equal(write_file_atomic_full(file, "{}", 2, 0600, (uid_t) -1, (gid_t) -1, &renamed), -EIO);
        assert_true(renamed);
        assert_int_equal(unlink(file), 0);

        assert_int_equal(ipam_new("10.14.0.0/24", 0, file, &p, NULL), 0);
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &owner, SEC, &a), 1);
        assert_int_equal(ipam_take_not_durable(p), -EIO);
        assert_int_equal(ipam_take_not_durable(p), 0);
        assert_int_equal(ipam_count(p), 1);
        assert_int_equal(ipam_release(p, "c1", "eth0", 2 * SEC, false), 1);
        assert_int_equal(ipam_take_not_durable(p), -EIO);
        assert_int_equal(ipam_count(p), 0);
        assert_int_equal(ipam_allocate(p, "c2", "eth0", &owner, 3 * SEC, &a), 1);
        fail_dir_fsync = false;
        assert_int_equal(ipam_take_not_durable(p), -EIO);
        /* Memory and disk agree. */
        assert_int_equal(ipam_new("10.14.0.0/24", 0, file, &again, NULL), 0);
        assert_int_equal(ipam_count(again), 1);
        assert_non_null(ipam_find(again, "c2", "eth0"));
        assert_null(ipam_find(again, "c1", "eth0"));
        /* And a write that works reports nothing. */
        assert_int_equal(ipam_release(p, "c2", "eth0", 4 * SEC, false), 1);
        assert_int_equal(ipam_take_not_durable(p), 0);
        assert_int_equal(unlink(file), 0);
        assert_int_equal(rmdir(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_allocate_release),
                cmocka_unit_test(test_distinct_many),
                cmocka_unit_test(test_persistence),
                cmocka_unit_test(test_host_ifname),
                cmocka_unit_test(test_repeated_allocate_and_update_owner),
                cmocka_unit_test(test_renamed_but_not_durable),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
