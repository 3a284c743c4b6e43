// The VS Code client of `lashflow lsp`: starts the server for .lash files and hands it
// the editor's messages; everything the language knows lives in the server.
"use strict";

const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const config = vscode.workspace.getConfiguration("lashflow");
  const [command, ...args] = config.get("server.command", ["lashflow", "lsp"]);
  const tools = config.get("tools", []).flatMap((spec) => ["--tools", spec]);
  const watcher = vscode.workspace.createFileSystemWatcher(
    "**/{*.py,pyproject.toml,lashflow.toml}");
  context.subscriptions.push(watcher);
  client = new LanguageClient(
    "lashflow",
    "Lashlang (lashflow lsp)",
    { command, args: [...args, ...tools] },
    {
      documentSelector: [{ scheme: "file", language: "lashlang" }],
      synchronize: { fileEvents: watcher },
    },
  );
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
