/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "strv.h"

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **s = l; *s; s++)
                free(*s);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        while (l && l[n])
                n++;
        return n;
}

int strv_push(char ***l, char *value) {
        size_t n = strv_length(*l);
        char **grown = realloc(*l, (n + 2) * sizeof(char *));
        if (!grown) {
                free(value);
                return -ENOMEM;
        }
        grown[n] = value;
        grown[n + 1] = NULL;
        *l = grown;
        return 0;
}

int strv_extend(char ***l, const char *value) {
        char *copy = strdup(value);
        if (!copy)
                return -ENOMEM;
        return strv_push(l, copy);
}

bool strv_contains(char *const *l, const char *s) {
        STRV_FOREACH(i, l)
                if (streq(*i, s))
                        return true;
        return false;
}

bool strv_equal(char *const *a, char *const *b) {
        size_t n = strv_length(a);
        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

int strv_copy(char *const *l, char ***ret) {
        char **copy = NULL;
        if (!l) {
                *ret = NULL;
                return 0;
        }
        copy = calloc(1, sizeof(char *));
        if (!copy)
                return -ENOMEM;
        STRV_FOREACH(s, l)
                if (strv_extend(&copy, *s) < 0) {
                        strv_free(copy);
                        return -ENOMEM;
                }
        *ret = copy;
        return 0;
}

int strv_split(const char *s, const char *separators, char ***ret) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        if (!l)
                return -ENOMEM;
        while (*s) {
                size_t skip = strspn(s, separators);
                s += skip;
                size_t len = strcspn(s, separators);
                if (len == 0)
                        break;
                char *part = strndup(s, len);
                if (!part || strv_push(&l, part) < 0)
                        return -ENOMEM;
                s += len;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

char *strv_join(char *const *l, const char *sep) {
        size_t total = 1, seplen = strlen(sep);
        STRV_FOREACH(s, l)
                total += strlen(*s) + seplen;
        char *out = malloc(total), *p = out;
        if (!out)
                return NULL;
        *p = 0;
        STRV_FOREACH(s, l) {
                if (s != l)
                        p = stpcpy(p, sep);
                p = stpcpy(p, *s);
        }
        return out;
}
