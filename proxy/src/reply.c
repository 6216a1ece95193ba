/* reply.c - the proxy's own answers (reply.h). */
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "reply.h"

static const char *status_text(int status)
{
    switch (status) {
    case 200: return "Connection Established";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 405: return "Method Not Allowed";
    case 407: return "Proxy Authentication Required";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Error";
    }
}

size_t px_format_refusal(char *buf, size_t cap, int status, ph_reason reason, const char *body)
{
    int n = snprintf(buf, cap,
                     "HTTP/1.1 %d %s\r\n"
                     "Pinhole-Reason: %s\r\n"
                     "%s"
                     "Content-Type: text/plain\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s\n",
                     status, status_text(status), ph_reason_code(reason),
                     status == 407 ? "Proxy-Authenticate: Basic realm=\"pinhole\"\r\n" : "",
                     strlen(body) + 1, body);
    return n < 0 ? 0 : ((size_t)n < cap ? (size_t)n : cap - 1);
}

void px_refuse_socket(int fd, ph_reason reason, const char *why)
{
    char resp[400], body[200], sink[4096];
    snprintf(body, sizeof body, "pinhole: %s: %s", ph_reason_code(reason), why);
    size_t n = px_format_refusal(resp, sizeof resp, ph_reason_http_status(reason), reason, body);
    /* What already arrived is read first: closing on unread bytes would
     * reset the connection under the answer. */
    ssize_t rd = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
    (void)rd;
    ssize_t wr = send(fd, resp, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)wr;
    close(fd);
}

