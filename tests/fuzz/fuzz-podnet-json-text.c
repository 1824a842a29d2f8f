/* SPDX-License-Identifier: MIT */
/* Fuzzes json-text (the plugin's JSON scanner) against cJSON (the agent's parser): whatever the
 * scanner takes as an object, cJSON parses to an object with the same members, of the same types
 * and, for strings and integers, the same values; a string written by json_text_put_string()
 * reads back as itself. A difference aborts. */

#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "fuzz.h"
#include "json-text.h"

static const char *const keys[] = { "cniVersion", "socket", "name", "type", "result", "cni", "code", "msg", "a", "" };

static bool same_type(const cJSON *c, enum json_text_type t) {
        switch (t) {
        case JSON_TEXT_OBJECT: return cJSON_IsObject(c);
        case JSON_TEXT_ARRAY: return cJSON_IsArray(c);
        case JSON_TEXT_STRING: return cJSON_IsString(c);
        case JSON_TEXT_NUMBER: return cJSON_IsNumber(c);
        case JSON_TEXT_TRUE: return cJSON_IsTrue(c);
        case JSON_TEXT_FALSE: return cJSON_IsFalse(c);
        case JSON_TEXT_NULL: return cJSON_IsNull(c);
        }
        return false;
}

static void check_member(const char *text, size_t size, const cJSON *root, const char *key) {
        struct json_text_value v;
        int r = json_text_object_member(text, size, key, &v);
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(root, key);
        char *s = NULL;
        int n;

        if (r < 0 || (r > 0) != (c != NULL))
                abort();
        if (r == 0)
                return;
        if (!same_type(c, v.type))
                abort();
        if (json_text_string(&v, &s) >= 0 && strcmp(s, c->valuestring) != 0)
                abort();
        free(s);
        if (json_text_int(&v, &n) >= 0 && (double) n != c->valuedouble)
                abort();
        if (v.type == JSON_TEXT_OBJECT && json_text_object_member(v.start, v.size, NULL, NULL) != 0)
                abort(); /* a member object is an object on its own too */
}

static void check_roundtrip(const char *s) {
        struct json_text_buf b = {};
        struct json_text_value v;
        char *text = NULL, *back = NULL;

        json_text_put(&b, "{\"k\":");
        json_text_put_string(&b, s);
        json_text_put(&b, "}");
        if (json_text_buf_take(&b, &text) < 0)
                return;
        if (json_text_object_member(text, strlen(text), "k", &v) != 1 || json_text_string(&v, &back) < 0 ||
            strcmp(back, s) != 0)
                abort();
        free(back);
        free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *) data;
        char *copy;
        cJSON *root;

        /* cJSON reads a \u0000 escape into a key as its end, json-text as a character. */
        if (memchr(data, '\0', size) || memmem(data, size, "u0000", 5))
                return 0;
        copy = strndup(text, size);
        if (!copy)
                return 0;
        check_roundtrip(copy);
        if (json_text_object_member(text, size, NULL, NULL) >= 0) {
                root = cJSON_ParseWithLength(text, size);
                if (!cJSON_IsObject(root))
                        abort();
                for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
                        check_member(text, size, root, keys[i]);
                cJSON_Delete(root);
        }
        free(copy);
        return 0;
}
