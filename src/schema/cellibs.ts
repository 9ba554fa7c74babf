// Kubernetes' CEL libraries that CRD rules may call, added to cel-js:
// quantity (k8s.io/apiserver pkg/cel/library/quantity.go, over
// apimachinery's resource.Quantity), url (library/urls.go, over Go's
// url.ParseRequestURI; getQuery as url.Values), ip/cidr (library/ip.go,
// cidr.go, over net/netip), semver (library/semverlib.go 22935532, over
// blang/semver v4's Parse) and format (library/format.go 0ea83df1: the named
// string checks of apimachinery and kube-openapi's strfmt). Values and errors
// follow those; what they read is parsed here.
import { isIP } from "node:net";
import { Optional, type Environment } from "@marcbachmann/cel-js";
import { compare as compareSemver } from "semver";
import { FORMATS } from "./formats.js";
import { isDNS1035Label, isDNS1123Label, isDNS1123Subdomain, isLabelValue, isQualifiedName } from "./names.js";

// --- quantity --------------------------------------------------------------

/** Quantity is an exact amount, numerator over denominator (resource.Quantity keeps it exactly too). */
export class Quantity {
  constructor(
    readonly n: bigint,
    readonly d: bigint,
  ) {}
  cmp(o: Quantity): number {
    const l = this.n * o.d;
    const r = o.n * this.d;
    return l < r ? -1 : l > r ? 1 : 0;
  }
}

const BINARY: Record<string, bigint> = { Ki: 2n ** 10n, Mi: 2n ** 20n, Gi: 2n ** 30n, Ti: 2n ** 40n, Pi: 2n ** 50n, Ei: 2n ** 60n };
const DECIMAL: Record<string, number> = { n: -9, u: -6, m: -3, "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

/** parseQuantity reads a quantity as resource.ParseQuantity does ("100Mi", "1.5", "2e3", "500m"), or undefined. */
export function parseQuantity(s: string): Quantity | undefined {
  const m = /^([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$/.exec(s);
  if (!m) return undefined;
  const [, sign, num, suffix = ""] = m;
  const [whole, frac = ""] = num!.split(".");
  let n = BigInt(`${whole || "0"}${frac}`) * (sign === "-" ? -1n : 1n);
  let d = 10n ** BigInt(frac.length);
  if (Object.hasOwn(BINARY, suffix)) n *= BINARY[suffix]!;
  else {
    const exp = Object.hasOwn(DECIMAL, suffix) ? DECIMAL[suffix]! : Number(suffix.slice(1));
    if (!Number.isSafeInteger(exp) || Math.abs(exp) > 1000) return undefined;
    if (exp >= 0) n *= 10n ** BigInt(exp);
    else d *= 10n ** BigInt(-exp);
  }
  return new Quantity(n, d);
}

const asQuantity = (x: Quantity | bigint): Quantity => (x instanceof Quantity ? x : new Quantity(x, 1n));
const INT64 = 2n ** 63n;

// --- url -------------------------------------------------------------------

/** KubeURL is what url() gives: a URL as Go's url.ParseRequestURI reads it (absolute, or an absolute path). */
export class KubeURL {
  constructor(
    readonly scheme: string,
    readonly host: string,
    readonly hostname: string,
    readonly port: string,
    readonly path: string,
    readonly query: string,
  ) {}
}

function parseURL(s: string): KubeURL | undefined {
  if (s.startsWith("/")) {
    if (/[\s#]/.test(s)) return undefined;
    const [path, query = ""] = s.split("?", 2) as [string, string?];
    return new KubeURL("", "", "", "", path, query);
  }
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(s);
  if (!m || /\s/.test(s)) return undefined;
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return undefined;
  }
  // The host as written, as Go's url.URL keeps it (WHATWG's parser drops a scheme's default port and
  // lowercases): https://[::1]:443/x has the host [::1]:443, the hostname ::1 and the port 443.
  const authority = /^[^:]+:\/\/([^/?#]*)/.exec(s)?.[1] ?? "";
  const host = authority.slice(authority.lastIndexOf("@") + 1);
  const close = host.startsWith("[") ? host.indexOf("]") : -1;
  const colon = close >= 0 ? (host[close + 1] === ":" ? close + 1 : -1) : host.lastIndexOf(":");
  const hostname = close >= 0 ? host.slice(1, close) : colon >= 0 ? host.slice(0, colon) : host;
  return new KubeURL(
    m[1]!,
    host,
    hostname,
    colon >= 0 ? host.slice(colon + 1) : "",
    u.pathname === "/" && !/^[^:]+:\/\/[^/]*\//.test(s) ? "" : u.pathname,
    u.search.slice(1),
  );
}

/** query is url.Values of a query string, as Go's url.ParseQuery reads it (a pair it cannot unescape is left out). */
function query(q: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const pair of q.split("&")) {
    if (!pair || pair.includes(";")) continue;
    const eq = pair.indexOf("=");
    const [k, v] = eq < 0 ? [pair, ""] : [pair.slice(0, eq), pair.slice(eq + 1)];
    try {
      const key = decodeURIComponent(k.replace(/\+/g, " "));
      const value = decodeURIComponent(v.replace(/\+/g, " "));
      out.set(key, [...(out.get(key) ?? []), value]);
    } catch {
      // an invalid escape: Go's ParseQuery skips the pair
    }
  }
  return out;
}

// --- semver --------------------------------------------------------------------

/** KubeSemver is what semver() gives: a version as blang/semver reads it. */
export class KubeSemver {
  constructor(
    readonly text: string,
    readonly major: bigint,
    readonly minor: bigint,
    readonly patch: bigint,
  ) {}
}

const IDENT = /^[0-9A-Za-z-]+$/;

/** parseSemver is blang/semver's Parse (with normalize, kube's normalizeAndParse): a version, or its error. */
export function parseSemver(input: string, normalize = false): KubeSemver | string {
  let s = input;
  if (normalize) {
    s = s.startsWith("v") ? s.slice(1) : s;
    const parts = splitN(s, ".", 3).map((p) =>
      p.length > 1 ? (/^[0-9]/.test(p.replace(/^0+/, "")) ? p.replace(/^0+/, "") : `0${p.replace(/^0+/, "")}`) : p,
    );
    if (parts.length < 3) {
      if (/[+-]/.test(parts.at(-1)!)) return "short version cannot contain PreRelease/Build meta data";
      while (parts.length < 3) parts.push("0");
    }
    s = parts.join(".");
  }
  const parts = splitN(s, ".", 3);
  if (parts.length !== 3) return "No Major.Minor.Patch elements found";
  const number = (p: string, what: string): bigint | string => {
    if (!/^[0-9]+$/.test(p)) return `Invalid character(s) found in ${what} number ${JSON.stringify(p)}`;
    if (p.length > 1 && p.startsWith("0"))
      return `${what[0]!.toUpperCase()}${what.slice(1)} number must not contain leading zeroes ${JSON.stringify(p)}`;
    const n = BigInt(p);
    return n < 2n ** 64n ? n : `strconv.ParseUint: parsing ${JSON.stringify(p)}: value out of range`;
  };
  const major = number(parts[0]!, "major");
  if (typeof major === "string") return major;
  const minor = number(parts[1]!, "minor");
  if (typeof minor === "string") return minor;
  let rest = parts[2]!;
  let build: string | undefined;
  let pre: string | undefined;
  const plus = rest.indexOf("+");
  if (plus >= 0) [rest, build] = [rest.slice(0, plus), rest.slice(plus + 1)];
  const dash = rest.indexOf("-");
  if (dash >= 0) [rest, pre] = [rest.slice(0, dash), rest.slice(dash + 1)];
  const patch = number(rest, "patch");
  if (typeof patch === "string") return patch;
  for (const p of pre === undefined ? [] : pre.split(".")) {
    if (!p) return "Prerelease is empty";
    if (!IDENT.test(p)) return `Invalid character(s) found in prerelease ${JSON.stringify(p)}`;
    if (/^[0-9]+$/.test(p) && p.length > 1 && p.startsWith("0"))
      return `Numeric PreRelease version must not contain leading zeroes ${JSON.stringify(p)}`;
  }
  for (const b of build === undefined ? [] : build.split(".")) {
    if (!b) return "Build meta data is empty";
    if (!IDENT.test(b)) return `Invalid character(s) found in build meta data ${JSON.stringify(b)}`;
  }
  return new KubeSemver(s, major, minor, patch);
}

/** splitN is Go's strings.SplitN. */
function splitN(s: string, sep: string, n: number): string[] {
  const parts = s.split(sep);
  return parts.length <= n ? parts : [...parts.slice(0, n - 1), parts.slice(n - 1).join(sep)];
}

/** semverCmp is blang's Compare: the precedence of semver.org (build metadata ignored). */
function semverCmp(a: KubeSemver, b: KubeSemver): number {
  for (const k of ["major", "minor", "patch"] as const) if (a[k] !== b[k]) return a[k] < b[k] ? -1 : 1;
  // The numbers are equal: what is left is the pre-release, which node's semver orders as blang does.
  const pre = (v: KubeSemver) => v.text.replace(/\+.*$/, "").replace(/^[^-]*/, "");
  return compareSemver(`0.0.0${pre(a)}`, `0.0.0${pre(b)}`);
}

// --- format --------------------------------------------------------------------

/** KubeFormat is one of the named formats of the format library: a check that answers what is wrong. */
export class KubeFormat {
  constructor(readonly check: (s: string) => string[]) {}
}
/** FormatLibrary is the value a rule's `format` names (format.dns1123Label(), format.named(...)). */
export class FormatLibrary {}
export const FORMAT_LIBRARY = new FormatLibrary();

const maskDash = (s: string) => (s.endsWith("-") ? `${s.slice(0, -1)}a` : s);
const strfmt = (name: string, why: string) => (s: string) => (FORMATS.get(name)!(s) ? [] : [why]);
const NAMED_FORMATS: Record<string, KubeFormat> = {
  dns1123Label: new KubeFormat(isDNS1123Label),
  dns1123Subdomain: new KubeFormat(isDNS1123Subdomain),
  dns1035Label: new KubeFormat(isDNS1035Label),
  qualifiedName: new KubeFormat(isQualifiedName),
  dns1123LabelPrefix: new KubeFormat((s) => isDNS1123Label(maskDash(s))),
  dns1123SubdomainPrefix: new KubeFormat((s) => isDNS1123Subdomain(maskDash(s))),
  dns1035LabelPrefix: new KubeFormat((s) => isDNS1035Label(maskDash(s))),
  labelValue: new KubeFormat(isLabelValue),
  uri: new KubeFormat((s) => (parseURL(s) ? [] : [`parse ${JSON.stringify(s)}: invalid URI for request`])),
  uuid: new KubeFormat(strfmt("uuid", "does not match the UUID format")),
  byte: new KubeFormat(strfmt("byte", "invalid base64")),
  date: new KubeFormat(strfmt("date", "invalid date")),
  datetime: new KubeFormat(strfmt("datetime", "invalid datetime")),
};

// --- sets and strings (cel-go's ext/sets.go, ext/strings.go) -----------------------

/** SetsLibrary is what a rule's `sets` names (sets.contains(...)); StringsLibrary its `strings` (strings.quote(...)). */
export class SetsLibrary {}
export class StringsLibrary {}
/** IPLibrary is what a rule's `ip` names in ip.isCanonical(...) (ip(...) itself is a function). */
export class IPLibrary {}
/** NAMESPACES are the values that stand for the libraries' namespaces in every rule. */
/** ListsLibrary is what a rule's `lists` names in lists.range(n) (cellists.ts). */
export class ListsLibrary {}

export const NAMESPACES = {
  format: FORMAT_LIBRARY,
  sets: new SetsLibrary(),
  strings: new StringsLibrary(),
  ip: new IPLibrary(),
  lists: new ListsLibrary(),
};
/** NAMESPACE_TYPES are the CEL types the namespaces' values are registered as, by class. */
export const NAMESPACE_TYPES = new Map<unknown, string>([
  [FormatLibrary, "kubernetes.FormatLibrary"],
  [SetsLibrary, "kubernetes.SetsLibrary"],
  [StringsLibrary, "kubernetes.StringsLibrary"],
  [IPLibrary, "kubernetes.IPLibrary"],
  [ListsLibrary, "cel.ListsLibrary"],
]);

/** includes is setsContains: every element of sub is in list, by CEL equality. */
function includes(list: Iterable<unknown>, sub: Iterable<unknown>): boolean {
  const have = new Set([...list].map(canonical));
  for (const x of sub) if (!have.has(canonical(x))) return false;
  return true;
}

/** quote is ext/strings.go's quote: a string literal for s, escaped as CEL escapes. */
function quote(s: string): string {
  const esc: Record<string, string> = {
    "\x07": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
  };
  // A lone surrogate is not a character: Go's sanitize makes it U+FFFD, as toWellFormed would.
  const sane = s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
  // eslint-disable-next-line no-control-regex -- \a is one of the characters CEL escapes
  return `"${sane.replace(/[\x07\b\f\n\r\t\v\\"]/g, (c: string) => esc[c]!)}"`;
}

/**
 * canonical is a CEL value as a string equal for equal values: an int and a
 * double of the same number alike (CEL's heterogeneous equality), an object's
 * keys and a set's elements in a fixed order.
 */
export function canonical(v: unknown): string {
  if (typeof v !== "object" || v === null) return canonicalOf(v);
  // A rule's values are made for it and not changed while it runs: an object's canonical string is made
  // once (sets.equivalent([self.m], [self.m]) in a loop over a 25,000-entry map ran for minutes without).
  let c = CANONICAL.get(v);
  if (c === undefined) CANONICAL.set(v, (c = canonicalOf(v)));
  return c;
}

/** Canonical strings of objects already made (canonical). */
const CANONICAL = new WeakMap<object, string>();

function canonicalOf(v: unknown): string {
  if (v === null || v === undefined) return "null";
  switch (typeof v) {
    case "bigint":
      return `n${v}`;
    case "number":
      return Number.isInteger(v) ? `n${v}` : `d${v}`;
    case "string":
      return JSON.stringify(v);
    case "boolean":
      return `b${v}`;
    case "object": {
      if (v instanceof Uint8Array) return `y${Buffer.from(v).toString("hex")}`;
      if (Array.isArray(v)) return `[${v.map(canonical).join(",")}]`;
      if (v instanceof Set) return `{${[...v].map(canonical).sort().join(",")}}`;
      if (v instanceof Map)
        return `m{${[...v]
          .map(([k, x]) => `${canonical(k)}:${canonical(x)}`)
          .sort()
          .join(",")}}`;
      const p = (v as { valueOf(): unknown }).valueOf();
      if (p !== v) return `${v.constructor?.name ?? "?"}(${canonical(p)})`;
      if (Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null)
        return `o{${Object.entries(v)
          .map(([k, x]) => `${JSON.stringify(k)}:${canonical(x)}`)
          .sort()
          .join(",")}}`;
      return `${v.constructor?.name ?? "?"}(${String(v)})`;
    }
    default:
      return String(v);
  }
}

// --- ip / cidr -----------------------------------------------------------------

export class KubeIP {
  constructor(readonly text: string) {}
  get family(): number {
    return isIP(this.text);
  }
}
export class KubeCIDR {
  constructor(
    readonly ip: KubeIP,
    readonly prefix: number,
  ) {}
}

/** parseIP reads an address as netip.ParseAddr does for kube's ip(): no zones, no IPv4-mapped IPv6. */
function parseIP(s: string): KubeIP | undefined {
  if (!isIP(s) || s.includes("%") || /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(s)) return undefined;
  // Go's parser refuses leading zeros in IPv4 octets.
  if (isIP(s) === 4 && s.split(".").some((o) => o.length > 1 && o.startsWith("0"))) return undefined;
  return new KubeIP(s);
}

function parseCIDR(s: string): KubeCIDR | undefined {
  const [addr, bits, extra] = s.split("/");
  if (extra !== undefined || addr === undefined || bits === undefined || !/^\d+$/.test(bits)) return undefined;
  const ip = parseIP(addr);
  const n = Number(bits);
  if (!ip || n > (ip.family === 4 ? 32 : 128)) return undefined;
  return new KubeCIDR(ip, n);
}

/** bitsOf is an address as a bigint and its width. */
function bitsOf(ip: KubeIP): [bigint, number] {
  if (ip.family === 4) return [ip.text.split(".").reduce((a, o) => (a << 8n) | BigInt(Number(o)), 0n), 32];
  const [head, tail = ""] = ip.text.split("::") as [string, string?];
  const parts = (x: string) => (x ? x.split(":") : []);
  const h = parts(head);
  const t = parts(tail);
  const groups = ip.text.includes("::") ? [...h, ...Array(8 - h.length - t.length).fill("0"), ...t] : h;
  return [groups.reduce((a, g) => (a << 16n) | BigInt(parseInt(g, 16)), 0n), 128];
}

/** ipOf is the IP of an address's bits, written as Go's netip writes it (IPv6 lower case, its longest zero run as ::). */
function ipOf(bits: bigint, width: number): KubeIP {
  if (width === 32) return new KubeIP([24n, 16n, 8n, 0n].map((sh) => String((bits >> sh) & 255n)).join("."));
  const groups = Array.from({ length: 8 }, (_, i) => Number((bits >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = { at: -1, len: 0 };
  for (let i = 0; i < 8;) {
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > best.len && j - i >= 2) best = { at: i, len: j - i };
    i = j === i ? i + 1 : j;
  }
  const hex = (g: number[]) => g.map((x) => x.toString(16)).join(":");
  return new KubeIP(best.at < 0 ? hex(groups) : `${hex(groups.slice(0, best.at))}::${hex(groups.slice(best.at + best.len))}`);
}

/** masked is a CIDR with its address's host bits cleared (netip.Prefix.Masked). */
function masked(c: KubeCIDR): KubeCIDR {
  const [bits, width] = bitsOf(c.ip);
  const host = (1n << BigInt(width - c.prefix)) - 1n;
  return new KubeCIDR(ipOf(bits & ~host, width), c.prefix);
}

/** ipOrFail is ip(s): the address, or kube's error for a string that is none. */
const ipOrFail = (s: string): KubeIP => parseIP(s) ?? fail(`IP Address "${s}" parse error during conversion from string`);

/** cidrOrFail is cidr(s): the prefix, or kube's error for a string that is none. */
const cidrOrFail = (s: string): KubeCIDR =>
  parseCIDR(s) ?? fail(`network address parse error during conversion from string: netip.ParsePrefix("${s}"): invalid`);

/**
 * inNet is whether ip is in v4/v4bits (an IPv4 address) or v6/v6bits (an
 * IPv6 one); mask6, when given, is the 16-bit mask of the first group to
 * compare instead (link-local multicast is ff02::/16 whatever the flags nibble).
 */
function inNet(ip: KubeIP, v4: string, v4bits: number, v6: string, v6bits: number, mask6?: number): boolean {
  const [bits, width] = bitsOf(ip);
  if (width === 32) return contains(new KubeCIDR(new KubeIP(v4), v4bits), ip);
  if (mask6 !== undefined) return (Number(bits >> 112n) & mask6) === parseInt(v6.split(":")[0]!, 16);
  return contains(new KubeCIDR(new KubeIP(v6), v6bits), ip);
}

/** canonicalIP is an address as netip.Addr.String() writes it. */
const canonicalIP = (ip: KubeIP) => ipOf(...bitsOf(ip)).text;

/** sameIP is whether two IPs are one address of one family (netip.Addr's ==). */
function sameIP(a: KubeIP, b: KubeIP): boolean {
  const [x, w] = bitsOf(a);
  const [y, v] = bitsOf(b);
  return w === v && x === y;
}

function contains(c: KubeCIDR, ip: KubeIP): boolean {
  if (c.ip.family !== ip.family) return false;
  const [a, w] = bitsOf(c.ip);
  const [b] = bitsOf(ip);
  const shift = BigInt(w - c.prefix);
  return a >> shift === b >> shift;
}

/** withNetLibrary registers kube's IP and CIDR library (ip.go, cidr.go) on env. */
function withNetLibrary(env: Environment): void {
  env
    .registerType("net.IP", KubeIP)
    .registerType("net.CIDR", KubeCIDR)
    .registerOperator("net.IP == net.IP", (a: KubeIP, b: KubeIP) => sameIP(a, b))
    // An address as Go's netip.Addr.String() writes it; ip.isCanonical: whether a string is already so written
    // (k8s.io/apiserver v0.36.3 pkg/cel/library/ip.go).
    .registerFunction("string(net.IP): string", canonicalIP)
    .registerFunction("string(net.CIDR): string", (c: KubeCIDR) => `${canonicalIP(c.ip)}/${c.prefix}`)
    .registerType("kubernetes.IPLibrary", IPLibrary)
    .registerFunction("kubernetes.IPLibrary.isCanonical(string): bool", (_: IPLibrary, s: string) => {
      return canonicalIP(ipOrFail(s)) === s;
    })
    .registerOperator("net.CIDR == net.CIDR", (a: KubeCIDR, b: KubeCIDR) => a.prefix === b.prefix && sameIP(a.ip, b.ip))
    .registerFunction("ip(string): net.IP", ipOrFail)
    .registerFunction("isIP(string): bool", (s: string) => parseIP(s) !== undefined)
    .registerFunction("net.IP.family(): int", (ip: KubeIP) => BigInt(ip.family))
    .registerFunction("net.IP.isLoopback(): bool", (ip: KubeIP) => (ip.family === 4 ? ip.text.startsWith("127.") : bitsOf(ip)[0] === 1n))
    .registerFunction("net.IP.isUnspecified(): bool", (ip: KubeIP) => bitsOf(ip)[0] === 0n)
    // As Go's netip.Addr methods, which ip.go calls.
    .registerFunction("net.IP.isLinkLocalMulticast(): bool", (ip: KubeIP) => inNet(ip, "224.0.0.0", 24, "ff02::", 16, 0xff0f))
    .registerFunction("net.IP.isLinkLocalUnicast(): bool", (ip: KubeIP) => inNet(ip, "169.254.0.0", 16, "fe80::", 10))
    .registerFunction("net.IP.isGlobalUnicast(): bool", (ip: KubeIP) => {
      const [bits, width] = bitsOf(ip);
      const broadcast = width === 32 && bits === 0xffffffffn;
      const loopback = width === 32 ? bits >> 24n === 127n : bits === 1n;
      const multicast = inNet(ip, "224.0.0.0", 4, "ff00::", 8);
      return bits !== 0n && !broadcast && !loopback && !multicast && !inNet(ip, "169.254.0.0", 16, "fe80::", 10);
    })
    .registerFunction("cidr(string): net.CIDR", cidrOrFail)
    .registerFunction("isCIDR(string): bool", (s: string) => parseCIDR(s) !== undefined)
    .registerFunction("net.CIDR.containsIP(net.IP): bool", (c: KubeCIDR, ip: KubeIP) => contains(c, ip))
    .registerFunction("net.CIDR.containsIP(string): bool", (c: KubeCIDR, s: string) => contains(c, ipOrFail(s)))
    .registerFunction("net.CIDR.containsCIDR(net.CIDR): bool", (c: KubeCIDR, o: KubeCIDR) => o.prefix >= c.prefix && contains(c, o.ip))
    .registerFunction("net.CIDR.containsCIDR(string): bool", (c: KubeCIDR, s: string) => {
      const o = cidrOrFail(s);
      return o.prefix >= c.prefix && contains(c, o.ip);
    })
    .registerFunction("net.CIDR.prefixLength(): int", (c: KubeCIDR) => BigInt(c.prefix))
    .registerFunction("net.CIDR.masked(): net.CIDR", (c: KubeCIDR) => masked(c))
    .registerFunction("net.CIDR.ip(): net.IP", (c: KubeCIDR) => c.ip);
}

/** withKubernetesLibraries registers the libraries on env, which it returns. */
export function withKubernetesLibraries(env: Environment): Environment {
  env
    .registerType("kubernetes.Quantity", Quantity)
    .registerFunction(
      "quantity(string): kubernetes.Quantity",
      (s: string) =>
        parseQuantity(s) ?? fail("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    )
    .registerFunction("isQuantity(string): bool", (s: string) => parseQuantity(s) !== undefined)
    .registerFunction("kubernetes.Quantity.sign(): int", (q: Quantity) => BigInt(q.cmp(new Quantity(0n, 1n))))
    .registerFunction("kubernetes.Quantity.isInteger(): bool", (q: Quantity) => q.n % q.d === 0n)
    .registerFunction("kubernetes.Quantity.asInteger(): int", (q: Quantity) => {
      if (q.n % q.d !== 0n) fail("cannot convert value to integer");
      const v = q.n / q.d;
      if (v >= INT64 || v < -INT64) fail("cannot convert value to integer");
      return v;
    })
    .registerFunction("kubernetes.Quantity.asApproximateFloat(): double", (q: Quantity) => Number(q.n) / Number(q.d))
    .registerFunction("kubernetes.Quantity.isLessThan(kubernetes.Quantity): bool", (a: Quantity, b: Quantity) => a.cmp(b) < 0)
    .registerFunction("kubernetes.Quantity.isGreaterThan(kubernetes.Quantity): bool", (a: Quantity, b: Quantity) => a.cmp(b) > 0)
    .registerFunction("kubernetes.Quantity.compareTo(kubernetes.Quantity): int", (a: Quantity, b: Quantity) => BigInt(a.cmp(b)))
    // Equality of the library's values, as kube's types define it (== and its !=): a quantity by its value (1Gi ==
    // 1024Mi), an IP by its address, a CIDR by its address and prefix length, a semver by its precedence.
    .registerOperator("kubernetes.Quantity == kubernetes.Quantity", (a: Quantity, b: Quantity) => a.cmp(b) === 0)
    .registerFunction(
      "kubernetes.Quantity.add(kubernetes.Quantity): kubernetes.Quantity",
      (a: Quantity, b: Quantity) => new Quantity(a.n * b.d + b.n * a.d, a.d * b.d),
    )
    .registerFunction("kubernetes.Quantity.add(int): kubernetes.Quantity", (a: Quantity, b: bigint) => {
      const q = asQuantity(b);
      return new Quantity(a.n * q.d + q.n * a.d, a.d * q.d);
    })
    .registerFunction(
      "kubernetes.Quantity.sub(kubernetes.Quantity): kubernetes.Quantity",
      (a: Quantity, b: Quantity) => new Quantity(a.n * b.d - b.n * a.d, a.d * b.d),
    )
    .registerFunction("kubernetes.Quantity.sub(int): kubernetes.Quantity", (a: Quantity, b: bigint) => {
      const q = asQuantity(b);
      return new Quantity(a.n * q.d - q.n * a.d, a.d * q.d);
    })
    .registerType("kubernetes.URL", KubeURL)
    .registerFunction(
      "url(string): kubernetes.URL",
      (s: string) => parseURL(s) ?? fail(`URL parse error during conversion from string: parse "${s}": invalid URI for request`),
    )
    .registerFunction("isURL(string): bool", (s: string) => parseURL(s) !== undefined)
    .registerFunction("kubernetes.URL.getScheme(): string", (u: KubeURL) => u.scheme)
    .registerFunction("kubernetes.URL.getHost(): string", (u: KubeURL) => u.host)
    .registerFunction("kubernetes.URL.getHostname(): string", (u: KubeURL) => u.hostname)
    .registerFunction("kubernetes.URL.getPort(): string", (u: KubeURL) => u.port)
    .registerFunction("kubernetes.URL.getEscapedPath(): string", (u: KubeURL) => u.path)
    .registerFunction("kubernetes.URL.getQuery(): map<string, list<string>>", (u: KubeURL) => query(u.query))
    .registerType("kubernetes.Semver", KubeSemver)
    .registerFunction("semver(string): kubernetes.Semver", (s: string) => semverOf(s, false))
    .registerFunction("semver(string, bool): kubernetes.Semver", (s: string, n: boolean) => semverOf(s, n))
    .registerFunction("isSemver(string): bool", (s: string) => typeof parseSemver(s) !== "string")
    .registerFunction("isSemver(string, bool): bool", (s: string, n: boolean) => typeof parseSemver(s, n) !== "string")
    .registerFunction("kubernetes.Semver.major(): int", (v: KubeSemver) => v.major)
    .registerFunction("kubernetes.Semver.minor(): int", (v: KubeSemver) => v.minor)
    .registerFunction("kubernetes.Semver.patch(): int", (v: KubeSemver) => v.patch)
    .registerFunction("kubernetes.Semver.isLessThan(kubernetes.Semver): bool", (a: KubeSemver, b: KubeSemver) => semverCmp(a, b) < 0)
    .registerFunction("kubernetes.Semver.isGreaterThan(kubernetes.Semver): bool", (a: KubeSemver, b: KubeSemver) => semverCmp(a, b) > 0)
    .registerFunction("kubernetes.Semver.compareTo(kubernetes.Semver): int", (a: KubeSemver, b: KubeSemver) => BigInt(semverCmp(a, b)))
    .registerOperator("kubernetes.Semver == kubernetes.Semver", (a: KubeSemver, b: KubeSemver) => semverCmp(a, b) === 0)
    .registerType("kubernetes.NamedFormat", KubeFormat)
    .registerType("kubernetes.FormatLibrary", FormatLibrary)
    .registerFunction("kubernetes.FormatLibrary.named(string): optional<kubernetes.NamedFormat>", (_: FormatLibrary, name: string) =>
      Object.hasOwn(NAMED_FORMATS, name) ? Optional.of(NAMED_FORMATS[name]!) : Optional.none(),
    )
    .registerFunction("kubernetes.NamedFormat.validate(string): optional<list<string>>", (f: KubeFormat, s: string) => {
      const why = f.check(s);
      return why.length ? Optional.of(why) : Optional.none();
    });
  withNetLibrary(env);
  env
    .registerType("kubernetes.SetsLibrary", SetsLibrary)
    .registerType("kubernetes.StringsLibrary", StringsLibrary)
    .registerFunction("kubernetes.SetsLibrary.contains(list, list): bool", (_: SetsLibrary, a: unknown[], b: unknown[]) => includes(a, b))
    .registerFunction(
      "kubernetes.SetsLibrary.equivalent(list, list): bool",
      (_: SetsLibrary, a: unknown[], b: unknown[]) => includes(a, b) && includes(b, a),
    )
    .registerFunction("kubernetes.SetsLibrary.intersects(list, list): bool", (_: SetsLibrary, a: unknown[], b: unknown[]) => {
      const have = new Set([...b].map(canonical));
      return [...a].some((x) => have.has(canonical(x)));
    })
    .registerFunction("kubernetes.StringsLibrary.quote(string): string", (_: StringsLibrary, s: string) => quote(s));
  for (const [name, f] of Object.entries(NAMED_FORMATS))
    env.registerFunction(`kubernetes.FormatLibrary.${name}(): kubernetes.NamedFormat`, () => f);
  return env;
}

const fail = (m: string): never => {
  throw new Error(m);
};

/** semverOf is semver(): the version, or the rule's error with blang's words. */
function semverOf(s: string, normalize: boolean): KubeSemver {
  const v = parseSemver(s, normalize);
  return typeof v === "string" ? fail(v) : v;
}
