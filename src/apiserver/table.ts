// Server-side printing, as kube-apiserver does it for `kubectl get`: a list or
// an object answered as a meta.k8s.io Table when the client asks for one
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io). Columns are Name and,
// for a CRD's kind, the served version's additionalPrinterColumns (Age when it
// has none); built-in kinds get the columns kube-apiserver's printers give
// them (kubernetes pkg/printers/internalversion/printers.go: printNamespace,
// printConfigMap, printSecret, printEvent, printLease; a CRD itself gets the
// default convertor's Name and Created At), every column, as the server
// prints wide and kubectl hides those of priority 1.
import type { IncomingMessage } from "node:http";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { evaluate, parseJsonPath } from "./jsonpath.js";
import type { ResourceType } from "./types.js";
import { isObject, metaOf } from "../json.js";

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

const NAME_COLUMN: JsonObject = {
  name: "Name",
  type: "string",
  format: "name",
  description: "Name must be unique within a namespace.",
  priority: 0,
};
const col = (name: string, description: string, priority = 0, format = ""): JsonObject => ({
  name,
  type: "string",
  format,
  description,
  priority,
});
const AGE_COLUMN = col("Age", "When the object was created.");

/** since is translateTimestampSince: how long ago, or <unknown> for no time. */
const since = (t: JsonValue | undefined, now: Date): string => (typeof t === "string" && t ? humanAge(t, now) : "<unknown>");
const str = (v: JsonValue | undefined): string => (typeof v === "string" ? v : "");
const count = (v: JsonValue | undefined): number => (isObject(v) ? Object.keys(v).length : 0);

/** A built-in kind's columns and the cells of one object. */
interface Printer {
  columns: JsonObject[];
  cells(o: JsonObject, now: Date): JsonValue[];
}

const PRINTERS: Record<string, Printer> = {
  "/Namespace": {
    columns: [NAME_COLUMN, col("Status", "The status of the namespace"), AGE_COLUMN],
    cells: (o, now) => [str(metaOf(o)["name"]), str(field(o, "status", "phase")), since(metaOf(o)["creationTimestamp"], now)],
  },
  "/ConfigMap": {
    columns: [NAME_COLUMN, col("Data", "How many keys data and binaryData hold."), AGE_COLUMN],
    cells: (o, now) => [str(metaOf(o)["name"]), count(o["data"]) + count(o["binaryData"]), since(metaOf(o)["creationTimestamp"], now)],
  },
  "/Secret": {
    columns: [NAME_COLUMN, col("Type", "The secret's type."), col("Data", "How many keys data holds."), AGE_COLUMN],
    cells: (o, now) => [str(metaOf(o)["name"]), str(o["type"]), count(o["data"]), since(metaOf(o)["creationTimestamp"], now)],
  },
  "/Event": {
    columns: [
      col("Last Seen", "When the event was last seen."),
      col("Type", "The event's type."),
      col("Reason", "Why the event happened."),
      col("Object", "The object the event is about."),
      col("Subobject", "The part of the object the event is about.", 1),
      col("Source", "What reported the event.", 1),
      col("Message", "What happened."),
      col("First Seen", "When the event was first seen.", 1),
      col("Count", "How often it happened.", 1),
      col("Name", "The event's name.", 1, "name"),
    ],
    cells: eventCells,
  },
  "coordination.k8s.io/Lease": {
    columns: [NAME_COLUMN, col("Holder", "Who holds the lease."), AGE_COLUMN],
    cells: (o, now) => [str(metaOf(o)["name"]), str(field(o, "spec", "holderIdentity")), since(metaOf(o)["creationTimestamp"], now)],
  },
  "apiextensions.k8s.io/CustomResourceDefinition": {
    columns: [NAME_COLUMN, { ...col("Created At", "When the object was created."), type: "date" }],
    cells: (o) => [str(metaOf(o)["name"]), str(metaOf(o)["creationTimestamp"])],
  },
};

function field(o: JsonObject, ...path: string[]): JsonValue | undefined {
  let v: JsonValue | undefined = o;
  for (const p of path) v = isObject(v) ? v[p] : undefined;
  return v;
}

/** eventCells is printEvent, wide: times fall back as kube's do (eventTime, then series), a singleton counts 1. */
function eventCells(o: JsonObject, now: Date): JsonValue[] {
  const series = field(o, "series");
  const first = str(o["firstTimestamp"]) ? since(o["firstTimestamp"], now) : since(o["eventTime"], now);
  let last = str(o["lastTimestamp"]) ? since(o["lastTimestamp"], now) : first;
  let n = typeof o["count"] === "number" ? o["count"] : 0;
  if (isObject(series)) {
    last = since(series["lastObservedTime"], now);
    n = typeof series["count"] === "number" ? series["count"] : 0;
  } else if (n === 0) n = 1;
  const kind = str(field(o, "involvedObject", "kind")).toLowerCase();
  const name = str(field(o, "involvedObject", "name"));
  const component = str(field(o, "source", "component")) || str(o["reportingComponent"]);
  const instance = str(field(o, "source", "host")) || str(o["reportingInstance"]);
  const source = component || instance ? [component, ...(instance ? [instance] : [])].join(", ") : "";
  return [
    last,
    str(o["type"]),
    str(o["reason"]),
    name ? `${kind}/${name}` : kind,
    str(field(o, "involvedObject", "fieldPath")),
    source,
    str(o["message"]).trim(),
    first,
    n,
    str(metaOf(o)["name"]),
  ];
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
  listMeta: JsonObject,
  includeObject: string | null,
  now: Date,
): JsonObject {
  const printer = PRINTERS[`${t.group}/${t.kind}`];
  const cols = printer ? [] : columnsOf(t, version);
  const include = includeObject === "None" || includeObject === "Object" ? includeObject : "Metadata";
  return {
    kind: "Table",
    apiVersion: `meta.k8s.io/${tableApiVersion}`,
    metadata: listMeta,
    columnDefinitions: printer
      ? printer.columns
      : [
          NAME_COLUMN,
          ...cols.map((c) => ({
            name: String(c["name"] ?? ""),
            type: String(c["type"] ?? "string"),
            format: String(c["format"] ?? ""),
            // Without a description, apiextensions-apiserver's own (v0.36.3 tableconvertor.go) naming the path.
            description: c["description"]
              ? String(c["description"])
              : `Custom resource definition column (in JSONPath format): ${String(c["jsonPath"] ?? "")}`,
            priority: Number(c["priority"] ?? 0),
          })),
        ],
    rows: objects.map((o) => ({
      cells: printer ? printer.cells(o, now) : [String(metaOf(o)["name"] ?? ""), ...cols.map((c) => cell(c, o, now))],
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
