/* SPDX-License-Identifier: MIT */
#pragma once

/* The one way to name an enum's values: a table NAME_table[] indexed by the enum, and
 *
 *   DEFINE_STRING_TABLE_LOOKUP(name, type)   const char *name_to_string(type);  NULL if out of range
 *                                            type name_from_string(const char *); -EINVAL if unknown
 *   DEFINE_STRING_TABLE_LOOKUP_TO_STRING / _FROM_STRING   one of the two
 *   DEFINE_STRING_TABLE_NAME_AT(name)        const char *name_name_at(size_t i); the i-th name,
 *                                            NULL after the last (a config_choice_fn, config.h)
 *
 * The table's size is the enum's _X_MAX (declare it as `static const char *const
 * name_table[_X_MAX] = { [X_A] = "a", ... }`): a value added to the enum without a name is a
 * NULL entry, which to_string returns and from_string skips. */

#include <errno.h>
#include <stddef.h>

#include "macro.h"

#define DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type)                       \
        const char *name##_to_string(type i) {                                 \
                if ((size_t) i >= ELEMENTSOF(name##_table))                    \
                        return NULL;                                           \
                return name##_table[i];                                        \
        }

#define DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type)                     \
        type name##_from_string(const char *s) {                               \
                if (!s)                                                        \
                        return (type) -EINVAL;                                 \
                for (size_t i = 0; i < ELEMENTSOF(name##_table); i++)          \
                        if (name##_table[i] && streq(name##_table[i], s))      \
                                return (type) i;                               \
                return (type) -EINVAL;                                         \
        }

#define DEFINE_STRING_TABLE_LOOKUP(name, type)                                 \
        DEFINE_STRING_TABLE_LOOKUP_TO_STRING(name, type)                       \
        DEFINE_STRING_TABLE_LOOKUP_FROM_STRING(name, type)

#define DEFINE_STRING_TABLE_NAME_AT(name)                                      \
        const char *name##_name_at(size_t i) {                                 \
                for (size_t j = 0; j < ELEMENTSOF(name##_table); j++)          \
                        if (name##_table[j] && i-- == 0)                       \
                                return name##_table[j];                        \
                return NULL;                                                   \
        }
