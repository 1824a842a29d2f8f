/* SPDX-License-Identifier: MIT */
#pragma once

/* The configuration: an INI file (read by inih) plus conf.d/ drop-ins in lexical order, kept
 * as a list of entries that remember FILE:LINE. Sections are parsed by tables of
 * {key, parser, offset, default} rows (nginx ngx_command_t style): each owner of a section
 * (the manager for [agent], each module for its own) applies its table, and whatever no
 * table claimed is reported as unknown. Every error is "FILE:LINE: reason". */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"
#include "parse.h"
#include "strv.h"

#define EXIT_CONFIG 78 /* EX_CONFIG from sysexits.h */

struct config_entry {
        char *file;
        unsigned line;
        char *section;
        char *key;
        char *value;
        bool claimed;
};

struct config_section {
        char *name;
        char *file; /* where the section header first appeared */
        unsigned line;
        bool claimed;
};

struct config {
        char *main_file;
        struct config_entry *entries;
        size_t n_entries;
        struct config_section *sections;
        size_t n_sections;
        unsigned n_files; /* files read: the main one and its drop-ins */
};

/* Where a value came from, handed to parsers so errors can name it. */
struct config_where {
        const char *file;
        unsigned line;
        const char *section;
        const char *key;
};

/* A parser converts text into *ret (a field inside the owner's struct). It writes *ret only on
 * success; on failure it returns negative errno and sets *ret_reason to a static message. */
typedef int (*config_parser_t)(const char *value, void *ret, const char **ret_reason);

/* For a key that takes one of a set of words: the i-th accepted spelling, NULL after the last;
 * "" stands for the empty value. Such a key accepts exactly these (checked before its parser
 * runs), and its error lists them, so the message cannot drift from what parses: the function
 * reads the same table the key's parser looks the word up in. */
typedef const char *(*config_choice_fn)(size_t i);

struct config_key {
        const char *key;
        config_parser_t parse;
        size_t offset;
        const char *default_value; /* NULL: leave the field as it is (zeroed) */
        void (*free_field)(void *field); /* releases an owned field; NULL for plain values */
        config_choice_fn choices; /* NULL: any value the parser takes */
        /* The value names a file the parser checks (config_parse_file): a problem reads
         * "FILE:LINE: key value: reason", about the file rather than the value. */
        bool names_file;
};

/* Loads main_file (must exist) and, if dropin_dir is non-NULL and exists, every *.conf in it in
 * lexical order. Later entries override earlier ones for the same section and key. */
int config_load(const char *main_file, const char *dropin_dir, struct config **ret, char **ret_error);
/* Loads from a string, for the embedded demo config and for tests; name appears in errors. */
int config_load_string(const char *name, const char *text, struct config **ret, char **ret_error);
struct config *config_free(struct config *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(struct config *, config_free);

bool config_has_section(const struct config *c, const char *section);
/* The raw value of section/key (the last one wins), NULL if not set or empty. For a module that
 * must know whether another section configures something, without parsing that section. */
const char *config_value(const struct config *c, const char *section, const char *key);
/* Where section/key was set (the last one wins): -ENOENT if it was not, then *ret_file is the
 * main file and *ret_line 0, so that an error about a default still names a file. */
int config_key_where(const struct config *c, const char *section, const char *key, const char **ret_file,
                     unsigned *ret_line);

/* Sets every table field to its default, then applies the section's entries (last one wins),
 * marking them claimed. Unknown keys in the section are errors. The section need not exist. */
int config_parse_section(struct config *c, const char *section, const struct config_key *table,
                         void *object, char **ret_error);
/* For `piniond --list-config-keys`: while an observer is set, config_parse_section() reports
 * every table it applies, and config_parse_instances() reports its table once as
 * "<prefix>NAME" (whether or not such sections exist), so the listing comes from the very
 * tables the modules parse with. NULL turns it off. */
typedef void (*config_table_observer_t)(const char *section, const struct config_key *table, void *userdata);
void config_set_table_observer(config_table_observer_t observer, void *userdata);
/* Frees owned fields of an object parsed with table. */
void config_free_fields(const struct config_key *table, void *object);
/* Allocates a zeroed object of `size`, parses the section into it; free it with
 * config_object_free(table, object). */
int config_parse_section_new(struct config *c, const char *section, const struct config_key *table,
                             size_t size, void **ret, char **ret_error);
void *config_object_free(const struct config_key *table, void *object);
/* "FILE:LINE: [section] reason" for problems that concern a section as a whole. */
int config_section_error(const struct config *c, const char *section, char **ret_error,
                         const char *format, ...) _printf_(4, 5);
/* Repeated sections: parses every [<prefix>NAME] with table into an object of `size` bytes whose
 * FIRST member is `char *name` (set to NAME). check (optional) returns a problem or NULL.
 * *ret_objects is an array of *ret_n objects; free it with config_instances_free(). */
typedef const char *(*config_check_fn)(const void *object);
int config_parse_instances(struct config *c, const char *prefix, const struct config_key *table,
                           size_t size, config_check_fn check, void ***ret_objects, size_t *ret_n,
                           char **ret_error);
void config_instances_free(const struct config_key *table, void **objects, size_t n);

/* A NAME in [config.NAME] / [reclaim.NAME]: letters, digits, '-', '_', '.'; not empty. */
bool config_valid_instance_name(const char *name);

/* Calls fn for every section named "<prefix><NAME>" (e.g. "config.", "reclaim.") in file order. */
typedef int (*config_section_fn)(struct config *c, const char *section, const char *name, void *userdata);
int config_foreach_section(struct config *c, const char *prefix, config_section_fn fn, void *userdata);

/* Where a section's header first appeared (for errors about a whole section). */
int config_section_where(const struct config *c, const char *section, const char **ret_file,
                         unsigned *ret_line);

/* After all owners have parsed: the first unclaimed section or key becomes an error. */
int config_check_unclaimed(const struct config *c, char **ret_error);

/* Formats "FILE:LINE: reason" into *ret_error (allocated) and returns -EINVAL. */
int config_error(char **ret_error, const char *file, unsigned line, const char *format, ...) _printf_(4, 5);

/* Typed parsers (config-parse.c). Field types: usec_t, uint64_t (sizes), unsigned (percent 0..100), bool,
 * int64_t, char * (path: absolute; string: any), char ** (NULL-terminated strv), mode_t. */
int config_parse_duration(const char *v, void *ret, const char **reason); /* usec_t */
int config_parse_size(const char *v, void *ret, const char **reason);     /* uint64_t, K/M/G/T */
int config_parse_percent(const char *v, void *ret, const char **reason);  /* unsigned, "90%" */
int config_parse_bool(const char *v, void *ret, const char **reason);     /* bool */
int config_parse_int(const char *v, void *ret, const char **reason);      /* int64_t */
int config_parse_uint(const char *v, void *ret, const char **reason);     /* unsigned */
int config_parse_double(const char *v, void *ret, const char **reason);   /* double, >= 0 */
int config_parse_string(const char *v, void *ret, const char **reason);   /* char *, "" → NULL */
int config_parse_path(const char *v, void *ret, const char **reason);     /* char *, absolute */
int config_parse_strv(const char *v, void *ret, const char **reason);     /* char **, comma/space */
int config_parse_mode(const char *v, void *ret, const char **reason);     /* mode_t, octal */
int config_parse_url(const char *v, void *ret, const char **reason);      /* char *, http(s):// */
/* char *: an absolute path to a regular file that can be read now ("" → NULL): a missing
 * ca-file is refused on the line that names it, at start, reload and --check-config alike. */
int config_parse_file(const char *v, void *ret, const char **reason);
/* The check of config_parse_file alone: 0, or -errno with *reason set. */
int config_check_file(const char *path, const char **reason);

void config_free_string(void *field); /* for char * fields */
void config_free_strv(void *field);   /* for char ** fields */

