// Deep copies of State and Resource messages that keep every map key.
//
// protobuf-es's clone (and create, given an object for a map field) writes map
// entries by assignment, so a key named __proto__ (a resource called that)
// becomes the map's prototype and the entry is gone. These copies write own
// properties, and leave parts of an object not read from the request's bytes
// undecoded (see wire/struct/): a function that returns the desired state it
// was given as it was pays little for the copy.
import { create } from "@bufbuild/protobuf";
import { ResourceSchema, StateSchema, type Resource, type State } from "../gen/fn/v1/run_function_pb.js";
import { setOwn } from "../own.js";
import { cloneJson } from "../wire/struct/values.js";

/** cloneResource copies a Resource: its object, connection details and readiness. */
export function cloneResource(r: Resource): Resource {
  const connectionDetails: Record<string, Uint8Array> = {};
  for (const k in r.connectionDetails) setOwn(connectionDetails, k, r.connectionDetails[k]!.slice());
  const out: Resource = { $typeName: ResourceSchema.typeName, connectionDetails, ready: r.ready };
  if (r.resource) out.resource = cloneJson(r.resource);
  return out;
}

/** cloneState copies a State: the composite and every composed resource. */
export function cloneState(s: State): State {
  const out = create(StateSchema);
  if (s.composite) out.composite = cloneResource(s.composite);
  for (const k in s.resources) setOwn(out.resources, k, cloneResource(s.resources[k]!));
  return out;
}

/** stateOf makes a State holding composite (when given) and resources, keeping every name. */
export function stateOf(resources: Record<string, Resource>, composite?: Resource): State {
  const out = create(StateSchema);
  if (composite) out.composite = composite;
  for (const k in resources) if (Object.hasOwn(resources, k)) setOwn(out.resources, k, resources[k]!);
  return out;
}
