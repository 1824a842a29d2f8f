/* SPDX-License-Identifier: MIT */
/* Logging: level/target names, %m from the error passed in, return values, text and JSON lines. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <regex.h>
#include <stdio.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "log.h"

static char buf[8192];
static FILE *saved;

static void capture_begin(void) {
        memset(buf, 0, sizeof(buf));
        saved = stderr;
        stderr = fmemopen(buf, sizeof(buf) - 1, "w");
        assert_non_null(stderr);
}

static void capture_end(void) {
        fclose(stderr);
        stderr = saved;
}

/* Removes the ISO 8601 stamp ("2026-12-02T14:20:01.123Z ") that must begin every line of buf. */
static void strip_timestamps(void) {
        regex_t rx;
        regmatch_t m;
        char out[sizeof(buf)] = "";

        assert_int_equal(regcomp(&rx, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z ",
                                 REG_EXTENDED), 0);
        for (char *line = buf, *nl; *line; line = nl + 1) {
                nl = strchr(line, '\n');
                assert_non_null(nl);
                *nl = '\0';
                assert_int_equal(regexec(&rx, line, 1, &m, 0), 0);
                strcat(out, line + m.rm_eo);
                strcat(out, "\n");
        }
        regfree(&rx);
        strcpy(buf, out);
}

static void test_names(void **state) {
        assert_int_equal(log_level_from_string("debug"), LOG_DEBUG);
        assert_int_equal(log_level_from_string("warning"), LOG_WARNING);
        assert_int_equal(log_level_from_string("warn"), LOG_WARNING);
        assert_int_equal(log_level_from_string("error"), LOG_ERR);
        assert_int_equal(log_level_from_string("loud"), -EINVAL);
        assert_string_equal(log_level_to_string(LOG_INFO), "info");
        assert_int_equal(log_target_from_string("json"), LOG_TARGET_JSON);
        assert_int_equal(log_target_from_string("syslog"), -EINVAL);
        assert_string_equal(log_target_to_string(LOG_TARGET_JOURNAL), "journal");
}

static void test_errno_and_return(void **state) {
        log_setup(LOG_INFO, LOG_TARGET_TEXT);
        capture_begin();
        errno = EPERM;
        int r = log_error_errno(-ENOENT, "Failed to open %s: %m", "/x");
        int saved_errno = errno;
        int r2 = log_debug_errno(EACCES, "filtered out: %m"); /* below max level: not printed */
        log_info("plain %d", 7);
        capture_end();

        assert_int_equal(r, -ENOENT);
        assert_int_equal(r2, -EACCES);
        assert_int_equal(saved_errno, EPERM); /* logging does not clobber errno */
        strip_timestamps();
        assert_string_equal(buf, "error: Failed to open /x: No such file or directory\ninfo: plain 7\n");
}

static void test_auto_without_journal_is_text(void **state) {
        unsetenv("JOURNAL_STREAM");
        log_setup(LOG_DEBUG, LOG_TARGET_AUTO);
        assert_int_equal(log_get_target(), LOG_TARGET_TEXT);
        setenv("JOURNAL_STREAM", "1:1", 1); /* not our stderr's device/inode */
        log_setup(LOG_DEBUG, LOG_TARGET_AUTO);
        assert_int_equal(log_get_target(), LOG_TARGET_TEXT);
        unsetenv("JOURNAL_STREAM");
}

static void test_json_lines(void **state) {
        const struct log_ctx ctx = { .module = "zkreg", .pod_uid = "u-1", .pod = "default/web" };

        log_setup(LOG_INFO, LOG_TARGET_JSON);
        capture_begin();
        (void) log_ctx_full_errno(&ctx, LOG_WARNING, -ECONNREFUSED, "session lost: %m, \"quoted\"");
        capture_end();
        log_setup(LOG_INFO, LOG_TARGET_TEXT);

        assert_non_null(strchr(buf, '\n'));
        cJSON *o = cJSON_Parse(buf);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "level")->valuestring, "warning");
        assert_string_equal(cJSON_GetObjectItem(o, "msg")->valuestring, "session lost: Connection refused, \"quoted\"");
        assert_string_equal(cJSON_GetObjectItem(o, "module")->valuestring, "zkreg");
        assert_string_equal(cJSON_GetObjectItem(o, "pod_uid")->valuestring, "u-1");
        assert_string_equal(cJSON_GetObjectItem(o, "pod")->valuestring, "default/web");
        assert_int_equal(cJSON_GetObjectItem(o, "errno")->valueint, ECONNREFUSED);
        assert_non_null(cJSON_GetObjectItem(o, "time"));
        cJSON_Delete(o);
}

static void test_json_config_field(void **state) {
        const struct log_ctx ctx = { .module = "configsync", .config = "app" };

        log_setup(LOG_INFO, LOG_TARGET_JSON);
        capture_begin();
        (void) log_ctx_full_errno(&ctx, LOG_INFO, 0, "config app: on-change stdout: %s", "reloaded");
        capture_end();
        log_setup(LOG_INFO, LOG_TARGET_TEXT);

        cJSON *o = cJSON_Parse(buf);
        assert_non_null(o);
        assert_string_equal(cJSON_GetObjectItem(o, "module")->valuestring, "configsync");
        assert_string_equal(cJSON_GetObjectItem(o, "config")->valuestring, "app");
        assert_null(cJSON_GetObjectItem(o, "pod"));
        cJSON_Delete(o);
}

static void test_module_text(void **state) {
        log_setup(LOG_INFO, LOG_TARGET_TEXT);
        capture_begin();
        log_module_info("podnet", "wired %s", "eth0");
        capture_end();
        strip_timestamps();
        assert_string_equal(buf, "info: [podnet] wired eth0\n");
}

/* Text into the journal (JOURNAL_STREAM names our stderr) leaves the time to the journal. */
static void test_text_into_the_journal_has_no_timestamp(void **state) {
        struct stat st;
        char stream[64];

        assert_int_equal(fstat(STDERR_FILENO, &st), 0);
        snprintf(stream, sizeof(stream), "%llu:%llu", (unsigned long long) st.st_dev, (unsigned long long) st.st_ino);
        setenv("JOURNAL_STREAM", stream, 1);
        log_setup(LOG_INFO, LOG_TARGET_TEXT);
        capture_begin();
        log_module_info("podnet", "wired %s", "eth0");
        capture_end();
        unsetenv("JOURNAL_STREAM");
        log_setup(LOG_INFO, LOG_TARGET_TEXT);
        assert_string_equal(buf, "info: [podnet] wired eth0\n");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),
                cmocka_unit_test(test_errno_and_return),
                cmocka_unit_test(test_auto_without_journal_is_text),
                cmocka_unit_test(test_json_lines),
                cmocka_unit_test(test_json_config_field),
                cmocka_unit_test(test_module_text),
                cmocka_unit_test(test_text_into_the_journal_has_no_timestamp),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
