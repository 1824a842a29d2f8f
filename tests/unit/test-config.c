/* SPDX-License-Identifier: MIT */
/* The config loader: files + drop-ins, FILE:LINE errors, table-driven typed parsers. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "../config-sample.h"
#include "config.h"
#include "log.h"


static char tmpdir[] = "/tmp/test-config-XXXXXX";

static void write_file(const char *name, const char *text) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(text, f);
        fclose(f);
}

static char *path_of(const char *name) {
        static char path[512];
        snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
        return path;
}

static int setup(void **state) {
        assert_non_null(mkdtemp(tmpdir));
        char d[512];
        snprintf(d, sizeof(d), "%s/conf.d", tmpdir);
        assert_int_equal(mkdir(d, 0755), 0);
        return 0;
}

static int teardown(void **state) {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
        return system(cmd) == 0 ? 0 : -1;
}

/* Loads text as a single file and parses [s] with the sample table. Returns the result code and
 * leaves the error message in *err. */
static int load_sample(const char *text, struct sample *out, char **err) {
        _cleanup_(config_freep) struct config *c = NULL;
        int r = config_load_string("test.conf", text, &c, err);
        if (r < 0)
                return r;
        r = config_parse_section(c, "s", sample_keys, out, err);
        if (r < 0)
                return r;
        return config_check_unclaimed(c, err);
}

static void test_defaults_and_values(void **state) {
        struct sample s = {};
        _cleanup_free_ char *err = NULL;

        assert_int_equal(load_sample("[s]\n", &s, &err), 0);
        assert_int_equal(s.timeout, 10 * USEC_PER_SEC);
        assert_int_equal(s.size, 64ULL << 20);
        assert_int_equal(s.percent, 90);
        assert_false(s.flag);
        assert_int_equal(s.number, -3);
        assert_true(s.ratio > 1.49 && s.ratio < 1.51);
        assert_string_equal(s.name, "default-name");
        assert_null(s.path);
        assert_null(s.list);
        assert_int_equal(s.mode, 0660);
        config_free_fields(sample_keys, &s);

        memset(&s, 0, sizeof(s));
        assert_int_equal(load_sample("# comment\n; other comment\n[s]\ntimeout = 1m30s\nsize=2G\npercent=5%\n"
                                     "flag=yes\nnumber=42\nratio=0\nname=web\npath=/var/lib/x\n"
                                     "list=a:1, b:2 c:3\nmode=0600\nurl=https://example.org/a?b=c;d#top\n",
                                     &s, &err),
                         0);
        assert_int_equal(s.timeout, 90 * USEC_PER_SEC);
        assert_int_equal(s.size, 2ULL << 30);
        assert_int_equal(s.percent, 5);
        assert_true(s.flag);
        assert_int_equal(s.number, 42);
        assert_string_equal(s.name, "web");
        assert_string_equal(s.path, "/var/lib/x");
        assert_int_equal(strv_length(s.list), 3);
        assert_string_equal(s.list[2], "c:3");
        assert_int_equal(s.mode, 0600);
        /* A ';' or '#' not after whitespace belongs to the value. */
        assert_string_equal(s.url, "https://example.org/a?b=c;d#top");
        config_free_fields(sample_keys, &s);
}

static void test_last_value_wins(void **state) {
        struct sample s = {};
        _cleanup_free_ char *err = NULL;

        assert_int_equal(load_sample("[s]\nname=first\n[s]\nname=second\n", &s, &err), 0);
        assert_string_equal(s.name, "second");
        config_free_fields(sample_keys, &s);
}

struct bad_case {
        const char *text;
        const char *expect; /* the whole error message */
};

static void test_bad_values_name_their_line(void **state) {
        static const struct bad_case cases[] = {
                { "[s]\ntimeout=soon\n", "test.conf:2: invalid value 'soon' for 'timeout' in [s]: expected a duration such as 800ms, 30s, 2m or 1h" },
                { "[s]\n\nsize=12Q\n", "test.conf:3: invalid value '12Q' for 'size' in [s]: expected a size such as 4096, 64K, 512M or 2G" },
                { "[s]\npercent=120%\n", "test.conf:2: invalid value '120%' for 'percent' in [s]: a percentage must be between 0% and 100%" },
                { "[s]\npercent=90\n", "test.conf:2: invalid value '90' for 'percent' in [s]: expected a percentage such as 90%" },
                { "[s]\nflag=maybe\n", "test.conf:2: invalid value 'maybe' for 'flag' in [s]: expected a boolean (yes/no, true/false, on/off, 1/0)" },
                { "[s]\nnumber=fast\n", "test.conf:2: invalid value 'fast' for 'number' in [s]: expected an integer" },
                { "[s]\nratio=-1\n", "test.conf:2: invalid value '-1' for 'ratio' in [s]: expected a non-negative number" },
                { "[s]\npath=var/lib\n", "test.conf:2: invalid value 'var/lib' for 'path' in [s]: expected an absolute path" },
                { "[s]\nmode=999\n", "test.conf:2: invalid value '999' for 'mode' in [s]: expected an octal file mode such as 0660" },
                { "[s]\nurl=ftp://x\n", "test.conf:2: invalid value 'ftp://x' for 'url' in [s]: expected an http:// or https:// URL" },
                { "[s]\nbogus=1\n", "test.conf:2: unknown key 'bogus' in section [s]" },
                { "[s]\n[other]\nx=1\n", "test.conf:2: unknown section [other]" },
                { "[s]\n[empty]\n", "test.conf:2: unknown section [empty]" },
                { "x=1\n[s]\n", "test.conf:1: key outside of any [section]" },
                { "[s]\nthis line has no equals sign\n", "test.conf:2: syntax error: expected \"[section]\", \"key=value\" or a comment" },
                { "[s]\n[broken\nname=x\n", "test.conf:2: syntax error: expected \"[section]\", \"key=value\" or a comment" },
#define INLINE_COMMENT "'#' or ';' after a blank or opening a value: an inline comment is not allowed, put it on its own line"
                { "[s]\npath=/system.slice/x.service   # the unit\n", "test.conf:2: " INLINE_COMMENT },
                { "[s]\n\nsize=64M ; page cache\n", "test.conf:3: " INLINE_COMMENT },
                { "[s]\nname=a\t;b\n", "test.conf:2: " INLINE_COMMENT },
                { "[s]\nname = # nothing\n", "test.conf:2: " INLINE_COMMENT },
                { "[s]\nname=;x\n", "test.conf:2: " INLINE_COMMENT },
                { "[s]\nbogus\nname=x #y\n", "test.conf:2: syntax error: expected \"[section]\", \"key=value\" or a comment" },
#undef INLINE_COMMENT
                { "[s]\ntimeout=99999999999999999999s\n", "test.conf:2: invalid value '99999999999999999999s' for 'timeout' in [s]: expected a duration such as 800ms, 30s, 2m or 1h" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                struct sample s = {};
                _cleanup_free_ char *err = NULL;
                int r = load_sample(cases[i].text, &s, &err);
                if (r != -EINVAL || !err || !streq(err, cases[i].expect))
                        fail_msg("case %zu: r=%d err=%s, expected %s", i, r, err ? err : "(null)", cases[i].expect);
                config_free_fields(sample_keys, &s);
        }
}

static void test_bad_value_keeps_old_field(void **state) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *err = NULL;
        struct sample s = {};

        assert_int_equal(config_load_string("t", "[s]\nname=good\nname=\n", &c, &err), 0);
        assert_int_equal(config_parse_section(c, "s", sample_keys, &s, &err), 0);
        assert_null(s.name); /* an empty value resets a string to unset */
        config_free_fields(sample_keys, &s);
}

static void test_long_line(void **state) {
        size_t n = 70000;
        char *text = malloc(n + 32);
        struct sample s = {};
        _cleanup_free_ char *err = NULL;

        assert_non_null(text);
        strcpy(text, "[s]\nname=");
        memset(text + 9, 'x', n);
        strcpy(text + 9 + n, "\n");
        assert_int_equal(load_sample(text, &s, &err), -EINVAL);
        assert_non_null(strstr(err, "test.conf:2: line too long"));
        config_free_fields(sample_keys, &s);
        free(text);

        /* Long but allowed: a 1000-character value is read whole, not split. */
        text = malloc(1100);
        strcpy(text, "[s]\nname=");
        memset(text + 9, 'y', 1000);
        strcpy(text + 1009, "\n");
        assert_int_equal(load_sample(text, &s, &err), 0);
        assert_int_equal(strlen(s.name), 1000);
        config_free_fields(sample_keys, &s);
        free(text);
}

static void test_dropins_in_lexical_order(void **state) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *err = NULL;
        struct sample s = {};
        char dropins[512];

        write_file("main.conf", "[s]\nname=main\nnumber=1\n");
        write_file("conf.d/20-b.conf", "[s]\nname=from-b\n");
        write_file("conf.d/10-a.conf", "[s]\nname=from-a\nnumber=2\n");
        write_file("conf.d/30-ignored.txt", "[s]\nname=not-a-conf-file\n");
        snprintf(dropins, sizeof(dropins), "%s/conf.d", tmpdir);

        assert_int_equal(config_load(path_of("main.conf"), dropins, &c, &err), 0);
        assert_int_equal(config_parse_section(c, "s", sample_keys, &s, &err), 0);
        assert_string_equal(s.name, "from-b");
        assert_int_equal(s.number, 2);
        config_free_fields(sample_keys, &s);
}

static void test_dropin_error_names_dropin(void **state) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *err = NULL, *expect = NULL;
        struct sample s = {};
        char dropins[512];

        write_file("main.conf", "[s]\nname=main\n");
        write_file("conf.d/10-a.conf", "# a comment\n[s]\n\nflag=perhaps\n");
        snprintf(dropins, sizeof(dropins), "%s/conf.d", tmpdir);
        assert_int_equal(config_load(path_of("main.conf"), dropins, &c, &err), 0);
        assert_int_equal(config_parse_section(c, "s", sample_keys, &s, &err), -EINVAL);
        assert_true(asprintf(&expect, "%s/conf.d/10-a.conf:4: ", tmpdir) > 0);
        assert_memory_equal(err, expect, strlen(expect));
        config_free_fields(sample_keys, &s);
        unlink(path_of("conf.d/10-a.conf"));
        unlink(path_of("conf.d/20-b.conf"));
        unlink(path_of("conf.d/30-ignored.txt"));
}

static void test_missing_file(void **state) {
        struct config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_load("/nonexistent/pinion.conf", NULL, &c, &err), -ENOENT);
        assert_null(c);
        assert_string_equal(err, "/nonexistent/pinion.conf: cannot read: No such file or directory");
}

struct named {
        char *name;
        char *url;
        unsigned keep;
};

static const struct config_key named_keys[] = {
        { "url", config_parse_url, offsetof(struct named, url), NULL, config_free_string },
        { "keep", config_parse_uint, offsetof(struct named, keep), "3" },
        {}
};

static const char *named_check(const void *object) {
        const struct named *n = object;
        return n->url ? NULL : "url is required";
}

static void test_repeated_sections(void **state) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *err = NULL;
        void **objects = NULL;
        size_t n = 0;

        assert_int_equal(config_load_string("t.conf",
                                            "[config.web]\nurl=http://a/m.json\n[config.db]\nurl=http://b/m.json\nkeep=1\n",
                                            &c, &err),
                         0);
        assert_int_equal(config_parse_instances(c, "config.", named_keys, sizeof(struct named), named_check, &objects,
                                                &n, &err),
                         0);
        assert_int_equal(n, 2);
        struct named *a = objects[0], *b = objects[1];
        assert_string_equal(a->name, "web");
        assert_int_equal(a->keep, 3);
        assert_string_equal(b->name, "db");
        assert_int_equal(b->keep, 1);
        config_instances_free(named_keys, objects, n);
        assert_int_equal(config_check_unclaimed(c, &err), 0);
        c = config_free(c);

        assert_int_equal(config_load_string("t.conf", "[config.web]\nkeep=2\n", &c, &err), 0);
        assert_int_equal(config_parse_instances(c, "config.", named_keys, sizeof(struct named), named_check, &objects,
                                                &n, &err),
                         -EINVAL);
        assert_string_equal(err, "t.conf:1: [config.web] url is required");
        c = config_free(c);

        assert_int_equal(config_load_string("t.conf", "\n[config.we/b]\nurl=http://x\n", &c, &err), 0);
        assert_int_equal(config_parse_instances(c, "config.", named_keys, sizeof(struct named), NULL, &objects, &n,
                                                &err),
                         -EINVAL);
        assert_non_null(strstr(err, "t.conf:2: [config.we/b] the name"));
}

struct observed {
        char sections[4][32];
        const struct config_key *tables[4];
        unsigned n;
};

static void record_table(const char *section, const struct config_key *table, void *userdata) {
        struct observed *o = userdata;
        assert_true(o->n < ELEMENTSOF(o->sections));
        snprintf(o->sections[o->n], sizeof(o->sections[0]), "%s", section);
        o->tables[o->n++] = table;
}

/* --list-config-keys relies on this: a plain section's table is reported even when the section
 * is absent, a repeated section's table once as <prefix>NAME even with no instance, and nothing
 * once the observer is off. */
static void test_table_observer(void **state) {
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *err = NULL;
        struct observed o = {};
        struct named plain = {};
        void **objects = NULL;
        size_t n = 0;

        assert_int_equal(config_load_string("t.conf", "", &c, &err), 0);
        config_set_table_observer(record_table, &o);
        assert_int_equal(config_parse_section(c, "plain", named_keys, &plain, &err), 0);
        assert_int_equal(config_parse_instances(c, "config.", named_keys, sizeof(struct named), named_check, &objects,
                                                &n, &err),
                         0);
        config_set_table_observer(NULL, NULL);
        assert_int_equal(n, 0);
        assert_int_equal(o.n, 2);
        assert_string_equal(o.sections[0], "plain");
        assert_string_equal(o.sections[1], "config.NAME");
        assert_ptr_equal(o.tables[0], named_keys);
        assert_ptr_equal(o.tables[1], named_keys);
        config_free_fields(named_keys, &plain);

        assert_int_equal(config_parse_section(c, "plain", named_keys, &plain, &err), 0);
        assert_int_equal(o.n, 2);
        config_free_fields(named_keys, &plain);
        config_instances_free(named_keys, objects, n);
}

static void test_parse_helpers(void **state) {
        usec_t u;
        uint64_t sz;
        unsigned p;
        bool b;

        assert_int_equal(parse_duration("800ms", &u), 0);
        assert_int_equal(u, 800 * USEC_PER_MSEC);
        assert_int_equal(parse_duration("2h", &u), 0);
        assert_int_equal(u, 2 * USEC_PER_HOUR);
        assert_int_equal(parse_duration("30", &u), 0);
        assert_int_equal(u, 30 * USEC_PER_SEC);
        assert_int_equal(parse_duration("1m 5s", &u), 0);
        assert_int_equal(u, 65 * USEC_PER_SEC);
        assert_int_equal(parse_duration("-1s", &u), -EINVAL);
        assert_int_equal(parse_duration("", &u), -EINVAL);
        assert_int_equal(parse_duration("5 parsecs", &u), -EINVAL);
        assert_int_equal(parse_size("4096", &sz), 0);
        assert_int_equal(sz, 4096);
        assert_int_equal(parse_size("1K", &sz), 0);
        assert_int_equal(sz, 1024);
        assert_int_equal(parse_size("3MiB", &sz), 0);
        assert_int_equal(sz, 3 << 20);
        assert_int_equal(parse_size("1T", &sz), 0);
        assert_int_equal(sz, 1ULL << 40);
        assert_int_equal(parse_size("99999999999999T", &sz), -ERANGE);
        assert_int_equal(parse_size("M", &sz), -EINVAL);
        assert_int_equal(parse_percent("0%", &p), 0);
        assert_int_equal(p, 0);
        assert_int_equal(parse_percent("101%", &p), -ERANGE);
        assert_int_equal(parse_bool("ON", &b), 0);
        assert_true(b);
        assert_int_equal(parse_bool("off", &b), 0);
        assert_false(b);
        assert_int_equal(parse_bool("2", &b), -EINVAL);
        assert_true(config_valid_instance_name("web-1.prod_a"));
        assert_false(config_valid_instance_name(""));
        assert_false(config_valid_instance_name("a b"));
}

static const char *color_name_at(size_t i) {
        static const char *const colors[] = { "red", "green", "" };
        return i < ELEMENTSOF(colors) ? colors[i] : NULL;
}

/* A key with choices takes exactly those words, and its error lists them from the same table. */
static void test_choices(void **state) {
        static const struct config_key keys[] = {
                { "color", config_parse_string, 0, "red", config_free_string, color_name_at },
                { "level", config_parse_string, sizeof(char *), NULL, config_free_string, log_level_name_at },
                {}
        };
        struct {
                char *color, *level;
        } o = {};
        _cleanup_(config_freep) struct config *c = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(config_load_string("t.conf", "[s]\ncolor=\nlevel=warn\n", &c, &err), 0);
        assert_int_equal(config_parse_section(c, "s", keys, &o, &err), 0);
        assert_null(o.color);
        assert_string_equal(o.level, "warn");
        config_free_fields(keys, &o);
        c = config_free(c);

        assert_int_equal(config_load_string("t.conf", "[s]\ncolor=blue\n", &c, &err), 0);
        assert_int_equal(config_parse_section(c, "s", keys, &o, &err), -EINVAL);
        assert_string_equal(err, "t.conf:2: invalid value 'blue' for 'color' in [s]: expected one of: red, green, or empty");
        config_free_fields(keys, &o);
        c = config_free(c);

        /* Every level log_level_from_string takes is listed, and nothing else. */
        assert_int_equal(config_load_string("t.conf", "[s]\nlevel=verbose\n", &c, &err), 0);
        assert_int_equal(config_parse_section(c, "s", keys, &o, &err), -EINVAL);
        assert_string_equal(err, "t.conf:2: invalid value 'verbose' for 'level' in [s]: expected one of: debug, info, "
                                 "notice, warning, warn, error, err, crit, alert, emerg");
        const char *name;
        size_t n = 0;
        for (size_t i = 0; (name = log_level_name_at(i)); i++, n++)
                assert_true(log_level_from_string(name) >= 0);
        assert_int_equal(n, 10);
        config_free_fields(keys, &o);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults_and_values),
                cmocka_unit_test(test_last_value_wins),
                cmocka_unit_test(test_bad_values_name_their_line),
                cmocka_unit_test(test_bad_value_keeps_old_field),
                cmocka_unit_test(test_long_line),
                cmocka_unit_test(test_dropins_in_lexical_order),
                cmocka_unit_test(test_dropin_error_names_dropin),
                cmocka_unit_test(test_missing_file),
                cmocka_unit_test(test_repeated_sections),
                cmocka_unit_test(test_table_observer),
                cmocka_unit_test(test_parse_helpers),
                cmocka_unit_test(test_choices),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
