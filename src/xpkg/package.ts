// A Function package's contents, read and checked as `crossplane xpkg build`
// reads and checks them (crossplane-runtime 4e7ed23, pkg/xpkg: build.go,
// lint.go, scheme.go, parser/parser.go, parser/fsreader.go), and the YAML
// streams it writes into the package's layers: package.yaml (the meta and
// every object) and, when there are examples, .up/examples.yaml.
//
// The package root's YAML files are read in lexical order, each followed by a
// document end, as crossplane's file reader joins them. Each document is the
// package's meta (meta.pkg.crossplane.io) or an object of a kind Crossplane's
// package scheme knows; any other kind is refused. A Function package must
// hold exactly one meta, a Function, with a valid Crossplane version range,
// and only CustomResourceDefinitions beside it.
import { lstatSync, readdirSync, readFileSync, readlinkSync, realpathSync, statSync } from "node:fs";
import { extname, join, relative, sep } from "node:path";
import type { JsonObject } from "@bufbuild/protobuf";
import validRange from "semver/ranges/valid.js";
import { parseAllDocuments, stringify } from "yaml";
import { isObject } from "../json.js";

/** The layer files and their annotations, as crossplane-runtime names them (pkg/xpkg/name.go). */
export const STREAM_FILE = "package.yaml";
export const EXAMPLES_FILE = ".up/examples.yaml";
export const ANNOTATION_KEY = "io.crossplane.xpkg";
export const PACKAGE_ANNOTATION = "base";
export const EXAMPLES_ANNOTATION = "upbound";

const META_GROUP = "meta.pkg.crossplane.io";
/** The meta kinds Crossplane's meta scheme registers, by version. */
const META_KINDS: Record<string, string[]> = {
  v1alpha1: ["Provider", "Configuration"],
  v1beta1: ["Function"],
  v1: ["Provider", "Configuration", "Function"],
};
/** The API groups and versions Crossplane's package object scheme registers (BuildObjectScheme). */
const OBJECT_GROUP_VERSIONS = new Set([
  "apiextensions.crossplane.io/v1",
  "apiextensions.crossplane.io/v1alpha1",
  "apiextensions.crossplane.io/v2",
  "ops.crossplane.io/v1alpha1",
  "apiextensions.k8s.io/v1beta1",
  "apiextensions.k8s.io/v1",
  "admissionregistration.k8s.io/v1",
]);

/** PackageContents is what a Function package holds, and the layer files made of it. */
export interface PackageContents {
  meta: JsonObject;
  objects: JsonObject[];
  /** package.yaml: the meta, then each object, as YAML documents. */
  packageYaml: string;
  /** .up/examples.yaml: the examples' files joined, when there are any. */
  examplesYaml?: string;
}

/** yamlFiles lists the YAML files under dir as crossplane's file reader does: lexical order, no empty file, none under skip. */
export function yamlFiles(dir: string, skip?: string): string[] {
  const out: string[] = [];
  const real = realpathSync(dir);
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (skip && (p === skip || p.startsWith(skip + sep))) continue;
      if (lstatSync(p).isSymbolicLink()) insideLink(p, dir, real);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if ((extname(p) === ".yaml" || extname(p) === ".yml") && st.size > 0) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/**
 * insideLink refuses a symbolic link at p that leads outside the folder being
 * read (dir, whose real path is real), nowhere, or in a loop: a package holds
 * the folder's own files, never /etc/hostname or a secret a link points to.
 * (A hard link cannot be told from the file it names: it is read as a file.)
 */
export function insideLink(p: string, dir: string, real: string, where = dir): void {
  const shown = relative(dir, p);
  let target: string;
  try {
    target = realpathSync(p);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(
      `refusing to package ${shown}: a symbolic link to ${readlinkSync(p)}, which ${code === "ELOOP" ? "loops" : "does not exist"}`,
      { cause: err },
    );
  }
  if (target !== real && !target.startsWith(real + sep))
    throw new Error(
      `refusing to package ${shown}: a symbolic link to ${target}, outside ${where} (copy the file in if the package is to hold it)`,
    );
}

/** joined is the files' text as crossplane's file reader streams it: each file, then a document end and a separator. */
export function joined(files: string[]): string {
  return files.map((f) => `${readFileSync(f, "utf8")}\n...\n\n---\n`).join("");
}

/**
 * readPackage reads and checks the Function package under root (its
 * crossplane.yaml and CRDs), and the examples under examplesRoot if that
 * folder exists. Errors name the file and what is wrong, in crossplane's
 * words where it has them.
 */
export function readPackage(root: string, examplesRoot?: string): PackageContents {
  const metas: JsonObject[] = [];
  const objects: JsonObject[] = [];
  for (const file of yamlFiles(root, examplesRoot)) {
    const where = relative(root, file) || file;
    for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
      if (doc.errors.length > 0) throw new Error(`${where}: ${doc.errors[0]!.message.split("\n")[0]}`);
      const o = doc.toJS() as unknown;
      if (o === null || o === undefined) continue;
      if (!isObject(o)) throw new Error(`${where}: a document is not an object`);
      const apiVersion = typeof o["apiVersion"] === "string" ? o["apiVersion"] : "";
      const kind = typeof o["kind"] === "string" ? o["kind"] : "";
      if (!apiVersion || !kind) throw new Error(`${where}: Object 'Kind' is missing in a document (each needs apiVersion and kind)`);
      const slash = apiVersion.lastIndexOf("/");
      const [group, version] = slash < 0 ? ["", apiVersion] : [apiVersion.slice(0, slash), apiVersion.slice(slash + 1)];
      if (group === META_GROUP && META_KINDS[version]?.includes(kind)) metas.push(o);
      else if (OBJECT_GROUP_VERSIONS.has(apiVersion)) objects.push(o);
      else throw new Error(`${where}: no kind "${kind}" is registered for version "${apiVersion}" in the package scheme`);
    }
  }
  lintFunction(metas, objects);
  const meta = metas[0]!;
  let examplesYaml: string | undefined;
  if (examplesRoot) {
    let isDir = false;
    try {
      isDir = statSync(examplesRoot).isDirectory();
    } catch {
      // no examples
    }
    const files = isDir ? yamlFiles(examplesRoot) : [];
    if (files.length > 0) examplesYaml = joined(files);
  }
  return { meta, objects, packageYaml: encode(meta, objects), ...(examplesYaml !== undefined ? { examplesYaml } : {}) };
}

/** lintFunction checks a package as crossplane's Function linter does (NewFunctionLinter), with its messages. */
export function lintFunction(metas: JsonObject[], objects: JsonObject[]): void {
  if (metas.length !== 1) throw new Error(`not exactly one package meta type (found ${metas.length})`);
  const meta = metas[0]!;
  if (meta["kind"] !== "Function") throw new Error(`package meta type is not Function (it is a ${String(meta["kind"])})`);
  const spec = isObject(meta["spec"]) ? meta["spec"] : {};
  const crossplane = isObject(spec["crossplane"]) ? spec["crossplane"] : undefined;
  if (crossplane && crossplane["version"] !== undefined) {
    const range = crossplane["version"];
    // Masterminds' constraints take commas between terms where npm's take spaces.
    if (typeof range !== "string" || validRange(range.replace(/,/g, " ")) === null)
      throw new Error(`package version constraints are poorly formatted: spec.crossplane.version ${JSON.stringify(range)}`);
  }
  for (const o of objects) {
    const isCrd =
      (o["apiVersion"] === "apiextensions.k8s.io/v1" || o["apiVersion"] === "apiextensions.k8s.io/v1beta1") &&
      o["kind"] === "CustomResourceDefinition";
    if (!isCrd) {
      const name = isObject(o["metadata"]) ? o["metadata"]["name"] : undefined;
      throw new Error(
        `object is not a CRD: ${String(o["kind"])} ${typeof name === "string" ? name : ""} (${String(o["apiVersion"])})`.trim(),
      );
    }
  }
}

/** encode writes package.yaml as crossplane's builder does: a separator, the meta, and each object followed by a separator. */
export function encode(meta: JsonObject, objects: JsonObject[]): string {
  const doc = (o: JsonObject) => stringify(o, { sortMapEntries: true, lineWidth: 0 });
  return `---\n${doc(meta)}---\n${objects.map((o) => `${doc(o)}---\n`).join("")}`;
}
