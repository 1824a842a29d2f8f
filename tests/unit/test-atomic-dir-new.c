/* SPDX-License-Identifier: MIT */
/* A new atomic directory built whole and published with one rename (atomic_dir_stage_new(),
 * atomic_dir_publish_new()): its layout, owners and modes, the fallback into a directory that
 * exists, the sweep of staging leftovers, refusals, and kill -9 at any instant. */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "kill-harness.h"

#include "atomic-dir.h"
#include "fs.h"

#define CRASH_ROUNDS 40

struct fixture {
        char *root;
        int fd;
};

static int setup(void **state) {
        const char *tmp = getenv("TMPDIR");
        struct fixture *f = calloc(1, sizeof(*f));

        assert_non_null(f);
        assert_true(asprintf(&f->root, "%s/pinion-test-atomic-new.XXXXXX", isempty(tmp) ? "/tmp" : tmp) > 0);
        assert_non_null(mkdtemp(f->root));
        f->fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(f->fd >= 0);
        *state = f;
        return 0;
}

static int teardown(void **state) {
        struct fixture *f = *state;

        close(f->fd);
        assert_int_equal(fs_rm_rf(f->root), 0);
        free(f->root);
        free(f);
        return 0;
}

static char *at(const struct fixture *f, const char *name) {
        char *p = NULL;
        assert_true(asprintf(&p, "%s/%s", f->root, name) > 0);
        return p;
}

static bool exists(const char *path) {
        struct stat st;
        return lstat(path, &st) >= 0;
}

static void assert_content(const char *path, const char *expected) {
        _cleanup_free_ char *data = NULL;
        size_t size = 0;

        assert_int_equal(fs_read_file_full(path, 1 << 20, &data, &size), 0);
        assert_int_equal(size, strlen(expected));
        assert_memory_equal(data, expected, size);
}

static void assert_link(const char *path, const char *target) {
        char buf[PATH_MAX];
        ssize_t n = readlink(path, buf, sizeof(buf) - 1);

        assert_true(n > 0);
        buf[n] = 0;
        assert_string_equal(buf, target);
}

static unsigned count_prefixed(const char *dir, const char *prefix) {
        DIR *d = opendir(dir);
        struct dirent *de;
        unsigned n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += strncmp(de->d_name, prefix, strlen(prefix)) == 0 && strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        return n;
}

/* key.pem (0600), cert.pem and bundle.pem (0644), as the identity module writes them. */
static void three_files(struct atomic_dir_file files[3], const char *key, const char *cert, const char *bundle) {
        files[0] = (struct atomic_dir_file) { "key.pem", key, strlen(key), 0600 };
        files[1] = (struct atomic_dir_file) { "cert.pem", cert, strlen(cert), 0644 };
        files[2] = (struct atomic_dir_file) { "bundle.pem", bundle, strlen(bundle), 0644 };
}

static void assert_mode_owner(const char *path, mode_t mode, uid_t uid, gid_t gid) {
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_mode & 07777, mode);
        assert_int_equal(st.st_uid, uid);
        assert_int_equal(st.st_gid, gid);
}

static void test_stage_then_publish(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *d = at(f, "d"), *staged = at(f, "..new-7-d"), *cur = NULL, *version = NULL;
        struct atomic_dir_file files[3];

        three_files(files, "KEY\n", "CERT\n", "");
        /* A strict umask: the modes asked for are the modes written. */
        mode_t saved = umask(077);
        assert_int_equal(atomic_dir_stage_new(f->fd, "d", 7, files, 3), 0);
        umask(saved);
        /* Staged: nothing at the name yet. */
        assert_false(exists(d));
        assert_true(exists(staged));

        assert_int_equal(atomic_dir_publish_new(f->fd, "d", 7), 0);
        assert_false(exists(staged));
        assert_int_equal(atomic_dir_current(d, &cur), 0);
        assert_true(startswith(cur, "..") && strlen(cur) >= strlen("..0000_00_00_00_00_00.000000000"));
        assert_true(asprintf(&version, "%s/%s", d, cur) > 0);
        /* The version, ..data and a link per file: nothing else. */
        assert_int_equal(count_prefixed(d, ""), 5);
        for (size_t i = 0; i < 3; i++) {
                _cleanup_free_ char *link = NULL, *target = NULL, *file = NULL;
                assert_true(asprintf(&link, "%s/%s", d, files[i].name) > 0);
                assert_true(asprintf(&target, "..data/%s", files[i].name) > 0);
                assert_true(asprintf(&file, "%s/%s", version, files[i].name) > 0);
                assert_link(link, target);
                assert_content(link, files[i].data);
                assert_mode_owner(file, files[i].mode, geteuid(), getegid());
        }
}

/* <name> exists (an earlier run's, or made between stage and publish): the new version is
 * committed into it, the old one and its stale links go. */
static void test_publish_into_existing(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *d = at(f, "d"), *old = NULL, *oldfile = at(f, "d/old.pem"), *key = at(f, "d/key.pem");
        _cleanup_free_ char *staged = at(f, "..new-7-d"), *cur = NULL;
        struct atomic_dir_file files[3];

        assert_int_equal(atomic_dir_begin(d, &old), 0);
        for (const char *const *n = (const char *const[]) { "key.pem", "old.pem", NULL }; *n; n++) {
                _cleanup_free_ char *p = NULL;
                assert_true(asprintf(&p, "%s/%s", old, *n) > 0);
                assert_int_equal(fs_write_file_atomic(p, "OLD", 3, 0600, (uid_t) -1, (gid_t) -1), 0);
        }
        assert_int_equal(atomic_dir_commit(d, old, 0), 0);
        assert_content(oldfile, "OLD");

        three_files(files, "NEW KEY", "NEW CERT", "NEW BUNDLE");
        assert_int_equal(atomic_dir_stage_new(f->fd, "d", 7, files, 3), 0);
        assert_int_equal(atomic_dir_publish_new(f->fd, "d", 7), 0);
        assert_content(key, "NEW KEY");
        assert_false(exists(oldfile)); /* its link went with its version */
        assert_false(exists(old));
        assert_false(exists(staged));
        assert_int_equal(atomic_dir_current(d, &cur), 0);
        assert_int_equal(count_prefixed(d, ""), 5);
}

/* What a kill between stage and publish leaves: replaced by the next stage, swept at start. */
static void test_leftovers(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *junk = at(f, "..new-7-d/junk"), *outside = at(f, "outside"), *precious = at(f, "outside/precious");
        _cleanup_free_ char *staged_d = at(f, "..new-7-d"), *staged_x = at(f, "..new-7-x"), *link = at(f, "..new-link");
        _cleanup_free_ char *d_key = at(f, "d/key.pem"), *file = at(f, "..new-file");
        struct atomic_dir_file files[3];

        assert_int_equal(mkdir(staged_d, 0755), 0);
        assert_int_equal(fs_write_file_atomic(junk, "x", 1, 0644, (uid_t) -1, (gid_t) -1), 0);
        three_files(files, "k", "c", "b");
        assert_int_equal(atomic_dir_stage_new(f->fd, "d", 7, files, 3), 0);
        assert_false(exists(junk));
        assert_int_equal(atomic_dir_publish_new(f->fd, "d", 7), 0);
        assert_content(d_key, "k");

        assert_int_equal(atomic_dir_stage_new(f->fd, "x", 7, files, 3), 0);
        assert_int_equal(mkdir(outside, 0755), 0);
        assert_int_equal(fs_write_file_atomic(precious, "keep", 4, 0644, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(symlink(outside, link), 0);
        assert_int_equal(fs_write_file_atomic(file, "not a directory", 15, 0644, (uid_t) -1, (gid_t) -1), 0);

        /* Only staging directories: never a symlink's target, nor a file, nor a published one. */
        assert_int_equal(atomic_dir_sweep_staged(f->fd, NULL, NULL), 1);
        assert_false(exists(staged_x));
        assert_true(exists(link) && exists(file));
        assert_content(precious, "keep");
        assert_content(d_key, "k");
        assert_int_equal(atomic_dir_sweep_staged(f->fd, NULL, NULL), 0);

        assert_int_equal(atomic_dir_stage_new(f->fd, "y", 7, files, 3), 0);
        assert_int_equal(atomic_dir_drop_staged(f->fd, "y", 7), 0);
        assert_int_equal(count_prefixed(f->root, "..new-"), 2); /* the symlink and the file */
}

static bool keep_serial_8(const char *name, unsigned serial, void *userdata) {
        (*(unsigned *) userdata)++;
        return streq(name, "e") && serial == 8;
}

/* Two requests for one directory in flight: each stages under its own serial; the one not taken
 * is dropped, a sweep keeps what its owner still means to publish. */
static void test_serials(void **state) {
        struct fixture *f = *state;
        _cleanup_free_ char *key = at(f, "e/key.pem"), *s7 = at(f, "..new-7-e"), *s8 = at(f, "..new-8-e");
        struct atomic_dir_file old[3], new[3];
        unsigned asked = 0;

        three_files(old, "old", "c", "b");
        three_files(new, "new", "c", "b");
        assert_int_equal(atomic_dir_stage_new(f->fd, "e", 7, old, 3), 0);
        assert_int_equal(atomic_dir_stage_new(f->fd, "e", 8, new, 3), 0);
        assert_int_equal(atomic_dir_sweep_staged(f->fd, keep_serial_8, &asked), 1);
        assert_int_equal(asked, 2);
        assert_false(exists(s7));
        assert_true(exists(s8));
        assert_int_equal(atomic_dir_drop_staged(f->fd, "e", 7), 0); /* already gone: fine */
        assert_int_equal(atomic_dir_publish_new(f->fd, "e", 8), 0);
        assert_content(key, "new");
        assert_int_equal(count_prefixed(f->root, "..new-"), 0);
}

static void test_refusals(void **state) {
        struct fixture *f = *state;
        struct atomic_dir_file files[3], bad = { "..data", "x", 1, 0644 }, slash = { "a/b", "x", 1, 0644 };

        three_files(files, "k", "c", "b");
        for (const char *const *n = (const char *const[]) { "", "a/b", ".", "..", ".hidden", "..new-7-d", NULL }; *n; n++)
                assert_int_equal(atomic_dir_stage_new(f->fd, *n, 7, files, 3), -EINVAL);
        assert_int_equal(atomic_dir_stage_new(f->fd, "d", 7, &bad, 1), -EINVAL);
        assert_int_equal(atomic_dir_stage_new(f->fd, "d", 7, &slash, 1), -EINVAL);
        /* A failed stage leaves nothing behind. */
        assert_int_equal(count_prefixed(f->root, ""), 0);
        /* Nothing staged: nothing to publish. */
        assert_int_equal(atomic_dir_publish_new(f->fd, "d", 7), -ENOENT);
        assert_int_equal(count_prefixed(f->root, ""), 0);
}

/* ---- kill -9 at any instant ---- */

/* Directories d<first>, d<first+1>, ... each holding key/cert/bundle that name their number. */
struct creator {
        int parent_fd;
        unsigned first;
};

static void create_forever(void *arg) {
        const struct creator *cr = arg;
        int parent_fd = cr->parent_fd;
        for (unsigned i = cr->first;; i++) {
                char name[32], key[64], cert[64], bundle[64];
                struct atomic_dir_file files[3];

                snprintf(name, sizeof(name), "d%u", i);
                snprintf(key, sizeof(key), "key %u\n", i);
                snprintf(cert, sizeof(cert), "cert %u\n", i);
                snprintf(bundle, sizeof(bundle), "bundle %u\n", i);
                three_files(files, key, cert, bundle);
                if (atomic_dir_stage_new(parent_fd, name, i, files, 3) < 0 ||
                    atomic_dir_publish_new(parent_fd, name, i) < 0)
                        _exit(3);
        }
}

/* Every published directory is whole: its three files, for its own number. */
static unsigned check_published(const char *root) {
        DIR *d = opendir(root);
        struct dirent *de;
        unsigned n = 0;

        assert_non_null(d);
        while ((de = readdir(d))) {
                unsigned i;
                if (sscanf(de->d_name, "d%u", &i) != 1)
                        continue;
                static const char *const what[] = { "key", "cert", "bundle" };
                for (size_t k = 0; k < ELEMENTSOF(what); k++) {
                        _cleanup_free_ char *path = NULL, *want = NULL;
                        assert_true(asprintf(&path, "%s/%s/%s.pem", root, de->d_name, what[k]) > 0);
                        assert_true(asprintf(&want, "%s %u\n", what[k], i) > 0);
                        assert_content(path, want);
                }
                n++;
        }
        closedir(d);
        return n;
}

static void test_crash(void **state) {
        struct fixture *f = *state;
        unsigned published = 0, leftovers = 0, first = 0;

        rng_seed();
        for (unsigned round = 0; round < CRASH_ROUNDS; round++) {
                struct creator cr = { f->fd, first };
                pid_t pid = start_child(create_forever, &cr);
                usleep((useconds_t) (rng() % 2000));
                kill_child(pid);

                /* Each name is absent or whole; only staging directories are partial. */
                published = check_published(f->root);
                int r = atomic_dir_sweep_staged(f->fd, NULL, NULL);
                assert_true(r >= 0 && r <= 1);
                leftovers += (unsigned) r;
                assert_int_equal(count_prefixed(f->root, "..new-"), 0);
                /* The next round starts past everything made so far. */
                first += 1000000;
        }
        print_message("# %u kills: %u directories published, %u interrupted stagings swept\n",
                      CRASH_ROUNDS, published, leftovers);
        /* Proof the kills hit in the middle of a staging, not only between directories. */
        assert_true(leftovers > 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_stage_then_publish, setup, teardown),
                cmocka_unit_test_setup_teardown(test_publish_into_existing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_leftovers, setup, teardown),
                cmocka_unit_test_setup_teardown(test_serials, setup, teardown),
                cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crash, setup, teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
