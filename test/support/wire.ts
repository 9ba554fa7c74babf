// Building protobuf bytes by hand, for tests that need what no encoder writes.

/** varintBytes is n as a protobuf varint. */
export function varintBytes(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return out;
}

/** lengthDelimited is one length-delimited field: its tag byte, the length of parts together, then parts. */
export function lengthDelimited(tag: number, ...parts: (Uint8Array | number[])[]): number[] {
  const body = parts.flatMap((p) => [...p]);
  return [tag, ...varintBytes(body.length), ...body];
}
