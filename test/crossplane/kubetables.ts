// Tables of kube's own tests, read at the pinned tag by running those tests
// with one change: an overlay (go test -overlay) hands each test's table to a
// writer of ours (kubetables/*.go.in) instead of its loop, and that writer
// saves the table as JSON, with what kube's own algorithm makes of each case
// where the test checks an algorithm (pruning, defaulting). Nothing of kube's
// is copied into the repository; a table that changes at another tag changes
// here with it. The JSON is kept in the anchors' cache, keyed by the version
// and our writers' text, so a second run builds nothing.
//
// Tables: prune (schema/pruning/algorithm_test.go TestPrune), default
// (schema/defaulting/algorithm_test.go TestDefault), compile and cost
// (schema/cel/compilation_test.go TestCelCompilation, TestCostEstimation),
// ratcheting (test/integration/ratcheting_test.go TestRatchetingFunctionality),
// all of k8s.io/apiextensions-apiserver.
import { createHash } from "node:crypto";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
// @ts-expect-error -- a plain .mjs script without types
import { CACHE, go, goModuleDir, VERSIONS } from "../../scripts/anchors.mjs";

const MODULE = "k8s.io/apiextensions-apiserver";
/** The staging modules of Kubernetes v1.X.Y are v0.X.Y. */
export const EXT_VERSION = (VERSIONS.kubernetes as string).replace(/^v1\./, "v0.");
export const SOURCE = `${MODULE} ${EXT_VERSION}`;
const HERE = join(import.meta.dirname, "kubetables");

/** A table's overlay: the test file, the one change made to it, and the writer added beside it. */
interface Overlay {
  pkg: string;
  file: string;
  test: string;
  writer: string;
  /** [text that must occur exactly once, what replaces it] */
  edits: [string, string][];
}

const LOOP_PRUNE = "\tfor _, tt := range tests {\n\t\tt.Run(tt.name, func(t *testing.T) {\n\t\t\tvar in interface{}";
const OVERLAYS: Overlay[] = [
  {
    pkg: "pkg/apiserver/schema/pruning",
    file: "algorithm_test.go",
    test: "TestPrune",
    writer: "pruning.go.in",
    edits: [
      [
        LOOP_PRUNE,
        "\tkubetablesPrune(func(yield func(string, string, bool, *structuralschema.Structural)) {\n" +
          "\t\tfor _, tt := range tests {\n\t\t\tyield(tt.name, tt.json, tt.isResourceRoot, tt.schema)\n\t\t}\n\t})\n\treturn\n" +
          LOOP_PRUNE,
      ],
    ],
  },
  {
    pkg: "pkg/apiserver/schema/defaulting",
    file: "algorithm_test.go",
    test: "TestDefault",
    writer: "defaulting.go.in",
    edits: [
      [
        LOOP_PRUNE,
        "\tkubetablesDefault(func(yield func(string, string, *structuralschema.Structural)) {\n" +
          "\t\tfor _, tt := range tests {\n\t\t\tyield(tt.name, tt.json, tt.schema)\n\t\t}\n\t})\n\treturn\n" +
          LOOP_PRUNE,
      ],
    ],
  },
  {
    pkg: "pkg/apiserver/schema/cel",
    file: "compilation_test.go",
    test: "TestCelCompilation|TestCostEstimation",
    writer: "cel.go.in",
    edits: [
      [
        "\tfor _, tt := range cases {\n\t\tt.Run(tt.name, func(t *testing.T) {\n\t\t\tenv, err :=",
        "\tkubetablesCompile(func(yield func(string, *schema.Structural, bool)) {\n" +
          "\t\tfor _, tt := range cases {\n\t\t\tyield(tt.name, &tt.input, tt.unmodified)\n\t\t}\n\t})\n\treturn\n" +
          "\tfor _, tt := range cases {\n\t\tt.Run(tt.name, func(t *testing.T) {\n\t\t\tenv, err :=",
      ],
      [
        "\tfor _, testCase := range cases {\n\t\tt.Run(testCase.name, func(t *testing.T) {\n\t\t\t// dynamic maxLength case",
        "\tkubetablesCost(func(yield func(string, func(*int64) *schema.Structural, int64)) {\n" +
          "\t\tfor _, c := range cases {\n\t\t\tyield(c.name, c.schemaGenerator, c.setMaxElements)\n\t\t}\n\t})\n\treturn\n" +
          "\tfor _, testCase := range cases {\n\t\tt.Run(testCase.name, func(t *testing.T) {\n\t\t\t// dynamic maxLength case",
      ],
    ],
  },
  {
    pkg: "test/integration",
    file: "ratcheting_test.go",
    test: "TestRatchetingFunctionality",
    writer: "ratcheting.go.in",
    edits: [
      ["func runTests(t *testing.T, cases []ratchetingTestCase) {", "func runTestsUpstream(t *testing.T, cases []ratchetingTestCase) {"],
    ],
  },
];

const TABLES = ["prune", "default", "compile", "cost", "ratcheting"] as const;
export type TableName = (typeof TABLES)[number];

/** packageOf is the package clause of a Go file's text. */
const packageOf = (text: string) => /^package (\w+)/m.exec(text)?.[1] ?? "";

/**
 * kubeTables answers the tables, running kube's tests under the overlay once
 * per version (a cold build of the packages takes minutes; then seconds).
 */
export function kubeTables(): Record<TableName, unknown[]> {
  const writers = readdirSync(HERE)
    .filter((f) => f.endsWith(".go.in"))
    .sort();
  const hash = createHash("sha256");
  for (const f of writers) hash.update(f).update(readFileSync(join(HERE, f)));
  hash.update(JSON.stringify(OVERLAYS));
  const root = join(CACHE, "kubetables");
  const out = join(root, `${EXT_VERSION}-${hash.digest("hex").slice(0, 12)}`);
  if (!existsSync(join(out, "done"))) dump(root, out);
  return Object.fromEntries(TABLES.map((t) => [t, JSON.parse(readFileSync(join(out, `${t}.json`), "utf8")) as unknown[]])) as Record<
    TableName,
    unknown[]
  >;
}

function dump(root: string, out: string): void {
  // The go command refuses an overlay of the module cache: the module is
  // copied out once and the wrapper module replaces it with the copy.
  // Two runs at once each build in a folder of their own and the first to finish keeps its result.
  const mod = join(root, `module-${EXT_VERSION}`);
  const src = join(mod, "ext");
  const pkgs = OVERLAYS.map((o) => `${MODULE}/${o.pkg}`);
  if (!existsSync(join(mod, "go.sum"))) {
    const building = `${mod}.part-${process.pid}`;
    rmSync(building, { recursive: true, force: true });
    mkdirSync(building, { recursive: true });
    cpSync(goModuleDir(MODULE, EXT_VERSION) as string, join(building, "ext"), { recursive: true });
    writeFileSync(
      join(building, "go.mod"),
      `module xfn.local/kubetables\n\ngo 1.26\n\nrequire ${MODULE} ${EXT_VERSION}\n\nreplace ${MODULE} => ./ext\n`,
    );
    // -t: the test dependencies of the packages whose tests run here.
    go(["get", "-t", ...pkgs.map((p) => `${p}@${EXT_VERSION}`)], building, "kube's test tables");
    settle(building, mod, "go.sum");
  }
  const work = `${out}.part-${process.pid}`;
  rmSync(work, { recursive: true, force: true });
  mkdirSync(join(work, "overlay"), { recursive: true });
  const replace: Record<string, string> = {};
  const common = readFileSync(join(HERE, "write.go.in"), "utf8");
  for (const [i, o] of OVERLAYS.entries()) {
    const file = join(src, o.pkg, o.file);
    let text = readFileSync(file, "utf8");
    for (const [from, to] of o.edits) {
      const n = text.split(from).length - 1;
      if (n !== 1)
        throw new Error(`kube's ${o.pkg}/${o.file} at ${EXT_VERSION}: expected one ${JSON.stringify(from.slice(0, 60))}, found ${n}`);
      text = text.replace(from, () => to);
    }
    const pkg = packageOf(text);
    const put = (name: string, body: string, at: string) => {
      const p = join(work, "overlay", `${i}-${name}`);
      writeFileSync(p, body);
      replace[join(src, o.pkg, at)] = p;
    };
    put(o.file, text, o.file);
    put("write.go", `package ${pkg}\n\n${common}`, "zz_kubetables_write_test.go");
    put("table.go", `package ${pkg}\n\n${readFileSync(join(HERE, o.writer), "utf8")}`, "zz_kubetables_test.go");
  }
  writeFileSync(join(work, "overlay.json"), JSON.stringify({ Replace: replace }));
  const run = `^(${OVERLAYS.map((o) => o.test).join("|")})$`;
  go(["test", "-overlay", join(work, "overlay.json"), "-vet=off", "-count=1", "-run", run, ...pkgs], mod, "kube's test tables", {
    XFN_KUBETABLES_OUT: work,
  });
  for (const t of TABLES) if (!existsSync(join(work, `${t}.json`))) throw new Error(`kube's test tables: the ${t} table was not written`);
  writeFileSync(join(work, "done"), "");
  settle(work, out, "done");
}

/** settle moves a finished folder into place, unless another run's finished one (holding marker) got there first. */
function settle(from: string, to: string, marker: string): void {
  if (!existsSync(join(to, marker))) {
    rmSync(to, { recursive: true, force: true });
    try {
      renameSync(from, to);
      return;
    } catch (err) {
      if (!existsSync(join(to, marker))) throw err;
    }
  }
  rmSync(from, { recursive: true, force: true });
}
