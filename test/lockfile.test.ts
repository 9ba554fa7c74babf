// `npm ci` prints no EBADENGINE warning: every package the lockfile installs
// (dev dependencies included) accepts the Node running the tests, and every
// package a user installs with xfn (not a dev dependency) accepts the oldest
// Node that package.json's engines allow.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import semver from "semver";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { ROOT } from "./support/spawn.js";

const L = suite("lockfile: every package runs on the Node versions xfn supports");

L(
  "no package in package-lock.json needs a newer Node: than this one, or (xfn's own dependencies) than package.json's engines allow",
  () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string } };
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
      packages: Record<string, { engines?: { node?: string } | string[]; dev?: boolean }>;
    };
    const oldest = semver.minVersion(pkg.engines.node)!.version;
    const refused: string[] = [];
    let checked = 0;
    for (const [path, p] of Object.entries(lock.packages)) {
      const range = !Array.isArray(p.engines) ? p.engines?.node : undefined;
      if (!path || !range) continue;
      checked++;
      for (const v of p.dev ? [process.versions.node] : [oldest, process.versions.node])
        if (!semver.satisfies(v, range)) refused.push(`${path.replace(/^.*node_modules\//, "")} needs node ${range} (not ${v})`);
    }
    assert.ok(checked > 50, `the lockfile's engines were read (${checked})`);
    assert.equal(refused, [], "kubernetes-models 5.1 needs Node 22: package.json overrides it with 4.5.1");
  },
);

L.run();
