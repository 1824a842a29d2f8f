/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fsutil.h"
#include "macro.h"
#include "peer-pod.h"

#define UID "0b6c7a9e-4f1d-4c59-9e0d-2a8f1e3b7c11"
#define UID_US "0b6c7a9e_4f1d_4c59_9e0d_2a8f1e3b7c11"

static void expect_uid(const char *text, const char *want) {
        _cleanup_free_ char *uid = NULL;
        int r = pod_uid_from_proc_cgroup(text, &uid);
        if (!want) {
                assert_int_equal(r, 0);
                assert_null(uid);
                return;
        }
        assert_int_equal(r, 1);
        assert_string_equal(uid, want);
}

static void test_cgroupfs_v1(void **state) {
        (void) state;
        expect_uid("12:memory:/kubepods/burstable/pod" UID "/3f1c0e2d9b\n"
                   "11:cpu,cpuacct:/kubepods/burstable/pod" UID "/3f1c0e2d9b\n"
                   "1:name=systemd:/kubepods/burstable/pod" UID "/3f1c0e2d9b\n"
                   "0::/\n",
                   UID);
        /* Guaranteed pods sit directly under kubepods. */
        expect_uid("4:memory:/kubepods/pod" UID "/abc\n", UID);
}

static void test_systemd_driver(void **state) {
        (void) state;
        expect_uid("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_US
                   ".slice/cri-containerd-0123456789abcdef.scope\n",
                   UID);
        expect_uid("0::/kubepods.slice/kubepods-pod" UID_US ".slice/crio-77.scope\n", UID);
        /* The v2 line as systemd 252 writes it for containerd's scope (a 64-hex container id),
         * for each QoS class: guaranteed pods sit directly below kubepods.slice. */
        expect_uid("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US
                   ".slice/cri-containerd-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.scope\n",
                   UID);
        expect_uid("0::/kubepods.slice/kubepods-pod" UID_US
                   ".slice/cri-containerd-9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08.scope\n",
                   UID);
        /* The pause container's path ends at the pod's slice. */
        expect_uid("9:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US ".slice\n", UID);
}

static void test_not_a_pod(void **state) {
        (void) state;
        expect_uid("0::/system.slice/sshd.service\n", NULL);
        expect_uid("12:memory:/user.slice/user-0.slice/session-3.scope\n0::/init.scope\n", NULL);
        expect_uid("", NULL);
        /* Look-alikes: too short, not hex, path tricks, a "pod" without a uid. */
        expect_uid("0::/kubepods/podxyz/1\n", NULL);
        expect_uid("0::/kubepods/pod1234/1\n", NULL);
        expect_uid("0::/kubepods/pod../../etc\n", NULL);
        expect_uid("0::/kubepods/pod/1\n", NULL);
        expect_uid("0::/kubepods.slice/kubepods-pod.slice\n", NULL);
        expect_uid("0::/podcast.service\n", NULL);
        /* Malformed lines are skipped. */
        expect_uid("garbage\n::\n0::/kubepods/pod" UID "\n", UID);
}

static void test_conflicting_pods(void **state) {
        _cleanup_free_ char *uid = NULL;
        (void) state;
        assert_int_equal(pod_uid_from_proc_cgroup("12:memory:/kubepods/pod" UID "/c\n"
                                                  "0::/kubepods/pod11111111-2222-3333-4444-555555555555/c\n",
                                                  &uid),
                         -EBADMSG);
        assert_null(uid);
}

static void test_nested_pod_segment_attests_nothing(void **state) {
        _cleanup_free_ char *uid = NULL;
        (void) state;
        /* A container that owns its cgroup makes a "pod<victim>" directory below its own pod and
         * moves itself there: the outer (kubelet's) pod counts, and two pods in one path are an
         * error, never the inner one. */
        assert_int_equal(pod_uid_from_proc_cgroup("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US
                                                  ".slice/cri-containerd-0123.scope/pod11111111-2222-3333-4444-555555555555\n",
                                                  &uid),
                         -EBADMSG);
        assert_null(uid);
        assert_int_equal(pod_uid_from_proc_cgroup("4:memory:/kubepods/burstable/pod" UID
                                                  "/0123abcd/x-pod11111111_2222_3333_4444_555555555555.slice\n",
                                                  &uid),
                         -EBADMSG);
        assert_null(uid);
        /* The same pod named twice (a nested slice of its own) is still that pod. */
        expect_uid("0::/kubepods/pod" UID "/c/pod" UID "\n", UID);
}

static void test_start_time_of_self(void **state) {
        uint64_t a, b;
        (void) state;
        assert_int_equal(proc_start_time(NULL, getpid(), &a), 0);
        assert_int_equal(proc_start_time(NULL, getpid(), &b), 0);
        assert_true(a > 0);
        assert_int_equal(a, b);
        assert_int_equal(proc_start_time(NULL, 0x3ffffff0, &a), -ESRCH);
}

/* A fake /proc with one process: its stat (comm with spaces and a ')' to test the parser) and
 * its cgroup file. */
static void fake_proc(const char *root, unsigned long long start, const char *cgroup) {
        char path[512], stat[512];
        snprintf(path, sizeof(path), "%s/42", root);
        assert_int_equal(mkdir_p(path, 0755), 0);
        snprintf(stat, sizeof(stat),
                 "42 (evil) (name) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 %llu 1000 100\n", start);
        snprintf(path, sizeof(path), "%s/42/stat", root);
        assert_int_equal(write_file_atomic(path, stat, strlen(stat), 0644, (uid_t) -1, (gid_t) -1), 0);
        snprintf(path, sizeof(path), "%s/42/cgroup", root);
        assert_int_equal(write_file_atomic(path, cgroup, strlen(cgroup), 0644, (uid_t) -1, (gid_t) -1), 0);
}

static void test_lookup_checks_start_time(void **state) {
        char root[] = "/tmp/test-peer-pod-XXXXXX";
        _cleanup_free_ char *uid = NULL;
        uint64_t start;
        (void) state;

        assert_non_null(mkdtemp(root));
        fake_proc(root, 5555, "0::/kubepods/pod" UID "/c\n");
        assert_int_equal(proc_start_time(root, 42, &start), 0);
        assert_int_equal(start, 5555);

        assert_int_equal(peer_pod_lookup(root, 42, 5555, &uid), 1);
        assert_string_equal(uid, UID);
        uid = mfree(uid);

        /* The PID now belongs to a process that started later: nothing. */
        fake_proc(root, 7777, "0::/kubepods/pod" UID "/c\n");
        assert_int_equal(peer_pod_lookup(root, 42, 5555, &uid), -ESRCH);
        assert_null(uid);
        /* Unknown start time: nothing can be attested. */
        assert_int_equal(peer_pod_lookup(root, 42, 0, &uid), -ESRCH);
        /* Gone. */
        assert_int_equal(peer_pod_lookup(root, 43, 7777, &uid), -ESRCH);
        /* Alive but in no pod. */
        fake_proc(root, 7777, "0::/system.slice/x.service\n");
        assert_int_equal(peer_pod_lookup(root, 42, 7777, &uid), 0);
        assert_null(uid);
        assert_int_equal(rm_rf(root), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cgroupfs_v1),
                cmocka_unit_test(test_systemd_driver),
                cmocka_unit_test(test_not_a_pod),
                cmocka_unit_test(test_conflicting_pods),
                cmocka_unit_test(test_nested_pod_segment_attests_nothing),
                cmocka_unit_test(test_start_time_of_self),
                cmocka_unit_test(test_lookup_checks_start_time),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
