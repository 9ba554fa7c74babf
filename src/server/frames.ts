// gRPC message framing for grpc-js, done without holding the HTTP/2 chunks.
//
// grpc-js's StreamDecoder turns a stream's DATA chunks into gRPC messages
// (a flag byte, a 4-byte big-endian length, the message). It keeps a slice of
// every chunk until the whole message is in, then copies them all into one
// buffer. For a 3.5 MiB request that is about 220 chunks, each pinning the
// chunk's memory; when several requests arrive at once, they arrive over
// several calls' time, so the chunks outlive young-generation collections,
// are promoted, and are freed only by full collections, which the external
// memory they hold sets off (29 full collections per 180 calls at N = 1000,
// c = 16, against 5 at c = 1; bench/README.md).
//
// writeFrames does the same framing, but copies each chunk into one buffer
// sized from the length prefix as soon as the prefix is in (grpc-go's reader
// allocates the message at its announced size too), so no chunk is kept.
// The messages it returns are byte for byte the ones grpc-js's returns, the
// length check and its error are the same, and a test compares the two over
// every way of splitting a stream into chunks.
//
// installFrameDecoder puts writeFrames in place of StreamDecoder.prototype.write.
// grpc-js gives no way to choose a decoder, so this replaces a method of one
// of its internal modules, imported by path. A grpc-js that moved the module
// would stop xfn loading at all, so package.json allows patch releases of
// 1.14 only. If one changes the decoder, the install checks itself and leaves
// grpc-js as it is (serve logs a warning), and test/server/frames.test.ts
// fails, so an upgrade cannot drop it unnoticed.
//
// The memory bound of docs/serving.md is unchanged: grpc-js feeds a call's
// bytes to the decoder only once the call is read, which xfn does only for
// admitted calls, and each is at most --max-recv-message-size.
import { StreamDecoder } from "@grpc/grpc-js/build/src/stream-decoder.js";

/** HEADER is the gRPC message prefix: a compressed flag and a 4-byte length. */
const HEADER = 5;

/** Framing is one decoder's progress through the message it is reading. */
class Framing {
  /** The prefix as it comes in (it may be split across chunks). */
  readonly head = Buffer.alloc(HEADER);
  headLen = 0;
  /** The message being filled, prefix included; undefined between messages. */
  msg: Buffer | undefined = undefined;
  at = 0;
}

interface Decoder {
  maxReadMessageLength: number;
  xfnFraming?: Framing;
  /** Set by the server for its calls (whenTooLarge): says why a message is too large, in the server's words. */
  xfnTooLarge?: TooLarge;
}

/** TooLarge is told of a message over the limit, before its body is read, and returns the message the caller gets. */
export type TooLarge = (size: number, max: number) => string;

/** writeFrames is StreamDecoder.write without holding chunks: the complete messages in data, prefix included. */
export function writeFrames(this: Decoder, data: Buffer): Buffer[] {
  const f = (this.xfnFraming ??= new Framing());
  const out: Buffer[] = [];
  let i = 0;
  while (i < data.length) {
    if (f.msg === undefined) {
      const n = Math.min(data.length - i, HEADER - f.headLen);
      data.copy(f.head, f.headLen, i, i + n);
      f.headLen += n;
      i += n;
      if (f.headLen < HEADER) break;
      f.headLen = 0;
      const size = f.head.readUInt32BE(1);
      const max = this.maxReadMessageLength;
      // grpc-js's words unless the server gave its own, for the RESOURCE_EXHAUSTED grpc-js sends.
      if (max !== -1 && size > max)
        throw new Error(this.xfnTooLarge?.(size, max) ?? `Received message larger than max (${size} vs ${max})`);
      const msg = Buffer.allocUnsafe(HEADER + size);
      f.head.copy(msg, 0);
      if (size === 0) out.push(msg);
      else {
        f.msg = msg;
        f.at = HEADER;
      }
    } else {
      const n = Math.min(data.length - i, f.msg.length - f.at);
      data.copy(f.msg, f.at, i, i + n);
      f.at += n;
      i += n;
      if (f.at === f.msg.length) {
        out.push(f.msg);
        f.msg = undefined;
      }
    }
  }
  return out;
}

type Write = (this: unknown, data: Buffer) => Buffer[];

/**
 * selfCheck runs a small stream through a decoder of cls, split three ways,
 * and tells whether it gives the two messages in it, whole.
 */
function selfCheck(cls: new (max: number) => { write: Write }): boolean {
  try {
    const frame = (flag: number, body: number[]) => Buffer.from([flag, 0, 0, 0, body.length, ...body]);
    const stream = Buffer.concat([frame(0, [1, 2, 3]), frame(0, [])]);
    for (const cuts of [[stream.length], [2, 7, stream.length], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, stream.length]]) {
      const d = new cls(-1);
      const got: Buffer[] = [];
      let from = 0;
      for (const to of cuts) {
        got.push(...d.write(stream.subarray(from, to)));
        from = to;
      }
      if (got.length !== 2 || !got[0]!.equals(frame(0, [1, 2, 3])) || !got[1]!.equals(frame(0, []))) return false;
    }
    return true;
  } catch {
    return false;
  }
}

/**
 * patchDecoder puts writeFrames in place of cls.prototype.write, if cls looks
 * like the StreamDecoder it was written against and still frames a test
 * stream correctly with it; otherwise it leaves cls as it was. It tells
 * whether writeFrames is in place.
 */
export function patchDecoder(cls: new (max: number) => { write: Write }): boolean {
  const proto = cls.prototype as { write: Write };
  if (proto.write === (writeFrames as Write)) return true;
  if (typeof proto.write !== "function" || !("maxReadMessageLength" in new cls(-1))) return false;
  const before = proto.write;
  proto.write = writeFrames as Write;
  if (selfCheck(cls)) return true;
  proto.write = before;
  return false;
}

/** installFrameDecoder puts writeFrames into grpc-js (once; later calls answer the same). */
export function installFrameDecoder(): boolean {
  return patchDecoder(StreamDecoder as unknown as new (max: number) => { write: Write });
}

/**
 * whenTooLarge has tooLarge told when the request of call (a grpc-js server
 * call, as a handler gets it) is larger than the server's limit. grpc-js then
 * answers RESOURCE_EXHAUSTED with what tooLarge returns, and reads nothing
 * more of it; without this, it answers in its own words and tells the server
 * nothing. The decoder is found through grpc-js's internals (call.call.decoder),
 * as installFrameDecoder patches them; it tells whether it found one.
 */
export function whenTooLarge(call: object, tooLarge: TooLarge): boolean {
  type Link = { decoder?: unknown; nextCall?: Link };
  // Interceptors wrap the base call, which holds the decoder, in calls of their own.
  let link = (call as { call?: Link }).call;
  for (let i = 0; link && i < 16; i++, link = link.nextCall) {
    if (link.decoder instanceof StreamDecoder) {
      (link.decoder as unknown as Decoder).xfnTooLarge = tooLarge;
      return true;
    }
  }
  return false;
}

/** grpcFrames is grpc-js's own StreamDecoder.write, taken before any install, for the tests that compare the two. */
export const grpcFrames = StreamDecoder.prototype.write as Write;
