/**
 * IP addresses as 16 bytes (IPv4 as its IPv4-mapped IPv6 form, `::ffff:a.b.c.d`), so one range
 * check serves both families, and address ranges (CIDR) to match them against.
 */
export type IpAddress = Uint8Array

export interface IpRange {
  readonly address: IpAddress
  /** Leading bits that must match, counted on the 16-byte form. */
  readonly prefix: number
}

const ipv4Part = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/

const parseIpv4 = (text: string, into: Uint8Array, at: number): boolean => {
  const match = ipv4Part.exec(text)
  if (match === null) return false
  for (let i = 0; i < 4; i++) {
    const part = match[i + 1]!
    const byte = Number(part)
    // No leading zeros: "010" reads as octal to some parsers and decimal to others.
    if (byte > 255 || (part.length > 1 && part[0] === "0")) return false
    into[at + i] = byte
  }
  return true
}

const hexGroup = /^[0-9a-f]{1,4}$/i

const parseIpv6 = (text: string): IpAddress | undefined => {
  let value = text
  // An embedded IPv4 address (`::ffff:192.0.2.1`) is the last two groups, written in decimal.
  const lastColon = value.lastIndexOf(":")
  if (value.indexOf(".", lastColon) !== -1) {
    const ipv4 = new Uint8Array(4)
    if (!parseIpv4(value.slice(lastColon + 1), ipv4, 0)) return undefined
    value = `${value.slice(0, lastColon + 1)}${((ipv4[0]! << 8) | ipv4[1]!).toString(16)}:${
      ((ipv4[2]! << 8) | ipv4[3]!).toString(16)
    }`
  }
  const halves = value.split("::")
  if (halves.length > 2) return undefined
  const head = halves[0] === "" ? [] : halves[0]!.split(":")
  const tail = halves.length === 1 || halves[1] === "" ? [] : halves[1]!.split(":")
  if (halves.length === 1 ? head.length !== 8 : head.length + tail.length > 7) return undefined
  const groups = [...head, ...Array<string>(8 - head.length - tail.length).fill("0"), ...tail]
  const bytes = new Uint8Array(16)
  for (let i = 0; i < 8; i++) {
    if (!hexGroup.test(groups[i]!)) return undefined
    const group = parseInt(groups[i]!, 16)
    bytes[i * 2] = group >> 8
    bytes[i * 2 + 1] = group & 0xff
  }
  return bytes
}

/** An IPv4 or IPv6 address (IPv6 optionally in brackets or with a zone), or undefined. */
export const parseIp = (text: string): IpAddress | undefined => {
  let value = text.trim()
  if (value.startsWith("[") && value.endsWith("]")) value = value.slice(1, -1)
  const zone = value.indexOf("%")
  if (zone !== -1) value = value.slice(0, zone)
  if (!value.includes(":")) {
    const bytes = new Uint8Array(16)
    bytes[10] = 0xff
    bytes[11] = 0xff
    return parseIpv4(value, bytes, 12) ? bytes : undefined
  }
  return parseIpv6(value)
}

export const isIpv4 = (address: IpAddress): boolean => {
  for (let i = 0; i < 10; i++) if (address[i] !== 0) return false
  return address[10] === 0xff && address[11] === 0xff
}

/** An address or a CIDR range (`10.0.0.0/8`, `fd00::/8`; a bare address is a range of one). */
export const parseIpRange = (text: string): IpRange | undefined => {
  const slash = text.indexOf("/")
  const address = parseIp(slash === -1 ? text : text.slice(0, slash))
  if (address === undefined) return undefined
  const width = isIpv4(address) ? 32 : 128
  if (slash === -1) return { address, prefix: 128 }
  const bitsText = text.slice(slash + 1).trim()
  if (!/^\d{1,3}$/.test(bitsText) || Number(bitsText) > width) return undefined
  return { address, prefix: 128 - width + Number(bitsText) }
}

export const inRange = (address: IpAddress, range: IpRange): boolean => {
  const whole = range.prefix >> 3
  for (let i = 0; i < whole; i++) if (address[i] !== range.address[i]) return false
  const rest = range.prefix & 7
  if (rest === 0) return true
  const mask = (0xff << (8 - rest)) & 0xff
  return (address[whole]! & mask) === (range.address[whole]! & mask)
}

/** The usual text of an address: dotted IPv4, or IPv6 with its longest run of zeros as `::` (RFC 5952). */
export const formatIp = (address: IpAddress): string => {
  if (isIpv4(address)) return `${address[12]}.${address[13]}.${address[14]}.${address[15]}`
  const groups = Array.from({ length: 8 }, (_, i) => (address[i * 2]! << 8) | address[i * 2 + 1]!)
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0) j++
    if (j - i > bestLength) [bestStart, bestLength] = [i, j - i]
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart === -1) return hex.join(":")
  return `${hex.slice(0, bestStart).join(":")}::${hex.slice(bestStart + bestLength).join(":")}`
}

/**
 * What a client is limited as: an IPv4 address, or the /64 an IPv6 address belongs to, since one
 * subscriber is commonly handed a whole /64 and could otherwise change address at will.
 */
export const limitedAs = (address: IpAddress): string => {
  if (isIpv4(address)) return formatIp(address)
  const network = new Uint8Array(16)
  network.set(address.subarray(0, 8))
  return `${formatIp(network)}/64`
}
