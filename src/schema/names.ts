// The names Kubernetes validates (apimachinery pkg/util/validation/validation.go, read at
// eed236ce): DNS labels and subdomains, label keys and values, with kube's messages. The
// schema's formats and CEL's format library check names with them; so does the API
// server's metadata validation (apiserver/meta.ts).
const LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY = new RegExp(`^${LABEL_KEY_FMT}$`);
const LABEL_VALUE_FMT = `(${LABEL_KEY_FMT})?`;
export const LABEL_VALUE = new RegExp(`^${LABEL_VALUE_FMT}$`);
const DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL = new RegExp(`^${DNS1123_LABEL_FMT}$`);
const DNS1123_SUBDOMAIN_FMT = `${DNS1123_LABEL_FMT}(\\.${DNS1123_LABEL_FMT})*`;
const DNS1123_SUBDOMAIN = new RegExp(`^${DNS1123_SUBDOMAIN_FMT}$`);

export function regexError(msg: string, fmt: string, ...examples: string[]): string {
  if (!examples.length) return `${msg} (regex used for validation is '${fmt}')`;
  return `${msg} (e.g. ${examples.map((e) => `'${e}', `).join("or ")}regex used for validation is '${fmt}')`;
}

export const maxLen = (n: number) => `must be no more than ${n} characters`;

/** isDNS1123Subdomain says why value is not a DNS subdomain (none if it is). */
export function isDNS1123Subdomain(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 253) errs.push(maxLen(253));
  if (!DNS1123_SUBDOMAIN.test(value))
    errs.push(
      regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', " +
          "and must start and end with an alphanumeric character",
        DNS1123_SUBDOMAIN_FMT,
        "example.com",
      ),
    );
  return errs;
}

/** isDNS1123Label says why value is not a DNS label. */
export function isDNS1123Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!DNS1123_LABEL.test(value)) {
    if (DNS1123_SUBDOMAIN.test(value)) errs.push("must not contain dots");
    else
      errs.push(
        regexError(
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', " +
            "and must start and end with an alphanumeric character",
          DNS1123_LABEL_FMT,
          "my-name",
          "123-abc",
        ),
      );
  }
  return errs;
}

const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;

/** isDNS1035Label says why value is not a DNS-1035 label. */
export function isDNS1035Label(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push("must be no more than 63 characters");
  if (!DNS1035_LABEL.test(value))
    errs.push(
      "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, " +
        "and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    );
  return errs;
}

const KEY_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/** isQualifiedName says why value is not a label key ([prefix/]name). */
export function isQualifiedName(value: string): string[] {
  const errs: string[] = [];
  const parts = value.split("/");
  let name: string;
  if (parts.length === 1) name = parts[0]!;
  else if (parts.length === 2) {
    const prefix = parts[0]!;
    name = parts[1]!;
    if (prefix.length === 0) errs.push("prefix part must be non-empty");
    else errs.push(...isDNS1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else
    return [
      `a valid label key ${regexError(KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")} ` +
        "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    ];
  if (name.length === 0) errs.push("name part must be non-empty");
  else if (name.length > 63) errs.push(`name part ${maxLen(63)}`);
  if (!LABEL_KEY.test(name)) errs.push(`name part ${regexError(KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")}`);
  return errs;
}

/** isLabelValue says why value is not a label value. */
export function isLabelValue(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push(maxLen(63));
  if (!LABEL_VALUE.test(value))
    errs.push(
      regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', " +
          "and must start and end with an alphanumeric character",
        LABEL_VALUE_FMT,
        "MyValue",
        "my_value",
        "12345",
      ),
    );
  return errs;
}
