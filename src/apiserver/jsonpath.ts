// The JSONPath of a CRD's additionalPrinterColumns, as kube-apiserver reads it
// (k8s.io/client-go/util/jsonpath, relaxed: no braces, leading "." or "$."):
//   .a.b   ['a.b']   [2]   [-1]   [*]   .*   [?(@.type=='Ready')]   [?(@.n>=2)]
// A path evaluates to a list of values (wildcards and filters may give many).
import type { JsonValue } from "@bufbuild/protobuf";
import { getOwn } from "../own.js";
import { isObject } from "../json.js";

type Step =
  | { field: string }
  | { index: number }
  | { all: true }
  | { filter: { path: (string | number)[]; op: "==" | "!=" | "<" | "<=" | ">" | ">=" | "exists"; value?: JsonValue } };

/** JsonPathError names what cannot be parsed. */
export class JsonPathError extends Error {}

/** parseJsonPath parses a printer column's path; it throws JsonPathError naming the problem. */
export function parseJsonPath(path: string): Step[] {
  let s = path.trim();
  if (s.startsWith("{") && s.endsWith("}")) s = s.slice(1, -1).trim();
  if (s.startsWith("$")) s = s.slice(1);
  const steps: Step[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw new JsonPathError(`invalid JSONPath ${JSON.stringify(path)} at ${i}: ${why}`);
  };
  while (i < s.length) {
    const c = s[i]!;
    if (c === ".") {
      i++;
      if (s[i] === "*") {
        i++;
        steps.push({ all: true });
        continue;
      }
      const m = /^[^.[\]]+/.exec(s.slice(i));
      if (!m) fail("expected a field name after '.'");
      steps.push({ field: m![0] });
      i += m![0].length;
    } else if (c === "[") {
      const end = closing(s, i);
      if (end < 0) fail("unterminated '['");
      const inner = s.slice(i + 1, end).trim();
      i = end + 1;
      if (inner === "*") steps.push({ all: true });
      else if (/^-?\d+$/.test(inner)) steps.push({ index: Number(inner) });
      else if (/^'[^']*'$|^"[^"]*"$/.test(inner)) steps.push({ field: inner.slice(1, -1) });
      else if (inner.startsWith("?(") && inner.endsWith(")")) steps.push({ filter: parseFilter(inner.slice(2, -1).trim(), fail) });
      else fail(`cannot read [${inner}]`);
    } else fail(`unexpected ${JSON.stringify(c)}`);
  }
  return steps;
}

/** closing finds the ']' that closes the '[' at i, skipping quoted text. */
function closing(s: string, i: number): number {
  let quote = "";
  for (let j = i + 1; j < s.length; j++) {
    const c = s[j]!;
    if (quote) {
      if (c === quote) quote = "";
    } else if (c === "'" || c === '"') quote = c;
    else if (c === "]") return j;
  }
  return -1;
}

function parseFilter(text: string, fail: (why: string) => never): Extract<Step, { filter: unknown }>["filter"] {
  const m = /^@((?:\.[^.=!<>\s]+|\[\d+\])+)\s*(?:(==|!=|<=|>=|<|>)\s*(.+))?$/.exec(text);
  if (!m) return fail(`cannot read the filter ${JSON.stringify(text)}`);
  const path = [...m[1]!.matchAll(/\.([^.[\]]+)|\[(\d+)\]/g)].map((p) => (p[1] !== undefined ? p[1] : Number(p[2])));
  if (!m[2]) return { path, op: "exists" };
  const raw = m[3]!.trim();
  let value: JsonValue;
  if (/^'.*'$|^".*"$/.test(raw)) value = raw.slice(1, -1);
  else if (raw === "true" || raw === "false") value = raw === "true";
  else if (raw === "null") value = null;
  else if (/^-?\d+(\.\d+)?$/.test(raw)) value = Number(raw);
  else return fail(`cannot read the value ${JSON.stringify(raw)}`);
  return { path, op: m[2] as "==", value };
}

/** evaluate returns every value path selects in obj (none when a part is missing). */
export function evaluate(steps: Step[], obj: JsonValue): JsonValue[] {
  let cur: JsonValue[] = [obj];
  for (const st of steps) {
    const next: JsonValue[] = [];
    for (const v of cur) {
      if ("field" in st) {
        if (isObject(v) && Object.hasOwn(v, st.field)) next.push(v[st.field]!);
      } else if ("index" in st) {
        if (Array.isArray(v)) {
          const x = v[st.index < 0 ? v.length + st.index : st.index];
          if (x !== undefined) next.push(x);
        }
      } else if ("all" in st) {
        if (Array.isArray(v)) next.push(...v);
        else if (isObject(v)) next.push(...Object.values(v));
      } else {
        const items = Array.isArray(v) ? v : isObject(v) ? Object.values(v) : [];
        for (const x of items) if (matches(st.filter, x)) next.push(x);
      }
    }
    cur = next;
  }
  return cur;
}

function matches(f: Extract<Step, { filter: unknown }>["filter"], item: JsonValue): boolean {
  let v: JsonValue | undefined = item;
  for (const p of f.path) {
    if (typeof p === "number") v = Array.isArray(v) ? v[p] : undefined;
    else v = isObject(v) ? getOwn(v, p) : undefined;
  }
  if (f.op === "exists") return v !== undefined;
  if (v === undefined) return false;
  switch (f.op) {
    case "==":
      return v === f.value || (typeof f.value === "number" && Number(v) === f.value);
    case "!=":
      return v !== f.value;
    default: {
      const a = Number(v);
      const b = Number(f.value);
      if (Number.isNaN(a) || Number.isNaN(b)) return false;
      return f.op === "<" ? a < b : f.op === "<=" ? a <= b : f.op === ">" ? a > b : a >= b;
    }
  }
}
