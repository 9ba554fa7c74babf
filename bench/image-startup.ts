// Start-up in a container, as Crossplane starts a function's pod: `podman run`
// of the function's image until its first answered call, for xfn's image
// (functions/hello from its Dockerfile: the bundle `xfn package` writes, with
// the default workers), a Go function image (bench/go/main.go, built as
// function-sdk-go builds one, linked statically) and the TypeScript SDK's
// function (bench/sdk-function.mjs bundled into one file), all on the same
// base image (this machine's Node and its libraries, test/support/podman.ts),
// plus the floor: `podman run` of that base doing nothing. Runs alternate
// between the images; medians and ratios come from the same run. Writes the
// "Start-up in a container" section of bench/RESULTS.md.
//
//   node --import tsx bench/image-startup.ts [--runs 7]
//
// Needs podman (with runc) and Go; it says which is missing and exits 2.
import { spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "esbuild";
import { parseRequest } from "../src/testing/unit.js";
import { encodeRequest } from "../src/wire/codec.js";
import { installHint, whyMissing, type Tool } from "../test/support/needs.js";
import { baseImage, podman, podmanEnv } from "../test/support/podman.js";
import { freePort } from "../test/support/spawn.js";
import { accepting, firstAnswer } from "./answer.js";
import { buildStaticGoFunction } from "./go.js";
import { flag, writeSection } from "./results.js";
import { request as benchRequest } from "./workload.js";

const ROOT = join(import.meta.dirname, "..");
const RUNS = flag("--runs", 7);

const missing = (["podman", "go"] as Tool[]).filter((t) => whyMissing(t));
if (missing.length) {
  process.stderr.write(
    `bench/image-startup.ts needs ${missing.map((t) => `${t} (${whyMissing(t)})`).join(", ")}: ${installHint(missing)}\n`,
  );
  process.exit(2);
}

interface Image {
  name: string;
  tag: string;
  /** args after the image: what the container is run with. */
  args: string[];
  /** answer: the request its first call sends; none for the floor, which is timed until it prints "up". */
  answer?: Uint8Array;
}

const work = mkdtempSync(join(tmpdir(), "xfn-image-startup-"));
const base = await baseImage();
const suffix = `${process.pid}`;

/** buildImage builds a Dockerfile's text in a context folder holding files, tagged tag. */
async function buildImage(tag: string, dockerfile: string, files: Record<string, string>): Promise<void> {
  const ctx = mkdtempSync(join(work, "ctx-"));
  writeFileSync(join(ctx, "Dockerfile"), dockerfile);
  for (const [to, from] of Object.entries(files)) {
    mkdirSync(join(ctx, to, ".."), { recursive: true });
    copyFileSync(from, join(ctx, to));
  }
  await podman(["build", "--build-arg", `BASE_IMAGE=${base}`, "--tag", tag, ctx]);
}

// xfn: functions/hello's own Dockerfile over the bundle, as docs/packaging.md builds it.
const xfnContext = join(work, "xfn");
{
  const r = spawn(
    process.execPath,
    [join(ROOT, "bin/xfn.js"), "package", "functions/hello", "--out", join(xfnContext, "dist/functions/hello")],
    {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  await new Promise((resolve) => r.on("close", resolve));
  copyFileSync(join(ROOT, ".dockerignore"), join(xfnContext, ".dockerignore"));
  await podman([
    "build",
    "--file",
    join(ROOT, "functions/hello/Dockerfile"),
    "--build-arg",
    `BASE_IMAGE=${base}`,
    "--tag",
    `localhost/xfn-bench-xfn:${suffix}`,
    xfnContext,
  ]);
}
// Go: the static binary alone on the same base.
await buildImage(
  `localhost/xfn-bench-go:${suffix}`,
  'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY gofunction /gofunction\nUSER 2000:2000\nENTRYPOINT ["/gofunction", "-address", "0.0.0.0:9443"]\n',
  { gofunction: buildStaticGoFunction() },
);
// The TypeScript SDK: its function and node_modules in one file, as a bundler would ship it.
await build({
  entryPoints: [join(ROOT, "bench/sdk-function.mjs")],
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  outfile: join(work, "sdk.mjs"),
  banner: { js: "import { createRequire as __r } from 'node:module'; const require = __r(import.meta.url);" },
  logLevel: "warning",
});
await buildImage(
  `localhost/xfn-bench-sdk:${suffix}`,
  'ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\nCOPY sdk.mjs /function/sdk.mjs\nUSER 2000:2000\nENTRYPOINT ["node", "/function/sdk.mjs", "9443", "0.0.0.0"]\n',
  { "sdk.mjs": join(work, "sdk.mjs") },
);

const hello = encodeRequest(parseRequest(readFileSync(join(ROOT, "functions/hello/example/request.yaml"), "utf8"), "request.yaml"));
const images: Image[] = [
  { name: "the base, until node prints (the floor: podman run and node's start)", tag: base, args: ["-e", 'console.log("up")'] },
  { name: "xfn (functions/hello's image, default workers)", tag: `localhost/xfn-bench-xfn:${suffix}`, args: ["--insecure"], answer: hello },
  { name: "Go function (grpc-go, generated types, static)", tag: `localhost/xfn-bench-go:${suffix}`, args: [], answer: benchRequest(1) },
  { name: "TypeScript SDK function (bundled)", tag: `localhost/xfn-bench-sdk:${suffix}`, args: [], answer: benchRequest(1) },
];

/** timeOnce times one `podman run` of img: until it prints "up" (the floor) or answers its first call. */
async function timeOnce(img: Image): Promise<number> {
  const port = await freePort();
  const name = `xfn-bench-${suffix}-${Math.random().toString(36).slice(2, 8)}`;
  const argv = ["run", "--rm", "--name", name, ...(img.answer ? ["--publish", `127.0.0.1:${port}:9443`] : []), img.tag, ...img.args];
  const started = performance.now();
  const child = spawn("podman", argv, { env: podmanEnv(), stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let ended = false;
  child.stderr.on("data", (d: Buffer) => (out += d));
  const up = new Promise<number>((resolve) => child.stdout.on("data", (d: Buffer) => /up/.test(String(d)) && resolve(performance.now())));
  const exited = new Promise<number | null>((r) => child.on("close", (code) => ((ended = true), r(code))));
  try {
    if (!img.answer) {
      const at = await Promise.race([up, exited.then(() => undefined)]);
      if (at === undefined) throw new Error("it ended without printing");
      await exited;
      return at - started;
    }
    // podman's port forwarder accepts before the server listens: calls are retried until the function answers.
    await accepting(port, () => ended);
    await firstAnswer(port, img.answer, { tries: 500, gone: () => ended });
    return performance.now() - started;
  } catch (err) {
    throw new Error(`${img.name}: ${(err as Error).message}\n${out}`);
  } finally {
    if (img.answer) {
      await podman(["rm", "--force", "--time", "0", name]).catch(() => {});
      await exited;
    }
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const r0 = (x: number) => Math.round(x);
const r2 = (x: number) => Math.round(x * 100) / 100;

try {
  const times = new Map<Image, number[]>(images.map((i) => [i, []]));
  for (const img of images) await timeOnce(img); // warm-up: image layers in the page cache
  for (let i = 0; i < RUNS; i++) {
    // Each round in another order, so that no image always runs first.
    const order = i % 2 === 0 ? images : [...images].reverse();
    for (const img of order) times.get(img)!.push(await timeOnce(img));
    process.stderr.write(`round ${i + 1} of ${RUNS}\n`);
  }
  const xfn = median(times.get(images[1]!)!);
  const rows = images.map((img) => {
    const ts = times.get(img)!;
    const m = median(ts);
    return `| ${img.name} | ${r0(m)} | ${r0(Math.min(...ts))} | ${r0(Math.max(...ts))} | ${img === images[1] ? "" : r2(m / xfn)} |`;
  });
  const section = [
    "## Start-up in a container (`npm run bench:image`)",
    "",
    `\`podman run\` of each image until its first answered call, ${RUNS} runs each after a warm-up, alternating; ms, ` +
      `on ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), ${new Date().toISOString().slice(0, 10)}. Every image is built on the same ` +
      "base (this machine's Node and the libraries it links), published on a loopback port, called in plaintext. The ratio is each " +
      "median over xfn's.",
    "",
    "| image | median ms | min | max | / xfn |",
    "|---|---:|---:|---:|---:|",
    ...rows,
    "",
  ].join("\n");
  process.stdout.write(`${section}\n`);
  writeSection("Start-up in a container", section);
} finally {
  for (const img of images.slice(1)) await podman(["rmi", "--force", img.tag]).catch(() => {});
  rmSync(work, { recursive: true, force: true });
}
