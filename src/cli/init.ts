// `xfn init <dir>`: write a standalone function project, ready for
// `npm install`, from the template shipped with xfn (templates/function).
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command, Option } from "commander";
import { messageOf } from "../sdk/errors.js";

const root = join(dirname(fileURLToPath(import.meta.url)), "../..");
/** TEMPLATE is the project template's folder, in the repository and in the installed package alike. */
export const TEMPLATE = join(root, "templates", "function");

// npm leaves dotfiles such as .gitignore out of a published package, so the
// template names them without the dot.
const RENAMED: Record<string, string> = { gitignore: ".gitignore", dockerignore: ".dockerignore" };
/** runtimeSpec is the package.json dependency for --runtime: a version range as given, a local path made relative to dir. */
export function runtimeSpec(spec: string, dir: string, cwd = process.cwd()): string {
  const path = spec.startsWith("file:") ? spec.slice(5) : spec;
  const local = spec.startsWith("file:") || /^(\.{1,2}[\\/]|[\\/]|~)/.test(spec) || /\.(tgz|tar\.gz)$/.test(spec);
  if (!local) return spec;
  const abs = resolve(cwd, path.replace(/^~(?=[\\/])/, process.env["HOME"] ?? "~"));
  const rel = relative(dir, abs).split("\\").join("/");
  return `file:${rel.startsWith(".") ? rel : `./${rel}`}`;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** InitOptions say what to write. */
export interface InitOptions {
  dir: string;
  /** name is the function's short name (function-<name> is its package); default: the folder's name. */
  name?: string;
  /** image is the package's registry path, without a tag. */
  image?: string;
  /**
   * runtime is the xfn-runtime dependency written to package.json; default: ^
   * this version. A local path (a tarball or a folder: ./x.tgz, ../xfn,
   * /abs, file:x) is taken from the current folder, as the user typed it, and
   * written relative to the new project, where npm resolves it.
   */
  runtime?: string;
}

interface Manifest {
  version: string;
  dependencies?: Record<string, string>;
  devDependencies?: Record<string, string>;
}

function manifest(): Manifest {
  return JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Manifest;
}

/** initProject writes the project and returns the files written, relative to dir. */
export async function initProject(opts: InitOptions): Promise<string[]> {
  const dir = resolve(opts.dir);
  if (existsSync(dir) && (!statSync(dir).isDirectory() || readdirSync(dir).length > 0)) {
    throw new Error(`cannot create a project in ${opts.dir}: it exists and is not an empty folder`);
  }
  const name = opts.name ?? basename(dir).replace(/^function-/, "");
  if (!DNS_LABEL.test(name)) {
    throw new Error(
      `cannot name the function ${JSON.stringify(name)}: use lowercase letters, digits and "-" (a DNS label), e.g. --name storage`,
    );
  }
  const pkg = manifest();
  const deps = { ...pkg.devDependencies, ...pkg.dependencies };
  const values: Record<string, string> = {
    name,
    package: `function-${name}`,
    group: `${name}.fn.example.org`,
    image: opts.image ?? `xpkg.example.org/your-org/function-${name}`,
    runtime: opts.runtime === undefined ? `^${pkg.version}` : runtimeSpec(opts.runtime, dir),
    typescript: deps["typescript"] ?? "^5",
    tsx: deps["tsx"] ?? "^4",
    typesNode: deps["@types/node"] ?? "^20",
  };
  const fill = (text: string) => text.replace(/\{\{(\w+)\}\}/g, (m, k: string) => values[k] ?? m);
  const written: string[] = [];
  const copy = (from: string, to: string) => {
    for (const entry of readdirSync(from).sort()) {
      const src = join(from, entry);
      const target = join(to, RENAMED[entry] ?? entry.replace("GROUP", values["group"]!));
      if (statSync(src).isDirectory()) {
        copy(src, target);
        continue;
      }
      mkdirSync(dirname(target), { recursive: true });
      writeFileSync(target, fill(readFileSync(src, "utf8")));
      written.push(relative(dir, target));
    }
  };
  copy(TEMPLATE, dir);
  // The types come from the project's own CRDs, as `npm run generate` makes them.
  const [{ loadDocs }, { generateTypes }] = await Promise.all([import("../engine/docs.js"), import("../codegen/types.js")]);
  const { code } = await generateTypes(loadDocs(join(dir, "crds")).map((d) => ({ ...d, source: relative(dir, d.source) })));
  const types = join(dir, "src", "generated", "types.ts");
  mkdirSync(dirname(types), { recursive: true });
  writeFileSync(types, code);
  written.push(relative(dir, types));
  return written.sort();
}

/** initCommand builds the `init` subcommand. */
export function initCommand(): Command {
  return new Command("init")
    .description("write a new function project: a typed pipeline, examples, a recorded case, unit tests, package metadata, Dockerfile")
    .argument("<dir>", "the project's folder (created; must be empty if it exists)")
    .addOption(new Option("--name <name>", "the function's short name; its package is function-<name> (default: the folder's name)"))
    .addOption(
      new Option(
        "--image <ref>",
        "registry path the package is pushed to, without a tag (default: xpkg.example.org/your-org/function-<name>)",
      ),
    )
    .addOption(
      new Option(
        "--runtime <spec>",
        "the xfn-runtime dependency for package.json: a version range or a tarball path (default: ^ this xfn's version)",
      ),
    )
    .action(async (dir: string, flags: { name?: string; image?: string; runtime?: string }) => {
      try {
        const files = await initProject({ dir, ...flags });
        process.stdout.write(`created ${dir}: ${files.length} files\n\nnext:\n  cd ${dir}\n  npm install\n  npm test\n  npm run render\n`);
      } catch (err) {
        process.stderr.write(`xfn init: ${messageOf(err)}\n`);
        process.exitCode = 1;
      }
    });
}
