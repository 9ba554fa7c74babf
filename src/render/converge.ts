// Rendering until the pipeline converges: reconcile after reconcile, offline.
//
// `xfn render` is one reconcile. A pipeline with dependencies, readiness and
// lifecycle steps only shows what it does over several: a resource held back
// until another is ready, the XR Ready once every resource is. converge runs
// render again and again, each round's desired resources fed back as the
// next round's observed ones, as a cluster would have them after the
// providers acted:
// - a resource composed in round k is observed from round k+1, with its name
//   (render fixes it), labels, annotations and spec as rendered, Synced True,
//   and `crossplane.io/external-name` set to its name if it had none
//   (crossplane-runtime's default initializer, NameAsExternalName);
// - it is Ready (True, Available) from round k + readyAfter (default 1: when
//   first observed), and only once its `ready` expression (CEL over `self`, the
//   resource, and `xr`) holds, if it has one; until then Ready False, Creating;
//   once ready, its readyStatus (what a provider would publish: an ID, an
//   endpoint) is merged into its status;
// - a resource the pipeline stops composing is gone the next round (deleted);
// - the XR is the rendered one: its status, conditions and references as the
//   round left them.
// The clock stays where it was: every round sees the same `now`. It stops when
// a round's inputs are those of the round before (a pure pipeline would
// render the same again), or after maxRounds, naming what still changes.
import type { JsonObject } from "@bufbuild/protobuf";
import { createTwoFilesPatch } from "diff";
import { COMPOSITION_RESOURCE_NAME } from "../engine/composed.js";
import type { Runner } from "../engine/runner.js";
import { InputError } from "../engine/docs.js";
import { isObject } from "../json.js";
import { getOwn } from "../own.js";
import { getAnnotation, getObjectCondition, kubeTimestamp } from "../sdk/object.js";
import { compile, evaluate, variables, type Expression } from "../steps/cel.js";
import { EXTERNAL_NAME } from "../steps/common.js";
import { firstNAndSomeMore } from "../words.js";
import { toYamlStream } from "./output.js";
import { mergeFullXR, render, type RenderInputs, type RenderOptions } from "./render.js";

/** ConvergeRules say how the simulated providers treat composed resources; `*` is every resource not named. */
export interface ConvergeRules {
  /** The most rounds to run. Default 10. */
  maxRounds?: number;
  /** Rounds after it is composed that a resource is ready, per name or `*`. Default 1. */
  readyAfter?: Record<string, number>;
  /** A CEL expression that must also hold (self, xr), per name or `*`. */
  ready?: Record<string, string>;
  /** What a provider publishes in the resource's status once it is ready, per name or `*`. */
  readyStatus?: Record<string, JsonObject>;
}

/** Round is one reconcile of the run. */
export interface Round {
  n: number;
  /** A line saying what changed: composed, removed, became ready, the XR's Ready. */
  summary: string;
  /** The rendered documents (the XR, then the composed resources) as a unified diff from the round before. */
  diff: string;
}

/** Converged is the run: its rounds, the inputs of the state it settled in, and whether it did. */
export interface Converged {
  rounds: Round[];
  /** The last round's inputs: render them for the final state. */
  inputs: RenderInputs;
  converged: boolean;
  /** When it did not converge: what the last round still changed. */
  changing?: string;
}

export const DEFAULT_MAX_ROUNDS = 10;
const SOURCE = "(converge)";

/** checkRules refuses rules that cannot be run, naming the rule; it returns the compiled expressions. */
export function checkRules(rules: ConvergeRules, where = "converge"): Map<string, Expression> {
  const max = rules.maxRounds ?? DEFAULT_MAX_ROUNDS;
  if (!Number.isInteger(max) || max < 1 || max > 1000)
    throw new InputError(`${where}: maxRounds must be a whole number from 1 to 1000, got ${max}`);
  for (const [name, n] of Object.entries(rules.readyAfter ?? {}))
    if (!Number.isInteger(n) || n < 1)
      throw new InputError(`${where}: readyAfter ${name}: must be a whole number of rounds, 1 or more, got ${n}`);
  for (const [name, s] of Object.entries(rules.readyStatus ?? {}))
    if (!isObject(s))
      throw new InputError(`${where}: readyStatus ${name}: must be a map (the status fields to add), got ${JSON.stringify(s)}`);
  const out = new Map<string, Expression>();
  for (const [name, text] of Object.entries(rules.ready ?? {})) {
    try {
      out.set(name, compile(text, `${where}: ready ${name}`));
    } catch (err) {
      throw new InputError((err as Error).message);
    }
  }
  return out;
}

const nameOf = (o: JsonObject): string | undefined => getAnnotation(o, COMPOSITION_RESOURCE_NAME);

const rule = <T>(m: Record<string, T> | undefined, name: string): T | undefined => (m ? (getOwn(m, name) ?? getOwn(m, "*")) : undefined);

const conditionsOf = (o: JsonObject): JsonObject[] => {
  const s = isObject(o["status"]) ? o["status"] : {};
  return Array.isArray(s["conditions"]) ? (s["conditions"] as JsonObject[]) : [];
};
const isReady = (o: JsonObject) => getObjectCondition(o, "Ready")?.status === "True";

/** withConditions sets Ready and Synced on an object's status, keeping its other conditions. */
function withConditions(o: JsonObject, ready: boolean, at: string): JsonObject {
  const status = isObject(o["status"]) ? { ...o["status"] } : {};
  const kept = conditionsOf(o).filter((c) => c["type"] !== "Ready" && c["type"] !== "Synced");
  const r = ready
    ? { type: "Ready", status: "True", reason: "Available", lastTransitionTime: at }
    : { type: "Ready", status: "False", reason: "Creating", lastTransitionTime: at };
  status["conditions"] = [...kept, { type: "Synced", status: "True", reason: "ReconcileSuccess", lastTransitionTime: at }, r];
  return { ...o, status };
}

/** merged is a deep merge of patch into base (maps merged, anything else replaced). */
function merged(base: JsonObject, patch: JsonObject): JsonObject {
  const out: JsonObject = { ...base };
  for (const [k, v] of Object.entries(patch)) {
    const b = getOwn(out, k);
    out[k] = isObject(v) && isObject(b) ? merged(b, v) : structuredClone(v);
  }
  return out;
}

/**
 * converge renders again and again until the inputs stop changing (see the
 * top of this file). A round's Fatal result or error ends it, naming the round.
 */
export async function converge(
  first: RenderInputs,
  runner: Runner,
  opts: RenderOptions,
  rules: ConvergeRules,
  onRound?: (r: Round) => void,
): Promise<Converged> {
  // The ready rules' expressions by resource name (or *), compiled once.
  const expressions = Object.fromEntries(checkRules(rules));
  const max = rules.maxRounds ?? DEFAULT_MAX_ROUNDS;
  const at = kubeTimestamp(opts.now ?? new Date());
  const rounds: Round[] = [];
  // The round each resource was first composed in.
  const since = new Map<string, number>();
  let inputs = first;
  // Round 1's change is from the XR as render prints one (its identity, references and status) and what was observed.
  let before = toYamlStream([printedXR(first.xr.obj), ...first.observed.map((d) => d.obj)]);
  for (let n = 1; n <= max; n++) {
    let o;
    try {
      o = await render(inputs, runner, { ...opts, legacy: false });
    } catch (err) {
      (err as Error).message = `round ${n}: ${(err as Error).message}`;
      throw err;
    }
    const xr = mergeFullXR(o.input, o.xr);
    const wasObserved = new Map(inputs.observed.map((d) => [nameOf(d.obj) ?? "", d.obj]));
    const observed: JsonObject[] = [];
    const nowReady: string[] = [];
    for (const c of o.composed) {
      const name = nameOf(c) ?? "";
      if (!since.has(name)) since.set(name, wasObserved.has(name) ? 0 : n);
      const old = wasObserved.get(name);
      let obj: JsonObject = { ...c, ...(old && isObject(old["status"]) ? { status: old["status"] } : {}) };
      const meta = isObject(obj["metadata"]) ? { ...obj["metadata"] } : {};
      const annotations = isObject(meta["annotations"]) ? { ...meta["annotations"] } : {};
      if (typeof annotations[EXTERNAL_NAME] !== "string" && typeof meta["name"] === "string") annotations[EXTERNAL_NAME] = meta["name"];
      obj = { ...obj, metadata: { ...meta, annotations } };
      const due = n + 1 - since.get(name)! >= (rule(rules.readyAfter, name) ?? 1);
      const e = rule(expressions, name);
      const ready = due && (!e || evaluate(e, { ...variables(xr, {}), self: obj }).ok);
      const status = rule(rules.readyStatus, name);
      if (ready && status) obj = { ...obj, status: merged(isObject(obj["status"]) ? obj["status"] : {}, status) };
      obj = withConditions(obj, ready, at);
      if (ready && !(old && isReady(old))) nowReady.push(name);
      observed.push(obj);
    }
    const next: RenderInputs = { ...inputs, xr: { obj: xr, source: SOURCE }, observed: observed.map((obj) => ({ obj, source: SOURCE })) };
    const after = toYamlStream([o.xr, ...o.composed]);
    const diff = patch(n === 1 ? "input" : `round ${n - 1}`, `round ${n}`, before, after);
    const round: Round = { n, summary: roundSummary(n, inputs, o.composed, nowReady, o.xr, diff === ""), diff };
    rounds.push(round);
    onRound?.(round);
    before = after;
    const changing = changes(inputs, next);
    inputs = next;
    if (changing.length === 0) return { rounds, inputs, converged: true };
    if (n === max) return { rounds, inputs, converged: false, changing: changing.join("; ") };
  }
  throw new Error("unreachable");
}

/** patch is a unified diff of two YAML streams, "" when they are the same. */
function patch(from: string, to: string, a: string, b: string): string {
  if (a === b) return "";
  // Without jsdiff's "=====" line and the tab it ends the file names with (no header is given).
  return createTwoFilesPatch(from, to, a, b, undefined, undefined, { context: 2 })
    .split("\n")
    .filter((l) => !/^=+$/.test(l))
    .map((l) => (/^(---|\+\+\+) /.test(l) ? l.trimEnd() : l))
    .join("\n");
}

/** printedXR is the part of an XR render prints: its identity, Crossplane's references, and its status. */
function printedXR(xr: JsonObject): JsonObject {
  const m = isObject(xr["metadata"]) ? xr["metadata"] : {};
  const spec = isObject(xr["spec"]) ? xr["spec"] : {};
  return {
    apiVersion: xr["apiVersion"] ?? "",
    kind: xr["kind"] ?? "",
    metadata: { name: m["name"] ?? "", ...(m["namespace"] !== undefined ? { namespace: m["namespace"] } : {}) },
    ...(isObject(spec["crossplane"]) ? { spec: { crossplane: spec["crossplane"] } } : {}),
    ...(xr["status"] !== undefined ? { status: xr["status"] } : {}),
  };
}

/** changes names what differs between two rounds' inputs: the XR's fields, composed resources added, removed or changed. */
function changes(a: RenderInputs, b: RenderInputs): string[] {
  const out: string[] = [];
  const fields = (o: JsonObject) => {
    const m = new Map<string, string>();
    for (const [k, v] of Object.entries(o)) {
      if (isObject(v) && (k === "status" || k === "spec" || k === "metadata"))
        for (const [f, fv] of Object.entries(v)) m.set(`${k}.${f}`, JSON.stringify(fv));
      else m.set(k, JSON.stringify(v));
    }
    return m;
  };
  const xa = fields(a.xr.obj);
  const xb = fields(b.xr.obj);
  const xr = [...new Set([...xa.keys(), ...xb.keys()])].filter((k) => xa.get(k) !== xb.get(k));
  if (xr.length) out.push(`the XR's ${firstNAndSomeMore(xr)}`);
  const ra = new Map(a.observed.map((d) => [nameOf(d.obj) ?? "", JSON.stringify(d.obj)]));
  const rb = new Map(b.observed.map((d) => [nameOf(d.obj) ?? "", JSON.stringify(d.obj)]));
  const added = [...rb.keys()].filter((k) => !ra.has(k));
  const removed = [...ra.keys()].filter((k) => !rb.has(k));
  const changed = [...rb.keys()].filter((k) => ra.has(k) && ra.get(k) !== rb.get(k));
  if (added.length) out.push(`composed ${firstNAndSomeMore(added)}`);
  if (removed.length) out.push(`removed ${firstNAndSomeMore(removed)}`);
  if (changed.length) out.push(`changed ${firstNAndSomeMore(changed)}`);
  return out;
}

/** roundSummary is a round's line: what it composed and removed, what became ready, and the XR's Ready. */
function roundSummary(n: number, inputs: RenderInputs, composed: JsonObject[], nowReady: string[], xr: JsonObject, same: boolean): string {
  const had = new Set(inputs.observed.map((d) => nameOf(d.obj) ?? ""));
  const names = composed.map((c) => nameOf(c) ?? "");
  const added = names.filter((x) => !had.has(x));
  const removed = [...had].filter((x) => !names.includes(x));
  const parts: string[] = same ? ["rendered the same as the round before"] : [];
  if (added.length) parts.push(`composed ${firstNAndSomeMore(added)}`);
  if (removed.length) parts.push(`removed ${firstNAndSomeMore(removed)}`);
  const ready = getObjectCondition(xr, "Ready");
  if (ready) parts.push(`XR Ready=${ready.status}${ready.reason ? ` (${ready.reason})` : ""}`);
  if (nowReady.length) parts.push(`then ready: ${firstNAndSomeMore(nowReady)}`);
  return `round ${n}: ${parts.join("; ")}`;
}
