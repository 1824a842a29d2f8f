/* SPDX-License-Identifier: MIT */
#pragma once

/* NULL-terminated arrays of owned strings ("string vectors"). */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

char **strv_free(char **l);
size_t strv_length(char *const *l);
/* Appends value, taking ownership of it (freed on failure too). -ENOMEM on failure. */
int strv_push(char ***l, char *value);
/* Appends a copy of value. */
int strv_extend(char ***l, const char *value);
bool strv_contains(char *const *l, const char *s);
bool strv_equal(char *const *a, char *const *b);
/* Deep copy; NULL stays NULL. -ENOMEM on failure. */
int strv_copy(char *const *l, char ***ret);
/* Splits on any of the separator characters, dropping empty parts. */
int strv_split(const char *s, const char *separators, char ***ret);
/* Joins with sep; an empty/NULL list gives "". */
char *strv_join(char *const *l, const char *sep);

DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

#define STRV_FOREACH(s, l) for (char *const *s = (l); s && *s; s++)
