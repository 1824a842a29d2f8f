/* SPDX-License-Identifier: MIT */
/* A sync's file-system steps as its thread runs them, here called directly in a temp dir:
 * whose dest may be published into, preparing a version (every directory once, with the
 * bundle's mode), publishing it (the ..data swap), a stop asked half-way, and the removal of a
 * version that failed. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "atomic-dir.h"
#include "fs.h"
#include "stage.h"

#define SHA_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static char *make_tmp(void) {
        char *d = strdup("/tmp/test-configsync-stage-XXXXXX");
        assert_non_null(d);
        assert_non_null(mkdtemp(d));
        return d;
}

static void put(const char *dir, const char *name, const char *content) {
        _cleanup_free_ char *p = fs_path_join(dir, name);
        FILE *f = fopen(p, "we");
        assert_non_null(f);
        fputs(content, f);
        assert_int_equal(fclose(f), 0);
}

static struct manifest *manifest_of(const char *const *paths, size_t n) {
        struct manifest *m = NULL;
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        assert_non_null(f);
        fputs("{\"version\": \"v\", \"files\": [", f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "%s{\"path\": \"%s\", \"url\": \"u\", \"size\": 0, \"sha256\": \"" SHA_EMPTY "\"}", i ? "," : "",
                        paths[i]);
        fputs("]}", f);
        assert_int_equal(fclose(f), 0);
        assert_int_equal(manifest_parse(text, len, &m, NULL), 0);
        free(text);
        return m;
}

static void test_dest_foreign(_unused_ void **state) {
        _cleanup_free_ char *d = make_tmp(), *dest = fs_path_join(d, "dest"), *name = NULL;

        assert_int_equal(stage_dest_foreign(dest, &name), 0); /* missing */
        assert_int_equal(mkdir(dest, 0700), 0);
        assert_int_equal(stage_dest_foreign(dest, &name), 0); /* empty */
        _cleanup_free_ char *lost = fs_path_join(dest, "lost+found");
        assert_int_equal(mkdir(lost, 0700), 0); /* dest is a volume's root */
        assert_int_equal(stage_dest_foreign(dest, &name), 0);
        /* What an atomic directory holds, also without ..data (lost behind our back). */
        _cleanup_free_ char *v = fs_path_join(dest, "..2026_01_01_00_00_00.000000000"), *link = fs_path_join(dest, "app.yaml");
        assert_int_equal(mkdir(v, 0700), 0);
        assert_int_equal(symlink("..data/app.yaml", link), 0);
        assert_int_equal(stage_dest_foreign(dest, &name), 0);
        _cleanup_free_ char *data = fs_path_join(dest, "..data");
        assert_int_equal(symlink("..2026_01_01_00_00_00.000000000", data), 0);
        assert_int_equal(stage_dest_foreign(dest, &name), 0);
        /* A file, a directory, a link elsewhere: not ours. */
        put(dest, "notes.txt", "mine\n");
        assert_int_equal(stage_dest_foreign(dest, &name), 1);
        assert_string_equal(name, "notes.txt");
        name = mfree(name);
        _cleanup_free_ char *notes = fs_path_join(dest, "notes.txt");
        assert_int_equal(unlink(notes), 0);
        _cleanup_free_ char *other = fs_path_join(dest, "etc");
        assert_int_equal(symlink("/etc", other), 0);
        assert_int_equal(stage_dest_foreign(dest, &name), 1);
        assert_string_equal(name, "etc");
        name = mfree(name);
        assert_int_equal(fs_rm_rf(d), 0);
}

static int run(offload_fn fn, struct stage *s, bool stop) {
        atomic_bool flag;
        atomic_init(&flag, stop);
        return fn(s, &flag);
}

/* 60 files 8 directories deep, each chain its own: 480 directories made once each, all with
 * the bundle's directory mode, and published by the swap. */
static void test_prepare_and_publish(_unused_ void **state) {
        _cleanup_free_ char *d = make_tmp(), *dest = fs_path_join(d, "dest");
        char *paths[60];
        struct stage s;
        struct stat st;

        for (size_t i = 0; i < 60; i++)
                assert_true(asprintf(&paths[i], "c%zu/d/d/d/d/d/d/d/f", i) > 0);
        _cleanup_(manifest_freep) struct manifest *m = manifest_of((const char *const *) paths, 60);
        assert_int_equal(m->n_directories, 480);
        stage_init(&s);
        s.dest = dest;
        s.manifest = m;
        publish_modes_init(&s.modes, (gid_t) -1, false);
        assert_int_equal(run(stage_prepare, &s, false), 0);
        assert_non_null(s.version_dir);
        assert_true(s.vfd >= 0);
        for (size_t i = 0; i < 60; i++) {
                _cleanup_free_ char *dir = strndup(paths[i], strlen(paths[i]) - 2);
                assert_int_equal(fstatat(s.vfd, dir, &st, AT_SYMLINK_NOFOLLOW), 0);
                assert_true(S_ISDIR(st.st_mode));
                assert_int_equal(st.st_mode & 07777, 0700);
                /* The loop's part: the files. */
                int fd = openat(s.vfd, paths[i], O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                assert_true(fd >= 0);
                close(fd);
        }
        assert_int_equal(run(stage_publish, &s, false), 0);
        assert_null(s.version_dir);
        assert_non_null(s.published_name);
        _cleanup_free_ char *current = NULL, *through = fs_path_join(dest, "c7/d/d/d/d/d/d/d/f");
        assert_int_equal(atomic_dir_current(dest, &current), 0);
        assert_string_equal(current, s.published_name);
        assert_int_equal(stat(through, &st), 0);
        stage_done(&s);
        for (size_t i = 0; i < 60; i++)
                free(paths[i]);
        assert_int_equal(fs_rm_rf(d), 0);
}

/* A stop asked before or during a step: it returns -ECANCELED, publishes nothing, and what it
 * made goes with stage_remove. A dest that holds what is not ours is refused before anything
 * is made. */
static void test_stop_refuse_and_remove(_unused_ void **state) {
        _cleanup_free_ char *d = make_tmp(), *dest = fs_path_join(d, "dest"), *current = NULL;
        static const char *const paths[] = { "a/b/c", "a/d" };
        _cleanup_(manifest_freep) struct manifest *m = manifest_of(paths, 2);
        struct stage s;

        stage_init(&s);
        s.dest = dest;
        s.manifest = m;
        publish_modes_init(&s.modes, (gid_t) -1, false);
        assert_int_equal(run(stage_prepare, &s, true), -ECANCELED);
        assert_non_null(s.version_dir);
        assert_int_equal(run(stage_remove, &s, false), 0);
        assert_null(s.version_dir);
        assert_int_equal(atomic_dir_current(dest, &current), -ENOENT);
        _cleanup_free_ char *left = NULL;
        assert_int_equal(stage_dest_foreign(dest, &left), 0);
        assert_int_equal(rmdir(dest), 0); /* empty again */
        stage_done(&s);

        assert_int_equal(mkdir(dest, 0755), 0);
        put(dest, "theirs", "x\n");
        stage_init(&s);
        s.dest = dest;
        s.manifest = m;
        publish_modes_init(&s.modes, (gid_t) -1, false);
        assert_int_equal(run(stage_prepare, &s, false), -EEXIST);
        assert_int_equal(s.kind, FETCH_ERROR_DEST);
        assert_non_null(strstr(s.message, "holds \"theirs\", which pinion did not publish"));
        assert_null(s.version_dir);
        struct stat st;
        assert_int_equal(stat(dest, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755); /* not even its mode changed */
        stage_done(&s);
        assert_int_equal(fs_rm_rf(d), 0);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_dest_foreign),
                cmocka_unit_test(test_prepare_and_publish),
                cmocka_unit_test(test_stop_refuse_and_remove),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
