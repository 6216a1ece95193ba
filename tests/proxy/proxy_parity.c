/* proxy_parity.c - the guard/proxy parity check (DESIGN section 2: one
 * decision implementation). Every input of the guard's hostile destination
 * corpus (tests/data/urls/hostile.tsv, both columns "url" and "authority"
 * used as CONNECT targets) is decided twice: by the guard
 * (ph_guard_check_authority on the table) and by a running proxy (CONNECT
 * with a valid grant; its Pinhole-Reason). The reason codes must be equal.
 *
 *   proxy_parity TABLE LIST PROXY_PORT AUTH
 * Prints each mismatch; exit 0 when none (and at least 50 inputs ran).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "pinhole/guard.h"
#include "url_tsv.h"

/* Sends one CONNECT and returns the Pinhole-Reason ("allowed" on 200). */
static void ask_proxy(int port, const char *auth, const char *target, size_t tlen, char *reason,
                      size_t cap)
{
    snprintf(reason, cap, "no-answer");
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return;
    }
    size_t rcap = tlen + strlen(auth) + 128;
    char *req = malloc(rcap);
    if (req == NULL) {
        close(fd);
        return;
    }
    size_t n = (size_t)snprintf(req, rcap, "CONNECT ");
    memcpy(req + n, target, tlen);
    n += tlen;
    n += (size_t)snprintf(req + n, rcap - n, " HTTP/1.1\r\nProxy-Authorization: Bearer %s\r\n\r\n",
                          auth);
    ssize_t w = write(fd, req, n);
    free(req);
    if (w != (ssize_t)n) {
        close(fd);
        return;
    }
    char resp[4096];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof resp - 1 && (r = read(fd, resp + got, sizeof resp - 1 - got)) > 0) {
        got += (size_t)r;
        resp[got] = '\0';
        if (strstr(resp, "\r\n\r\n"))
            break;
    }
    resp[got] = '\0';
    close(fd);
    if (strncmp(resp, "HTTP/1.1 200", 12) == 0) {
        snprintf(reason, cap, "allowed");
        return;
    }
    const char *h = strstr(resp, "\r\nPinhole-Reason: ");
    if (h) {
        h += strlen("\r\nPinhole-Reason: ");
        size_t k = strcspn(h, "\r\n");
        snprintf(reason, cap, "%.*s", (int)k, h);
    }
}

typedef struct parity {
    ph_guard *guard;
    const char *list, *auth, *file;
    int port;
    unsigned ran, mismatches;
} parity;

static void row(char **cols, size_t ncol, unsigned line, void *ctx)
{
    parity *p = ctx;
    static char target[20000];
    if (ncol < 3)
        return;
    size_t tlen = url_tsv_unescape(cols[2], target, sizeof target, p->file, line);
    ph_verdict v;
    ph_guard_check_authority(p->guard, p->list, target, tlen, &v, NULL);
    const char *want = v.allowed ? "allowed" : ph_reason_code(v.reason);
    char got[64];
    ask_proxy(p->port, p->auth, target, tlen, got, sizeof got);
    p->ran++;
    if (strcmp(want, got) != 0) {
        p->mismatches++;
        printf("MISMATCH %s:%u (%s %s): guard %s, proxy %s\n", p->file, line, cols[0], cols[2],
               want, got);
    }
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: proxy_parity TABLE LIST PROXY_PORT AUTH\n");
        return 2;
    }
    parity p = { .list = argv[2], .port = atoi(argv[3]), .auth = argv[4] };
    ph_diag d = { 0 };
    if (ph_guard_open(argv[1], NULL, &p.guard, &d) != PH_OK) {
        fprintf(stderr, "guard: %s\n", d.message);
        return 1;
    }
    static const char *const corpora[] = { "hostile.tsv", "differential.tsv" };
    for (size_t i = 0; i < sizeof corpora / sizeof corpora[0]; i++) {
        p.file = corpora[i];
        url_tsv_for_each_row(corpora[i], row, &p);
    }
    ph_guard_close(&p.guard);
    printf("%u inputs, %u mismatches\n", p.ran, p.mismatches);
    return (p.mismatches == 0 && p.ran >= 50) ? 0 : 1;
}
