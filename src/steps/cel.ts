// Expressions over the observed resources, in CEL (the Common Expression
// Language Kubernetes and kro use), for readiness (kro's readyWhen), waiting
// (a dependency's waitUntil) and inclusion (kro's includeWhen).
//
// An expression sees:
//   xr        the observed XR
//   observed  a map of the observed composed resources, by name
//   <name>    each observed composed resource whose name is an identifier
//             (db, vpc; not my-db: use observed["my-db"])
//   self      in a readiness check, the resource being checked
// and must give a bool. It is parsed when the step is built (a syntax error
// is refused there, naming where). Reading a field that is not there makes
// the expression "not yet" rather than an error, so `db.status.endpoint != ""`
// waits for the endpoint; use has(db.status.endpoint) to test presence.
// matches() runs on RE2, as in cel-go: in time linear in the string.
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Environment, type ParseResult } from "@marcbachmann/cel-js";
import { onRE2, re2Matches, RE2_DECLARATIONS } from "../re2.js";
import { setOwn } from "../own.js";
import type { StepContext } from "../pipeline.js";
import * as request from "../sdk/request.js";
import { messageOf } from "../sdk/errors.js";

/** A compiled expression and the text it came from. */
export interface Expression {
  readonly text: string;
  readonly run: ParseResult;
}

/** The expressions' environment: cel-js's, with matches() on RE2 (re2.ts), linear in the string. */
const ENV = new Environment({ unlistedVariablesAreDyn: true })
  .registerFunction(RE2_DECLARATIONS[0], re2Matches)
  .registerFunction(RE2_DECLARATIONS[1], re2Matches);

const IDENT = /^[A-Za-z_][A-Za-z0-9_]*$/;
const RESERVED = new Set([
  // cel-js refuses __proto__ as an identifier; as a variable it would also set vars' prototype.
  "__proto__",
  "xr",
  "observed",
  "self",
  "true",
  "false",
  "null",
  "in",
  "as",
  "break",
  "const",
  "continue",
  "else",
  "for",
  "function",
  "if",
  "import",
  "let",
  "loop",
  "package",
  "namespace",
  "return",
  "var",
  "void",
  "while",
]);

/** compile parses an expression, throwing with where it came from when it does not parse. */
export function compile(text: string, where: string): Expression {
  if (typeof text !== "string" || text.trim() === "") throw new Error(`${where}: an expression is required`);
  try {
    const run = ENV.parse(text);
    onRE2((run as unknown as { ast: unknown }).ast);
    return { text, run };
  } catch (err) {
    throw new Error(`${where}: cannot parse ${JSON.stringify(text)}: ${messageOf(err).split("\n")[0]}`);
  }
}

/** variables builds what expressions see, from the observed XR and composed resources. */
export function variables(xr: JsonObject | undefined, observed: Record<string, JsonObject | undefined>): Record<string, unknown> {
  const byName: Record<string, unknown> = {};
  const vars: Record<string, unknown> = { xr: xr ?? {}, observed: byName };
  for (const [name, obj] of Object.entries(observed)) {
    if (!obj) continue;
    // A resource may be named __proto__ (a map key on the wire): as an own key, not a prototype.
    setOwn(byName, name, obj);
    if (IDENT.test(name) && !RESERVED.has(name)) vars[name] = obj;
  }
  return vars;
}

/** Outcome: the expression held, did not, or could not be decided yet (a field or resource not there). */
export type Outcome = { ok: true } | { ok: false; why: string };

/** evaluate runs an expression; an expression that gives something other than a bool is an error naming it. */
export function evaluate(e: Expression, vars: Record<string, unknown>): Outcome {
  let v: unknown;
  try {
    v = e.run(vars as Record<string, JsonValue>);
  } catch (err) {
    const msg = messageOf(err).split("\n")[0] ?? "";
    // A missing key or resource means "not yet"; anything else is a mistake in the expression.
    if (/No such key|Unknown variable|undeclared reference/i.test(msg)) return { ok: false, why: `${e.text} (${msg})` };
    throw new Error(`expression ${JSON.stringify(e.text)}: ${msg}`);
  }
  if (typeof v !== "boolean") {
    const what =
      typeof v === "bigint"
        ? "an int"
        : typeof v === "number"
          ? "a number"
          : v === null
            ? "null"
            : Array.isArray(v)
              ? "a list"
              : `a ${typeof v}`;
    throw new Error(`expression ${JSON.stringify(e.text)} gave ${what}, not a bool`);
  }
  return v ? { ok: true } : { ok: false, why: e.text };
}

/** celVariables builds the variables of a step's request (see variables). */
export function celVariables(ctx: StepContext): Record<string, unknown> {
  const observed = request.getObservedComposedResources(ctx.req);
  return variables(
    request.getObservedCompositeResource(ctx.req),
    Object.fromEntries(Object.entries(observed).map(([k, r]) => [k, r.resource])),
  );
}
