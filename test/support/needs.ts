// Tests that need a tool beside Node (Go, kubectl, chromium, podman) say so
// here, and run only where it is installed. Where it is missing, each such
// test is skipped and the skip recorded, so the runner (scripts/test.mjs)
// closes with one line per tool naming what was skipped and the Debian
// packages that bring it. With XFN_TEST_REQUIRE_TOOLS=1 (set by .ci/run) a
// missing tool is no skip: each test that needs it fails, saying what is
// missing.
//
//   const G = needs(suite("cli: against a Go function"), "go");
//   G.before(...);  G("calls it", ...);  G.run();
//
// A gated suite whose tool is missing runs none of its hooks. To gate one test
// of a suite, register it through needs(S, tool) and keep the hooks on S.
import { spawnSync } from "node:child_process";
import { appendFileSync, existsSync, statSync } from "node:fs";
import { delimiter, join, relative } from "node:path";
import type { Test } from "uvu";
import { ROOT } from "./spawn.js";

export type Tool = "go" | "go1.26" | "kubectl" | "chromium" | "podman" | "skopeo" | "umoci" | "rsvg" | "imagemagick";

interface ToolInfo {
  /** The Debian packages that bring it, as apt-get takes them. */
  packages: string;
  /** How to get it, where no Debian package brings it (then packages is empty). */
  install?: string;
  /** Where the tool is, or why it is not usable; undefined when found. */
  missing(): string | undefined;
}

/** GOPATH is where Debian's golang-google-grpc-dev and golang-google-protobuf-dev put their sources. */
export const GOPATH = process.env["XFN_TEST_GOPATH"] ?? "/usr/share/gocode";

/** onPath finds an executable on PATH, as a shell would, without running it. */
export function onPath(command: string): string | undefined {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (!dir) continue;
    const p = join(dir, command);
    try {
      if (statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

const commandMissing = (command: string) => () => (onPath(command) ? undefined : `no ${command} on PATH`);

export const TOOLS: Record<Tool, ToolInfo> = {
  go: {
    packages: "golang-go golang-google-grpc-dev golang-google-protobuf-dev",
    missing: () => {
      if (!onPath("go")) return "no go on PATH";
      for (const src of ["google.golang.org/grpc", "google.golang.org/protobuf"])
        if (!existsSync(join(GOPATH, "src", src))) return `no ${src} sources in ${GOPATH}`;
      return undefined;
    },
  },
  // The real anchors (scripts/anchors.mjs) need Go 1.26, which Debian's golang-go is older than.
  "go1.26": {
    packages: "",
    install: "Go 1.26 at /usr/local/go (Debian's golang-go is older)",
    missing: () => {
      // XFN_TEST_GO126: another go command to ask (the runner's own tests point it at none).
      const go = process.env["XFN_TEST_GO126"] ?? "/usr/local/go/bin/go";
      const r = spawnSync(go, ["env", "GOVERSION"], { encoding: "utf8" });
      if (r.status !== 0) return `no Go at ${go}`;
      const m = /^go(\d+)\.(\d+)/.exec(r.stdout.trim());
      return m && (Number(m[1]) > 1 || Number(m[2]) >= 26) ? undefined : `${r.stdout.trim()} at /usr/local/go, older than 1.26`;
    },
  },
  kubectl: { packages: "kubernetes-client", missing: commandMissing("kubectl") },
  chromium: { packages: "chromium", missing: commandMissing("chromium") },
  // Podman runs containers with runc here (test/support/podman.ts): crun fails on these machines' cgroups.
  podman: {
    packages: "podman runc uidmap",
    missing: () => commandMissing("podman")() ?? (onPath("runc") ? undefined : "no runc on PATH (podman runs containers with it here)"),
  },
  skopeo: { packages: "skopeo", missing: commandMissing("skopeo") },
  umoci: { packages: "umoci", missing: commandMissing("umoci") },
  rsvg: { packages: "librsvg2-bin", missing: commandMissing("rsvg-convert") },
  imagemagick: {
    packages: "imagemagick",
    // Its convert, not another program of that name.
    missing: () => {
      if (!onPath("convert")) return "no convert on PATH";
      const v = spawnSync("convert", ["-version"], { encoding: "utf8" });
      return /^Version: ImageMagick/m.test(v.stdout ?? "") ? undefined : "convert on PATH is not ImageMagick's";
    },
  },
};

const seen = new Map<Tool, string | undefined>();

/** whyMissing says why a tool cannot be used here, or undefined when it can. */
export function whyMissing(tool: Tool): string | undefined {
  if (!seen.has(tool)) seen.set(tool, TOOLS[tool].missing());
  return seen.get(tool);
}

/** has says whether every named tool is usable here. */
export function has(...tools: Tool[]): boolean {
  return tools.every((t) => whyMissing(t) === undefined);
}

/** REQUIRE_TOOLS: under it a missing tool fails the tests that need it (CI). */
export const REQUIRE_TOOLS = process.env["XFN_TEST_REQUIRE_TOOLS"] === "1";

/** installHint is the command that brings the tools. */
export const installHint = (tools: Tool[]) =>
  [
    ...tools.filter((t) => TOOLS[t].install).map((t) => TOOLS[t].install!),
    ...(tools.some((t) => !TOOLS[t].install)
      ? [`apt-get install ${tools.flatMap((t) => (TOOLS[t].install ? [] : [TOOLS[t].packages])).join(" ")}`]
      : []),
  ].join("; ");

/** callerFile is the test file that registers a test: the first *.test.ts frame of the stack, relative to the repository. */
function callerFile(): string {
  const frame = (new Error().stack ?? "").split("\n").find((l) => /\.test\.ts:\d+/.test(l)) ?? "";
  const m = /(?:file:\/\/)?([^\s()]+\.test\.ts):\d+/.exec(frame);
  return m ? relative(ROOT, m[1]!) : "?";
}

/** recordSkip tells the runner that a test was skipped for want of tools (XFN_TEST_SKIP_LOG, one JSON line each). */
function recordSkip(tools: Tool[], test: string): void {
  const log = process.env["XFN_TEST_SKIP_LOG"];
  const file = callerFile();
  if (log)
    appendFileSync(
      log,
      JSON.stringify({ tools, packages: tools.map((t) => TOOLS[t].packages), hints: tools.map((t) => installHint([t])), file, test }) +
        "\n",
    );
  else process.stderr.write(`skipped (needs ${tools.join(", ")}: ${installHint(tools)}): ${file}: ${test}\n`);
}

/**
 * loudHooks makes test's before and after hooks print what they throw: uvu
 * returns from a `finally` around them, which discards the error, so a
 * suite whose set-up failed showed only "(0 / N)" and no word why.
 */
function loudHooks<T>(test: Test<T>): Test<T> {
  type Hook = Parameters<Test<T>["before"]>[0];
  const loud =
    (which: string, fn: Hook): Hook =>
    async (ctx) => {
      try {
        await fn(ctx);
      } catch (err) {
        process.stderr.write(`\n  the suite's ${which} hook failed: ${(err as Error).stack ?? String(err)}\n`);
        throw err;
      }
    };
  const before = test.before;
  const after = test.after;
  test.before = Object.assign((fn: Hook) => before(loud("before", fn)), { each: before.each });
  test.after = Object.assign((fn: Hook) => after(loud("after", fn)), { each: after.each });
  return test;
}

/**
 * needs returns a suite that registers its tests in test only where every
 * named tool is usable. Where one is missing, each test is skipped and
 * recorded (or, under XFN_TEST_REQUIRE_TOOLS=1, fails naming what is missing)
 * and the hooks given to the returned suite never run. run() runs test.
 */
export function needs<T>(test: Test<T>, ...tools: Tool[]): Test<T> {
  const missing = tools.filter((t) => whyMissing(t) !== undefined);
  if (missing.length === 0) return loudHooks(test);
  const why = missing.map((t) => `${t} (${whyMissing(t)})`).join(", ");
  const gated = ((name: string) => {
    if (REQUIRE_TOOLS) {
      test(name, () => {
        throw new Error(`this test needs ${why}: ${installHint(missing)}; XFN_TEST_REQUIRE_TOOLS=1 does not let it skip`);
      });
    } else {
      recordSkip(missing, name);
      test.skip(name);
    }
  }) as unknown as Test<T>;
  const noHook = Object.assign(() => {}, { each: () => {} });
  gated.before = noHook as Test<T>["before"];
  gated.after = noHook as Test<T>["after"];
  gated.only = test.only;
  gated.skip = test.skip;
  gated.run = () => test.run();
  return gated;
}
