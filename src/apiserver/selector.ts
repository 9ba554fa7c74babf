// Label selectors in Kubernetes' string syntax:
//   a=b, a==b, a!=b, a in (x,y), a notin (x,y), a, !a   (comma-separated, all must hold)

export type Requirement =
  | { key: string; op: "=" | "!="; value: string }
  | { key: string; op: "in" | "notin"; values: string[] }
  | { key: string; op: "exists" | "!exists" };

const KEY = /^([a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?\/)?[a-z0-9A-Z]([-a-z0-9A-Z_.]*[a-z0-9A-Z])?$/;

/** parseSelector parses a label selector; it throws naming the part it cannot read. */
export function parseSelector(text: string): Requirement[] {
  const out: Requirement[] = [];
  // Split on commas that are not inside parentheses.
  const parts: string[] = [];
  let depth = 0;
  let cur = "";
  for (const ch of text) {
    if (ch === "(") depth++;
    if (ch === ")") depth--;
    if (ch === "," && depth === 0) {
      parts.push(cur);
      cur = "";
    } else cur += ch;
  }
  if (cur.trim() !== "" || parts.length > 0) parts.push(cur);
  for (const raw of parts) {
    const p = raw.trim();
    let m: RegExpExecArray | null;
    if ((m = /^(\S+?)\s*(!=|==|=)\s*(\S*)$/.exec(p))) {
      out.push({ key: m[1]!, op: m[2] === "!=" ? "!=" : "=", value: m[3]! });
    } else if ((m = /^(\S+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(p))) {
      out.push({
        key: m[1]!,
        op: m[2] as "in" | "notin",
        values: m[3]!
          .split(",")
          .map((v) => v.trim())
          .filter(Boolean),
      });
    } else if ((m = /^!\s*(\S+)$/.exec(p))) {
      out.push({ key: m[1]!, op: "!exists" });
    } else if (KEY.test(p)) {
      out.push({ key: p, op: "exists" });
    } else {
      throw new Error(`unable to parse requirement: ${JSON.stringify(p)}`);
    }
  }
  for (const r of out) if (!KEY.test(r.key)) throw new Error(`invalid label key ${JSON.stringify(r.key)}`);
  return out;
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
    if (!m) throw new Error(`invalid field selector: ${JSON.stringify(p)}`);
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
