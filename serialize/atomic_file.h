// Atomic file writes, shared by every writer of output files (.npy, CSV logs, SVG plots): the
// bytes go to a temporary file in the target's directory, are fsync'ed, and the temporary is
// renamed over the target, then the directory is synced. A reader (or a crash) never sees a
// half-written file; on any error the target is untouched and the temporary is removed.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "isa/status.h"

namespace nnasm {

// Streams a file into place: open(), any number of write()s, commit(). Destroying it without a
// successful commit() removes the temporary. Messages name the target path and the system's
// reason. Move-only in spirit (not copyable); one writer per thread.
class AtomicFileWriter {
 public:
  AtomicFileWriter() = default;
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Creates the temporary `path`.tmpXXXXXX. The final file gets `mode` (mkstemp's 0600 is wrong
  // for data meant to be shared).
  Status open(const std::string& path, unsigned mode = 0644);
  Status write(const void* data, size_t n);
  // Sets the mode, syncs, closes and renames over the target. After an error the writer is closed.
  Status commit();

 private:
  Status fail(const char* doing);
  void discard();

  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  unsigned mode_ = 0644;
};

// Writes `bytes` to `path` atomically with mode 0644. Thread-safe for distinct paths.
Status write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace nnasm
