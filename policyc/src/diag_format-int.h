/* diag_format-int.h - the four diagnostic printers behind pc_diagnostics_print. */
#ifndef POLICYC_DIAG_FORMAT_INT_H
#define POLICYC_DIAG_FORMAT_INT_H

#include <stdio.h>

#include "diagnostics.h"

ph_status pc_format_text(FILE *out, const pc_diagnostics *d);
ph_status pc_format_json(FILE *out, const pc_diagnostics *d);
ph_status pc_format_sarif(FILE *out, const pc_diagnostics *d);
ph_status pc_format_github(FILE *out, const pc_diagnostics *d);

/* Writes s escaped as a GitHub workflow command wants it: '%', CR and LF
 * always, ':' and ',' too inside a property (property true). */
void pc_github_escape(FILE *out, const char *s, bool property);

/* "error" or "warning". */
const char *pc_severity_name(pc_severity s);

#endif
