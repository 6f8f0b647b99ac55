#include "core/sysinfo.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace pg {

int64_t thread_read_bytes() {
  std::ifstream f("/proc/thread-self/io");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("read_bytes:", 0) == 0) return std::stoll(line.substr(11));
  return -1;
}

int64_t available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoll(line.substr(13)) * 1024;
  return 0;
}

namespace {
std::string str_dev(dev_t d) { return "/sys/dev/block/" + std::to_string(major(d)) + ":" + std::to_string(minor(d)); }
std::string first_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string line;
  std::getline(f, line);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line;
}
}  // namespace

std::string describe_disk(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(path, ec);
  // The file system: the longest mount point that holds the path.
  std::string fstype, source;
  size_t best = 0;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string dev, mnt, type, rest; mounts >> dev >> mnt >> type && std::getline(mounts, rest);) {
    const std::string r = real.string();
    const bool under = r == mnt || (r.rfind(mnt, 0) == 0 && (mnt == "/" || r[mnt.size()] == '/'));
    if (under && mnt.size() >= best) {
      best = mnt.size();
      fstype = type;
      source = dev;
    }
  }
  struct stat st {};
  std::vector<std::string> parts;
  std::string name;
  fs::path at = real;  // a file not written yet: the folder that will hold it
  while (::stat(at.string().c_str(), &st) != 0 && at.has_parent_path() && at.parent_path() != at) at = at.parent_path();
  if (::stat(at.string().c_str(), &st) == 0 && major(st.st_dev) != 0) {
    fs::path sys = fs::canonical(str_dev(st.st_dev), ec);
    if (!ec) {
      if (fs::exists(sys / "partition")) sys = sys.parent_path();  // vda1 -> vda
      name = sys.filename().string();
      const std::string model = first_line(sys / "device" / "model");
      if (!model.empty()) parts.push_back(model);
      for (const fs::path& d :
           {sys / "device" / "driver", sys / "device" / "device" / "driver"}) {  // nvme: the controller's
        const fs::path drv = fs::read_symlink(d, ec);
        if (!ec) {
          parts.push_back(drv.filename().string());
          break;
        }
      }
      ec.clear();
      if (!fstype.empty()) parts.push_back(fstype);
      const std::string rot = first_line(sys / "queue" / "rotational");
      if (!rot.empty()) parts.push_back("rotational " + rot);
    }
  }
  if (name.empty())
    return fstype.empty() ? std::string("unknown") : fstype + (source.empty() ? "" : " (" + source + ")");
  std::string out = "/dev/" + name;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? ", " : " (") + parts[i];
  return parts.empty() ? out : out + ")";
}

std::string run_in_background(int nice) {
  std::string out;
  if (::setpriority(PRIO_PROCESS, 0, nice) == 0) out = "nice " + std::to_string(nice);
  else out = std::string("nice not set (") + std::strerror(errno) + ")";
  if (first_line("/proc/sys/kernel/sched_autogroup_enabled") == "1") {
    if (::getsid(0) != ::getpid()) {  // the autogroup is the whole session's (the shell that started us): leave it
      out += ", autogroup unchanged (it is this terminal session's: start with `setsid` to lower it too)";
    } else {
      std::ofstream f("/proc/self/autogroup");
      f << nice << std::flush;
      out += f ? ", autogroup nice " + std::to_string(nice) : std::string(", autogroup nice not set");
    }
  }
  return out;
}

}  // namespace pg
