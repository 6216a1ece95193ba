/*
 * pinhole/abi.h - the layout of the public structs, for bindings that mirror
 * them in another language (the Python package's ctypes structures).
 *
 * A binding compares its own sizes and field offsets with these at load and
 * refuses to run on a mismatch, so a libpinhole built from other headers is
 * an error at import, not memory corruption at the first call.
 */
#ifndef PINHOLE_ABI_H
#define PINHOLE_ABI_H

#include <stddef.h>

#include "pinhole/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What ph_abi_struct_size and ph_abi_field_offset return for a name they
 * do not know. */
#define PH_ABI_UNKNOWN ((size_t)-1)

/* sizeof the public struct named name (its typedef name, e.g.
 * "ph_verdict"), or PH_ABI_UNKNOWN. name is borrowed for the call. */
PH_API size_t ph_abi_struct_size(const char *name);

/* offsetof(struct_name, field), or PH_ABI_UNKNOWN for a struct or field not
 * in the table. Both names borrowed for the call. */
PH_API size_t ph_abi_field_offset(const char *struct_name, const char *field);

#ifdef __cplusplus
}
#endif
#endif /* PINHOLE_ABI_H */
