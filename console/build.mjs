// Bundles the console (src/main.jsx and the CSS it imports) with esbuild into the node's
// package, python/artemis_py/management/console_dist/, and copies index.html beside it.
// Everything the page loads comes from there: no CDN, the console works offline.
import { build } from "esbuild";
import { copyFileSync, mkdirSync, rmSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { readFileSync } from "node:fs";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "python", "artemis_py", "management", "console_dist");

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "assets"), { recursive: true });
await build({
  entryPoints: [join(here, "src", "main.jsx")],
  outdir: join(out, "assets"),
  entryNames: "console",
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2020"],
  jsx: "automatic",
  jsxImportSource: "preact",
  legalComments: "linked",
  logLevel: "warning",
});
copyFileSync(join(here, "src", "index.html"), join(out, "index.html"));

// The page's weight, as `console/build` reports it (README: "loads fast").
let raw = 0;
let gz = 0;
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) walk(path);
    else if (!name.endsWith(".LEGAL.txt")) {
      const data = readFileSync(path);
      raw += data.length;
      gz += gzipSync(data).length;
    }
  }
};
walk(out);
console.log(`console built into ${out}: ${(raw / 1024).toFixed(1)} KiB (${(gz / 1024).toFixed(1)} KiB gzipped)`);
