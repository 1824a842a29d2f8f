/* SPDX-License-Identifier: MIT */
#pragma once

struct manager;

/* Before any module starts (threads keep the capabilities they were created with): keeps what
 * the enabled modules need, drops everything else, unless [agent] drop-capabilities=no. */
void manager_caps_drop(struct manager *m);
/* After a reload: warns, per module, about a capability the new settings need that was dropped
 * at start (only a restart can grant it). */
void manager_caps_check(struct manager *m);
