// What each XR depends on, and which XRs a changed object matters to, as
// Crossplane's dependency tracker keeps it (crossplane/crossplane
// internal/controller/apiextensions/composite/dependency/tracker.go at
// 2d040d2daf4e001799c4154a4a09b9e1f40d7fde, from PR #7572). An XR depends on
// what its functions required: one object by name, or every object of a kind
// whose labels include a set (no labels: every object of the kind).
//
// Matching, as there: a name reference matches the object of that namespace
// and name only (an empty namespace is a cluster-scoped object, never "any
// namespace": nothing can be got by name across namespaces); a label reference
// with an empty namespace matches in every namespace. Tracking an XR again
// replaces what it depended on; a kind stays listed while any reference to it
// is left.
import type { ResourceSelector } from "../gen/fn/v1/run_function_pb.js";

/** Reference is something an XR depends on. */
export interface Reference {
  apiVersion: string;
  kind: string;
  namespace: string;
  /** Set: that one object. Unset: every object whose labels include labels. */
  name?: string | undefined;
  labels?: Record<string, string> | undefined;
}

/** Requirement is a resource a pipeline step required, under the name the function used. */
export interface Requirement {
  step: string;
  name: string;
  reference: Reference;
}

/** The object a watch event carries, as far as matching needs it. */
export interface Changed {
  apiVersion: string;
  kind: string;
  namespace: string;
  name: string;
  labels: Record<string, string>;
}

/** kindOf is the key a kind is counted and watched under. */
export const kindOf = (apiVersion: string, kind: string) => `${apiVersion}|${kind}`;

/** referenceOf turns a function's resource selector into a reference (ReferenceFromSelector in references.go). */
export function referenceOf(s: Pick<ResourceSelector, "apiVersion" | "kind" | "namespace" | "match">): Reference {
  const r: Reference = { apiVersion: s.apiVersion, kind: s.kind, namespace: s.namespace ?? "" };
  if (s.match.case === "matchName") r.name = s.match.value;
  else if (s.match.case === "matchLabels") r.labels = { ...s.match.value.labels };
  return r;
}

export class DependencyTracker {
  private readonly composed = new Map<string, Reference[]>();
  private readonly required = new Map<string, Requirement[]>();
  /** kind|namespace|name -> the XRs that name it. */
  private readonly byName = new Map<string, Set<string>>();
  /** kind|namespace -> each XR's label references there. */
  private readonly byLabel = new Map<string, Map<string, Array<Array<[string, string]>>>>();
  /** How many references each kind has. */
  private readonly counts = new Map<string, number>();

  /** track records what xr depends on, replacing what it depended on before. */
  track(xr: string, required: Requirement[], composed: Reference[] = []): void {
    this.forget(xr);
    for (const r of composed) this.add(xr, r);
    for (const r of required) this.add(xr, r.reference);
    if (composed.length > 0) this.composed.set(xr, composed);
    if (required.length > 0) this.required.set(xr, required);
  }

  /** forget drops everything recorded for xr. */
  forget(xr: string): void {
    for (const r of this.composed.get(xr) ?? []) this.remove(xr, r);
    for (const r of this.required.get(xr) ?? []) this.remove(xr, r.reference);
    this.composed.delete(xr);
    this.required.delete(xr);
  }

  /** requirements are what step required when xr was last tracked. */
  requirements(xr: string, step: string): Requirement[] {
    return (this.required.get(xr) ?? []).filter((r) => r.step === step);
  }

  /** kinds are the kinds some XR depends on (kindOf keys): the ones to watch. */
  kinds(): string[] {
    return [...this.counts.keys()];
  }

  /** xrs are the XRs something is recorded for. */
  xrs(): string[] {
    return [...new Set([...this.composed.keys(), ...this.required.keys()])];
  }

  /** kindsOf are the kinds one XR depends on. */
  kindsOf(xr: string): Set<string> {
    const out = new Set<string>();
    for (const r of this.composed.get(xr) ?? []) out.add(kindOf(r.apiVersion, r.kind));
    for (const r of this.required.get(xr) ?? []) out.add(kindOf(r.reference.apiVersion, r.reference.kind));
    return out;
  }

  /** dependants are the XRs that depend on a changed object, each once. */
  dependants(o: Changed): string[] {
    const k = kindOf(o.apiVersion, o.kind);
    const out = new Set<string>(this.byName.get(`${k}|${o.namespace}|${o.name}`) ?? []);
    const scopes = [`${k}|${o.namespace}`];
    if (o.namespace !== "") scopes.push(`${k}|`);
    for (const scope of scopes) {
      for (const [xr, sets] of this.byLabel.get(scope) ?? []) {
        if (out.has(xr)) continue;
        if (sets.some((set) => set.every(([key, value]) => Object.hasOwn(o.labels, key) && o.labels[key] === value))) out.add(xr);
      }
    }
    return [...out];
  }

  private add(xr: string, r: Reference): void {
    const k = kindOf(r.apiVersion, r.kind);
    this.counts.set(k, (this.counts.get(k) ?? 0) + 1);
    if (r.name) {
      const key = `${k}|${r.namespace}|${r.name}`;
      (this.byName.get(key) ?? this.byName.set(key, new Set()).get(key)!).add(xr);
      return;
    }
    const scope = `${k}|${r.namespace}`;
    const m = this.byLabel.get(scope) ?? this.byLabel.set(scope, new Map()).get(scope)!;
    const sets = m.get(xr) ?? m.set(xr, []).get(xr)!;
    sets.push(Object.entries(r.labels ?? {}));
  }

  private remove(xr: string, r: Reference): void {
    const k = kindOf(r.apiVersion, r.kind);
    const n = (this.counts.get(k) ?? 0) - 1;
    if (n <= 0) this.counts.delete(k);
    else this.counts.set(k, n);
    if (r.name) {
      const key = `${k}|${r.namespace}|${r.name}`;
      const s = this.byName.get(key);
      s?.delete(xr);
      if (s?.size === 0) this.byName.delete(key);
      return;
    }
    const scope = `${k}|${r.namespace}`;
    const m = this.byLabel.get(scope);
    m?.delete(xr);
    if (m?.size === 0) this.byLabel.delete(scope);
  }
}
