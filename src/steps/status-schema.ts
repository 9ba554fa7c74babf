// statusSchema: the status fields a pipeline writes must be declared in the
// XRD, or the API server drops them, silently, on every reconcile (external
// names recorded there are lost: failure mode 4).
//
// The step asks for the schema of the XR's own kind (a schema requirement:
// Crossplane v2.2 and later answer it from the XR's CRD; xfn render --xrd and
// xfn test from the XRD given), and once it has it, checks every status field
// the desired XR holds at that point, and each field named in the options'
// suggest (the fields the pipeline's steps write, such as status.waiting,
// which a run with nothing waiting leaves out). Each one the schema would drop is a
// Warning that names the field and gives the schema to add. Without an answer
// (older Crossplane, no XRD given) it does nothing.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { step, type Step } from "../pipeline.js";
import * as request from "../sdk/request.js";
import * as response from "../sdk/response.js";
import { prune } from "../sdk/schema.js";
import { Capability } from "../gen/fn/v1/run_function_pb.js";
import { getValue, isObject, setValue } from "../sdk/fieldpath.js";

/** STATUS_SCHEMA_REQUIREMENT is the name the step's schema requirement goes by. */
export const STATUS_SCHEMA_REQUIREMENT = "xfn.statusSchema";

/** StatusSchemaOptions configure the statusSchema step. */
export interface StatusSchemaOptions {
  /**
   * The schema to suggest for a status field (by its path, e.g.
   * "status.externalNames"). Fields without one get a schema that keeps
   * whatever they hold.
   */
  suggest?: Record<string, JsonObject>;
}

/** statusSchema checks the desired XR's status against the XR kind's schema; see the file comment. */
export function statusSchema(opts: StatusSchemaOptions = {}): Step {
  return step("statusSchema", (ctx) => {
    const xr = request.getObservedCompositeResource(ctx.req);
    const apiVersion = typeof xr?.["apiVersion"] === "string" ? xr["apiVersion"] : "";
    const kind = typeof xr?.["kind"] === "string" ? xr["kind"] : "";
    if (!apiVersion || !kind) return;
    // A Crossplane that lists its capabilities without this one would never answer.
    if (request.advertisesCapabilities(ctx.req) && !request.hasCapability(ctx.req, Capability.REQUIRED_SCHEMAS)) return;
    response.requireSchema(ctx.rsp, STATUS_SCHEMA_REQUIREMENT, { apiVersion, kind });
    const schema = request.getRequiredSchema(ctx.req, STATUS_SCHEMA_REQUIREMENT);
    if (!schema) return;
    const status = ctx.rsp.desired?.composite?.resource?.["status"];
    const probe: JsonObject = { status: isObject(status) ? structuredClone(status) : {} };
    delete (probe["status"] as JsonObject)["conditions"];
    // A field the steps write only some of the time is checked every time, with an empty object in its place.
    for (const path of Object.keys(opts.suggest ?? {})) if (getValue(probe, path) === undefined) setValue(probe, path, {});
    // Reported in the order of suggest (the pipeline's steps), then as the status holds them.
    const order = Object.keys(opts.suggest ?? {});
    const rank = (p: string) => (order.includes(p) ? order.indexOf(p) : order.length);
    for (const path of prune(probe, schema)
      .map((p, i) => ({ p, i }))
      .sort((a, b) => rank(a.p) - rank(b.p) || a.i - b.i)
      .map((x) => x.p)) {
      const field = path.split(".").slice(1).join(".");
      const suggested = opts.suggest?.[path] ?? { type: "object", "x-kubernetes-preserve-unknown-fields": true };
      const where = field.includes(".") ? "the status schema" : "spec.versions[].schema.openAPIV3Schema.properties.status.properties";
      response
        .warning(
          ctx.rsp,
          `${path} is not in the schema of ${kind} (${apiVersion}): the API server drops it, so what this pipeline records there ` +
            `is lost on every reconcile. Add to the XRD, under ${where}: ` +
            flowYaml({ [field.split(".").pop()!]: suggested }),
        )
        .withReason("StatusFieldNotInSchema");
    }
  });
}

/** PLAIN is a string YAML reads back as that string without quotes (and not as a number, boolean or null). */
const PLAIN = /^[A-Za-z_][\w./-]*$/;
const RESERVED = /^(true|false|null|yes|no|on|off|y|n|~)$/i;

/**
 * flowYaml writes a JSON value as one line of YAML in flow style, as the yaml
 * package writes it with collectionStyle "flow": `{ a: { b: [ c, 1 ] } }`.
 * Strings that would not read back as themselves are quoted as JSON quotes
 * them (YAML reads a JSON string as that string). Written here so that the
 * steps, which every served function imports, load no YAML parser.
 */
export function flowYaml(v: JsonValue): string {
  if (typeof v === "string") return PLAIN.test(v) && !RESERVED.test(v) ? v : JSON.stringify(v);
  if (v === null || typeof v !== "object") return JSON.stringify(v);
  if (Array.isArray(v)) return v.length ? `[ ${v.map(flowYaml).join(", ")} ]` : "[]";
  const entries = Object.entries(v).map(([k, x]) => `${flowYaml(k)}: ${flowYaml(x)}`);
  return entries.length ? `{ ${entries.join(", ")} }` : "{}";
}
