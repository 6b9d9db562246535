import { Option } from "effect"
import type { HttpServerRequest } from "effect/http"
import { formatIp, inRange, type IpAddress, type IpRange, limitedAs, parseIp, parseIpRange } from "./IpAddress.js"

/** Who sent a request, as far as the service can tell. */
export interface ClientAddress {
  /** The address as logged. */
  readonly text: string
  /** The bucket failed authentications count against: the address, or an IPv6 address's /64. */
  readonly limitedAs: string
}

/** `TRUSTED_PROXIES`: comma-separated addresses and CIDR ranges; the bad entries, if any. */
export const parseTrustedProxies = (
  value: string
): { readonly ranges: ReadonlyArray<IpRange>; readonly invalid: ReadonlyArray<string> } => {
  const entries = value.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
  const ranges: Array<IpRange> = []
  const invalid: Array<string> = []
  for (const entry of entries) {
    const range = parseIpRange(entry)
    if (range === undefined) invalid.push(entry)
    else ranges.push(range)
  }
  return { ranges, invalid }
}

/** A forwarded node without its port: `192.0.2.1:80`, `[2001:db8::1]:80` or a bare address. */
const withoutPort = (node: string): string => {
  const value = node.trim().replace(/^"|"$/g, "")
  if (value.startsWith("[")) {
    const end = value.indexOf("]")
    return end === -1 ? value : value.slice(1, end)
  }
  const colon = value.indexOf(":")
  // One colon is IPv4 with a port; more are an IPv6 address.
  return colon !== -1 && colon === value.lastIndexOf(":") ? value.slice(0, colon) : value
}

/** The `for=` nodes of RFC 7239's `Forwarded`, in order. */
const forwardedFor = (header: string): Array<string> => {
  const nodes: Array<string> = []
  for (const element of header.split(",")) {
    for (const pair of element.split(";")) {
      const equals = pair.indexOf("=")
      if (equals !== -1 && pair.slice(0, equals).trim().toLowerCase() === "for") nodes.push(pair.slice(equals + 1))
    }
  }
  return nodes
}

const maxDirectPeers = 4096

const unknown: ClientAddress = { text: "unknown", limitedAs: "unknown" }

const fromAddress = (address: IpAddress): ClientAddress => ({ text: formatIp(address), limitedAs: limitedAs(address) })

/**
 * The client of a request. Without trusted proxies it is the socket's peer, and forwarding headers
 * are ignored (anyone can write them). When the peer is a trusted proxy, the client is the
 * right-most `X-Forwarded-For` (or, without one, `Forwarded: for=`) entry that is not itself a trusted
 * proxy: entries further left were written by whoever sent the request and prove nothing. An entry
 * that is no address (`unknown`, an obfuscated name) stops the walk at the proxy that wrote it.
 */
export const makeClientAddress = (trusted: ReadonlyArray<IpRange>) => {
  const isTrusted = (address: IpAddress) => trusted.some((range) => inRange(address, range))
  // The peers seen lately that are the client themselves, as the request log and the failure
  // limiter name them: parsing and formatting the address again was 2% of a get by id's CPU.
  // Emptied when full, so that a flood of addresses costs bounded memory.
  const directPeers = new Map<string, ClientAddress>()
  return (request: HttpServerRequest.HttpServerRequest): ClientAddress => {
    // Read once: the platform asks the server for the socket's address at each read.
    const remoteAddress = request.remoteAddress
    if (Option.isNone(remoteAddress)) return unknown
    const known = directPeers.get(remoteAddress.value)
    if (known !== undefined) return known
    const peer = parseIp(remoteAddress.value)
    if (peer === undefined) return unknown
    if (trusted.length === 0 || !isTrusted(peer)) {
      const client = fromAddress(peer)
      if (directPeers.size >= maxDirectPeers) directPeers.clear()
      directPeers.set(remoteAddress.value, client)
      return client
    }
    // X-Forwarded-For first: the header common proxies append to. A proxy that writes only one of
    // the two passes the other on as the client sent it, so `Forwarded` counts only without it.
    const xForwardedFor = request.headers["x-forwarded-for"]
    const forwarded = request.headers["forwarded"]
    const chain = xForwardedFor !== undefined
      ? xForwardedFor.split(",")
      : forwarded !== undefined
      ? forwardedFor(forwarded)
      : []
    let hop = peer
    for (let i = chain.length - 1; i >= 0; i--) {
      const address = parseIp(withoutPort(chain[i]!))
      if (address === undefined) break
      hop = address
      if (!isTrusted(address)) break
    }
    return fromAddress(hop)
  }
}
