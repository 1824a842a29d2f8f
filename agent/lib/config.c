/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ini.h>

#include "config.h"

#define CONFIG_MAX_LINE 65536

/* ---- loading ---- */

struct load_state {
        struct config *config;
        const char *file;
        FILE *stream;
        unsigned current_line;  /* the line whose text the reader is handing out */
        unsigned next_line;     /* the line that starts with the next read */
        size_t current_length;
        unsigned long_line;     /* first line over CONFIG_MAX_LINE, 0 if none */
        int error;              /* -ENOMEM from the handler */
        unsigned inline_comment_line; /* the line of a value with a comment in it, 0 if none */
};

/* inih reads through this so we know the line of every key (Debian's inih is built without
 * INI_HANDLER_LINENO). A chunk that does not end in '\n' is part of a longer line. */
static char *config_reader(char *buf, int size, void *userdata) {
        struct load_state *st = userdata;

        if (!fgets(buf, size, st->stream))
                return NULL;
        if (st->current_length == 0)
                st->current_line = st->next_line;
        size_t len = strlen(buf);
        st->current_length += len;
        if (st->current_length >= CONFIG_MAX_LINE && st->long_line == 0)
                st->long_line = st->current_line;
        if (len > 0 && buf[len - 1] == '\n') {
                st->next_line++;
                st->current_length = 0;
        }
        return buf;
}

static struct config_section *config_find_section(const struct config *c, const char *name) {
        for (size_t i = 0; i < c->n_sections; i++)
                if (streq(c->sections[i].name, name))
                        return &c->sections[i];
        return NULL;
}

static int config_add_section(struct config *c, const char *name, const char *file, unsigned line) {
        if (config_find_section(c, name))
                return 0;
        struct config_section *grown = realloc(c->sections, (c->n_sections + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        c->sections = grown;
        struct config_section *s = &c->sections[c->n_sections];
        *s = (struct config_section) { .name = strdup(name), .file = strdup(file), .line = line };
        if (!s->name || !s->file) {
                free(s->name);
                free(s->file);
                return -ENOMEM;
        }
        c->n_sections++;
        return 0;
}

static int config_add_entry(struct config *c, const char *file, unsigned line, const char *section,
                            const char *key, const char *value) {
        struct config_entry *grown = realloc(c->entries, (c->n_entries + 1) * sizeof(*grown));
        if (!grown)
                return -ENOMEM;
        c->entries = grown;
        struct config_entry *e = &c->entries[c->n_entries];
        *e = (struct config_entry) {
                .file = strdup(file),
                .line = line,
                .section = strdup(section),
                .key = strdup(key),
                .value = strdup(value),
        };
        if (!e->file || !e->section || !e->key || !e->value) {
                free(e->file);
                free(e->section);
                free(e->key);
                free(e->value);
                return -ENOMEM;
        }
        c->n_entries++;
        return 0;
}

/* A '#' or ';' that starts a value or follows whitespace in one reads as a comment, but comments
 * are whole lines only: the value would silently carry the comment (a cgroup path named with
 * it, a command with its remark as arguments). Refused for every key, so no value means
 * something other than what it looks like. */
static bool config_value_has_inline_comment(const char *value) {
        for (const char *p = value; *p; p++)
                if ((*p == '#' || *p == ';') && (p == value || strchr(" \t", p[-1])))
                        return true;
        return false;
}

static int config_handler(void *userdata, const char *section, const char *key, const char *value) {
        struct load_state *st = userdata;
        int r;

        if (value && config_value_has_inline_comment(value)) {
                if (st->inline_comment_line == 0)
                        st->inline_comment_line = st->current_line;
                return 0;
        }
        r = config_add_section(st->config, section, st->file, st->current_line);
        if (r >= 0)
                r = config_add_entry(st->config, st->file, st->current_line, section, key, value ? value : "");
        if (r < 0) {
                st->error = r;
                return 0;
        }
        return 1;
}

/* inih calls the handler only for keys; sections without keys are found here, so an empty
 * "[typo]" section is still reported as unknown. */
static int config_scan_section_headers(struct config *c, const char *file, FILE *f) {
        char line[512];
        unsigned n = 0;
        bool at_line_start = true;

        while (fgets(line, sizeof(line), f)) {
                bool whole = strchr(line, '\n') != NULL;
                if (at_line_start) {
                        n++;
                        const char *p = line + strspn(line, " \t");
                        const char *end = strchr(p, ']');
                        if (*p == '[' && end) {
                                _cleanup_free_ char *name = strndup(p + 1, (size_t) (end - p - 1));
                                if (!name || config_add_section(c, name, file, n) < 0)
                                        return -ENOMEM;
                        }
                }
                at_line_start = whole;
        }
        return 0;
}

static void config_init_ini(void) {
        /* Debian's inih exposes its compile-time options as variables. Inline comments off: by
         * default inih strips " ;..." from values but keeps " #...", so the handler sees every
         * value whole and refuses both (config_value_has_inline_comment). No indented
         * continuation lines; long values (URL lists) must not be split. */
        ini_allow_inline_comments = false;
        ini_allow_multiline = false;
        ini_use_stack = false;
        ini_allow_realloc = true;
        ini_max_line = CONFIG_MAX_LINE;
}

static int config_load_stream(struct config *c, const char *file, FILE *f, char **ret_error) {
        struct load_state st = { .config = c, .file = file, .stream = f, .next_line = 1 };
        int r;

        config_init_ini();
        r = config_scan_section_headers(c, file, f);
        if (r < 0)
                return r;
        rewind(f);

        r = ini_parse_stream(config_reader, &st, config_handler, &st);
        if (st.error < 0)
                return st.error;
        if (r == -2)
                return -ENOMEM;
        if (st.long_line > 0)
                return config_error(ret_error, file, st.long_line, "line too long (limit %d bytes)",
                                    CONFIG_MAX_LINE - 1);
        if (st.inline_comment_line > 0 && (r <= 0 || (unsigned) r >= st.inline_comment_line))
                return config_error(ret_error, file, st.inline_comment_line,
                                    "'#' or ';' after a blank or opening a value: an inline comment is not "
                                    "allowed, put it on its own line");
        if (r > 0)
                return config_error(ret_error, file, (unsigned) r,
                                    "syntax error: expected \"[section]\", \"key=value\" or a comment");
        return 0;
}

static int config_load_file(struct config *c, const char *file, char **ret_error) {
        FILE *f = fopen(file, "re");
        if (!f) {
                int r = -errno;
                return config_error(ret_error, file, 0, "cannot read: %s", strerror(-r)), r;
        }
        int r = config_load_stream(c, file, f, ret_error);
        (void) fclose(f);
        if (r >= 0)
                c->n_files++;
        return r;
}

static int config_new(const char *main_file, struct config **ret) {
        struct config *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->main_file = strdup(main_file);
        if (!c->main_file) {
                free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

static int dropin_filter(const struct dirent *de) {
        size_t n = strlen(de->d_name);
        return de->d_name[0] != '.' && n > 5 && streq(de->d_name + n - 5, ".conf");
}

static int config_load_dropins(struct config *c, const char *dir, char **ret_error) {
        struct dirent **names = NULL;
        int n, r = 0;

        n = scandir(dir, &names, dropin_filter, alphasort);
        if (n < 0) {
                if (errno == ENOENT)
                        return 0;
                r = -errno;
                return config_error(ret_error, dir, 0, "cannot read drop-in directory: %s", strerror(-r)), r;
        }
        for (int i = 0; i < n; i++) {
                if (r >= 0) {
                        _cleanup_free_ char *path = NULL;
                        if (asprintf(&path, "%s/%s", dir, names[i]->d_name) < 0)
                                r = -ENOMEM;
                        else
                                r = config_load_file(c, path, ret_error);
                }
                free(names[i]);
        }
        free(names);
        return r;
}

int config_load(const char *main_file, const char *dropin_dir, struct config **ret, char **ret_error) {
        _cleanup_(config_freep) struct config *c = NULL;
        int r;

        r = config_new(main_file, &c);
        if (r < 0)
                return r;
        r = config_load_file(c, main_file, ret_error);
        if (r < 0)
                return r;
        if (dropin_dir) {
                r = config_load_dropins(c, dropin_dir, ret_error);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

int config_load_string(const char *name, const char *text, struct config **ret, char **ret_error) {
        _cleanup_(config_freep) struct config *c = NULL;
        int r;

        r = config_new(name, &c);
        if (r < 0)
                return r;
        FILE *f = fmemopen((void *) text, strlen(text), "r");
        if (!f)
                return -errno;
        r = config_load_stream(c, name, f, ret_error);
        (void) fclose(f);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

struct config *config_free(struct config *c) {
        if (!c)
                return NULL;
        for (size_t i = 0; i < c->n_entries; i++) {
                free(c->entries[i].file);
                free(c->entries[i].section);
                free(c->entries[i].key);
                free(c->entries[i].value);
        }
        for (size_t i = 0; i < c->n_sections; i++) {
                free(c->sections[i].name);
                free(c->sections[i].file);
        }
        free(c->entries);
        free(c->sections);
        free(c->main_file);
        free(c);
        return NULL;
}

/* ---- applying tables ---- */

static config_table_observer_t table_observer;
static void *table_observer_userdata;

void config_set_table_observer(config_table_observer_t observer, void *userdata) {
        table_observer = observer;
        table_observer_userdata = userdata;
}

static void config_observe_table(const char *section, const struct config_key *table) {
        if (table_observer)
                table_observer(section, table, table_observer_userdata);
}

int config_error(char **ret_error, const char *file, unsigned line, const char *format, ...) {
        _cleanup_free_ char *reason = NULL;
        va_list ap;
        int r;

        va_start(ap, format);
        r = vasprintf(&reason, format, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if (ret_error) {
                free(*ret_error);
                *ret_error = NULL;
                if (line > 0)
                        r = asprintf(ret_error, "%s:%u: %s", file, line, reason);
                else
                        r = asprintf(ret_error, "%s: %s", file, reason);
                if (r < 0)
                        *ret_error = NULL;
        }
        return -EINVAL;
}

bool config_has_section(const struct config *c, const char *section) {
        return config_find_section(c, section) != NULL;
}

const char *config_value(const struct config *c, const char *section, const char *key) {
        const char *value = NULL;
        for (size_t i = 0; i < c->n_entries; i++)
                if (streq(c->entries[i].section, section) && streq(c->entries[i].key, key))
                        value = c->entries[i].value;
        return value && value[0] ? value : NULL;
}

int config_key_where(const struct config *c, const char *section, const char *key, const char **ret_file,
                     unsigned *ret_line) {
        const struct config_entry *found = NULL;
        for (size_t i = 0; i < c->n_entries; i++)
                if (streq(c->entries[i].section, section) && streq(c->entries[i].key, key))
                        found = &c->entries[i];
        *ret_file = found ? found->file : c->main_file;
        *ret_line = found ? found->line : 0;
        return found ? 0 : -ENOENT;
}

static const struct config_key *config_find_key(const struct config_key *table, const char *key) {
        for (const struct config_key *k = table; k->key; k++)
                if (streq(k->key, key))
                        return k;
        return NULL;
}

static bool config_is_choice(const struct config_key *k, const char *value) {
        const char *choice;
        for (size_t i = 0; (choice = k->choices(i)); i++)
                if (streq(choice, value))
                        return true;
        return false;
}

/* "expected one of: a, b, c" (", or empty" when "" is a choice), from k->choices. */
static char *config_choices_text(const struct config_key *k) {
        _cleanup_free_ char *text = NULL;
        bool empty = false;
        const char *choice;
        size_t size = 0;
        FILE *f = open_memstream(&text, &size);

        if (!f)
                return NULL;
        fputs("expected one of: ", f);
        for (size_t i = 0, n = 0; (choice = k->choices(i)); i++) {
                if (isempty(choice)) {
                        empty = true;
                        continue;
                }
                fprintf(f, "%s%s", n++ > 0 ? ", " : "", choice);
        }
        if (empty)
                fputs(", or empty", f);
        if (fclose(f) != 0)
                return NULL;
        return TAKE_PTR(text);
}

/* Parsers write their field only on success, so a bad value leaves the old one in place. An
 * owned field (always a pointer) is released only after its replacement parsed. A value outside
 * k->choices comes back as -EINVAL with *ret_reason NULL (the caller lists the choices). */
static int config_apply_value(const struct config_key *k, const char *value, void *object,
                              const char **ret_reason) {
        void *field = (uint8_t *) object + k->offset;
        void *old = k->free_field ? *(void **) field : NULL;
        int r;

        if (k->choices && !config_is_choice(k, value)) {
                *ret_reason = NULL;
                return -EINVAL;
        }
        r = k->parse(value, field, ret_reason);
        if (r < 0)
                return r;
        if (k->free_field)
                k->free_field(&old);
        return 0;
}

int config_parse_section(struct config *c, const char *section, const struct config_key *table,
                         void *object, char **ret_error) {
        const char *reason = NULL;
        int r;

        config_observe_table(section, table);
        for (const struct config_key *k = table; k->key; k++) {
                if (!k->default_value)
                        continue;
                r = config_apply_value(k, k->default_value, object, &reason);
                if (r < 0)
                        return config_error(ret_error, "(built-in defaults)", 0,
                                            "bad default for '%s' in [%s]: %s", k->key, section,
                                            strempty(reason));
        }

        struct config_section *s = config_find_section(c, section);
        if (!s)
                return 0;
        s->claimed = true;

        for (size_t i = 0; i < c->n_entries; i++) {
                struct config_entry *e = &c->entries[i];
                if (!streq(e->section, section))
                        continue;
                const struct config_key *k = config_find_key(table, e->key);
                if (!k)
                        return config_error(ret_error, e->file, e->line, "unknown key '%s' in section [%s]",
                                            e->key, section);
                reason = NULL;
                r = config_apply_value(k, e->value, object, &reason);
                if (r < 0 && !reason && k->choices) {
                        _cleanup_free_ char *choices = config_choices_text(k);
                        if (!choices)
                                return -ENOMEM;
                        return config_error(ret_error, e->file, e->line, "invalid value '%s' for '%s' in [%s]: %s",
                                            e->value, e->key, section, choices);
                }
                if (r < 0 && k->names_file)
                        return config_error(ret_error, e->file, e->line, "%s %s: %s", e->key, e->value,
                                            strempty(reason));
                if (r < 0)
                        return config_error(ret_error, e->file, e->line, "invalid value '%s' for '%s' in [%s]: %s",
                                            e->value, e->key, section, strempty(reason));
                e->claimed = true;
        }
        return 0;
}

void config_free_fields(const struct config_key *table, void *object) {
        for (const struct config_key *k = table; k->key; k++)
                if (k->free_field)
                        k->free_field((uint8_t *) object + k->offset);
}

int config_parse_section_new(struct config *c, const char *section, const struct config_key *table,
                             size_t size, void **ret, char **ret_error) {
        void *object = calloc(1, size);
        int r;

        if (!object)
                return -ENOMEM;
        r = config_parse_section(c, section, table, object, ret_error);
        if (r < 0) {
                config_object_free(table, object);
                return r;
        }
        *ret = object;
        return 0;
}

void *config_object_free(const struct config_key *table, void *object) {
        if (!object)
                return NULL;
        config_free_fields(table, object);
        free(object);
        return NULL;
}

int config_section_error(const struct config *c, const char *section, char **ret_error,
                         const char *format, ...) {
        _cleanup_free_ char *reason = NULL;
        const char *file = c->main_file;
        unsigned line = 0;
        va_list ap;
        int r;

        (void) config_section_where(c, section, &file, &line);
        va_start(ap, format);
        r = vasprintf(&reason, format, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        return config_error(ret_error, file, line, "[%s] %s", section, reason);
}

bool config_valid_instance_name(const char *name) {
        if (isempty(name))
                return false;
        return strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == strlen(name);
}

struct instances_ctx {
        const struct config_key *table;
        size_t size;
        config_check_fn check;
        void **objects;
        size_t n;
        char **ret_error;
};

static int parse_instance(struct config *c, const char *section, const char *name, void *userdata) {
        struct instances_ctx *ctx = userdata;
        void *object = NULL;
        const char *problem;
        int r;

        if (!config_valid_instance_name(name))
                return config_section_error(c, section, ctx->ret_error,
                                            "the name after the dot may use only letters, digits, '-', '_' and '.'");
        r = config_parse_section_new(c, section, ctx->table, ctx->size, &object, ctx->ret_error);
        if (r < 0)
                return r;
        problem = ctx->check ? ctx->check(object) : NULL;
        if (problem) {
                config_object_free(ctx->table, object);
                return config_section_error(c, section, ctx->ret_error, "%s", problem);
        }
        void **grown = realloc(ctx->objects, (ctx->n + 1) * sizeof(void *));
        char *copy = strdup(name);
        if (!grown || !copy) {
                free(copy);
                if (grown)
                        ctx->objects = grown;
                config_object_free(ctx->table, object);
                return -ENOMEM;
        }
        ctx->objects = grown;
        *(char **) object = copy; /* the documented first member */
        ctx->objects[ctx->n++] = object;
        return 0;
}

int config_parse_instances(struct config *c, const char *prefix, const struct config_key *table,
                           size_t size, config_check_fn check, void ***ret_objects, size_t *ret_n,
                           char **ret_error) {
        struct instances_ctx ctx = {
                .table = table, .size = size, .check = check, .ret_error = ret_error,
        };
        int r;

        if (table_observer) {
                _cleanup_free_ char *template = NULL;
                if (asprintf(&template, "%sNAME", prefix) < 0)
                        return -ENOMEM;
                config_observe_table(template, table);
        }
        r = config_foreach_section(c, prefix, parse_instance, &ctx);
        if (r < 0) {
                config_instances_free(table, ctx.objects, ctx.n);
                return r;
        }
        *ret_objects = ctx.objects;
        *ret_n = ctx.n;
        return 0;
}

void config_instances_free(const struct config_key *table, void **objects, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(*(char **) objects[i]);
                config_object_free(table, objects[i]);
        }
        free(objects);
}

int config_foreach_section(struct config *c, const char *prefix, config_section_fn fn, void *userdata) {
        size_t len = strlen(prefix);

        for (size_t i = 0; i < c->n_sections; i++) {
                /* fn may parse sections, which does not reallocate c->sections. */
                const char *name = c->sections[i].name;
                if (strncmp(name, prefix, len) != 0)
                        continue;
                int r = fn(c, name, name + len, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

int config_section_where(const struct config *c, const char *section, const char **ret_file,
                         unsigned *ret_line) {
        const struct config_section *s = config_find_section(c, section);
        if (!s)
                return -ENOENT;
        *ret_file = s->file;
        *ret_line = s->line;
        return 0;
}

int config_check_unclaimed(const struct config *c, char **ret_error) {
        for (size_t i = 0; i < c->n_sections; i++) {
                const struct config_section *s = &c->sections[i];
                if (s->claimed)
                        continue;
                if (isempty(s->name))
                        return config_error(ret_error, s->file, s->line, "key outside of any [section]");
                return config_error(ret_error, s->file, s->line, "unknown section [%s]", s->name);
        }
        for (size_t i = 0; i < c->n_entries; i++) {
                const struct config_entry *e = &c->entries[i];
                if (!e->claimed)
                        return config_error(ret_error, e->file, e->line, "unknown key '%s' in section [%s]",
                                            e->key, e->section);
        }
        return 0;
}

/* ---- files named by keys, and freeing parsed fields ---- */

int config_check_file(const char *path, const char **reason) {
        struct stat st;
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        int r = 0;

        if (fd < 0) {
                *reason = strerror(errno);
                return -errno;
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                *reason = strerror(errno);
        } else if (!S_ISREG(st.st_mode)) {
                r = -EINVAL;
                *reason = "not a regular file";
        }
        (void) close(fd);
        return r;
}

void config_free_string(void *field) {
        char **s = field;
        free(*s);
        *s = NULL;
}

void config_free_strv(void *field) {
        char ***l = field;
        *l = strv_free(*l);
}
