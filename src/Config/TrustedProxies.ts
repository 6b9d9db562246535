import { Array as Arr, Result } from "effect"
import { IpNetwork, NetAddress } from "effect/net"

/** An entry of `TRUSTED_PROXIES`. */
export type IpRange = IpNetwork.IpNetwork

/** An address as a socket or a proxy writes it (IPv6 maybe in brackets or with a zone), not yet canonical. */
export const parseAddress = (text: string): NetAddress.IpAddress | undefined => {
  let value = text.trim()
  if (value.startsWith("[") && value.endsWith("]")) value = value.slice(1, -1)
  const zone = value.indexOf("%")
  return Result.getOrUndefined(NetAddress.ipFromString(zone === -1 ? value : value.slice(0, zone)))
}

/** An address or a CIDR range (`10.0.0.0/8`, `fd00::/8`; a bare address is a range of one). */
const parseNetwork = (entry: string): IpRange | undefined => {
  const [text = "", bits, ...rest] = entry.split("/")
  const address = parseAddress(text)
  if (address === undefined || rest.length > 0 || (bits !== undefined && !/^\d{1,3}$/.test(bits.trim()))) return
  const ip = NetAddress.toCanonical(address)
  // A mapped range (`::ffff:10.0.0.0/104`) names IPv4 peers, which are matched as IPv4.
  const prefix = (bits === undefined ? NetAddress.width(address) : Number(bits)) - NetAddress.width(address)
  return Result.getOrUndefined(IpNetwork.fromAddress(ip, prefix + NetAddress.width(ip)))
}

/** `TRUSTED_PROXIES`: comma-separated addresses and CIDR ranges; the bad entries, if any. */
export const parseTrustedProxies = (value: string) => {
  const entries = value.split(",").map((entry) => entry.trim()).filter((entry) => entry !== "")
  const [ranges, invalid] = Arr.partition(entries, (entry) => Result.fromNullishOr(parseNetwork(entry), () => entry))
  return { ranges, invalid }
}
