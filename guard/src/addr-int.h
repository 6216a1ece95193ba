/* addr-int.h - the denylist table shared by addr_blocks.c (the data) and
 * addr_denylist.c (the lookup). Private to libpinhole. */
#ifndef PINHOLE_ADDR_INT_H
#define PINHOLE_ADDR_INT_H

#include <stddef.h>

#include "pinhole/addr.h"

/* Every block, IPv4 then IPv6, each sorted by address then prefix length. */
extern const ph_addr_block ph_addr_blocks[];
extern const size_t ph_addr_blocks_len;

#endif
