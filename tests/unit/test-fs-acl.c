/* SPDX-License-Identifier: MIT */
/* Handing files to a user or group with ACL entries (fs-acl.h): what the kernel then lets
 * processes of that user and group do, and of nobody else; the same on a socket file through an
 * O_PATH descriptor; naming nobody puts back the plain mode. */
#include <fcntl.h>
#include <grp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "acl-check.h"
#include "fs-acl.h"
#include "fs.h"

#define READER_UID 41001
#define OTHER_UID 41002
#define READER_GID 41101
#define OTHER_GID 41102

struct fixture {
        char *root;
};

static int setup(void **state) {
        const char *tmp = getenv("TMPDIR");
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_true(asprintf(&f->root, "%s/pinion-test-fs-acl.XXXXXX", isempty(tmp) ? "/tmp" : tmp) > 0);
        assert_non_null(mkdtemp(f->root));
        assert_int_equal(chmod(f->root, 0755), 0); /* the test's other uids look inside */
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

static int make_file(const char *path) {
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(fs_write_all(fd, "secret\n", 7), 0);
        return fd;
}

/* What open(path, flags) gives a process of uid and gid (no supplementary groups): 0 or errno. */
static int open_as(const char *path, int flags, uid_t uid, gid_t gid) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                        _exit(100);
                int fd = open(path, flags | O_CLOEXEC);
                _exit(fd >= 0 ? 0 : errno);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 100);
        return WEXITSTATUS(status);
}

/* What connect() to the socket at path gives a process of uid and gid: 0 or errno. */
static int connect_as(const char *path, uid_t uid, gid_t gid) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct sockaddr_un sa = { .sun_family = AF_UNIX };
                snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
                if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                        _exit(100);
                int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                _exit(fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) == 0 ? 0 : errno);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) != 100);
        return WEXITSTATUS(status);
}

static void skip_unless_root(void) {
        if (geteuid() != 0)
                skip();
}

/* The named user reads what the group bits allow, nobody else anything; the file stays root's. */
static void test_named_user_reads_and_nobody_else(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *p = path_of(f, "key.pem");
        struct stat st;

        skip_unless_root();
        _cleanup_close_ int fd = make_file(p);
        assert_int_equal(fs_acl_grant_fd(fd, 0640, READER_UID, (gid_t) -1), 0);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(st.st_mode & 07777, 0640); /* the group bits are the mask */
        assert_int_equal(open_as(p, O_RDONLY, READER_UID, OTHER_GID), 0);
        assert_int_equal(open_as(p, O_WRONLY, READER_UID, OTHER_GID), EACCES);
        assert_int_equal(open_as(p, O_RDONLY, OTHER_UID, OTHER_GID), EACCES);
        /* The file's own group (root's here) gets nothing once someone is named. */
        assert_int_equal(open_as(p, O_RDONLY, OTHER_UID, st.st_gid), EACCES);
        assert_int_equal(fs_acl_matches_fd(fd, 0640, READER_UID, (gid_t) -1), 1);
        assert_int_equal(fs_acl_matches_fd(fd, 0640, OTHER_UID, (gid_t) -1), 0);
        assert_int_equal(fs_acl_matches_fd(fd, 0600, READER_UID, (gid_t) -1), 0);
        assert_int_equal(fs_acl_matches_fd(fd, 0640, (uid_t) -1, (gid_t) -1), 0);
}

static void test_named_group_and_world_bits(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *p = path_of(f, "app.conf");

        skip_unless_root();
        _cleanup_close_ int fd = make_file(p);
        assert_int_equal(fs_acl_grant_fd(fd, 0640, (uid_t) -1, READER_GID), 0);
        assert_int_equal(open_as(p, O_RDONLY, OTHER_UID, READER_GID), 0);
        assert_int_equal(open_as(p, O_RDONLY, OTHER_UID, OTHER_GID), EACCES);
        /* Others' bits are others' still. */
        assert_int_equal(fs_acl_grant_fd(fd, 0644, (uid_t) -1, READER_GID), 0);
        assert_int_equal(open_as(p, O_RDONLY, OTHER_UID, OTHER_GID), 0);
        assert_int_equal(fs_acl_matches_fd(fd, 0644, (uid_t) -1, READER_GID), 1);
}

/* Naming nobody afterwards takes every entry away: exactly the mode, as chmod would leave it. */
static void test_naming_nobody_restores_the_plain_mode(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *p = path_of(f, "f");
        struct stat st;

        skip_unless_root();
        _cleanup_close_ int fd = make_file(p);
        assert_int_equal(fs_acl_grant_fd(fd, 0750, READER_UID, READER_GID), 0);
        assert_int_equal(open_as(p, O_RDONLY, READER_UID, OTHER_GID), 0);
        assert_int_equal(fs_acl_grant_fd(fd, 0640, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(open_as(p, O_RDONLY, READER_UID, OTHER_GID), EACCES);
        assert_int_equal(fstat(fd, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        assert_int_equal(acl_check_entry(p, ACL_USER, READER_UID), -1);
        assert_int_equal(acl_check_entry(p, ACL_GROUP, READER_GID), -1);
        assert_int_equal(acl_check_entry(p, ACL_MASK, 0), -1);
        /* The owning group gets the group bits again. */
        assert_int_equal(fchown(fd, 0, READER_GID), 0);
        assert_int_equal(open_as(p, O_RDONLY, OTHER_UID, READER_GID), 0);
        assert_int_equal(fs_acl_matches_fd(fd, 0640, (uid_t) -1, (gid_t) -1), 1);
        /* Root's group is never named: the same as naming no group. */
        assert_int_equal(fs_acl_grant_fd(fd, 0640, (uid_t) -1, 0), 0);
        assert_int_equal(acl_check_entry(p, ACL_MASK, 0), -1);
        assert_int_equal(fs_acl_matches_fd(fd, 0640, (uid_t) -1, 0), 1);
}

/* A directory: the named user can traverse and list, nobody else. */
static void test_directory(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *d = path_of(f, "tls"), *inner = path_of(f, "tls/cert.pem");

        skip_unless_root();
        assert_int_equal(mkdir(d, 0755), 0);
        _cleanup_close_ int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(dfd >= 0);
        _cleanup_close_ int fd = make_file(inner);
        assert_int_equal(fchmod(fd, 0644), 0);
        assert_int_equal(fs_acl_grant_fd(dfd, 0750, READER_UID, (gid_t) -1), 0);
        assert_int_equal(open_as(inner, O_RDONLY, READER_UID, OTHER_GID), 0);
        assert_int_equal(open_as(d, O_RDONLY | O_DIRECTORY, READER_UID, OTHER_GID), 0);
        assert_int_equal(open_as(inner, O_RDONLY, OTHER_UID, OTHER_GID), EACCES);
}

/* A socket file cannot be opened: an O_PATH descriptor carries the grant, and connect() obeys. */
static void test_socket_through_o_path(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *p = path_of(f, "api.sock");
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        skip_unless_root();
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p);
        _cleanup_close_ int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(s >= 0);
        assert_int_equal(bind(s, (struct sockaddr *) &sa, sizeof(sa)), 0);
        assert_int_equal(listen(s, 8), 0);
        _cleanup_close_ int pfd = open(p, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        assert_true(pfd >= 0);
        assert_int_equal(fs_acl_grant_fd(pfd, 0660, (uid_t) -1, READER_GID), 0);
        assert_int_equal(connect_as(p, OTHER_UID, READER_GID), 0);
        assert_int_equal(connect_as(p, OTHER_UID, OTHER_GID), EACCES);
        assert_int_equal(fs_acl_matches_fd(pfd, 0660, (uid_t) -1, READER_GID), 1);
        assert_int_equal(fs_acl_matches_fd(pfd, 0666, (uid_t) -1, READER_GID), 0);
        assert_int_equal(fs_acl_grant_fd(pfd, 0666, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(connect_as(p, OTHER_UID, OTHER_GID), 0);
}

/* fs_write_file_atomic() grants the same way before the file appears under its name. */
static void test_atomic_write_grants(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *p = path_of(f, "bundle.pem");
        struct stat st;

        skip_unless_root();
        assert_int_equal(fs_write_file_atomic(p, "x", 1, 0640, READER_UID, (gid_t) -1), 0);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(open_as(p, O_RDONLY, READER_UID, OTHER_GID), 0);
        assert_int_equal(open_as(p, O_RDONLY, OTHER_UID, OTHER_GID), EACCES);
}

/* A file system without ACLs (ramfs, in a mount namespace of a child's own): the plain mode still
 * works, naming someone fails with -EOPNOTSUPP and changes nothing. */
static void test_file_system_without_acls(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *mnt = path_of(f, "ramfs"), *p = path_of(f, "ramfs/f");

        skip_unless_root();
        assert_int_equal(mkdir(mnt, 0755), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct stat st;
                if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
                    mount("ramfs", mnt, "ramfs", 0, NULL) < 0)
                        _exit(77);
                int fd = open(p, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (fd < 0)
                        _exit(2);
                if (fs_acl_grant_fd(fd, 0640, (uid_t) -1, (gid_t) -1) != 0 || fstat(fd, &st) < 0 ||
                    (st.st_mode & 07777) != 0640)
                        _exit(3);
                if (fs_acl_matches_fd(fd, 0640, (uid_t) -1, (gid_t) -1) != 1)
                        _exit(4);
                if (fs_acl_grant_fd(fd, 0600, READER_UID, (gid_t) -1) != -EOPNOTSUPP || fstat(fd, &st) < 0 ||
                    (st.st_mode & 07777) != 0640)
                        _exit(5);
                _exit(0);
        }
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        if (WEXITSTATUS(status) == 77)
                skip(); /* no mount namespaces here */
        assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_named_user_reads_and_nobody_else, setup, teardown),
                cmocka_unit_test_setup_teardown(test_named_group_and_world_bits, setup, teardown),
                cmocka_unit_test_setup_teardown(test_naming_nobody_restores_the_plain_mode, setup, teardown),
                cmocka_unit_test_setup_teardown(test_directory, setup, teardown),
                cmocka_unit_test_setup_teardown(test_socket_through_o_path, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_write_grants, setup, teardown),
                cmocka_unit_test_setup_teardown(test_file_system_without_acls, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
