// The differential runner (issue 59): one request sequence sent to the real
// kube-apiserver and to xfn's embedded API server, the answers compared. The
// expected answer is always what the real server said in the same run; a
// difference is classed by what it costs a user, worst first:
//
//   false refusal     the real server accepted, ours refused
//   false acceptance  the real server refused, ours accepted
//   status            both refused, with another code or reason (or other causes)
//   value             both accepted, and the objects (or lists) differ
//   words             both refused alike, in other words
//
// Answers are normalised first: uids, resourceVersions, timestamps (in fields
// and in messages) and managedFields' times differ between any two servers.
import type { KubeAnswer } from "../support/kubefetch.js";

/** A fetch of one API server (test/support/kubefetch.ts). */
export type Fetch = (path: string, init?: { method?: string; headers?: Record<string, string>; body?: string }) => Promise<KubeAnswer>;

/** How a step's body is sent: JSON (POST, PUT), or a patch of one of the four kinds. */
export type BodyType = "json" | "merge" | "strategic" | "json-patch" | "apply";

const CONTENT_TYPES: Record<BodyType, string> = {
  json: "application/json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
  "json-patch": "application/json-patch+json",
  apply: "application/apply-patch+yaml",
};

export interface Step {
  /** What the step does, for a difference's report. */
  name: string;
  method?: "GET" | "POST" | "PUT" | "PATCH" | "DELETE";
  path: string;
  body?: unknown;
  type?: BodyType;
  /** An Accept header (a Table's, as kubectl get asks for one). */
  accept?: string;
  /** After the step, wait (untimed, not compared) until this path answers 200 on each server where the step succeeded. */
  served?: string;
  /** Sent only if the step of this index succeeded on both servers (else skipped on both). */
  ifBothOk?: number;
  /** Sent to each server where the step of this index succeeded there (clean-up). */
  ifAnyOk?: number;
  /** false: sent, not compared (clean-up). */
  compare?: boolean;
  /**
   * A watch (kubectl get -w): path is watched from the resourceVersion of the
   * object or list step watchFrom answered on each server (servers count
   * their own), for timeoutSeconds (1 by default); the events it streamed are
   * the answer, in order.
   */
  watchFrom?: number;
  /** Keys left out of both answers, wherever they are (an OpenAPI document's descriptions, which are ours by rule). */
  ignore?: string[];
  /** A watch from this very resourceVersion instead (the same on both servers: "1", too old). */
  watchAt?: string;
  timeoutSeconds?: number;
  /**
   * After the step (a CRD's schema changed), wait (untimed, not compared) on
   * each server where it succeeded until the new schema is the one objects
   * meet, as kube's ratcheting test waits: the schema holds a sentinel field
   * whose enum is one value, uuid, and a write of another value to it is sent
   * to path until the refusal names uuid. With status, the write is a status
   * one (to path/status, the object created first).
   */
  settle?: Settle;
}

export interface Settle {
  /** The object's path (a namespaced name); it is written with server-side apply. */
  path: string;
  apiVersion: string;
  kind: string;
  field: string;
  uuid: string;
  status: boolean;
}

export interface Sequence {
  /** A stable name: differences are known by it. */
  id: string;
  /** Where its inputs come from (a file and case of kube's tests at a tag, a kubectl command). */
  source: string;
  steps: Step[];
}

export type Kind = "false refusal" | "false acceptance" | "status" | "value" | "words";
export const KINDS: Kind[] = ["false refusal", "false acceptance", "status", "value", "words"];

export interface Difference {
  /** `<sequence>#<step index> <step name>` */
  where: string;
  kind: Kind;
  /** The JSON path of a value, or the part of an answer (code, reason, message, causes). */
  at: string;
  real: unknown;
  ours: unknown;
}

/** key is how a difference is known in the list of known ones: its place, kind and path, not its values. */
export const key = (d: Difference) => `${d.where}: ${d.kind} at ${d.at}`;

interface Answer {
  status: number;
  body: unknown;
}

const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const AGE = /^(?=\d)(\d+y)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?$/;
const TIME = /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})/g;

/** normalise is a body with what differs between any two servers replaced by placeholders. */
export function normalise(v: unknown, path: string[] = []): unknown {
  // An age (a Table's Age cell: "0s", "1s", "5m3s") depends on when each server was asked.
  if (typeof v === "string") return AGE.test(v) ? "<age>" : v.replace(UUID, "<uid>").replace(TIME, "<time>");
  if (Array.isArray(v)) return v.map((x, i) => normalise(x, [...path, String(i)]));
  if (v === null || typeof v !== "object") return v;
  const out: Record<string, unknown> = {};
  const inMetadata = path.at(-1) === "metadata";
  for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
    if (inMetadata && (k === "resourceVersion" || k === "uid" || k === "selfLink")) out[k] = "<set>";
    else if (inMetadata && k === "creationTimestamp" && x !== null) out[k] = "<time>";
    else if (inMetadata && k === "managedFields" && Array.isArray(x))
      out[k] = x.map((m: Record<string, unknown>) => normalise({ ...m, ...(m["time"] ? { time: "<time>" } : {}) }, [...path, k]));
    else out[k] = normalise(x, [...path, k]);
  }
  return out;
}

/** leaves are the differing paths of two JSON values, at most limit of them. */
function leaves(a: unknown, b: unknown, at: string, out: { at: string; real: unknown; ours: unknown }[], limit = 20): void {
  if (out.length >= limit) return;
  const obj = (x: unknown) => x !== null && typeof x === "object";
  if (obj(a) && obj(b) && Array.isArray(a) === Array.isArray(b)) {
    const ka = Object.keys(a as object);
    const kb = Object.keys(b as object);
    for (const k of [...new Set([...ka, ...kb])].sort())
      leaves((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], `${at}.${k}`, out, limit);
    return;
  }
  if (JSON.stringify(a) !== JSON.stringify(b)) out.push({ at: at || ".", real: a, ours: b });
}

interface StatusBody {
  kind?: string;
  reason?: string;
  message?: string;
  details?: { causes?: { field?: string; reason?: string }[] };
}

/**
 * sameErrors says whether two refusals hold the same errors in another order:
 * kube-openapi walks an object's properties in Go's map order, which differs
 * from run to run, so the order of a multi-error message is no difference.
 */
function sameErrors(a: string | undefined, b: string | undefined): boolean {
  const parts = (m: string) => {
    const i = m.indexOf(" is invalid: [");
    return i < 0 || !m.endsWith("]")
      ? [m]
      : [
          m.slice(0, i),
          ...m
            .slice(i + 14, -1)
            .split(", ")
            .sort(),
        ];
  };
  return a !== undefined && b !== undefined && JSON.stringify(parts(a)) === JSON.stringify(parts(b));
}

/** compare classes how ours answered a step against the real server's answer. */
export function compare(where: string, real: Answer, ours: Answer): Difference[] {
  const okReal = real.status < 300;
  const okOurs = ours.status < 300;
  const r = normalise(real.body) as StatusBody;
  const o = normalise(ours.body) as StatusBody;
  if (okReal && !okOurs)
    return [{ where, kind: "false refusal", at: "code", real: real.status, ours: `${ours.status} ${o?.message ?? ""}` }];
  if (!okReal && okOurs)
    return [{ where, kind: "false acceptance", at: "code", real: `${real.status} ${r?.message ?? ""}`, ours: ours.status }];
  const out: Difference[] = [];
  if (!okReal) {
    if (real.status !== ours.status) out.push({ where, kind: "status", at: "code", real: real.status, ours: ours.status });
    if (r?.reason !== o?.reason) out.push({ where, kind: "status", at: "reason", real: r?.reason, ours: o?.reason });
    const causes = (s: StatusBody) => (s?.details?.causes ?? []).map((c) => `${c.reason ?? ""} ${c.field ?? ""}`).sort();
    if (JSON.stringify(causes(r)) !== JSON.stringify(causes(o)))
      out.push({ where, kind: "status", at: "causes", real: causes(r), ours: causes(o) });
    if (r?.message !== o?.message && !sameErrors(r?.message, o?.message))
      out.push({ where, kind: "words", at: "message", real: r?.message, ours: o?.message });
    return out;
  }
  const found: { at: string; real: unknown; ours: unknown }[] = [];
  leaves(r, o, "", found);
  return found.map((f) => ({ where, kind: "value" as const, ...f }));
}

/** resourceVersionOf is an answer's metadata.resourceVersion (an object's or a list's). */
const resourceVersionOf = (a: Answer | undefined): string => {
  const m = (a?.body as { metadata?: { resourceVersion?: unknown } } | undefined)?.metadata;
  return typeof m?.resourceVersion === "string" ? m.resourceVersion : "";
};

/** watched is the events a watch step streamed, each parsed (a line that does not parse is kept as text). */
async function watched(f: Fetch, step: Step, from: string): Promise<Answer> {
  const sep = step.path.includes("?") ? "&" : "?";
  const res = await f(`${step.path}${sep}watch=true&resourceVersion=${from}&timeoutSeconds=${step.timeoutSeconds ?? 1}`);
  const text = await res.text();
  const events = text
    .split("\n")
    .filter((l) => l.trim())
    .map((l) => {
      try {
        return JSON.parse(l) as unknown;
      } catch {
        return l;
      }
    });
  return { status: res.status, body: res.status < 300 ? { events } : events[0] };
}

async function answer(f: Fetch, step: Step): Promise<Answer> {
  const method = step.method ?? "GET";
  const type = step.type ?? (method === "PATCH" ? "merge" : "json");
  const headers: Record<string, string> = step.accept ? { accept: step.accept } : {};
  if (step.body !== undefined) headers["content-type"] = CONTENT_TYPES[type];
  const res = await f(step.path, {
    method,
    headers,
    ...(step.body !== undefined ? { body: typeof step.body === "string" ? step.body : JSON.stringify(step.body) } : {}),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // a plain-text answer (a 404 page) is compared as text
  }
  return { status: res.status, body };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** served waits until path answers 200 on f (a CRD's kind is served some time after its create). */
async function served(f: Fetch, path: string): Promise<void> {
  for (const until = Date.now() + 30_000; ; await sleep(100)) {
    if ((await f(path)).status === 200) return;
    if (Date.now() > until) throw new Error(`${path} was not served within 30 s`);
  }
}

/** settled waits until a write of the sentinel field is refused naming its one allowed value (Step.settle). */
async function settled(f: Fetch, w: Settle): Promise<void> {
  const name = w.path.split("/").at(-1)!;
  const namespace = /\/namespaces\/([^/]+)\//.exec(w.path)?.[1];
  const meta = { name, ...(namespace ? { namespace } : {}) };
  const apply = { "content-type": CONTENT_TYPES.apply };
  for (let n = 1, until = Date.now() + 30_000; ; n++, await sleep(100)) {
    const value = { [w.field]: `invalid-${n}` };
    let res: KubeAnswer;
    if (w.status) {
      const collection = w.path.slice(0, w.path.lastIndexOf("/"));
      const created = await f(collection, {
        method: "POST",
        headers: { "content-type": CONTENT_TYPES.json },
        body: JSON.stringify({ apiVersion: w.apiVersion, kind: w.kind, metadata: meta }),
      });
      await created.text();
      res = await f(`${w.path}/status?fieldManager=manager`, {
        method: "PATCH",
        headers: apply,
        body: JSON.stringify({ apiVersion: w.apiVersion, kind: w.kind, metadata: meta, status: value }),
      });
    } else {
      res = await f(`${w.path}?fieldManager=manager`, {
        method: "PATCH",
        headers: apply,
        body: JSON.stringify({ apiVersion: w.apiVersion, kind: w.kind, metadata: meta, ...value }),
      });
    }
    if ((await res.text()).includes(w.uuid)) return;
    if (Date.now() > until) throw new Error(`the schema with sentinel ${w.uuid} did not take effect at ${w.path} within 30 s`);
  }
}

/** without is v with the keys named left out at every level. */
function without(v: unknown, keys: Set<string>): unknown {
  if (Array.isArray(v)) return v.map((x) => without(x, keys));
  if (typeof v !== "object" || v === null) return v;
  return Object.fromEntries(
    Object.entries(v)
      .filter(([k]) => !keys.has(k))
      .map(([k, x]) => [k, without(x, keys)]),
  );
}

/** run sends a sequence's steps to both servers in turn, answering the differences. */
export async function run(seq: Sequence, real: Fetch, ours: Fetch): Promise<Difference[]> {
  const out: Difference[] = [];
  const ok: [boolean, boolean][] = [];
  const answers: [Answer | undefined, Answer | undefined][] = [];
  for (const [i, step] of seq.steps.entries()) {
    if (step.ifBothOk !== undefined && !(ok[step.ifBothOk]?.[0] && ok[step.ifBothOk]?.[1])) {
      ok.push([false, false]);
      answers.push([undefined, undefined]);
      continue;
    }
    const send = step.ifAnyOk === undefined ? [true, true] : ok[step.ifAnyOk]!;
    const ask = (f: Fetch, side: 0 | 1) =>
      step.watchAt !== undefined
        ? watched(f, step, step.watchAt)
        : step.watchFrom === undefined
          ? answer(f, step)
          : watched(f, step, resourceVersionOf(answers[step.watchFrom]?.[side]));
    const a = send[0] ? await ask(real, 0) : undefined;
    const b = send[1] ? await ask(ours, 1) : undefined;
    ok.push([!!a && a.status < 300, !!b && b.status < 300]);
    answers.push([a, b]);
    if (a && b && step.compare !== false) {
      const drop = (x: Answer): Answer => (step.ignore ? { ...x, body: without(x.body, new Set(step.ignore)) } : x);
      out.push(...compare(`${seq.id}#${i} ${step.name}`, drop(a), drop(b)));
    }
    if (step.served) await Promise.all([ok[i]![0] && served(real, step.served), ok[i]![1] && served(ours, step.served)]);
    if (step.settle) await Promise.all([ok[i]![0] && settled(real, step.settle), ok[i]![1] && settled(ours, step.settle)]);
  }
  return out;
}
