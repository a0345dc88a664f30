// Runs one phase of pyodide_flow.py in a fresh Pyodide interpreter under Node.
// node pyodide_run.mjs <pyodide package dir> <wheels dir> <repository> <phase> <state file>
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [pyodideDir, wheels, repo, phase, stateFile] = process.argv.slice(2);
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, "pyodide.mjs")).href);
const py = await loadPyodide({ indexURL: pyodideDir + path.sep });
const sitePackages = py.runPython("import site; site.getsitepackages()[0]");
for (const wheel of fs.readdirSync(wheels).filter((name) => name.endsWith(".whl"))) {
  py.unpackArchive(new Uint8Array(fs.readFileSync(path.join(wheels, wheel))), "zip", { extractDir: sitePackages });
}
const { NODEFS } = py.FS.filesystems;
py.FS.mkdirTree("/repo");
py.FS.mount(NODEFS, { root: repo }, "/repo");
py.FS.mkdirTree("/state");
py.FS.mount(NODEFS, { root: path.dirname(stateFile) }, "/state");
py.globals.set("phase", phase);
py.globals.set("state_path", "/state/" + path.basename(stateFile));
const said = await py.runPythonAsync(`
import sys
sys.path.insert(0, "/repo")
from tests.hosts.cloudflare.pyodide_flow import main
await main(phase, state_path)
`);
console.log("pyodide-flow: " + said);
