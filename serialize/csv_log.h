// CSV training logs (one row per epoch: epoch, losses, accuracies, seconds) for spreadsheets and
// pandas. The whole file is rewritten atomically after each epoch, so a reader never sees a torn
// row and an interrupted run leaves the log of its finished epochs.
#pragma once
#include <string>
#include <vector>

#include "isa/status.h"

namespace nnasm {

// Writes `header` and then `rows` as CSV (RFC 4180: comma-separated, "\n" line ends, header
// fields quoted only when they contain a comma, quote or line break). Numbers print with fmt's
// `{}`, the shortest text that reads back as the same double ("0.1", "3", "1e-07"); NaN and
// infinities as "nan", "inf", "-inf" (which pandas reads). Errors: a row whose width differs from
// the header's (naming the row), I/O failures naming `path`. Atomic (see atomic_file.h), mode
// 0644. Thread-safe for distinct paths.
Status csv_write(const std::string& path, const std::vector<std::string>& header,
                 const std::vector<std::vector<double>>& rows);

// The text csv_write writes, without the width check.
std::string csv_format(const std::vector<std::string>& header, const std::vector<std::vector<double>>& rows);

}  // namespace nnasm
