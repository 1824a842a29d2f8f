/* SPDX-License-Identifier: MIT */
/* The rule for "this socket is the agent's": clients' path and peer checks, the agent's
 * socket directory and its legacy link. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
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
#include "socket-trust.h"

#define NOBODY 65534

struct fixture {
        char *root; /* a 0755 mkdtemp directory everything lives in */
        char why[SOCKET_TRUST_WHY_MAX];
};

static int setup(void **state) {
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        /* /tmp (1777, root) and not $TMPDIR: the check walks every directory above. */
        f->root = strdup("/tmp/pinion-test-socket-trust.XXXXXX");
        assert_non_null(f->root);
        assert_non_null(mkdtemp(f->root));
        assert_int_equal(chmod(f->root, 0755), 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;

        assert_int_equal(fs_rm_rf(f->root), 0);
        free(f->root);
        free(f);
        return 0;
}

static char *path_of(const struct fixture *f, const char *name) {
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", f->root, name) > 0);
        return p;
}

/* A listening socket bound at path; returns its fd. */
static int listen_at(const char *path) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        assert_true(fd >= 0);
        assert_true(strlen(path) < sizeof(sa.sun_path));
        strcpy(sa.sun_path, path);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(fd, 8), 0);
        return fd;
}

static void mkdir_mode(const char *path, mode_t mode) {
        assert_int_equal(mkdir(path, 0700), 0);
        assert_int_equal(chmod(path, mode), 0);
}

static bool is_root(void) {
        return geteuid() == 0;
}

static void test_socket_in_safe_directories(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dir = path_of(f, "sockets"), *sock = path_of(f, "sockets/a.sock");
        _cleanup_close_ int fd = -EBADF;
        uid_t me = geteuid();

        mkdir_mode(dir, 0755);
        fd = listen_at(sock);
        assert_int_equal(socket_trust_check_path(sock, me, f->why, sizeof(f->why)), 0);
        /* Sticky and group/other-writable (like /tmp): nobody else can rename our entries. */
        assert_int_equal(chmod(dir, 01777), 0);
        assert_int_equal(socket_trust_check_path(sock, me, f->why, sizeof(f->why)), 0);
        /* Relative paths and doubled slashes are the same path. */
        _cleanup_free_ char *twisted = path_of(f, "/sockets//a.sock");
        assert_int_equal(socket_trust_check_path(twisted, me, f->why, sizeof(f->why)), 0);
        assert_int_equal(chdir(f->root), 0);
        assert_int_equal(socket_trust_check_path("sockets/a.sock", me, f->why, sizeof(f->why)), 0);
        assert_int_equal(chdir("/"), 0);
}

static void test_replaceable_directories_refused(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dir = path_of(f, "open"), *sock = path_of(f, "open/a.sock");
        _cleanup_close_ int fd = -EBADF;
        uid_t me = geteuid();

        mkdir_mode(dir, 0777);
        fd = listen_at(sock);
        assert_int_equal(socket_trust_check_path(sock, me, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "writable by group or other"));
        assert_non_null(strstr(f->why, dir));
        assert_int_equal(chmod(dir, 0775), 0);
        assert_int_equal(socket_trust_check_path(sock, me, f->why, sizeof(f->why)), -EPERM);
        /* A writable directory higher up is as bad: it can be renamed away with the socket. */
        assert_int_equal(chmod(dir, 0755), 0);
        assert_int_equal(chmod(f->root, 0777), 0);
        assert_int_equal(socket_trust_check_path(sock, me, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, f->root));
        assert_int_equal(chmod(f->root, 0755), 0);
        assert_int_equal(socket_trust_check_path(sock, me, f->why, sizeof(f->why)), 0);
}

static void test_owners(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dir = path_of(f, "d"), *sock = path_of(f, "d/a.sock");
        _cleanup_close_ int fd = -EBADF;

        if (!is_root())
                skip();
        mkdir_mode(dir, 0755);
        fd = listen_at(sock);
        assert_int_equal(socket_trust_check_path(sock, 0, f->why, sizeof(f->why)), 0);
        assert_int_equal(chown(sock, NOBODY, NOBODY), 0);
        assert_int_equal(socket_trust_check_path(sock, 0, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "owned by uid 65534"));
        /* The configured owner (an unprivileged agent) is trusted besides root. */
        assert_int_equal(socket_trust_check_path(sock, NOBODY, f->why, sizeof(f->why)), 0);
        assert_int_equal(chown(sock, 0, 0), 0);
        assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
        assert_int_equal(socket_trust_check_path(sock, 0, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "directory"));
        assert_int_equal(socket_trust_check_path(sock, NOBODY, f->why, sizeof(f->why)), 0);
}

static void test_not_sockets(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *file = path_of(f, "file"), *missing = path_of(f, "missing");

        assert_int_equal(fs_write_file_atomic(file, "x", 1, 0644, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(socket_trust_check_path(file, geteuid(), f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "not a socket"));
        assert_int_equal(socket_trust_check_path(missing, geteuid(), f->why, sizeof(f->why)), -ENOENT);
        assert_int_equal(socket_trust_check_path("", geteuid(), f->why, sizeof(f->why)), -EINVAL);
}

static void test_symlinks(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *good = path_of(f, "good"), *bad = path_of(f, "bad"),
                            *good_sock = path_of(f, "good/a.sock"), *bad_sock = path_of(f, "bad/a.sock"),
                            *legacy = path_of(f, "legacy.sock"), *evil = path_of(f, "evil.sock"),
                            *chain = path_of(f, "chain.sock"), *dirlink = path_of(f, "dirlink"),
                            *via_dirlink = path_of(f, "dirlink/a.sock");
        _cleanup_close_ int fd1 = -EBADF, fd2 = -EBADF;
        uid_t me = geteuid();

        mkdir_mode(good, 0755);
        mkdir_mode(bad, 0777);
        fd1 = listen_at(good_sock);
        fd2 = listen_at(bad_sock);
        /* The legacy link (relative, as the agent makes it) to a socket in a safe directory. */
        assert_int_equal(symlink("good/a.sock", legacy), 0);
        assert_int_equal(socket_trust_check_path(legacy, me, f->why, sizeof(f->why)), 0);
        /* A link is checked where it points: to a replaceable socket, refused. */
        assert_int_equal(symlink(bad_sock, evil), 0);
        assert_int_equal(socket_trust_check_path(evil, me, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, bad));
        /* One link is followed, not two. */
        assert_int_equal(symlink("legacy.sock", chain), 0);
        assert_int_equal(socket_trust_check_path(chain, me, f->why, sizeof(f->why)), -EPERM);
        /* A directory on the way that is a symlink counts as where it points. */
        assert_int_equal(symlink("good", dirlink), 0);
        assert_int_equal(socket_trust_check_path(via_dirlink, me, f->why, sizeof(f->why)), 0);
        assert_int_equal(unlink(dirlink), 0);
        assert_int_equal(symlink("bad", dirlink), 0);
        assert_int_equal(socket_trust_check_path(via_dirlink, me, f->why, sizeof(f->why)), -EPERM);
}

/* A peer that connected as nobody: its accepted end must be refused, root's accepted. */
static void test_peer(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *sock = path_of(f, "peer.sock");
        _cleanup_close_ int lfd = -EBADF, afd = -EBADF;
        int sv[2], status;
        pid_t pid;

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(socket_trust_check_peer(sv[0], geteuid(), f->why, sizeof(f->why)), 0);
        close(sv[0]);
        close(sv[1]);
        if (!is_root())
                skip();
        assert_int_equal(socket_trust_check_peer(-1, 0, f->why, sizeof(f->why)), -EBADF);
        lfd = listen_at(sock);
        assert_int_equal(chmod(sock, 0666), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                int fd;
                strcpy(sa.sun_path, sock);
                if (setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
                        _exit(2);
                fd = socket(AF_UNIX, SOCK_STREAM, 0);
                _exit(fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        assert_true(afd >= 0);
        assert_int_equal(socket_trust_check_peer(afd, 0, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "uid 65534"));
        assert_int_equal(socket_trust_check_peer(afd, NOBODY, f->why, sizeof(f->why)), 0);
}

static void test_owner_from_env(void **state) {
        struct fixture *f = *state;
        uid_t uid = 1;

        assert_int_equal(unsetenv(SOCKET_OWNER_ENV), 0);
        assert_int_equal(socket_trust_owner(&uid, f->why, sizeof(f->why)), 0);
        assert_int_equal(uid, 0);
        assert_int_equal(setenv(SOCKET_OWNER_ENV, "1000", 1), 0);
        assert_int_equal(socket_trust_owner(&uid, f->why, sizeof(f->why)), 0);
        assert_int_equal(uid, 1000);
        static const char *const bad[] = { "x", "-1", "12a", "4294967295", "99999999999999999999" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                assert_int_equal(setenv(SOCKET_OWNER_ENV, bad[i], 1), 0);
                assert_int_equal(socket_trust_owner(&uid, f->why, sizeof(f->why)), -EINVAL);
                assert_non_null(strstr(f->why, bad[i]));
        }
        assert_int_equal(unsetenv(SOCKET_OWNER_ENV), 0);
}

static void test_dir_prepare(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dir = path_of(f, "sockets"), *sock = path_of(f, "sockets/pinion.sock"),
                            *link = path_of(f, "link"), *link_sock = path_of(f, "link/pinion.sock"),
                            *file = path_of(f, "file"), *file_sock = path_of(f, "file/pinion.sock");
        mode_t old = umask(0077);
        struct stat st;

        /* Missing: made 0755 whatever the umask. */
        assert_int_equal(socket_trust_dir_prepare(sock, f->why, sizeof(f->why)), 0);
        assert_int_equal(lstat(dir, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 07777, 0755);
        assert_int_equal(st.st_uid, geteuid());
        assert_int_equal(socket_trust_dir_prepare(sock, f->why, sizeof(f->why)), 0);
        (void) umask(old);

        assert_int_equal(chmod(dir, 0775), 0);
        assert_int_equal(socket_trust_dir_prepare(sock, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "writable by group or other"));
        /* Sticky is no excuse for the agent's own directory. */
        assert_int_equal(chmod(dir, 01777), 0);
        assert_int_equal(socket_trust_dir_prepare(sock, f->why, sizeof(f->why)), -EPERM);
        assert_int_equal(chmod(dir, 0755), 0);

        assert_int_equal(symlink("sockets", link), 0);
        assert_int_equal(socket_trust_dir_prepare(link_sock, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "symlink"));
        assert_int_equal(fs_write_file_atomic(file, "x", 1, 0644, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(socket_trust_dir_prepare(file_sock, f->why, sizeof(f->why)), -EPERM);
        assert_non_null(strstr(f->why, "not a directory"));
        if (is_root()) {
                assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
                assert_int_equal(socket_trust_dir_prepare(sock, f->why, sizeof(f->why)), -EPERM);
                assert_non_null(strstr(f->why, "owned by uid 65534"));
        }
}

static void test_legacy_link(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *sockets = path_of(f, "sockets"), *sock = path_of(f, "sockets/pinion.sock"),
                            *legacy = path_of(f, "pinion.sock"), *other = path_of(f, "other.sock");
        _cleanup_close_ int fd = -EBADF, old = -EBADF;
        char target[64] = "";
        struct stat st;

        /* A socket not in <runtime-dir>/sockets: nothing to link. */
        assert_int_equal(socket_trust_legacy_link(f->root, other), 0);
        mkdir_mode(sockets, 0755);
        fd = listen_at(sock);
        /* An old agent's socket at the legacy path is replaced by the link. */
        old = listen_at(legacy);
        assert_int_equal(socket_trust_legacy_link(f->root, sock), 1);
        assert_int_equal(lstat(legacy, &st), 0);
        assert_true(S_ISLNK(st.st_mode));
        assert_int_equal(readlink(legacy, target, sizeof(target) - 1), strlen("sockets/pinion.sock"));
        assert_string_equal(target, "sockets/pinion.sock");
        assert_int_equal(socket_trust_legacy_link(f->root, sock), 1);
        assert_int_equal(socket_trust_check_path(legacy, geteuid(), f->why, sizeof(f->why)), 0);
        /* Anything else there is left alone. */
        assert_int_equal(unlink(legacy), 0);
        assert_int_equal(fs_write_file_atomic(legacy, "x", 1, 0644, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(socket_trust_legacy_link(f->root, sock), -EEXIST);
        assert_int_equal(lstat(legacy, &st), 0);
        assert_true(S_ISREG(st.st_mode));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_socket_in_safe_directories, setup, teardown),
                cmocka_unit_test_setup_teardown(test_replaceable_directories_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_owners, setup, teardown),
                cmocka_unit_test_setup_teardown(test_not_sockets, setup, teardown),
                cmocka_unit_test_setup_teardown(test_symlinks, setup, teardown),
                cmocka_unit_test_setup_teardown(test_peer, setup, teardown),
                cmocka_unit_test_setup_teardown(test_owner_from_env, setup, teardown),
                cmocka_unit_test_setup_teardown(test_dir_prepare, setup, teardown),
                cmocka_unit_test_setup_teardown(test_legacy_link, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
