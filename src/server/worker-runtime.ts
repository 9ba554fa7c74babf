// The worker runtime: what a pool worker of `xfn serve <module.ts>` runs, all
// of xfn-runtime's API and the worker's own start, bundled with the packages
// they use into one file, lib/worker-runtime.mjs, when xfn is built
// (scripts/bundle-runtime.mjs). A worker then loads that file and the
// compiled module (module/compile.ts), instead of every file of lib/ and of
// grpc-js, protobuf-es and pino one by one, which took most of its start.
export * from "../index.js";
export { startWorker } from "./worker-start.js";
export { loadImported } from "../module/load.js";
