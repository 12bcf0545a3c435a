// docs/ops.md is generated from the op registry (names, PyTorch names,
// signatures, SBP signatures), so it cannot go stale: this test regenerates
// it and fails when the checked-in page differs. To rewrite the page:
//   TESSERA_UPDATE_DOCS=1 ./build/tests/tessera_tests --gtest_filter='OpReference.*'

#include <algorithm>
#include <fstream>
#include <sstream>

#include "testing.h"

namespace tessera::testing {
namespace {

const std::string kPage = std::string(TESSERA_SOURCE_DIR) + "/docs/ops.md";
const char* kRegenerate =
    "TESSERA_UPDATE_DOCS=1 ./build/tests/tessera_tests --gtest_filter='OpReference.*'";

std::vector<const OpDef*> sorted_ops() {
  std::vector<const OpDef*> ops = all_ops();
  std::sort(ops.begin(), ops.end(),
            [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  return ops;
}

std::string shapes_of(const MetaVector& metas) {
  std::string text;
  for (size_t i = 0; i < metas.size(); ++i) {
    text += (i ? ", " : "") + std::string(dtype_name(metas[i].dtype)) + shape_str(metas[i].shape);
  }
  return text;
}

// The SBP signatures of `op` on its registered example inputs.
std::string sbp_column(const OpDef& op) {
  for (const SbpCase& c : sbp_cases()) {
    if (c.op != op.name) continue;
    MetaVector metas;
    for (const Tensor& input : c.inputs()) metas.push_back(input.meta());
    std::string text = "on " + shapes_of(metas) + ":";
    for (const SbpSignature& signature : sbp_signatures(op, metas, c.attrs)) {
      text += " `" + signature_str(signature) + "`";
    }
    return text;
  }
  return "(no example)";
}

std::string escape_cell(std::string text) {
  std::string escaped;
  for (char c : text) {
    if (c == '|') escaped += "\\";
    escaped += c;
  }
  return escaped;
}

std::string generate_page() {
  std::ostringstream page;
  page << "# Op reference\n\n"
       << "Every op in Tessera's registry: the PyTorch function it implements, the public C++\n"
       << "function(s) that reach it, whether it has a gradient, and the SBP signatures it\n"
       << "declares (input SBPs -> output SBPs) on an example input; the all-broadcast\n"
       << "signature is always valid and listed last. Ops marked internal are the pieces\n"
       << "other ops' gradients call.\n\n"
       << "This page is generated from the registry by tests/docs/op_reference_test.cpp and\n"
       << "checked by CI; after adding or changing an op, regenerate it with\n\n"
       << "```\n" << kRegenerate << "\n```\n\n"
       << "| op | PyTorch | C++ | grad | SBP signatures |\n"
       << "|---|---|---|---|---|\n";
  for (const OpDef* op : sorted_ops()) {
    const bool has_grad = op->differentiable && op->grad != nullptr;
    page << "| `" << op->name << "` | " << escape_cell(op->torch_name) << " | `"
         << escape_cell(op->signature) << "` | " << (has_grad ? "yes" : "no") << " | "
         << escape_cell(sbp_column(*op)) << " |\n";
  }
  return page.str();
}

std::string read_page() {
  std::ifstream file(kPage);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

TEST(OpReference, EveryOpHasItsPyTorchNameAndSignature) {
  std::string missing;
  for (const OpDef* op : sorted_ops()) {
    if (op->torch_name.empty() || op->signature.empty()) missing += " " + op->name;
  }
  EXPECT_TRUE(missing.empty())
      << "ops without torch_name or signature (set both in the op's OpDef; internal ops use "
         "torch_name = \"internal\"):"
      << missing;
}

TEST(OpReference, DocsPageIsGeneratedFromTheRegistry) {
  const std::string generated = generate_page();
  if (std::getenv("TESSERA_UPDATE_DOCS")) {
    std::ofstream(kPage) << generated;
  }
  EXPECT_TRUE(read_page() == generated)
      << "docs/ops.md differs from the op registry; regenerate it with\n  " << kRegenerate;
}

}  // namespace
}  // namespace tessera::testing
