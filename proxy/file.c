/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file.c — regular files only (file.h).
 */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t mode)
{
    return S_ISFIFO(mode)  ? "a FIFO"
           : S_ISDIR(mode) ? "a directory"
           : S_ISCHR(mode) ? "a character device"
           : S_ISBLK(mode) ? "a block device"
           : S_ISSOCK(mode) ? "a socket"
                            : "not a file";
}

int px_file_open_regular(const char *path, const char *what, char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        snprintf(why, whylen, "%s '%s': %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(why, whylen, "%s '%s': %s", what, path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "%s '%s': not a regular file (%s), refused: reading it could block",
                 what, path, kind_of(st.st_mode));
        close(fd);
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        snprintf(why, whylen, "%s '%s': %s", what, path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int px_file_check_regular(const char *path, const char *what, char *why, size_t whylen)
{
    int fd = px_file_open_regular(path, what, why, whylen);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}
