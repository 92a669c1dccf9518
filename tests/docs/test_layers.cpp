// Keeps docs/architecture.md's layering true: every #include of the library's sources points at
// the file's own layer or one below, core ← autograd ← ops ← backends (ops/cpu, cuda) ← optim, nn
// ← io ← distributed, and the installed headers (include/structgrad/) include only each other.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path source_dir() {
  const char* dir = std::getenv("SG_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(__FILE__).parent_path().parent_path().parent_path();
}

/// The layers, lowest first; a file may include its own layer and those below it.
const std::map<std::string, int> kRank = {{"core", 0}, {"autograd", 1}, {"ops", 2},         {"backends", 3},
                                          {"optim", 4}, {"nn", 4},       {"data", 4},        {"io", 5},
                                          {"distributed", 6}};

/// The layer of a path relative to the source root (a source file, or an include spelling
/// resolved to one); none for files outside the layers (tests, examples, the umbrella header).
std::optional<std::string> layer_of(std::string path) {
  const std::string installed = "include/structgrad/";
  if (path.rfind(installed, 0) == 0) path = path.substr(installed.size());
  if (path.rfind("ops/cpu/", 0) == 0 || path.rfind("cuda/", 0) == 0) return "backends";
  const std::string top = path.substr(0, path.find('/'));
  if (top == path || !kRank.count(top)) return std::nullopt;
  return top;
}

std::vector<std::string> includes_of(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  static const std::regex include(R"(#\s*include\s+[<"]([^>"]+)[>"])");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), include); it != std::sregex_iterator(); ++it)
    found.push_back((*it)[1].str());
  return found;
}

std::vector<fs::path> library_files() {
  std::vector<fs::path> files;
  for (const char* dir : {"core", "autograd", "ops", "cuda", "optim", "nn", "data", "io", "distributed", "include"}) {
    const fs::path root = source_dir() / dir;
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      const std::string ext = entry.path().extension().string();
      if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh"))
        files.push_back(entry.path());
    }
  }
  return files;
}

TEST(Layers, EveryIncludePointsAtTheFilesOwnLayerOrBelow) {
  const std::vector<fs::path> files = library_files();
  ASSERT_GT(files.size(), 50u) << "the library's sources were not found under " << source_dir();
  int checked = 0;
  for (const fs::path& file : files) {
    const std::string relative = fs::relative(file, source_dir()).generic_string();
    const std::optional<std::string> from = layer_of(relative);
    if (!from) continue;
    for (const std::string& include : includes_of(file)) {
      const std::optional<std::string> to =
          include.rfind("structgrad/", 0) == 0 ? layer_of("include/" + include) : layer_of(include);
      if (!to) continue;
      ++checked;
      EXPECT_LE(kRank.at(*to), kRank.at(*from))
          << relative << " (" << *from << ") includes " << include << " (" << *to << ")";
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(Layers, InstalledHeadersIncludeOnlyInstalledHeaders) {
  const fs::path root = source_dir() / "include";
  ASSERT_TRUE(fs::exists(root / "structgrad" / "structgrad.h"));
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    for (const std::string& include : includes_of(entry.path())) {
      const bool project = include.find('/') != std::string::npos && include.rfind("Eigen/", 0) != 0;
      if (project)
        EXPECT_EQ(include.rfind("structgrad/", 0), 0u)
            << fs::relative(entry.path(), root).generic_string() << " includes " << include
            << ", which is not installed";
    }
  }
}

}  // namespace
