import { Option, Result } from "effect"
import type { HttpServerRequest } from "effect/http"
import { IpNetwork, NetAddress } from "effect/net"
import { type IpRange, parseAddress } from "../Config/TrustedProxies.js"

// Read as a setting in Config/, where the settings are checked; offered here with the addresses it ranges over.
export { parseTrustedProxies } from "../Config/TrustedProxies.js"

/** Who sent a request: the address as logged, and the bucket its failed authentications count against. */
export interface ClientAddress {
  readonly text: string
  readonly limitedAs: string
}

/** An address, an IPv4-mapped one (a dual-stack socket's IPv4 peer) as IPv4; undefined if it is none. */
export const parseIp = (text: string): NetAddress.IpAddress | undefined => {
  const address = parseAddress(text)
  return address === undefined ? undefined : NetAddress.toCanonical(address)
}

/** A forwarded node, maybe quoted and with a port: `192.0.2.1:80`, `"[2001:db8::1]:80"` or a bare address. */
const nodeAddress = (node: string): NetAddress.IpAddress | undefined => {
  const value = node.trim().replace(/^"|"$/g, "")
  // A bare address first, the common case: a failed parse costs an error object.
  const address = parseIp(value)
  if (address !== undefined) return address
  const inet = Result.getOrUndefined(NetAddress.inetAddressFromString(value))
  return inet === undefined ? undefined : NetAddress.toCanonical(inet.address)
}

/** The `for=` nodes of RFC 7239's `Forwarded`, in order. */
const forwardedFor = (header: string): Array<string> =>
  Array.from(header.matchAll(/(?:^|[;,])\s*for\s*=([^;,]*)/gi), (match) => match[1]!)

const maxDirectPeers = 4096

const unknown: ClientAddress = { text: "unknown", limitedAs: "unknown" }

// An IPv6 client is limited by its /64: one subscriber is commonly handed a whole /64.
const fromAddress = (address: NetAddress.IpAddress): ClientAddress => ({
  text: NetAddress.formatIp(address),
  limitedAs: NetAddress.isIpv4Address(address)
    ? NetAddress.formatIp(address)
    : IpNetwork.format(IpNetwork.fromAddressUnsafe(address, 64))
})

/**
 * The peer or, behind a trusted proxy, the right-most `X-Forwarded-For` (else `Forwarded: for=`) entry that is not one:
 * entries further left prove nothing; a non-address stops the walk at the proxy that wrote it.
 */
export const makeClientAddress = (trusted: ReadonlyArray<IpRange>) => {
  const isTrusted = (address: NetAddress.IpAddress) => trusted.some((range) => IpNetwork.contains(range, address))
  // Direct peers kept formatted, not parsed at every request; emptied when full, so a flood costs bounded memory.
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
    // A proxy that writes only one of the two headers passes the other on as the client sent it.
    const xForwardedFor = request.headers["x-forwarded-for"]
    const forwarded = request.headers["forwarded"]
    const chain = xForwardedFor !== undefined
      ? xForwardedFor.split(",")
      : forwarded !== undefined
      ? forwardedFor(forwarded)
      : []
    let hop = peer
    for (let i = chain.length - 1; i >= 0; i--) {
      const address = nodeAddress(chain[i]!)
      if (address === undefined) break
      hop = address
      if (!isTrusted(address)) break
    }
    return fromAddress(hop)
  }
}
