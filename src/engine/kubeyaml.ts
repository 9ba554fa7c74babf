// YAML's plain scalars as Kubernetes reads them. kubectl's decoder,
// kube-apiserver's apply patches and Crossplane's CLI all read YAML with
// sigs.k8s.io/yaml v1.6.0, whose YAMLToJSON is go-yaml v2's YAML 1.1
// resolution (go.yaml.in/yaml/v2 v2.4.3, resolve.go): `yes`, `on` and `y` are
// true, `0777` is 511, `1_000` is 1000, `08` is 8, `1e3` is 1000, and a map key
// `n` is false (so the JSON key "false"). YAML 1.2's core schema, the `yaml`
// package's and js-yaml's default, reads those as strings or other numbers, so
// a manifest xfn rendered or validated would not be the object the cluster
// gets. Timestamps stay their text (go-yaml v2 keeps a timestamp decoded into
// an interface as the string it was), as do .nan and .inf-like values that
// JSON cannot carry (sigs.k8s.io/yaml refuses those whole; xfn reads them as
// numbers, as before). test/crossplane/kubeyaml.test.ts holds this to the
// real sigs.k8s.io/yaml, built by scripts/anchors.mjs.
import type { JsonValue } from "@bufbuild/protobuf";

/** The values go-yaml v2 looks up by the whole text, before any number. */
const BY_TEXT = new Map<string, JsonValue>([
  ...["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"].map((s) => [s, true] as const),
  ...["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"].map((s) => [s, false] as const),
  ...["", "~", "null", "Null", "NULL"].map((s) => [s, null] as const),
]);
const SPECIAL: Record<string, number> = {
  ".nan": NaN,
  ".NaN": NaN,
  ".NAN": NaN,
  ".inf": Infinity,
  ".Inf": Infinity,
  ".INF": Infinity,
  "+.inf": Infinity,
  "+.Inf": Infinity,
  "+.INF": Infinity,
  "-.inf": -Infinity,
  "-.Inf": -Infinity,
  "-.INF": -Infinity,
};

/** GO_HINT: the first characters go-yaml v2 resolves a plain scalar for at all (resolveTable); any other stays a string. */
export const GO_HINT = /^(?:$|[-+0-9.yYnNtTfFoO~])/;

/** SMALL_INT is a decimal int of at most 15 digits, which parseIntBase0 would read as Number does. */
const SMALL_INT = /^[-+]?(?:0|[1-9][0-9]{0,14})$/;

/** YAML_STYLE_FLOAT is go-yaml v2's yamlStyleFloat. */
const YAML_STYLE_FLOAT = /^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/;

const INT64_MIN = -(2n ** 63n);
const UINT64_MAX = 2n ** 64n - 1n;

/**
 * parseIntBase0 is Go's strconv.ParseInt(s, 0, 64), then ParseUint(s, 0, 64):
 * an optional sign (ParseInt only), then 0x/0X hex, 0b/0B binary, 0o/0O or a
 * leading 0 octal, or decimal; undefined where both fail (a bad digit, out of
 * range).
 */
function parseIntBase0(s: string): number | bigint | undefined {
  const m = /^([-+]?)(0[xX][0-9a-fA-F]+|0[bB][01]+|0[oO][0-7]+|0[0-7]*|[1-9][0-9]*)$/.exec(s);
  if (!m) return undefined;
  const [, sign, digits] = m as unknown as [string, string, string];
  let n: bigint;
  if (/^0[oO]/.test(digits)) n = BigInt(`0o${digits.slice(2)}`);
  else if (/^0[0-7]+$/.test(digits)) n = BigInt(`0o${digits.slice(1)}`);
  else n = BigInt(digits); // BigInt reads 0x, 0b and decimal as Go does
  if (sign === "-") n = -n;
  // ParseInt's range, then ParseUint's (which takes no sign).
  if (n < INT64_MIN || n > UINT64_MAX || (n > 2n ** 63n - 1n && sign !== "")) return undefined;
  // Beyond what a number holds exactly, a bigint: a key keeps its digits (toKubeJson makes a value a number).
  return Number.isSafeInteger(Number(n)) ? Number(n) : n;
}

/**
 * goResolve is the value go-yaml v2 gives a plain (unquoted, untagged)
 * scalar's text: a bigint for an int no number holds exactly (toKubeJson
 * turns it into one, as JSON readers do).
 */
export function goResolve(s: string): JsonValue | bigint {
  if (!GO_HINT.test(s)) return s;
  // The common case first: a decimal int a number holds (-0 is 0, as Go's int).
  if (SMALL_INT.test(s)) return Number(s) || 0;
  const known = BY_TEXT.get(s);
  if (known !== undefined) return known;
  const special = SPECIAL[s];
  if (special !== undefined) return special as unknown as JsonValue;
  const hint = s[0]!;
  if (hint === ".") {
    // strconv.ParseFloat of the text as it is: no underscores, nothing out of range.
    if (!/^\.[0-9]+([eE][-+]?[0-9]+)?$/.test(s)) return s;
    const f = Number(s);
    return Number.isFinite(f) ? float(f) : s;
  }
  if (!/[-+0-9]/.test(hint)) return s; // a letter or ~ not looked up above: a string
  // A timestamp (2006-1-2 and its longer forms) is kept as its text: it is no number anyway.
  const plain = s.replaceAll("_", "");
  const int = parseIntBase0(plain);
  if (int !== undefined) return int;
  if (YAML_STYLE_FLOAT.test(plain)) {
    const f = Number(plain);
    if (Number.isFinite(f)) return float(f);
  }
  return s;
}

/**
 * float is a float go-yaml v2 read: a number, or where its value is a whole
 * one a Number object, so that a key is written as Go writes a float (`5e9`
 * as "5e+09", not as the int 5000000000 would be); toKubeJson, and the
 * readers of values, make it a number.
 */
function float(f: number): JsonValue {
  return (Number.isInteger(f) ? new Number(f) : f) as unknown as JsonValue;
}

/**
 * goKey is the JSON key sigs.k8s.io/yaml makes of a map key go-yaml v2
 * resolved to v: a string as it is, true and false, an int in decimal, any
 * float (a non-integer number, or a Number object: see float) as Go's
 * FormatFloat(v, 'g', -1, 32); undefined for null (which it refuses).
 */
export function goKey(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (v instanceof Number) return formatFloat32(v.valueOf());
  if (typeof v === "boolean") return String(v);
  if (typeof v === "number") return Number.isSafeInteger(v) ? String(v) : formatFloat32(v);
  // An int64 keeps its digits; a uint64 beyond it sigs.k8s.io/yaml refuses as a key.
  if (typeof v === "bigint") return v <= 2n ** 63n - 1n ? String(v) : undefined;
  return undefined;
}

/** The `yaml` package's Tag, as much of it as a custom tag needs. */
interface ScalarTag {
  tag: string;
  test?: RegExp;
  resolve: (s: string) => unknown;
  default?: boolean;
  identify?: (v: unknown) => boolean;
}

/**
 * kubeTags replaces the `yaml` package's implicit scalar resolution with
 * go-yaml v2's (`customTags: kubeTags`, with `merge: true` for `<<`): one tag
 * for every plain scalar with a hinted first character, the package's own
 * tags kept for explicit `!!int`-style tags only.
 */
export function kubeTags<T extends { tag: string; test?: RegExp }>(tags: T[]): Array<T | ScalarTag> {
  const plain: ScalarTag = {
    tag: "tag:xfn.dev,2026:kube-plain",
    test: /^(?:$|[-+0-9.yYnNtTfFoO~][^]*)$/,
    resolve: (s) => goResolve(s),
    // default: tried for untagged plain scalars; identify: never chosen to write a value.
    default: true,
    identify: () => false,
  };
  return [plain, ...tags.map((t) => (t.test && !t.tag.endsWith(":merge") ? { ...t, test: undefined } : t))];
}

/**
 * toKubeJson turns what the `yaml` package read with mapAsMap into JSON as
 * sigs.k8s.io/yaml writes it: each Map an object, its keys by goKey. A key
 * it refuses (null, a list, a map) is an Error naming it.
 */
export function toKubeJson(v: unknown): unknown {
  if (v instanceof Map) {
    const out: Record<string, unknown> = {};
    for (const [k, x] of v) {
      const key = goKey(k);
      if (key === undefined)
        throw new Error(
          `a map key that is ${k === null ? "null" : Array.isArray(k) ? "a list" : k instanceof Map ? "a map" : String(k)}: ` +
            "Kubernetes reads only text, booleans and numbers up to 2^63-1 as keys",
        );
      // Own keys only (a key "__proto__" is data).
      Object.defineProperty(out, key, { value: toKubeJson(x), enumerable: true, writable: true, configurable: true });
    }
    return out;
  }
  if (Array.isArray(v)) return v.map(toKubeJson);
  return asNumber(v);
}

/** asNumber is a scalar goResolve gave as a value: a bigint or a marked float as the number JSON gives it, anything else as it is. */
export function asNumber(v: unknown): unknown {
  return typeof v === "bigint" || v instanceof Number ? Number(v) : v;
}

/**
 * formatFloat32 is Go's strconv.FormatFloat(v, 'g', -1, 32) as
 * sigs.k8s.io/yaml writes a float key: the shortest digits that read back as
 * the same float32, with an exponent where it is below -4 or 6 and above
 * (Go's rule for the shortest form); what float32 cannot hold is .inf, -.inf
 * or a zero.
 */
function formatFloat32(v: number): string {
  const f = Math.fround(v);
  if (Number.isNaN(f)) return ".nan";
  if (!Number.isFinite(f)) return f > 0 ? ".inf" : "-.inf";
  if (f === 0) return Object.is(f, -0) ? "-0" : "0";
  let digits = f.toPrecision(9);
  for (let p = 1; p <= 9; p++) {
    const t = f.toPrecision(p);
    if (Math.fround(Number(t)) === f) {
      digits = t;
      break;
    }
  }
  const n = Number(digits);
  const [mant, e] = n.toExponential().split("e") as [string, string];
  const exp = Number(e);
  if (exp < -4 || exp >= 6) return `${mant}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`;
  return String(n);
}

/** KUBE_YAML are the `yaml` package's options for reading as Kubernetes does (parse, parseAllDocuments), with toKubeJson after. */
export const KUBE_YAML = { merge: true, customTags: kubeTags, mapAsMap: true } as const;
