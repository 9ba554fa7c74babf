// module/compile.ts: a TypeScript function module compiled once for every
// pool worker behaves as it does under tsx (names, folders, packages, stack
// traces), and its compile errors name the file, line and column.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { RunFunctionRequestSchema, RunFunctionResponseSchema } from "../../src/gen/fn/v1/run_function_pb.js";
import { compileModule, nodeConditions, sweepCompiled, workerScript } from "../../src/module/compile.js";
import { startPool } from "../../src/server/pool.js";
import { memoryLog } from "../support/log.js";
import { request } from "../support/requests.js";
import { ROOT } from "../support/spawn.js";

const C = suite("module: compiled once for every worker");

let dir: string;
C.before(() => {
  dir = mkdtempSync(join(tmpdir(), "xfn-compile-"));
});
C.after(() => rmSync(dir, { recursive: true, force: true }));

const write = (rel: string, text: string) => {
  const f = join(dir, rel);
  mkdirSync(dirname(f), { recursive: true });
  writeFileSync(f, text);
  return f;
};
const compiled: { dispose(): void }[] = [];
C.after.each(() => compiled.splice(0).forEach((c) => c.dispose()));
const load = async (file: string, conditions?: string[]) => {
  const c = await compileModule(file, conditions);
  compiled.push(c);
  return { ...c, mod: (await import(c.url)) as Record<string, (...a: unknown[]) => unknown>, code: readFileSync(new URL(c.url), "utf8") };
};

C("nodeConditions reads --conditions and -C, on the command line and in NODE_OPTIONS", () => {
  assert.equal(nodeConditions(["--conditions=a", "-C", "b", "--import", "tsx", "--conditions", "c", "-C=d"], "--conditions=e -C f"), [
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
  ]);
  assert.equal(nodeConditions([], ""), []);
});

C("each source file keeps its own import.meta and __dirname; relative imports are bundled", async () => {
  write("names/lib/helper.ts", `export const where = (): string[] => [import.meta.url, import.meta.dirname, __filename];\n`);
  const entry = write(
    "names/index.ts",
    `import { where } from "./lib/helper.js";\nexport default (): unknown => ({ mine: [import.meta.url, import.meta.filename, __dirname], helper: where() });\n`,
  );
  const { mod } = await load(entry);
  const helper = join(dir, "names/lib/helper.ts");
  assert.equal(mod["default"]!(), {
    mine: [pathToFileURL(entry).href, entry, join(dir, "names")],
    helper: [pathToFileURL(helper).href, join(dir, "names/lib"), helper],
  });
});

C("require works, from the module's folder", async () => {
  const entry = write("req/index.ts", `const path = require("node:path");\nexport default (): string => path.sep;\n`);
  const { mod } = await load(entry);
  assert.is(mod["default"]!(), "/");
});

C("stack traces name the source file and line", async () => {
  const entry = write(
    "stack/index.ts",
    [
      "interface Shape {",
      "  width: number;",
      "}",
      "export default (s: Shape): number => {",
      '  throw new Error("boom " + s.width);',
      "};",
      "",
    ].join("\n"),
  );
  const before = process.sourceMapsEnabled;
  process.setSourceMapsEnabled(true);
  try {
    const { mod } = await load(entry);
    try {
      mod["default"]!({ width: 3 });
      assert.unreachable("it throws");
    } catch (err) {
      assert.match((err as Error).message, "boom 3");
      assert.ok((err as Error).stack!.includes(`${entry}:5:`), (err as Error).stack);
    }
  } finally {
    process.setSourceMapsEnabled(before);
  }
});

C("a compile error names the file, line and column", async () => {
  const entry = write("bad/index.ts", `export default () => {\n  const x = ;\n};\n`);
  try {
    await compileModule(entry);
    assert.unreachable("it does not compile");
  } catch (err) {
    assert.match((err as Error).message, `${entry}:2:13: Unexpected ";"`);
  }
  const missing = write("missing/index.ts", `import { x } from "./nowhere.js";\nexport default () => x;\n`);
  try {
    await compileModule(missing);
    assert.unreachable("it does not compile");
  } catch (err) {
    assert.match((err as Error).message, `${missing}:1:19: Could not resolve "./nowhere.js"`);
  }
});

C("packages stay imports of the file Node would load, with Node's conditions; a TypeScript one says so", async () => {
  write(
    "pkg/node_modules/dual/package.json",
    JSON.stringify({
      name: "dual",
      type: "module",
      exports: { ".": { special: "./special.ts", import: "./esm.js", default: "./cjs.cjs" } },
    }),
  );
  write("pkg/node_modules/dual/esm.js", `export const which = "esm";\n`);
  write("pkg/node_modules/dual/special.ts", `export const which: string = "special";\n`);
  write("pkg/node_modules/dual/cjs.cjs", `exports.which = "cjs";\n`);
  const entry = write("pkg/index.ts", `import { which } from "dual";\nexport default (): string => which;\n`);
  const plain = await load(entry);
  assert.is(plain.mod["default"]!(), "esm");
  assert.is(plain.needsTypeScript, false);
  assert.ok(plain.code.includes(pathToFileURL(join(dir, "pkg/node_modules/dual/esm.js")).href), "the import is pinned to the file");
  const special = await load(entry, ["special"]);
  assert.is(special.needsTypeScript, true);
  assert.ok(special.code.includes(pathToFileURL(join(dir, "pkg/node_modules/dual/special.ts")).href));
});

C("against the worker runtime: the module imports xfn-runtime as lib/worker-runtime.mjs, and workers start from it", async () => {
  // In the repository, where "xfn-runtime" resolves to this package's own lib/index.js.
  const folder = join(ROOT, ".tmp", `worker-script-${process.pid}`);
  mkdirSync(folder, { recursive: true });
  const entry = join(folder, "index.ts");
  writeFileSync(
    entry,
    [
      'import { response, type RunFunctionRequest } from "xfn-runtime";',
      "export default (req: RunFunctionRequest) => {",
      "  const rsp = response.to(req);",
      '  response.normal(rsp, "from a worker script");',
      "  return rsp;",
      "};",
      "",
    ].join("\n"),
  );
  const worker = workerScript("fixture");
  assert.ok(worker, "lib/worker-runtime.mjs is built (npm run build)");
  const c = await compileModule(entry, [], { worker });
  compiled.push(c);
  try {
    assert.ok(c.script);
    const code = readFileSync(new URL(c.url), "utf8");
    assert.ok(code.includes(JSON.stringify(worker.runtime)), "xfn-runtime is imported as the runtime bundle");
    assert.not.ok(code.includes("node_modules/@grpc/grpc-js"), "grpc-js is in the runtime bundle, not in each module");
    // One worker started from a compiled script, as xfn serve starts its pool from it.
    const poolOf = (script: string) =>
      startPool(
        {
          workers: 1,
          script: new URL(script),
          workerData: { xfnWorker: true, module: entry, label: "fixture", debug: false, maxResponseBytes: 4 << 20 },
          maxConcurrency: 1,
          maxQueue: 1,
          timeoutMs: 10_000,
        },
        memoryLog().log,
      );
    const pool = await poolOf(c.script!);
    try {
      const r = await pool.handle(toBinary(RunFunctionRequestSchema, request({ meta: { tag: "w" } })), {
        version: "v1",
        deadline: Date.now() + 10_000,
      });
      assert.ok("ok" in r, JSON.stringify(r));
      const rsp = fromBinary(RunFunctionResponseSchema, (r as { ok: Uint8Array }).ok);
      assert.equal([rsp.meta?.tag, rsp.results[0]?.message], ["w", "from a worker script"]);
    } finally {
      await pool.close();
    }
    // A module that throws as it loads fails the worker's start with loadFunction's words, and where (source-mapped).
    writeFileSync(entry, 'throw new Error("not today");\nexport default () => ({});\n');
    const bad = await compileModule(entry, [], { worker });
    compiled.push(bad);
    try {
      await poolOf(bad.script!);
      assert.unreachable("started");
    } catch (err) {
      assert.match((err as Error).message, /^cannot load function module fixture: not today \(at \S*index\.ts:1:7\)$/);
    }
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
});

C("folders left by a server that was killed (its owner.pid names no process) are swept by the next compile", async () => {
  const tmp = mkdtempSync(join(tmpdir(), "xfn-sweep-"));
  try {
    const dead = spawnSync(process.execPath, ["-e", ""]).pid!; // ended: its pid names no process now (unless reused)
    const folder = (name: string, owner?: string) => {
      mkdirSync(join(tmp, name));
      if (owner !== undefined) writeFileSync(join(tmp, name, "owner.pid"), owner);
    };
    folder("xfn-compiled-dead", String(dead));
    folder("xfn-compiled-mine", String(process.pid));
    folder("xfn-compiled-parent", String(process.ppid));
    folder("xfn-compiled-unowned");
    folder("other-dead", String(dead));
    sweepCompiled(tmp);
    assert.equal(readdirSync(tmp).sort(), ["other-dead", "xfn-compiled-mine", "xfn-compiled-parent", "xfn-compiled-unowned"]);
    // compileModule names its own folder's owner.
    const c = await load(write("owned/index.ts", "export default () => 1;\n"));
    assert.is(readFileSync(join(dirname(fileURLToPath(c.url)), "owner.pid"), "utf8"), String(process.pid));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

C("the compiled file lives in a folder of its own, which dispose removes", async () => {
  const entry = write("gone/index.ts", `export default (): number => 1;\n`);
  const c = await compileModule(entry);
  const file = new URL(c.url);
  assert.ok(existsSync(file));
  assert.ok(!file.pathname.startsWith(join(dir, "gone")), "nothing is written beside the module");
  c.dispose();
  assert.not.ok(existsSync(dirname(file.pathname)));
});

C.run();
