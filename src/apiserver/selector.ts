// Label selectors in Kubernetes' string syntax:
//   a=b, a==b, a!=b, a in (x,y), a notin (x,y), a, !a, a>1, a<1   (comma-separated, all must hold)
// read by a lexer and parser shaped as apimachinery's labels/selector.go
// (Lexer, Parser.parse, parseRequirement, parseValues, NewRequirement), so a
// selector kube-apiserver refuses is refused here with the same words
// ("found '=', expected: ',' or 'end of string'", "unable to parse
// requirement: values[0][app]: Invalid value: ...").
import { isLabelValue, isQualifiedName } from "./meta.js";
import { messageOf } from "../sdk/errors.js";

export type Requirement =
  | { key: string; op: "=" | "!="; value: string }
  | { key: string; op: "in" | "notin"; values: string[] }
  | { key: string; op: "exists" | "!exists" }
  | { key: string; op: "gt" | "lt"; value: number };

type Token = "error" | "end" | ")" | "," | "!" | "==" | "=" | ">" | "id" | "in" | "<" | "!=" | "notin" | "(";
const KEYWORDS: Record<string, Token> = {
  ")": ")",
  ",": ",",
  "!": "!",
  "==": "==",
  "=": "=",
  ">": ">",
  in: "in",
  "<": "<",
  "!=": "!=",
  notin: "notin",
  "(": "(",
};
const SPECIAL = new Set(["=", "!", "(", ")", ",", ">", "<"]);
const SPACE = new Set([" ", "\t", "\r", "\n"]);

/** lex splits a selector into tokens as apimachinery's Lexer does. */
function lex(s: string): Array<[Token, string]> {
  const out: Array<[Token, string]> = [];
  let i = 0;
  for (;;) {
    while (i < s.length && SPACE.has(s[i]!)) i++;
    if (i >= s.length) {
      out.push(["end", ""]);
      return out;
    }
    if (SPECIAL.has(s[i]!)) {
      // The longest run of special symbols that is still a token.
      let buf = "";
      let last: [Token, string] | undefined;
      while (i < s.length && SPECIAL.has(s[i]!)) {
        buf += s[i];
        const t = KEYWORDS[buf];
        if (t) last = [t, buf];
        else if (last) break;
        i++;
      }
      if (!last) {
        out.push(["error", `error expected: keyword found '${buf}'`]);
        out.push(["end", ""]);
        return out;
      }
      out.push(last);
      continue;
    }
    let buf = "";
    while (i < s.length && !SPECIAL.has(s[i]!) && !SPACE.has(s[i]!)) buf += s[i++];
    out.push([Object.hasOwn(KEYWORDS, buf) ? KEYWORDS[buf]! : "id", buf]);
  }
}

/** parseSelector parses a label selector; it throws with apimachinery's message where it cannot. */
export function parseSelector(text: string): Requirement[] {
  const items = lex(text);
  let pos = 0;
  // In a value, "in" and "notin" are plain identifiers.
  const asValue = (t: Token): Token => (t === "in" || t === "notin" ? "id" : t);
  const look = (values = true): [Token, string] => [values ? asValue(items[pos]![0]) : items[pos]![0], items[pos]![1]];
  const take = (values = true): [Token, string] => {
    const [t, l] = items[pos++]!;
    return [values ? asValue(t) : t, l];
  };
  const out: Requirement[] = [];
  for (;;) {
    const [tok, lit] = look();
    if (tok === "end") return out;
    if (tok !== "id" && tok !== "!") throw new Error(`found '${lit}', expected: !, identifier, or 'end of string'`);
    try {
      out.push(requirement());
    } catch (err) {
      throw new Error(`unable to parse requirement: ${messageOf(err)}`);
    }
    const [t, l] = take();
    if (t === "end") return out;
    if (t !== ",") throw new Error(`found '${l}', expected: ',' or 'end of string'`);
    const [t2, l2] = look();
    if (t2 !== "id" && t2 !== "!") throw new Error(`found '${l2}', expected: identifier after ','`);
  }

  function requirement(): Requirement {
    let [tok, key] = take();
    let not = false;
    if (tok === "!") {
      not = true;
      [tok, key] = take();
    }
    if (tok !== "id") throw new Error(`found '${key}', expected: identifier`);
    const badKey = isQualifiedName(key);
    if (badKey.length) throw new Error(`key: Invalid value: ${JSON.stringify(key)}: ${badKey.join("; ")}`);
    if (not) return { key, op: "!exists" };
    const [next] = look();
    if (next === "end" || next === ",") return { key, op: "exists" };
    const [opTok, opLit] = take(false);
    const value = (v: string, i = 0) => {
      const bad = isLabelValue(v);
      if (bad.length) throw new Error(`values[${i}][${key}]: Invalid value: ${JSON.stringify(v)}: ${bad.join("; ")}`);
      return v;
    };
    switch (opTok) {
      case "in":
      case "notin": {
        const values = [...new Set(list())].sort();
        values.forEach((v, i) => value(v, i));
        return { key, op: opTok, values };
      }
      case "=":
      case "==":
      case "!=":
        return { key, op: opTok === "!=" ? "!=" : "=", value: value(exact()) };
      case ">":
      case "<": {
        const v = exact();
        if (!/^[+-]?\d+$/.test(v))
          throw new Error(`values[0]: Invalid value: ${JSON.stringify(v)}: for 'Gt', 'Lt' operators, the value must be an integer`);
        return { key, op: opTok === ">" ? "gt" : "lt", value: Number(v) };
      }
      default:
        throw new Error(`found '${opLit}', expected: '=', '!=', '==', 'in', notin'`);
    }
  }

  function exact(): string {
    const [t] = look();
    if (t === "end" || t === ",") return "";
    const [t2, l2] = take();
    if (t2 === "id") return l2;
    throw new Error(`found '${l2}', expected: identifier`);
  }

  function list(): string[] {
    const [open, lo] = take();
    if (open !== "(") throw new Error(`found '${lo}' expected: '('`);
    const [t, l] = look();
    if (t === ")") {
      take();
      return [""];
    }
    if (t !== "id" && t !== ",") throw new Error(`found '${l}', expected: ',', ')' or identifier`);
    const values: string[] = [];
    for (;;) {
      const [tt, ll] = take();
      if (tt === "id") {
        values.push(ll);
        const [t2, l2] = look();
        if (t2 === ",") continue;
        if (t2 === ")") break;
        throw new Error(`found '${l2}', expected: ',' or ')'`);
      } else if (tt === ",") {
        if (values.length === 0) values.push("");
        const [t2] = look();
        if (t2 === ")") {
          values.push("");
          break;
        }
        if (t2 === ",") {
          take();
          values.push("");
        }
      } else throw new Error(`found '${ll}', expected: ',', or identifier`);
    }
    const [close, lc] = take();
    if (close !== ")") throw new Error(`found '${lc}', expected: ')'`);
    return values;
  }
}

/** matches reports whether labels satisfy every requirement. */
export function matches(reqs: readonly Requirement[], labels: Readonly<Record<string, string>>): boolean {
  return reqs.every((r) => {
    const has = Object.hasOwn(labels, r.key);
    const v = labels[r.key];
    switch (r.op) {
      case "=":
        return v === r.value;
      case "!=":
        return v !== r.value;
      case "in":
        return has && r.values.includes(v!);
      case "notin":
        return !has || !r.values.includes(v!);
      case "exists":
        return has;
      case "!exists":
        return !has;
      case "gt":
      case "lt": {
        // An integer label compared with an integer; anything else does not match.
        if (!has || !/^[+-]?\d+$/.test(v!)) return false;
        return r.op === "gt" ? Number(v) > r.value : Number(v) < r.value;
      }
    }
  });
}

/** FieldRequirement is one part of a field selector: path=value or path!=value. */
export interface FieldRequirement {
  path: string;
  op: "=" | "!=";
  value: string;
}

// What each kind may be selected by, as kube-apiserver allows: name and
// namespace for every kind, and for Events what kubectl describe asks for.
const COMMON_FIELDS = ["metadata.name", "metadata.namespace"];
const EVENT_FIELDS = [
  "involvedObject.kind",
  "involvedObject.namespace",
  "involvedObject.name",
  "involvedObject.uid",
  "involvedObject.apiVersion",
  "involvedObject.resourceVersion",
  "involvedObject.fieldPath",
  "reason",
  "reportingComponent",
  "source",
  "type",
];

/** parseFieldSelector parses a field selector for a kind; it throws naming an unsupported field. */
export function parseFieldSelector(text: string, kind: string, group: string): FieldRequirement[] {
  const allowed = new Set(group === "" && kind === "Event" ? [...COMMON_FIELDS, ...EVENT_FIELDS] : COMMON_FIELDS);
  const out: FieldRequirement[] = [];
  for (const raw of text.split(",")) {
    const p = raw.trim();
    if (p === "") continue;
    const m = /^([^=!]+?)\s*(!=|==|=)\s*(.*)$/.exec(p);
    if (!m) throw new Error(`invalid selector: '${text}'; can't understand '${p}'`);
    const path = m[1]!.trim();
    if (!allowed.has(path)) throw new Error(`field label not supported: ${path}`);
    out.push({ path, op: m[2] === "!=" ? "!=" : "=", value: m[3]!.trim() });
  }
  return out;
}

/** fieldsMatch tells whether object o meets every field requirement. */
export function fieldsMatch(reqs: readonly FieldRequirement[], o: Record<string, unknown>): boolean {
  for (const r of reqs) {
    let v: unknown = o;
    const path = r.path === "source" ? "source.component" : r.path;
    for (const k of path.split(".")) v = typeof v === "object" && v !== null ? (v as Record<string, unknown>)[k] : undefined;
    const s = v === undefined || v === null ? "" : String(v);
    if ((s === r.value) !== (r.op === "=")) return false;
  }
  return true;
}
