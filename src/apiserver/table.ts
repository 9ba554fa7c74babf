// Server-side printing, as kube-apiserver does it for `kubectl get`: a list or
// an object answered as a meta.k8s.io Table when the client asks for one
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io). Columns are Name and,
// for a CRD's kind, the served version's additionalPrinterColumns (Age when it
// has none); built-in kinds get Name and Age.
import type { IncomingMessage } from "node:http";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { evaluate, parseJsonPath } from "./jsonpath.js";
import type { ResourceType } from "./types.js";
import { metaOf } from "../json.js";

const AGE: JsonObject = { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" };

/** tableVersion is the meta.k8s.io Table version the request asks for, if any. */
export function tableVersion(req: IncomingMessage): "v1" | "v1beta1" | undefined {
  for (const part of (req.headers.accept ?? "").split(",")) {
    const params = part.split(";").map((p) => p.trim());
    if (params[0] !== "application/json" || !params.includes("as=Table")) continue;
    if (params.includes("g=meta.k8s.io")) return params.includes("v=v1beta1") ? "v1beta1" : "v1";
  }
  return undefined;
}

/** humanAge renders how long ago t was as kubectl does (duration.HumanDuration). */
export function humanAge(t: string, now: Date): string {
  const secs = Math.floor((now.getTime() - Date.parse(t)) / 1000);
  if (Number.isNaN(secs)) return "<unknown>";
  if (secs < 0) return "<invalid>";
  const mins = Math.floor(secs / 60);
  const hours = Math.floor(secs / 3600);
  const days = Math.floor(hours / 24);
  const years = Math.floor(days / 365);
  if (secs < 120) return `${secs}s`;
  if (mins < 10) return secs % 60 === 0 ? `${mins}m` : `${mins}m${secs % 60}s`;
  if (mins < 180) return `${mins}m`;
  if (hours < 8) return mins % 60 === 0 ? `${hours}h` : `${hours}h${mins % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 192) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (days < 730) return `${days}d`;
  if (days < 2920) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}

function columnsOf(t: ResourceType, version: string): JsonObject[] {
  const cols = t.columns?.[version];
  return cols && cols.length > 0 ? cols : [AGE];
}

function cell(col: JsonObject, o: JsonObject, now: Date): JsonValue {
  let found: JsonValue[];
  try {
    found = evaluate(parseJsonPath(String(col["jsonPath"] ?? "")), o);
  } catch {
    return null;
  }
  if (found.length === 0) return null;
  const v = found[0]!;
  if (col["type"] === "date") return typeof v === "string" ? humanAge(v, now) : null;
  if (typeof v === "object" && v !== null) return JSON.stringify(v);
  return v;
}

/** table answers objects of type t, read in version, as a Table. */
export function table(
  t: ResourceType,
  version: string,
  tableApiVersion: "v1" | "v1beta1",
  objects: JsonObject[],
  resourceVersion: string,
  includeObject: string | null,
  now: Date,
): JsonObject {
  const cols = columnsOf(t, version);
  const include = includeObject === "None" || includeObject === "Object" ? includeObject : "Metadata";
  return {
    kind: "Table",
    apiVersion: `meta.k8s.io/${tableApiVersion}`,
    metadata: { resourceVersion },
    columnDefinitions: [
      { name: "Name", type: "string", format: "name", description: "Name must be unique within a namespace.", priority: 0 },
      ...cols.map((c) => ({
        name: String(c["name"] ?? ""),
        type: String(c["type"] ?? "string"),
        format: String(c["format"] ?? ""),
        description: String(c["description"] ?? ""),
        priority: Number(c["priority"] ?? 0),
      })),
    ],
    rows: objects.map((o) => ({
      cells: [String(metaOf(o)["name"] ?? ""), ...cols.map((c) => cell(c, o, now))],
      ...(include === "None"
        ? {}
        : {
            object:
              include === "Object"
                ? o
                : { kind: "PartialObjectMetadata", apiVersion: `meta.k8s.io/${tableApiVersion}`, metadata: metaOf(o) },
          }),
    })),
  };
}
