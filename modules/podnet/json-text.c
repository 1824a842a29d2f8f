/* SPDX-License-Identifier: MIT */
/* JSON as text: a checking scanner and a string writer. See json-text.h. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json-text.h"
#include "macro.h"

#define MAX_DEPTH 128

struct scanner {
        const char *p, *end;
        unsigned depth;
};

static void skip_space(struct scanner *s) {
        while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
                s->p++;
}

/* Reads the 4 hex digits of a \u escape at p (p + 4 <= end checked by the caller). */
static int hex4(const char *p) {
        int v = 0;
        for (int i = 0; i < 4; i++) {
                int d = unhexchar(p[i]);
                if (d < 0)
                        return -1;
                v = v * 16 + d;
        }
        return v;
}

/* One \uXXXX escape at p (after the backslash and 'u'), with its low surrogate if it is a high
 * one: the code point, and *ret_len the characters read. A lone or reversed surrogate is an
 * error, as for cJSON. */
static int32_t unicode_escape(const char *p, const char *end, size_t *ret_len) {
        int hi, lo;

        if (end - p < 4 || (hi = hex4(p)) < 0)
                return -1;
        if (hi >= 0xDC00 && hi <= 0xDFFF)
                return -1;
        if (hi < 0xD800 || hi > 0xDBFF) {
                *ret_len = 4;
                return hi;
        }
        if (end - p < 10 || p[4] != '\\' || p[5] != 'u' || (lo = hex4(p + 6)) < 0 || lo < 0xDC00 || lo > 0xDFFF)
                return -1;
        *ret_len = 10;
        return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
}

static int scan_string(struct scanner *s) {
        s->p++; /* the opening quote */
        while (s->p < s->end) {
                unsigned char c = (unsigned char) *s->p++;
                if (c == '"')
                        return 0;
                if (c < 0x20)
                        return -EBADMSG;
                if (c != '\\')
                        continue;
                if (s->p >= s->end)
                        return -EBADMSG;
                c = (unsigned char) *s->p++;
                if (c == 'u') {
                        size_t n;
                        if (unicode_escape(s->p, s->end, &n) < 0)
                                return -EBADMSG;
                        s->p += n;
                } else if (!memchr("\"\\/bfnrt", c, 8))
                        return -EBADMSG;
        }
        return -EBADMSG;
}

static size_t skip_digits(struct scanner *s) {
        const char *from = s->p;
        while (s->p < s->end && *s->p >= '0' && *s->p <= '9')
                s->p++;
        return (size_t) (s->p - from);
}

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int scan_number(struct scanner *s) {
        if (s->p < s->end && *s->p == '-')
                s->p++;
        if (s->p < s->end && *s->p == '0')
                s->p++;
        else if (skip_digits(s) == 0)
                return -EBADMSG;
        if (s->p < s->end && *s->p == '.') {
                s->p++;
                if (skip_digits(s) == 0)
                        return -EBADMSG;
        }
        if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
                s->p++;
                if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
                        s->p++;
                if (skip_digits(s) == 0)
                        return -EBADMSG;
        }
        return 0;
}

static int scan_literal(struct scanner *s, const char *word) {
        size_t n = strlen(word);
        if ((size_t) (s->end - s->p) < n || memcmp(s->p, word, n) != 0)
                return -EBADMSG;
        s->p += n;
        return 0;
}

/* Decodes the string token [start, end) (quotes included, already scanned) into out, which has
 * room for end - start bytes (decoding never grows a string). Returns the decoded length. */
static size_t decode_string(const char *start, const char *end, char *out) {
        const char *p = start + 1;
        char *o = out;

        end--; /* the closing quote */
        while (p < end) {
                if (*p != '\\') {
                        *o++ = *p++;
                        continue;
                }
                p++;
                switch (*p++) {
                case 'b': *o++ = '\b'; break;
                case 'f': *o++ = '\f'; break;
                case 'n': *o++ = '\n'; break;
                case 'r': *o++ = '\r'; break;
                case 't': *o++ = '\t'; break;
                case 'u': {
                        size_t n = 0;
                        uint32_t cp = (uint32_t) unicode_escape(p, end, &n);
                        p += n;
                        if (cp < 0x80)
                                *o++ = (char) cp;
                        else if (cp < 0x800) {
                                *o++ = (char) (0xC0 | (cp >> 6));
                                *o++ = (char) (0x80 | (cp & 0x3F));
                        } else if (cp < 0x10000) {
                                *o++ = (char) (0xE0 | (cp >> 12));
                                *o++ = (char) (0x80 | ((cp >> 6) & 0x3F));
                                *o++ = (char) (0x80 | (cp & 0x3F));
                        } else {
                                *o++ = (char) (0xF0 | (cp >> 18));
                                *o++ = (char) (0x80 | ((cp >> 12) & 0x3F));
                                *o++ = (char) (0x80 | ((cp >> 6) & 0x3F));
                                *o++ = (char) (0x80 | (cp & 0x3F));
                        }
                        break;
                }
                default: *o++ = p[-1]; break; /* '"', '\\', '/' */
                }
        }
        return (size_t) (o - out);
}

/* Whether the key token [start, end) names key, compared as cJSON does (up to a NUL). */
static int key_matches(const char *start, const char *end, const char *key, bool *ret) {
        char *d = malloc((size_t) (end - start));
        size_t n;

        if (!d)
                return -ENOMEM;
        n = decode_string(start, end, d);
        d[n] = '\0';
        *ret = strcmp(d, key) == 0;
        free(d);
        return 0;
}

struct wanted {
        const char *key;               /* NULL: none */
        struct json_text_value *found; /* set at the first match */
        bool matched;
};

static int scan_value(struct scanner *s, struct json_text_value *ret, struct wanted *w);

static int scan_container(struct scanner *s, bool object, struct wanted *w) {
        char close = object ? '}' : ']';
        bool top = w != NULL;

        if (++s->depth > MAX_DEPTH)
                return -EBADMSG;
        s->p++; /* the opening bracket */
        skip_space(s);
        if (s->p < s->end && *s->p == close) {
                s->p++;
                s->depth--;
                return 0;
        }
        for (;;) {
                struct json_text_value v;
                bool match = false;
                int r;

                if (object) {
                        const char *key = s->p;
                        if (s->p >= s->end || *s->p != '"' || scan_string(s) < 0)
                                return -EBADMSG;
                        if (top && w->key && !w->matched) {
                                r = key_matches(key, s->p, w->key, &match);
                                if (r < 0)
                                        return r;
                        }
                        skip_space(s);
                        if (s->p >= s->end || *s->p++ != ':')
                                return -EBADMSG;
                        skip_space(s);
                }
                r = scan_value(s, &v, NULL);
                if (r < 0)
                        return r;
                if (match) {
                        w->matched = true;
                        if (w->found)
                                *w->found = v;
                }
                skip_space(s);
                if (s->p >= s->end)
                        return -EBADMSG;
                if (*s->p == close) {
                        s->p++;
                        s->depth--;
                        return 0;
                }
                if (*s->p++ != ',')
                        return -EBADMSG;
                skip_space(s);
        }
}

/* Scans the value at s->p (no leading space); w: the members to look for if it is the top-level
 * object. */
static int scan_value(struct scanner *s, struct json_text_value *ret, struct wanted *w) {
        const char *start = s->p;
        int r;

        if (s->p >= s->end)
                return -EBADMSG;
        switch (*s->p) {
        case '{': ret->type = JSON_TEXT_OBJECT; r = scan_container(s, true, w); break;
        case '[': ret->type = JSON_TEXT_ARRAY; r = scan_container(s, false, NULL); break;
        case '"': ret->type = JSON_TEXT_STRING; r = scan_string(s); break;
        case 't': ret->type = JSON_TEXT_TRUE; r = scan_literal(s, "true"); break;
        case 'f': ret->type = JSON_TEXT_FALSE; r = scan_literal(s, "false"); break;
        case 'n': ret->type = JSON_TEXT_NULL; r = scan_literal(s, "null"); break;
        default: ret->type = JSON_TEXT_NUMBER; r = scan_number(s); break;
        }
        if (r < 0)
                return r;
        ret->start = start;
        ret->size = (size_t) (s->p - start);
        return 0;
}

int json_text_object_member(const char *text, size_t size, const char *key, struct json_text_value *ret) {
        struct scanner s = { .p = text, .end = text + size };
        struct wanted w = { .key = key, .found = ret };
        struct json_text_value top;
        int r;

        if (!text)
                return -EBADMSG;
        skip_space(&s);
        if (s.p >= s.end || *s.p != '{')
                return -EBADMSG;
        r = scan_value(&s, &top, &w);
        if (r < 0)
                return r;
        skip_space(&s);
        if (s.p != s.end)
                return -EBADMSG;
        return w.matched ? 1 : 0;
}

int json_text_string(const struct json_text_value *v, char **ret) {
        char *d;
        size_t n;

        if (!v || v->type != JSON_TEXT_STRING || v->size < 2)
                return -EBADMSG;
        d = malloc(v->size);
        if (!d)
                return -ENOMEM;
        n = decode_string(v->start, v->start + v->size, d);
        if (memchr(d, '\0', n)) {
                free(d);
                return -EBADMSG;
        }
        d[n] = '\0';
        *ret = d;
        return 0;
}

int json_text_member_string(const char *text, size_t size, const char *key, char **ret) {
        struct json_text_value v;
        int r = json_text_object_member(text, size, key, &v);
        if (r <= 0)
                return r;
        r = json_text_string(&v, ret);
        return r < 0 ? r : 1;
}

int json_text_int(const struct json_text_value *v, int *ret) {
        long long n = 0;
        size_t i = 0;
        bool negative;

        if (!v || v->type != JSON_TEXT_NUMBER || v->size == 0)
                return -EBADMSG;
        negative = v->start[0] == '-';
        i = negative ? 1 : 0;
        if (i == v->size || v->size - i > 10)
                return -EBADMSG;
        for (; i < v->size; i++) {
                if (v->start[i] < '0' || v->start[i] > '9')
                        return -EBADMSG; /* a fraction or an exponent */
                n = n * 10 + (v->start[i] - '0');
        }
        n = negative ? -n : n;
        if (n < INT32_MIN || n > INT32_MAX)
                return -EBADMSG;
        *ret = (int) n;
        return 0;
}

void json_text_put_raw(struct json_text_buf *b, const char *s, size_t n) {
        if (b->oom)
                return;
        if (b->size + n + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 256;
                while (cap < b->size + n + 1)
                        cap *= 2;
                char *grown = realloc(b->data, cap);
                if (!grown) {
                        b->oom = true;
                        return;
                }
                b->data = grown;
                b->cap = cap;
        }
        memcpy(b->data + b->size, s, n);
        b->size += n;
        b->data[b->size] = '\0';
}

void json_text_put(struct json_text_buf *b, const char *s) {
        json_text_put_raw(b, s, strlen(s));
}

void json_text_put_string(struct json_text_buf *b, const char *s) {
        static const char hex[] = "0123456789abcdef";
        const char *run = s;

        json_text_put_raw(b, "\"", 1);
        for (const char *p = s;; p++) {
                unsigned char c = (unsigned char) *p;
                char esc[7];
                size_t n = 0;

                if (c != 0 && c != '"' && c != '\\' && c >= 0x20)
                        continue;
                json_text_put_raw(b, run, (size_t) (p - run));
                if (c == 0)
                        break;
                esc[n++] = '\\';
                switch (c) {
                case '"': esc[n++] = '"'; break;
                case '\\': esc[n++] = '\\'; break;
                case '\b': esc[n++] = 'b'; break;
                case '\f': esc[n++] = 'f'; break;
                case '\n': esc[n++] = 'n'; break;
                case '\r': esc[n++] = 'r'; break;
                case '\t': esc[n++] = 't'; break;
                default:
                        memcpy(esc + n, "u00", 3);
                        n += 3;
                        esc[n++] = hex[c >> 4];
                        esc[n++] = hex[c & 0xF];
                        break;
                }
                json_text_put_raw(b, esc, n);
                run = p + 1;
        }
        json_text_put_raw(b, "\"", 1);
}

int json_text_buf_take(struct json_text_buf *b, char **ret) {
        if (b->oom || !b->data) {
                free(b->data);
                *b = (struct json_text_buf) {};
                return -ENOMEM;
        }
        *ret = b->data;
        *b = (struct json_text_buf) {};
        return 0;
}
