// The gRPC message framing xfn puts into grpc-js (src/server/frames.ts): the
// same messages as grpc-js's own decoder, however the stream is cut, and no
// chunk kept.
import { StreamDecoder } from "@grpc/grpc-js/build/src/stream-decoder.js";
import { suite } from "uvu";
import * as assert from "uvu/assert";
import { grpcFrames, installFrameDecoder, patchDecoder, whenTooLarge, writeFrames } from "../../src/server/frames.js";
import { rng } from "../support/rng.js";

const F = suite("gRPC message framing");

/** frame is one gRPC message on the wire: flag, 4-byte length, body. */
const frame = (flag: number, body: Uint8Array): Buffer => {
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
};

type Write = (this: unknown, data: Buffer) => Buffer[];

/** feed writes each chunk through write on a fresh decoder, and returns what each write gave. */
function feed(write: Write, chunks: Buffer[], max = -1): Buffer[][] | Error {
  const d = new StreamDecoder(max);
  const out: Buffer[][] = [];
  try {
    // Each chunk is a copy, as a stream's chunks are distinct buffers.
    for (const c of chunks) out.push(write.call(d, Buffer.from(c)));
  } catch (err) {
    return err as Error;
  }
  return out;
}

const hex = (r: Buffer[][] | Error) => (r instanceof Error ? `Error: ${r.message}` : r.map((ms) => ms.map((m) => m.toString("hex"))));

/** cut splits bytes at the given offsets. */
const cut = (bytes: Buffer, at: number[]): Buffer[] => {
  const out: Buffer[] = [];
  let from = 0;
  for (const to of [...at, bytes.length]) {
    out.push(bytes.subarray(from, to));
    from = to;
  }
  return out;
};

F("every cut of a two-message stream gives what grpc-js's decoder gives, at the same chunk", () => {
  const stream = Buffer.concat([frame(0, Buffer.from("hello")), frame(1, Buffer.alloc(0)), frame(0, Buffer.from([7]))]);
  let cases = 0;
  for (let i = 0; i <= stream.length; i++) {
    for (let j = i; j <= stream.length; j++) {
      const chunks = cut(stream, [i, j]).filter((c) => c.length > 0);
      assert.equal(hex(feed(writeFrames as Write, chunks)), hex(feed(grpcFrames, chunks)), `cut at ${i}, ${j}`);
      cases++;
    }
  }
  assert.ok(cases > 100);
  // And one byte at a time.
  const bytes = [...stream].map((b) => Buffer.from([b]));
  assert.equal(hex(feed(writeFrames as Write, bytes)), hex(feed(grpcFrames, bytes)));
});

F("random streams, random cuts: the same messages as grpc-js's decoder (200 seeds)", () => {
  const sizes = [0, 1, 4, 5, 6, 127, 4095, 4096, 4097, 70_000];
  for (let seed = 1; seed <= 200; seed++) {
    const r = rng(seed);
    const msgs = Array.from({ length: 1 + r.int(4) }, () => {
      const body = Buffer.alloc(r.chance(0.5) ? r.pick(sizes) : r.int(20_000));
      for (let i = 0; i < body.length; i += 97) body[i] = r.int(256);
      return frame(r.int(2), body);
    });
    const stream = Buffer.concat(msgs);
    const cuts = [...new Set(Array.from({ length: r.int(12) }, () => r.int(stream.length + 1)))].sort((a, b) => a - b);
    const chunks = cut(stream, cuts).filter((c) => c.length > 0);
    const ours = feed(writeFrames as Write, chunks);
    assert.equal(hex(ours), hex(feed(grpcFrames, chunks)), `seed ${seed}`);
    assert.equal(
      (ours as Buffer[][]).flat().map((m) => m.toString("hex")),
      msgs.map((m) => m.toString("hex")),
    );
  }
});

F("a message over the limit is refused with grpc-js's words; one at the limit is not", () => {
  const chunks = [frame(0, Buffer.alloc(11))];
  const ours = feed(writeFrames as Write, chunks, 10);
  assert.instance(ours, Error);
  assert.is((ours as Error).message, "Received message larger than max (11 vs 10)");
  assert.is(hex(ours), hex(feed(grpcFrames, chunks, 10)));
  // Refused as soon as the length is in, before any of the body.
  assert.instance(feed(writeFrames as Write, [frame(0, Buffer.alloc(11)).subarray(0, 5)], 10), Error);
  assert.equal(hex(feed(writeFrames as Write, [frame(0, Buffer.alloc(10))], 10)), [[frame(0, Buffer.alloc(10)).toString("hex")]]);
});

F("whenTooLarge: the server's words for a message over the limit, found through the call's interceptor chain", () => {
  const decoder = new StreamDecoder(10);
  const told: Array<[number, number]> = [];
  const hook = (size: number, max: number) => (told.push([size, max]), `request is ${size} bytes, over ${max}`);
  // The base call holds the decoder; an interceptor's call wraps it as nextCall.
  assert.ok(whenTooLarge({ call: { nextCall: { decoder } } }, hook));
  const write = writeFrames as Write;
  assert.throws(() => write.call(decoder, frame(0, Buffer.alloc(11)).subarray(0, 5)), /^request is 11 bytes, over 10$/);
  assert.equal(told, [[11, 10]]);
  // A message at the limit does not call it.
  assert.equal(write.call(new StreamDecoder(10), frame(0, Buffer.alloc(10))).length, 1);
  // No decoder to be found (grpc-js's internals moved): it says so, and grpc-js's words stay.
  assert.not.ok(whenTooLarge({}, hook));
  assert.not.ok(whenTooLarge({ call: { decoder: {} } }, hook));
});

F("no chunk is kept: a chunk reused after it was written does not change the message", () => {
  // grpc-js's decoder keeps a slice of each chunk until the message is in, so a
  // chunk overwritten meanwhile changes the message; this is what pinned the
  // chunks' memory. writeFrames copies what it needs at once.
  const body = Buffer.from("abcdefghij");
  const whole = frame(0, body);
  const run = (write: Write) => {
    const d = new StreamDecoder(-1);
    const first = Buffer.from(whole.subarray(0, 8));
    assert.equal(write.call(d, first), []);
    first.fill(0);
    return write.call(d, Buffer.from(whole.subarray(8)))[0]!;
  };
  assert.is(run(writeFrames as Write).toString("hex"), whole.toString("hex"));
  assert.is.not(run(grpcFrames).toString("hex"), whole.toString("hex"), "grpc-js's decoder kept the chunk: the test can tell");
});

F("installed into grpc-js, once; a decoder that does not frame as expected is left alone", () => {
  assert.ok(installFrameDecoder());
  assert.ok(installFrameDecoder());
  assert.is(StreamDecoder.prototype.write as unknown, writeFrames);
  // A class without grpc-js's length field is not patched.
  class Other {
    write(): Buffer[] {
      return [];
    }
  }
  assert.not.ok(patchDecoder(Other as never));
  assert.is(Other.prototype.write.name, "write");
  // One with it but whose patched framing fails the self-check is restored.
  class Broken {
    maxReadMessageLength = -1;
    constructor(_max: number) {}
    write(): Buffer[] {
      return [];
    }
  }
  Object.defineProperty(Broken.prototype, "xfnFraming", {
    get: () => {
      throw new Error("no state here");
    },
  });
  const before = Broken.prototype.write;
  assert.not.ok(patchDecoder(Broken));
  assert.is(Broken.prototype.write, before);
});

F.run();
