/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "pod-sink.h"

#define MODULE "apiserver"
#define SOURCE POD_SOURCE_APISERVER

/* The pod in an object, if it is a valid pod of this node: 1 (taken into *ret), 0 (not ours:
 * the field selector should have kept it away), -EINVAL (invalid: logged), -ENOMEM. */
static int pod_sink_parse(struct pod_sink *s, const cJSON *object, const char *what, struct pod **ret) {
        _cleanup_free_ char *error = NULL;
        _cleanup_(pod_unrefp) struct pod *p = NULL;

        if (pod_parse_json(object, NULL, &p, &error) < 0) {
                /* One bad object must not cost us the others. */
                log_module_warning(MODULE, "Ignoring a pod in %s: %s", what, strempty(error));
                return -EINVAL;
        }
        if (!streq_ptr(p->node_name, s->node))
                return 0;
        if (!p->source && !(p->source = strdup(SOURCE)))
                return -ENOMEM;
        *ret = TAKE_PTR(p);
        return 1;
}

static int pod_sink_list_item(void *userdata, const cJSON *item, const char **ret_kind) {
        struct pod_sink *s = userdata;
        struct pod *p = NULL;

        int k = pod_sink_parse(s, item, "the list", &p);
        if (k == -EINVAL)
                *ret_kind = "invalid-object";
        if (k <= 0)
                return k == -ENOMEM ? k : 0;
        struct pod **grown = realloc(s->list, (s->n_list + 1) * sizeof(*grown));
        if (!grown) {
                pod_unref(p);
                return -ENOMEM;
        }
        s->list = grown;
        s->list[s->n_list++] = p;
        return 0;
}

static void pod_sink_list_abort(void *userdata) {
        struct pod_sink *s = userdata;
        for (size_t i = 0; i < s->n_list; i++)
                pod_unref(s->list[i]);
        s->list = mfree(s->list);
        s->n_list = 0;
}

static int pod_sink_list_commit(void *userdata) {
        struct pod_sink *s = userdata;
        int k = pod_store_replace_source(s->store, SOURCE, s->list, s->n_list);
        pod_sink_list_abort(s); /* the store holds its own references */
        return k;
}

static int pod_sink_event(void *userdata, enum watch_event_type type, const cJSON *object, const char **ret_kind) {
        struct pod_sink *s = userdata;
        _cleanup_(pod_unrefp) struct pod *p = NULL;
        _cleanup_free_ char *what = NULL;

        if (asprintf(&what, "a %s event", watch_stream_event_type_to_string(type)) < 0)
                return -ENOMEM;
        int k = pod_sink_parse(s, object, what, &p);
        if (k == -EINVAL)
                *ret_kind = "invalid-object";
        if (k <= 0)
                return k == -ENOMEM ? k : 0;
        const struct pod *known = pod_store_get(s->store, p->uid);
        if (known && !streq_ptr(known->source, SOURCE)) {
                /* A static pod with the same uid: the file on this node wins. */
                log_module_warning(MODULE, "Ignoring %s of pod %s/%s: uid %s belongs to %s",
                                   watch_stream_event_type_to_string(type), p->namespace, p->name, p->uid,
                                   strempty(known->source));
                *ret_kind = "uid-conflict";
                return 0;
        }
        if (type == WATCH_DELETED) {
                (void) pod_store_remove(s->store, p->uid);
                return 0;
        }
        return pod_store_put(s->store, p) < 0 ? -ENOMEM : 0;
}

static size_t pod_sink_count(void *userdata) {
        struct pod_sink *s = userdata;
        return pod_store_count_source(s->store, SOURCE);
}

int pod_sink_init(struct pod_sink *s, struct pod_store *store, const char *node) {
        _cleanup_free_ char *field = NULL;

        *s = (struct pod_sink) { .store = store };
        if (asprintf(&field, "spec.nodeName=%s", node) < 0)
                return -ENOMEM;
        s->node = strdup(node);
        if (!s->node || asprintf(&s->description, "the pods of node %s", node) < 0 ||
            reflector_query_param("fieldSelector", field, &s->sink.selector) < 0) {
                pod_sink_done(s);
                return -ENOMEM;
        }
        s->sink.resource = "pods";
        s->sink.description = s->description;
        s->sink.userdata = s;
        s->sink.list_item = pod_sink_list_item;
        s->sink.list_commit = pod_sink_list_commit;
        s->sink.list_abort = pod_sink_list_abort;
        s->sink.event = pod_sink_event;
        s->sink.count = pod_sink_count;
        return 0;
}

void pod_sink_done(struct pod_sink *s) {
        pod_sink_list_abort(s);
        free(s->node);
        free(s->description);
        free(s->sink.selector);
        *s = (struct pod_sink) {};
}
