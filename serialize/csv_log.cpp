// The CSV writer: formats the whole log in memory (a training log is a few kilobytes) and hands
// it to write_file_atomic.
#include "serialize/csv_log.h"

#include <iterator>

#include <fmt/format.h>

#include "serialize/atomic_file.h"

namespace nnasm {

namespace {

std::string quote_field(const std::string& f) {
  if (f.find_first_of(",\"\r\n") == std::string::npos) return f;
  std::string q = "\"";
  for (char c : f) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

std::string csv_format(const std::vector<std::string>& header, const std::vector<std::vector<double>>& rows) {
  std::string s;
  for (size_t i = 0; i < header.size(); ++i) s += (i ? "," : "") + quote_field(header[i]);
  s += '\n';
  for (const std::vector<double>& row : rows) {
    for (size_t i = 0; i < row.size(); ++i) fmt::format_to(std::back_inserter(s), i ? ",{}" : "{}", row[i]);
    s += '\n';
  }
  return s;
}

Status csv_write(const std::string& path, const std::vector<std::string>& header,
                 const std::vector<std::vector<double>>& rows) {
  for (size_t r = 0; r < rows.size(); ++r)
    if (rows[r].size() != header.size())
      return Status::errorf("{}: row {} has {} values but the header has {} columns", path, r, rows[r].size(),
                            header.size());
  return write_file_atomic(path, csv_format(header, rows));
}

}  // namespace nnasm
