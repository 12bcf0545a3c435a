#include <filesystem>

#include "data/idx_builder.h"
#include "testing.h"

namespace tessera::testing {
namespace {

using data::CharDataset;

std::vector<int64_t> bytes_of(const std::string& text) {
  std::vector<int64_t> out;
  for (char c : text) out.push_back(static_cast<uint8_t>(c));
  return out;
}

TEST(CharDataset, WindowsAndShiftedTargets) {
  CharDataset dataset("hello world", 4);
  EXPECT_EQ(dataset.size(), 7);
  data::Example first = dataset.get(0);
  EXPECT_EQ(first.data.dtype(), DType::i64);
  EXPECT_EQ(first.data.shape(), (Shape{4}));
  EXPECT_EQ(first.data.to_vector<int64_t>(), bytes_of("hell"));
  EXPECT_EQ(first.target.to_vector<int64_t>(), bytes_of("ello"));
  data::Example last = dataset.get(6);
  EXPECT_EQ(CharDataset::decode(last.data), "worl");
  EXPECT_EQ(CharDataset::decode(last.target), "orld");
  data::Example batch = dataset.get_batch({6, 2});
  EXPECT_EQ(batch.data.shape(), (Shape{2, 4}));
  EXPECT_EQ(CharDataset::decode(batch.data), "worlllo ");
  EXPECT_EQ(CharDataset::decode(batch.target), "orldlo w");
}

TEST(CharDataset, HighBytesAreTokensAbove127) {
  std::string text = "\xc3\xa9t\xc3\xa9";  // "été" in UTF-8
  CharDataset dataset(text, 2);
  EXPECT_EQ(dataset.get(0).data.to_vector<int64_t>(), (std::vector<int64_t>{0xc3, 0xa9}));
  EXPECT_EQ(CharDataset::decode(dataset.get_batch({0, 2, 1}).target),
            "\xa9t"
            "\xc3\xa9"
            "t\xc3");
}

TEST(CharDataset, DecodeChecksTokens) {
  EXPECT_EQ(CharDataset::decode(Tensor::from_vector<int64_t>({72, 105}, {2})), "Hi");
  EXPECT_EQ(CharDataset::decode(Tensor::from_vector<int32_t>({72, 105}, {1, 2})), "Hi");
  EXPECT_HAS(error_of([] {
               CharDataset::decode(Tensor::from_vector<int64_t>({72, 256}, {2}));
             }),
             "token 256 at position 1");
  EXPECT_HAS(error_of([] { CharDataset::decode(Tensor::from_vector<int64_t>({-1}, {1})); }),
             "token -1");
  EXPECT_HAS(error_of([] { CharDataset::decode(make({1.0, 2.0})); }), "must be integers");
}

TEST(CharDataset, TooShortTextOrBadContext) {
  EXPECT_EQ(CharDataset("abc", 2).size(), 1);
  std::string message = error_of([] { CharDataset("abc", 3); });
  EXPECT_HAS(message, "[CharDataset] the text has 3 bytes, too short for context 3");
  EXPECT_HAS(message, "at least context + 1 = 4");
  EXPECT_HAS(error_of([] { CharDataset("abc", 0); }), "context must be >= 1, got 0");
  CharDataset dataset("abcdef", 2);
  EXPECT_HAS(error_of([&] { dataset.get(4); }), "[CharDataset] index 4 is out of range");
}

TEST(CharDataset, FromFortunesReadsTextFilesOnly) {
  DataTempDir dir("fortunes");
  const std::string a = "one\n%\ntwo\n%\n";
  const std::string b = "three\n";  // no final separator: one is added
  auto as_bytes = [](const std::string& text) { return Bytes(text.begin(), text.end()); };
  dir.write("a", as_bytes(a));
  dir.write("b", as_bytes(b));
  dir.write("a.dat", Bytes{0, 0, 0, 2, 0xff, 0xfe});
  std::filesystem::create_symlink("a", dir.path() + "/a.u8");
  std::filesystem::create_symlink("b", dir.path() + "/c");
  std::filesystem::create_directory(dir.path() + "/off");
  dir.write("off/rude", as_bytes("skipped\n"));
  CharDataset dataset = CharDataset::from_fortunes(8, dir.path());
  EXPECT_EQ(dataset.text(), a + b + "%\n");
  EXPECT_EQ(dataset.size(), static_cast<int64_t>(dataset.text().size()) - 8);
  EXPECT_EQ(dataset.context(), 8);
}

TEST(CharDataset, FromFortunesErrors) {
  DataTempDir dir("fortunes");
  std::string message = error_of([&] { CharDataset::from_fortunes(8, dir.path() + "/none"); });
  EXPECT_HAS(message, "is not a directory");
  EXPECT_HAS(message, "fortunes");
  EXPECT_HAS(error_of([&] { CharDataset::from_fortunes(8, dir.path()); }), "no fortune text files");
  EXPECT_HAS(error_of([&] { CharDataset::read_text_file(dir.path() + "/missing.txt"); }),
             "cannot open");
}

TEST(CharDataset, ReadTextFileKeepsBytes) {
  DataTempDir dir("text");
  const Bytes raw = {'a', 0, '\n', 0xff, 'b'};
  EXPECT_EQ(CharDataset::read_text_file(dir.write("t", raw)), std::string("a\0\n\xff"
                                                                          "b",
                                                                          5));
}

TEST(CharDataset, DebianFortunes) {
  const std::string dir = "/usr/share/games/fortunes";
  if (!std::filesystem::exists(dir + "/fortunes")) GTEST_SKIP() << "fortunes is not installed";
  CharDataset dataset = CharDataset::from_fortunes(64);
  EXPECT_GT(dataset.size(), 100000);
  EXPECT_NE(dataset.text().find("\n%\n"), std::string::npos);
  // The file named "fortunes" starts the text of that file somewhere inside.
  std::string fortunes = CharDataset::read_text_file(dir + "/fortunes");
  EXPECT_NE(dataset.text().find(fortunes.substr(0, 200)), std::string::npos);
  EXPECT_EQ(CharDataset::decode(dataset.get(0).data), dataset.text().substr(0, 64));
}

}  // namespace
}  // namespace tessera::testing
