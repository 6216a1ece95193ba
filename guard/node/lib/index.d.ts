// Type declarations of @pinhole/guard (lib/index.js).
import type { Agent } from 'undici';
import type * as http from 'node:http';
import type * as https from 'node:https';

/** Every refusal and every failed call of the package. */
export declare class PinholeError extends Error {
  constructor(message: string, reason: string, detail?: string);
  /** The stable reason code ("not_allowlisted", "denied_address",
   * "ip_literal", "redirect_limit", ... docs/worker.md), or "guard_error"
   * when a call could not do its job (then .status names the ph_status). */
  readonly reason: string;
  /** One line for the log. */
  readonly detail: string;
  readonly status?: string;
}

export interface GuardOptions {
  /** "ip[:port][,ip[:port]...]"; default: the system's resolv.conf. */
  dnsServers?: string;
  dnsTimeoutMs?: number;
  /** How often at most to look for a replaced table (default 1000; 0: only reload()). */
  reloadIntervalMs?: number;
  dnsCache?: boolean;
  dnsCacheEntries?: number;
  dnsCacheMaxTtlS?: number;
  dnsNegativeTtlS?: number;
  /** Resolutions in flight on this guard (default 256); one more is refused: limit_exceeded. */
  maxPending?: number;
}

export interface Rule {
  list: string;
  host: string;
  file: string;
  line: number;
  reason: string;
}

export interface Decision {
  allowed: boolean;
  reason: string;
  detail: string;
  /** When refused: the parser's or the lookup's own message (what the check CLIs print). */
  verdictDetail?: string;
  httpStatus: number;
  scheme: 'http' | 'https' | '';
  host: string;
  port: number;
  policyId: string;
  rule: Rule | null;
}

export interface Resolution extends Decision {
  addresses: { address: string; family: 4 | 6 }[];
  fromCache: boolean;
}

export interface RedirectOptions {
  maxHops?: number;
  allowDowngrade?: boolean;
  resendBody?: boolean;
  allowBodyCrossOrigin?: boolean;
}

export interface RedirectVerdict {
  allowed: boolean;
  reason: string;
  detail: string;
  url: string;
  sameOrigin: boolean;
  dropCredentials: boolean;
}

export declare class Guard {
  constructor(tablePath: string, options?: GuardOptions);
  decide(url: string | URL, list?: string): Decision;
  resolve(url: string | URL, list?: string): Promise<Resolution>;
  redirectCheck(fromUrl: string, location: string, hop: number, list?: string,
                options?: RedirectOptions): RedirectVerdict;
  reload(): { reloaded: boolean; generation: number; policyId: string };
  close(): void;
}

export interface GuardedFetchOptions {
  /** Redirects one chain may follow (default 10, at least 1; redirect: "manual" follows none). */
  maxRedirects?: number;
  /** One deadline for every hop up to the final response head (default 30000). */
  timeoutMs?: number;
  connectTimeoutMs?: number;
  allowDowngrade?: boolean;
  allowBodyCrossOrigin?: boolean;
  /** Extra trusted CA certificates (PEM) for https, beside Node's own. */
  ca?: string | Buffer | Array<string | Buffer>;
}

export type GuardedFetch = ((input: string | URL | Request, init?: RequestInit) => Promise<Response>) & {
  readonly agent: Agent;
};

export declare function guardedFetch(guard: Guard, list?: string, options?: GuardedFetchOptions): GuardedFetch;
export declare function headerFollows(name: string, sameOrigin: boolean, bodyFollows: boolean): boolean;
export declare function nextMethod(status: number, method: string): string;
export declare const REDIRECT_STATUSES: ReadonlySet<number>;
export declare const BODY_DISCARD_MAX: number;

export interface GuardedAgentOptions {
  /** An https.Agent (default: an http.Agent). */
  https?: boolean;
  /** Extra trusted CA certificates (PEM) for https, beside Node's own. */
  ca?: string | Buffer | Array<string | Buffer>;
  connectTimeoutMs?: number;
  keepAlive?: boolean;
  keepAliveMsecs?: number;
  maxSockets?: number;
  maxFreeSockets?: number;
  timeout?: number;
}

export declare function guardedAgent(guard: Guard, list?: string,
                                     options?: GuardedAgentOptions & { https?: false }): http.Agent;
export declare function guardedAgent(guard: Guard, list: string,
                                     options: GuardedAgentOptions & { https: true }): https.Agent;
/** True when the loaded libpinhole is the test build exempting loopback. */
export declare const testLoopback: boolean;
/** PH_URL_MAX_LEN: the longest URL the guard decides. */
export declare const URL_MAX_LEN: number;
