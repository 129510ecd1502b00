/* SPDX-License-Identifier: Apache-2.0 */
/* Prints the library's ch_version() and the header's CH_VERSION_* macros, for check_version.sh. */
#include <chash.h>

#include <stdio.h>

int main(void)
{
    printf("%s %s %d.%d.%d\n", ch_version(), CH_VERSION_STRING, CH_VERSION_MAJOR, CH_VERSION_MINOR,
           CH_VERSION_PATCH);
    return 0;
}
