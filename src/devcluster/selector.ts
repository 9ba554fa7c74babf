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
