/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resolve.c — px_resolve (resolve.h).
 */
#include "resolve.h"

#include <netdb.h>
#include <stdio.h>
#include <string.h>

int px_resolve(const char *host, int port, bool passive, struct sockaddr_storage *out,
               socklen_t *outlen, char *why, size_t whylen)
{
    char service[16];
    snprintf(service, sizeof(service), "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = passive ? AI_PASSIVE : 0};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0 || res == NULL || res->ai_addrlen > sizeof(*out)) {
        snprintf(why, whylen, "%s", rc != 0 ? gai_strerror(rc) : "no address");
        if (res != NULL)
            freeaddrinfo(res);
        return -1;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out, res->ai_addr, res->ai_addrlen);
    if (outlen != NULL)
        *outlen = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}
