// Tokenize .lash files with the extension's TextMate grammar, as VS Code does
// (vscode-textmate over the Oniguruma regex engine), and print every token with its
// scopes as one JSON object: {file: [[line, start, end, text, [scopes...]], ...]}.
// Usage: node test/tokenize.js FILE...   (tests/editors/test_editors_textmate.py runs it)
"use strict";

const fs = require("fs");
const path = require("path");
const vsctm = require("vscode-textmate");
const oniguruma = require("vscode-oniguruma");

const root = path.resolve(__dirname, "..");
const wasm = fs.readFileSync(require.resolve("vscode-oniguruma/release/onig.wasm"));
const onigLib = oniguruma.loadWASM(wasm.buffer).then(() => ({
  createOnigScanner: (sources) => new oniguruma.OnigScanner(sources),
  createOnigString: (text) => new oniguruma.OnigString(text),
}));

const registry = new vsctm.Registry({
  onigLib,
  loadGrammar: async (scopeName) => {
    if (scopeName !== "source.lashlang") return null;
    const file = path.join(root, "syntaxes", "lashlang.tmLanguage.json");
    return vsctm.parseRawGrammar(fs.readFileSync(file, "utf8"), file);
  },
});

async function main(files) {
  const grammar = await registry.loadGrammar("source.lashlang");
  const out = {};
  for (const file of files) {
    const lines = fs.readFileSync(file, "utf8").split("\n");
    let state = vsctm.INITIAL;
    const tokens = [];
    lines.forEach((line, number) => {
      const result = grammar.tokenizeLine(line, state);
      for (const t of result.tokens) {
        tokens.push([number, t.startIndex, t.endIndex, line.slice(t.startIndex, t.endIndex),
                     t.scopes]);
      }
      state = result.ruleStack;
    });
    out[file] = tokens;
  }
  process.stdout.write(JSON.stringify(out));
}

main(process.argv.slice(2)).catch((error) => {
  console.error(error);
  process.exit(1);
});
