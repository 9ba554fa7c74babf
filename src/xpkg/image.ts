// Container image tarballs in the format `docker save`, `podman save` and
// go-containerregistry's tarball package write (manifest.json naming a config
// file and the layer files): read one, add layers and config labels, and write
// one as go-containerregistry's tarball.Write does (go-containerregistry
// 3f4ff3c, pkg/v1/tarball/write.go: the config as "sha256:<hex>", each layer
// gzip-compressed as "<hex>.tar.gz", then manifest.json). That is what
// `crossplane xpkg build` writes an .xpkg as, and what `podman load` and
// `docker load` take.
import { createHash } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { pipeline } from "node:stream/promises";
import { gunzipSync, gzipSync } from "node:zlib";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import tar from "tar-stream";
import { isObject } from "../json.js";
import { messageOf } from "../sdk/errors.js";

/** Layer is one image layer: its gzip-compressed bytes, their digest, and the digest of the tar inside (its diff ID). */
export interface Layer {
  compressed: Buffer;
  digest: string;
  diffId: string;
}

/** Image is an image's config (the OCI/Docker config file) and its layers, bottom first. */
export interface Image {
  config: JsonObject;
  layers: Layer[];
}

const sha256 = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const isGzip = (b: Buffer) => b.length >= 2 && b[0] === 0x1f && b[1] === 0x8b;

/** layerOf makes a layer from an uncompressed tar, or takes a gzip-compressed one as it is. */
export function layerOf(bytes: Buffer): Layer {
  if (isGzip(bytes)) return { compressed: bytes, digest: sha256(bytes), diffId: sha256(gunzipSync(bytes)) };
  const compressed = gzipSync(bytes);
  return { compressed, digest: sha256(compressed), diffId: sha256(bytes) };
}

/** tarOf writes files into an uncompressed tar, in order, as regular files with their modes and no time: the same files, the same bytes. */
export async function tarOf(files: { name: string; mode: number; content: Buffer | string }[]): Promise<Buffer> {
  const pack = tar.pack();
  const chunks: Buffer[] = [];
  pack.on("data", (c: unknown) => chunks.push(c as Buffer));
  const done = new Promise<void>((resolve, reject) => (pack.on("end", resolve), pack.on("error", reject)));
  for (const f of files)
    pack.entry(
      { name: f.name, mode: f.mode, type: "file", mtime: new Date(0) },
      typeof f.content === "string" ? Buffer.from(f.content) : f.content,
    );
  pack.finalize();
  await done;
  return Buffer.concat(chunks);
}

/** emptyImage is an image of no layers: go-containerregistry's empty.Image. */
export function emptyImage(): Image {
  return {
    config: { architecture: "", created: "0001-01-01T00:00:00Z", os: "", rootfs: { type: "layers", diff_ids: [] }, config: {} },
    layers: [],
  };
}

/**
 * appendLayers adds layers on top of img and sets labels in its config, as
 * go-containerregistry's mutate.AppendLayers and mutate.Config do: each layer's
 * diff ID is added to rootfs.diff_ids with an empty history entry.
 */
export function appendLayers(img: Image, layers: Layer[], labels: Record<string, string>): Image {
  const config = structuredClone(img.config);
  const rootfs = isObject(config["rootfs"]) ? config["rootfs"] : (config["rootfs"] = { type: "layers", diff_ids: [] });
  const diffIds = Array.isArray(rootfs["diff_ids"]) ? rootfs["diff_ids"] : (rootfs["diff_ids"] = []);
  const history = Array.isArray(config["history"]) ? config["history"] : (config["history"] = []);
  for (const l of layers) {
    diffIds.push(l.diffId);
    history.push({ created: "0001-01-01T00:00:00Z" });
  }
  const inner = isObject(config["config"]) ? config["config"] : (config["config"] = {});
  const existing = isObject(inner["Labels"]) ? inner["Labels"] : {};
  inner["Labels"] = { ...existing, ...labels };
  return { config, layers: [...img.layers, ...layers] };
}

/** entries reads every regular file and symbolic link of a tar file into memory, by name. */
async function entries(file: string): Promise<Map<string, { type: string; data: Buffer; linkname?: string }>> {
  const out = new Map<string, { type: string; data: Buffer; linkname?: string }>();
  const extract = tar.extract();
  extract.on("entry", (header, stream, next) => {
    const chunks: Buffer[] = [];
    stream.on("data", (c: unknown) => chunks.push(c as Buffer));
    stream.on("end", () => {
      const name = header.name.replace(/^\.\//, "");
      out.set(name, {
        type: header.type ?? "file",
        data: Buffer.concat(chunks),
        ...(header.linkname ? { linkname: header.linkname } : {}),
      });
      next();
    });
    stream.resume();
  });
  await pipeline(createReadStream(file), extract);
  return out;
}

/**
 * readImageTarball reads the one image in a tarball written by docker save,
 * podman save (docker-archive) or go-containerregistry, checking each layer
 * against the config's diff IDs. Errors say what the file is not.
 */
export async function readImageTarball(file: string): Promise<Image> {
  let files: Awaited<ReturnType<typeof entries>>;
  try {
    files = await entries(file);
  } catch (err) {
    throw new Error(`${file} is not a tar file: ${messageOf(err)}`, { cause: err });
  }
  const get = (name: string, seen = 0): Buffer => {
    const e = files.get(name.replace(/^\.\//, ""));
    if (!e) throw new Error(`${file}: manifest.json names ${name}, which the tarball does not hold`);
    if (e.type === "symlink" && e.linkname && seen < 8)
      return get(e.linkname.startsWith("/") ? e.linkname.slice(1) : new URL(e.linkname, `file:///${name}`).pathname.slice(1), seen + 1);
    return e.data;
  };
  const manifestFile = files.get("manifest.json");
  if (!manifestFile)
    throw new Error(
      `${file} is not an image tarball: it has no manifest.json (save one with podman save --format docker-archive, or docker save)`,
    );
  let manifest: JsonValue;
  try {
    manifest = JSON.parse(manifestFile.data.toString("utf8")) as JsonValue;
  } catch (err) {
    throw new Error(`${file}: manifest.json is not JSON: ${messageOf(err)}`, { cause: err });
  }
  if (!Array.isArray(manifest) || manifest.length !== 1 || !isObject(manifest[0]))
    throw new Error(
      `${file}: manifest.json must describe exactly one image (it describes ${Array.isArray(manifest) ? manifest.length : "none"})`,
    );
  const entry = manifest[0];
  if (typeof entry["Config"] !== "string" || !Array.isArray(entry["Layers"]) || !entry["Layers"].every((l) => typeof l === "string"))
    throw new Error(`${file}: manifest.json's image has no Config file name or no Layers list`);
  const config = JSON.parse(get(entry["Config"]).toString("utf8")) as JsonValue;
  if (!isObject(config)) throw new Error(`${file}: the image config is not a JSON object`);
  const layers = (entry["Layers"] as string[]).map((name) => layerOf(get(name)));
  const rootfs = isObject(config["rootfs"]) ? config["rootfs"] : {};
  const diffIds = Array.isArray(rootfs["diff_ids"]) ? rootfs["diff_ids"] : [];
  if (diffIds.length !== layers.length || layers.some((l, i) => l.diffId !== diffIds[i]))
    throw new Error(`${file}: the layers' contents do not match the image config's rootfs.diff_ids`);
  return { config, layers };
}

/** writeImageTarball writes img as go-containerregistry's tarball.Write does, with no tag. */
export async function writeImageTarball(img: Image, file: string): Promise<{ configDigest: string }> {
  const configBytes = Buffer.from(JSON.stringify(img.config));
  const configName = sha256(configBytes);
  const layerFiles = img.layers.map((l) => `${l.digest.slice("sha256:".length)}.tar.gz`);
  const manifest = Buffer.from(JSON.stringify([{ Config: configName, RepoTags: null, Layers: layerFiles }]));
  const pack = tar.pack();
  const written = pipeline(pack, createWriteStream(file));
  const add = (name: string, data: Buffer) =>
    new Promise<void>((resolve, reject) =>
      pack.entry({ name, mode: 0o644, type: "file", mtime: new Date(0) }, data, (err) => (err ? reject(err) : resolve())),
    );
  await add(configName, configBytes);
  const seen = new Set<string>();
  for (const [i, l] of img.layers.entries()) {
    if (seen.has(l.digest)) continue;
    seen.add(l.digest);
    await add(layerFiles[i]!, l.compressed);
  }
  await add("manifest.json", manifest);
  pack.finalize();
  await written;
  return { configDigest: configName };
}
