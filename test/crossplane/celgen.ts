// Generated CEL expressions for the rule engine's differential against
// Kubernetes' own CEL (test/crossplane/kubecel.test.ts): fast-check
// arbitraries over a grammar of the expressions CRD rules write (arithmetic,
// comparisons, strings and their extension functions, lists and maps with
// the macros, conditionals, Kubernetes' quantity, IP, CIDR, semver and URL
// libraries over strings drawn from valid and invalid pools). Each
// expression is typed by construction (int, double, string, bool, list of
// int, list of string, map), so that most compile and the comparison is of
// values, not only of refusals.
import fc from "fast-check";

type Arb = fc.Arbitrary<string>;

const quote = (s: string) => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

/** Strings: ASCII mostly, some with the characters rules trip on (spaces, dots, dashes, Unicode). */
const strLit: Arb = fc
  .oneof(fc.string({ maxLength: 8 }), fc.constantFrom("", "a", "abc", "a-b", "a.b.c", " x ", "ABC", "héllo", "日本", "a,b,,c", "%s"))
  .map(quote);
/** Ints: small, and near the edges of int64. */
const intLit: Arb = fc
  .oneof(fc.integer({ min: -20, max: 20 }), fc.constantFrom(0, 1, -1, 1000, 2 ** 31, -(2 ** 31)))
  .map((n) => (n < 0 ? `(${n})` : String(n)));
const doubleLit: Arb = fc
  .constantFrom("0.0", "1.5", "-2.25", "1e3", "3.14159", "0.1", "100.0")
  .map((d) => (d.startsWith("-") ? `(${d})` : d));

const QUANTITIES = ["1", "1Gi", "500m", "1.5", "2k", "1e3", "100Mi", "0.1", "-1", "abc", "1Zi", "10E"];
const IPS = ["10.0.0.1", "192.168.1.10", "::1", "2001:db8::1", "fe80::1", "255.255.255.255", "0.0.0.0", "1.2.3", "abc", "010.0.0.1"];
const CIDRS = ["10.0.0.0/8", "192.168.0.0/24", "2001:db8::/32", "10.0.0.1/32", "10.0.0.0/33", "bad", "::/0"];
const SEMVERS = ["1.0.0", "1.2.3-alpha", "0.0.1", "2.0.0+build", "1.2", "v1.0.0", "1.0.0-rc.1"];
const URLS = ["https://example.com/a?b=c", "http://x:8080/", "ftp://h/p", "not a url", "https://[::1]:443/x"];

/** expr draws an expression of the given type, depth-bounded. */
export function exprArb(): Arb {
  const { int, str, bool, ints, strs } = fc.letrec<{ int: string; str: string; bool: string; ints: string; strs: string; dbl: string }>(
    (tie) => ({
      int: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        intLit,
        fc.tuple(tie("int"), fc.constantFrom("+", "-", "*", "/", "%"), tie("int")).map(([a, op, b]) => `(${a} ${op} ${b})`),
        tie("str").map((s) => `size(${s})`),
        tie("ints").map((l) => `size(${l})`),
        tie("ints").map((l) => `${l}.sum()`),
        tie("ints").map((l) => `${l}.min()`),
        tie("ints").map((l) => `${l}.max()`),
        fc.tuple(tie("str"), tie("str")).map(([a, b]) => `${a}.indexOf(${b})`),
        fc.tuple(tie("str"), tie("str")).map(([a, b]) => `${a}.lastIndexOf(${b})`),
        fc.tuple(tie("ints"), tie("int")).map(([l, i]) => `${l}[${i}]`),
        fc.tuple(tie("bool"), tie("int"), tie("int")).map(([c, a, b]) => `(${c} ? ${a} : ${b})`),
        fc.constantFrom(...QUANTITIES).map((q) => `quantity(${quote(q)}).asInteger()`),
        fc.constantFrom(...SEMVERS).map((v) => `semver(${quote(v)}).major()`),
        fc.constantFrom(...CIDRS).map((c) => `cidr(${quote(c)}).prefixLength()`),
        fc.constantFrom(...IPS).map((i) => `ip(${quote(i)}).family()`),
        tie("dbl").map((d) => `int(${d})`),
        tie("str").map((s) => `int(${s})`),
      ),
      dbl: fc.oneof(
        { depthSize: "small" },
        doubleLit,
        fc.tuple(tie("dbl"), fc.constantFrom("+", "-", "*", "/"), tie("dbl")).map(([a, op, b]) => `(${a} ${op} ${b})`),
        tie("int").map((i) => `double(${i})`),
        fc.constantFrom(...QUANTITIES).map((q) => `quantity(${quote(q)}).asApproximateFloat()`),
      ),
      str: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        strLit,
        fc.tuple(tie("str"), tie("str")).map(([a, b]) => `(${a} + ${b})`),
        tie("str").map((s) => `${s}.lowerAscii()`),
        tie("str").map((s) => `${s}.upperAscii()`),
        tie("str").map((s) => `${s}.trim()`),
        tie("str").map((s) => `${s}.reverse()`),
        fc.tuple(tie("str"), tie("str"), tie("str")).map(([s, a, b]) => `${s}.replace(${a}, ${b})`),
        fc.tuple(tie("str"), tie("int")).map(([s, i]) => `${s}.substring(${i})`),
        fc.tuple(tie("str"), tie("int")).map(([s, i]) => `${s}.charAt(${i})`),
        fc.tuple(tie("strs"), tie("str")).map(([l, sep]) => `${l}.join(${sep})`),
        tie("int").map((i) => `string(${i})`),
        tie("dbl").map((d) => `string(${d})`),
        fc.tuple(tie("str"), tie("int")).map(([s, i]) => `'%s-%d'.format([${s}, ${i}])`),
        fc.constantFrom(...URLS).map((u) => `url(${quote(u)}).getHost()`),
        fc.constantFrom(...URLS).map((u) => `url(${quote(u)}).getScheme()`),
        fc.constantFrom(...CIDRS).map((c) => `string(cidr(${quote(c)}).masked())`),
        fc.constantFrom(...IPS).map((i) => `string(ip(${quote(i)}))`),
        fc.tuple(tie("str"), fc.constantFrom("[a-z]+", "^a", "b$", "\\\\d+", "(x|y)")).map(([s, re]) => `${s}.find('${re}')`),
      ),
      bool: fc.oneof(
        { depthSize: "small", withCrossShrink: true },
        fc.constantFrom("true", "false"),
        fc.tuple(tie("int"), fc.constantFrom("==", "!=", "<", "<=", ">", ">="), tie("int")).map(([a, op, b]) => `(${a} ${op} ${b})`),
        fc.tuple(tie("dbl"), fc.constantFrom("==", "<", ">="), tie("int")).map(([a, op, b]) => `(${a} ${op} ${b})`),
        fc.tuple(tie("str"), fc.constantFrom("==", "!=", "<", ">"), tie("str")).map(([a, op, b]) => `(${a} ${op} ${b})`),
        fc.tuple(tie("bool"), fc.constantFrom("&&", "||"), tie("bool")).map(([a, op, b]) => `(${a} ${op} ${b})`),
        tie("bool").map((b) => `!${b}`),
        fc.tuple(tie("str"), tie("str")).map(([a, b]) => `${a}.startsWith(${b})`),
        fc.tuple(tie("str"), tie("str")).map(([a, b]) => `${a}.endsWith(${b})`),
        fc.tuple(tie("str"), tie("str")).map(([a, b]) => `${a}.contains(${b})`),
        fc.tuple(tie("str"), fc.constantFrom("^[a-z]+$", "a.c", "^$", "[0-9]", "(?i)abc")).map(([s, re]) => `${s}.matches('${re}')`),
        fc.tuple(tie("int"), tie("ints")).map(([i, l]) => `(${i} in ${l})`),
        fc.tuple(tie("str"), tie("strs")).map(([s, l]) => `(${s} in ${l})`),
        tie("ints").map((l) => `${l}.all(x, x > 0)`),
        tie("ints").map((l) => `${l}.exists(x, x % 2 == 0)`),
        tie("ints").map((l) => `${l}.exists_one(x, x == 1)`),
        tie("ints").map((l) => `${l}.all(i, v, v >= i)`),
        tie("ints").map((l) => `${l}.isSorted()`),
        tie("strs").map((l) => `${l}.all(s, s.size() < 4)`),
        fc.constantFrom(...QUANTITIES).map((q) => `isQuantity(${quote(q)})`),
        fc.constantFrom(...IPS).map((i) => `isIP(${quote(i)})`),
        fc.constantFrom(...CIDRS).map((c) => `isCIDR(${quote(c)})`),
        fc.constantFrom(...SEMVERS).map((v) => `isSemver(${quote(v)})`),
        fc.constantFrom(...URLS).map((u) => `isURL(${quote(u)})`),
        fc
          .tuple(fc.constantFrom(...QUANTITIES), fc.constantFrom(...QUANTITIES))
          .map(([a, b]) => `quantity(${quote(a)}).isLessThan(quantity(${quote(b)}))`),
        fc.tuple(fc.constantFrom(...CIDRS), fc.constantFrom(...IPS)).map(([c, i]) => `cidr(${quote(c)}).containsIP(${quote(i)})`),
        fc
          .tuple(fc.constantFrom(...SEMVERS), fc.constantFrom(...SEMVERS))
          .map(([a, b]) => `semver(${quote(a)}).isGreaterThan(semver(${quote(b)}))`),
        fc.constantFrom(...IPS).map((i) => `ip(${quote(i)}).isLoopback()`),
        fc.tuple(tie("ints"), tie("ints")).map(([a, b]) => `sets.contains(${a}, ${b})`),
        fc.tuple(tie("strs"), tie("strs")).map(([a, b]) => `sets.intersects(${a}, ${b})`),
      ),
      ints: fc.oneof(
        { depthSize: "small" },
        fc.array(intLit, { maxLength: 5 }).map((xs) => `[${xs.join(", ")}]`),
        tie("ints").map((l) => `${l}.map(x, x * 2)`),
        tie("ints").map((l) => `${l}.filter(x, x > 0)`),
        tie("ints").map((l) => `${l}.sort()`),
        tie("ints").map((l) => `${l}.transformList(i, v, v + i)`),
        fc.tuple(tie("ints"), tie("ints")).map(([a, b]) => `(${a} + ${b})`),
        tie("str").map((s) => `${s}.split('').map(c, size(c))`),
      ),
      strs: fc.oneof(
        { depthSize: "small" },
        fc.array(strLit, { maxLength: 4 }).map((xs) => `[${xs.join(", ")}]`),
        fc.tuple(tie("str"), tie("str")).map(([s, sep]) => `${s}.split(${sep})`),
        tie("str").map((s) => `${s}.findAll('[a-z]')`),
        tie("strs").map((l) => `${l}.map(s, s.upperAscii())`),
      ),
    }),
  );
  return fc.oneof(int, str, bool, ints, strs);
}
