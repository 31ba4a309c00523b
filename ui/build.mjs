// Builds the console into dist/ (or the directory given as the first
// argument): web/main.ts and its CSS bundled by esbuild, plus the static
// files. The output depends only on the sources and the locked packages:
// no hashes, no timestamps, so TestDistUpToDate can compare it byte for byte.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? join(here, "dist"));
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

await esbuild.build({
  absWorkingDir: here,
  entryPoints: { app: "web/main.ts" },
  outdir: out,
  bundle: true,
  minify: true,
  format: "iife",
  target: ["es2022", "chrome110", "firefox110", "safari16"],
  charset: "utf8",
  legalComments: "eof",
  logLevel: "warning",
});
for (const f of ["index.html", "favicon.svg"]) copyFileSync(join(here, "web", f), join(out, f));
console.log(`built ${readdirSync(out).sort().join(", ")} into ${out}`);
