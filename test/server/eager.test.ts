// What a bundle's server thread evaluates as it starts: bundled as `xfn
// package` bundles it, but split into chunks (esbuild), so that what is
// imported only where the function runs (the function module, the handler,
// protobuf-es and the generated types, the decoder for --record-dir, the
// health messages) lands in chunks the start does not load. The start's
// chunks must hold none of it: loading it cost the first answer some 25 ms
// (bench/RESULTS.md, "Start-up").
import { join } from "node:path";
import { build, type Metafile } from "esbuild";
import { test } from "uvu";
import * as assert from "uvu/assert";

const ROOT = join(import.meta.dirname, "../..");

/** eagerInputs bundles contents (an entry's source) with splitting and names the inputs of the chunks its start loads. */
async function eagerInputs(contents: string): Promise<string[]> {
  const r = await build({
    stdin: { contents, resolveDir: ROOT, loader: "ts", sourcefile: "entry.ts" },
    bundle: true,
    splitting: true,
    platform: "node",
    format: "esm",
    target: "node20",
    conditions: ["xfn-source"],
    write: false,
    metafile: true,
    outdir: join(ROOT, ".tmp/eager-test"),
    external: ["esbuild"],
    logLevel: "silent",
  });
  const outputs: Metafile["outputs"] = r.metafile.outputs;
  const entry = Object.keys(outputs).find((k) => outputs[k]!.entryPoint === "entry.ts")!;
  const eager = new Set([entry]);
  const queue = [entry];
  while (queue.length > 0)
    for (const i of outputs[queue.pop()!]!.imports)
      if (i.kind === "import-statement" && !i.external && outputs[i.path] && !eager.has(i.path)) {
        eager.add(i.path);
        queue.push(i.path);
      }
  return [...eager].flatMap((o) =>
    Object.entries(outputs[o]!.inputs)
      .filter(([, x]) => x.bytesInOutput > 0)
      .map(([f]) => f),
  );
}

const SERVER = [
  `import { main } from "./src/cli/bundled.ts";`,
  `export const start = (argv: string[], script: string) => main(() => import("./functions/hello/index.ts"), "hello", argv, script);`,
].join("\n");

test("a bundle's server thread starts without the function, the handler, protobuf-es or the generated types", async () => {
  const eager = await eagerInputs(SERVER);
  assert.ok(
    eager.some((f) => f.includes("@grpc/grpc-js")),
    "the server itself is there",
  );
  assert.ok(eager.includes("src/server/pool.ts"), eager.join("\n"));
  const loaded = eager.filter((f) =>
    /@bufbuild\/protobuf|src\/gen\/|src\/server\/handler\.ts|src\/wire\/codec\.ts|functions\/hello\//.test(f),
  );
  assert.equal(loaded, []);
});

test("the check can fail: an entry that imports the function module at once loads them", async () => {
  const eager = await eagerInputs(
    `import * as mod from "./functions/hello/index.ts";\n${SERVER.replace('() => import("./functions/hello/index.ts")', "async () => mod")}`,
  );
  assert.ok(eager.some((f) => f.includes("@bufbuild/protobuf")));
  assert.ok(eager.some((f) => f.startsWith("src/gen/")));
});

test.run();
