/* SPDX-License-Identifier: MIT */
/* The static module table. Adding a job means adding its folder under modules/ and a line here. */

#include "module.h"

extern const struct module apiserver_module;
extern const struct module identity_module;
extern const struct module configsync_module;
extern const struct module zkreg_module;
extern const struct module podnet_module;
extern const struct module reclaim_module;
extern const struct module csi_module;

const struct module *const module_table[] = {
        &apiserver_module, &identity_module, &configsync_module,
        &zkreg_module,     &podnet_module,   &reclaim_module,
        &csi_module,
};

const unsigned module_table_size = ELEMENTSOF(module_table);
