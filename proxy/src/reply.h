/* reply.h - what the proxy itself answers a client: the refusal every front
 * end and the admin listener write (status line, Pinhole-Reason, a one-line
 * body, Connection: close). No state; includes nothing of the proxy's. */
#ifndef PX_REPLY_H
#define PX_REPLY_H

#include <stddef.h>

#include "pinhole/status.h"

/* A refusal response: status line for status, Pinhole-Reason, body, and
 * Connection: close (a 407 adds Proxy-Authenticate). Returns its length in
 * buf (truncated to cap - 1). */
size_t px_format_refusal(char *buf, size_t cap, int status, ph_reason reason, const char *body);
/* Answers a refusal for reason ("pinhole: <code>: why", the guard's status
 * for it) on a socket no connection holds yet (a limit at accept) and
 * closes fd: what already arrived is read first, so the close does not
 * reset the answer away. */
void px_refuse_socket(int fd, ph_reason reason, const char *why);

#endif
