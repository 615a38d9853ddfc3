// The temporary-file, fsync, rename, fsync-directory sequence behind every atomic write. The
// temporary lives next to the target so that rename() stays within one file system, and so its
// errors (no such directory, no permission) are the target's and are reported as such.
#include "serialize/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace nnasm {

namespace {

std::string sys_error(const std::string& path, const char* doing) {
  return fmt::format("{}: cannot {}: {}", path, doing, std::strerror(errno));
}

// Best effort: persist the rename itself. A failure here cannot be undone and the file is in
// place, so it is not reported.
void sync_parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

}  // namespace

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
  fd_ = -1;
  tmp_.clear();
}

Status AtomicFileWriter::fail(const char* doing) {
  Status s = Status::error(sys_error(path_, doing));  // before discard() can change errno
  discard();
  return s;
}

Status AtomicFileWriter::open(const std::string& path, unsigned mode) {
  discard();
  path_ = path;
  mode_ = mode;
  std::string tmpl = path + ".tmpXXXXXX";
  fd_ = ::mkstemp(&tmpl[0]);
  if (fd_ < 0) return Status::error(sys_error(path_, "write"));
  tmp_ = tmpl;
  return Status::ok();
}

Status AtomicFileWriter::write(const void* data, size_t n) {
  if (fd_ < 0) return Status::errorf("{}: cannot write: file is not open", path_);
  size_t done = 0;
  while (done < n) {
    const ssize_t r = ::write(fd_, static_cast<const char*>(data) + done, n - done);
    if (r < 0) {
      if (errno == EINTR) continue;
      return fail("write");
    }
    done += static_cast<size_t>(r);
  }
  return Status::ok();
}

Status AtomicFileWriter::commit() {
  if (fd_ < 0) return Status::errorf("{}: cannot write: file is not open", path_);
  if (::fchmod(fd_, static_cast<mode_t>(mode_)) != 0) return fail("set the mode of");
  if (::fsync(fd_) != 0) return fail("sync");
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return fail("close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return fail("rename the temporary file to");
  tmp_.clear();
  sync_parent_dir(path_);
  return Status::ok();
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  AtomicFileWriter w;
  NNASM_TRY(w.open(path));
  NNASM_TRY(w.write(bytes.data(), bytes.size()));
  return w.commit();
}

}  // namespace nnasm
