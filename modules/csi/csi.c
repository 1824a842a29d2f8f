/* SPDX-License-Identifier: MIT */
/* The csi module: its [csi] section, its life, its status. Off unless [csi] enable=yes: on a
 * node without a kubelet there is nobody to ask it for volumes.
 *
 *   DISABLED  enable=no
 *   RUNNING   the CSI socket (and the registration socket, if any) serve
 *   DEGRADED  the kubelet said it could not register the plugin (its reason)
 *   FAILED    a socket could not be served (why) */
#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "csi-mount.h"
#include "csi.h"
#include "log.h"
#include "manager.h"

/* The CSI spec's rule for a plugin's name: up to 63 characters of letters, digits, '-' and
 * '.', beginning and ending with a letter or digit (it names a file here too). */
static int parse_name(const char *v, void *ret, const char **reason) {
        size_t n = strlen(v ?: "");

        if (n == 0 || n > 63 || strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.") != n ||
            !isalnum((unsigned char) v[0]) || !isalnum((unsigned char) v[n - 1])) {
                *reason = "expected a CSI driver name: 1-63 letters, digits, '-' or '.', starting and ending with a "
                          "letter or digit";
                return -EINVAL;
        }
        return config_parse_string(v, ret, reason);
}

static int parse_pods_root(const char *v, void *ret, const char **reason) {
        if (!csi_mount_path_clean(v)) {
                *reason = "expected a clean absolute path (no '.', '..', '//' or trailing '/')";
                return -EINVAL;
        }
        return config_parse_path(v, ret, reason);
}

#define FIELD(f) offsetof(struct csi_settings, f)
static const struct config_key csi_keys[] = {
        { "enable", config_parse_bool, FIELD(enable), "no" },
        { "name", parse_name, FIELD(name), CSI_NAME_DEFAULT, config_free_string },
        { "socket", config_parse_path, FIELD(socket), "/var/lib/kubelet/plugins/" CSI_NAME_DEFAULT "/csi.sock",
          config_free_string },
        { "registration-dir", config_parse_path, FIELD(registration_dir), "/var/lib/kubelet/plugins_registry",
          config_free_string },
        { "pods-root", parse_pods_root, FIELD(pods_root), "/var/lib/kubelet/pods", config_free_string },
        {}
};
#undef FIELD

static struct csi_settings *settings_free(struct csi_settings *s) {
        return config_object_free(csi_keys, s);
}

static int csi_parse(struct config *c, struct csi_settings **ret, char **ret_error) {
        struct csi_settings *s = NULL;
        int r = config_parse_section_new(c, "csi", csi_keys, sizeof(*s), (void **) &s, ret_error);

        if (r < 0)
                return r;
        if (s->enable && isempty(s->socket)) {
                settings_free(s);
                return config_section_error(c, "csi", ret_error, "socket must be set when enable=yes");
        }
        *ret = s;
        return 0;
}

/* ---- serving ---- */

static int csi_paths(struct csi *csi) {
        const char *api = api_socket_path(csi->mi->manager->api);
        _cleanup_free_ char *copy = strdup(api ?: "");

        free(csi->sockets_dir);
        free(csi->reg_socket);
        csi->sockets_dir = csi->reg_socket = NULL;
        if (!copy)
                return -ENOMEM;
        if (!api)
                return -ENOENT;
        csi->sockets_dir = strdup(dirname(copy));
        if (!csi->sockets_dir)
                return -ENOMEM;
        if (csi->settings->registration_dir &&
            asprintf(&csi->reg_socket, "%s/%s-reg.sock", csi->settings->registration_dir, csi->settings->name) < 0) {
                csi->reg_socket = NULL;
                return -ENOMEM;
        }
        return 0;
}

static void csi_serve(struct csi *csi) {
        struct module_instance *mi = csi->mi;
        int r;

        csi->registered = false;
        if (!csi->settings->enable) {
                module_set_state(mi, MODULE_DISABLED, "set [csi] enable=yes to serve the CSI node plugin");
                return;
        }
        r = csi_paths(csi);
        if (r >= 0)
                r = csi_api_start(csi);
        if (r < 0) {
                module_set_state(mi, MODULE_FAILED, "cannot serve the CSI node plugin on %s: %s", csi->settings->socket,
                                 strerror(-r));
                return;
        }
        log_module_info(MODULE, "CSI node plugin %s serving %s on %s%s%s", csi->settings->name, csi->sockets_dir,
                        csi->settings->socket, csi->reg_socket ? ", registration on " : "", strempty(csi->reg_socket));
        module_set_state(mi, MODULE_RUNNING, NULL);
}

void csi_registration_status(struct csi *csi, bool registered, const char *error) {
        csi->registered = registered;
        if (registered) {
                log_module_info(MODULE, "The kubelet registered CSI driver %s", csi->settings->name);
                if (csi->mi->state == MODULE_DEGRADED)
                        module_set_state(csi->mi, MODULE_RUNNING, NULL);
                return;
        }
        module_set_state(csi->mi, MODULE_DEGRADED, "the kubelet did not register CSI driver %s: %s",
                         csi->settings->name, isempty(error) ? "no reason given" : error);
}

/* ---- the node operations (csi-api.c maps their outcome to the gRPC status) ---- */

void csi_note_refused(struct csi *csi) {
        csi->n_refused++;
}

/* A mount that did not happen: why says why (the errno's text if the mount did not say). A
 * request the kubelet got wrong is its to report (a pod event); a mount that failed on our
 * side is worth a warning. */
static int refused(struct csi *csi, int r, const char *rpc, const char *volume_id, const char *target_path, char *why,
                   size_t why_size) {
        csi->n_refused++;
        if (!why[0])
                (void) snprintf(why, why_size, "%s", strerror(-r));
        (void) log_module_full_errno(MODULE, csi_mount_refusal(r) ? LOG_INFO : LOG_WARNING, 0, "%s %s at %s refused: %s",
                                     rpc, volume_id, target_path, why);
        return r;
}

int csi_publish(struct csi *csi, const char *volume_id, const char *target_path, char *why, size_t why_size) {
        int r;

        /* Always read-only, whatever the request says: pods connect to sockets, they never write. */
        r = csi_mount_publish(csi->sockets_dir, csi->settings->pods_root, target_path, why, why_size);
        if (r < 0)
                return refused(csi, r, "NodePublishVolume", volume_id, target_path, why, why_size);
        csi->n_published++;
        log_module_debug(MODULE, "Published %s at %s (volume %s)", csi->sockets_dir, target_path, volume_id);
        return 0;
}

int csi_unpublish(struct csi *csi, const char *volume_id, const char *target_path, char *why, size_t why_size) {
        int r;

        r = csi_mount_unpublish(csi->sockets_dir, csi->settings->pods_root, target_path, why, why_size);
        if (r < 0)
                return refused(csi, r, "NodeUnpublishVolume", volume_id, target_path, why, why_size);
        csi->n_unpublished++;
        log_module_debug(MODULE, "Unpublished %s (volume %s)", target_path, volume_id);
        return 0;
}

/* ---- the module contract ---- */

static int csi_init(struct module_instance *mi, struct config *c, char **ret_error) {
        struct csi *csi = calloc(1, sizeof(*csi));
        int r;

        if (!csi)
                return -ENOMEM;
        r = csi_parse(c, &csi->settings, ret_error);
        if (r < 0) {
                free(csi);
                return r;
        }
        csi->mi = mi;
        mi->data = csi;
        return 0;
}

static int csi_start(struct module_instance *mi) {
        csi_serve(mi->data);
        module_set_synced(mi);
        return 0;
}

static bool sockets_changed(const struct csi_settings *a, const struct csi_settings *b) {
        return a->enable != b->enable || !streq_ptr(a->name, b->name) || !streq_ptr(a->socket, b->socket) ||
               !streq_ptr(a->registration_dir, b->registration_dir);
}

/* A new pods root applies to the next call; new sockets or a new name are served afresh. */
static int csi_reload(struct module_instance *mi, struct config *c, char **ret_error) {
        struct csi *csi = mi->data;
        struct csi_settings *s = NULL;
        bool restart;
        int r;

        r = csi_parse(c, &s, ret_error);
        if (r < 0)
                return r;
        restart = sockets_changed(csi->settings, s);
        if (restart)
                csi_api_stop(csi);
        settings_free(csi->settings);
        csi->settings = s;
        if (restart)
                csi_serve(csi);
        return 0;
}

/* Published volumes stay mounted: they belong to running pods, and the kubelet unpublishes
 * them through the next agent. */
static int csi_stop(struct module_instance *mi) {
        csi_api_stop(mi->data);
        return 0;
}

static int csi_status(struct module_instance *mi, cJSON *obj) {
        struct csi *csi = mi->data;

        if (!cJSON_AddStringToObject(obj, "name", csi->settings->name) ||
            !cJSON_AddStringToObject(obj, "socket", strempty(csi->settings->socket)) ||
            !cJSON_AddStringToObject(obj, "registration_socket", strempty(csi->reg_socket)) ||
            !cJSON_AddStringToObject(obj, "pods_root", csi->settings->pods_root) ||
            !cJSON_AddBoolToObject(obj, "registered", csi->registered) ||
            !cJSON_AddNumberToObject(obj, "published", csi->n_published) ||
            !cJSON_AddNumberToObject(obj, "unpublished", csi->n_unpublished) ||
            !cJSON_AddNumberToObject(obj, "refused", csi->n_refused))
                return -ENOMEM;
        return 0;
}

static void csi_free(struct module_instance *mi) {
        struct csi *csi = mi->data;

        if (!csi)
                return;
        csi_api_stop(csi);
        settings_free(csi->settings);
        free(csi->sockets_dir);
        free(csi->reg_socket);
        free(csi);
        mi->data = NULL;
}

/* Bind mounts and unmounts need CAP_SYS_ADMIN, and only when serving. */
static uint64_t csi_capabilities(struct module_instance *mi, const struct config *c) {
        const struct csi *csi = mi->data;

        return csi && csi->settings->enable ? CAP_TO_MASK64(CAP_SYS_ADMIN) : 0;
}

static bool csi_configured(const struct module_instance *mi, const struct config *c) {
        const struct csi *csi = mi->data;
        return csi->settings->enable;
}

static int csi_check(const struct module_instance *mi, const struct config *c, char **ret_error) {
        const struct csi *csi = mi->data;
        _cleanup_free_ char *reg = NULL;
        int r = module_check_socket_dir(c, "csi", "socket", csi->settings->socket, ret_error);

        if (r < 0 || !csi->settings->registration_dir)
                return r;
        if (asprintf(&reg, "%s/%s-reg.sock", csi->settings->registration_dir, csi->settings->name) < 0)
                return -ENOMEM;
        return module_check_socket_dir(c, "csi", "registration-dir", reg, ret_error);
}

const struct module csi_module = {
        .name = "csi",
        .init = csi_init,
        .configured = csi_configured,
        .check = csi_check,
        .start = csi_start,
        .reload = csi_reload,
        .stop = csi_stop,
        .status = csi_status,
        .free = csi_free,
        .capabilities = csi_capabilities,
};
