/*
 * pinhole/execd_as_port.h - compiles code written against the in-process
 * ports (pinhole/sandbox.h, pinhole/workspace.h, pinhole/sandbox_lease.h)
 * against pinhole-execd instead: every name of the three ports that the
 * service serves is mapped onto its ph_execd_ twin (pinhole/execd_client.h),
 * so the same source runs in-process or remote. Include it before anything
 * else (e.g. `-include pinhole/execd_as_port.h`); link pinhole_execd_client.
 * ph_execution_service_open uses $PINHOLE_EXECD_SOCKET.
 * Names that are the same on both sides (the result, list and limits
 * helpers, mechanism names) are left alone.
 */
#ifndef PINHOLE_EXECD_AS_PORT_H
#define PINHOLE_EXECD_AS_PORT_H

#include "pinhole/execd_client.h"
#include "pinhole/sandbox.h"
#include "pinhole/sandbox_lease.h"
#include "pinhole/workspace.h"

#define ph_execution_service ph_execd_service
#define ph_environment ph_execd_environment
#define ph_workspace ph_execd_workspace
#define ph_sandbox_lease ph_execd_lease

#define ph_execution_service_open ph_execd_service_open_default
#define ph_execution_service_close ph_execd_service_close
#define ph_sandbox_mechanism_available ph_execd_mechanism_available

#define ph_environment_create ph_execd_environment_create
#define ph_environment_execute ph_execd_environment_execute
#define ph_environment_destroy ph_execd_environment_destroy
#define ph_environment_workspace ph_execd_environment_workspace
#define ph_environment_id ph_execd_environment_id

#define ph_workspace_close ph_execd_workspace_close
#define ph_workspace_stat ph_execd_workspace_stat
#define ph_workspace_read ph_execd_workspace_read
#define ph_workspace_open_read ph_execd_workspace_open_read
#define ph_workspace_write ph_execd_workspace_write
#define ph_workspace_write_fd ph_execd_workspace_write_fd
#define ph_workspace_list ph_execd_workspace_list

#define ph_sandbox_lease_open ph_execd_lease_open
#define ph_sandbox_lease_environment ph_execd_lease_environment
#define ph_sandbox_lease_workspace ph_execd_lease_workspace
#define ph_sandbox_lease_has_sandbox ph_execd_lease_has_sandbox
#define ph_sandbox_lease_hold_begin ph_execd_lease_hold_begin
#define ph_sandbox_lease_hold_tick ph_execd_lease_hold_tick
#define ph_sandbox_lease_hold_end ph_execd_lease_hold_end
#define ph_sandbox_lease_end ph_execd_lease_end

#endif
