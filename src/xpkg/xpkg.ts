// The Crossplane package file (.xpkg) of a function: what `crossplane xpkg
// build [--embed-runtime-image-tarball TAR]` writes (crossplane/cli 3d72f93,
// cmd/crossplane/xpkg/build.go; crossplane-runtime 4e7ed23, pkg/xpkg/build.go
// and layers.go): the runtime image's layers and config (or none), then a
// layer holding package.yaml, then, when there are examples, one holding
// .up/examples.yaml; each added layer labelled in the config as
// io.crossplane.xpkg:<its digest> (base, upbound), since the tarball format
// keeps no layer annotations. readXpkg reads one back as Crossplane does
// (crossplane-runtime pkg/xpkg/client.go ExtractPackageYAML): the layer
// labelled base, or else every layer flattened, and its package.yaml.
import { gunzipSync } from "node:zlib";
import type { JsonObject } from "@bufbuild/protobuf";
import tar from "tar-stream";
import { parseAllDocuments } from "yaml";
import { isObject } from "../json.js";
import { appendLayers, emptyImage, layerOf, readImageTarball, tarOf, writeImageTarball, type Image, type Layer } from "./image.js";
import {
  ANNOTATION_KEY,
  EXAMPLES_ANNOTATION,
  EXAMPLES_FILE,
  lintFunction,
  PACKAGE_ANNOTATION,
  readPackage,
  STREAM_FILE,
} from "./package.js";
import { messageOf } from "../sdk/errors.js";

export interface XpkgOptions {
  /** The folder holding crossplane.yaml and the input CRDs. */
  packageRoot: string;
  /** Example YAML to include, if the folder exists. */
  examplesRoot?: string;
  /** A runtime image tarball (docker save, podman save) to build the package on. */
  runtimeTarball?: string;
  /** Where to write the .xpkg. */
  out: string;
}

/** XpkgWritten says what was written: the meta's name, the image's config digest (its ID), and its layers. */
export interface XpkgWritten {
  name: string;
  configDigest: string;
  layers: number;
  examples: boolean;
}

/** writeXpkg builds the package and writes it to opts.out. */
export async function writeXpkg(opts: XpkgOptions): Promise<XpkgWritten> {
  const contents = readPackage(opts.packageRoot, opts.examplesRoot);
  const base: Image = opts.runtimeTarball ? await readImageTarball(opts.runtimeTarball) : emptyImage();
  const layers: Layer[] = [layerOf(await tarOf([{ name: STREAM_FILE, mode: 0o644, content: contents.packageYaml }]))];
  const labels: Record<string, string> = { [`${ANNOTATION_KEY}:${layers[0]!.digest}`]: PACKAGE_ANNOTATION };
  if (contents.examplesYaml !== undefined) {
    const ex = layerOf(await tarOf([{ name: EXAMPLES_FILE, mode: 0o644, content: contents.examplesYaml }]));
    layers.push(ex);
    labels[`${ANNOTATION_KEY}:${ex.digest}`] = EXAMPLES_ANNOTATION;
  }
  const img = appendLayers(base, layers, labels);
  const { configDigest } = await writeImageTarball(img, opts.out);
  const metadata = isObject(contents.meta["metadata"]) ? contents.meta["metadata"] : {};
  return { name: String(metadata["name"] ?? ""), configDigest, layers: img.layers.length, examples: contents.examplesYaml !== undefined };
}

/** XpkgRead is a package as Crossplane reads it back. */
export interface XpkgRead {
  image: Image;
  packageYaml: string;
  meta: JsonObject;
  objects: JsonObject[];
}

/** files lists a layer's regular files (name to bytes). */
async function files(layer: Layer): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const extract = tar.extract();
  const done = new Promise<void>((resolve, reject) => (extract.on("finish", resolve), extract.on("error", reject)));
  extract.on("entry", (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: unknown) => chunks.push(c as Buffer));
    stream.on("end", () => {
      if (header.type === "file") out.set(header.name.replace(/^\.\//, ""), Buffer.concat(chunks));
      next();
    });
    stream.resume();
  });
  extract.end(gunzipSync(layer.compressed));
  await done;
  return out;
}

/** readXpkg reads an .xpkg's package.yaml as Crossplane finds it, and checks it as a Function package. */
export async function readXpkg(file: string): Promise<XpkgRead> {
  const image = await readImageTarball(file);
  const inner = isObject(image.config["config"]) ? image.config["config"] : {};
  const labels = isObject(inner["Labels"]) ? inner["Labels"] : {};
  const base = image.layers.filter((l) => labels[`${ANNOTATION_KEY}:${l.digest}`] === PACKAGE_ANNOTATION);
  // The labelled layer; or, for an image built without labels, every layer flattened (later ones win).
  let stream: Buffer | undefined;
  for (const layer of base.length > 0 ? base.slice(0, 1) : image.layers) {
    for (const [name, bytes] of await files(layer)) if (name.split("/").pop() === STREAM_FILE) stream = bytes;
  }
  if (!stream) throw new Error(`${file}: package.yaml not found in package`);
  const packageYaml = stream.toString("utf8");
  const metas: JsonObject[] = [];
  const objects: JsonObject[] = [];
  for (const doc of parseAllDocuments(packageYaml)) {
    if (doc.errors.length > 0) throw new Error(`${file}: package.yaml: ${doc.errors[0]!.message.split("\n")[0]}`);
    const o = doc.toJS() as unknown;
    if (o === null || o === undefined) continue;
    if (!isObject(o)) throw new Error(`${file}: package.yaml holds a document that is not an object`);
    (String(o["apiVersion"]).startsWith("meta.pkg.crossplane.io/") ? metas : objects).push(o);
  }
  try {
    lintFunction(metas, objects);
  } catch (err) {
    throw new Error(`${file}: ${messageOf(err)}`, { cause: err });
  }
  return { image, packageYaml, meta: metas[0]!, objects };
}
