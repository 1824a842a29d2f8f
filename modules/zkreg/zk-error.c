/* SPDX-License-Identifier: MIT */
/* ZooKeeper's return codes, as the rest of the module speaks of them (see zk-error.h). */

#include <errno.h>

#include "zk-error.h"

int zk_error_to_errno(int rc) {
        switch (rc) {
        case ZOK:
                return 0;
        case ZNONODE:
                return -ENOENT;
        case ZNODEEXISTS:
                return -EEXIST;
        case ZNOTEMPTY:
                return -ENOTEMPTY;
        case ZBADVERSION:
                return -ESTALE;
        case ZCONNECTIONLOSS:
                return -ECONNRESET;
        case ZSESSIONEXPIRED:
                return -ETIME;
        case ZOPERATIONTIMEOUT:
                return -ETIMEDOUT;
        case ZCLOSING:
        case ZINVALIDSTATE:
                return -ENOTCONN;
        case ZNOAUTH:
        case ZAUTHFAILED:
        case ZINVALIDACL:
                return -EACCES;
        case ZBADARGUMENTS:
                return -EINVAL;
        case ZMARSHALLINGERROR:
                return -ENOMEM;
        case ZNOCHILDRENFOREPHEMERALS:
                return -ENOTDIR;
        case ZTHROTTLEDOP:
                return -EAGAIN;
        default:
                return -EIO;
        }
}

const char *zk_error_name(int rc) {
        switch (rc) {
        case ZOK:
                return "ok";
        case ZNONODE:
                return "no_node";
        case ZNODEEXISTS:
                return "node_exists";
        case ZNOTEMPTY:
                return "not_empty";
        case ZBADVERSION:
                return "bad_version";
        case ZCONNECTIONLOSS:
                return "connection_loss";
        case ZSESSIONEXPIRED:
                return "session_expired";
        case ZOPERATIONTIMEOUT:
                return "timeout";
        case ZCLOSING:
        case ZINVALIDSTATE:
                return "not_connected";
        case ZNOAUTH:
        case ZAUTHFAILED:
        case ZINVALIDACL:
                return "denied";
        default:
                return "error";
        }
}

bool zk_error_is_connection(int rc) {
        return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSESSIONEXPIRED || rc == ZCLOSING ||
               rc == ZINVALIDSTATE || rc == ZSESSIONMOVED;
}
