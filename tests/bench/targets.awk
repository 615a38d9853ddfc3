# Issue 4's speed targets against one run of the rows that measure them (make bench-targets): one
# line per target with this machine's figure, the target and whether the figure meets it. Reads
# google benchmark's CSV (--benchmark_out_format=csv, one file per process: a file's rows must
# share their counters) with the _median aggregates (--benchmark_repetitions=N). POSIX awk.
#
#   awk -f tests/bench/targets.awk build/bench/targets_*.csv
#
# The targets are the issue's, set on a 2-core Zen 4: a time in µs for the whole-program rows; for
# SGEMM, nnasm's time over the best library's in the head-to-head rows (alternating blocks in one
# process), at most 1.03; for dispatch, ns per instruction of the streams whose time is dispatch
# (independent instructions, one kernel or five in turn; the chain's is shown without a target).
BEGIN {
  # Whole-program rows: name, what it is, target in µs.
  ntime = split("BM_threads_mlp_forward_b1/1 BM_threads_mlp_forward_b1/2 " \
                "BM_threads_gemv_1x784x256/1 BM_threads_gemv_1x784x256/2 " \
                "BM_threads_mlp_forward_b64/1 BM_threads_mlp_forward_b64/2 " \
                "BM_threads_mlp_train_b64/1 BM_threads_mlp_train_b64/2", trow, " ")
  split("8.5 5 7.5 4.5 270 140 650 350", tmax, " ")
  split("MLP 784-256-128-10, batch 1|GEMV 1x784 . 784x256|MLP 784-256-128-10, batch 64|" \
        "MLP training step, batch 64", tdesc, "|")
  nlib = split("libxsmm onednn", lib, " ")
  nsize = split("32 64 128 256 512 1024 2048", size, " ")
  ndisp = split("0 1 2", disp, " ")
  split("a chain*|independent|five kernels in turn", ddesc, "|")
}
# Splits a CSV line into f[1..n], quotes removed (a label may hold a comma); returns n.
function csv(line, f,    n, i, c, q, cur) {
  n = 0
  q = 0
  cur = ""
  for (i = 1; i <= length(line); ++i) {
    c = substr(line, i, 1)
    if (c == "\"") q = !q
    else if (c == "," && !q) { f[++n] = cur; cur = "" }
    else cur = cur c
  }
  f[++n] = cur
  return n
}
FNR == 1 { split("", col) }
/^name,/ {
  nf = csv($0, h)
  for (i = 1; i <= nf; ++i) col[h[i]] = i
  next
}
!("name" in col) { next }
{
  csv($0, f)
  name = f[1]
  if (name !~ /_median$/) next
  sub(/_median$/, "", name)
  sub(/\/iterations:[0-9]+$/, "", name)  # rows with a fixed iteration count
  if (("error_occurred" in col) && f[col["error_occurred"]] == "true") {
    err[name] = f[col["error_message"]]
    next
  }
  unit = f[col["time_unit"]]
  scale = unit == "ns" ? 1e-3 : unit == "ms" ? 1e3 : unit == "s" ? 1e6 : 1
  us[name] = f[col["real_time"]] * scale
  if ("time_ratio" in col) ratio[name] = f[col["time_ratio"]] + 0
  if ("ns_per_instruction" in col) nspi[name] = f[col["ns_per_instruction"]] * 1e9
}
function verdict(ok) { ++checked; if (ok) ++met; return ok ? "yes" : "no" }
function line(what, figure, target, ok) { printf "%-60s %-18s %-10s %s\n", what, figure, target, ok }
END {
  line("target", "this run", "issue 4", "met")
  for (i = 1; i <= ntime; ++i) {
    r = trow[i]
    what = sprintf("%s, %s", tdesc[int((i + 1) / 2)], (i % 2) ? "1 thread" : "2 threads")
    if (r in us) line(what, sprintf("%.2f us", us[r]), "<= " tmax[i] " us", verdict(us[r] <= tmax[i]))
    else line(what, (r in err) ? "error: " err[r] : "not run", "<= " tmax[i] " us", "-")
  }
  for (t = 1; t <= 2; ++t)
    for (s = 1; s <= nsize; ++s) {
      worst = 0
      best = ""
      for (l = 1; l <= nlib; ++l) {
        r = (t == 1 ? "BM_gemm_square_vs_" lib[l] "/" : "BM_threads_sgemm_vs_" lib[l] "/") size[s]
        if ((r in ratio) && ratio[r] > worst) { worst = ratio[r]; best = lib[l] }
      }
      what = sprintf("SGEMM %s^3, %s: time / best library's", size[s], t == 1 ? "1 thread" : "2 threads")
      if (best != "") line(what, sprintf("%.3f (%s)", worst, best), "<= 1.03", verdict(worst <= 1.03))
      else { line(what, "no library", "<= 1.03", "-"); nolib = 1 }
    }
  for (d = 1; d <= ndisp; ++d) {
    r = "BM_dispatch_1000_tiny/shape:" disp[d] "/mode:0"
    what = "dispatch, 1,000 one-float instructions: " ddesc[d]
    if (!(r in nspi)) line(what, "not run", d == 1 ? "-" : "<= 3 ns", "-")
    else if (d == 1) line(what, sprintf("%.2f ns each", nspi[r]), "-", "-")
    else line(what, sprintf("%.2f ns each", nspi[r]), "<= 3 ns", verdict(nspi[r] <= 3))
  }
  printf "\n%d of the %d targets measured are met in this run.\n", met, checked
  if (nolib) print "No library to compare SGEMM with: make bench-deps installs them."
  print "* Each instruction reads the one before it, so a chain also pays a float's trip through"
  print "  memory (a store forwarded to the next kernel's load, about 10 cycles): dispatch plus"
  print "  latency, shown for comparison; the target is dispatch's (docs/benchmarks.md)."
}
