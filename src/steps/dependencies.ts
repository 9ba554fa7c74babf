// dependencies: create a resource only once what it needs is there.
//
// Per resource, `dependsOn` names resources that must be ready, and `waitFor`
// names fields that must be non-empty, as "vpc.status.atProvider.id" (or
// "xr.status.network.id" for the XR itself), the form waits are reported in. A dependency may itself be an XR (a
// nested composition): its status is just another observed field, so a
// three-level nest converges as each level's status fills in, with no restart.
//
// A resource whose dependencies are not met is held (see pipeline.ts): not
// created if it does not exist, kept as it is if it does. Waiting is recorded
// in the XR's status.waiting with the time it began, and the TTL backs off
// from 5 s towards 60 s the longer it lasts. A cycle is a Fatal result
// printing it, e.g. "a -> b -> a".
//
// `waitUntil` holds a resource until CEL expressions over the observed
// resources are true (see cel.ts), e.g. `db.status.endpoint != "" &&
// xr.spec.tier == "prod"`. A resource an expression names (by name, or as
// observed["name"]) that is also named in this configuration counts as a
// dependency for ordering and cycles.
import type { JsonObject } from "@bufbuild/protobuf";
import { Ready } from "../gen/fn/v1/run_function_pb.js";
import { getOwn, setOwn } from "../own.js";
import { step, type Step, type StepContext } from "../pipeline.js";
import { getObject, getString, getValue, parsePath } from "../sdk/fieldpath.js";
import { getObjectCondition } from "../sdk/object.js";
import * as response from "../sdk/response.js";
import { celVariables, compile, evaluate, type Expression } from "./cel.js";
import { isNonEmpty, observedResource, observedXR, sortedKeys } from "./common.js";
import { checkAcyclic, type Graph } from "./graph.js";
import { composeUsages, type UsageOptions } from "./usages.js";
import { messageOf } from "../sdk/errors.js";

/** Dependency is what one resource waits for. */
export interface Dependency {
  dependsOn?: readonly string[];
  /** "vpc.status.atProvider.id", or "xr.status.network.id" for the XR (see parseWaitFor). */
  waitFor?: readonly string[];
  /** CEL expressions that must all be true (kro's readyWhen of what it depends on, or any condition). */
  waitUntil?: readonly string[];
}

/** DependenciesOptions map resource names to their dependencies. */
export type DependenciesOptions = Readonly<Record<string, Dependency>>;

/** XR names the composite resource in waitFor. */
export const XR = "xr";
export const WAITING_FIELD = "status.waiting";
/**
 * GRAPH_CONTEXT_KEY is the pipeline context key the step writes its
 * configuration under ({name: {dependsOn, waitFor, waitUntil}}), so that what
 * comes after it (xfn render --graph, later steps) can draw or read the graph.
 * Context goes to the next function and back to Crossplane, never to the XR.
 */
export const GRAPH_CONTEXT_KEY = "xfn.dev/dependencies";
const MIN_TTL_S = 5;
const MAX_TTL_S = 60;

export interface FieldWait {
  resource: string;
  path: string;
}

/**
 * parseWaitFor splits a waitFor entry, throwing with where it came from. The
 * form is the one waits are reported in: "vpc.status.atProvider.id", the
 * resource's name up to the first "." or "[", then its field path ("xr" for
 * the XR itself). "vpc:status.atProvider.id" is read too: the older form, and
 * the one for a resource whose name holds a "." (a colon after a bracket is
 * part of a key, as in metadata.annotations[example.org:x]).
 */
export function parseWaitFor(entry: string, where: string): FieldWait {
  let resource = "";
  let path = "";
  if (typeof entry === "string") {
    const colon = entry.indexOf(":");
    const dot = entry.search(/[.[]/);
    if (colon > 0 && !entry.slice(0, colon).includes("[")) {
      resource = entry.slice(0, colon);
      path = entry.slice(colon + 1);
    } else if (colon !== 0 && dot > 0) {
      resource = entry.slice(0, dot);
      path = entry[dot] === "." ? entry.slice(dot + 1) : entry.slice(dot);
    }
  }
  if (resource === "" || path === "") {
    throw new Error(
      `${where}: ${JSON.stringify(entry)} is not a resource's name then a field path ` +
        "(e.g. vpc.status.atProvider.id, or xr.status.network.id for the XR)",
    );
  }
  try {
    parsePath(path);
  } catch (err) {
    throw new Error(`${where}: ${messageOf(err)}`);
  }
  return { resource, path };
}

/** formatWaitFor writes a wait as parseWaitFor reads it, and as waits are reported: "vpc.status.atProvider.id". */
export function formatWaitFor(w: FieldWait): string {
  if (/[.[:]/.test(w.resource)) return `${w.resource}:${w.path}`;
  return w.path.startsWith("[") ? `${w.resource}${w.path}` : `${w.resource}.${w.path}`;
}

interface Parsed {
  dependsOn: string[];
  waitFor: FieldWait[];
  waitUntil: Expression[];
  /** Configured resources the expressions name. */
  named: string[];
}

/** namedIn lists which of names an expression refers to: as an identifier, or as observed["name"]. */
export function namedIn(text: string, names: ReadonlySet<string>): string[] {
  const out = new Set<string>();
  for (const m of text.matchAll(/observed\[\s*["']([^"']+)["']\s*\]/g)) if (names.has(m[1]!)) out.add(m[1]!);
  // Identifiers not preceded by "." (a field) nor inside a string.
  const code = text.replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""');
  for (const m of code.matchAll(/(^|[^.\w])([A-Za-z_][A-Za-z0-9_]*)/g)) if (names.has(m[2]!)) out.add(m[2]!);
  return [...out].sort();
}

/** parseDependencies validates the configuration and returns it with waitFor split. */
export function parseDependencies(opts: DependenciesOptions): Map<string, Parsed> {
  const out = new Map<string, Parsed>();
  const names = new Set<string>(Object.keys(opts));
  for (const d of Object.values(opts)) for (const dep of d.dependsOn ?? []) names.add(dep);
  for (const name of sortedKeys(opts)) {
    const d = opts[name]!;
    const dependsOn = [...(d.dependsOn ?? [])];
    for (const [i, dep] of dependsOn.entries()) {
      if (typeof dep !== "string" || dep === "") throw new Error(`dependencies.${name}.dependsOn[${i}] must be a resource name`);
    }
    const waitFor = (d.waitFor ?? []).map((w, i) => parseWaitFor(w, `dependencies.${name}.waitFor[${i}]`));
    const waitUntil = (d.waitUntil ?? []).map((e, i) => compile(e, `dependencies.${name}.waitUntil[${i}]`));
    const named = [...new Set(waitUntil.flatMap((e) => namedIn(e.text, names)))].filter((n) => n !== name);
    out.set(name, { dependsOn, waitFor, waitUntil, named });
  }
  return out;
}

/** graphOf returns the dependency graph (the XR is not a node). */
export function graphOf(parsed: ReadonlyMap<string, Parsed>): Graph {
  const g = new Map<string, string[]>();
  for (const [name, p] of parsed) {
    g.set(name, [...new Set([...p.dependsOn, ...p.waitFor.map((w) => w.resource).filter((r) => r !== XR), ...p.named])]);
  }
  return g;
}

/** isReady says whether a composed resource counts as ready for its dependents. */
export function isReady(ctx: StepContext, name: string): boolean {
  const obj = observedResource(ctx, name);
  if (!obj || ctx.heldFor(name)) return false;
  const desired = ctx.rsp.desired?.resources ?? {};
  const d = getOwn(desired, name);
  if (d && d.ready !== Ready.UNSPECIFIED) return d.ready === Ready.TRUE;
  return getObjectCondition(obj, "Ready")?.status === "True";
}

/** isAbsent says whether no step has composed name (desired is the response's desired resources) and nothing observed it. */
function isAbsent(ctx: StepContext, desired: object, name: string): boolean {
  return !Object.hasOwn(desired, name) && !observedResource(ctx, name);
}

/**
 * absentHint says, for a dependency that no step has composed and nothing
 * observed, that it is so: otherwise a typo in dependsOn or waitFor waits for
 * ever looking like a resource still on its way.
 */
function absentHint(ctx: StepContext, desired: object, name: string): string {
  return isAbsent(ctx, desired, name) ? ` (no resource named ${name} is desired or observed yet)` : "";
}

/**
 * closest is the desired or observed resource name nearest to name, within an
 * edit distance of a third of its length (at least 1, at most 3): the name a
 * typo most likely meant. Undefined when none is that close.
 */
export function closest(name: string, candidates: Iterable<string>): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(name.length / 3)));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const c of [...new Set(candidates)].sort()) {
    const d = editDistance(name, c, bestDistance);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best;
}

/**
 * editDistance is the number of single-character edits (insert, delete,
 * replace, or swap two neighbours: the optimal string alignment distance)
 * between a and b, or any number >= cap once it is known to reach cap.
 */
function editDistance(a: string, b: string, cap: number): number {
  if (Math.abs(a.length - b.length) >= cap) return cap;
  let before: number[] = [];
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) {
      row[j] = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) row[j] = Math.min(row[j]!, before[j - 2]! + 1);
    }
    if (Math.min(...row) >= cap) return cap;
    [before, prev] = [prev, row];
  }
  return prev[b.length]!;
}

/**
 * warnAbsent is the Warning for a dependency no step composes and nothing
 * observes: a wait for it lasts for ever unless a later step composes it, and
 * is most often a misspelt name. It names the closest existing one.
 */
function warnAbsent(ctx: StepContext, desired: object, name: string, dep: string): void {
  const names = [...new Set([...Object.keys(desired), ...Object.keys(ctx.req.observed?.resources ?? {})])].sort();
  const near = closest(dep, names);
  const some = names.length > 5 ? `${names.slice(0, 5).join(", ")} and ${names.length - 5} more` : names.join(", ") || "none";
  response
    .warning(
      ctx.rsp,
      `${name} depends on ${dep}, but no resource named ${dep} is desired or observed` +
        (near ? `: did you mean ${near}?` : ` (the resources are ${some})`),
    )
    .withReason("DependencyNotFound");
}

function topological(g: Graph): string[] {
  const out: string[] = [];
  const seen = new Set<string>();
  const visit = (n: string) => {
    if (seen.has(n)) return;
    seen.add(n);
    for (const d of g.get(n) ?? []) visit(d);
    out.push(n);
  };
  for (const n of [...g.keys()].sort()) visit(n);
  return out;
}

/** DependencySettings configure the dependencies step beyond its per-resource configuration. */
export interface DependencySettings {
  /**
   * Compose Crossplane Usages so that Crossplane deletes dependents first
   * (usages.ts): by default for a caller that lists its capabilities
   * (Crossplane v2.2+); true or false to decide. Off, the Usages composed
   * before are released.
   */
  usages?: boolean | UsageOptions;
}

/** dependencies returns the step. */
export function dependencies(opts: DependenciesOptions, settings: DependencySettings = {}): Step {
  const parsed = parseDependencies(opts);
  const graph = graphOf(parsed);
  const usages: UsageOptions = typeof settings.usages === "boolean" ? { enabled: settings.usages } : (settings.usages ?? {});

  const recorded: JsonObject = {};
  for (const [name, p] of parsed)
    setOwn(recorded, name, {
      ...(p.dependsOn.length ? { dependsOn: p.dependsOn } : {}),
      ...(p.waitFor.length ? { waitFor: p.waitFor.map(formatWaitFor) } : {}),
      ...(p.waitUntil.length ? { waitUntil: p.waitUntil.map((e) => e.text) } : {}),
    });

  return step("dependencies", (ctx) => {
    checkAcyclic(graph);
    response.setContextKey(ctx.rsp, GRAPH_CONTEXT_KEY, recorded);
    const desired = ctx.rsp.desired?.resources ?? {};
    const previous = getObject(observedXR(ctx), WAITING_FIELD) ?? {};
    const waiting: JsonObject = {};
    let longest = 0;
    let vars: Record<string, unknown> | undefined;

    for (const name of topological(graph)) {
      const p = parsed.get(name);
      if (!p || !Object.hasOwn(desired, name)) continue;
      const unmet: string[] = [];
      // Each dependency that nothing composes or observes is a Warning, once per resource that names it.
      const absent = new Set([...p.dependsOn, ...p.waitFor.map((w) => w.resource)].filter((r) => r !== XR && isAbsent(ctx, desired, r)));
      for (const dep of [...absent].sort()) warnAbsent(ctx, desired, name, dep);
      for (const dep of p.dependsOn) if (!isReady(ctx, dep)) unmet.push(`${dep} to be ready${absentHint(ctx, desired, dep)}`);
      for (const w of p.waitFor) {
        const obj = w.resource === XR ? observedXR(ctx) : observedResource(ctx, w.resource);
        if (!isNonEmpty(obj ? getValue(obj, w.path) : undefined))
          unmet.push(`${formatWaitFor(w)}${w.resource === XR ? "" : absentHint(ctx, desired, w.resource)}`);
      }
      if (p.waitUntil.length > 0) {
        vars ??= celVariables(ctx);
        for (const e of p.waitUntil) {
          const out = evaluate(e, vars);
          if (!out.ok) unmet.push(out.why);
        }
      }
      if (unmet.length === 0) continue;
      for (const u of unmet) ctx.hold(name, u);
      const prev = getOwn(previous, name);
      const since = (prev && typeof prev === "object" && !Array.isArray(prev) && getString(prev, "since")) || ctx.now.toISOString();
      setOwn(waiting, name, { for: unmet, since });
      const began = Date.parse(since);
      if (!Number.isNaN(began)) longest = Math.max(longest, ctx.now.getTime() - began);
    }

    // When nothing waits the field is left out, not written empty: Crossplane
    // (and xfn host) write an XR's status by server-side apply, which removes
    // a field its writer no longer sets, but turns a map whose entries it set
    // before into null when they are applied as {}, and the API server refuses
    // the whole status ("status.waiting: Invalid value: null"; kube-apiserver
    // v1.36.3, seen under real Crossplane v2.4.0: the XR stuck in
    // ReconcileError once its last dependency became ready).
    if (Object.keys(waiting).length > 0) {
      response.setDesiredCompositeField(ctx.rsp, WAITING_FIELD, waiting);
      ctx.requeueAfter(Math.min(MAX_TTL_S, Math.max(MIN_TTL_S, Math.round(longest / 2000))));
    }
    composeUsages(ctx, graph, usages);
  });
}
