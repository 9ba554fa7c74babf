// Recorded test cases, as `xfn test` runs them.
//
// A case is a folder with an expected.yaml and either
//   - request.yaml: one RunFunctionRequest (protobuf JSON form) for one function.
//     The function is case.yaml's `function:` (a path relative to the case), or
//     else, for a step `xfn inspect` wrote, the module `xfn test --function`
//     maps its inspected.yaml's function to, else the nearest enclosing folder
//     that is a function module. case.yaml's `now:` fixes the clock the
//     function sees.
//   - xr.yaml + composition.yaml: a whole pipeline, rendered as `xfn render`
//     does, with functions.yaml and, if present, observed, required and
//     credentials (files or folders) beside them, and an xrd.yaml (as
//     render --xrd: defaults, pruning, the XR kind's schema) and schemas (as
//     render --required-schemas) if present. expected.yaml is then a
//     stream of documents, paired with the rendered ones by identity. The
//     documents have the shape `xfn render --legacy-output` prints (only the
//     Ready condition Crossplane sets, results with their step), unless
//     case.yaml says `output: current` (crossplane render's current shape).
//     case.yaml's `converge:` renders it until it settles (render --converge,
//     render/converge.ts) and compares the final state.
// Expectations are partial (see expect.ts); --update rewrites a failing case's
// expectation in its own shape (see updated).
import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, statSync, writeFileSync } from "node:fs";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { createTwoFilesPatch } from "diff";
import type { Schemas } from "../validate/validate.js";
import { parseAllDocuments, stringify } from "yaml";
import { loadFunction, resolveModule } from "../module/load.js";
import type { RunFunction } from "../function.js";
import { RunFunctionResponseSchema, type RunFunctionRequest, type RunFunctionResponse } from "../gen/fn/v1/run_function_pb.js";
import { InputError, loadDocs, loadOne, parseDoc, parseDocs, type Doc } from "../engine/docs.js";
import { COMPOSITION_RESOURCE_NAME } from "../engine/composed.js";
import { FIXED_TIME, render, select, type RenderInputs } from "../render/render.js";
import { checkRules, converge, type ConvergeRules } from "../render/converge.js";
import { sizeWarnings } from "../server/budget.js";
import { encodeRequest, encodeResponse } from "../wire/codec.js";
import { schemaSource } from "../render/schema.js";
import { toYamlStream } from "../render/output.js";
import { createRunner } from "../engine/runner.js";
import { runWithRequirements } from "../engine/composition.js";
import { messageToJson } from "../wire/protojson.js";
import { isObject } from "../json.js";
import { getOwn, setOwn } from "../own.js";
import { mismatches, project, type Same } from "./expect.js";
import { rewriteKeepingStyle } from "./keep-style.js";
import { REDACTED, redactResponse } from "../wire/redact.js";
import { packageName } from "./record.js";
import { callFunction, parseRequest } from "./unit.js";
import { messageOf } from "../sdk/errors.js";

/** DEFAULT_CASE_NOW is the clock a case's functions see unless case.yaml sets `now`. */
export const DEFAULT_CASE_NOW = FIXED_TIME;

export interface CaseResult {
  name: string;
  status: "passed" | "failed" | "updated";
  /** For a failure: the mismatches and a unified diff, or the error. */
  detail?: string;
  /** What the run should be told whatever its outcome: a request or response near the 4 MiB a cluster accepts. */
  warnings?: string[];
}

const SKIP = new Set(["node_modules", ".git"]);

/** Found is what discoverCases found: the case folders, and what under root could not be read (a link in a loop or to nothing). */
export interface Found {
  cases: string[];
  unreadable: { path: string; why: string }[];
  /** Symbolic links that lead out of the folder: not followed (a link to / walked the whole disk). */
  outside: string[];
}

/**
 * discoverCases returns every case folder under root, sorted. Links are
 * followed, each folder walked once (a link back up is not a loop); what
 * cannot be read is listed, and the walk goes on.
 */
export function discoverCases(root: string): Found {
  if (!existsSync(root) || !statSync(root).isDirectory()) throw new InputError(`cannot look for cases in ${root}: not a directory`);
  const found: Found = { cases: [], unreadable: [], outside: [] };
  const realRoot = realpathSync(root);
  const seen = new Set<string>();
  const unreadable = (path: string, err: unknown) => {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === "ELOOP"
        ? "a symbolic link in a loop"
        : code === "ENOENT"
          ? "a symbolic link to nothing"
          : code === "EACCES"
            ? "permission denied"
            : messageOf(err);
    found.unreadable.push({ path, why });
  };
  const walk = (dir: string) => {
    let names: string[];
    try {
      const real = realpathSync(dir);
      if (seen.has(real)) return;
      seen.add(real);
      names = readdirSync(dir);
    } catch (err) {
      return unreadable(dir, err);
    }
    if (
      names.includes("expected.yaml") &&
      (names.includes("request.yaml") || (names.includes("xr.yaml") && names.includes("composition.yaml")))
    ) {
      found.cases.push(dir);
      return;
    }
    for (const n of names.sort()) {
      if (SKIP.has(n) || n.startsWith(".")) continue;
      const p = join(dir, n);
      let isDir: boolean;
      try {
        if (lstatSync(p).isSymbolicLink()) {
          const target = realpathSync(p);
          if (target !== realRoot && !target.startsWith(realRoot + sep)) {
            found.outside.push(p);
            continue;
          }
        }
        isDir = statSync(p).isDirectory();
      } catch (err) {
        unreadable(p, err);
        continue;
      }
      if (isDir) walk(p);
    }
  };
  walk(root);
  return found;
}

interface CaseConfig {
  function?: string;
  /** The package name of the project function: is found in, and where it was recorded (record.ts functionRef). */
  project?: string;
  projectPath?: string;
  now?: string;
  /**
   * When the step's response came (written by xfn inspect): the function read
   * its clock between now and until, so a time it wrote matches the one the
   * replay writes at now (clockWindow).
   */
  until?: string;
  context?: Record<string, JsonValue>;
  output?: "legacy" | "current";
  /** CRDs, XRDs or OpenAPI v3 documents (files or folders, from the case's folder) the desired composed resources must pass. */
  validate?: string | string[];
  /** A pipeline case rendered until it converges (render --converge), expected.yaml holding the final state. */
  converge?: ConvergeRules;
}

const CASE_KEYS = ["function", "project", "projectPath", "now", "until", "context", "output", "validate", "converge"];
const CONVERGE_KEYS = ["maxRounds", "readyAfter", "ready", "readyStatus"];

/** convergeOf reads case.yaml's converge: (as render --converge's flags: readyAfter a number, or one per resource name). */
function convergeOf(v: unknown, p: string): ConvergeRules {
  const where = `${p}: converge`;
  if (v === null || v === true) return {};
  if (!isObject(v as JsonValue)) throw new InputError(`${where}: expected a map with ${CONVERGE_KEYS.join(", ")}`);
  const c = v as JsonObject;
  for (const k of Object.keys(c))
    if (!CONVERGE_KEYS.includes(k))
      throw new InputError(`${where}: unknown key ${JSON.stringify(k)}; allowed: ${CONVERGE_KEYS.join(", ")}`);
  const rules: ConvergeRules = {};
  if (c["maxRounds"] !== undefined) rules.maxRounds = c["maxRounds"] as number;
  if (typeof c["readyAfter"] === "number") rules.readyAfter = { "*": c["readyAfter"] };
  else if (c["readyAfter"] !== undefined) {
    if (!isObject(c["readyAfter"])) throw new InputError(`${where}: readyAfter must be a number of rounds, or one per resource name`);
    rules.readyAfter = c["readyAfter"] as Record<string, number>;
  }
  for (const k of ["ready", "readyStatus"] as const) {
    if (c[k] === undefined) continue;
    if (!isObject(c[k])) throw new InputError(`${where}: ${k} must be a map from resource names (or *)`);
    if (k === "ready") rules.ready = c[k] as Record<string, string>;
    else rules.readyStatus = c[k] as Record<string, JsonObject>;
  }
  checkRules(rules, where);
  return rules;
}

function readConfig(dir: string): CaseConfig {
  const p = join(dir, "case.yaml");
  if (!existsSync(p)) return {};
  const v = parseDoc(readFileSync(p, "utf8"), p);
  if (v === null || v === undefined) return {};
  if (typeof v !== "object" || Array.isArray(v)) throw new InputError(`${p}: expected a map with ${CASE_KEYS.join(", ")}`);
  const c = v as Record<string, unknown>;
  for (const k of Object.keys(c))
    if (!CASE_KEYS.includes(k)) throw new InputError(`${p}: unknown key ${JSON.stringify(k)}; allowed: ${CASE_KEYS.join(", ")}`);
  const val = c["validate"];
  if (val !== undefined && typeof val !== "string" && !(Array.isArray(val) && val.every((x) => typeof x === "string")))
    throw new InputError(`${p}: validate must be a path, or a list of paths, to CRDs or XRDs`);
  if (c["output"] !== undefined && c["output"] !== "legacy" && c["output"] !== "current")
    throw new InputError(`${p}: output ${JSON.stringify(c["output"])} must be legacy or current`);
  for (const k of ["function", "project", "projectPath"])
    if (c[k] !== undefined && (typeof c[k] !== "string" || c[k] === "")) throw new InputError(`${p}: ${k} must be a non-empty string`);
  for (const k of ["now", "until"])
    if (c[k] !== undefined && Number.isNaN(new Date(String(c[k])).getTime()))
      throw new InputError(`${p}: ${k} ${JSON.stringify(c[k])} is not an RFC 3339 time`);
  if (c["until"] !== undefined && (c["now"] === undefined || Date.parse(String(c["until"])) < Date.parse(String(c["now"]))))
    throw new InputError(`${p}: until goes with now, and is not before it`);
  if (Object.hasOwn(c, "converge")) c["converge"] = convergeOf(c["converge"], p);
  return c as CaseConfig;
}

/**
 * inspectedFunction is the Function an inspected step was a call to (its
 * inspected.yaml, written by `xfn inspect`), or undefined for any other case.
 */
function inspectedFunction(dir: string): string | undefined {
  const p = join(dir, "inspected.yaml");
  if (!existsSync(p)) return undefined;
  const v = parseDoc(readFileSync(p, "utf8"), p);
  const f = isObject(v) ? v["function"] : undefined;
  return typeof f === "string" && f !== "" ? f : undefined;
}

/**
 * resolveFunctions reads `--function NAME=MODULE` values into a map from a
 * Function's name to its module file, resolved from cwd; a value of another
 * shape, a name given twice or a module that cannot be found is an error
 * naming it.
 */
export function resolveFunctions(values: readonly string[], cwd = process.cwd()): Map<string, string> {
  const out = new Map<string, string>();
  for (const v of values) {
    const i = v.indexOf("=");
    if (i <= 0 || i === v.length - 1) throw new InputError(`--function ${JSON.stringify(v)}: expected NAME=MODULE`);
    const name = v.slice(0, i);
    if (out.has(name)) throw new InputError(`--function ${name} is given twice`);
    try {
      out.set(name, resolveModule(v.slice(i + 1), cwd));
    } catch (err) {
      throw new InputError(`--function ${name}: ${messageOf(err)}`);
    }
  }
  return out;
}

/** findModule resolves the function for a request case; functions maps an inspected step's Function to a module. */
function findModule(dir: string, cfg: CaseConfig, functions: ReadonlyMap<string, string>): string {
  if (cfg.project !== undefined) return findInProject(dir, cfg);
  if (cfg.function) {
    if (isAbsolute(cfg.function)) return resolveModule(cfg.function);
    // From the case's folder, then each folder above it: a path recorded from the
    // project's root (src/index.ts) is found wherever in the project the case is.
    for (let d = dir; ; d = dirname(d)) {
      if (existsSync(resolve(d, cfg.function))) return resolveModule(resolve(d, cfg.function));
      if (dirname(d) === d) break;
    }
    throw new InputError(`${dir}: case.yaml's function ${cfg.function} is not found from the case's folder or any folder above it`);
  }
  const inspected = functions.size ? inspectedFunction(dir) : undefined;
  const mapped = inspected === undefined ? undefined : functions.get(inspected);
  if (mapped !== undefined) return mapped;
  for (let d = dirname(dir); ; d = dirname(d)) {
    try {
      return resolveModule(d);
    } catch {
      // not a module; keep walking up
    }
    if (dirname(d) === d) break;
  }
  const inspectedName = inspectedFunction(dir);
  throw new InputError(
    `${dir}: no function for this request: set function: in case.yaml, or put the case inside a function module's folder` +
      (inspectedName ? `, or run xfn test with --function ${inspectedName}=<module> (the Function this step called)` : ""),
  );
}

/**
 * findInProject resolves function: from the root of the project named
 * project: the first folder from the case's up whose package.json has that
 * name, else projectPath if it still is that project. A case copied into
 * another project is refused, naming what it needs, rather than run that
 * project's module of the same path.
 */
function findInProject(dir: string, cfg: CaseConfig): string {
  if (!cfg.function) throw new InputError(`${dir}: case.yaml's project ${cfg.project} goes with function: (the module from its root)`);
  const wanted = `case.yaml's function ${cfg.function} of project ${cfg.project}`;
  const isProject = (d: string) => existsSync(join(d, "package.json")) && packageName(join(d, "package.json")) === cfg.project;
  let root: string | undefined;
  for (let d = dir; root === undefined; d = dirname(d)) {
    if (isProject(d)) root = d;
    if (dirname(d) === d) break;
  }
  if (root === undefined && cfg.projectPath !== undefined && isAbsolute(cfg.projectPath) && isProject(cfg.projectPath))
    root = cfg.projectPath;
  if (root === undefined)
    throw new InputError(
      `${dir}: ${wanted} is not found: no folder from the case's up is that project (a package.json named ${cfg.project})` +
        (cfg.projectPath ? `, nor is ${cfg.projectPath}, where it was recorded` : "") +
        "; move the case into that project, or change case.yaml to name the function to run",
    );
  if (!existsSync(resolve(root, cfg.function))) throw new InputError(`${dir}: ${wanted} is not in that project (${root})`);
  return resolveModule(resolve(root, cfg.function));
}

const loaded = new Map<string, Promise<RunFunction>>();

/**
 * CaseOptions are what `xfn test` gives every case: the module of each
 * Function inspected steps called (--function), and resources and schemas
 * that answer a request case's requirements (--required-resources,
 * --required-schemas), beside the case's own.
 */
export interface CaseOptions {
  functions?: ReadonlyMap<string, string>;
  required?: Doc[];
  schemas?: Doc[];
}

/**
 * unmetRequirements lists what rsp asks for that req was not given: the
 * resources and schemas a recording lacks (Crossplane's Pipeline Inspector
 * emits a step's request before its requirements are fetched).
 */
function unmetRequirements(req: RunFunctionRequest, rsp: RunFunctionResponse): string[] {
  const r = rsp.requirements;
  if (!r) return [];
  return [
    ...Object.entries(r.resources)
      .filter(([n]) => !Object.hasOwn(req.requiredResources, n))
      .map(([n, sel]) => `resources ${n} (${sel.apiVersion} ${sel.kind})`),
    ...Object.entries(r.extraResources)
      .filter(([n]) => !Object.hasOwn(req.extraResources, n))
      .map(([n, sel]) => `resources ${n} (${sel.apiVersion} ${sel.kind})`),
    ...Object.entries(r.schemas)
      .filter(([n]) => !Object.hasOwn(req.requiredSchemas, n))
      .map(([n, sel]) => `the schema ${n} (${sel.apiVersion} ${sel.kind})`),
  ];
}

/**
 * runRequestCase runs the case's request through its function. Given
 * required resources or schemas (the case's `required` and `schemas`, or
 * opts'), it answers the function's requirements from them and calls it
 * again, as Crossplane does, until they settle; else it calls once, and says
 * what the function asked for that the request lacks.
 */
async function runRequestCase(
  dir: string,
  cfg: CaseConfig,
  opts: CaseOptions,
): Promise<{ rsp: RunFunctionResponse; unmet: string[]; requestBytes: number }> {
  const file = findModule(dir, cfg, opts.functions ?? new Map());
  let fn = loaded.get(file);
  if (!fn) {
    loaded.set(file, (fn = loadFunction(file)));
    // Awaited below, unless the request does not parse: its failure must not go unhandled meanwhile.
    fn.catch(() => {});
  }
  const reqPath = join(dir, "request.yaml");
  let req;
  try {
    req = parseRequest(readFileSync(reqPath, "utf8"), reqPath);
  } catch (err) {
    throw new InputError(messageOf(err));
  }
  const required = [...optionalDocs(dir, "required"), ...(opts.required ?? [])];
  const schemaDocs = [...optionalDocs(dir, "schemas"), ...(opts.schemas ?? [])];
  let requestBytes = 0;
  const call = async (r: RunFunctionRequest) => {
    requestBytes = Math.max(requestBytes, encodeRequest(r).length);
    return callFunction(await fn, r, { now: new Date(cfg.now ?? DEFAULT_CASE_NOW) });
  };
  if (required.length === 0 && schemaDocs.length === 0) {
    const rsp = await call(req);
    return { rsp, unmet: unmetRequirements(req, rsp), requestBytes };
  }
  const schemas = schemaDocs.length ? schemaSource(schemaDocs) : undefined;
  const objects = required.map((d) => d.obj);
  const rsp = await runWithRequirements(
    call,
    req,
    (sel) => select(objects, sel),
    schemas ? (apiVersion, kind) => schemas.find(apiVersion, kind) : undefined,
  );
  return { rsp, unmet: [], requestBytes };
}

const REDACTED_TEXT = Buffer.from(REDACTED).toString("base64");

/**
 * maskRedacted redacts in actual (changed in place) each connection detail
 * that expected holds redacted, as a recording holds every one: the recording
 * kept the key, not the secret, so any value matches. A connection detail
 * written out in expected is compared as it is.
 */
function maskRedacted(actual: JsonValue, expected: unknown): JsonValue {
  const obj = (v: unknown): Record<string, unknown> => (isObject(v) ? v : {});
  const got = obj(obj(actual)["desired"]);
  const want = obj(obj(expected)["desired"]);
  const resources = obj(got["resources"]);
  const pairs = [
    [got["composite"], want["composite"]],
    ...Object.keys(resources).map((k) => [getOwn(resources, k), getOwn(obj(want["resources"]), k)]),
  ];
  for (const [a, e] of pairs) {
    const details = obj(obj(a)["connectionDetails"]);
    const wanted = obj(obj(e)["connectionDetails"]);
    for (const k of Object.keys(details)) if (getOwn(wanted, k) === REDACTED_TEXT) setOwn(details, k, REDACTED_TEXT);
  }
  return actual;
}

function optionalDocs(dir: string, base: string): Doc[] {
  for (const p of [join(dir, base), join(dir, `${base}.yaml`)]) if (existsSync(p)) return loadDocs(p);
  return [];
}

/** docKey identifies a rendered document: the XR, a composed resource, a Result by position, the Context. */
function docKeys(docs: JsonObject[]): string[] {
  let results = 0;
  return docs.map((d, i) => {
    const kind = d["kind"];
    const annotations = ((d["metadata"] as JsonObject | undefined)?.["annotations"] ?? {}) as JsonObject;
    if (d["apiVersion"] === "render.crossplane.io/v1beta1" && kind === "Result") return `Result #${++results}`;
    if (d["apiVersion"] === "render.crossplane.io/v1beta1" && kind === "Context") return "Context";
    if (typeof annotations[COMPOSITION_RESOURCE_NAME] === "string") return `resource ${String(annotations[COMPOSITION_RESOURCE_NAME])}`;
    return i === 0 ? "XR" : `document ${i + 1}`;
  });
}

async function renderCase(
  dir: string,
  cfg: CaseConfig,
  expected: JsonObject[],
): Promise<{ docs: JsonObject[]; composed: JsonObject[]; warnings: string[] }> {
  const fnPath = join(dir, "functions.yaml");
  if (!existsSync(fnPath)) throw new InputError(`${dir}: a pipeline case needs functions.yaml beside xr.yaml`);
  const at = new Date(cfg.now ?? DEFAULT_CASE_NOW);
  const runner = await createRunner(loadDocs(fnPath), fnPath, () => at);
  try {
    let inputs: RenderInputs = {
      xr: loadOne(join(dir, "xr.yaml"), "composite resource"),
      composition: loadOne(join(dir, "composition.yaml"), "Composition"),
      observed: optionalDocs(dir, "observed"),
      required: optionalDocs(dir, "required"),
      credentials: optionalDocs(dir, "credentials"),
      context: cfg.context ?? {},
      ...(existsSync(join(dir, "xrd.yaml")) ? { xrd: loadOne(join(dir, "xrd.yaml"), "CompositeResourceDefinition") } : {}),
      schemas: optionalDocs(dir, "schemas"),
    };
    if (cfg.converge) {
      // Round after round until it settles: expected.yaml is the final state.
      const c = await converge(inputs, runner, { timeoutMs: 60_000, now: at }, cfg.converge);
      if (!c.converged)
        throw new InputError(
          `did not converge in ${c.rounds.length} rounds (converge.maxRounds): the next round's input would still differ: ${c.changing}`,
        );
      inputs = c.inputs;
    }
    // Cases recorded before render's current shape keep passing: they are compared in the shape they were written in.
    const o = await render(inputs, runner, { timeoutMs: 60_000, legacy: cfg.output !== "current" });
    const keys = docKeys(expected);
    const docs: JsonObject[] = [o.xr, ...o.composed];
    if (keys.some((k) => k.startsWith("Result"))) docs.push(...o.results);
    if (keys.includes("Context")) docs.push(o.context);
    return { docs, composed: o.composed, warnings: o.sizeWarnings };
  } finally {
    runner.close();
  }
}

/**
 * updated is what --update writes for a failing case: the actual result in the
 * expectation's shape (project), so that the keys a user chose to assert stay
 * the ones asserted, with their new values; "$absent" stays where the value is
 * still missing and "[REDACTED]" where a connection detail is redacted; list
 * items and resources that appeared are written whole, those gone dropped. An
 * empty expected.yaml (or one that does not parse) gets the whole result.
 */
function updated(actual: unknown, expected: unknown): unknown {
  return expected === null ? actual : project(actual, expected);
}

/** compareDocs pairs documents by identity and matches each partially. */
function compareDocs(
  actual: JsonObject[],
  expected: JsonObject[],
): { problems: string[]; projected: unknown[]; from: Array<number | undefined> } {
  const ak = docKeys(actual);
  const ek = docKeys(expected);
  const problems: string[] = [];
  const projected: unknown[] = [];
  // Which expected document each projected one is (none for a document rendered but not expected).
  const from: Array<number | undefined> = [];
  for (const [i, e] of expected.entries()) {
    const j = ak.indexOf(ek[i]!);
    if (j < 0) {
      problems.push(`${ek[i]}: expected, but not rendered`);
      continue;
    }
    problems.push(...mismatches(actual[j], e, ek[i]));
    projected.push(project(actual[j], e));
    from.push(i);
  }
  for (const [j, k] of ak.entries()) {
    if (!ek.includes(k)) {
      problems.push(`${k}: rendered, but not expected`);
      projected.push(actual[j]);
      from.push(undefined);
    }
  }
  return { problems, projected, from };
}

const yamlOf = (v: unknown) => stringify(v, { lineWidth: 0 });

/** docIndexes maps the objects of a pipeline case's expected.yaml (empty documents left out) to their documents in the text. */
function docIndexes(text: string): number[] {
  return parseAllDocuments(text).flatMap((d, i) => {
    const v: unknown = d.toJS();
    return typeof v === "object" && v !== null ? [i] : [];
  });
}

/** caseSchemas reads a case's validate: paths (from its folder) as xfn validate reads its extensions. */
async function caseSchemas(dir: string, paths: string | string[]) {
  const { Schemas } = await import("../validate/validate.js");
  const { loadSources } = await import("../validate/load.js");
  const list = (Array.isArray(paths) ? paths : paths.split(",")).map((x) => resolve(dir, x));
  return new Schemas().add(list.flatMap((x) => loadSources(x, () => "")));
}

/** named gives a desired composed resource without a name its name in the pipeline, so a refusal says which. */
function named(r: JsonObject, pipelineName: string): JsonObject {
  const m = isObject(r["metadata"]) ? r["metadata"] : {};
  if (typeof m["name"] === "string" && m["name"] !== "") return r;
  const annotations = isObject(m["annotations"]) ? m["annotations"] : {};
  return { ...r, metadata: { ...m, annotations: { ...annotations, [COMPOSITION_RESOURCE_NAME]: pipelineName } } };
}

/**
 * validationProblems are the lines of what the schemas refuse in resources. A
 * resource whose kind no schema covers fails too: a case that asks for
 * validation must not pass because a path or a version was mistyped.
 */
async function validationProblems(resources: JsonObject[], schemas: Schemas): Promise<string[]> {
  const { problems } = await import("../validate/validate.js");
  const found = problems(resources, resources, schemas);
  if (!found) return [];
  return [...found.report, ...found.refusals.map((l) => `a cluster's server-side apply would refuse: ${l}`)].map((l) => `validate: ${l}`);
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

/** precisionMs is the step of a time as written: 1 ms with a fraction of a second (to the ms), else 1 s. */
const precisionMs = (t: string) => (/\.\d+/.test(t) ? 1 : 1000);

/**
 * clockWindow matches a time the function wrote in the cluster with the one
 * it writes replayed. Crossplane's Pipeline Inspector stamps a step when it
 * sends the request; the function reads its clock later (after the call's
 * latency, and after Crossplane fetched what it required), before the
 * response came at until. Replayed, its clock reads now. So an actual time
 * that is now (at the precision it is written in) matches an expected one
 * from now to until: the time it was read in the cluster, as well as it can
 * be known.
 */
function clockWindow(now: Date, until: Date): Same {
  const at = now.getTime();
  return (actual, expected) => {
    if (typeof actual !== "string" || typeof expected !== "string" || !RFC3339.test(actual) || !RFC3339.test(expected)) return false;
    const a = Date.parse(actual);
    const e = Date.parse(expected);
    const pa = precisionMs(actual);
    const pe = precisionMs(expected);
    return a === Math.floor(at / pa) * pa && e >= Math.floor(at / pe) * pe && e <= until.getTime();
  };
}

/**
 * runCase runs one case. With update, a failing case's expected.yaml is
 * rewritten in its own shape (see updated), and a passing one left as written.
 * opts are what `xfn test` gives every case (CaseOptions).
 */
export async function runCase(dir: string, root: string, update = false, opts: CaseOptions = {}): Promise<CaseResult> {
  const name = relative(root, dir) || ".";
  const expectedPath = join(dir, "expected.yaml");
  try {
    const cfg = readConfig(dir);
    const isRequest = existsSync(join(dir, "request.yaml"));
    if (isRequest && cfg.converge)
      throw new InputError(
        `${join(dir, "case.yaml")}: converge goes with a pipeline case (xr.yaml and composition.yaml), not request.yaml`,
      );
    const expectedText = readFileSync(expectedPath, "utf8");
    // An expectation that does not parse is replaced whole by --update.
    const parsed = <T>(parse: () => T, none: T): T => {
      if (!update) return parse();
      try {
        return parse();
      } catch {
        return none;
      }
    };
    let problems: string[];
    const warnings: string[] = [];
    /** For a request case whose function asked for what the request lacks: what, and how to give it. */
    let hint = "";
    let want: string;
    let got: string;
    const schemas = cfg.validate ? await caseSchemas(dir, cfg.validate) : undefined;
    if (isRequest) {
      const { rsp, unmet, requestBytes } = await runRequestCase(dir, cfg, opts);
      warnings.push(...sizeWarnings(undefined, requestBytes, encodeResponse(rsp).length, rsp));
      hint = unmet.length
        ? `  the function asked for ${unmet.join(", ")}, which this case's request does not hold (Crossplane's Pipeline Inspector ` +
          "records a step's request before they are fetched): give them as required and schemas beside request.yaml, or with " +
          "xfn test --required-resources and --required-schemas"
        : "";
      if (schemas) {
        const desired = Object.entries(rsp.desired?.resources ?? {}).map(([n, r]) => named(r.resource ?? {}, n));
        const refused = await validationProblems(desired, schemas);
        if (refused.length) return { name, status: "failed", detail: refused.map((x) => `  ${x}`).join("\n"), warnings };
      }
      const expected = parsed(() => parseDoc(expectedText, expectedPath), null);
      const actual = maskRedacted(messageToJson(RunFunctionResponseSchema, rsp), expected);
      problems = mismatches(actual, expected, "$", cfg.until ? clockWindow(new Date(cfg.now!), new Date(cfg.until)) : undefined);
      if (update) {
        if (problems.length === 0) return { name, status: "passed", warnings };
        // Connection details redacted, as a recording writes them: no secret lands in a case folder.
        const value = updated(messageToJson(RunFunctionResponseSchema, redactResponse(rsp)), expected);
        // An expectation that parsed keeps its comments and styles; one that did not is written afresh.
        writeFileSync(expectedPath, expected === null ? yamlOf(value) : rewriteKeepingStyle(expectedText, [{ from: 0, value }], true));
        return { name, status: "updated", warnings };
      }
      want = yamlOf(expected);
      got = yamlOf(project(actual, expected));
    } else {
      const expected = parsed(
        () => parseDocs(expectedText, expectedPath).filter((d): d is JsonObject => typeof d === "object" && d !== null),
        [],
      );
      const { docs: actual, composed, warnings: w } = await renderCase(dir, cfg, expected);
      warnings.push(...w);
      if (schemas) {
        const refused = await validationProblems(composed, schemas);
        if (refused.length) return { name, status: "failed", detail: refused.map((x) => `  ${x}`).join("\n"), warnings };
      }
      const c = compareDocs(actual, expected);
      problems = c.problems;
      if (update) {
        if (problems.length === 0) return { name, status: "passed", warnings };
        // Documents paired by identity in expected's shape, those rendered but not expected whole, those gone dropped.
        writeFileSync(
          expectedPath,
          expected.length === 0
            ? toYamlStream(actual)
            : rewriteKeepingStyle(
                expectedText,
                c.projected.map((value, i) =>
                  c.from[i] !== undefined ? { from: docIndexes(expectedText)[c.from[i]!]!, value } : { value },
                ),
              ),
        );
        return { name, status: "updated", warnings };
      }
      want = toYamlStream(expected);
      got = toYamlStream(c.projected);
    }
    if (problems.length === 0) return { name, status: "passed", warnings };
    const patch = createTwoFilesPatch(`${name}/expected.yaml`, `${name} (actual)`, want, got, "", "", { context: 3 });
    // Drop the "=====" banner and the trailing tabs of the empty file headers.
    const diff = patch
      .split("\n")
      .slice(1)
      .map((l) => l.replace(/\t$/, ""))
      .join("\n");
    return { name, status: "failed", detail: `${problems.map((p) => `  ${p}`).join("\n")}\n${hint ? `${hint}\n` : ""}${diff}`, warnings };
  } catch (err) {
    return { name, status: "failed", detail: `  ${messageOf(err)}` };
  }
}
