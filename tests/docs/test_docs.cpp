// Keeps the documentation's code honest: every ```cpp block in README.md and docs/*.md must
// appear, line for line (indentation aside), in one of docs/snippets/*.cpp, which CTest builds
// and runs (tests/snippets.cmake); and every snippet file must be named by some document.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path source_dir() {
  const char* dir = std::getenv("SG_SOURCE_DIR");
  return dir ? fs::path(dir) : fs::path(__FILE__).parent_path().parent_path().parent_path();
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  const auto end = s.find_last_not_of(" \t\r");
  return s.substr(begin, end - begin + 1);
}

/// The lines of `text` with leading and trailing whitespace removed.
std::vector<std::string> trimmed_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(trim(line));
  return lines;
}

struct CodeBlock {
  fs::path file;
  int line = 0;  // 1-based line of the opening fence
  std::vector<std::string> lines;
};

/// The ```cpp blocks of a Markdown file.
std::vector<CodeBlock> cpp_blocks(const fs::path& markdown) {
  std::vector<CodeBlock> blocks;
  const std::vector<std::string> lines = trimmed_lines(read_file(markdown));
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != "```cpp" && lines[i] != "```c++") continue;
    CodeBlock block{markdown, static_cast<int>(i + 1), {}};
    for (++i; i < lines.size() && lines[i] != "```"; ++i) block.lines.push_back(lines[i]);
    blocks.push_back(block);
  }
  return blocks;
}

/// True when `block` occurs as a contiguous run of lines in `file_lines`.
bool contains_run(const std::vector<std::string>& file_lines, const std::vector<std::string>& block) {
  if (block.empty()) return true;
  return std::search(file_lines.begin(), file_lines.end(), block.begin(), block.end()) != file_lines.end();
}

std::vector<fs::path> markdown_files() {
  std::vector<fs::path> files = {source_dir() / "README.md"};
  for (const auto& entry : fs::directory_iterator(source_dir() / "docs"))
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<fs::path> snippet_files() {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(source_dir() / "docs" / "snippets"))
    if (entry.path().extension() == ".cpp") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

bool in_some_snippet(const CodeBlock& block) {
  for (const fs::path& snippet : snippet_files())
    if (contains_run(trimmed_lines(read_file(snippet)), block.lines)) return true;
  return false;
}

TEST(DocSnippets, EveryCppBlockOfTheDocsIsInASnippetFile) {
  int blocks = 0;
  for (const fs::path& md : markdown_files())
    for (const CodeBlock& block : cpp_blocks(md)) {
      ++blocks;
      EXPECT_TRUE(in_some_snippet(block))
          << md.lexically_relative(source_dir()).string() << ":" << block.line
          << ": this ```cpp block is not in any docs/snippets/*.cpp (copy it there verbatim so CTest compiles "
             "and runs it), first line: "
          << (block.lines.empty() ? "" : block.lines.front());
    }
  EXPECT_GE(blocks, 2) << "expected the README's training loop and the API guide's blocks";
}

TEST(DocSnippets, ReadmeTrainingLoopIsTheSnippet) {
  const std::vector<CodeBlock> blocks = cpp_blocks(source_dir() / "README.md");
  ASSERT_FALSE(blocks.empty()) << "README.md has no ```cpp block";
  const auto snippet = trimmed_lines(read_file(source_dir() / "docs" / "snippets" / "readme_training_loop.cpp"));
  EXPECT_TRUE(contains_run(snippet, blocks.front().lines));
  EXPECT_GE(blocks.front().lines.size(), 10u);
}

TEST(DocSnippets, AChangedLineIsNotFound) {
  // The check must be able to fail: alter one line of a real block and it no longer matches.
  std::vector<CodeBlock> blocks = cpp_blocks(source_dir() / "README.md");
  ASSERT_FALSE(blocks.empty());
  CodeBlock changed = blocks.front();
  ASSERT_GE(changed.lines.size(), 3u);
  changed.lines[changed.lines.size() / 2] += " // edited";
  EXPECT_FALSE(in_some_snippet(changed));
}

TEST(DocSnippets, EverySnippetIsShownByADocument) {
  std::string all_docs;
  for (const fs::path& md : markdown_files()) all_docs += read_file(md);
  const std::vector<fs::path> snippets = snippet_files();
  EXPECT_FALSE(snippets.empty());
  for (const fs::path& snippet : snippets) {
    const std::string name = "docs/snippets/" + snippet.filename().string();
    EXPECT_NE(all_docs.find(name), std::string::npos) << name << " is named by no document";
  }
}

}  // namespace
