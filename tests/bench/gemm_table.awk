# The GEMM rows of one nnasm_bench run as a table: one line per shape, one column per library
# (median CPU time in µs and GFLOP/s), then each library's time over nnasm's in the same run (above 1:
# nnasm is faster). Reads google benchmark's CSV (--benchmark_out_format=csv) with the _median
# aggregates (--benchmark_repetitions=N); rows are BM_gemm_<shape>_<library>[/<arg>]. POSIX awk.
#
#   awk -f tests/bench/gemm_table.awk build/bench/gemm.csv
BEGIN {
  FS = ","
  nlib = split("nnasm eigen openblas onednn libxsmm", lib, " ")
}
function unquote(s) { gsub(/"/, "", s); return s }
/^name,/ {
  for (i = 1; i <= NF; ++i) col[unquote($i)] = i
  next
}
!("name" in col) { next }
{
  name = unquote($1)
  if (name !~ /^BM_gemm_/ || name !~ /_median$/) next
  sub(/^BM_gemm_/, "", name)
  sub(/_median$/, "", name)
  arg = ""
  if (index(name, "/")) { arg = substr(name, index(name, "/")); name = substr(name, 1, index(name, "/") - 1) }
  for (l = 1; l <= nlib; ++l) {
    suffix = "_" lib[l]
    if (length(name) > length(suffix) && substr(name, length(name) - length(suffix) + 1) == suffix) {
      shape = substr(name, 1, length(name) - length(suffix)) arg
      if (!(shape in seen)) { seen[shape] = 1; order[++nshape] = shape }
      if (unquote($(col["error_occurred"])) == "true") { cell[shape, l] = "error"; break }
      us[shape, l] = $(col["cpu_time"]) + 0
      gf = ("FLOPS" in col) ? $(col["FLOPS"]) / 1e9 : 0
      cell[shape, l] = gf > 0 ? sprintf("%9.2f us %6.1f GF/s", us[shape, l], gf) : sprintf("%9.2f us", us[shape, l])
      break
    }
  }
}
END {
  if (!nshape) { print "gemm_table.awk: no BM_gemm_*_median rows (run with --benchmark_repetitions)"; exit 1 }
  line = sprintf("%-24s", "shape")
  for (l = 1; l <= nlib; ++l) line = line sprintf(" | %-24s", lib[l])
  print line
  for (s = 1; s <= nshape; ++s) {
    line = sprintf("%-24s", order[s])
    for (l = 1; l <= nlib; ++l) line = line sprintf(" | %-24s", ((order[s], l) in cell) ? cell[order[s], l] : "-")
    print line
  }
  print ""
  line = sprintf("%-24s", "time / nnasm time")
  for (l = 2; l <= nlib; ++l) line = line sprintf(" | %8s ", lib[l])
  print line
  for (s = 1; s <= nshape; ++s) {
    if (!((order[s], 1) in us) || us[order[s], 1] <= 0) continue
    line = sprintf("%-24s", order[s])
    for (l = 2; l <= nlib; ++l)
      line = line sprintf(" | %8s ", ((order[s], l) in us) ? sprintf("%.2f", us[order[s], l] / us[order[s], 1]) : "-")
    print line
  }
}
