import { suite } from "uvu";
import * as assert from "uvu/assert";
import { formatDuration, parseDuration } from "../../src/steps/index.js";

const D = suite("durations");
const good: Record<string, number> = { "300ms": 300, "30s": 30_000, "5m": 300_000, "1h30m": 5_400_000, "1.5s": 1500, "2h0m5s": 7_205_000 };
for (const [text, ms] of Object.entries(good)) D(`parses ${text}`, () => assert.is(parseDuration(text), ms));
for (const bad of ["", "5", "5 m", "m5", "5d", "-5s", "5m junk"]) {
  D(`refuses ${JSON.stringify(bad)}`, () => assert.throws(() => parseDuration(bad), /is not a duration \(examples: 30s, 5m, 1h30m\)/));
}
D("formats", () => assert.equal([formatDuration(0), formatDuration(61_000), formatDuration(3_725_000)], ["0s", "1m1s", "1h2m5s"]));
D.run();
