// The proto we wrote must say exactly what Crossplane's contract says, and the
// committed generated code must be what buf generates from it today.
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { file_fn_v1_run_function, FunctionRunnerService } from "../../src/gen/fn/v1/run_function_pb.js";
import {
  file_fn_v1beta1_zz_generated_run_function,
  FunctionRunnerService as BetaService,
} from "../../src/gen/fn/v1beta1/zz_generated_run_function_pb.js";
import { describeFile, parseContract, type Contract } from "../support/contract.js";
// @ts-expect-error: a plain .mjs script without type declarations.
import { beta, betaPath, v1Path } from "../../scripts/generate.mjs";

const root = join(import.meta.dirname, "../..");
const fixture = JSON.parse(readFileSync(join(root, "test/fixtures/wire-contract.json"), "utf8")) as Contract;

const Wire = suite("wire contract");

const files = {
  v1: { file: file_fn_v1_run_function, pkg: "apiextensions.fn.proto.v1" },
  v1beta1: { file: file_fn_v1beta1_zz_generated_run_function, pkg: "apiextensions.fn.proto.v1beta1" },
};

for (const [version, { file, pkg }] of Object.entries(files)) {
  Wire(`${version}: package is ${pkg}`, () => {
    assert.is(file.proto.package, pkg);
    assert.is(file.proto.syntax, "proto3");
  });

  // One case per message and enum, so a failure names the one that drifted.
  const got = describeFile(file);
  for (const [name, fields] of Object.entries(fixture.messages)) {
    Wire(`${version}: message ${name} matches the contract table`, () => {
      assert.equal(got.messages[name], fields, `${version} ${name}: fields differ from the contract`);
    });
  }
  for (const [name, values] of Object.entries(fixture.enums)) {
    Wire(`${version}: enum ${name} matches the contract table`, () => {
      assert.equal(got.enums[name], values);
    });
  }
  Wire(`${version}: declares nothing the contract does not`, () => {
    assert.equal(Object.keys(got.messages).sort(), Object.keys(fixture.messages).sort());
    assert.equal(Object.keys(got.enums).sort(), Object.keys(fixture.enums).sort());
  });
}

Wire("the RPC method paths are the ones Crossplane dials", () => {
  assert.is(FunctionRunnerService.typeName, "apiextensions.fn.proto.v1.FunctionRunnerService");
  assert.is(BetaService.typeName, "apiextensions.fn.proto.v1beta1.FunctionRunnerService");
  const m = FunctionRunnerService.method.runFunction;
  assert.is(m.name, "RunFunction");
  assert.is(m.methodKind, "unary");
});

Wire("the describer notices a drifted field (the check can fail)", () => {
  const got = describeFile(file_fn_v1_run_function);
  const drifted = structuredClone(fixture);
  drifted.messages["Result"]![2]!.number = 30;
  assert.not.equal(got.messages["Result"], drifted.messages["Result"]);
});

const contractDoc = join(root, "../shared/docs/wire-contract.md");
Wire("the committed contract fixture still matches shared/docs/wire-contract.md", () => {
  // CI clones the repo with shared/ beside it; a bare clone elsewhere has only the fixture.
  if (!existsSync(contractDoc)) return;
  assert.equal(parseContract(readFileSync(contractDoc, "utf8")), fixture);
});

// ---

const Gen = suite("generated code");

Gen("the v1beta1 proto is the generated twin of v1", () => {
  assert.fixture(readFileSync(betaPath, "utf8"), beta(readFileSync(v1Path, "utf8")));
});

Gen("beta() refuses a proto whose package line it cannot find", () => {
  assert.throws(() => beta('syntax = "proto3";\npackage other;\n'), /cannot derive v1beta1/);
});

function listFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? listFiles(p) : [p];
  });
}

Gen("src/gen is exactly what buf generate writes today", () => {
  const out = mkdtempSync(join(tmpdir(), "xfn-gen-"));
  try {
    execFileSync(process.execPath, [join(root, "scripts/generate.mjs"), "--out", out], { cwd: root, stdio: "pipe" });
    const fresh = join(out, "src/gen");
    const committed = join(root, "src/gen");
    const rel = (base: string) =>
      listFiles(base)
        .map((f) => relative(base, f))
        .sort();
    assert.equal(rel(committed), rel(fresh), "generated file list differs: run npm run generate");
    for (const f of rel(fresh)) {
      assert.fixture(readFileSync(join(committed, f), "utf8"), readFileSync(join(fresh, f), "utf8"), `${f} is stale: run npm run generate`);
    }
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
});

Gen("buf lint passes on our protos", () => {
  // Throws, with buf's findings in the message, on any lint failure.
  execFileSync(join(root, "node_modules/.bin/buf"), ["lint"], { cwd: root, stdio: "pipe" });
});

Wire.run();
Gen.run();
