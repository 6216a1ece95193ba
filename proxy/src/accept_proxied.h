/* accept_proxied.h - connections on a TCP listener when --proxy-protocol
 * names the load balancers in front of the proxy: a balancer's connection
 * starts with a PROXY protocol v2 header (proxy_protocol.h) naming the
 * client, and the connection is then the client's (conn.h) for every
 * per-peer limit, log line and metric. */
#ifndef PX_ACCEPT_PROXIED_H
#define PX_ACCEPT_PROXIED_H

#include <sys/socket.h>

struct px_worker;
struct px_proxied;

/* A connection accepted on one of w's TCP listeners (fd non-blocking, now
 * ours) with cfg->proxy_protocol set:
 *   - from a source in cfg->proxy_protocol: its PROXY header is read (at
 *     once when it is there, as TCP_DEFER_ACCEPT makes likely; else
 *     without blocking the loop, under the head deadline, holding an
 *     overall connection and head slot meanwhile), then px_conn_accept
 *     with the client it names (LOCAL, UNSPEC: the source itself). A
 *     missing (proxy_protocol_missing), malformed or cut short
 *     (proxy_protocol_malformed) or late (http_head_timeout) header is
 *     refused: answered, closed, counted and logged with the source;
 *   - from any other source: a connection whose first bytes are a whole
 *     PROXY signature is refused (proxy_protocol_untrusted); any other is
 *     the source's own connection (px_conn_accept). */
void px_proxied_accept(struct px_worker *w, int fd, const struct sockaddr *peer);
/* Closes every connection of w whose header is still arriving (drain,
 * shutdown), each logged end=shutdown. */
void px_proxied_close_all(struct px_worker *w);

#endif
