#include "tessera/data/char_dataset.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "tessera/core/file.h"

namespace tessera::data {

CharDataset::CharDataset(const std::string& text, int64_t context)
    : text_(text), context_(context) {
  TESSERA_CHECK(context >= 1, "[CharDataset] context must be >= 1, got ", context);
  TESSERA_CHECK(static_cast<int64_t>(text_.size()) > context, "[CharDataset] the text has ",
                text_.size(), " bytes, too short for context ", context,
                "; it needs at least context + 1 = ", context + 1,
                " bytes (a window and the byte after it)");
}

CharDataset CharDataset::from_fortunes(int64_t context, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  TESSERA_CHECK(fs::is_directory(dir, error), "[CharDataset::from_fortunes] ", dir,
                " is not a directory; install the Debian package fortunes "
                "(apt-get install fortunes) or pass the directory holding fortune files");
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, error)) {
    const std::string extension = entry.path().extension().string();
    // .dat files are strfile's binary indexes; .u8 names are symlinks to the text.
    if (extension == ".dat" || extension == ".u8") continue;
    std::error_code entry_error;
    if (entry.is_symlink(entry_error) || !entry.is_regular_file(entry_error)) continue;
    files.push_back(entry.path());
  }
  TESSERA_CHECK(!error, "[CharDataset::from_fortunes] cannot list ", dir, ": ", error.message());
  TESSERA_CHECK(!files.empty(), "[CharDataset::from_fortunes] no fortune text files in ", dir,
                "; install the Debian package fortunes (apt-get install fortunes)");
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& file : files) {
    std::string part = read_text_file(file.string());
    if (part.empty()) continue;
    text += part;
    // Keep file boundaries on fortune boundaries.
    if (text.back() != '\n') text += '\n';
    if (part.size() < 2 || part.compare(part.size() - 2, 2, "%\n") != 0) text += "%\n";
  }
  return CharDataset(text, context);
}

std::string CharDataset::read_text_file(const std::string& path) {
  // The whole corpus is held in memory as tokens; 4 GiB of text is past any
  // use of a character-level dataset.
  return read_regular_file(path, "CharDataset::read_text_file", uint64_t{4} << 30);
}

std::string CharDataset::decode(const Tensor& tokens) {
  TESSERA_CHECK(tokens.defined(), "[CharDataset::decode] got an undefined tensor");
  TESSERA_CHECK(is_integral(tokens.dtype()), "[CharDataset::decode] tokens must be integers, got ",
                dtype_name(tokens.dtype()));
  const std::vector<int64_t> values = tokens.to_vector<int64_t>();
  std::string text(values.size(), '\0');
  for (size_t i = 0; i < values.size(); ++i) {
    TESSERA_CHECK(values[i] >= 0 && values[i] < kVocabSize, "[CharDataset::decode] token ",
                  values[i], " at position ", i, " is outside the byte vocabulary [0, ", kVocabSize,
                  ")");
    text[i] = static_cast<char>(static_cast<uint8_t>(values[i]));
  }
  return text;
}

int64_t CharDataset::size() const {
  return static_cast<int64_t>(text_.size()) - context_;
}

Example CharDataset::get(int64_t index) const {
  Example batch = get_batch({index});
  return {batch.data.select(0, 0), batch.target.select(0, 0)};
}

Example CharDataset::get_batch(const std::vector<int64_t>& indices) const {
  check_indices(indices, "CharDataset");
  const auto batch = static_cast<int64_t>(indices.size());
  Tensor data = Tensor::empty({batch, context_}, DType::i64);
  Tensor target = Tensor::empty({batch, context_}, DType::i64);
  int64_t* out = data.data<int64_t>();
  int64_t* out_target = target.data<int64_t>();
  const auto* bytes = reinterpret_cast<const uint8_t*>(text_.data());
  for (int64_t b = 0; b < batch; ++b) {
    const uint8_t* window = bytes + indices[static_cast<size_t>(b)];
    for (int64_t t = 0; t < context_; ++t) {
      out[b * context_ + t] = window[t];
      out_target[b * context_ + t] = window[t + 1];
    }
  }
  return {data, target};
}

}  // namespace tessera::data
