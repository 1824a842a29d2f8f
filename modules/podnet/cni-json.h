/* SPDX-License-Identifier: MIT */
#pragma once

/* The CNI protocol's JSON side, the daemon's (cJSON): the network config's tree and checks, the
 * POST /v1/cni body's parser, errors and VERSION as cJSON objects. The rest is cni.h. */

#include <cjson/cJSON.h>

#include "cni.h"

void cni_json_request_done(struct cni_request *r);

/* Parses the network config (stdin) into r: code 6 if not JSON, 7 if invalid (runtimeConfig
 * "ips" included), 1 if the cniVersion is not supported (or too old for the command). */
int cni_json_parse_config(struct cni_request *r, const char *text, size_t size, struct cni_error *err);

/* The POST /v1/cni body's parser (cni_request_body() writes it). */
int cni_json_parse_request(struct cni_request *r, const char *text, size_t size, struct cni_error *err);

/* {"cniVersion", "code", "msg", "details"} */
cJSON *cni_json_error(const struct cni_error *e, const char *cni_version);
/* {"cniVersion", "supportedVersions": [...]} */
cJSON *cni_json_version_result(const char *cni_version);
