// How deep the local tools let a document nest in JSON or YAML form (see
// protojson.ts): a module of its own that loads nothing, so that a command
// reading YAML does not load protobuf-es for a number.

/** MAX_JSON_FORM_DEPTH is how many levels of objects and arrays a message in JSON form may nest. */
export const MAX_JSON_FORM_DEPTH = 500;

/** depthOf returns how many levels of objects and arrays v nests; once past limit it stops counting. */
export function depthOf(v: unknown, limit = MAX_JSON_FORM_DEPTH): number {
  let max = 0;
  const stack: [unknown, number][] = [[v, 1]];
  while (stack.length > 0) {
    const [x, d] = stack.pop()!;
    if (typeof x !== "object" || x === null || ArrayBuffer.isView(x)) continue;
    if (d > max) max = d;
    if (max > limit) break;
    for (const k of Object.keys(x)) stack.push([(x as Record<string, unknown>)[k], d + 1]);
  }
  return max;
}
