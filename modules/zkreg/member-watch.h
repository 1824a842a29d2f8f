/* SPDX-License-Identifier: MIT */
#pragma once

/* member-watch: how the registry notices that someone else deleted a member of ours (it is
 * then created again). One child watch per path that holds members of ours, not one exists
 * watch per member: with a watch on each member, every member we delete ourselves would make
 * the server send us a notification (a burst of 5,000 deletes: 5,000 of them, about as much
 * work for the server as the deletes); a child watch fires once per burst, and is not listed
 * again once no member of ours is left under its path.
 *
 * Each path's watch is a state machine (transitions logged at debug):
 *
 *   LISTING    a list of the path's children that leaves a watch is queued or in flight
 *              (zk_ops_watch_children: after the writes in flight)
 *   ARMED      its answer came: every member of ours under the path was compared with it
 *              (one missing was deleted by someone else), and the server holds our watch
 *   UNWATCHED  the list could not be made (no session, or an error): listed again on the
 *              next connect or when a member is added
 *
 *   ARMED --child event--> LISTING --answer--> ARMED; LISTING --no answer--> UNWATCHED
 *
 * Why one list is enough: ZooKeeper answers one session's requests in order, so a member we
 * know of when the list's answer arrives was created (or read) before the list was made: if
 * the list lacks it, it was deleted since. A change under an ARMED path fires the watch before
 * its own answer reaches us, so a member we create there finds the path LISTING again. An
 * event while LISTING comes from a change made before the list, which its answer shows. */

#include <stddef.h>

#include "zk-session.h"

struct registry;
struct registration;

/* reg->znode was just set: the member is ours (created or adopted). */
void member_watch_add(struct registration *reg);
/* reg->znode is about to be forgotten. */
void member_watch_remove(struct registration *reg);
/* A node event of the session (the registry's zk_session_set_node_event hook). */
void member_watch_event(struct registry *r, int type, const char *path);
/* The session changed state (after the registrations took it in): CONNECTED lists every
 * UNWATCHED path again. */
void member_watch_session_changed(struct registry *r, enum zk_session_state new);
/* Members of ours under an ARMED path: a delete by someone else is noticed at once. */
size_t member_watch_armed_members(const struct registry *r);
