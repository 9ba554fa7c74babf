// Files the dev-cluster and the host write (state, its log, kubeconfigs) hold
// everything in the cluster, Secrets included, and often live in shared
// directories such as /tmp: they are created readable by their owner only
// (0600), and a path that is a symbolic link is refused rather than
// followed, so another user cannot point them at a file of theirs.
import { closeSync, constants, fchmodSync, fsyncSync, lstatSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { dirname, join, basename } from "node:path";

const { O_CREAT, O_EXCL, O_WRONLY, O_RDONLY, O_APPEND, O_NOFOLLOW } = constants;
export const PRIVATE_MODE = 0o600;

/** refuseSymlink throws if path is a symbolic link (a missing path is fine). */
export function refuseSymlink(path: string, what: string): void {
  let isLink = false;
  try {
    isLink = lstatSync(path).isSymbolicLink();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  if (isLink) throw new Error(`refusing to use ${what} ${path}: it is a symbolic link`);
}

/**
 * writeFilePrivate replaces path with data atomically: a new file (0600,
 * never through a link) next to it, flushed to disk, renamed over path, and
 * the directory flushed, so a crash leaves the old file or the new one.
 */
export function writeFilePrivate(path: string, data: string | Uint8Array, what = "file"): void {
  refuseSymlink(path, what);
  const tmp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString("hex")}.tmp`);
  const fd = openSync(tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW, PRIVATE_MODE);
  try {
    const bytes = typeof data === "string" ? Buffer.from(data) : data;
    for (let off = 0; off < bytes.length;) off += writeSync(fd, bytes, off);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkSync(tmp);
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, path);
  syncDir(dirname(path));
}

/** syncDir flushes a directory, so a rename or create in it survives a crash. */
export function syncDir(dir: string): void {
  const fd = openSync(dir, O_RDONLY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** readFileNoFollow reads path unless it is a symbolic link; undefined if it does not exist. */
export function readFileNoFollow(path: string, what: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(path, O_RDONLY | O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT") return undefined;
    if (code === "ELOOP") throw new Error(`refusing to use ${what} ${path}: it is a symbolic link`);
    throw err;
  }
  try {
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** openAppendPrivate opens path for appending (created 0600, never through a link). */
export function openAppendPrivate(path: string, what: string): number {
  try {
    const fd = openSync(path, O_CREAT | O_APPEND | O_WRONLY | O_NOFOLLOW, PRIVATE_MODE);
    fchmodSync(fd, PRIVATE_MODE); // one an older version made readable by others
    return fd;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ELOOP") throw new Error(`refusing to use ${what} ${path}: it is a symbolic link`);
    throw err;
  }
}
