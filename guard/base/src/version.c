/* version.c - the library's own version (pinhole/version.h). */
#include "pinhole/version.h"

const char *ph_version(void)
{
    return PH_VERSION_STRING;
}
