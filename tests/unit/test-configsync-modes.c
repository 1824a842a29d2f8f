/* SPDX-License-Identifier: MIT */
/* What a bundle is published with: the table of file masks and directory modes for group= and
 * world-readable=, the cap on declared modes, and bringing an existing tree within the rules
 * (bits only taken away from files, symlinks left alone, a writable dest left untouched). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fs.h"
#include "publish-modes.h"

static void test_table(_unused_ void **state) {
        static const struct {
                gid_t gid;
                bool world;
                mode_t file_mask, dir_mode, gid_out;
        } table[] = {
                { (gid_t) -1, false, 0700, 0700, 0 },
                { 4242, false, 0750, 0750, 4242 },
                { (gid_t) -1, true, 0705, 0705, 0 },
                { 4242, true, 0755, 0755, 4242 },
        };
        for (size_t i = 0; i < ELEMENTSOF(table); i++) {
                struct publish_modes m;
                publish_modes_init(&m, table[i].gid, table[i].world);
                assert_int_equal(m.file_mask, table[i].file_mask);
                assert_int_equal(m.dir_mode, table[i].dir_mode);
                assert_int_equal(m.gid, table[i].gid_out);
                /* Never group or other write, whatever the manifest says. */
                assert_int_equal(publish_modes_file(&m, 0777) & 0022, 0);
                assert_int_equal(publish_modes_file(&m, 0666) & 0022, 0);
                assert_int_equal(publish_modes_file(&m, 0600), 0600);
        }
        struct publish_modes all;
        publish_modes_init(&all, 4242, true);
        assert_int_equal(publish_modes_file(&all, 0666), 0644);
        assert_int_equal(publish_modes_file(&all, 0777), 0755);
        assert_int_equal(publish_modes_file(&all, 0640), 0640);
        assert_true(publish_mode_capped(0666));
        assert_true(publish_mode_capped(0620));
        assert_false(publish_mode_capped(0755));
        assert_false(publish_mode_capped(0600));
}

static mode_t mode_of(const char *dir, const char *name) {
        _cleanup_free_ char *p = fs_path_join(dir, name);
        struct stat st;
        assert_non_null(p);
        assert_int_equal(lstat(p, &st), 0);
        return st.st_mode & 07777;
}

static void touch(const char *dir, const char *name, mode_t mode) {
        _cleanup_free_ char *p = fs_path_join(dir, name);
        assert_non_null(p);
        assert_int_equal(fs_write_file_atomic(p, "x", 1, mode, (uid_t) -1, (gid_t) -1), 0);
        assert_int_equal(chmod(p, mode), 0);
}

static void test_apply_tree(_unused_ void **state) {
        char dest[] = "/tmp/test-configsync-modes-XXXXXX";
        _cleanup_free_ char *v = NULL, *sub = NULL, *link = NULL;
        struct publish_modes m;

        assert_non_null(mkdtemp(dest));
        assert_int_equal(chmod(dest, 0755), 0);
        v = fs_path_join(dest, "..2026_01_01_00_00_00.000000000");
        sub = fs_path_join(v, "conf");
        link = fs_path_join(dest, "app.yaml");
        assert_int_equal(mkdir(v, 0755), 0);
        assert_int_equal(mkdir(sub, 0755), 0);
        assert_int_equal(chmod(v, 0755), 0);
        assert_int_equal(chmod(sub, 0755), 0);
        touch(v, "app.yaml", 0666);
        touch(v, "secret", 0600);
        touch(sub, "db.ini", 0644);
        assert_int_equal(symlink("..2026_01_01_00_00_00.000000000/app.yaml", link), 0);

        /* The caller's own group: no privilege needed to "change" to it. */
        publish_modes_init(&m, getegid(), false);
        assert_int_equal(publish_modes_apply_tree(dest, &m), 0);
        assert_int_equal(mode_of(dest, "."), 0750);
        assert_int_equal(mode_of(v, "."), 0750);
        assert_int_equal(mode_of(sub, "."), 0750);
        assert_int_equal(mode_of(v, "app.yaml"), 0640);
        assert_int_equal(mode_of(v, "secret"), 0600); /* only taken away, never added */
        assert_int_equal(mode_of(sub, "db.ini"), 0640);
        assert_int_equal(mode_of(dest, "app.yaml") & S_IFMT, 0); /* lstat of a link: untouched */

        /* A dest others may write into is not adopted: nothing below changes. */
        assert_int_equal(chmod(dest, 0777), 0);
        assert_int_equal(chmod(v, 0755), 0);
        publish_modes_init(&m, (gid_t) -1, false);
        m.gid = getegid();
        assert_int_equal(publish_modes_apply_tree(dest, &m), -EPERM);
        assert_int_equal(mode_of(dest, "."), 0777);
        assert_int_equal(mode_of(v, "."), 0755);

        assert_int_equal(publish_modes_apply_tree("/nonexistent/configsync-modes", &m), -ENOENT);
        assert_int_equal(fs_rm_rf(dest), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_table),
                cmocka_unit_test(test_apply_tree),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
