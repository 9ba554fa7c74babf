// Turns the wire contract's field and enum tables, and our generated
// descriptors, into one comparable shape, so a test can check that the proto we
// wrote says exactly what the contract says.
import { ScalarType, type DescEnum, type DescField, type DescFile, type DescMessage } from "@bufbuild/protobuf";

export interface ContractField {
  number: number;
  name: string;
  type: string;
  label: string;
  json: string;
}

export interface ContractEnumValue {
  name: string;
  number: number;
}

export interface Contract {
  messages: Record<string, ContractField[]>;
  enums: Record<string, ContractEnumValue[]>;
}

const cells = (line: string): string[] =>
  line
    .trim()
    .replace(/^\|/, "")
    .replace(/\|$/, "")
    .split("|")
    .map((c) => c.trim());

const normaliseLabel = (label: string): string => label.replace(/\*\*/g, "").replace(/\s+/g, " ");

/** parseContract reads the message and enum tables of wire-contract.md. */
export function parseContract(md: string): Contract {
  const contract: Contract = { messages: {}, enums: {} };
  let message: string | undefined;
  let inEnums = false;
  let currentEnum: string | undefined;
  for (const line of md.split("\n")) {
    const heading = /^#{2,3} (.+)$/.exec(line);
    if (heading) {
      const title = heading[1]!;
      inEnums = /^\d+\. Enums/.test(title);
      const m = /^([A-Z][A-Za-z0-9]+)(\s|$)/.exec(title);
      message = !inEnums && m && line.startsWith("### ") ? m[1] : undefined;
      continue;
    }
    if (!line.startsWith("|")) continue;
    const c = cells(line);
    if (message && /^\d+$/.test(c[0] ?? "")) {
      (contract.messages[message] ??= []).push({
        number: Number(c[0]),
        name: c[1]!,
        type: c[2]!,
        label: normaliseLabel(c[3]!),
        json: c[4]!,
      });
    } else if (inEnums && c.length >= 3 && /^[A-Z_]+$/.test(c[1] ?? "") && /^\d+$/.test(c[2] ?? "")) {
      const named = /\*\*([A-Za-z]+)\*\*/.exec(c[0] ?? "");
      if (named) currentEnum = named[1];
      if (!currentEnum) throw new Error(`enum value ${c[1]} has no enum name before it`);
      (contract.enums[currentEnum] ??= []).push({ name: c[1]!, number: Number(c[2]) });
    }
  }
  return contract;
}

function typeName(pkg: string, desc: DescMessage | DescEnum): string {
  return desc.typeName.startsWith(pkg + ".") ? desc.typeName.slice(pkg.length + 1) : desc.typeName;
}

function scalarName(t: ScalarType): string {
  return ScalarType[t].toLowerCase();
}

function fieldType(pkg: string, f: DescField): string {
  switch (f.fieldKind) {
    case "scalar":
      return scalarName(f.scalar);
    case "enum":
      return typeName(pkg, f.enum);
    case "message":
      return typeName(pkg, f.message);
    case "list": {
      const inner = f.listKind === "scalar" ? scalarName(f.scalar) : typeName(pkg, f.listKind === "enum" ? f.enum : f.message);
      return `repeated ${inner}`;
    }
    case "map": {
      const value = f.mapKind === "scalar" ? scalarName(f.scalar) : typeName(pkg, f.mapKind === "enum" ? f.enum : f.message);
      return `map<${scalarName(f.mapKey)}, ${value}>`;
    }
  }
}

function fieldLabel(f: DescField): string {
  let label: string;
  if (f.fieldKind === "map") label = "map";
  else if (f.fieldKind === "list") label = "repeated";
  else if (f.oneof) label = `oneof ${f.oneof.name}`;
  else if (f.proto.proto3Optional) label = "optional";
  else label = "singular";
  return f.deprecated ? `${label}, deprecated` : label;
}

/** describeFile renders a generated file's messages and enums as a Contract. */
export function describeFile(file: DescFile): Contract {
  const pkg = file.proto.package;
  const contract: Contract = { messages: {}, enums: {} };
  for (const m of file.messages) {
    contract.messages[m.name] = m.fields.map((f) => ({
      number: f.number,
      name: f.name,
      type: fieldType(pkg, f),
      label: fieldLabel(f),
      json: f.jsonName,
    }));
  }
  for (const e of file.enums) {
    contract.enums[e.name] = e.values.map((v) => ({ name: v.name, number: v.number }));
  }
  return contract;
}
