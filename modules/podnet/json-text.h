/* SPDX-License-Identifier: MIT */
#pragma once

/* JSON as text, for the CNI plugin: a checking scanner that finds one member of an object
 * (its value's place in the text, no tree) and a writer of strings. pinion-cni is one static
 * binary so that it runs on any node it is copied to, and Debian ships cJSON only as a shared
 * library; so the plugin reads the few strings it needs from the network config (cniVersion,
 * name, type, socket) and the agent's answer with this, and leaves everything else to the
 * agent, which parses the config with cJSON. Anything this accepts, cJSON parses to the same members
 * (tests/fuzz/fuzz-podnet-json-text.c checks that); it is stricter than cJSON (RFC 8259: no
 * leading zeros, no trailing text, no control characters outside strings, at most 128 levels). */

#include <stdbool.h>
#include <stddef.h>

enum json_text_type {
        JSON_TEXT_OBJECT,
        JSON_TEXT_ARRAY,
        JSON_TEXT_STRING,
        JSON_TEXT_NUMBER,
        JSON_TEXT_TRUE,
        JSON_TEXT_FALSE,
        JSON_TEXT_NULL,
};

/* A value's place in the text it was found in (a string's quotes included). */
struct json_text_value {
        enum json_text_type type;
        const char *start;
        size_t size;
};

/* Checks that text[0, size) is one JSON object (whitespace around it allowed) and finds its first
 * member named key (the first, as cJSON's lookup does). Returns 1 with *ret set, 0 if there is no
 * such member, -EBADMSG if the text is not one JSON object. key NULL: only the check. */
int json_text_object_member(const char *text, size_t size, const char *key, struct json_text_value *ret);

/* The string value v decoded to UTF-8, NUL-terminated: -EBADMSG if v is no string or holds
 * \u0000, -ENOMEM. */
int json_text_string(const struct json_text_value *v, char **ret);

/* json_text_object_member() and json_text_string() in one: 1 with *ret set, 0 if there is no
 * such member, -EBADMSG if the text is not one JSON object or the member is no string (or holds
 * \u0000), -ENOMEM. */
int json_text_member_string(const char *text, size_t size, const char *key, char **ret);

/* The number value v as an integer in [-2^31, 2^31): -EBADMSG if v is none. */
int json_text_int(const struct json_text_value *v, int *ret);

/* Text being written; a failed allocation is remembered and reported by json_text_buf_take(). */
struct json_text_buf {
        char *data;
        size_t size, cap;
        bool oom;
};
void json_text_put_raw(struct json_text_buf *b, const char *s, size_t n);
void json_text_put(struct json_text_buf *b, const char *s);
/* s as a JSON string: quoted, '"', '\' and control characters escaped, other bytes as they are. */
void json_text_put_string(struct json_text_buf *b, const char *s);
/* The text written (NUL-terminated; *ret owned by the caller), or -ENOMEM (the buffer freed). */
int json_text_buf_take(struct json_text_buf *b, char **ret);
