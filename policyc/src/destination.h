/* destination.h - "host:port" as explain and test cases write it, and the
 * shared text forms of ports and rules. */
#ifndef POLICYC_DESTINATION_H
#define POLICYC_DESTINATION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pinhole/table.h"

#define PC_DEST_HOST_MAX 256

/* Splits s at its last ':' into host (copied, NUL-terminated; at most
 * PC_DEST_HOST_MAX-1 bytes) and a port 1..65535 written in decimal without
 * sign or leading zero. The host is not validated here: the table lookup
 * judges it. Returns false with *why set to a static message. */
bool pc_parse_destination(const char *s, char host[static PC_DEST_HOST_MAX], uint16_t *port,
                          const char **why);

/* Writes rule i's ports as "443, 8000-8010" into buf (truncated to cap). */
void pc_format_rule_ports(const ph_table *t, size_t rule, char *buf, size_t cap);

/* Looks host:port up in list, explaining a denial; a non-canonical host is
 * reported as the guard would refuse it (ip_literal or parse_error). */
ph_status pc_explain_destination(const ph_table *t, const char *list, const char *host,
                                 uint16_t port, ph_table_explanation *out);

#endif
