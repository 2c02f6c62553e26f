// openapi.mjs validates the gateway's OpenAPI document (/v1/openapi.json),
// for tests/rest_test.go, in two steps:
//  1. the whole document against the official OpenAPI JSON schema of its
//     version (@seriousme/openapi-schema-validator), every $ref resolved;
//  2. every Schema Object in it as a JSON Schema 2020-12 (the OAS 3.1
//     dialect) with Ajv in strict mode, which step 1 leaves unchecked (the
//     official schema accepts any object there) and which catches unknown
//     or misspelt keywords.
//
// Input (JSON on stdin): the document.
// Output (JSON on stdout): { version, paths: { path: [methods] }, schemas,
// errors: [...] } (errors empty when the document is valid).

import { Validator } from "@seriousme/openapi-schema-validator";
import Ajv2020 from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { readInput } from "./lib.mjs";

const doc = readInput();
const errors = [];

const validator = new Validator();
const res = await validator.validate(doc);
if (!res.valid) {
  errors.push(...[].concat(res.errors).map((e) => JSON.stringify(e)));
} else {
  try {
    validator.resolveRefs();
  } catch (e) {
    errors.push("resolving $refs: " + (e.message ?? String(e)));
  }
}

const ajv = new Ajv2020({ strict: true, allErrors: true, validateFormats: true });
addFormats(ajv);
let schemas = 0;
function check(where, schema) {
  if (schema === undefined || schema.$ref !== undefined) return;
  schemas++;
  try {
    ajv.compile(schema);
  } catch (e) {
    errors.push(`${where}: ${e.message ?? e}`);
  }
}
function content(where, c) {
  for (const [type, media] of Object.entries(c ?? {})) check(`${where} ${type}`, media.schema);
}
for (const [name, s] of Object.entries(doc.components?.schemas ?? {})) check(`components.schemas.${name}`, s);
for (const [name, r] of Object.entries(doc.components?.responses ?? {})) content(`components.responses.${name}`, r.content);
const paths = {};
for (const [path, item] of Object.entries(doc.paths ?? {})) {
  paths[path] = [];
  for (const [method, op] of Object.entries(item)) {
    paths[path].push(method.toUpperCase());
    for (const p of op.parameters ?? []) check(`${method} ${path} parameter ${p.name}`, p.schema);
    content(`${method} ${path} requestBody`, op.requestBody?.content);
    for (const [status, r] of Object.entries(op.responses ?? {})) content(`${method} ${path} ${status}`, r.content);
  }
}

process.stdout.write(JSON.stringify({ version: validator.version, paths, schemas, errors }) + "\n");
