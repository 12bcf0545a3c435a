// The docs show code from the examples; these tests keep every code block
// of a page identical to (a substring of) the files it is taken from.
#include <fstream>
#include <sstream>

#include "testing.h"

namespace tessera::testing {
namespace {

std::string read_source(const std::string& relative) {
  std::ifstream file(std::string(TESSERA_SOURCE_DIR) + "/" + relative);
  EXPECT_TRUE(file.good()) << "cannot read " << relative;
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// The ```cpp blocks of a markdown file.
std::vector<std::string> cpp_blocks(const std::string& markdown) {
  std::vector<std::string> blocks;
  size_t at = 0;
  while ((at = markdown.find("```cpp\n", at)) != std::string::npos) {
    const size_t begin = at + 7;
    const size_t end = markdown.find("```", begin);
    if (end == std::string::npos) break;
    blocks.push_back(markdown.substr(begin, end - begin));
    at = end + 3;
  }
  return blocks;
}

TEST(DocsTest, TrainFirstModelMatchesTheExample) {
  const std::string page = read_source("docs/train_first_model.md");
  const std::string sources =
      read_source("examples/fashion_mnist/main.cpp") + read_source("examples/models/cnn.h");
  const std::vector<std::string> blocks = cpp_blocks(page);
  EXPECT_GE(blocks.size(), 6u);
  for (const std::string& block : blocks)
    EXPECT_NE(sources.find(block), std::string::npos) << "not in the example:\n" << block;
}

TEST(DocsTest, GlobalTensorsTutorialMatchesTheTour) {
  const std::string page = read_source("docs/global_tensors.md");
  const std::string source = read_source("examples/global_tour/main.cpp");
  const std::vector<std::string> blocks = cpp_blocks(page);
  EXPECT_GE(blocks.size(), 6u);
  for (const std::string& block : blocks)
    EXPECT_NE(source.find(block), std::string::npos) << "not in the tour:\n" << block;
}

TEST(DocsTest, GraphModeGuideMatchesTheExamples) {
  const std::string page = read_source("docs/graph_mode.md");
  const std::string sources = read_source("examples/fashion_mnist/main.cpp") +
                              read_source("examples/char_gpt/main.cpp") +
                              read_source("examples/graph_tour/main.cpp");
  const std::vector<std::string> blocks = cpp_blocks(page);
  EXPECT_GE(blocks.size(), 4u);
  for (const std::string& block : blocks)
    EXPECT_NE(sources.find(block), std::string::npos) << "not in the examples:\n" << block;
}

TEST(DocsTest, AutoParallelGuideMatchesTheExample) {
  const std::string page = read_source("docs/auto_parallel.md");
  const std::string source = read_source("examples/gpt_parallel/main.cpp");
  const std::vector<std::string> blocks = cpp_blocks(page);
  EXPECT_GE(blocks.size(), 2u);
  for (const std::string& block : blocks)
    EXPECT_NE(source.find(block), std::string::npos) << "not in the example:\n" << block;
}

}  // namespace
}  // namespace tessera::testing
