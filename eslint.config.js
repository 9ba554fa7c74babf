// ESLint: typescript-eslint's recommended rules (syntax only, so it stays fast
// on two cores; tsc in `npm test` does the type checking) plus the house rules.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["src/gen/**", "lib/**", "dist/**", "node_modules/**", ".tmp/**", "proto/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: "readonly",
        console: "readonly",
        Buffer: "readonly",
        URL: "readonly",
        setTimeout: "readonly",
        clearTimeout: "readonly",
      },
    },
    rules: {
      // Unused names are an error, except a deliberately ignored `_x`.
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrors: "none" }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      eqeqeq: ["error", "always", { null: "ignore" }],
      "no-console": "off",
    },
  },
  {
    // The library: no any, and lines a reader can see whole.
    files: ["src/**/*.ts"],
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "max-len": ["error", { code: 140, ignoreUrls: true, ignoreRegExpLiterals: true }],
      // protobuf-es writes map entries by assignment, losing a key __proto__
      // (docs/internals.md): JSON form goes through src/wire/protojson.ts.
      "no-restricted-imports": [
        "error",
        {
          paths: [
            {
              name: "@bufbuild/protobuf",
              importNames: ["clone", "fromJson", "fromJsonString", "toJson", "toJsonString", "mergeFromJson"],
              message: "these drop a map key __proto__: use src/wire/protojson.ts (messageFromJson, messageToJson, copyMessage)",
            },
          ],
        },
      ],
    },
  },
  {
    // Files and functions a reader can hold in mind (generated code is not linted).
    files: ["src/**/*.ts"],
    rules: { "max-lines": ["error", { max: 800, skipBlankLines: false, skipComments: false }] },
  },
  {
    files: ["src/**/*.ts"],
    rules: { "max-lines-per-function": ["error", { max: 120, skipBlankLines: false, skipComments: false }] },
  },
  {
    files: ["src/wire/protojson.ts"],
    rules: { "no-restricted-imports": "off" },
  },
  {
    // Tests poke at untyped JSON on purpose.
    files: ["test/**/*.ts", "functions/**/*.test.ts", "bench/**/*.ts"],
    rules: { "@typescript-eslint/no-explicit-any": "off", "@typescript-eslint/no-non-null-assertion": "off" },
  },
);
