/* SPDX-License-Identifier: MIT */
/* caller.c: every kind of caller against a fake /proc and a pod store with two pods (one whose
 * status lists its containers), and what each route's question (privileged? a pod? a pod that
 * cannot be told apart?) answers for it; static pods through their mirror pods, and systemd
 * services. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "api.h"
#include "caller.h"
#include "fs.h"
#include "macro.h"
#include "peer-pod.h"
#include "pod-store.h"
#include "pods.h"
#include "service.h"

#define UID "0b6c7a9e-4f1d-4c59-9e0d-2a8f1e3b7c11"
#define UID_LISTED "22222222-3333-4444-5555-666666666666"
#define UID_ELSEWHERE "11111111-2222-3333-4444-555555555555"
#define CID "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
#define CID2 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define PID 42
#define START 5555

static char *const roots[] = { (char *) "/kubepods", (char *) "/kubepods.slice", NULL };

struct fixture {
        char root[64];
        int pidfd; /* this test's own: a live process standing for the fake /proc's */
        struct pod_store *pods;
        struct caller_place place;
};

/* Process PID of the fake /proc, started at START, in state state with flags (field 9 of its
 * stat), in the cgroup given. */
static void fake_proc_as(const char *root, char state, unsigned long flags, const char *cgroup) {
        char path[512], stat[512];
        snprintf(path, sizeof(path), "%s/%d", root, PID);
        assert_int_equal(fs_mkdir_p(path, 0755), 0);
        snprintf(stat, sizeof(stat), "%d (sh) %c 1 42 42 0 -1 %lu 100 0 0 0 1 2 0 0 20 0 1 0 %d 1000 100\n", PID,
                 state, flags, START);
        snprintf(path, sizeof(path), "%s/%d/stat", root, PID);
        assert_int_equal(fs_write_file_atomic(path, stat, strlen(stat), 0644, (uid_t) -1, (gid_t) -1), 0);
        snprintf(path, sizeof(path), "%s/%d/cgroup", root, PID);
        assert_int_equal(fs_write_file_atomic(path, cgroup, strlen(cgroup), 0644, (uid_t) -1, (gid_t) -1), 0);
}

/* A running process. */
static void fake_proc(const char *root, const char *cgroup) {
        fake_proc_as(root, 'S', 4194560, cgroup);
}

static void add_pod(struct pod_store *pods, const char *json) {
        _cleanup_free_ char *error = NULL;
        struct pod *p = NULL;

        assert_int_equal(pod_parse_json_text(json, strlen(json), NULL, &p, &error), 0);
        assert_int_equal(pod_store_put(pods, p), 1);
        pod_unref(p);
}

/* Their pidfd: the fixture's (setup()). */
static struct peer root = { .pid = PID, .uid = 0, .gid = 0, .start_time = START, .privileged = true };
static struct peer group = { .pid = PID, .uid = 1000, .gid = 1000, .start_time = START, .privileged = true };
static struct peer user = { .pid = PID, .uid = 1000, .gid = 1000, .start_time = START, .privileged = false };

/* pod-a: a static pod (its status lists no containers); pod-listed: its status lists CID. */
static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        strcpy(f->root, "/tmp/test-caller-XXXXXX");
        assert_non_null(mkdtemp(f->root));
        assert_int_equal(pod_store_new(&f->pods), 0);
        add_pod(f->pods, "{\"metadata\":{\"uid\":\"" UID "\",\"namespace\":\"default\",\"name\":\"pod-a\"}}");
        add_pod(f->pods, "{\"metadata\":{\"uid\":\"" UID_LISTED "\",\"namespace\":\"default\",\"name\":\"pod-listed\"},"
                         "\"status\":{\"containerStatuses\":[{\"name\":\"main\",\"containerID\":\"containerd://" CID "\"}],"
                         "\"initContainerStatuses\":[{\"name\":\"init\"}]}}");
        f->place = (struct caller_place) { .proc_root = f->root, .pod_roots = roots, .pods = f->pods };
        f->pidfd = proc_pidfd_open(getpid());
        assert_true(f->pidfd >= 0);
        root.pidfd = group.pidfd = user.pidfd = f->pidfd;
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        assert_int_equal(fs_rm_rf(f->root), 0);
        pod_store_free(f->pods);
        safe_close(f->pidfd);
        free(f);
        return 0;
}


static void resolve(struct fixture *f, const struct peer *peer, struct caller *ret) {
        caller_resolve_peer(&f->place, peer, ret);
}

/* Neither a pod nor the host, whatever its credentials. */
static void expect_nobody(struct fixture *f, int pod_error, const char *refusal) {
        const struct peer *peers[] = { &root, &group, &user };
        for (size_t i = 0; i < ELEMENTSOF(peers); i++) {
                _cleanup_(caller_done) struct caller c = {};
                resolve(f, peers[i], &c);
                assert_int_equal(c.kind, CALLER_OUTSIDER);
                assert_false(c.privileged);
                assert_null(c.pod_uid);
                assert_null(c.pod);
                assert_int_equal(c.pod_error, pod_error);
                /* In a pod not on this node, or in none of its containers: placed, but nobody. */
                assert_int_equal(c.attested, pod_error == -ENXIO || pod_error == -EPERM);
                assert_true(caller_pod_unknown(&c));
                assert_false(caller_may_read_own(&c));
                assert_string_equal(caller_refusal(&c), refusal);
        }
}

static void test_in_no_pod(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};

        fake_proc(f->root, "0::/system.slice/sshd.service\n");

        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_HOST);
        assert_true(c.privileged);
        assert_null(c.pod_uid);
        assert_null(c.pod);
        assert_int_equal(c.pod_error, 0);
        assert_true(caller_may_read_own(&c));
        assert_false(caller_pod_unknown(&c));
        caller_done(&c);

        resolve(f, &group, &c);
        assert_int_equal(c.kind, CALLER_SOCKET_GROUP);
        assert_true(c.privileged);
        assert_true(caller_may_read_own(&c));
        caller_done(&c);

        resolve(f, &user, &c);
        assert_int_equal(c.kind, CALLER_OUTSIDER);
        assert_false(c.privileged);
        assert_int_equal(c.pod_error, 0);
        assert_false(caller_may_read_own(&c));
        assert_false(caller_pod_unknown(&c));
        assert_string_equal(caller_refusal(&c), "only root, the socket group and pods of this node may ask");
}

static void test_pod_name_outside_the_roots(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};

        /* A host user's delegated subtree, a cgroup named for a pod of this node: no pod. */
        fake_proc(f->root, "0::/user.slice/user-1000.slice/user@1000.service/pod" UID "\n");
        resolve(f, &user, &c);
        assert_int_equal(c.kind, CALLER_OUTSIDER);
        assert_false(c.privileged);
        assert_null(c.pod_uid);
        assert_int_equal(c.pod_error, 0);
        assert_false(caller_may_read_own(&c));
        caller_done(&c);
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_HOST);
        assert_null(c.pod_uid);
}

static void test_in_a_pod_of_this_node(void **state) {
        struct fixture *f = *state;
        const struct peer *peers[] = { &user, &root, &group };

        fake_proc(f->root, "0::/kubepods/burstable/pod" UID "/" CID "\n");

        /* Whatever its credentials: that pod, never privileged. */
        for (size_t i = 0; i < ELEMENTSOF(peers); i++) {
                _cleanup_(caller_done) struct caller c = {};
                resolve(f, peers[i], &c);
                assert_int_equal(c.kind, CALLER_POD);
                assert_false(c.privileged);
                assert_string_equal(c.pod_uid, UID);
                assert_non_null(c.pod);
                assert_string_equal(c.pod->name, "pod-a");
                assert_int_equal(c.pod_error, 0);
                assert_true(caller_may_read_own(&c));
                assert_false(caller_pod_unknown(&c));
                /* Refused only when it asks about another pod. */
                assert_string_equal(caller_refusal(&c), "a pod may ask only about its own pod");
                caller_done(&c);
                assert_null(c.pod_uid);
                assert_null(c.pod);
        }

        /* A static pod lists no containers: its own cgroup counts too. */
        fake_proc(f->root, "0::/kubepods.slice/kubepods-pod0b6c7a9e_4f1d_4c59_9e0d_2a8f1e3b7c11.slice\n");
        _cleanup_(caller_done) struct caller c = {};
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_POD);
        assert_false(c.privileged);
}

static void test_container_listed_or_not(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};

        fake_proc(f->root, "0::/kubepods/pod" UID_LISTED "/" CID "\n");
        resolve(f, &user, &c);
        assert_int_equal(c.kind, CALLER_POD);
        assert_string_equal(c.pod->name, "pod-listed");
        caller_done(&c);

        /* Another container of the pod's cgroup (not in its status), or none. */
        fake_proc(f->root, "0::/kubepods/pod" UID_LISTED "/" CID2 "\n");
        expect_nobody(f, -EPERM, "the caller runs in none of its pod's containers");
        fake_proc(f->root, "0::/kubepods/pod" UID_LISTED "\n");
        expect_nobody(f, -EPERM, "the caller runs in none of its pod's containers");
}

static void test_in_a_pod_this_node_does_not_know(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};

        fake_proc(f->root, "0::/kubepods/pod" UID_ELSEWHERE "/" CID "\n");
        expect_nobody(f, -ENXIO, "the caller's pod is not on this node");

        /* Without a pod store nothing is known. */
        f->place.pods = NULL;
        fake_proc(f->root, "0::/kubepods/pod" UID "/" CID "\n");
        expect_nobody(f, -ENXIO, "the caller's pod is not on this node");
}

static void test_cannot_attest(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};
        struct peer reused = root, unknown_start = root, gone = root;

        fake_proc(f->root, "0::/system.slice/sshd.service\n");
        reused.start_time = START + 1; /* the PID now names a process that started later */
        unknown_start.start_time = 0;
        gone.pid = PID + 1;

        /* Not even root is the host when where it runs is unknown. */
        const struct peer *peers[] = { &reused, &unknown_start, &gone };
        for (size_t i = 0; i < ELEMENTSOF(peers); i++) {
                resolve(f, peers[i], &c);
                assert_int_equal(c.kind, CALLER_OUTSIDER);
                assert_false(c.privileged);
                assert_null(c.pod_uid);
                assert_int_equal(c.pod_error, -ESRCH);
                assert_true(caller_pod_unknown(&c));
                assert_false(caller_may_read_own(&c));
                assert_string_equal(caller_refusal(&c), "cannot attest the caller's pod");
                caller_done(&c);
        }

        /* A path naming two pods, or not the kubelet's layout, attests nothing. */
        fake_proc(f->root, "0::/kubepods/pod" UID "/" CID "/pod" UID_ELSEWHERE "\n");
        expect_nobody(f, -EBADMSG, "cannot attest the caller's pod");
        fake_proc(f->root, "0::/kubepods/besteffort\n");
        expect_nobody(f, -EBADMSG, "cannot attest the caller's pod");
}

/* A process that exited and is not reaped (its parent never waits), or is exiting: on cgroup v1
 * every line of its /proc/PID/cgroup reads "/", as the host's do, its start time unchanged. It
 * is nobody, whatever its uid: root there is not the host. */
static void test_zombie_is_nobody(void **state) {
        static const char v1_root[] = "12:pids:/\n11:memory:/\n1:name=systemd:/\n0::/\n";
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};

        /* Alive there, root is the host (the one check that the fixture is right). */
        fake_proc(f->root, v1_root);
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_HOST);
        assert_true(c.attested);
        caller_done(&c);

        fake_proc_as(f->root, 'Z', 4194316, v1_root);
        expect_nobody(f, -ESRCH, "cannot attest the caller's pod");
        fake_proc_as(f->root, 'X', 4194316, v1_root);
        expect_nobody(f, -ESRCH, "cannot attest the caller's pod");
        fake_proc_as(f->root, 'R', 4194560 | PROC_PF_EXITING, v1_root);
        expect_nobody(f, -ESRCH, "cannot attest the caller's pod");
        /* Likewise in a pod's cgroup (v2 keeps the path of a zombie) or a service's. */
        fake_proc_as(f->root, 'Z', 4194316, "0::/kubepods/pod" UID_LISTED "/" CID "\n");
        expect_nobody(f, -ESRCH, "cannot attest the caller's pod");
}

/* The pidfd of the peer decides as much as its stat: a process that exited (its pidfd readable)
 * is nobody even where /proc still shows it running (a fake /proc here; a PID reused by a
 * process with the same start time in general). And without a pidfd nothing is attested. */
static void test_exited_pidfd_is_nobody(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};
        struct peer gone = root, no_pidfd = root;
        pid_t pid;
        int fd;

        fake_proc(f->root, "0::/system.slice/sshd.service\n");
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                _exit(0);
        fd = proc_pidfd_open(pid);
        assert_true(fd >= 0);
        assert_int_equal(waitpid(pid, NULL, 0), pid);
        gone.pidfd = fd;
        no_pidfd.pidfd = -EBADF;
        const struct peer *peers[] = { &gone, &no_pidfd };
        for (size_t i = 0; i < ELEMENTSOF(peers); i++) {
                resolve(f, peers[i], &c);
                assert_int_equal(c.kind, CALLER_OUTSIDER);
                assert_false(c.privileged);
                assert_false(c.attested);
                assert_int_equal(c.pod_error, -ESRCH);
                assert_string_equal(caller_refusal(&c), "cannot attest the caller's pod");
                caller_done(&c);
        }
        safe_close(fd);
}

static void test_the_agents_own_pod(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};

        /* piniond runs in pod-a (a DaemonSet): `kubectl exec` into it is root, or socket-group. */
        f->place.own_pod_uid = UID;
        fake_proc(f->root, "0::/kubepods/pod" UID "/" CID "\n");
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_HOST);
        assert_true(c.privileged);
        assert_int_equal(c.pod_error, 0);
        caller_done(&c);
        resolve(f, &group, &c);
        assert_int_equal(c.kind, CALLER_SOCKET_GROUP);
        assert_true(c.privileged);
        caller_done(&c);
        /* Anyone else there is that pod. */
        resolve(f, &user, &c);
        assert_int_equal(c.kind, CALLER_POD);
        assert_false(c.privileged);
        caller_done(&c);

        /* Root in another pod stays that pod. */
        fake_proc(f->root, "0::/kubepods/pod" UID_LISTED "/" CID "\n");
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_POD);
        assert_false(c.privileged);
}


#define HASH "5e3c1b2a9d8f7e6a5b4c3d2e1f0a9b8c"
#define HASH_NODELESS "aaaabbbbccccddddeeeeffff00001111"
#define HASH_FOREIGN "1111000022223333444455556666aaaa"
#define UID_MIRROR "77777777-8888-9999-aaaa-bbbbbbbbbbbb"

static const char *mirror_json(const char *uid, const char *name, const char *hash, const char *owner) {
        static char buf[1024];
        char refs[256] = "";
        if (owner)
                snprintf(refs, sizeof(refs), ",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"%s\"}]",
                         owner);
        snprintf(buf, sizeof(buf),
                 "{\"metadata\":{\"uid\":\"%s\",\"namespace\":\"kube-system\",\"name\":\"%s\","
                 "\"annotations\":{\"kubernetes.io/config.mirror\":\"%s\",\"kubernetes.io/config.hash\":\"%s\"}%s},"
                 "\"spec\":{\"nodeName\":\"node-1\"}}",
                 uid, name, hash, hash, refs);
        return buf;
}

/* A static pod's processes run in the cgroup of its config hash: they are its mirror pod, if
 * the Node of this node owns that mirror pod. */
static void test_static_pod_is_its_mirror_pod(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};

        add_pod(f->pods, mirror_json(UID_MIRROR, "etcd-node-1", HASH, "node-1"));
        add_pod(f->pods, mirror_json("99999999-8888-9999-aaaa-bbbbbbbbbbbb", "nodeless", HASH_NODELESS, NULL));
        add_pod(f->pods, mirror_json("99999999-7777-9999-aaaa-bbbbbbbbbbbb", "foreign", HASH_FOREIGN, "node-2"));
        f->place.node_name = "node-1";

        fake_proc(f->root, "0::/kubepods/besteffort/pod" HASH "/" CID "\n");
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_POD);
        assert_false(c.privileged);
        assert_string_equal(c.pod_uid, UID_MIRROR); /* the store's uid, not the cgroup's */
        assert_string_equal(c.cgroup_pod_uid, HASH);
        assert_string_equal(c.pod->name, "etcd-node-1");
        caller_done(&c);

        fake_proc(f->root, "0::/kubepods/besteffort/pod" HASH_NODELESS "/" CID "\n");
        expect_nobody(f, -ENXIO, "the caller's pod is not on this node");
        fake_proc(f->root, "0::/kubepods/besteffort/pod" HASH_FOREIGN "/" CID "\n");
        expect_nobody(f, -ENXIO, "the caller's pod is not on this node");

        /* Another node's agent: the same mirror pod is not its own. */
        f->place.node_name = "node-2";
        fake_proc(f->root, "0::/kubepods/besteffort/pod" HASH "/" CID "\n");
        expect_nobody(f, -ENXIO, "the caller's pod is not on this node");

        /* Two pods claiming one hash tell nothing. */
        f->place.node_name = "node-1";
        add_pod(f->pods, mirror_json("99999999-6666-9999-aaaa-bbbbbbbbbbbb", "twin", HASH, "node-1"));
        expect_nobody(f, -ENXIO, "the caller's pod is not on this node");
}

static char *const service_roots[] = { (char *) "/system.slice", NULL };

static void test_services(void **state) {
        struct fixture *f = *state;
        _cleanup_(caller_done) struct caller c = {};
        struct service_settings web = { .name = (char *) "web", .unit = (char *) "web.service" };
        struct service_settings *services[] = { &web };

        f->place.service_roots = service_roots;
        f->place.services = services;
        f->place.n_services = 1;

        /* Its root is the service, not the host; so is a process in a cgroup it delegated. */
        const char *in_web[] = { "0::/system.slice/web.service\n", "0::/system.slice/web.service/worker\n",
                                 "9:name=systemd:/system.slice/web.service\n8:pids:/system.slice/web.service\n0::/\n" };
        for (size_t i = 0; i < ELEMENTSOF(in_web); i++) {
                fake_proc(f->root, in_web[i]);
                resolve(f, &root, &c);
                assert_int_equal(c.kind, CALLER_SERVICE);
                assert_false(c.privileged);
                assert_string_equal(c.unit, "web.service");
                assert_ptr_equal(c.service, &web);
                assert_false(caller_may_read_own(&c));
                assert_false(caller_pod_unknown(&c));
                caller_done(&c);
        }

        /* A unit without a section: credentials decide, as before. */
        fake_proc(f->root, "0::/system.slice/sshd.service\n");
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_HOST);
        caller_done(&c);
        resolve(f, &user, &c);
        assert_int_equal(c.kind, CALLER_OUTSIDER);
        caller_done(&c);

        /* The name outside the roots (a user's delegated subtree), or one level too deep. */
        const char *not_web[] = { "0::/user.slice/user-1000.slice/user@1000.service/web.service\n",
                                  "0::/system.slice/other.slice/web.service\n" };
        for (size_t i = 0; i < ELEMENTSOF(not_web); i++) {
                fake_proc(f->root, not_web[i]);
                resolve(f, &user, &c);
                assert_int_equal(c.kind, CALLER_OUTSIDER);
                assert_int_equal(c.pod_error, 0);
                caller_done(&c);
        }

        /* Lines naming two units: nothing can be attested, not even the host. */
        fake_proc(f->root, "8:pids:/system.slice/web.service\n0::/system.slice/sshd.service\n");
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_OUTSIDER);
        assert_false(c.privileged);
        assert_int_equal(c.pod_error, -EBADMSG);
        caller_done(&c);

        /* A pod's process is its pod, whatever a v1 line says. */
        fake_proc(f->root, "8:pids:/system.slice/web.service\n0::/kubepods/pod" UID "/" CID "\n");
        resolve(f, &root, &c);
        assert_int_equal(c.kind, CALLER_POD);
}

static void test_service_unit_names(void **state) {
        (void) state;
        const char *good[] = { "web.service", "getty@tty1.service", "a-b_c:d.e.service", "x\\x2dy.service" };
        const char *bad[] = { "", ".service", "web", "web.socket", "web.service/x", "../web.service", "@x.service",
                              "a@b@c.service", "web service.service", ".hidden.service" };
        for (size_t i = 0; i < ELEMENTSOF(good); i++)
                assert_true(peer_service_unit_valid(good[i]));
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_false(peer_service_unit_valid(bad[i]));
        assert_false(peer_service_unit_valid(NULL));
}

static void test_kind_names(void **state) {
        (void) state;
        assert_string_equal(caller_kind_to_string(CALLER_HOST), "host");
        assert_string_equal(caller_kind_to_string(CALLER_SOCKET_GROUP), "socket-group");
        assert_string_equal(caller_kind_to_string(CALLER_POD), "pod");
        assert_string_equal(caller_kind_to_string(CALLER_SERVICE), "service");
        assert_string_equal(caller_kind_to_string(CALLER_OUTSIDER), "outsider");
        assert_null(caller_kind_to_string(_CALLER_KIND_MAX));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_in_no_pod, setup, teardown),
                cmocka_unit_test_setup_teardown(test_pod_name_outside_the_roots, setup, teardown),
                cmocka_unit_test_setup_teardown(test_in_a_pod_of_this_node, setup, teardown),
                cmocka_unit_test_setup_teardown(test_container_listed_or_not, setup, teardown),
                cmocka_unit_test_setup_teardown(test_in_a_pod_this_node_does_not_know, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cannot_attest, setup, teardown),
                cmocka_unit_test_setup_teardown(test_zombie_is_nobody, setup, teardown),
                cmocka_unit_test_setup_teardown(test_exited_pidfd_is_nobody, setup, teardown),
                cmocka_unit_test_setup_teardown(test_the_agents_own_pod, setup, teardown),
                cmocka_unit_test_setup_teardown(test_static_pod_is_its_mirror_pod, setup, teardown),
                cmocka_unit_test_setup_teardown(test_services, setup, teardown),
                cmocka_unit_test(test_service_unit_names),
                cmocka_unit_test(test_kind_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
