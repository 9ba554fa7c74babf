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

// The controls JSON and YAML writers leave as they are: C1 controls, and the
// Unicode controls that reorder text (U+202E shows a line's end first). ESC and
// the other C0 controls are escaped by both writers already.
const INVISIBLE = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const HAS_CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

const uEscape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;

/** safeJson is JSON text with every C1 and bidi control escaped (\u202e): the same value, shown safely in a terminal. */
export function safeJson(json: string): string {
  return json.replace(INVISIBLE, uEscape);
}

/** hasControl tells whether a string holds a control character a terminal would act on or hide. */
export const hasControl = (s: string): boolean => HAS_CONTROL.test(s);

/**
 * safeYaml is YAML text whose scalars holding a control character were written
 * double-quoted (see hasControl): its C1 and bidi controls escaped there, as
 * YAML's double quotes allow (\u202e), so the text reads back as the same value.
 */
export function safeYaml(yaml: string): string {
  return yaml.replace(INVISIBLE, uEscape);
}
