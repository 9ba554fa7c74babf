// The bench function as a module `xfn serve` loads, as a user's would: it
// imports the runtime by its package name, so the server and the function
// share one copy of xfn.
import * as xfn from "xfn-runtime";
import { benchFunction } from "./composed.js";

export default benchFunction(xfn);
