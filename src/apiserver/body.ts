// A request's body: read within kube-apiserver's size limit, and decoded as
// JSON or YAML within the nesting the server follows.
import type { IncomingMessage } from "node:http";
import type { JsonValue } from "@bufbuild/protobuf";
import { parse as parseYaml, type ParseOptions } from "yaml";
import { KUBE_YAML, toKubeJson } from "../engine/kubeyaml.js";
import { messageOf } from "../sdk/errors.js";
import { ApiError } from "./errors.js";
import { checkDepth, MAX_REQUEST_BODY_BYTES } from "./query.js";

/** readBody reads a request's body, refusing one past MAX_REQUEST_BODY_BYTES as kube-apiserver's limitedReadBody does. */
export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > MAX_REQUEST_BODY_BYTES)
      throw new ApiError(413, "RequestEntityTooLarge", `Request entity too large: limit is ${MAX_REQUEST_BODY_BYTES}`);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function jsonOrYaml(text: string): unknown {
  const t = text.trimStart();
  if (t.startsWith("{") || t.startsWith("["))
    try {
      return JSON.parse(text);
    } catch {
      // not JSON after all: YAML's flow style
    }
  // As kube-apiserver reads an apply patch (sigs.k8s.io/yaml): yes is true, 0777 is 511.
  return toKubeJson(parseYaml(text, KUBE_YAML as ParseOptions));
}

export function parseBody(text: string, yaml: boolean): JsonValue {
  let v: JsonValue;
  try {
    // JSON is YAML: read as JSON when it is (kubectl and client libraries send JSON), which is many
    // times faster than the YAML reader on a large body.
    v = (yaml ? jsonOrYaml(text) : JSON.parse(text)) as JsonValue;
  } catch (err) {
    const message = messageOf(err);
    // The YAML reader recurses: a body nested past what its stack holds (about 900 levels) fails to parse.
    if (message.includes("Maximum call stack size exceeded"))
      throw new ApiError(
        400,
        "BadRequest",
        "the request body nests deeper than the YAML reader follows; send it as JSON (up to 1000 levels)",
      );
    throw new ApiError(400, "BadRequest", `cannot decode the request body: ${message.split("\n")[0]}`);
  }
  checkDepth(v);
  return v;
}
