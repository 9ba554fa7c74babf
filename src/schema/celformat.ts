// CEL's string.format(list), as Kubernetes' CRD rules have it: cel-go's strings
// extension at the version kube's environment asks for (ext.Strings(StringsVersion(2)),
// k8s.io/apiserver v0.36.3 pkg/cel/environment/base.go) formats with the first
// formatter (github.com/google/cel-go v0.26.0 ext/formatting.go), locale en_US
// through golang.org/x/text/message: %f groups thousands ("1,234.500") and writes
// infinities as ∞, %e writes 1.052033×10⁰³ and takes its "precision" as a width
// (%.20e pads to 20), %s writes a double as strconv's shortest %g, and a list or
// map as CEL literals (doubles as %.6f, strings quoted). Each behaviour was read
// there and checked against kube's CEL built from its module
// (test/crossplane/kubecel, recorded in test/apiserver/kubecel-answers.json).
// Rounding is exact and half-to-even on the binary value, as Go's fmt rounds.

/** FormatError is a clause that cannot format its argument, in cel-go's words. */
class FormatError extends Error {}

const fail = (msg: string): never => {
  throw new FormatError(msg);
};

/** celTypeName is a value's CEL type name, as cel-go's errors name it. */
function celTypeName(v: unknown): string {
  if (v === null) return "null_type";
  if (typeof v === "bigint") return "int";
  if (typeof v === "number") return "double";
  if (typeof v === "string") return "string";
  if (typeof v === "boolean") return "bool";
  if (v instanceof Uint8Array) return "bytes";
  if (v instanceof Date) return "google.protobuf.Timestamp";
  if (Array.isArray(v) || v instanceof Set) return "list";
  switch ((v as object).constructor?.name) {
    case "UnsignedInt":
      return "uint";
    case "Duration":
      return "google.protobuf.Duration";
    case "Type":
      return "type";
    case "Optional":
      return "optional_type";
    case "Object":
    case "Map":
      return "map";
  }
  return (v as object).constructor?.name ?? "unknown";
}

const isUint = (v: unknown): v is { value: bigint } => typeof v === "object" && v !== null && v.constructor?.name === "UnsignedInt";
const isDuration = (v: unknown): v is { seconds: bigint; nanos: number } =>
  typeof v === "object" && v !== null && v.constructor?.name === "Duration";
const integer = (v: unknown): bigint | undefined => (typeof v === "bigint" ? v : isUint(v) ? v.value : undefined);

/** The special strings a fixed-point or scientific clause takes for the doubles they name. */
const SPECIAL: Record<string, number> = { NaN: NaN, Infinity: Infinity, "-Infinity": -Infinity };

// --- exact decimal rounding of a double ----------------------------------------------

/** bitsOf is a finite double as m × 2^e, m a non-negative integer. */
function bitsOf(d: number): [bigint, number] {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(d));
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const exp = (hi >>> 20) & 0x7ff;
  const frac = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  return exp === 0 ? [frac, -1074] : [frac | (1n << 52n), exp - 1075];
}

/** scaled is |d| × 10^p rounded to an integer, ties to even (exact: no float arithmetic). */
function scaled(d: number, p: number): bigint {
  const [m, e] = bitsOf(d);
  let num = m * (p >= 0 ? 10n ** BigInt(p) : 1n);
  let den = p < 0 ? 10n ** BigInt(-p) : 1n;
  if (e >= 0) num <<= BigInt(e);
  else den <<= BigInt(-e);
  const q = num / den;
  const twice = (num % den) * 2n;
  return twice > den || (twice === den && q % 2n === 1n) ? q + 1n : q;
}

/** fixed is d with p decimals, as Go's %.<p>f writes it (no grouping); NaN and infinities as Go's fmt (NaN, +Inf, -Inf). */
function fixed(d: number, p: number): string {
  if (Number.isNaN(d)) return "NaN";
  if (!Number.isFinite(d)) return d > 0 ? "+Inf" : "-Inf";
  const digits = scaled(d, p)
    .toString()
    .padStart(p + 1, "0");
  const sign = d < 0 || Object.is(d, -0) ? "-" : "";
  return p ? `${sign}${digits.slice(0, -p)}.${digits.slice(-p)}` : `${sign}${digits}`;
}

/** shortest is a double as strconv.FormatFloat(d, 'g', -1, 64): the fewest digits that read back, as %e or %f as Go decides. */
function shortest(d: number): string {
  if (Number.isNaN(d)) return "NaN";
  if (!Number.isFinite(d)) return d > 0 ? "+Inf" : "-Inf";
  if (d === 0) return Object.is(d, -0) ? "-0" : "0";
  const [mant, e] = d.toExponential().split("e") as [string, string];
  const exp = Number(e);
  // Go's %g with the shortest digits uses %e when the exponent is under -4 or at least 6 (strconv/ftoa.go).
  if (exp < -4 || exp >= 6) return `${mant}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  return String(d);
}

// --- en_US through golang.org/x/text/message -----------------------------------------

/** grouped is a %f result with its integer part grouped by thousands, as en_US writes it. */
function grouped(s: string): string {
  const m = /^(-?)(\d+)(.*)$/.exec(s);
  return m ? `${m[1]}${m[2]!.replace(/\B(?=(\d{3})+(?!\d))/g, ",")}${m[3]}` : s;
}

const SUPERSCRIPT = "⁰¹²³⁴⁵⁶⁷⁸⁹";

/** scientific is d as en_US's %e: six decimals, ×10 and the exponent in superscript digits (at least two), padded to width. */
function scientific(d: number, width: number): string {
  let body: string;
  if (Number.isNaN(d)) body = "NaN";
  else if (!Number.isFinite(d)) body = d > 0 ? "∞" : "-∞";
  else {
    let exp = d === 0 ? 0 : Math.floor(Math.log10(Math.abs(d)));
    let q = scaled(d, 6 - exp);
    if (q >= 10_000_000n) q = scaled(d, 6 - ++exp);
    else if (d !== 0 && q < 1_000_000n) q = scaled(d, 6 - --exp);
    const digits = q.toString().padStart(7, "0");
    const power = String(Math.abs(exp))
      .padStart(2, "0")
      .replace(/\d/g, (c) => SUPERSCRIPT[Number(c)]!);
    body = `${d < 0 ? "-" : ""}${digits[0]}.${digits.slice(1)}×10${exp < 0 ? "⁻" : ""}${power}`;
  }
  return body.padStart(width, " ");
}

// --- the clauses ---------------------------------------------------------------------

/** timestampText is a timestamp as RFC 3339 with Go's trimmed fraction (time.RFC3339Nano). */
export const timestampText = (t: Date) =>
  t
    .toISOString()
    .replace(/\.000Z$/, "Z")
    .replace(/(\.\d*?)0+Z$/, "$1Z");

/** durationText is a duration as cel-go writes one: seconds, their fraction trimmed, then s. */
export function durationText(v: { seconds: bigint; nanos: number }): string {
  const negative = v.seconds < 0n || v.nanos < 0;
  const total = (v.seconds < 0n ? -v.seconds : v.seconds) * 1_000_000_000n + BigInt(Math.abs(v.nanos));
  const whole = total / 1_000_000_000n;
  const frac = (total % 1_000_000_000n).toString().padStart(9, "0").replace(/0+$/, "");
  return `${negative ? "-" : ""}${whole}${frac ? `.${frac}` : ""}s`;
}

/** utf8 is bytes read as UTF-8, failing on bytes that are not, as cel-go's bytes-to-string conversion does. */
function utf8(b: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(b);
  } catch {
    return fail('could not convert argument "invalid UTF-8 in bytes, cannot convert to string" to string');
  }
}

/** goQuote is Go's %q of a string (strconv.Quote): printable characters kept, the rest escaped. */
function goQuote(s: string): string {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (c === 7) out += "\\a";
    else if (c === 8) out += "\\b";
    else if (c === 12) out += "\\f";
    else if (c === 10) out += "\\n";
    else if (c === 13) out += "\\r";
    else if (c === 9) out += "\\t";
    else if (c === 11) out += "\\v";
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, "0")}`;
    else if (/[\p{C}\p{Z}]/u.test(ch) && ch !== " ")
      out += c > 0xffff ? `\\U${c.toString(16).padStart(8, "0")}` : `\\u${c.toString(16).padStart(4, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

const STRING_CLAUSE_TYPES = "strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps";

/** formatString is the %s clause (cel-go FormatString). */
function formatString(v: unknown): string {
  if (Array.isArray(v) || v instanceof Set) return formatList([...v]);
  if (v instanceof Map || celTypeName(v) === "map") return formatMap(v as Map<unknown, unknown> | Record<string, unknown>);
  const n = integer(v);
  if (n !== undefined) return n.toString();
  if (typeof v === "number") return shortest(v);
  if (typeof v === "boolean" || typeof v === "string") return String(v);
  if (v instanceof Date) return timestampText(v);
  if (v instanceof Uint8Array) return utf8(v);
  if (isDuration(v)) return durationText(v);
  if (v === null) return "null";
  if (celTypeName(v) === "type") return (v as { name: string }).name;
  return fail(`string clause can only be used on ${STRING_CLAUSE_TYPES}, was given ${celTypeName(v)}`);
}

/** literal is a list's or map's member as a CEL literal (cel-go clauseForType, then quoteForCEL). */
function literal(v: unknown): string {
  if (typeof v === "number") return Number.isFinite(v) ? fixed(v, 6) : goQuote(fixed(v, 6));
  if (v instanceof Date) return `timestamp(${goQuote(timestampText(v))})`;
  if (isDuration(v)) return `duration(${goQuote(durationText(v))})`;
  if (typeof v === "string") return goQuote(v);
  if (v instanceof Uint8Array) return `b${goQuote(utf8(v))}`;
  const n = integer(v);
  if (n !== undefined) return n.toString();
  if (typeof v === "boolean" || v === null || Array.isArray(v) || v instanceof Set || celTypeName(v) === "map" || celTypeName(v) === "type")
    return formatString(v);
  return fail(`no formatting function for ${celTypeName(v)}`);
}

function formatList(items: unknown[]): string {
  return `[${items.map(literal).join(", ")}]`;
}

function formatMap(m: Map<unknown, unknown> | Record<string, unknown>): string {
  const entries = m instanceof Map ? [...m] : Object.entries(m);
  const pairs = entries.map(([k, v]) => {
    const key =
      typeof k === "string"
        ? goQuote(k)
        : typeof k === "boolean"
          ? String(k)
          : (integer(k)?.toString() ?? fail(`no formatting function for map key of type ${celTypeName(k)}`));
    return [key, literal(v)] as const;
  });
  pairs.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return `{${pairs.map(([k, v]) => `${k}:${v}`).join(", ")}}`;
}

/** doubleArg is a fixed-point or scientific clause's argument as a double (a double, or one of the special strings). */
function doubleArg(v: unknown, clause: string): number {
  if (typeof v === "number") return v;
  if (typeof v === "string" && Object.hasOwn(SPECIAL, v)) return SPECIAL[v]!;
  return fail(`${clause} clause can only be used on doubles, was given ${celTypeName(v)}`);
}

/** radix is an int or uint in base b (Go's %b, %o, %x: a negative int with its sign). */
function radix(v: unknown, b: number, what: string): string {
  const n = integer(v);
  if (n === undefined) return fail(`${what}, was given ${celTypeName(v)}`);
  return n < 0n ? `-${(-n).toString(b)}` : n.toString(b);
}

/** clause formats v under verb (precision: the digits after a '.', if any). */
function clause(verb: string, precision: number | undefined, v: unknown): string {
  switch (verb) {
    case "s":
      return formatString(v);
    case "d":
      return integer(v)?.toString() ?? fail(`decimal clause can only be used on integers, was given ${celTypeName(v)}`);
    case "f": {
      const d = doubleArg(v, "fixed-point");
      if (Number.isNaN(d)) return "NaN";
      if (!Number.isFinite(d)) return d > 0 ? "∞" : "-∞";
      return grouped(fixed(d === 0 ? 0 : d, precision ?? 6));
    }
    case "e":
      return scientific(doubleArg(v, "scientific"), precision ?? 6);
    case "b":
      if (typeof v === "boolean") return v ? "1" : "0";
      return radix(v, 2, "only integers and bools can be formatted as binary");
    case "o":
      return radix(v, 8, "octal clause can only be used on integers");
    case "x":
    case "X": {
      const hex =
        typeof v === "string"
          ? Buffer.from(v, "utf8").toString("hex")
          : v instanceof Uint8Array
            ? Buffer.from(v).toString("hex")
            : radix(v, 16, "only integers, byte buffers, and strings can be formatted as hex");
      return verb === "X" ? hex.toUpperCase() : hex;
    }
  }
  return fail(`could not parse formatting clause: unrecognized formatting clause "${verb}"`);
}

const BAD_PRECISION = "could not parse formatting clause: error while parsing precision";

/**
 * format is template.format(args): each %-clause replaced by the next
 * argument formatted (%% is a %), failing in cel-go's words on a clause it
 * does not know, a missing argument or an argument its clause cannot take.
 */
export function format(template: string, args: Iterable<unknown>): string {
  const list = [...args];
  let out = "";
  let next = 0;
  for (let i = 0; i < template.length;) {
    const c = template[i]!;
    if (c !== "%") {
      out += c;
      i++;
      continue;
    }
    if (template[i + 1] === "%") {
      out += "%";
      i += 2;
      continue;
    }
    if (next >= list.length) fail(`index ${next} out of range`);
    if (i + 1 >= template.length) fail("unexpected end of string");
    let j = i + 1;
    let precision: number | undefined;
    if (template[j] === ".") {
      const m = /^\.(\d*)/.exec(template.slice(j))!;
      j += m[0].length;
      if (j >= template.length) fail(`${BAD_PRECISION}: could not find end of precision specifier`);
      precision = m[1]
        ? Number(m[1])
        : fail(`${BAD_PRECISION}: error while converting precision to integer: strconv.Atoi: parsing "": invalid syntax`);
    }
    const verb = template[j]!;
    if (!"sdfebxXo".includes(verb)) fail(`could not parse formatting clause: unrecognized formatting clause "${verb}"`);
    try {
      out += clause(verb, precision, list[next]);
    } catch (err) {
      if (err instanceof FormatError && !err.message.startsWith("could not parse"))
        throw new FormatError(`error during formatting: ${err.message}`);
      throw err;
    }
    next++;
    i = j + 1;
  }
  return out;
}
