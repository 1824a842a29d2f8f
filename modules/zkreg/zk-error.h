/* SPDX-License-Identifier: MIT */
#pragma once

/* ZooKeeper's return codes (ZOK, ZNONODE, ...): as negative errno, as names for metrics, and
 * whether one is about the connection rather than the node. */

#include <stdbool.h>

#include <zookeeper/zookeeper.h>

/* ZooKeeper's return codes as negative errno (ZNONODE → -ENOENT, ZNODEEXISTS → -EEXIST,
 * ZCONNECTIONLOSS → -ECONNRESET, ZSESSIONEXPIRED → -ETIME, ZOPERATIONTIMEOUT → -ETIMEDOUT,
 * ZCLOSING / ZINVALIDSTATE → -ENOTCONN, ZNOAUTH → -EACCES, ...). */
int zk_error_to_errno(int rc);
/* A short stable name for metrics: "ok", "no_node", "node_exists", "connection_loss", ... */
const char *zk_error_name(int rc);
/* rc is about the connection or the session (the operation may or may not have happened), not
 * an answer from the server about the node. */
bool zk_error_is_connection(int rc);
