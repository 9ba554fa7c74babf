// A writable stream that keeps what is written, for commands that take one.
import { Writable } from "node:stream";

export function sink(): { stream: Writable; text: () => string } {
  let text = "";
  const stream = new Writable({
    write(chunk, _enc, cb) {
      text += chunk;
      cb();
    },
  });
  return { stream, text: () => text };
}
