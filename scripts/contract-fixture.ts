// Rewrites test/fixtures/wire-contract.json from shared/docs/wire-contract.md.
// Run with: npx tsx scripts/contract-fixture.ts [path/to/wire-contract.md]
import { readFileSync, writeFileSync } from "node:fs";
import { parseContract } from "../test/support/contract.js";

const src = process.argv[2] ?? "../shared/docs/wire-contract.md";
const contract = parseContract(readFileSync(src, "utf8"));
writeFileSync("test/fixtures/wire-contract.json", JSON.stringify(contract, null, 2) + "\n");
console.log(`wrote ${Object.keys(contract.messages).length} messages, ${Object.keys(contract.enums).length} enums`);
