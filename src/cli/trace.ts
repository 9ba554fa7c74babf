// `xfn trace TYPE[/NAME] [NAME]`: an XR and what it composes, as a tree, like
// `crossplane beta trace`, with what xfn's lifecycle steps record (src/trace).
import { Command, Option } from "commander";
import { printable, safeJson } from "../terminal.js";
import { safeYamlOf } from "../render/output.js";
import { messageOf } from "../sdk/errors.js";

interface Flags {
  namespace?: string;
  output: "default" | "wide" | "json" | "yaml";
  watch: boolean;
  kubeconfig?: string;
  context?: string;
  interval: number;
}

export function traceCommand(): Command {
  return new Command("trace")
    .description(
      "show an XR and everything it composes as a tree: SYNCED, READY, STATUS and age, " +
        "what each resource waits for, and what holds a deletion",
    )
    .argument("<type>", "the XR's kind, as kubectl takes it: TYPE[.VERSION][.GROUP], or TYPE/NAME")
    .argument("[name]", "the XR's name (unless given as TYPE/NAME)")
    .addOption(new Option("-n, --namespace <ns>", "the XR's namespace (default: default, for a namespaced kind)"))
    .addOption(
      new Option("-o, --output <format>", "default, wide (resource names, external names, waits), json or yaml")
        .choices(["default", "wide", "json", "yaml"])
        .default("default"),
    )
    .addOption(new Option("-w, --watch", "redraw as the tree changes, until the XR is gone").default(false))
    .addOption(
      new Option(
        "--kubeconfig <file>",
        "kubeconfig of the cluster (default: KUBECONFIG, ~/.kube/config, or the pod's service account)",
      ).env("KUBECONFIG"),
    )
    .addOption(new Option("--context <name>", "the kubeconfig context to use"))
    .addOption(new Option("--interval <ms>", "with --watch: how often to read the tree").default(1000).argParser(Number))
    .action(async (type: string, name: string | undefined, flags: Flags) => {
      try {
        await trace(type, name, flags);
      } catch (err) {
        // An API server's message may quote what it was given, or be anything at all.
        process.stderr.write(`xfn trace: ${printable(messageOf(err).split("\n")[0]!)}\n`);
        process.exitCode = 1;
      }
    });
}

async function trace(typeArg: string, nameArg: string | undefined, flags: Flags): Promise<void> {
  let type = typeArg;
  let name = nameArg;
  if (type.includes("/")) {
    if (name !== undefined) throw new Error(`give the name once: as ${type} or as a second argument, not both`);
    [type, name] = [type.slice(0, type.indexOf("/")), type.slice(type.indexOf("/") + 1)];
  }
  if (!type || !name) throw new Error(`name the XR: xfn trace ${type || "TYPE"}/NAME (or TYPE NAME)`);
  const [{ KubeConfig }, { kubeApi }, { Tracer, table, plainTree, withoutAges }] = await Promise.all([
    import("@kubernetes/client-node"),
    import("../trace/api.js"),
    import("../trace/trace.js"),
  ]);
  const kc = new KubeConfig();
  if (flags.kubeconfig) kc.loadFromFile(flags.kubeconfig);
  else kc.loadFromDefault();
  if (flags.context) {
    if (!kc.getContexts().some((c) => c.name === flags.context)) throw new Error(`the kubeconfig has no context "${flags.context}"`);
    kc.setCurrentContext(flags.context);
  }
  const wide = flags.output === "wide";
  // The text, and what it says but for ages (which change every second): a watch redraws when that changes.
  const render = async (): Promise<{ text: string; sig: string }> => {
    const tree = await new Tracer(kubeApi(kc), { wide }).trace(type, name!, flags.namespace);
    const text =
      flags.output === "json"
        ? `${safeJson(JSON.stringify(plainTree(tree), null, 2))}\n`
        : flags.output === "yaml"
          ? safeYamlOf(plainTree(tree))
          : table(tree, { wide });
    return { text, sig: table(withoutAges(tree), { wide: true }) };
  };
  if (!flags.watch) {
    process.stdout.write((await render()).text);
    return;
  }
  // Watch: read the tree again on an interval and redraw it when it changed; end once the XR is gone.
  const tty = process.stdout.isTTY === true;
  let last = "";
  let stop = false;
  process.once("SIGINT", () => (stop = true));
  process.once("SIGTERM", () => (stop = true));
  while (!stop) {
    let out: { text: string; sig: string };
    try {
      out = await render();
    } catch (err) {
      if (/not found/.test(messageOf(err)) && last) {
        process.stdout.write(`${tty ? "\n" : ""}${printable(messageOf(err).split("\n")[0]!)}: the XR is gone\n`);
        return;
      }
      throw err;
    }
    if (out.sig !== last) {
      process.stdout.write(tty ? `\x1b[H\x1b[2J${out.text}` : `${last ? "\n" : ""}${out.text}`);
      last = out.sig;
    }
    await new Promise((r) => setTimeout(r, Math.max(100, flags.interval)));
  }
}
