// The Lifecycle input: which built-in steps run, and how. Parsing is strict:
// an unknown key or a value of the wrong shape is an error naming where it is
// in the input, so a typo in a Composition is caught rather than ignored.
import type { JsonObject, JsonValue } from "xfn-runtime";
import { steps } from "xfn-runtime";

export const API_VERSION = "lifecycle.xfn.dev/v1alpha1";
export const KIND = "Lifecycle";

/** Options are the step options the input asks for; an absent step does not run. */
export interface Options {
  externalNames?: steps.ExternalNameOptions;
  lateInit?: steps.LateInitOptions;
  readiness?: steps.ReadinessOptions;
  dependencies?: steps.DependenciesOptions;
  /** The Usages the dependencies step composes so that Crossplane deletes dependents first (on unless switched off). */
  usages: steps.UsageOptions;
  deletion?: steps.DeletionOptions;
  includeWhen?: steps.IncludeWhenOptions;
  /** Check the status fields the steps write against the XR kind's schema (on unless switched off). */
  schemaCheck?: boolean;
  /** Say on the XR what each step did, and roll up its composed resources' health (off unless asked for). */
  summary?: steps.SummaryOptions;
}

class InputError extends Error {}

const fail = (where: string, what: string): never => {
  throw new InputError(`${where}: ${what}`);
};

const isObject = (v: JsonValue | undefined): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

function object(v: JsonValue | undefined, where: string, allowed: readonly string[]): JsonObject {
  if (!isObject(v)) return fail(where, `must be an object, got ${JSON.stringify(v)}`);
  for (const k of Object.keys(v)) if (!allowed.includes(k)) fail(where, `unknown key ${JSON.stringify(k)}; allowed: ${allowed.join(", ")}`);
  return v;
}

/** record checks a map keyed by resource name. */
function record(v: JsonValue | undefined, where: string): JsonObject {
  if (!isObject(v)) return fail(where, `must be a map of resource names, got ${JSON.stringify(v)}`);
  return v;
}

function string(v: JsonValue | undefined, where: string): string {
  if (typeof v !== "string" || v === "") return fail(where, `must be a non-empty string, got ${JSON.stringify(v)}`);
  return v;
}

function strings(v: JsonValue | undefined, where: string): string[] {
  if (!Array.isArray(v)) return fail(where, `must be a list of strings, got ${JSON.stringify(v)}`);
  return v.map((s, i) => string(s, `${where}[${i}]`));
}

/** expression checks that a CEL expression parses, failing with where it is. */
function expression(text: string, where: string): void {
  try {
    steps.compileExpression(text, where);
  } catch (err) {
    fail(where, (err as Error).message.replace(`${where}: `, ""));
  }
}

function check(v: JsonValue | undefined, where: string): steps.ReadinessCheck {
  const c = object(v, where, ["type", "matchCondition", "fieldPath", "matchString", "matchInteger", "expression"]);
  const type = string(c["type"], `${where}.type`);
  const field = () => string(c["fieldPath"], `${where}.fieldPath`);
  switch (type) {
    case "None":
      return { type };
    case "Expression": {
      const text = string(c["expression"], `${where}.expression`);
      expression(text, `${where}.expression`);
      return { type, expression: text };
    }
    case "MatchCondition": {
      const mc = c["matchCondition"] === undefined ? {} : object(c["matchCondition"], `${where}.matchCondition`, ["type", "status"]);
      return {
        type,
        matchCondition: {
          type: mc["type"] === undefined ? "Ready" : string(mc["type"], `${where}.matchCondition.type`),
          status: mc["status"] === undefined ? "True" : string(mc["status"], `${where}.matchCondition.status`),
        },
      };
    }
    case "NonEmpty":
    case "MatchTrue":
    case "MatchFalse":
      return { type, fieldPath: field() };
    case "MatchString":
      if (typeof c["matchString"] !== "string") fail(`${where}.matchString`, "must be a string");
      return { type, fieldPath: field(), matchString: c["matchString"] as string };
    case "MatchInteger":
      if (!Number.isInteger(c["matchInteger"]))
        fail(`${where}.matchInteger`, `must be an integer, got ${JSON.stringify(c["matchInteger"])}`);
      return { type, fieldPath: field(), matchInteger: c["matchInteger"] as number };
    default:
      return fail(`${where}.type`, `unknown check type ${JSON.stringify(type)}; expected one of ${steps.CHECK_TYPES.join(", ")}`);
  }
}

/** parseInput validates a Lifecycle input. It throws an Error naming the path of the first problem. */
export function parseInput(raw: JsonObject): Options {
  const top = object(raw, "input", [
    "apiVersion",
    "kind",
    "externalNames",
    "lateInit",
    "readiness",
    "dependencies",
    "usages",
    "deletion",
    "includeWhen",
    "schemaCheck",
    "summary",
  ]);
  if (top["apiVersion"] !== undefined && top["apiVersion"] !== API_VERSION)
    fail("input.apiVersion", `must be ${API_VERSION}, got ${JSON.stringify(top["apiVersion"])}`);
  if (top["kind"] !== undefined && top["kind"] !== KIND) fail("input.kind", `must be ${KIND}, got ${JSON.stringify(top["kind"])}`);
  const out: Options = { usages: {} };

  // externalNames is on unless switched off.
  const en =
    top["externalNames"] === undefined ? {} : object(top["externalNames"], "input.externalNames", ["statusField", "fromFields", "enabled"]);
  if (en["enabled"] !== undefined && typeof en["enabled"] !== "boolean") fail("input.externalNames.enabled", "must be true or false");
  if (en["enabled"] !== false) {
    out.externalNames = {};
    if (en["statusField"] !== undefined) out.externalNames.statusField = string(en["statusField"], "input.externalNames.statusField");
    if (en["fromFields"] !== undefined)
      // fromEntries makes own keys of every name, "__proto__" too; the step checks each path parses.
      out.externalNames.fromFields = Object.fromEntries(
        Object.entries(record(en["fromFields"], "input.externalNames.fromFields")).map(([name, path]) => [
          name,
          string(path, `input.externalNames.fromFields.${name}`),
        ]),
      );
  }

  if (top["lateInit"] !== undefined) {
    const li = object(top["lateInit"], "input.lateInit", ["fields"]);
    out.lateInit = { fields: li["fields"] === undefined ? [] : strings(li["fields"], "input.lateInit.fields") };
  }

  if (top["readiness"] !== undefined) {
    const r = object(top["readiness"], "input.readiness", ["checks", "default"]);
    const checks: Record<string, steps.ReadinessCheck[]> = {};
    if (r["checks"] !== undefined) {
      const byName = record(r["checks"], "input.readiness.checks");
      for (const [name, list] of Object.entries(byName)) {
        if (!Array.isArray(list)) fail(`input.readiness.checks.${name}`, "must be a list of checks");
        checks[name] = (list as JsonValue[]).map((c, i) => check(c, `input.readiness.checks.${name}[${i}]`));
      }
    }
    out.readiness = { checks };
    if (r["default"] !== undefined) {
      if (!Array.isArray(r["default"])) fail("input.readiness.default", "must be a list of checks");
      out.readiness.default = (r["default"] as JsonValue[]).map((c, i) => check(c, `input.readiness.default[${i}]`));
    }
  }

  if (top["dependencies"] !== undefined) {
    const d = record(top["dependencies"], "input.dependencies");
    const deps: Record<string, steps.Dependency> = {};
    for (const [name, v] of Object.entries(d)) {
      const where = `input.dependencies.${name}`;
      const o = object(v, where, ["dependsOn", "waitFor", "waitUntil"]);
      const dep: steps.Dependency = {};
      if (o["dependsOn"] !== undefined) dep.dependsOn = strings(o["dependsOn"], `${where}.dependsOn`);
      if (o["waitFor"] !== undefined) {
        dep.waitFor = strings(o["waitFor"], `${where}.waitFor`);
        dep.waitFor.forEach((w, i) => steps.parseWaitFor(w, `${where}.waitFor[${i}]`));
      }
      if (o["waitUntil"] !== undefined) {
        dep.waitUntil = strings(o["waitUntil"], `${where}.waitUntil`);
        dep.waitUntil.forEach((e, i) => expression(e, `${where}.waitUntil[${i}]`));
      }
      deps[name] = dep;
    }
    out.dependencies = deps;
  }

  // usages are on unless switched off; they need dependencies to order.
  if (top["usages"] !== undefined) {
    const us = object(top["usages"], "input.usages", ["enabled", "replayDeletion"]);
    for (const k of ["enabled", "replayDeletion"] as const) {
      const v = us[k];
      if (v === undefined) continue;
      if (typeof v !== "boolean") fail(`input.usages.${k}`, "must be true or false");
      else out.usages[k] = v;
    }
  }

  // deletion is on unless switched off; it acts only while the XR is being deleted.
  const del = top["deletion"] === undefined ? {} : object(top["deletion"], "input.deletion", ["stuckAfter", "enabled"]);
  if (del["enabled"] !== undefined && typeof del["enabled"] !== "boolean") fail("input.deletion.enabled", "must be true or false");
  if (del["enabled"] !== false) {
    out.deletion = {};
    if (del["stuckAfter"] !== undefined) {
      const s = string(del["stuckAfter"], "input.deletion.stuckAfter");
      try {
        steps.parseDuration(s);
      } catch (err) {
        fail("input.deletion.stuckAfter", (err as Error).message);
      }
      out.deletion.stuckAfter = s;
    }
  }
  if (top["includeWhen"] !== undefined) {
    const iw = record(top["includeWhen"], "input.includeWhen");
    const rules: Record<string, string[]> = {};
    for (const [name, list] of Object.entries(iw)) {
      rules[name] = strings(list, `input.includeWhen.${name}`);
      rules[name].forEach((e, i) => expression(e, `input.includeWhen.${name}[${i}]`));
    }
    out.includeWhen = rules;
  }

  if (top["schemaCheck"] !== undefined && typeof top["schemaCheck"] !== "boolean") fail("input.schemaCheck", "must be true or false");
  if (top["schemaCheck"] !== false) out.schemaCheck = true;

  if (top["summary"] !== undefined) {
    const su = object(top["summary"], "input.summary", ["type", "health", "healthType", "event"]);
    for (const k of ["health", "event"])
      if (su[k] !== undefined && typeof su[k] !== "boolean") fail(`input.summary.${k}`, "must be true or false");
    out.summary = {};
    if (su["type"] !== undefined) out.summary.type = string(su["type"], "input.summary.type");
    if (su["health"] === false) out.summary.health = false;
    else if (su["healthType"] !== undefined) out.summary.health = string(su["healthType"], "input.summary.healthType");
    if (su["event"] === false) out.summary.event = false;
  }
  return out;
}
