/* SPDX-License-Identifier: MIT */
#pragma once

/* Facts modules publish on the manager (manager_publish/manager_lookup) for other modules:
 * the name and the type of each, so publisher and reader agree without including each other. */

/* identity → apiserver: the node's client certificate, once bootstrapped. */
#define FACT_NODE_CREDENTIALS "node-credentials"
struct node_credentials {
        const char *cert_file; /* PEM certificate chain */
        const char *key_file;  /* PEM private key */
};
