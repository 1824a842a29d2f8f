/* SPDX-License-Identifier: MIT */
/* The gRPC side of the CSI node plugin: handlers only; publishing and unpublishing are csi.c's.
 *
 * Both sockets are root's alone (mode 0600): the kubelet is their only client, and a caller
 * that could publish could mount the sockets directory wherever the pods root allows. Every call
 * is checked again by the agent's one caller rule (caller.h): only the host's root may call
 * (PERMISSION_DENIED otherwise). Root's uid is not enough: a root process in a pod that has the
 * socket mounted (a hostPath of the kubelet's plugins directory) is that pod, not the kubelet,
 * and a socket whose mode was changed under us lets others connect.
 *
 *   a request that is not the RPC's message              -> INVALID_ARGUMENT
 *   publish/unpublish without volume_id or target_path   -> INVALID_ARGUMENT
 *   publish without volume_capability, or of block access -> INVALID_ARGUMENT
 *   a target_path outside a pod's directory below the pods root -> PERMISSION_DENIED
 *   publish where the target's parent is missing, unpublish where another mount is -> NOT_FOUND
 *   publish over something else or over a non-empty directory, unpublish of a non-empty or
 *   non-directory target
 *                                                        -> FAILED_PRECONDITION */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "caller.h"
#include "csi-mount.h"
#include "csi.h"
#include "csi.pb-c.h"
#include "fs.h"
#include "log.h"
#include "manager.h"
#include "pluginregistration.pb-c.h"

#define CSI_SOCKET_MODE 0600
/* What the kubelet's plugin watcher expects from a CSI driver. */
#define CSI_PLUGIN_TYPE "CSIPlugin"
#define CSI_SPEC_VERSION "1.0.0"

/* ---- replies ---- */

static void reply(struct grpc_call *call, const ProtobufCMessage *msg) {
        size_t n = protobuf_c_message_get_packed_size(msg);
        _cleanup_free_ uint8_t *buf = malloc(MAX(n, (size_t) 1));

        if (!buf) {
                grpc_call_finish(call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory");
                return;
        }
        (void) protobuf_c_message_pack(msg, buf);
        if (grpc_call_send(call, buf, n) < 0)
                return; /* the call has ended */
        grpc_call_finish(call, GRPC_STATUS_OK, NULL);
}

/* Whether the peer is the host's root, as the kubelet is: root credentials, in no pod and no
 * configured service (caller.h's rule); logs why not. */
static bool caller_is_host_root(struct grpc_call *call, struct csi *csi) {
        const struct peer *peer = grpc_call_peer(call);
        struct caller c;
        bool ok;

        if (!peer || !peer->privileged || peer->uid != 0) {
                log_module_warning(MODULE, "%s refused: caller uid %d is not root", grpc_call_method(call),
                                   peer ? (int) peer->uid : -1);
                return false;
        }
        caller_resolve_manager_peer(csi->mi->manager, peer, &c);
        ok = c.kind == CALLER_HOST;
        if (!ok)
                log_module_warning(MODULE, "%s refused: caller pid %d has uid 0 but is not the host (caller: %s%s%s)",
                                   grpc_call_method(call), (int) peer->pid, caller_kind_to_string(c.kind),
                                   c.cgroup_pod_uid ? ", in pod " : "", strempty(c.cgroup_pod_uid));
        caller_done(&c);
        return ok;
}

/* The request, unpacked (free with protobuf_c_message_free_unpacked), or NULL with the call
 * finished: a caller that is not the host's root, or bytes that are not the message. */
static ProtobufCMessage *request(struct grpc_call *call, struct csi *csi, const ProtobufCMessageDescriptor *d,
                                 const uint8_t *msg, size_t size) {
        ProtobufCMessage *m;

        if (!caller_is_host_root(call, csi)) {
                csi_note_refused(csi);
                grpc_call_finish(call, GRPC_STATUS_PERMISSION_DENIED,
                                 "only the host's root (the kubelet) may call this plugin");
                return NULL;
        }
        m = protobuf_c_message_unpack(d, NULL, size, msg);
        if (!m)
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "malformed %s", d->name);
        return m;
}

#define REQUEST(call, csi, type, desc, msg, size) ((type *) request((call), (csi), &(desc), (msg), (size)))

/* ---- Identity ---- */

static void get_plugin_info(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct csi *csi = userdata;
        Csi__V1__GetPluginInfoRequest *req = REQUEST(call, userdata, Csi__V1__GetPluginInfoRequest,
                                                     csi__v1__get_plugin_info_request__descriptor, msg, size);
        Csi__V1__GetPluginInfoResponse resp = CSI__V1__GET_PLUGIN_INFO_RESPONSE__INIT;

        if (!req)
                return;
        protobuf_c_message_free_unpacked(&req->base, NULL);
        resp.name = csi->settings->name;
        resp.vendor_version = (char *) PACKAGE_VERSION;
        reply(call, &resp.base);
}

/* No controller service: an ephemeral volume needs none, and attachRequired is false. */
static void get_plugin_capabilities(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        Csi__V1__GetPluginCapabilitiesRequest *req = REQUEST(
                call, userdata, Csi__V1__GetPluginCapabilitiesRequest, csi__v1__get_plugin_capabilities_request__descriptor, msg,
                size);
        Csi__V1__GetPluginCapabilitiesResponse resp = CSI__V1__GET_PLUGIN_CAPABILITIES_RESPONSE__INIT;

        if (!req)
                return;
        protobuf_c_message_free_unpacked(&req->base, NULL);
        reply(call, &resp.base);
}

/* Ready once the sockets directory is there to publish. */
static void probe(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct csi *csi = userdata;
        Csi__V1__ProbeRequest *req = REQUEST(call, userdata, Csi__V1__ProbeRequest, csi__v1__probe_request__descriptor, msg, size);
        Csi__V1__ProbeResponse resp = CSI__V1__PROBE_RESPONSE__INIT;
        Google__Protobuf__BoolValue ready = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;

        if (!req)
                return;
        protobuf_c_message_free_unpacked(&req->base, NULL);
        ready.value = csi->sockets_dir && access(csi->sockets_dir, F_OK) == 0;
        resp.ready = &ready;
        reply(call, &resp.base);
}

/* ---- Node ---- */

static enum grpc_status mount_status(int r) {
        switch (r) {
        case -EINVAL:
                return GRPC_STATUS_INVALID_ARGUMENT;
        case -EPERM:
                return GRPC_STATUS_PERMISSION_DENIED;
        case -ENOENT:
                return GRPC_STATUS_NOT_FOUND;
        case -EEXIST:
        case -ENOTEMPTY:
        case -ENOTDIR:
        case -EBUSY:
                return GRPC_STATUS_FAILED_PRECONDITION;
        default:
                return GRPC_STATUS_INTERNAL;
        }
}

/* The spec's required fields, and a capability we can serve: a directory (mount), not a
 * block device. NULL if fine, else what is wrong. */
static const char *publish_request_problem(const Csi__V1__NodePublishVolumeRequest *req) {
        if (isempty(req->volume_id))
                return "volume_id is missing";
        if (isempty(req->target_path))
                return "target_path is missing";
        if (!req->volume_capability)
                return "volume_capability is missing";
        if (req->volume_capability->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
                return "block access is not supported: the volume is a directory of sockets";
        if (req->volume_capability->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
                return "volume_capability has no access type: mount is required";
        return NULL;
}

static void node_publish_volume(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct csi *csi = userdata;
        Csi__V1__NodePublishVolumeRequest *req = REQUEST(call, userdata, Csi__V1__NodePublishVolumeRequest,
                                                         csi__v1__node_publish_volume_request__descriptor, msg, size);
        Csi__V1__NodePublishVolumeResponse resp = CSI__V1__NODE_PUBLISH_VOLUME_RESPONSE__INIT;
        char why[CSI_WHY_MAX] = "";
        const char *problem;
        int r;

        if (!req)
                return;
        problem = publish_request_problem(req);
        if (problem) {
                csi_note_refused(csi);
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "%s", problem);
                protobuf_c_message_free_unpacked(&req->base, NULL);
                return;
        }
        r = csi_publish(csi, req->volume_id, req->target_path, why, sizeof(why));
        if (r < 0)
                grpc_call_finish(call, mount_status(r), "%s", why);
        else
                reply(call, &resp.base);
        protobuf_c_message_free_unpacked(&req->base, NULL);
}

static void node_unpublish_volume(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct csi *csi = userdata;
        Csi__V1__NodeUnpublishVolumeRequest *req = REQUEST(
                call, userdata, Csi__V1__NodeUnpublishVolumeRequest, csi__v1__node_unpublish_volume_request__descriptor, msg, size);
        Csi__V1__NodeUnpublishVolumeResponse resp = CSI__V1__NODE_UNPUBLISH_VOLUME_RESPONSE__INIT;
        char why[CSI_WHY_MAX] = "";
        int r;

        if (!req)
                return;
        if (isempty(req->volume_id) || isempty(req->target_path)) {
                csi_note_refused(csi);
                grpc_call_finish(call, GRPC_STATUS_INVALID_ARGUMENT, "%s is missing",
                                 isempty(req->volume_id) ? "volume_id" : "target_path");
                protobuf_c_message_free_unpacked(&req->base, NULL);
                return;
        }
        r = csi_unpublish(csi, req->volume_id, req->target_path, why, sizeof(why));
        if (r < 0)
                grpc_call_finish(call, mount_status(r), "%s", why);
        else
                reply(call, &resp.base);
        protobuf_c_message_free_unpacked(&req->base, NULL);
}

/* None of the optional node RPCs (staging, stats, expansion): publish and unpublish only. */
static void node_get_capabilities(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        Csi__V1__NodeGetCapabilitiesRequest *req = REQUEST(
                call, userdata, Csi__V1__NodeGetCapabilitiesRequest, csi__v1__node_get_capabilities_request__descriptor, msg, size);
        Csi__V1__NodeGetCapabilitiesResponse resp = CSI__V1__NODE_GET_CAPABILITIES_RESPONSE__INIT;

        if (!req)
                return;
        protobuf_c_message_free_unpacked(&req->base, NULL);
        reply(call, &resp.base);
}

static void node_get_info(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct csi *csi = userdata;
        Csi__V1__NodeGetInfoRequest *req = REQUEST(call, userdata, Csi__V1__NodeGetInfoRequest,
                                                   csi__v1__node_get_info_request__descriptor, msg, size);
        Csi__V1__NodeGetInfoResponse resp = CSI__V1__NODE_GET_INFO_RESPONSE__INIT;

        if (!req)
                return;
        protobuf_c_message_free_unpacked(&req->base, NULL);
        resp.node_id = csi->mi->manager->settings.node_name;
        reply(call, &resp.base);
}

static const struct grpc_method node_methods[] = {
        { "/csi.v1.Identity/GetPluginInfo", get_plugin_info },
        { "/csi.v1.Identity/GetPluginCapabilities", get_plugin_capabilities },
        { "/csi.v1.Identity/Probe", probe },
        { "/csi.v1.Node/NodePublishVolume", node_publish_volume },
        { "/csi.v1.Node/NodeUnpublishVolume", node_unpublish_volume },
        { "/csi.v1.Node/NodeGetCapabilities", node_get_capabilities },
        { "/csi.v1.Node/NodeGetInfo", node_get_info },
};

/* ---- the kubelet's plugin registration ---- */

static void get_info(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        struct csi *csi = userdata;
        Pluginregistration__InfoRequest *req = REQUEST(call, userdata, Pluginregistration__InfoRequest,
                                                       pluginregistration__info_request__descriptor, msg, size);
        Pluginregistration__PluginInfo resp = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
        char *versions[] = { (char *) CSI_SPEC_VERSION };

        if (!req)
                return;
        protobuf_c_message_free_unpacked(&req->base, NULL);
        resp.type = (char *) CSI_PLUGIN_TYPE;
        resp.name = csi->settings->name;
        resp.endpoint = csi->settings->socket;
        resp.n_supported_versions = ELEMENTSOF(versions);
        resp.supported_versions = versions;
        reply(call, &resp.base);
}

static void notify_registration_status(struct grpc_call *call, const uint8_t *msg, size_t size, void *userdata) {
        Pluginregistration__RegistrationStatus *req = REQUEST(
                call, userdata, Pluginregistration__RegistrationStatus, pluginregistration__registration_status__descriptor, msg,
                size);
        Pluginregistration__RegistrationStatusResponse resp = PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;

        if (!req)
                return;
        csi_registration_status(userdata, req->plugin_registered, req->error);
        protobuf_c_message_free_unpacked(&req->base, NULL);
        reply(call, &resp.base);
}

static const struct grpc_method registration_methods[] = {
        { "/pluginregistration.Registration/GetInfo", get_info },
        { "/pluginregistration.Registration/NotifyRegistrationStatus", notify_registration_status },
};

/* ---- the servers ---- */

static int serve(struct csi *csi, const char *name, const struct grpc_method *methods, size_t n, const char *path,
                 struct grpc_server **ret) {
        const struct grpc_server_options opts = {
                .name = name,
                .socket_gid = (gid_t) -1, /* root alone is privileged */
                .max_connections = csi->mi->manager->connection_caps.csi, /* fd-limit.h */
                /* NodePublishVolume, its largest request: paths, a volume context of a few keys. */
                .max_recv_message = 64 * 1024,
        };
        _cleanup_(grpc_server_freep) struct grpc_server *s = NULL;
        _cleanup_free_ char *dir = strndup(path, (size_t) (strrchr(path, '/') - path));
        int r;

        if (!dir)
                return -ENOMEM;
        /* The kubelet makes plugins/ and plugins_registry/; a test's or a new node's may be
         * missing. socket_trust_dir_prepare() then judges the directory the socket goes in. */
        if (!isempty(dir)) {
                r = fs_mkdir_p(dir, 0755);
                if (r < 0)
                        return log_module_error_errno(MODULE, r, "Cannot create %s: %m", dir);
        }
        r = grpc_server_new(csi->mi->manager->event, csi->mi->manager->metrics, &opts, &s);
        if (r >= 0)
                r = grpc_server_add_methods(s, methods, n, csi);
        if (r >= 0)
                r = grpc_server_listen(s, path, CSI_SOCKET_MODE);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

int csi_api_start(struct csi *csi) {
        int r;

        r = serve(csi, "csi", node_methods, ELEMENTSOF(node_methods), csi->settings->socket, &csi->node_server);
        if (r < 0)
                return r;
        if (!csi->reg_socket)
                return 0;
        r = serve(csi, "csi-registration", registration_methods, ELEMENTSOF(registration_methods), csi->reg_socket,
                  &csi->reg_server);
        if (r < 0)
                csi->node_server = grpc_server_free(csi->node_server);
        return r;
}

void csi_api_stop(struct csi *csi) {
        csi->reg_server = grpc_server_free(csi->reg_server);
        csi->node_server = grpc_server_free(csi->node_server);
}
