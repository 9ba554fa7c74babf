// TypeScript interfaces from Kubernetes CRDs and Crossplane XRDs, for
// `xfn generate types`. Each served version's openAPIV3Schema becomes one
// interface with apiVersion and kind as literal types, so a typed object is
// checked by tsc where it is written and passes to the response writers
// without a cast. json-schema-to-typescript does the schema work; this module
// only turns Kubernetes' structural-schema dialect into plain JSON Schema.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isObject } from "../json.js";
import { setOwn } from "../own.js";

/** TypeSource is one parsed YAML document and where it came from. */
export interface TypeSource {
  obj: JsonObject;
  source: string;
}

/** GeneratedKind names the interfaces written for one served version. */
export interface GeneratedKind {
  /** The object as a function writes it (desired): fields with a default may be left out. */
  name: string;
  /** The object as read back (observed): the API server has set every field with a default. */
  observed: string;
  apiVersion: string;
  kind: string;
  source: string;
}

const CRD = "apiextensions.k8s.io/v1/CustomResourceDefinition";
const XRD_KINDS = new Set([
  "apiextensions.crossplane.io/v1/CompositeResourceDefinition",
  "apiextensions.crossplane.io/v2/CompositeResourceDefinition",
]);

function pascal(s: string): string {
  return s.replace(/(^|[^A-Za-z0-9])([A-Za-z0-9])/g, (_, __, c: string) => c.toUpperCase());
}

/**
 * toJsonSchema rewrites a structural schema as plain JSON Schema: an object
 * with properties accepts no other keys (the API server prunes them) unless it
 * says x-kubernetes-preserve-unknown-fields; int-or-string is either;
 * nullable adds null; embedded resources get apiVersion, kind and metadata.
 * With observed, a property with a default is required: the API server sets
 * it wherever the object holding it is, so an object read from it (observed)
 * always has it.
 */
export function toJsonSchema(s: JsonValue | undefined, opts: { observed?: boolean } = {}): JsonObject {
  if (!isObject(s)) return {};
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(s)) {
    if (k === "properties" && isObject(v)) {
      const props: JsonObject = {};
      for (const [pk, pv] of Object.entries(v)) setOwn(props, pk, toJsonSchema(pv, opts));
      out[k] = props;
    } else if ((k === "items" || k === "additionalProperties" || k === "not") && isObject(v)) {
      out[k] = toJsonSchema(v, opts);
    } else if ((k === "allOf" || k === "anyOf" || k === "oneOf") && Array.isArray(v)) {
      out[k] = v.map((x) => toJsonSchema(x, opts));
    } else if (!k.startsWith("x-kubernetes-") && k !== "nullable" && k !== "default" && k !== "example") {
      out[k] = v;
    }
  }
  if (s["x-kubernetes-int-or-string"] === true) {
    delete out["type"];
    out["anyOf"] = [{ type: "integer" }, { type: "string" }];
  }
  const preserve = s["x-kubernetes-preserve-unknown-fields"] === true;
  if (s["x-kubernetes-embedded-resource"] === true) {
    const props = isObject(out["properties"]) ? out["properties"] : {};
    out["properties"] = { apiVersion: { type: "string" }, kind: { type: "string" }, metadata: { tsType: "ObjectMeta" }, ...props };
  }
  if (out["type"] === "object" && out["additionalProperties"] === undefined) {
    // An object without properties and without preserve-unknown-fields is
    // pruned to {} by the API server; with either flag, anything goes.
    out["additionalProperties"] = preserve || !isObject(out["properties"]) ? true : false;
  }
  if (s["nullable"] === true && typeof out["type"] === "string") out["type"] = [out["type"], "null"];
  if (opts.observed && isObject(s["properties"])) {
    const defaulted = Object.entries(s["properties"]).filter(([, p]) => isObject(p) && p["default"] !== undefined);
    if (defaulted.length > 0) {
      const required = new Set([...(Array.isArray(out["required"]) ? out["required"] : []), ...defaulted.map(([k]) => k)]);
      out["required"] = [...required].map(String);
    }
  }
  return out;
}

interface Version {
  name: string;
  schema: JsonObject;
}

/** kindsOf lists what one CRD or XRD serves: group, kind and each served version's schema. */
function kindsOf(doc: TypeSource): { group: string; kind: string; versions: Version[]; xr: boolean } | undefined {
  const id = `${String(doc.obj["apiVersion"])}/${String(doc.obj["kind"])}`;
  if (id !== CRD && !XRD_KINDS.has(id)) return undefined;
  const spec = isObject(doc.obj["spec"]) ? doc.obj["spec"] : {};
  const names = isObject(spec["names"]) ? spec["names"] : {};
  const group = spec["group"];
  const kind = names["kind"];
  if (typeof group !== "string" || typeof kind !== "string") {
    throw new Error(`${doc.source}: ${String(doc.obj["kind"])} has no spec.group or spec.names.kind`);
  }
  const versions: Version[] = [];
  for (const v of Array.isArray(spec["versions"]) ? spec["versions"] : []) {
    if (!isObject(v) || typeof v["name"] !== "string" || v["served"] === false) continue;
    const schema = isObject(v["schema"]) && isObject(v["schema"]["openAPIV3Schema"]) ? v["schema"]["openAPIV3Schema"] : { type: "object" };
    versions.push({ name: v["name"], schema });
  }
  if (versions.length === 0) throw new Error(`${doc.source}: ${kind}.${group} serves no version`);
  return { group, kind, versions, xr: id !== CRD };
}

const HEADER = `/* eslint-disable */
// Generated by \`xfn generate types\`: do not edit; run it again when the CRDs or XRDs change.
`;

const OBJECT_META = `
/** ObjectMeta is the part of Kubernetes object metadata a composition function usually writes. */
export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  labels?: { [key: string]: string };
  annotations?: { [key: string]: string };
  [key: string]: unknown;
}
`;

/**
 * generateTypes returns one TypeScript module with two interfaces per served
 * version of every CRD and XRD in docs (named after the kind, with the version
 * appended when a kind serves several): the object as written, and as
 * observed (Observed<name>: the fields with a default are set). Documents of
 * other kinds are skipped.
 */
export async function generateTypes(docs: TypeSource[]): Promise<{ code: string; kinds: GeneratedKind[] }> {
  const { compile } = await import("json-schema-to-typescript");
  const parts: string[] = [HEADER, OBJECT_META];
  const kinds: GeneratedKind[] = [];
  const taken = new Map<string, string>();
  for (const doc of docs) {
    const k = kindsOf(doc);
    if (!k) continue;
    for (const v of k.versions) {
      const name = k.versions.length === 1 ? pascal(k.kind) : `${pascal(k.kind)}${pascal(v.name)}`;
      const apiVersion = `${k.group}/${v.name}`;
      for (const n of [name, `Observed${name}`]) {
        const clash = taken.get(n);
        if (clash)
          throw new Error(`${doc.source}: two kinds would both be named ${n} (the other from ${clash}); generate them into separate files`);
        taken.set(n, doc.source);
      }
      for (const observed of [false, true]) {
        const title = observed ? `Observed${name}` : name;
        const body = toJsonSchema(v.schema, { observed });
        const props = isObject(body["properties"]) ? { ...body["properties"] } : {};
        delete props["apiVersion"];
        delete props["kind"];
        delete props["metadata"];
        const what = `${k.kind} ${apiVersion}${k.xr ? " (a composite resource)" : ""}`;
        const schema = {
          ...body,
          title,
          description: observed
            ? `${what} as read back from the API server (observed): every field with a default is set. From ${doc.source}.`
            : `${what}, from ${doc.source}.`,
          type: "object",
          properties: {
            apiVersion: { const: apiVersion },
            kind: { const: k.kind },
            metadata: { tsType: "ObjectMeta" },
            ...props,
          },
          required: [
            "apiVersion",
            "kind",
            ...(Array.isArray(body["required"]) ? body["required"].filter((r) => r !== "apiVersion" && r !== "kind") : []),
          ],
          additionalProperties: body["additionalProperties"] ?? false,
        };
        parts.push(
          await compile(schema as never, title, {
            bannerComment: "",
            additionalProperties: false,
            strictIndexSignatures: true,
            format: true,
          }),
        );
      }
      kinds.push({ name, observed: `Observed${name}`, apiVersion, kind: k.kind, source: doc.source });
    }
  }
  if (kinds.length === 0) throw new Error("found no CustomResourceDefinition or CompositeResourceDefinition to generate types from");
  return { code: parts.join("\n"), kinds };
}
