/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs.h"
#include "macro.h"
#include "peer-creds.h"
#include "peer-pod.h"

#define UID "0b6c7a9e-4f1d-4c59-9e0d-2a8f1e3b7c11"
#define UID_US "0b6c7a9e_4f1d_4c59_9e0d_2a8f1e3b7c11"
#define OTHER "11111111-2222-3333-4444-555555555555"
#define OTHER_US "11111111_2222_3333_4444_555555555555"
#define CID "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define CID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static char *const roots[] = { (char *) "/kubepods", (char *) "/kubepods.slice", NULL };

/* want_uid NULL: in no pod. want_cid NULL: in the pod's own cgroup. */
static void expect(const char *text, const char *want_uid, const char *want_cid) {
        _cleanup_(peer_pod_done) struct peer_pod pod = {};
        int r = peer_pod_from_proc_cgroup(text, roots, &pod);
        if (!want_uid) {
                assert_int_equal(r, 0);
                assert_null(pod.uid);
                assert_null(pod.container_id);
                return;
        }
        assert_int_equal(r, 1);
        assert_string_equal(pod.uid, want_uid);
        if (want_cid)
                assert_string_equal(pod.container_id, want_cid);
        else
                assert_null(pod.container_id);
}

/* Cannot be attested: neither a pod nor the host. */
static void expect_bad(const char *text) {
        _cleanup_(peer_pod_done) struct peer_pod pod = {};
        assert_int_equal(peer_pod_from_proc_cgroup(text, roots, &pod), -EBADMSG);
        assert_null(pod.uid);
        assert_null(pod.container_id);
}

static void test_cgroupfs_v1(void **state) {
        (void) state;
        /* Every line the kubelet placed agrees; the v2 line of a hybrid system names no pod. */
        expect("12:memory:/kubepods/burstable/pod" UID "/" CID "\n"
               "11:cpu,cpuacct:/kubepods/burstable/pod" UID "/" CID "\n"
               "1:name=systemd:/kubepods/burstable/pod" UID "/" CID "\n"
               "0::/\n",
               UID, CID);
        expect("4:memory:/kubepods/besteffort/pod" UID "/" CID "\n", UID, CID);
        /* Guaranteed pods sit directly under kubepods. */
        expect("4:memory:/kubepods/pod" UID "/" CID "\n", UID, CID);
        /* CRI-O with cgroupfs names the container crio-<id>. */
        expect("4:pids:/kubepods/pod" UID "/crio-" CID "\n", UID, CID);
        /* The pause container: the pod's own cgroup. */
        expect("4:memory:/kubepods/burstable/pod" UID "\n", UID, NULL);
        /* A container that owns its cgroup may nest below it. */
        expect("0::/kubepods/pod" UID "/" CID "/init\n", UID, CID);
}

static void test_cgroupfs_v2(void **state) {
        (void) state;
        expect("0::/kubepods/burstable/pod" UID "/" CID "\n", UID, CID);
        expect("0::/kubepods/pod" UID "/" CID "\n", UID, CID);
}

static void test_systemd_driver(void **state) {
        (void) state;
        static const char *const runtimes[] = { "cri-containerd", "crio", "docker", "libpod" };
        for (size_t i = 0; i < ELEMENTSOF(runtimes); i++) {
                char text[512];
                snprintf(text, sizeof(text),
                         "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" UID_US ".slice/%s-" CID ".scope\n",
                         runtimes[i]);
                expect(text, UID, CID);
        }
        expect("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US
               ".slice/cri-containerd-" CID ".scope\n",
               UID, CID);
        /* Guaranteed pods sit directly below kubepods.slice. */
        expect("0::/kubepods.slice/kubepods-pod" UID_US ".slice/cri-containerd-" CID ".scope\n", UID, CID);
        /* v1 with the systemd driver: every controller and the named systemd hierarchy. */
        expect("9:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US
               ".slice/crio-" CID ".scope\n"
               "1:name=systemd:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US
               ".slice/crio-" CID ".scope\n",
               UID, CID);
        /* The pause container's path ends at the pod's slice. */
        expect("9:memory:/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US ".slice\n", UID, NULL);
}

static void test_other_roots(void **state) {
        _cleanup_(peer_pod_done) struct peer_pod pod = {};
        static char *const mine[] = { (char *) "/test-1/kubepods", (char *) "/test-1/kubepods.slice", NULL };
        (void) state;
        assert_int_equal(peer_pod_from_proc_cgroup("0::/test-1/kubepods/burstable/pod" UID "/" CID "\n", mine, &pod), 1);
        assert_string_equal(pod.uid, UID);
        peer_pod_done(&pod);
        assert_int_equal(peer_pod_from_proc_cgroup("0::/test-1/kubepods.slice/kubepods-pod" UID_US ".slice/crio-" CID
                                              ".scope\n",
                                              mine, &pod),
                         1);
        assert_string_equal(pod.container_id, CID);
        peer_pod_done(&pod);
        /* The default roots are not among them. */
        assert_int_equal(peer_pod_from_proc_cgroup("0::/kubepods/pod" UID "/" CID "\n", mine, &pod), 0);
        /* A root's name must match whole segments. */
        assert_int_equal(peer_pod_from_proc_cgroup("0::/test-1/kubepods2/pod" UID "/" CID "\n", mine, &pod), 0);

        assert_true(peer_pod_cgroup_root_valid("/kubepods"));
        assert_true(peer_pod_cgroup_root_valid("/a/kubepods.slice"));
        assert_false(peer_pod_cgroup_root_valid("/"));
        assert_false(peer_pod_cgroup_root_valid("kubepods"));
        assert_false(peer_pod_cgroup_root_valid("/kubepods/"));
        assert_false(peer_pod_cgroup_root_valid("/a//kubepods"));
        assert_false(peer_pod_cgroup_root_valid("/a/../kubepods"));
        assert_false(peer_pod_cgroup_root_valid(""));
}

static void test_not_a_pod(void **state) {
        (void) state;
        expect("0::/system.slice/sshd.service\n", NULL, NULL);
        expect("12:memory:/user.slice/user-0.slice/session-3.scope\n0::/init.scope\n", NULL, NULL);
        expect("", NULL, NULL);
        expect("0::/\n", NULL, NULL);
        expect("0::/podcast.service\n", NULL, NULL);
        /* A pod's name outside the roots: a host user's delegated subtree, anyone's to make. */
        expect("0::/user.slice/user-1000.slice/user@1000.service/pod" OTHER "\n", NULL, NULL);
        expect("0::/user.slice/user-1000.slice/user@1000.service/kubepods/pod" OTHER "/" CID "\n", NULL, NULL);
        expect("0::/user.slice/user-1000.slice/user@1000.service/kubepods-pod" OTHER_US ".slice/crio-" CID ".scope\n",
               NULL, NULL);
        /* A root's name must be the whole segment. */
        expect("0::/kubepods-evil/pod" OTHER "/" CID "\n", NULL, NULL);
        /* Malformed lines are skipped. */
        expect("garbage\n::\n0::/kubepods/pod" UID "/" CID "\n", UID, CID);
}

static void test_not_the_kubelets_layout(void **state) {
        (void) state;
        /* Below a root, only the kubelet's shapes: anything else is neither a pod nor the host. */
        expect_bad("0::/kubepods\n");
        expect_bad("0::/kubepods/burstable\n");
        expect_bad("0::/kubepods/guaranteed/pod" UID "/" CID "\n");
        expect_bad("0::/kubepods/x/pod" UID "/" CID "\n");
        expect_bad("0::/kubepods/burstable/x/pod" UID "/" CID "\n"); /* pod segment deeper */
        expect_bad("0::/kubepods/burstable/burstable/pod" UID "\n");
        expect_bad("0::/kubepods.slice/kubepods-burstable.slice/x/kubepods-burstable-pod" UID_US ".slice\n");
        /* The driver's spelling under its root only. */
        expect_bad("0::/kubepods/kubepods-pod" UID_US ".slice/crio-" CID ".scope\n");
        expect_bad("0::/kubepods.slice/pod" UID "/" CID "\n");
        expect_bad("0::/kubepods.slice/kubepods-besteffort-pod" UID_US ".slice\n"); /* QoS slice skipped */
        expect_bad("0::/kubepods.slice/kubepods-burstable.slice/kubepods-besteffort-pod" UID_US ".slice\n");
        expect_bad("0::/kubepods.slice/other-pod" UID_US ".slice\n");
        /* UID characters: too short, not hex, upper case, the other separator, empty. */
        expect_bad("0::/kubepods/podxyz/" CID "\n");
        expect_bad("0::/kubepods/pod1234/" CID "\n");
        expect_bad("0::/kubepods/pod/" CID "\n");
        expect_bad("0::/kubepods/pod0B6C7A9E-4F1D-4C59-9E0D-2A8F1E3B7C11/" CID "\n");
        expect_bad("0::/kubepods/pod" UID_US "/" CID "\n");
        expect_bad("0::/kubepods.slice/kubepods-pod" UID ".slice\n");
        expect_bad("0::/kubepods.slice/kubepods-pod.slice\n");
        /* Path tricks and cgroup-namespace-relative paths. */
        expect_bad("0::/kubepods/pod../../etc\n");
        expect_bad("0::/kubepods/pod" UID "/../pod" OTHER "\n");
        expect_bad("0::/kubepods/./pod" UID "\n");
        expect_bad("0::/kubepods//pod" UID "\n");
        expect_bad("0::/kubepods/pod" UID "/\n");
        expect_bad("0::/../../kubepods/pod" UID "/" CID "\n");
        expect_bad("0::kubepods/pod" UID "\n");
        /* Below the pod: a container's cgroup, nothing else. */
        expect_bad("0::/kubepods/pod" UID "/ctr0\n");
        expect_bad("0::/kubepods/pod" UID "/" CID "0\n");
        expect_bad("0::/kubepods/pod" UID "/9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08\n");
        expect_bad("0::/kubepods/pod" UID "/runc-" CID "\n");
        expect_bad("0::/kubepods.slice/kubepods-pod" UID_US ".slice/crio-conmon-" CID ".scope\n");
}

static void test_conflicting_lines(void **state) {
        (void) state;
        expect_bad("12:memory:/kubepods/pod" UID "/" CID "\n"
                   "0::/kubepods/pod" OTHER "/" CID "\n");
        /* The same pod, another container. */
        expect_bad("12:memory:/kubepods/pod" UID "/" CID "\n"
                   "11:pids:/kubepods/pod" UID "/" CID2 "\n");
        expect_bad("12:memory:/kubepods/pod" UID "/" CID "\n"
                   "11:pids:/kubepods/pod" UID "\n");
        /* A line below a root that is not the kubelet's layout spoils the others. */
        expect_bad("12:memory:/kubepods/pod" UID "/" CID "\n"
                   "11:pids:/kubepods/nope\n");
        /* Lines outside the roots contradict nothing. */
        expect("12:memory:/kubepods/pod" UID "/" CID "\n"
               "11:pids:/user.slice/pod" OTHER "\n"
               "0::/system.slice/containerd.service\n",
               UID, CID);
}

static void test_nested_pod_segment_attests_nothing(void **state) {
        (void) state;
        /* A container that owns its cgroup makes a "pod<victim>" directory below its own pod and
         * moves itself there: that attests nothing, never the inner pod, nor the outer. */
        expect_bad("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" UID_US
                   ".slice/cri-containerd-" CID ".scope/pod" OTHER "\n");
        expect_bad("4:memory:/kubepods/burstable/pod" UID "/" CID "/x-pod" OTHER_US ".slice\n");
        expect_bad("0::/kubepods/pod" UID "/" CID "/pod" UID "\n");
        /* Two pods in a row. */
        expect_bad("0::/kubepods/pod" UID "/pod" OTHER "\n");
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

/* A fake /proc with one process: its stat (comm with spaces and a ')' to test the parser), in
 * state state with flags (field 9), and its cgroup file. */
static void fake_proc_as(const char *root, unsigned long long start, char state, unsigned long flags,
                         const char *cgroup) {
        char path[512], stat[512];
        snprintf(path, sizeof(path), "%s/42", root);
        assert_int_equal(fs_mkdir_p(path, 0755), 0);
        snprintf(stat, sizeof(stat),
                 "42 (evil) (name) %c 1 42 42 0 -1 %lu 100 0 0 0 1 2 0 0 20 0 1 0 %llu 1000 100\n", state, flags,
                 start);
        snprintf(path, sizeof(path), "%s/42/stat", root);
        assert_int_equal(fs_write_file_atomic(path, stat, strlen(stat), 0644, (uid_t) -1, (gid_t) -1), 0);
        snprintf(path, sizeof(path), "%s/42/cgroup", root);
        assert_int_equal(fs_write_file_atomic(path, cgroup, strlen(cgroup), 0644, (uid_t) -1, (gid_t) -1), 0);
}

/* A running process (state S, the flags of an ordinary task). */
static void fake_proc(const char *root, unsigned long long start, const char *cgroup) {
        fake_proc_as(root, start, 'S', 4194560, cgroup);
}

/* A pidfd of this test: a live process, standing for the fake /proc's one. */
static int live_pidfd(void) {
        int fd = proc_pidfd_open(getpid());
        assert_true(fd >= 0);
        return fd;
}

static void test_lookup_checks_start_time(void **state) {
        char root[] = "/tmp/test-peer-pod-XXXXXX";
        _cleanup_(peer_pod_done) struct peer_pod pod = {};
        _cleanup_close_ int pidfd = live_pidfd();
        uint64_t start;
        (void) state;

        assert_non_null(mkdtemp(root));
        fake_proc(root, 5555, "0::/kubepods/pod" UID "/" CID "\n");
        assert_int_equal(proc_start_time(root, 42, &start), 0);
        assert_int_equal(start, 5555);

        assert_int_equal(peer_pod_lookup(root, roots, 42, pidfd, 5555, &pod), 1);
        assert_string_equal(pod.uid, UID);
        assert_string_equal(pod.container_id, CID);
        peer_pod_done(&pod);

        /* The PID now belongs to a process that started later: nothing. */
        fake_proc(root, 7777, "0::/kubepods/pod" UID "/" CID "\n");
        assert_int_equal(peer_pod_lookup(root, roots, 42, pidfd, 5555, &pod), -ESRCH);
        assert_null(pod.uid);
        /* Unknown start time: nothing can be attested. */
        assert_int_equal(peer_pod_lookup(root, roots, 42, pidfd, 0, &pod), -ESRCH);
        /* Gone. */
        assert_int_equal(peer_pod_lookup(root, roots, 43, pidfd, 7777, &pod), -ESRCH);
        /* Alive but in no pod. */
        fake_proc(root, 7777, "0::/system.slice/x.service\n");
        assert_int_equal(peer_pod_lookup(root, roots, 42, pidfd, 7777, &pod), 0);
        assert_null(pod.uid);
        /* Not the kubelet's layout. */
        fake_proc(root, 7777, "0::/kubepods/pod" UID "/ctr0\n");
        assert_int_equal(peer_pod_lookup(root, roots, 42, pidfd, 7777, &pod), -EBADMSG);
        assert_null(pod.uid);
        assert_int_equal(fs_rm_rf(root), 0);
}

/* An exiting task shows "/" on every v1 line of its /proc/PID/cgroup, a zombie too, its stat and
 * start time still there: read as "in no pod" it would be the host. Attested: nothing. */
static void test_zombie_or_exiting_attests_nothing(void **state) {
        static const char v1_root[] = "12:pids:/\n11:memory:/\n1:name=systemd:/\n0::/\n";
        static const struct {
                char state;
                unsigned long flags;
        } dying[] = { { 'Z', 4194316 }, { 'X', 4194316 }, { 'R', 4194560 | PROC_PF_EXITING },
                      { 'D', 4194560 | PROC_PF_EXITING } };
        char root[] = "/tmp/test-peer-pod-XXXXXX";
        _cleanup_(peer_pod_done) struct peer_pod pod = {};
        _cleanup_close_ int pidfd = live_pidfd();
        _cleanup_free_ char *text = NULL;
        struct proc_stat st;
        (void) state;

        assert_non_null(mkdtemp(root));
        /* Alive, in no pod: attested, in no pod. */
        fake_proc(root, 5555, v1_root);
        assert_int_equal(peer_pod_lookup(root, roots, 42, pidfd, 5555, &pod), 0);
        assert_int_equal(proc_peer_alive(root, 42, pidfd, 5555), 0);
        for (size_t i = 0; i < ELEMENTSOF(dying); i++) {
                fake_proc_as(root, 5555, dying[i].state, dying[i].flags, v1_root);
                assert_int_equal(proc_stat_read(root, 42, &st), 0);
                assert_int_equal(st.state, dying[i].state);
                assert_int_equal(st.flags, dying[i].flags);
                assert_int_equal(st.start_time, 5555);
                assert_false(proc_stat_running(&st));
                assert_int_equal(peer_pod_lookup(root, roots, 42, pidfd, 5555, &pod), -ESRCH);
                assert_null(pod.uid);
                assert_int_equal(proc_cgroup_read(root, 42, pidfd, 5555, &text), -ESRCH);
                assert_null(text);
                assert_int_equal(proc_peer_alive(root, 42, pidfd, 5555), -ESRCH);
        }
        /* No pidfd: nothing either, even for a running process. */
        fake_proc(root, 5555, v1_root);
        assert_int_equal(peer_pod_lookup(root, roots, 42, -EBADF, 5555, &pod), -ESRCH);
        assert_int_equal(fs_rm_rf(root), 0);
}

/* A child that waits for a byte on its pipe and exits; *ret_pipe: the write end. */
static pid_t child_waiting(int *ret_pipe) {
        int p[2];
        pid_t pid;

        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                char c;
                close(p[1]);
                (void) read(p[0], &c, 1);
                _exit(0);
        }
        close(p[0]);
        *ret_pipe = p[1];
        return pid;
}

static void wait_exited(int pidfd) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        assert_int_equal(poll(&p, 1, 10000), 1);
}

/* A real process that exits and is not reaped: its pidfd turns readable and its stat shows Z,
 * its start time unchanged: from then on its cgroup attests nothing, though it read fine alive. */
static void test_real_zombie_attests_nothing(void **state) {
        _cleanup_(peer_pod_done) struct peer_pod pod = {};
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int pidfd = -EBADF;
        uint64_t start, again;
        int wfd, r;
        pid_t pid;
        (void) state;

        pid = child_waiting(&wfd);
        pidfd = proc_pidfd_open(pid);
        assert_true(pidfd >= 0);
        assert_int_equal(proc_start_time(NULL, pid, &start), 0);
        assert_int_equal(proc_peer_alive(NULL, pid, pidfd, start), 0);
        assert_int_equal(proc_cgroup_read(NULL, pid, pidfd, start, &text), 0);
        text = mfree(text);
        r = peer_pod_lookup(NULL, roots, pid, pidfd, start, &pod);
        assert_true(r >= 0 || r == -EBADMSG);
        peer_pod_done(&pod);

        close(wfd);
        wait_exited(pidfd);
        /* Unreaped: still there, with the same start time. */
        assert_int_equal(proc_start_time(NULL, pid, &again), 0);
        assert_int_equal(again, start);
        assert_false(proc_pidfd_alive(pidfd));
        assert_int_equal(proc_peer_alive(NULL, pid, pidfd, start), -ESRCH);
        assert_int_equal(proc_cgroup_read(NULL, pid, pidfd, start, &text), -ESRCH);
        assert_int_equal(peer_pod_lookup(NULL, roots, pid, pidfd, start, &pod), -ESRCH);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        assert_int_equal(peer_pod_lookup(NULL, roots, pid, pidfd, start, &pod), -ESRCH);
}

/* A child connected to a listening socket of ours, then waiting for a byte on *ret_pipe to exit
 * (exit_first: it exits at once, and is a zombie, unreaped, before we accept). The accepted fd. */
static int accept_child(bool exit_first, pid_t *ret_pid, int *ret_pipe) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        char dir[] = "/tmp/test-peer-creds-XXXXXX";
        siginfo_t si = {};
        int l, fd, p[2];
        pid_t pid;

        assert_non_null(mkdtemp(dir));
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/s", dir);
        l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(l >= 0);
        assert_int_equal(bind(l, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(l, 4), 0);
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                int s = socket(AF_UNIX, SOCK_STREAM, 0);
                char c;
                close(p[1]);
                if (s < 0 || connect(s, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                        _exit(1);
                if (!exit_first)
                        (void) read(p[0], &c, 1);
                _exit(0);
        }
        close(p[0]);
        if (exit_first)
                assert_int_equal(waitid(P_PID, (id_t) pid, &si, WEXITED | WNOWAIT), 0);
        fd = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        assert_true(fd >= 0);
        close(l);
        assert_int_equal(fs_rm_rf(dir), 0);
        *ret_pid = pid;
        *ret_pipe = p[1];
        return fd;
}

/* peer_creds_read() keeps the pidfd of a peer alive at accept, and through it later reads see
 * the peer exit; a peer already a zombie at accept gets no pidfd and no start time. The pidfd
 * is closed with the credentials. */
static void test_peer_creds_hold_the_pidfd(void **state) {
        struct peer_creds c;
        struct peer peer;
        int fd, wfd, pidfd;
        pid_t pid;
        (void) state;

        fd = accept_child(false, &pid, &wfd);
        peer_creds_read(fd, &c);
        assert_true(c.known);
        assert_int_equal(c.pid, pid);
        assert_true(c.start_time > 0);
        assert_true(c.pidfd >= 0);
        pidfd = c.pidfd;
        peer = peer_creds_to_peer(&c, (gid_t) -1);
        assert_int_equal(peer.pidfd, pidfd);
        assert_int_equal(proc_peer_alive(NULL, pid, peer.pidfd, peer.start_time), 0);
        close(wfd);
        wait_exited(pidfd);
        assert_int_equal(proc_peer_alive(NULL, pid, peer.pidfd, peer.start_time), -ESRCH);
        peer_creds_done(&c);
        assert_int_equal(fcntl(pidfd, F_GETFD), -1);
        assert_int_equal(errno, EBADF);
        peer_creds_done(&c); /* twice: nothing closed twice */
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        close(fd);

        fd = accept_child(true, &pid, &wfd);
        peer_creds_read(fd, &c);
        assert_true(c.known);
        assert_int_equal(c.pid, pid);
        assert_int_equal(c.start_time, 0);
        assert_true(c.pidfd < 0);
        peer = peer_creds_to_peer(&c, (gid_t) -1);
        assert_int_equal(proc_peer_alive(NULL, pid, peer.pidfd, peer.start_time), -ESRCH);
        peer_creds_done(&c);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        close(wfd);
        close(fd);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cgroupfs_v1),
                cmocka_unit_test(test_cgroupfs_v2),
                cmocka_unit_test(test_systemd_driver),
                cmocka_unit_test(test_other_roots),
                cmocka_unit_test(test_not_a_pod),
                cmocka_unit_test(test_not_the_kubelets_layout),
                cmocka_unit_test(test_conflicting_lines),
                cmocka_unit_test(test_nested_pod_segment_attests_nothing),
                cmocka_unit_test(test_start_time_of_self),
                cmocka_unit_test(test_lookup_checks_start_time),
                cmocka_unit_test(test_zombie_or_exiting_attests_nothing),
                cmocka_unit_test(test_real_zombie_attests_nothing),
                cmocka_unit_test(test_peer_creds_hold_the_pidfd),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
