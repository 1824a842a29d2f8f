/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "acl-check.h"
#include "kill-harness.h"

#include "atomic-dir.h"
#include "fs.h"

#define CRASH_ROUNDS 60
#define BIG_SIZE (256 * 1024)
#define VERSION_FILE_SIZE (64 * 1024)

/* ---- fixture and helpers ---- */

struct fixture {
        char *root; /* the mkdtemp directory everything lives in */
};

static int setup(void **state) {
        const char *tmp = getenv("TMPDIR");
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_true(asprintf(&f->root, "%s/pinion-test-fsutil.XXXXXX", isempty(tmp) ? "/tmp" : tmp) > 0);
        assert_non_null(mkdtemp(f->root));
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;
        struct stat st;

        assert_int_equal(fs_rm_rf(f->root), 0);
        assert_int_equal(lstat(f->root, &st), -1);
        assert_int_equal(errno, ENOENT);
        free(f->root);
        free(f);
        return 0;
}

static char *path_of(const struct fixture *f, const char *name) {
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", f->root, name) > 0);
        return p;
}

static void put(const char *path, const char *content) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        size_t n = strlen(content);
        assert_int_equal(write(fd, content, n), (ssize_t) n);
}

static void assert_content(const char *path, const char *expected) {
        _cleanup_free_ char *data = NULL;
        size_t size = 0;

        assert_int_equal(fs_read_file_full(path, 1 << 20, &data, &size), 0);
        assert_int_equal(size, strlen(expected));
        assert_string_equal(data, expected);
}

static void assert_link(const char *path, const char *target) {
        char buf[PATH_MAX];
        ssize_t n = readlink(path, buf, sizeof(buf) - 1);

        assert_true(n > 0);
        buf[n] = 0;
        assert_string_equal(buf, target);
}

static bool exists(const char *path) {
        struct stat st;
        return lstat(path, &st) >= 0;
}

/* Entries of dir whose name starts with prefix. */
static unsigned count_prefixed(const char *dir, const char *prefix) {
        DIR *d = opendir(dir);
        struct dirent *de;
        unsigned n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
        closedir(d);
        return n;
}

static unsigned count_entries(const char *dir) {
        return count_prefixed(dir, "") - 2; /* "." and ".." */
}

static bool is_version_name(const char *name) {
        const char *t = "..0000_00_00_00_00_00.000000000";
        for (size_t i = 0; t[i]; i++)
                if (t[i] == '0' ? (name[i] < '0' || name[i] > '9') : name[i] != t[i])
                        return false;
        return true;
}

static unsigned count_versions(const char *dest) {
        DIR *d = opendir(dest);
        struct dirent *de;
        unsigned n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += is_version_name(de->d_name);
        closedir(d);
        return n;
}

/* Version directories whose name sorts after `than` (leftovers of an unfinished begin). */
static unsigned count_versions_newer(const char *dest, const char *than) {
        DIR *d = opendir(dest);
        struct dirent *de;
        unsigned n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += is_version_name(de->d_name) && strcmp(de->d_name, than) > 0;
        closedir(d);
        return n;
}

static char *basename_dup(const char *path) {
        const char *s = strrchr(path, '/');
        return strdup(s ? s + 1 : path);
}

/* ---- fs_write_file_atomic and friends ---- */

static void test_write_atomic_content_mode_owner(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *path = path_of(f, "state.json");
        bool root = geteuid() == 0;
        uid_t uid = root ? 1234 : geteuid();
        gid_t gid = root ? 5678 : getegid();
        struct stat st;

        assert_int_equal(fs_write_file_atomic(path, "hello\n", 6, 0640, uid, gid), 0);
        assert_content(path, "hello\n");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0640);
        /* The writer's file, the user and group let in with the group bits. */
        assert_int_equal(st.st_uid, geteuid());
        assert_int_equal(acl_check_entry(path, ACL_USER, uid), 4);
        assert_int_equal(acl_check_entry(path, ACL_GROUP, gid), 4);
        assert_int_equal(acl_check_entry(path, ACL_GROUP_OBJ, 0), 0);

        /* Replacing: new content, new mode; the ACL must not eat the setuid bit. */
        assert_int_equal(fs_write_file_atomic(path, "bye", 3, 04751, uid, gid), 0);
        assert_content(path, "bye");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, 04751);
        assert_int_equal(acl_check_entry(path, ACL_USER, uid), 5);

        /* -1/-1: the plain mode, nobody named. */
        assert_int_equal(fs_write_file_atomic(path, "", 0, 0600, (uid_t) -1, (gid_t) -1), 0);
        assert_content(path, "");
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_uid, geteuid());
        assert_int_equal(st.st_mode & 07777, 0600);
        assert_int_equal(acl_check_entry(path, ACL_USER, uid), -1);
        assert_int_equal(acl_check_entry(path, ACL_MASK, 0), -1);

        /* Nothing but the file is left behind. */
        assert_int_equal(count_entries(f->root), 1);

        /* A name near NAME_MAX still gets a temp file that fits. */
        char longname[NAME_MAX + 1];
        memset(longname, 'x', NAME_MAX);
        longname[NAME_MAX] = 0;
        _cleanup_free_ char *longpath = path_of(f, longname);
        assert_int_equal(fs_write_file_atomic(longpath, "long", 4, 0644, (uid_t) -1, (gid_t) -1), 0);
        assert_content(longpath, "long");
        assert_int_equal(count_entries(f->root), 2);
}

static void test_write_atomic_failures(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *target = path_of(f, "target");
        _cleanup_free_ char *inside = path_of(f, "target/inside");
        _cleanup_free_ char *old = path_of(f, "old");
        _cleanup_free_ char *missing = path_of(f, "no/such/dir/file");

        /* The rename fails (a directory is in the way): error, nothing changed, no temp. */
        assert_int_equal(mkdir(target, 0755), 0);
        put(inside, "keep me");
        assert_int_equal(fs_write_file_atomic(target, "new", 3, 0644, (uid_t) -1, (gid_t) -1), -EISDIR);
        assert_content(inside, "keep me");
        assert_int_equal(count_prefixed(f->root, ".#"), 0);

        /* The write fails half-way (unreadable source memory): the old file is untouched. */
        put(old, "old content");
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        void *bad = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        assert_true(bad != MAP_FAILED);
        assert_int_equal(fs_write_file_atomic(old, bad, page, 0644, (uid_t) -1, (gid_t) -1), -EFAULT);
        assert_int_equal(munmap(bad, page), 0);
        assert_content(old, "old content");
        assert_int_equal(count_prefixed(f->root, ".#"), 0);

        /* fs_write_file_atomic_full() says whether the rename happened: not for these failures. */
        bool renamed = true;
        assert_int_equal(fs_write_file_atomic_full(target, "new", 3, 0644, (uid_t) -1, (gid_t) -1, &renamed), -EISDIR);
        assert_false(renamed);
        assert_content(inside, "keep me");
        renamed = true;
        assert_int_equal(fs_write_file_atomic_full(missing, "x", 1, 0644, (uid_t) -1, (gid_t) -1, &renamed), -ENOENT);
        assert_false(renamed);
        /* (A directory fsync failing after the rename: tests/unit/test-podnet-ipam.c wraps fsync.) */
        assert_int_equal(fs_write_file_atomic_full(old, "newer", 5, 0644, (uid_t) -1, (gid_t) -1, &renamed), 0);
        assert_true(renamed);
        assert_content(old, "newer");
        assert_int_equal(count_prefixed(f->root, ".#"), 0);

        /* No directory. */
        assert_int_equal(fs_write_file_atomic(missing, "x", 1, 0644, (uid_t) -1, (gid_t) -1), -ENOENT);
        assert_int_equal(fs_write_file_atomic(target, NULL, 1, 0644, (uid_t) -1, (gid_t) -1), -EINVAL);
        assert_int_equal(fs_write_file_atomic("", "x", 1, 0644, (uid_t) -1, (gid_t) -1), -EINVAL);
        assert_int_equal(count_entries(f->root), 2);
}

static void test_read_file_full(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *path = path_of(f, "data");
        _cleanup_free_ char *empty = path_of(f, "empty");
        char *data = (char *) 0x1;
        size_t size = 77;

        put(path, "0123456789");
        assert_int_equal(fs_read_file_full(path, 9, &data, &size), -EFBIG);
        /* Outputs untouched on failure. */
        assert_ptr_equal(data, (char *) 0x1);
        assert_int_equal(size, 77);
        assert_int_equal(fs_read_file_full(f->root, 100, &data, &size), -EISDIR);
        assert_int_equal(fs_read_file_full(path, 100, &data, NULL), 0);
        assert_string_equal(data, "0123456789");
        free(data);

        assert_int_equal(fs_read_file_full(path, 10, &data, &size), 0);
        assert_int_equal(size, 10);
        assert_int_equal(data[10], 0);
        free(data);

        put(empty, "");
        assert_int_equal(fs_read_file_full(empty, 0, &data, &size), 0);
        assert_int_equal(size, 0);
        assert_int_equal(data[0], 0);
        free(data);

        /* Files whose st_size lies (procfs reports 0). */
        assert_int_equal(fs_read_file_full("/proc/self/status", 1 << 20, &data, &size), 0);
        assert_true(size > 0);
        assert_int_equal(strlen(data), size);
        assert_non_null(strstr(data, "Pid:"));
        free(data);
        assert_int_equal(fs_read_file_full("/proc/self/status", 10, &data, &size), -EFBIG);

        _cleanup_free_ char *nope = path_of(f, "nope");
        assert_int_equal(fs_read_file_full(nope, 10, &data, &size), -ENOENT);
}

static void test_mkdir_p_rm_rf(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *deep = path_of(f, "a/b/c");
        _cleanup_free_ char *blocked = path_of(f, "a/file/x");
        _cleanup_free_ char *file = path_of(f, "a/file");
        _cleanup_free_ char *outside = path_of(f, "outside");
        _cleanup_free_ char *precious = path_of(f, "outside/precious");
        _cleanup_free_ char *link = path_of(f, "a/b/link");
        _cleanup_free_ char *a = path_of(f, "a");
        _cleanup_free_ char *toplink = path_of(f, "toplink");
        _cleanup_free_ char *toplink_slash = path_of(f, "toplink/");
        struct stat st;

        assert_int_equal(fs_mkdir_p(deep, 0700), 0);
        assert_int_equal(stat(deep, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0700);
        assert_int_equal(fs_mkdir_p(deep, 0700), 0); /* idempotent */

        put(file, "x");
        assert_int_equal(fs_mkdir_p(blocked, 0755), -ENOTDIR);
        assert_int_equal(fs_mkdir_p(file, 0755), -ENOTDIR);

        /* fs_rm_rf never follows a symlink out of the tree it removes. */
        assert_int_equal(mkdir(outside, 0755), 0);
        put(precious, "do not delete");
        assert_int_equal(symlink(outside, link), 0);
        assert_int_equal(fs_rm_rf(a), 0);
        assert_false(exists(a));
        assert_content(precious, "do not delete");

        /* Removing a symlink to a directory removes the link, even spelled "link/". */
        assert_int_equal(symlink(outside, toplink), 0);
        assert_int_equal(fs_rm_rf(toplink_slash), 0);
        assert_false(exists(toplink));
        assert_content(precious, "do not delete");

        /* Missing is fine; a plain file works. */
        assert_int_equal(fs_rm_rf(a), 0);
        assert_int_equal(fs_rm_rf(precious), 0);
        assert_false(exists(precious));
        assert_int_equal(fs_rm_rf("/"), -EPERM);
        assert_int_equal(fs_rm_rf(""), -EINVAL);
}

static void test_fsync(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *file = path_of(f, "file");
        _cleanup_free_ char *nope = path_of(f, "nope/file");

        put(file, "x");
        assert_int_equal(fs_fsync_path(file), 0);
        assert_int_equal(fs_fsync_path(f->root), 0);
        assert_int_equal(fs_fsync_directory_of(file), 0);
        assert_int_equal(fs_fsync_directory_of("relative-name"), 0); /* the cwd */
        assert_int_equal(fs_fsync_path(nope), -ENOENT);
        assert_int_equal(fs_fsync_directory_of(nope), -ENOENT);
}

static void test_cleanup_temp(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *t1 = path_of(f, ".#state.json.a1B2c3");
        _cleanup_free_ char *t2 = path_of(f, ".#other.XXXXXX");
        _cleanup_free_ char *keep = path_of(f, "state.json");
        _cleanup_free_ char *hidden = path_of(f, ".hidden");
        _cleanup_free_ char *tdir = path_of(f, ".#dir");

        put(t1, "partial");
        put(t2, "");
        put(keep, "real");
        put(hidden, "dotfile");
        assert_int_equal(mkdir(tdir, 0755), 0);
        _cleanup_free_ char *lock = path_of(f, ".#state.json");
        assert_int_equal(symlink("root@host.1234:1700000000", lock), 0);

        assert_int_equal(fs_cleanup_temp(f->root), 2);
        assert_false(exists(t1));
        assert_false(exists(t2));
        assert_content(keep, "real");
        assert_content(hidden, "dotfile");
        assert_true(exists(tdir)); /* never a directory... */
        assert_true(exists(lock)); /* ...nor a symlink (Emacs' lock files look like this) */
        assert_int_equal(fs_cleanup_temp(f->root), 0);

        _cleanup_free_ char *nope = path_of(f, "nope");
        assert_int_equal(fs_cleanup_temp(nope), -ENOENT);
}

struct rewriter {
        const char *path;
        const char *contents[2];
        unsigned first;
};

static void rewrite_forever(void *arg) {
        const struct rewriter *w = arg;

        for (unsigned i = w->first;; i++)
                if (fs_write_file_atomic(w->path, w->contents[i % 2], BIG_SIZE, 0644, (uid_t) -1, (gid_t) -1) < 0)
                        _exit(3);
}

static void test_crash_write_atomic(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *path = path_of(f, "big");
        _cleanup_free_ char *a = malloc(BIG_SIZE), *b = malloc(BIG_SIZE);
        unsigned seen[2] = {}, leftovers = 0;

        assert_non_null(a);
        assert_non_null(b);
        memset(a, 'A', BIG_SIZE);
        memset(b, 'B', BIG_SIZE);

        /* How long one write takes here, so the kills land anywhere inside a few of them. */
        usec_t start = now_usec(CLOCK_MONOTONIC);
        for (unsigned i = 0; i < 4; i++)
                assert_int_equal(fs_write_file_atomic(path, i % 2 ? b : a, BIG_SIZE, 0644, (uid_t) -1, (gid_t) -1), 0);
        usec_t one = MAX((now_usec(CLOCK_MONOTONIC) - start) / 4, 100);

        rng_seed();
        for (unsigned round = 0; round < CRASH_ROUNDS; round++) {
                struct rewriter w = { .path = path, .contents = { a, b }, .first = round };
                _cleanup_free_ char *data = NULL;
                size_t size = 0;

                pid_t pid = start_child(rewrite_forever, &w);
                usleep((useconds_t) (rng() % (3 * one)));
                kill_child(pid);

                /* Exactly one of the two versions, whole. */
                assert_int_equal(fs_read_file_full(path, 2 * BIG_SIZE, &data, &size), 0);
                assert_int_equal(size, BIG_SIZE);
                if (memcmp(data, a, BIG_SIZE) == 0)
                        seen[0]++;
                else if (memcmp(data, b, BIG_SIZE) == 0)
                        seen[1]++;
                else
                        fail_msg("round %u: file is neither all 'A' nor all 'B'", round);

                int r = fs_cleanup_temp(f->root);
                assert_true(r >= 0);
                leftovers += (unsigned) r;
                assert_int_equal(count_entries(f->root), 1);
        }

        print_message("# %u kills: %u 'A', %u 'B', %u interrupted temp files cleaned\n", CRASH_ROUNDS,
                      seen[0], seen[1], leftovers);
        /* Proof the kills hit while writing and between writes, not only one of them. */
        assert_true(seen[0] > 0 && seen[1] > 0);
        assert_true(leftovers > 0);
}

/* ---- the atomic directory ---- */

static char *dest_of(const struct fixture *f) {
        return path_of(f, "dest");
}

static void put_in(const char *dir, const char *name, const char *content) {
        _cleanup_free_ char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        put(p, content);
}

static void mkdir_in(const char *dir, const char *name) {
        _cleanup_free_ char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
        assert_int_equal(mkdir(p, 0755), 0);
}

static char *commit_version(const char *dest, unsigned keep, const char *a_content) {
        char *vdir = NULL;

        assert_int_equal(atomic_dir_begin(dest, &vdir), 0);
        put_in(vdir, "a", a_content);
        assert_int_equal(atomic_dir_commit(dest, vdir, keep), 0);
        return vdir;
}

static void test_atomic_dir_layout(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dest = dest_of(f);
        _cleanup_free_ char *v1 = NULL, *v2 = NULL, *cur = NULL, *n1 = NULL, *n2 = NULL;
        char *p = NULL;

        assert_int_equal(atomic_dir_current(dest, &cur), -ENOENT);

        /* begin creates dest and an empty version directory in it. */
        assert_int_equal(atomic_dir_begin(dest, &v1), 0);
        n1 = basename_dup(v1);
        assert_true(is_version_name(n1));
        assert_int_equal(strlen(n1), strlen("..2026_11_21_10_42_04.123456789"));
        assert_int_equal(count_entries(v1), 0);

        put_in(v1, "a", "one-a");
        mkdir_in(v1, "sub");
        put_in(v1, "sub/b", "one-b");
        assert_int_equal(atomic_dir_commit(dest, v1, 2), 0);

        p = path_of(f, "dest/..data");
        assert_link(p, n1);
        free(p);
        assert_int_equal(atomic_dir_current(dest, &cur), 0);
        assert_string_equal(cur, n1);
        free(cur);
        cur = NULL;
        p = path_of(f, "dest/a");
        assert_link(p, "..data/a");
        assert_content(p, "one-a");
        free(p);
        p = path_of(f, "dest/sub");
        assert_link(p, "..data/sub");
        free(p);
        p = path_of(f, "dest/sub/b");
        assert_content(p, "one-b");
        free(p);
        p = path_of(f, "dest/..data_tmp");
        assert_false(exists(p));
        free(p);
        /* ..data, the version, a, sub. */
        assert_int_equal(count_entries(dest), 4);

        /* A second version swaps everything at once; entries it lacks disappear. */
        assert_int_equal(atomic_dir_begin(dest, &v2), 0);
        n2 = basename_dup(v2);
        assert_true(strcmp(n1, n2) < 0); /* name order is age order */
        put_in(v2, "a", "two-a");
        put_in(v2, "c", "two-c");
        assert_int_equal(atomic_dir_commit(dest, v2, 2), 0);

        assert_int_equal(atomic_dir_current(dest, &cur), 0);
        assert_string_equal(cur, n2);
        p = path_of(f, "dest/a");
        assert_content(p, "two-a");
        free(p);
        p = path_of(f, "dest/c");
        assert_link(p, "..data/c");
        assert_content(p, "two-c");
        free(p);
        p = path_of(f, "dest/sub");
        assert_false(exists(p));
        free(p);
        /* The previous version stays as history. */
        assert_true(exists(v1));
        assert_int_equal(count_versions(dest), 2);
        assert_int_equal(count_entries(dest), 5); /* ..data, 2 versions, a, c */
}

static void test_atomic_dir_keep_versions(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dest = dest_of(f);
        char *v[6] = {};
        char content[16];

        for (unsigned i = 0; i < 6; i++) {
                snprintf(content, sizeof(content), "gen-%u", i);
                v[i] = commit_version(dest, 2, content);
        }

        /* Current plus the two newest older ones; the oldest went first. */
        assert_int_equal(count_versions(dest), 3);
        for (unsigned i = 0; i < 6; i++)
                assert_int_equal(exists(v[i]), i >= 3);
        _cleanup_free_ char *a = path_of(f, "dest/a");
        assert_content(a, "gen-5");

        /* keep_versions 0: only the current one. */
        char *last = commit_version(dest, 0, "gen-6");
        assert_int_equal(count_versions(dest), 1);
        assert_true(exists(last));
        assert_content(a, "gen-6");

        for (unsigned i = 0; i < 6; i++)
                free(v[i]);
        free(last);
}

/* After the wall clock stepped back, the current version's name (a time) sorts after now: a new
 * version still sorts after it, so the one it replaces stays as history (a reader may hold its
 * paths) and cleanup does not take it for a leftover. */
static void test_atomic_dir_after_clock_step_back(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dest = dest_of(f), *future = NULL, *cur = NULL;
        char *v[3] = {};

        assert_int_equal(fs_mkdir_p(dest, 0755), 0);
        assert_true(asprintf(&future, "%s/..2099_01_01_00_00_00.000000000", dest) > 0);
        assert_int_equal(mkdir(future, 0755), 0);
        put_in(future, "a", "before the step");
        assert_int_equal(atomic_dir_commit(dest, future, 1), 0);

        for (unsigned i = 0; i < 3; i++) {
                char content[16];
                snprintf(content, sizeof(content), "gen-%u", i);
                v[i] = commit_version(dest, 1, content);
                _cleanup_free_ char *prev = basename_dup(i == 0 ? future : v[i - 1]), *name = basename_dup(v[i]);
                assert_true(strcmp(name, prev) > 0);
                assert_int_equal(atomic_dir_cleanup(dest), 0);
                assert_true(exists(i == 0 ? future : v[i - 1])); /* the previous one stays */
                assert_int_equal(count_versions(dest), 2);
        }
        assert_int_equal(atomic_dir_current(dest, &cur), 0);
        _cleanup_free_ char *last = basename_dup(v[2]);
        assert_string_equal(cur, last);
        for (unsigned i = 0; i < 3; i++)
                free(v[i]);
}

static void test_atomic_dir_refusals(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dest = dest_of(f);
        _cleanup_free_ char *v1 = NULL, *bad = NULL, *cur = NULL, *n1 = NULL;
        _cleanup_free_ char *elsewhere = path_of(f, "..2026_01_01_00_00_00.000000000");
        _cleanup_free_ char *notversion = path_of(f, "dest/plain");

        v1 = commit_version(dest, 3, "v1");
        n1 = basename_dup(v1);

        /* A version may not ship names of the bookkeeping (..data and friends). */
        assert_int_equal(atomic_dir_begin(dest, &bad), 0);
        put_in(bad, "..data", "evil");
        assert_int_equal(atomic_dir_commit(dest, bad, 3), -EINVAL);
        assert_int_equal(atomic_dir_current(dest, &cur), 0);
        assert_string_equal(cur, n1);

        /* A version directory not inside dest, or not a version directory. */
        assert_int_equal(mkdir(elsewhere, 0755), 0);
        assert_int_equal(atomic_dir_commit(dest, elsewhere, 3), -ENOENT);
        assert_int_equal(mkdir(notversion, 0755), 0);
        assert_int_equal(atomic_dir_commit(dest, notversion, 3), -EINVAL);

        _cleanup_free_ char *a = path_of(f, "dest/a");
        assert_content(a, "v1");
}

static void test_atomic_dir_cleanup(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dest = dest_of(f);
        _cleanup_free_ char *v0 = NULL, *v1 = NULL, *half = NULL, *cur = NULL, *n1 = NULL;
        _cleanup_free_ char *data_tmp = path_of(f, "dest/..data_tmp");
        _cleanup_free_ char *link_tmp = path_of(f, "dest/..link_tmp");
        _cleanup_free_ char *a = path_of(f, "dest/a");
        _cleanup_free_ char *nope = path_of(f, "nope");

        assert_int_equal(atomic_dir_cleanup(nope), 0);

        v0 = commit_version(dest, 3, "v0");
        v1 = commit_version(dest, 3, "v1");
        n1 = basename_dup(v1);

        /* What an interrupted begin/commit leaves: a half-filled newer version, a stale
         * ..data_tmp pointing at it, a stale link temp, a top-level link not yet made. */
        assert_int_equal(atomic_dir_begin(dest, &half), 0);
        put_in(half, "a", "half");
        mkdir_in(half, "deep");
        put_in(half, "deep/x", "half");
        _cleanup_free_ char *hn = basename_dup(half);
        assert_int_equal(symlink(hn, data_tmp), 0);
        assert_int_equal(symlink("..data/a", link_tmp), 0);
        assert_int_equal(unlink(a), 0);
        /* ...and a pruned version whose removal was cut short. */
        _cleanup_free_ char *trash = path_of(f, "dest/..trash..2020_01_01_00_00_00.000000000");
        assert_int_equal(mkdir(trash, 0755), 0);
        put_in(trash, "x", "old");

        assert_int_equal(atomic_dir_cleanup(dest), 4);
        assert_false(exists(trash));
        assert_false(exists(half));
        assert_false(exists(data_tmp));
        assert_false(exists(link_tmp));
        /* History and the current version stay; the missing link is back. */
        assert_true(exists(v0));
        assert_true(exists(v1));
        assert_int_equal(atomic_dir_current(dest, &cur), 0);
        assert_string_equal(cur, n1);
        assert_link(a, "..data/a");
        assert_content(a, "v1");
        assert_int_equal(atomic_dir_cleanup(dest), 0);

        /* Without ..data nothing was ever published: every version is a leftover. */
        _cleanup_free_ char *dest2 = path_of(f, "dest2");
        _cleanup_free_ char *lonely = NULL;
        assert_int_equal(atomic_dir_begin(dest2, &lonely), 0);
        assert_int_equal(atomic_dir_cleanup(dest2), 1);
        assert_false(exists(lonely));
}

struct publisher {
        const char *dest;
        unsigned gen;
};

static void version_content(unsigned gen, const char *file, char *buf) {
        int n = snprintf(buf, VERSION_FILE_SIZE + 1, "gen=%08u file=%s\n", gen, file);
        memset(buf + n, 'a' + (char) (gen % 26), VERSION_FILE_SIZE - (size_t) n);
        buf[VERSION_FILE_SIZE] = 0;
}

/* In a forked child: no cmocka assertions (they would unwind into the child's copy of the
 * test runner), just an exit code the parent's kill_child() notices. */
static void child_put(const char *dir, const char *name, const char *content) {
        char path[PATH_MAX];
        size_t n = strlen(content);

        if ((size_t) snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
                _exit(5);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, content, n) != (ssize_t) n || close(fd) < 0)
                _exit(6);
}

/* Every version has a, b and sub/c; odd generations also have d. */
static void publish_forever(void *arg) {
        struct publisher *p = arg;
        static char buf[VERSION_FILE_SIZE + 1];

        for (;; p->gen++) {
                _cleanup_free_ char *vdir = NULL, *sub = NULL;
                const char *files[] = { "a", "b", "sub/c", "d" };

                if (atomic_dir_begin(p->dest, &vdir) < 0)
                        _exit(3);
                if (asprintf(&sub, "%s/sub", vdir) < 0 || mkdir(sub, 0755) < 0)
                        _exit(7);
                for (size_t i = 0; i < ELEMENTSOF(files) - (p->gen % 2 ? 0 : 1); i++) {
                        version_content(p->gen, files[i], buf);
                        child_put(vdir, files[i], buf);
                }
                if (atomic_dir_commit(p->dest, vdir, 2) < 0)
                        _exit(4);
        }
}

/* Reads dest/<file> and returns its generation, asserting the file is whole. */
static unsigned read_generation(const char *dest, const char *file) {
        _cleanup_free_ char *path = NULL, *data = NULL;
        static char expected[VERSION_FILE_SIZE + 1];
        unsigned gen;
        size_t size;

        assert_true(asprintf(&path, "%s/%s", dest, file) > 0);
        assert_int_equal(fs_read_file_full(path, 2 * VERSION_FILE_SIZE, &data, &size), 0);
        assert_int_equal(size, VERSION_FILE_SIZE);
        assert_int_equal(sscanf(data, "gen=%u", &gen), 1);
        version_content(gen, file, expected);
        assert_memory_equal(data, expected, VERSION_FILE_SIZE);
        return gen;
}

static void test_crash_atomic_dir(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *dest = dest_of(f);
        _cleanup_free_ char *d = path_of(f, "dest/d");
        unsigned last_gen = 0, changes = 0;

        /* A published first version, timed to pace the kills. */
        struct publisher first = { .dest = dest, .gen = 0 };
        usec_t start = now_usec(CLOCK_MONOTONIC);
        pid_t pid = start_child(publish_forever, &first);
        for (unsigned i = 0; i < 10000 && !exists(d); i++)
                usleep(1000);
        usec_t one = MAX((now_usec(CLOCK_MONOTONIC) - start) / 2, 100);
        kill_child(pid);
        assert_true(exists(d)); /* generation 1 was published */
        assert_true(atomic_dir_cleanup(dest) >= 0);
        last_gen = read_generation(dest, "a");

        rng_seed();
        for (unsigned round = 0; round < CRASH_ROUNDS; round++) {
                struct publisher p = { .dest = dest, .gen = (round + 1) * 1000000 };
                _cleanup_free_ char *cur = NULL, *version = NULL;

                pid = start_child(publish_forever, &p);
                usleep((useconds_t) (rng() % (3 * one)));
                kill_child(pid);

                /* Through the top-level links a reader sees one version, whole. */
                unsigned gen = read_generation(dest, "a");
                assert_int_equal(read_generation(dest, "b"), gen);
                assert_int_equal(read_generation(dest, "sub/c"), gen);
                /* Never back to an older version. */
                assert_true(gen >= last_gen);
                changes += gen != last_gen;
                last_gen = gen;

                /* ..data names that same version. */
                assert_int_equal(atomic_dir_current(dest, &cur), 0);
                assert_true(asprintf(&version, "%s/%s", dest, cur) > 0);
                assert_int_equal(read_generation(version, "a"), gen);

                assert_true(atomic_dir_cleanup(dest) >= 0);

                /* After cleanup: no debris, history bounded, links exactly the version's. */
                _cleanup_free_ char *data_tmp = path_of(f, "dest/..data_tmp");
                _cleanup_free_ char *link_tmp = path_of(f, "dest/..link_tmp");
                assert_false(exists(data_tmp));
                assert_false(exists(link_tmp));
                assert_int_equal(count_prefixed(dest, "..trash"), 0);
                assert_int_equal(count_versions_newer(dest, cur), 0);
                /* History never grows past keep_versions (2), however the kills fall. */
                assert_true(count_versions(dest) <= 2 + 1);
                assert_int_equal(read_generation(dest, "a"), gen);
                if (gen % 2)
                        assert_int_equal(read_generation(dest, "d"), gen);
                else
                        assert_false(exists(d));
        }

        print_message("# %u kills, %u saw a newer version\n", CRASH_ROUNDS, changes);
        assert_true(changes > 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_write_atomic_content_mode_owner, setup, teardown),
                cmocka_unit_test_setup_teardown(test_write_atomic_failures, setup, teardown),
                cmocka_unit_test_setup_teardown(test_read_file_full, setup, teardown),
                cmocka_unit_test_setup_teardown(test_mkdir_p_rm_rf, setup, teardown),
                cmocka_unit_test_setup_teardown(test_fsync, setup, teardown),
                cmocka_unit_test_setup_teardown(test_cleanup_temp, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_write_atomic, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_dir_layout, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_dir_keep_versions, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_dir_after_clock_step_back, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_dir_refusals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_atomic_dir_cleanup, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash_atomic_dir, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
