/* SPDX-License-Identifier: MIT */
/* The pod address pool (modules/podnet/ipam.c): allocation, quarantine, persistence. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>
#include <sys/stat.h>

#include "fs.h"
#include "ipam.h"
#include "json.h"

#define SEC USEC_PER_SEC

/* Linked with -Wl,--wrap=fsync,--wrap=fdatasync: a directory's fsync fails while
 * fail_dir_fsync is set, a file's while fail_file_fsync is, and every fdatasync (the journal's,
 * on the loop or the syncer thread) while fail_fdatasync is. */
int __real_fsync(int fd);
int __wrap_fsync(int fd);
int __real_fdatasync(int fd);
int __wrap_fdatasync(int fd);
static bool fail_dir_fsync, fail_file_fsync, fail_fdatasync;
static unsigned n_fdatasync;
int __wrap_fsync(int fd) {
        struct stat st;
        if ((fail_dir_fsync || fail_file_fsync) && fstat(fd, &st) == 0 &&
            (S_ISDIR(st.st_mode) ? fail_dir_fsync : fail_file_fsync)) {
                errno = EIO;
                return -1;
        }
        return __real_fsync(fd);
}
int __wrap_fdatasync(int fd) {
        n_fdatasync++;
        if (fail_fdatasync) {
                errno = EIO;
                return -1;
        }
        return __real_fdatasync(fd);
}

static const struct ipam_owner owner = { .host_ifname = "pin00000000", .pod_namespace = "ns", .pod_name = "p", .pod_uid = "u" };

static char *addr_of(const struct ipam_allocation *a) {
        static char buf[16];
        ipam_addr_format(a->addr, buf);
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
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &owner, 100 * SEC, &b), -EADDRNOTAVAIL);

        /* Released addresses wait out the quarantine. */
        assert_int_equal(ipam_release(p, "c1", "eth0", 100 * SEC, false), 1);
        assert_int_equal(ipam_release(p, "c1", "eth0", 100 * SEC, false), 0);
        ipam_usage(p, 105 * SEC, &u);
        assert_int_equal(u.allocated, 1);
        assert_int_equal(u.quarantined, 1);
        assert_int_equal(u.free, 0);
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &owner, 105 * SEC, &b), -EADDRNOTAVAIL);
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
        assert_int_equal(ipam_allocate(p, "more", "eth0", &owner, SEC, &a), -EADDRNOTAVAIL);
}

static void test_persistence(void **state) {
        char dir[] = "/tmp/test-podnet-ipam.XXXXXX";
        _cleanup_free_ char *file = NULL;
        const struct ipam_allocation *a;
        struct ipam *p = NULL;
        char *error = NULL;

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
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
        assert_int_equal(fs_write_file_atomic(file, "{\"version\":1,\"allocations\":7}", 30, 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(ipam_new("10.11.0.0/24", 30 * SEC, file, &p, &error), -EBADMSG);
        assert_non_null(error);
        free(error);
        error = NULL;
        assert_int_equal(fs_write_file_atomic(file, "garbage", 7, 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(ipam_new("10.11.0.0/24", 30 * SEC, file, &p, &error), -EBADMSG);
        free(error);
        assert_int_equal(fs_rm_rf(dir), 0);
}

static off_t file_size(const char *path) {
        struct stat st;
        return stat(path, &st) == 0 ? st.st_size : -1;
}

/* Deferred changes are written at once and flushed by the syncer; ipam_sync() waits for the
 * flush, and if it failed, makes them durable as a snapshot, or reports that it could not. Lazy
 * ones (releases) wait for the next flush. */
static void test_deferred_sync(void **state) {
        char dir[] = "/tmp/test-podnet-ipam.XXXXXX";
        _cleanup_free_ char *file = NULL, *journal = NULL;
        const struct ipam_allocation *a;
        struct ipam *p = NULL;

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
        journal = fs_path_join(dir, "allocations.journal");
        assert_int_equal(ipam_new("10.12.0.0/24", 0, file, &p, NULL), 0);

        /* Written before ipam_sync(): a kill -9 here keeps it. */
        ipam_defer_sync(p);
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &owner, 50 * SEC, &a), 1);
        assert_true(file_size(journal) > 0);
        assert_int_equal(ipam_sync(p), 0);
        off_t one = file_size(journal);

        /* The flush fails: the whole state goes into a new snapshot, the journal is emptied. */
        fail_fdatasync = true;
        ipam_defer_sync(p);
        assert_int_equal(ipam_allocate(p, "c2", "eth0", &owner, 50 * SEC, &a), 1);
        assert_true(file_size(journal) > one);
        assert_int_equal(ipam_sync(p), 0);
        assert_int_equal(file_size(journal), 0);

        /* And if the snapshot cannot be made durable either, ipam_sync() says so. */
        fail_file_fsync = true;
        ipam_defer_sync(p);
        assert_int_equal(ipam_release(p, "c1", "eth0", 60 * SEC, true), 1);
        assert_int_equal(ipam_sync(p), -EIO);
        fail_file_fsync = fail_fdatasync = false;
        /* Not deferring any more: the next change is flushed (after the snapshot it needs). */
        unsigned flushes = n_fdatasync;
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &owner, 70 * SEC, &a), 1);
        assert_int_equal(n_fdatasync, flushes + 1);

        /* Lazy: a release and a linkDeleted are written, not flushed on their own... */
        flushes = n_fdatasync;
        off_t before = file_size(journal);
        ipam_lazy_sync(p);
        assert_int_equal(ipam_release(p, "c3", "eth0", 80 * SEC, false), 1);
        assert_int_equal(ipam_sync(p), 0);
        assert_int_equal(ipam_link_deleted(p, "pin00000000"), 1);
        assert_true(file_size(journal) > before);
        usleep(10000); /* (the syncer thread, were it asked) */
        assert_int_equal(n_fdatasync, flushes);
        /* ...the next allocation's flush takes them along. */
        ipam_defer_sync(p);
        assert_int_equal(ipam_allocate(p, "c4", "eth0", &owner, 90 * SEC, &a), 1);
        assert_int_equal(ipam_sync(p), 0);
        assert_int_equal(n_fdatasync, flushes + 1);
        p = ipam_free(p);

        assert_int_equal(ipam_new("10.12.0.0/24", 0, file, &p, NULL), 0);
        assert_int_equal(ipam_count(p), 2);
        assert_non_null(ipam_find(p, "c2", "eth0"));
        assert_non_null(ipam_find(p, "c4", "eth0"));
        assert_int_equal(ipam_n_deleting(p), 0);
        p = ipam_free(p);
        assert_int_equal(fs_rm_rf(dir), 0);
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
        assert_int_equal(ipam_addr_parse_cidr("10.1.2.3/16", &net, &prefix), 0);
        assert_int_equal(net, 0x0a010000);
        assert_int_equal(prefix, 16);
        assert_int_equal(ipam_addr_parse_cidr("10.1.2.3/31", &net, &prefix), -EINVAL);
        assert_int_equal(ipam_addr_parse_cidr("10.1.2/24", &net, &prefix), -EINVAL);
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
        assert_int_equal(fs_rm_rf(dir), 0);
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
        assert_int_equal(fs_write_file_atomic_full(file, "{}", 2, 0600, (uid_t) -1, (gid_t) -1, &renamed), -EIO);
        assert_true(renamed);
        assert_int_equal(unlink(file), 0);

        assert_int_equal(ipam_new("10.14.0.0/24", 0, file, &p, NULL), 0);
        /* Every change folds the journal into the snapshot: each one renames a snapshot. */
        ipam_set_journal_limit(p, 0);
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
        assert_int_equal(fs_rm_rf(dir), 0);
}

static char *slurp(const char *path) {
        char *text = NULL;
        size_t size = 0;
        assert_int_equal(fs_read_file_full(path, 1u << 24, &text, &size), 0);
        return text;
}

static void append(const char *path, const char *text) {
        FILE *f = fopen(path, "a");
        assert_non_null(f);
        assert_int_equal(fputs(text, f) >= 0, 1);
        assert_int_equal(fclose(f), 0);
}

/* Two pools with the same allocations, quarantine and deletions. */
static void assert_same_state(const struct ipam *x, const struct ipam *y, usec_t now) {
        struct ipam_usage ux, uy;
        assert_int_equal(ipam_count(x), ipam_count(y));
        for (size_t i = 0; i < ipam_count(x); i++) {
                const struct ipam_allocation *a = ipam_get(x, i), *b = ipam_find(y, a->container_id, a->ifname);
                assert_non_null(b);
                assert_int_equal(a->addr, b->addr);
                assert_string_equal(a->host_ifname, b->host_ifname);
                assert_string_equal(a->netns ? a->netns : "", b->netns ? b->netns : "");
                assert_int_equal(a->since, b->since);
        }
        ipam_usage(x, now, &ux);
        ipam_usage(y, now, &uy);
        assert_memory_equal(&ux, &uy, sizeof(ux));
        assert_int_equal(ipam_n_deleting(x), ipam_n_deleting(y));
}

static struct ipam_owner owner_named(char buf[16], int i) {
        struct ipam_owner o = owner;
        snprintf(buf, 16, "pin%08x", (unsigned) i);
        o.host_ifname = buf;
        return o;
}

/* Changes are appended to the journal, not written into the snapshot; a restart replays them. A
 * snapshot from before the journal (version 1) is loaded as it is and upgraded by compaction. */
static void test_journal_replay_and_upgrade(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL, *again = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX", name[16];
        _cleanup_free_ char *file = NULL, *journal = NULL, *before = NULL, *after = NULL;
        const struct ipam_allocation *a;

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
        journal = fs_path_join(dir, "allocations.journal");
        const char *v1 = "{\"version\":1,\"cidr\":\"10.15.0.0/24\",\"cursor\":\"10.15.0.7\",\"allocations\":["
                         "{\"ip\":\"10.15.0.7\",\"containerID\":\"old\",\"ifname\":\"eth0\",\"hostIfname\":\"pinaaaaaaaa\","
                         "\"since\":5}],\"quarantine\":[{\"ip\":\"10.15.0.3\",\"releasedAt\":9}],\"deleting\":[\"pinbbbbbbbb\"]}";
        assert_int_equal(fs_write_file_atomic(file, v1, strlen(v1), 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(ipam_new("10.15.0.0/24", 30 * SEC, file, &p, NULL), 0);
        assert_int_equal(ipam_count(p), 1);
        assert_int_equal(ipam_n_deleting(p), 1);
        before = slurp(file);
        for (int i = 0; i < 20; i++) {
                char id[16];
                struct ipam_owner o = owner_named(name, i);
                snprintf(id, sizeof(id), "c%d", i);
                assert_int_equal(ipam_allocate(p, id, "eth0", &o, 10 * SEC, &a), 1);
                if (i == 0)
                        assert_string_equal(addr_of(a), "10.15.0.8"); /* next-fit from the old cursor */
                if (i % 3 == 0)
                        assert_int_equal(ipam_release(p, id, "eth0", 11 * SEC, i % 2 == 0), 1);
        }
        struct ipam_owner moved = owner_named(name, 99);
        moved.netns = "/run/netns/moved";
        assert_int_equal(ipam_update_owner(p, "c1", "eth0", &moved), 0);
        assert_int_equal(ipam_link_deleted(p, "pinbbbbbbbb"), 1);
        after = slurp(file);
        assert_string_equal(before, after); /* the snapshot is not rewritten per change */

        assert_int_equal(ipam_new("10.15.0.0/24", 30 * SEC, file, &again, NULL), 0);
        assert_same_state(p, again, 12 * SEC);
        assert_string_equal(ipam_find(again, "c1", "eth0")->netns, "/run/netns/moved");
        assert_non_null(ipam_find(again, "old", "eth0"));
        /* The quarantine and the cursor came back too: .3 is still quarantined, next-fit goes on. */
        assert_int_equal(ipam_allocate(again, "next", "eth0", &owner, 12 * SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.15.0.28");
        again = ipam_free(again);

        /* Compaction: a version 2 snapshot holding everything, an empty journal. */
        ipam_set_journal_limit(p, 0);
        assert_int_equal(ipam_allocate(p, "c99", "eth0", &owner, 13 * SEC, &a), 1);
        free(after);
        after = slurp(file);
        assert_non_null(strstr(after, "\"version\":2"));
        free(before);
        before = slurp(journal);
        assert_string_equal(before, "");
        assert_int_equal(ipam_new("10.15.0.0/24", 30 * SEC, file, &again, NULL), 0);
        assert_same_state(p, again, 13 * SEC);
        assert_int_equal(fs_rm_rf(dir), 0);
}

/* A kill -9 between writing the new snapshot and emptying the journal: the records the snapshot
 * holds are skipped (seq), not applied twice. */
static void test_compaction_interrupted(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL, *again = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX", name[16];
        _cleanup_free_ char *file = NULL, *journal = NULL, *records = NULL;
        const struct ipam_allocation *a;

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
        journal = fs_path_join(dir, "allocations.journal");
        assert_int_equal(ipam_new("10.16.0.0/24", 30 * SEC, file, &p, NULL), 0);
        for (int i = 0; i < 5; i++) {
                char id[16];
                struct ipam_owner o = owner_named(name, i);
                snprintf(id, sizeof(id), "c%d", i);
                assert_int_equal(ipam_allocate(p, id, "eth0", &o, SEC, &a), 1);
        }
        assert_int_equal(ipam_release(p, "c2", "eth0", 2 * SEC, true), 1);
        records = slurp(journal);
        ipam_set_journal_limit(p, 0);
        assert_int_equal(ipam_allocate(p, "c5", "eth0", &owner, 3 * SEC, &a), 1); /* compacts */
        /* Put back what the truncation removed, as if it never happened. */
        append(journal, records);
        assert_int_equal(ipam_new("10.16.0.0/24", 30 * SEC, file, &again, NULL), 0);
        assert_same_state(p, again, 3 * SEC);
        again = ipam_free(again);

        /* Appends after a compaction carry on from the snapshot's seq. */
        ipam_set_journal_limit(p, -1);
        assert_int_equal(ipam_release(p, "c5", "eth0", 4 * SEC, false), 1);
        assert_int_equal(ipam_new("10.16.0.0/24", 30 * SEC, file, &again, NULL), 0);
        assert_same_state(p, again, 4 * SEC);
        assert_null(ipam_find(again, "c5", "eth0"));
        assert_int_equal(fs_rm_rf(dir), 0);
}

/* A torn last line (the write a crash interrupted, never acknowledged) is dropped; a damaged line
 * before the end is corruption: refused with the line named, nothing overwritten. */
static void test_journal_torn_and_damaged(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL, *again = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX", name[16];
        _cleanup_free_ char *file = NULL, *journal = NULL, *good = NULL, *now = NULL;
        const struct ipam_allocation *a;
        char *error = NULL;

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
        journal = fs_path_join(dir, "allocations.journal");
        assert_int_equal(ipam_new("10.17.0.0/24", 30 * SEC, file, &p, NULL), 0);
        for (int i = 0; i < 3; i++) {
                char id[16];
                struct ipam_owner o = owner_named(name, i);
                snprintf(id, sizeof(id), "c%d", i);
                assert_int_equal(ipam_allocate(p, id, "eth0", &o, SEC, &a), 1);
        }
        p = ipam_free(p);
        good = slurp(journal);

        /* Half a record, no newline. */
        append(journal, "1234abcd {\"seq\":4,\"op\":\"allo");
        assert_int_equal(ipam_new("10.17.0.0/24", 30 * SEC, file, &p, NULL), 0);
        assert_int_equal(ipam_count(p), 3);
        now = slurp(journal);
        assert_string_equal(now, good); /* cut, so that the next append follows a whole line */
        assert_int_equal(ipam_allocate(p, "c3", "eth0", &owner, SEC, &a), 1);
        p = ipam_free(p);
        assert_int_equal(ipam_new("10.17.0.0/24", 30 * SEC, file, &p, NULL), 0);
        assert_int_equal(ipam_count(p), 4);
        p = ipam_free(p);

        /* A whole last line whose checksum is wrong: also an unacknowledged write. */
        append(journal, "00000000 {\"seq\":5,\"op\":\"linkDeleted\",\"hostIfname\":\"x\"}\n");
        assert_int_equal(ipam_new("10.17.0.0/24", 30 * SEC, file, &p, NULL), 0);
        assert_int_equal(ipam_count(p), 4);
        p = ipam_free(p);

        /* The same, followed by a good line: corruption. */
        free(good);
        good = slurp(journal);
        append(journal, "00000000 {\"seq\":5,\"op\":\"linkDeleted\",\"hostIfname\":\"x\"}\n");
        append(journal, good + strcspn(good, "\n") + 1); /* any whole line */
        free(now);
        now = slurp(journal);
        assert_int_equal(ipam_new("10.17.0.0/24", 30 * SEC, file, &p, &error), -EBADMSG);
        assert_non_null(error);
        assert_non_null(strstr(error, "allocations.journal line 5 is damaged"));
        free(error);
        error = NULL;
        free(good);
        good = slurp(journal);
        assert_string_equal(good, now); /* nothing overwritten */
        assert_int_equal(fs_rm_rf(dir), 0);
}

/* A requested address: reserved for the attachment, or a clear refusal and nothing allocated. */
static void test_static_request(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL, *again = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX";
        _cleanup_free_ char *file = NULL;
        const struct ipam_allocation *a;
        struct ipam_owner o1 = owner, o2 = owner;
        uint32_t net;
        unsigned prefix;

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
        assert_int_equal(ipam_addr_parse_cidr("10.18.0.0/24", &net, &prefix), 0);
        o2.host_ifname = "pin22222222";
        assert_int_equal(ipam_new("10.18.0.0/24", 30 * SEC, file, &p, NULL), 0);
        assert_int_equal(ipam_allocate_addr(p, "c1", "eth0", &o1, net + 50, SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.18.0.50");
        /* The same request again: idempotent. Another one for the attachment: refused. */
        assert_int_equal(ipam_allocate_addr(p, "c1", "eth0", &o1, net + 50, SEC, &a), 0);
        assert_int_equal(ipam_allocate_addr(p, "c1", "eth0", &o1, net + 51, SEC, &a), -EEXIST);
        /* Taken, outside the pool, the network and broadcast addresses. */
        assert_int_equal(ipam_allocate_addr(p, "c2", "eth0", &o2, net + 50, SEC, &a), -EADDRINUSE);
        assert_int_equal(ipam_allocate_addr(p, "c2", "eth0", &o2, net, SEC, &a), -ERANGE);
        assert_int_equal(ipam_allocate_addr(p, "c2", "eth0", &o2, net + 255, SEC, &a), -ERANGE);
        assert_int_equal(ipam_allocate_addr(p, "c2", "eth0", &o2, net + 256, SEC, &a), -ERANGE);
        assert_int_equal(ipam_allocate_addr(p, "c2", "eth0", &o2, 0xa9fe0101, SEC, &a), -ERANGE);
        /* Quarantined. */
        assert_int_equal(ipam_release(p, "c1", "eth0", 2 * SEC, false), 1);
        assert_int_equal(ipam_allocate_addr(p, "c2", "eth0", &o2, net + 50, 3 * SEC, &a), -EBUSY);
        assert_int_equal(ipam_count(p), 0);
        assert_null(ipam_find(p, "c2", "eth0"));
        /* The dynamic cursor did not move: next-fit starts at .1; it skips a requested address. */
        assert_int_equal(ipam_allocate_addr(p, "c3", "eth0", &o1, net + 2, 3 * SEC, &a), 1);
        assert_int_equal(ipam_allocate(p, "c4", "eth0", &o2, 3 * SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.18.0.1");
        assert_int_equal(ipam_allocate(p, "c5", "eth0", &owner, 3 * SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.18.0.3");
        /* After the quarantine the address can be requested again; all of it survives a restart. */
        assert_int_equal(ipam_allocate_addr(p, "c2", "eth0", &o2, net + 50, 40 * SEC, &a), 1);
        assert_int_equal(ipam_new("10.18.0.0/24", 30 * SEC, file, &again, NULL), 0);
        assert_same_state(p, again, 40 * SEC);
        assert_int_equal(fs_rm_rf(dir), 0);
}

/* Thousands of allocations: every address distinct, lookups by attachment and address agree,
 * releases in any order keep the tables right, and the pool fills up exactly. */
static void test_large_pool(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL;
        const struct ipam_allocation *a;
        char id[32], name[16];
        struct ipam_usage u;

        assert_int_equal(ipam_new("10.20.0.0/20", 0, NULL, &p, NULL), 0);
        for (int i = 0; i < 4094; i++) {
                struct ipam_owner o = owner_named(name, i);
                snprintf(id, sizeof(id), "c%d", i);
                assert_int_equal(ipam_allocate(p, id, "eth0", &o, SEC, &a), 1);
                assert_int_equal(a->addr, 0x0a140000 + 1 + (uint32_t) i);
        }
        assert_int_equal(ipam_allocate(p, "more", "eth0", &owner, SEC, &a), -EADDRNOTAVAIL);
        for (int i = 0; i < 4094; i += 3) {
                snprintf(id, sizeof(id), "c%d", i);
                assert_int_equal(ipam_release(p, id, "eth0", SEC, false), 1);
        }
        for (int i = 0; i < 4094; i++) {
                snprintf(id, sizeof(id), "c%d", i);
                a = ipam_find(p, id, "eth0");
                if (i % 3 == 0) {
                        assert_null(a);
                        assert_null(ipam_find_addr(p, 0x0a140000 + 1 + (uint32_t) i));
                } else {
                        assert_non_null(a);
                        assert_ptr_equal(ipam_find_addr(p, a->addr), a);
                }
        }
        for (size_t i = 0; i < ipam_count(p); i++)
                assert_ptr_equal(ipam_find(p, ipam_get(p, i)->container_id, "eth0"), ipam_get(p, i));
        ipam_usage(p, SEC, &u);
        assert_int_equal(u.allocated, 4094 - 1365);
        /* Next-fit wraps around and finds each freed address once. */
        for (int i = 0; i < 1365; i++) {
                snprintf(id, sizeof(id), "n%d", i);
                assert_int_equal(ipam_allocate(p, id, "eth0", &owner, SEC, &a), 1);
                assert_int_equal(a->addr, 0x0a140000 + 1 + 3 * (uint32_t) i);
        }
        assert_int_equal(ipam_allocate(p, "more", "eth0", &owner, SEC, &a), -EADDRNOTAVAIL);
}

static char *addr6_of(const struct ipam_allocation *a) {
        static char buf[INET6_ADDRSTRLEN];
        assert_true(a->has_addr6);
        ipam_addr_format6(&a->addr6, buf);
        return buf;
}

/* An IPv4 and an IPv6 pool: each attachment gets one of each, released, quarantined, requested
 * and persisted together; an IPv6-only pool too. */
static void test_dual_stack(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL, *again = NULL, *six = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX", name[16];
        _cleanup_free_ char *file = NULL, *v4 = NULL, *v6 = NULL;
        const struct ipam_allocation *a;
        struct ipam_usage u;
        struct in6_addr want6;
        const char *reason = NULL;

        assert_int_equal(ipam_addr_parse_pod_cidrs("10.21.0.0/24, fd00:21::/64", &v4, &v6, &reason), 0);
        assert_string_equal(v4, "10.21.0.0/24");
        assert_string_equal(v6, "fd00:21::/64");
        free(v4), free(v6), v4 = v6 = NULL;
        assert_int_equal(ipam_addr_parse_pod_cidrs("fd00:21::/120", &v4, &v6, &reason), 0);
        assert_null(v4);
        free(v6), v6 = NULL;
        const char *bad[] = { "", "10.0.0.0/24,10.1.0.0/24", "fd00::/64 fd01::/64", "fd00::/8", "fd00::/127",
                              "fd00::1::/64", "10.0.0.0/24,x" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                reason = NULL;
                assert_int_equal(ipam_addr_parse_pod_cidrs(bad[i], &v4, &v6, &reason), -EINVAL);
                assert_non_null(reason);
        }

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
        assert_int_equal(ipam_new("10.21.0.0/24,fd00:21::/64", 30 * SEC, file, &p, NULL), 0);
        assert_true(ipam_has_family(p, AF_INET) && ipam_has_family(p, AF_INET6));
        struct ipam_owner o = owner_named(name, 1);
        assert_int_equal(ipam_allocate(p, "c1", "eth0", &o, SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.21.0.1");
        assert_string_equal(addr6_of(a), "fd00:21::1");
        assert_ptr_equal(ipam_find_addr6(p, &a->addr6), a);
        /* A request of both families, then of one (the other dynamic). */
        assert_int_equal(inet_pton(AF_INET6, "fd00:21::99", &want6), 1);
        uint32_t want4 = 0x0a150063;
        o = owner_named(name, 2);
        assert_int_equal(ipam_allocate_request(p, "c2", "eth0", &o, &want4, &want6, SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.21.0.99");
        assert_string_equal(addr6_of(a), "fd00:21::99");
        assert_int_equal(ipam_allocate_request(p, "c2", "eth0", &o, NULL, &want6, SEC, &a), 0);
        assert_int_equal(ipam_allocate_request(p, "c3", "eth0", &o, NULL, &want6, SEC, &a), -EADDRINUSE);
        assert_int_equal(inet_pton(AF_INET6, "fd00:22::5", &want6), 1);
        assert_int_equal(ipam_allocate_request(p, "c3", "eth0", &o, NULL, &want6, SEC, &a), -ERANGE);
        assert_int_equal(inet_pton(AF_INET6, "fd00:21::", &want6), 1); /* the subnet-router anycast address */
        assert_int_equal(ipam_allocate_request(p, "c3", "eth0", &o, NULL, &want6, SEC, &a), -ERANGE);
        assert_int_equal(inet_pton(AF_INET6, "fd00:21::5", &want6), 1);
        o = owner_named(name, 3);
        assert_int_equal(ipam_allocate_request(p, "c3", "eth0", &o, NULL, &want6, SEC, &a), 1);
        assert_string_equal(addr_of(a), "10.21.0.2");
        assert_string_equal(addr6_of(a), "fd00:21::5");

        /* Release: both quarantined, both come back after it. */
        assert_int_equal(ipam_release(p, "c1", "eth0", 2 * SEC, false), 1);
        assert_true(ipam_usage6(p, 3 * SEC, &u));
        assert_int_equal(u.allocated, 2);
        assert_int_equal(u.quarantined, 1);
        assert_int_equal(inet_pton(AF_INET6, "fd00:21::1", &want6), 1);
        assert_int_equal(ipam_allocate_request(p, "c4", "eth0", &o, NULL, &want6, 3 * SEC, &a), -EBUSY);
        assert_null(ipam_find(p, "c4", "eth0"));

        /* A restart: the same allocations, quarantine and cursors; and the status shows both pools. */
        assert_int_equal(ipam_new("10.21.0.0/24,fd00:21::/64", 30 * SEC, file, &again, NULL), 0);
        assert_same_state(p, again, 3 * SEC);
        assert_string_equal(addr6_of(ipam_find(again, "c3", "eth0")), "fd00:21::5");
        assert_int_equal(ipam_allocate_request(again, "c4", "eth0", &o, NULL, &want6, 3 * SEC, &a), -EBUSY);
        o = owner_named(name, 4);
        assert_int_equal(ipam_allocate(again, "c4", "eth0", &o, 3 * SEC, &a), 1);
        assert_string_equal(addr6_of(a), "fd00:21::2"); /* next-fit after ::1, skipping the quarantined one */
        _cleanup_(cJSON_Deletep) cJSON *j = ipam_to_json(again, 3 * SEC);
        assert_non_null(j);
        const cJSON *p6 = cJSON_GetObjectItem(j, "ipv6");
        assert_non_null(p6);
        assert_string_equal(cJSON_GetObjectItem(p6, "podCIDR")->valuestring, "fd00:21::/64");
        assert_int_equal(cJSON_GetObjectItem(p6, "allocated")->valueint, 3);
        assert_int_equal(cJSON_GetObjectItem(p6, "size")->valueint, IPAM_MAX_POOL6);
        assert_int_equal(fs_rm_rf(dir), 0);

        /* IPv6 only: no IPv4 address, an IPv4 request refused, a small pool fills up. */
        assert_int_equal(ipam_new("fd00:23::/126", 0, NULL, &six, NULL), 0);
        assert_false(ipam_has_family(six, AF_INET));
        for (int i = 1; i <= 3; i++) {
                char id[8];
                snprintf(id, sizeof(id), "s%d", i);
                o = owner_named(name, 10 + i);
                assert_int_equal(ipam_allocate(six, id, "eth0", &o, SEC, &a), 1);
                assert_int_equal(a->addr, 0);
        }
        assert_string_equal(addr6_of(a), "fd00:23::3");
        assert_int_equal(ipam_allocate(six, "s4", "eth0", &o, SEC, &a), -EADDRNOTAVAIL);
        assert_int_equal(ipam_allocate_request(six, "s4", "eth0", &o, &want4, NULL, SEC, &a), -EAFNOSUPPORT);
        ipam_usage(six, SEC, &u);
        assert_int_equal(u.size, 0);
        assert_int_equal(u.allocated, 0);
}

/* Every allocation reserves, in the journal's file, blocks past its end for its release (no
 * bytes a reader sees): the journal holds more blocks than its size needs, also after a
 * compaction replaced it, and the compaction leaves no file of its own behind. */
static off_t reserved_past_end(const char *path) {
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        return (off_t) st.st_blocks * 512 - st.st_size;
}

static void test_release_reserve(void **state) {
        _cleanup_(ipam_freep) struct ipam *p = NULL;
        char dir[] = "/tmp/test-podnet-ipam-XXXXXX", name[16];
        _cleanup_free_ char *file = NULL, *journal = NULL, *next = NULL;
        const struct ipam_allocation *a;

        assert_non_null(mkdtemp(dir));
        file = fs_path_join(dir, "allocations.json");
        journal = fs_path_join(dir, "allocations.journal");
        next = fs_path_join(dir, "allocations.journal.next");
        assert_int_equal(ipam_new("10.16.0.0/24", 30 * SEC, file, &p, NULL), 0);
        for (int i = 0; i < 40; i++) {
                char id[16];
                struct ipam_owner o = owner_named(name, i);
                snprintf(id, sizeof(id), "c%d", i);
                assert_int_equal(ipam_allocate(p, id, "eth0", &o, SEC, &a), 1);
        }
        /* 40 releases and linkDeleted records: at least 40 * (256 + 128) bytes. */
        assert_true(reserved_past_end(journal) >= 40 * 384);
        ipam_set_journal_limit(p, 0);
        assert_int_equal(ipam_release(p, "c0", "eth0", 2 * SEC, false), 1); /* compacts */
        assert_true(reserved_past_end(journal) >= 39 * 384);
        assert_int_equal(access(next, F_OK), -1);
        assert_int_equal(fs_rm_rf(dir), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_allocate_release),
                cmocka_unit_test(test_distinct_many),
                cmocka_unit_test(test_persistence),
                cmocka_unit_test(test_deferred_sync),
                cmocka_unit_test(test_host_ifname),
                cmocka_unit_test(test_repeated_allocate_and_update_owner),
                cmocka_unit_test(test_renamed_but_not_durable),
                cmocka_unit_test(test_journal_replay_and_upgrade),
                cmocka_unit_test(test_compaction_interrupted),
                cmocka_unit_test(test_release_reserve),
                cmocka_unit_test(test_journal_torn_and_damaged),
                cmocka_unit_test(test_static_request),
                cmocka_unit_test(test_large_pool),
                cmocka_unit_test(test_dual_stack),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
