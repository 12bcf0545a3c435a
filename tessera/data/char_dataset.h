#pragma once

// Byte-level next-character prediction: the text's bytes are the tokens
// (vocabulary 256) and each example is a window of `context` bytes with the
// window shifted by one as its target, as in char-level language models.

#include <string>

#include "tessera/data/dataset.h"

namespace tessera::data {

class CharDataset : public Dataset {
 public:
  static constexpr int64_t kVocabSize = 256;

  // Examples i = 0 .. text.size() - context - 1. Throws unless context >= 1
  // and the text has at least context + 1 bytes.
  CharDataset(const std::string& text, int64_t context);

  // The plain-text files of Debian's fortunes package in `dir` (sorted by
  // name; .dat/.u8 index files, symlinks and subdirectories skipped),
  // concatenated with their "%" separator lines kept.
  static CharDataset from_fortunes(int64_t context,
                                   const std::string& dir = "/usr/share/games/fortunes");
  // The bytes of the file at `path`.
  static std::string read_text_file(const std::string& path);
  // The bytes of integer tokens in [0, 256) (any shape, row-major) as a string.
  static std::string decode(const Tensor& tokens);

  // Number of windows: text().size() - context().
  int64_t size() const override;
  // data = bytes[i, i + context), target = bytes[i + 1, i + context + 1), both i64 [context].
  Example get(int64_t index) const override;
  // data and target: i64 [B, context].
  Example get_batch(const std::vector<int64_t>& indices) const override;

  // Window length.
  int64_t context() const { return context_; }
  // The whole text.
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  int64_t context_;
};

}  // namespace tessera::data
