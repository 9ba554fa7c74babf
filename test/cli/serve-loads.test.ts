// What `xfn serve` loads on its main thread before it listens: the server,
// the codec and, with --workers 1, the function and the SDK it imports; never
// a YAML parser, the render engine or the testing helpers (they are start-up
// time and memory on every function pod, for nothing a served call uses).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ROOT, startServe } from "../support/spawn.js";

const L = suite("cli: what xfn serve loads on its main thread");

const PRELOAD = join(ROOT, "test/support/loads/preload.mjs");
// OpenTelemetry too: it loads only when the OTEL_ variables ask for traces (telemetry/otel.ts).
const UNWANTED = [/\/node_modules\/yaml\//, /\/(lib|src)\/engine\//, /\/(lib|src)\/testing\//, /\/node_modules\/@opentelemetry\//];

/** loadedBeforeListening serves functions/hello with args and returns the modules its main thread loaded before it listened. */
async function loadedBeforeListening(args: string[], env: NodeJS.ProcessEnv = {}): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), "xfn-loads-"));
  const file = join(dir, "loads.txt");
  try {
    const srv = await startServe(["functions/hello", "--insecure", ...args], {
      // Whatever the test's environment says: no endpoint, no traces.
      OTEL_EXPORTER_OTLP_ENDPOINT: "",
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "",
      ...env,
      LOADS_FILE: file,
      NODE_OPTIONS: `${process.env["NODE_OPTIONS"] ?? ""} --import ${PRELOAD}`,
    });
    const { code } = await srv.stop();
    assert.is(code, 0, srv.output());
    const lines = readFileSync(file, "utf8").split("\n");
    const at = lines.indexOf("--- listening");
    assert.ok(at > 0, `the server never listened, or the trace missed it:\n${lines.slice(0, 20).join("\n")}`);
    return lines.slice(0, at);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** noneUnwanted fails naming any module of a kind the server must not load. */
function noneUnwanted(loaded: string[]): void {
  for (const re of UNWANTED)
    assert.equal(
      loaded.filter((u) => re.test(u)),
      [],
      `loaded ${re}`,
    );
}

L("--workers 1 (the function in the server's thread): the function and the SDK, no YAML parser, engine or testing module", async () => {
  const loaded = await loadedBeforeListening(["--workers", "1"]);
  // The trace works: the function and the server were seen.
  assert.ok(
    loaded.some((u) => u.endsWith("/functions/hello/index.ts")),
    loaded.join("\n"),
  );
  assert.ok(
    loaded.some((u) => /\/(lib|src)\/server\/server\.(js|ts)$/.test(u)),
    loaded.join("\n"),
  );
  noneUnwanted(loaded);
});

L("with workers: no YAML parser, engine or testing module on the main thread either", async () => {
  const loaded = await loadedBeforeListening(["--workers", "2"]);
  assert.ok(
    loaded.some((u) => /\/(lib|src)\/server\/pool\.(js|ts)$/.test(u)),
    loaded.join("\n"),
  );
  noneUnwanted(loaded);
});

L("with an OTLP endpoint the OpenTelemetry packages do load (so the check above can fail)", async () => {
  // Nothing listens there: spans that cannot be sent are dropped, and the server serves.
  const loaded = await loadedBeforeListening(["--workers", "2"], { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:9" });
  assert.ok(
    loaded.some((u) => /\/node_modules\/@opentelemetry\/sdk-trace-base\//.test(u)),
    loaded.join("\n"),
  );
});

L.run();
