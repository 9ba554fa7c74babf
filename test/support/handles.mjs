// Loaded into every test lane (scripts/test.mjs): on SIGUSR2 it writes what
// still keeps the lane's process alive, so that a lane that does not exit
// after its tests says what it leaked. A signal listener itself keeps
// nothing alive.
process.on("SIGUSR2", () => {
  const kinds = process.getActiveResourcesInfo().filter((k) => k !== "TTYWrap");
  const handles = process._getActiveHandles?.() ?? [];
  const described = handles.map((h) => {
    const name = h?.constructor?.name ?? typeof h;
    if (name === "ChildProcess") return `ChildProcess pid ${h.pid} (${(h.spawnargs ?? []).slice(0, 4).join(" ")})`;
    if (name === "Server" || name === "Socket") {
      const a = typeof h.address === "function" ? h.address() : undefined;
      return `${name} ${a ? JSON.stringify(a) : ""} ${h.remoteAddress ? `to ${h.remoteAddress}:${h.remotePort}` : ""}`.trim();
    }
    if (name === "Timeout") return `Timeout ${h._idleTimeout} ms: ${String(h._onTimeout).slice(0, 120).replace(/\s+/g, " ")}`;
    return name;
  });
  process.stderr.write(`\nstill running: ${kinds.join(", ")}\n${described.map((d) => `  ${d}\n`).join("")}`);
});

// With XFN_TEST_TIMERS=1, timers remember where they were made, and the
// report above names the ones still pending (slower: for hunting a leak).
const made = new Map();
if (process.env.XFN_TEST_TIMERS === "1") {
  for (const name of ["setTimeout", "setInterval"]) {
    const original = globalThis[name];
    globalThis[name] = function (...args) {
      const t = original.apply(this, args);
      made.set(t, new Error(`${name} ${args[1] ?? 0} ms`));
      return t;
    };
  }
  process.on("SIGUSR2", () => {
    for (const [t, where] of made) {
      if (typeof t.hasRef === "function" && t.hasRef() && !t._destroyed)
        process.stderr.write(`pending timer: ${where.stack.split("\n").slice(0, 8).join("\n")}\n`);
    }
  });
}
