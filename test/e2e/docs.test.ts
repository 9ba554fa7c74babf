// The documentation works as written: every shell block in README.md and
// docs/*.md runs, in order, from the repository's root, with the files the
// docs tell you to create written first; what they promise to print is
// checked. A block no test can run here says why, and only a few reasons are
// allowed. Also: adding a function folder never breaks the suite.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { DEFAULT_PORT_LOCK, withLock } from "../support/lock.js";
import { needs, type Tool } from "../support/needs.js";
import { inGroup } from "../support/procs.js";
import { ROOT } from "../support/spawn.js";

const D = suite("docs");

type Block =
  | { kind: "file"; path: string; text: string }
  | { kind: "sh"; text: string; line: number }
  | { kind: "skip"; reason: string; line: number }
  | { kind: "runBy"; files: string[]; line: number };

interface Doc {
  file: string;
  blocks: Block[];
  expects: RegExp[];
}

const ALLOWED_SKIPS = [/^xfn-runtime is not on the npm registry yet/];

/** parseDoc reads the fenced blocks of a Markdown page and the directives around them. */
function parseDoc(file: string): Doc {
  return parseMarkdown(file, readFileSync(join(ROOT, file), "utf8"));
}

function parseMarkdown(file: string, markdown: string): Doc {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  const expects: RegExp[] = [];
  let directive: string | undefined;
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    const expect = /^<!-- expect: (.*) -->$/.exec(l);
    if (expect) {
      expects.push(new RegExp(expect[1]!, "m"));
      continue;
    }
    const d = /^<!-- ((?:file|not run|run by): .*) -->$/.exec(l);
    if (d) {
      // Right after a shell block, "not run" and "run by" speak of that block.
      const last = blocks.at(-1);
      if (last?.kind === "sh" && lines[i - 1] === "```" && !d[1]!.startsWith("file: ")) {
        blocks[blocks.length - 1] = d[1]!.startsWith("not run: ")
          ? { kind: "skip", reason: d[1]!.slice(9), line: last.line }
          : { kind: "runBy", files: d[1]!.slice(8).split(" and "), line: last.line };
        continue;
      }
      directive = d[1];
      continue;
    }
    const fence = /^```(\w*)/.exec(l);
    if (!fence) {
      if (l.trim() !== "") directive = undefined;
      continue;
    }
    const start = i + 1;
    let end = start;
    while (end < lines.length && lines[end] !== "```") end++;
    const text = lines.slice(start, end).join("\n") + "\n";
    const lang = fence[1];
    if (directive?.startsWith("file: ")) blocks.push({ kind: "file", path: directive.slice(6), text });
    else if (lang === "sh" && directive?.startsWith("not run: ")) blocks.push({ kind: "skip", reason: directive.slice(9), line: start });
    else if (lang === "sh" && directive?.startsWith("run by: "))
      blocks.push({ kind: "runBy", files: directive.slice(8).split(" and "), line: start });
    else if (lang === "sh") blocks.push({ kind: "sh", text, line: start });
    directive = undefined;
    i = end;
  }
  return { file, blocks, expects };
}

const docs = [
  "README.md",
  ...readdirSync(join(ROOT, "docs"))
    .filter((f) => f.endsWith(".md"))
    .sort()
    .map((f) => `docs/${f}`),
  ...readdirSync(join(ROOT, "functions"))
    .filter((f) => existsSync(join(ROOT, "functions", f, "README.md")))
    .sort()
    .map((f) => `functions/${f}/README.md`),
];

/** LEFT_GRACE_MS is how long what a page started may take to end after the page's last command. */
const LEFT_GRACE_MS = 3_000;

/**
 * runScript runs a doc's blocks as one bash script in its own process group.
 * What the script left running a moment after it ended (a host started with
 * `&` and never stopped, or stopped through npx, which passes no signal on)
 * is named in left, then stopped.
 */
function runScript(script: string, timeoutMs: number): Promise<{ code: number | null; out: string; left: string[] }> {
  // What a page makes in the temp folder (mktemp -d) goes into one of its own, removed after.
  const tmp = mkdtempSync(join(tmpdir(), "xfn-docs-"));
  // As in a user's shell: not under npm (the suite runs under `npm run`, whose variables a command would inherit).
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("npm_")));
  return new Promise((resolve) => {
    const child = spawn("bash", ["-c", script], {
      cwd: ROOT,
      detached: true,
      env: { ...env, npm_config_update_notifier: "false", TMPDIR: tmp },
    });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const killGroup = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // the group is gone
      }
    };
    const t = setTimeout(() => {
      out += `\n(docs test: killed after ${timeoutMs / 1000} s)`;
      killGroup("SIGKILL");
    }, timeoutMs);
    child.on("exit", async (code) => {
      clearTimeout(t);
      const until = Date.now() + LEFT_GRACE_MS;
      let left = inGroup(child.pid!);
      while (left.length > 0 && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 100));
        left = inGroup(child.pid!);
      }
      killGroup("SIGTERM");
      setTimeout(() => {
        killGroup("SIGKILL");
        rmSync(tmp, { recursive: true, force: true });
        resolve({ code, out, left });
      }, 500);
    });
  });
}

D("the parser: files, runnable blocks, and directives before or right after a block", () => {
  const md = [
    "<!-- file: a/b.ts -->",
    "```ts",
    "code",
    "```",
    "```sh",
    "echo run",
    "```",
    "<!-- run by: x.ts and y.ts -->",
    "<!-- not run: xfn-runtime is not on the npm registry yet -->",
    "```sh",
    "docker build .",
    "```",
    "```yaml",
    "k: v",
    "```",
    "<!-- expect: ^run$ -->",
    "```sh",
    "echo last",
    "```",
  ].join("\n");
  const doc = parseMarkdown("t.md", md);
  assert.equal(doc.blocks, [
    { kind: "file", path: "a/b.ts", text: "code\n" },
    { kind: "runBy", files: ["x.ts", "y.ts"], line: 5 },
    { kind: "skip", reason: "xfn-runtime is not on the npm registry yet", line: 10 },
    { kind: "sh", text: "echo last\n", line: 17 },
  ]);
  assert.equal(doc.expects, [/^run$/m]);
});

D("every shell block is run here, or says which test runs it, or why none can", () => {
  for (const doc of docs.map(parseDoc)) {
    for (const b of doc.blocks) {
      if (b.kind === "skip")
        assert.ok(
          ALLOWED_SKIPS.some((r) => r.test(b.reason)),
          `${doc.file}:${b.line}: "${b.reason}" is not a reason to leave a block untested`,
        );
      if (b.kind === "runBy")
        for (const f of b.files) assert.ok(existsSync(join(ROOT, f)), `${doc.file}:${b.line}: run by ${f}, which does not exist`);
    }
  }
  const skipped = docs.flatMap((f) => parseDoc(f).blocks.filter((b) => b.kind === "skip"));
  assert.ok(skipped.length <= 3, `only a few blocks may go untested, found ${skipped.length}`);
});

D("README's first lines give the two commands, and .ci/run runs the same install and both tiers' commands, skipping nothing", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  assert.match(readme, /^# xfn\n\n```sh\n/);
  const block = /```sh\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
  const [setup, tests] = block
    .trim()
    .split("\n")
    .map((l) => l.split("#")[0]!.trim());
  assert.is(setup, "npm ci && npx xfn serve functions/hello --insecure");
  assert.is(tests, "npm test");
  const ci = readFileSync(join(ROOT, ".ci/run"), "utf8");
  assert.match(ci, /^npm ci/m);
  assert.match(ci, /^npm test$/m);
  // The end-to-end tier: named in the README, run by CI after the default one, with no test let skip.
  assert.match(readme, /`npm run test:e2e`/);
  assert.match(ci, /^npm test\nnpm run test:e2e$/m);
  assert.match(ci, /^export XFN_TEST_REQUIRE_TOOLS=1$/m);
});

/** toolsOf names the tools beside Node that a page's commands run. */
function toolsOf(doc: Doc): Tool[] {
  const text = doc.blocks.map((b) => (b.kind === "sh" ? b.text : "")).join("\n");
  return (["kubectl", "podman", "go", "chromium"] as const).filter((t) => new RegExp(`(^|[\\s;&|(\`$])${t}\\s`, "m").test(text));
}

for (const file of docs) {
  const doc = parseDoc(file);
  if (!doc.blocks.some((b) => b.kind === "sh")) continue;
  needs(D, ...toolsOf(doc))(`${file}: its commands succeed as written`, async () => {
    const written = doc.blocks.filter((b): b is Extract<Block, { kind: "file" }> => b.kind === "file").map((b) => b.path);
    const script = ["set -euo pipefail"];
    for (const b of doc.blocks) {
      if (b.kind === "file") script.push(`mkdir -p "$(dirname '${b.path}')"\ncat > '${b.path}' <<'XFN_DOCS_EOF'\n${b.text}XFN_DOCS_EOF`);
      if (b.kind === "sh") script.push(b.text);
    }
    try {
      // A page that serves on the default port (the README, the tutorial) takes turns for it with
      // every other test run on this machine.
      const text = script.join("\n");
      const usesDefaultPort = /\b9443\b/.test(text) || /xfn serve (?![^\n]*--address)/.test(text);
      const r = usesDefaultPort ? await withLock(DEFAULT_PORT_LOCK, () => runScript(text, 300_000)) : await runScript(text, 300_000);
      assert.is(r.code, 0, `${file} failed:\n${r.out}`);
      assert.equal(r.left, [], `${file}: its commands left these running:\n${r.left.join("\n")}`);
      for (const e of doc.expects) assert.match(r.out, e, `${file}: the output does not show ${e}:\n${r.out}`);
    } finally {
      for (const p of written) rmSync(join(ROOT, p), { force: true });
      for (const p of written) {
        // The folders a page's files went into, if the page left them empty.
        const d = dirname(join(ROOT, p));
        if (d !== ROOT && existsSync(d) && readdirSync(d).length === 0) rmSync(d, { recursive: true });
      }
    }
  });
}

D("adding a function folder never breaks the suite: the package checks pass with it", () => {
  const name = `zz-added-${process.pid}`;
  const dir = join(ROOT, "functions", name);
  const tutorial = parseDoc("docs/tutorial.md").blocks.find((b) => b.kind === "file" && b.path.endsWith("index.ts"));
  assert.ok(tutorial && tutorial.kind === "file");
  mkdirSync(dir, { recursive: true });
  try {
    writeFileSync(join(dir, "index.ts"), tutorial.text);
    const out = execFileSync(process.execPath, [join(ROOT, "scripts/test.mjs"), "--e2e", "packages"], {
      cwd: ROOT,
      encoding: "utf8",
      stdio: "pipe",
    });
    assert.match(out, /^\d+ passed, 0 failed$/m);
    assert.ok(existsSync(join(ROOT, "dist/functions", name, "function.mjs")), "the added function was bundled");
  } finally {
    rmSync(dir, { recursive: true, force: true });
    rmSync(join(ROOT, "dist/functions", name), { recursive: true, force: true });
  }
});

D.run();
