// Text from a cluster, printed to a terminal. Anything a user or a controller
// can write into an object (a condition's message, an external name, a
// finalizer, an annotation) reaches xfn trace's table; escape sequences in it
// would clear the screen, retitle the window, plant a hyperlink or rewrite what
// the rows above say. kubectl shows ESC as ^[ (cli-runtime's
// printers.EscapeTerminal); xfn does the same, and shows every other control
// character as an escape a reader can see.

// C0 controls, DEL, C1 controls, and the Unicode controls that reorder text (bidi embeddings, overrides and isolates).
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const NAMED: Record<string, string> = { "\x1b": "^[", "\n": "\\n", "\r": "\\r", "\t": "\\t" };

/**
 * printable is s with every control character shown as a visible escape: ESC
 * as ^[, a newline as \n, others as \xNN or \uNNNN. With lines, newlines and
 * tabs are kept (a message of several lines, printed as such).
 */
export function printable(s: string, opts: { lines?: boolean } = {}): string {
  return s.replace(CONTROL, (c) => {
    if (opts.lines && (c === "\n" || c === "\t")) return c;
    const code = c.charCodeAt(0);
    return NAMED[c] ?? (code <= 0xff ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16)}`);
  });
}
