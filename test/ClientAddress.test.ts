import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import { HttpServerRequest } from "effect/http"
import { NetAddress } from "effect/net"
import { makeClientAddress, parseIp, parseTrustedProxies } from "../src/Request/ClientAddress.js"

const request = (peer: string, headers: Record<string, string> = {}) =>
  HttpServerRequest.fromWeb(new Request("http://petstore.test/v1/pets", { headers })).modify({
    remoteAddress: Option.some(peer)
  })

const behind = (trusted: string) => makeClientAddress(parseTrustedProxies(trusted).ranges)

describe("TRUSTED_PROXIES", () => {
  it("takes comma-separated IPv4 and IPv6 addresses and CIDR ranges", () => {
    const { ranges, invalid } = parseTrustedProxies(" 10.0.0.0/8, 192.0.2.7 ,fd00::/8,::1, 2001:db8::/32 ")
    expect(invalid).toEqual([])
    expect(ranges).toHaveLength(5)
    expect(parseTrustedProxies("").ranges).toEqual([])
  })

  it("names every entry that is no address or range", () => {
    expect(parseTrustedProxies("10.0.0.0/8, proxy.internal, 10.0.0.0/33, 1.2.3, ::1/129, 010.0.0.1").invalid).toEqual([
      "proxy.internal",
      "10.0.0.0/33",
      "1.2.3",
      "::1/129",
      "010.0.0.1"
    ])
  })
})

describe("the client's address", () => {
  it("is the peer when no proxy is trusted, whatever the forwarding headers say", () => {
    const client = behind("")(
      request("198.51.100.7", { "x-forwarded-for": "203.0.113.1", forwarded: "for=203.0.113.2" })
    )
    expect(client).toEqual({ text: "198.51.100.7", limitedAs: "198.51.100.7" })
  })

  it("is the peer when the peer is not a trusted proxy", () => {
    expect(behind("10.0.0.0/8")(request("198.51.100.7", { "x-forwarded-for": "203.0.113.1" })).text).toBe(
      "198.51.100.7"
    )
  })

  it("behind a trusted proxy, is the right-most X-Forwarded-For entry that is not a trusted proxy", () => {
    const address = behind("10.0.0.0/8, 192.0.2.7")
    // The client wrote the first entry itself; the proxies appended the rest.
    const forwarded = request("10.0.0.2", { "x-forwarded-for": "1.1.1.1, 203.0.113.9, 192.0.2.7, 10.0.0.1" })
    expect(address(forwarded).text).toBe("203.0.113.9")
    expect(address(request("10.0.0.2", { "x-forwarded-for": "203.0.113.9:5173" })).text).toBe("203.0.113.9")
    // Only proxies in the chain: the one furthest out is the client.
    expect(address(request("10.0.0.2", { "x-forwarded-for": "10.0.0.9, 10.0.0.1" })).text).toBe("10.0.0.9")
    // No header: the proxy itself is the client.
    expect(address(request("10.0.0.2")).text).toBe("10.0.0.2")
  })

  it("reads RFC 7239 Forwarded for= the same way when there is no X-Forwarded-For", () => {
    const address = behind("10.0.0.0/8")
    const forwarded = `for=1.1.1.1;proto=https, for="[2001:db8:cafe::17]:4711";by=10.0.0.1, For=10.0.0.1`
    expect(address(request("10.0.0.2", { forwarded })).text).toBe("2001:db8:cafe::17")
    // A proxy appending to X-Forwarded-For passes on a Forwarded the client wrote: it proves nothing.
    expect(address(request("10.0.0.2", { forwarded, "x-forwarded-for": "198.51.100.1" })).text).toBe("198.51.100.1")
  })

  it("stops at an entry that is no address, and takes the proxy that wrote it", () => {
    const address = behind("10.0.0.0/8")
    expect(address(request("10.0.0.2", { "x-forwarded-for": "203.0.113.9, unknown, 10.0.0.1" })).text).toBe("10.0.0.1")
    expect(address(request("10.0.0.2", { forwarded: "for=_hidden" })).text).toBe("10.0.0.2")
  })

  it("limits IPv6 clients by their /64, IPv4 clients by their address", () => {
    const address = behind("")
    expect(address(request("2001:db8:1:2:aaaa::1")).limitedAs).toBe("2001:db8:1:2::/64")
    expect(address(request("2001:db8:1:2:bbbb:cccc:dddd:eeee")).limitedAs).toBe("2001:db8:1:2::/64")
    expect(address(request("2001:db8:1:3::1")).limitedAs).toBe("2001:db8:1:3::/64")
    // An IPv4 peer on a dual-stack socket is shown as IPv4.
    expect(address(request("::ffff:192.0.2.1"))).toEqual({ text: "192.0.2.1", limitedAs: "192.0.2.1" })
  })

  it("reads and writes IPv6 in its usual forms", () => {
    for (
      const [text, canonical] of [
        ["2001:DB8:0:0:0:0:0:1", "2001:db8::1"],
        ["::", "::"],
        ["::1", "::1"],
        ["fe80::1%eth0", "fe80::1"],
        ["[2001:db8::8]", "2001:db8::8"],
        ["2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"],
        ["2001:0:0:1::1", "2001:0:0:1::1"],
        ["64:ff9b::192.0.2.33", "64:ff9b::c000:221"]
      ]
    ) expect(NetAddress.formatIp(parseIp(text!)!), text).toBe(canonical)
    for (const text of ["1::2::3", "12345::", "1:2:3:4:5:6:7:8:9", "g::1", "", "1.2.3.256"]) {
      expect(parseIp(text), text).toBeUndefined()
    }
  })
})
