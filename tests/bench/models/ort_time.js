// Times one model under ONNX Runtime through onnxruntime-node, for tests/bench/models/bench_models.py:
// an InferenceSession with intraOpNumThreads = THREADS, one inter-op thread, sequential execution
// and every graph optimization; the input from an .npy file; the same schedule as `nnasm bench`
// (a warm-up of at least 10 runs or a tenth of the time, then at least 10 runs or SECONDS). Prints
// one line of JSON: p50, p99, min (microseconds) and the run count; with a reference output, also
// the largest absolute difference from it and the reference's largest magnitude.
//
//   NODE_PATH=build/bench-models/ort/node_modules node ort_time.js MODEL.onnx X.npy THREADS SECONDS [Y.npy]
//
// With ORT_PROFILE=PREFIX in the environment, the session also records ONNX Runtime's own
// per-node profile (every run, warm-up included) into PREFIX_<date>.json, for
// tests/bench/models/layers.py.
//
// Each run is `await session.run(...)` with a fresh input Tensor over the same data, as a caller
// would write it; what that costs beyond the model (the binding, the promise, copying the output
// into JavaScript) the driver measures on a one-Add model and reports beside it.
"use strict";
const fs = require("fs");
const ort = require("onnxruntime-node");

// A little-endian float32 .npy file in C order (what numpy.save writes for export_zoo.py's arrays).
function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.toString("latin1", 1, 6) !== "NUMPY") throw new Error(`${path}: not an .npy file`);
  const major = buf[6];
  const hlen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = (major === 1 ? 10 : 12);
  const header = buf.toString("latin1", start, start + hlen);
  if (!/'descr':\s*'<f4'/.test(header) || /'fortran_order':\s*True/.test(header))
    throw new Error(`${path}: expected little-endian float32 in C order: ${header.trim()}`);
  const dims = header.match(/'shape':\s*\(([^)]*)\)/)[1].split(",").filter((s) => s.trim()).map(Number);
  const body = buf.subarray(start + hlen);
  // A copy: the file's bytes need not sit at a 4-byte boundary.
  const data = new Float32Array(body.length / 4);
  new Uint8Array(data.buffer).set(body);
  return { data, dims };
}

async function main() {
  const [model, xPath, threadsArg, secondsArg, yPath] = process.argv.slice(2);
  if (!secondsArg) throw new Error("usage: ort_time.js MODEL.onnx X.npy THREADS SECONDS [Y.npy]");
  const threads = Number(threadsArg), seconds = Number(secondsArg);
  const session = await ort.InferenceSession.create(model, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
    ...(process.env.ORT_PROFILE ? { enableProfiling: true, profileFilePrefix: process.env.ORT_PROFILE } : {}),
  });
  const x = readNpy(xPath);
  const inName = session.inputNames[0], outName = session.outputNames[0];
  const run = () => session.run({ [inName]: new ort.Tensor("float32", x.data, x.dims) });

  const result = {};
  if (yPath) {
    const y = readNpy(yPath).data, got = (await run())[outName].data;
    let err = 0, ref = 0;
    for (let i = 0; i < y.length; ++i) {
      err = Math.max(err, Math.abs(got[i] - y[i]));
      ref = Math.max(ref, Math.abs(y[i]));
    }
    result.max_abs_err = got.length === y.length ? err : Infinity;
    result.max_ref = ref;
  }
  const now = () => Number(process.hrtime.bigint()) / 1e3;
  const warmStart = now();
  for (let i = 0; i < 10 || now() - warmStart < 1e5 * seconds; ++i) await run();
  const times = [];
  const start = now();
  while (times.length < 10 || now() - start < 1e6 * seconds) {
    const t0 = now();
    await run();
    times.push(now() - t0);
  }
  times.sort((a, b) => a - b);
  const pct = (q) => times[Math.min(times.length - 1, Math.round(q * (times.length - 1)))];
  Object.assign(result, { p50_us: pct(0.5), p99_us: pct(0.99), min_us: times[0], runs: times.length,
                          version: ort.env.versions ? ort.env.versions.common : undefined });
  if (process.env.ORT_PROFILE) session.endProfiling();
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(`ort_time.js: ${e.message}`);
  process.exit(1);
});
