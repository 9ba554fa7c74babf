// The string formats kube-apiserver checks in CRD schemas, keyed by name
// without dashes (go-openapi's normalisation: "date-time" is "datetime").
// The set is apiextensions-apiserver's supportedVersionedFormats at 1aa2717a5
// (pkg/apiserver/validation/formats.go); each check follows kube-openapi
// d427ff9's strfmt (default.go, time.go, date.go, duration.go,
// kubernetes-extensions.go) or, where strfmt calls govalidator or Go's net
// package, what those accept.
import { isIP } from "node:net";
import { isDNS1123Label, isDNS1123Subdomain } from "./names.js";

function isDate(s: string): boolean {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return false;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (mo < 1 || mo > 12 || d < 1) return false;
  return d <= new Date(Date.UTC(y, mo, 0)).getUTCDate();
}

/** isDateTime is strfmt.IsDateTime: a full-date, "t", then a time with a zone. */
function isDateTime(s: string): boolean {
  if (s.length < 4) return false;
  const parts = s.toLowerCase().split("t");
  if (parts.length < 2 || !isDate(parts[0]!)) return false;
  const m = /^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$/.exec(parts[1]!);
  return !!m && m[1]! <= "23" && m[2]! <= "59" && m[3]! <= "59";
}

/** isDuration accepts Go's time.ParseDuration form ("1h30m", "250ms") and strfmt's "3 days" form. */
function isDuration(s: string): boolean {
  if (/^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$/.test(s) || s === "0") return true;
  return /^[0-9]+\s*(ns|us|µs|ms|s|m|h|d|w|nanoseconds?|microseconds?|milliseconds?|seconds?|minutes?|hours?|days?|weeks?)$/i.test(
    s.trim(),
  );
}

function isCIDR(s: string): boolean {
  const [ip, bits, extra] = s.split("/");
  if (extra !== undefined || ip === undefined || bits === undefined || !/^\d+$/.test(bits)) return false;
  const v = isIP(ip);
  return v !== 0 && Number(bits) <= (v === 4 ? 32 : 128);
}

function isHostname(s: string): boolean {
  if (s.length > 255) return false;
  const re =
    /^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$/u;
  return re.test(s);
}

function isURI(s: string): boolean {
  // Go's url.ParseRequestURI: an absolute URL or an absolute path, no fragment.
  if (s.startsWith("/")) return !/\s/.test(s);
  try {
    const u = new URL(s);
    return u.protocol !== "" && !s.includes("#") && !/\s/.test(s);
  } catch {
    return false;
  }
}

function isBase64(s: string): boolean {
  return /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$/.test(s);
}

const isISBN10 = (s: string) => {
  const d = s.replace(/[\s-]/g, "");
  if (!/^\d{9}[\dX]$/.test(d)) return false;
  let sum = 0;
  for (let i = 0; i < 10; i++) sum += (d[i] === "X" ? 10 : Number(d[i])) * (10 - i);
  return sum % 11 === 0;
};
const isISBN13 = (s: string) => {
  const d = s.replace(/[\s-]/g, "");
  if (!/^\d{13}$/.test(d)) return false;
  let sum = 0;
  for (let i = 0; i < 13; i++) sum += Number(d[i]) * (i % 2 ? 3 : 1);
  return sum % 10 === 0;
};

function isCreditCard(s: string): boolean {
  const d = s.replace(/[^0-9]/g, "");
  if (
    !/^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})$/.test(
      d,
    )
  )
    return false;
  let sum = 0;
  for (let i = 0; i < d.length; i++) {
    let n = Number(d[d.length - 1 - i]);
    if (i % 2) n = n * 2 > 9 ? n * 2 - 9 : n * 2;
    sum += n;
  }
  return sum % 10 === 0;
}

/** FORMATS maps a format (dashes removed) to its check. */
export const FORMATS = new Map<string, (s: string) => boolean>([
  ["bsonobjectid", (s) => /^[0-9a-fA-F]{24}$/.test(s)],
  ["uri", isURI],
  ["email", (s) => /^[^\s@<>()[\]\\,;:"]+@[^\s@<>()[\]\\,;:"]+$/.test(s) || /^.*<[^\s@]+@[^\s@]+>$/.test(s)],
  ["hostname", isHostname],
  ["ipv4", (s) => isIP(s) === 4],
  ["ipv6", (s) => isIP(s) === 6],
  ["cidr", isCIDR],
  [
    "mac",
    (s) =>
      /^([0-9A-Fa-f]{2}[:-]){5}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{4}\.){2}([0-9A-Fa-f]{4})$|^([0-9A-Fa-f]{2}[:-]){7}([0-9A-Fa-f]{2})$|^([0-9A-Fa-f]{2}[:-]){19}([0-9A-Fa-f]{2})$/.test(
        s,
      ),
  ],
  ["uuid", (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s)],
  ["uuid3", (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$/i.test(s)],
  ["uuid4", (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i.test(s)],
  ["uuid5", (s) => /^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$/i.test(s)],
  ["isbn", (s) => isISBN10(s) || isISBN13(s)],
  ["isbn10", isISBN10],
  ["isbn13", isISBN13],
  ["creditcard", isCreditCard],
  ["ssn", (s) => /^\d{3}[- ]?\d{2}[- ]?\d{4}$/.test(s)],
  ["hexcolor", (s) => /^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$/.test(s)],
  [
    "rgbcolor",
    (s) =>
      /^rgb\(\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*,\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*\)$/.test(
        s,
      ),
  ],
  ["byte", isBase64],
  ["password", () => true],
  ["date", isDate],
  ["duration", isDuration],
  ["datetime", isDateTime],
  ["k8sshortname", (s) => isDNS1123Label(s).length === 0],
  ["k8slongname", (s) => isDNS1123Subdomain(s).length === 0],
]);
