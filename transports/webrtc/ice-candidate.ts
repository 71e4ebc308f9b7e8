/**
 * The grammar of a trickled ICE candidate's `candidate` string (RFC 8839 §5.1), checked before werift sees it:
 *
 *     candidate:<foundation> <component-id> <transport> <priority> <connection-address> <port> typ <cand-type>
 *               [raddr <connection-address>] [rport <port>] *(<extension-att-name> <extension-att-value>)
 *
 * or the empty string (end-of-candidates). werift parses a malformed candidate only when it applies it, and one
 * queued until the answer then fails the answer instead; checking on receipt refuses it on its own.
 */

const TOKEN = /^[A-Za-z0-9!#$%&'*+\-.^_`{|}~]+$/;
const FOUNDATION = /^[A-Za-z0-9+/]{1,32}$/;
const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
const IPV6 = /^[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*(%[A-Za-z0-9_.-]+)?$/;
const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$/;

function isAddress(s: string): boolean {
  // Digits and dots only is an IPv4 address or nothing (a host name has a letter in its last label).
  if (/^[\d.]+$/.test(s)) return IPV4.test(s);
  return IPV6.test(s) || HOSTNAME.test(s);
}

function inRange(s: string, digits: number, min: number, max: number): boolean {
  if (!new RegExp(`^\\d{1,${digits}}$`).test(s)) return false;
  const n = Number(s);
  return n >= min && n <= max;
}

/**
 * What is wrong with a candidate string, or undefined when it follows RFC 8839 (or is `""`, end-of-candidates).
 * The text names the offending part (`port "70000" is not 0-65535`). Never throws.
 */
export function candidateProblem(line: string): string | undefined {
  if (line === '') return undefined;
  if (!line.startsWith('candidate:'))
    return 'expected "candidate:<foundation> <component> <transport> <priority> <address> <port> typ <type> …" (RFC 8839), or "" for end-of-candidates';
  const f = line.slice('candidate:'.length).split(' ');
  if (f.length < 8)
    return `expected at least 8 space-separated fields after "candidate:" (foundation, component, transport, priority, address, port, "typ", type), got ${f.length}`;
  const [foundation, component, transport, priority, address, port, typ, type] = f as [string, string, string, string, string, string, string, string];
  if (!FOUNDATION.test(foundation)) return `foundation "${foundation.slice(0, 40)}" is not 1-32 characters of [A-Za-z0-9+/]`;
  if (!inRange(component, 3, 1, 256)) return `component id "${component.slice(0, 40)}" is not 1-256`;
  if (!TOKEN.test(transport)) return `transport "${transport.slice(0, 40)}" is not a token (udp, tcp)`;
  if (!inRange(priority, 10, 1, 2 ** 32 - 1)) return `priority "${priority.slice(0, 40)}" is not 1-4294967295`;
  if (!isAddress(address)) return `connection address "${address.slice(0, 80)}" is not an IPv4 or IPv6 address or a host name`;
  if (!inRange(port, 5, 0, 65535)) return `port "${port.slice(0, 40)}" is not 0-65535`;
  if (typ !== 'typ') return `expected "typ" after the port, got "${typ.slice(0, 40)}"`;
  if (!TOKEN.test(type)) return `candidate type "${type.slice(0, 40)}" is not a token (host, srflx, prflx, relay)`;
  const rest = f.slice(8);
  let i = 0;
  if (rest[i] === 'raddr') {
    if (rest[i + 1] === undefined || !isAddress(rest[i + 1]!)) return `raddr "${(rest[i + 1] ?? '').slice(0, 80)}" is not an address`;
    i += 2;
  }
  if (rest[i] === 'rport') {
    if (rest[i + 1] === undefined || !inRange(rest[i + 1]!, 5, 0, 65535)) return `rport "${(rest[i + 1] ?? '').slice(0, 40)}" is not 0-65535`;
    i += 2;
  }
  for (; i < rest.length; i += 2) {
    const name = rest[i]!;
    const value = rest[i + 1];
    if (!TOKEN.test(name)) return `extension name "${name.slice(0, 40)}" is not a token (fields are separated by single spaces)`;
    if (value === undefined || value === '') return `extension "${name.slice(0, 40)}" has no value`;
  }
  return undefined;
}
