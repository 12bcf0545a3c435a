#include "tessera/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include "tessera/core/file.h"

namespace tessera::data {

namespace {

struct IdxType {
  uint8_t code;
  const char* name;
  size_t bytes;  // per element in the file
  DType dtype;   // in memory
};

constexpr IdxType kIdxTypes[] = {
    {0x08, "u8", 1, DType::u8},   {0x09, "i8", 1, DType::i32},  {0x0B, "i16", 2, DType::i32},
    {0x0C, "i32", 4, DType::i32}, {0x0D, "f32", 4, DType::f32}, {0x0E, "f64", 8, DType::f64},
};

bool is_gzip(const uint8_t* data, size_t size) {
  return size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

uint64_t load_big_endian(const uint8_t* bytes, size_t count) {
  uint64_t value = 0;
  for (size_t i = 0; i < count; ++i) value = (value << 8) | bytes[i];
  return value;
}

std::string hex_byte(uint8_t byte) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[byte >> 4] + digits[byte & 15];
}

// The total size (header and data) that the IDX header at `data` declares,
// once `size` bytes hold the whole header; nullopt before that. Overflow
// reads as "more than any limit".
std::optional<uint64_t> declared_size(const uint8_t* data, size_t size) {
  if (size < 4 || size < 4 + 4 * size_t{data[3]}) return std::nullopt;
  const IdxType* type = nullptr;
  for (const IdxType& candidate : kIdxTypes) {
    if (candidate.code == data[2]) type = &candidate;
  }
  if (type == nullptr) return std::nullopt;  // parse_plain names the problem
  uint64_t total = type->bytes;
  for (size_t d = 0; d < data[3]; ++d) {
    if (__builtin_mul_overflow(total, load_big_endian(data + 4 + 4 * d, 4), &total)) {
      return UINT64_MAX;
    }
  }
  const uint64_t header = 4 + 4 * uint64_t{data[3]};
  return total > UINT64_MAX - header ? UINT64_MAX : total + header;
}

// Inflates every gzip member in [data, data + size), growing the output as
// data actually arrives so a hostile header cannot force a huge allocation.
// Once the IDX header is out, the size it declares bounds the output: a
// declared size over the limit, or more data than declared, stops at once.
std::vector<uint8_t> gunzip(const uint8_t* data, size_t size, const std::string& name,
                            const char* op) {
  z_stream stream{};
  TESSERA_CHECK(inflateInit2(&stream, 16 + MAX_WBITS) == Z_OK, "[", op, "] ", name,
                ": could not initialise zlib");
  std::vector<uint8_t> out(std::clamp<size_t>(size * 4, 4096, size_t{64} << 20));
  size_t produced = 0;
  size_t consumed = 0;
  std::string problem;
  bool member_done = false;
  std::optional<uint64_t> expected;  // what the header declares, once known
  while (problem.empty()) {
    if (!expected && (expected = declared_size(out.data(), produced))) {
      if (*expected > kMaxIdxBytes) {
        problem = str_cat(
            "the IDX header declares ",
            *expected == UINT64_MAX ? std::string("more than 2^64") : std::to_string(*expected),
            " bytes, more than the ", kMaxIdxBytes, "-byte limit for an IDX file");
        break;
      }
    }
    if (expected && produced > *expected) {
      problem = str_cat("decompresses to more than the ", *expected,
                        " bytes its IDX header declares (trailing garbage)");
      break;
    }
    if (member_done) {
      // gzip allows several members back to back; anything else is garbage.
      if (consumed == size) break;
      if (!is_gzip(data + consumed, size - consumed)) {
        problem = str_cat("unexpected ", size - consumed,
                          " bytes after the end of the gzip stream (expected another gzip "
                          "member starting 1f 8b, or the end of the file)");
        break;
      }
      inflateReset(&stream);
      member_done = false;
    }
    if (produced == out.size()) {
      if (out.size() >= kMaxIdxBytes) {
        problem = str_cat("decompresses to more than ", kMaxIdxBytes,
                          " bytes, the limit for an IDX file");
        break;
      }
      // One byte past the declared size is enough to see trailing garbage.
      const uint64_t cap = expected ? *expected + 1 : kMaxIdxBytes;
      out.resize(static_cast<size_t>(std::min<uint64_t>(out.size() * uint64_t{2}, cap)));
    }
    // zlib counts in 32-bit units; feed very large buffers in pieces.
    const size_t input_chunk = std::min<size_t>(size - consumed, 1u << 30);
    const size_t output_chunk = std::min<size_t>(out.size() - produced, 1u << 30);
    stream.next_in = const_cast<Bytef*>(data + consumed);
    stream.avail_in = static_cast<uInt>(input_chunk);
    stream.next_out = out.data() + produced;
    stream.avail_out = static_cast<uInt>(output_chunk);
    const int status = inflate(&stream, Z_NO_FLUSH);
    consumed += input_chunk - stream.avail_in;
    produced += output_chunk - stream.avail_out;
    if (status == Z_STREAM_END) {
      member_done = true;
    } else if (status == Z_BUF_ERROR) {
      // No progress was possible although output space was free: input is missing.
      problem = consumed == size ? "the gzip stream ends early (truncated file?)"
                                 : "corrupt gzip data (zlib made no progress)";
    } else if (status != Z_OK) {
      problem = str_cat("corrupt gzip data (zlib: ", stream.msg ? stream.msg : zError(status), ")");
    }
  }
  inflateEnd(&stream);
  TESSERA_CHECK(problem.empty(), "[", op, "] ", name, ": ", problem);
  out.resize(produced);
  return out;
}

// Converts `count` big-endian elements of `bytes` each (signed integers or
// floats, as every multi-byte IDX type is) into T.
template <typename T>
void decode_elements(const uint8_t* src, size_t count, size_t bytes, T* dst) {
  for (size_t i = 0; i < count; ++i, src += bytes) {
    uint64_t raw = load_big_endian(src, bytes);
    if constexpr (std::is_floating_point_v<T>) {
      if (bytes == 4) {
        const auto bits = static_cast<uint32_t>(raw);
        float value;
        std::memcpy(&value, &bits, sizeof(value));
        dst[i] = static_cast<T>(value);
      } else {
        double value;
        std::memcpy(&value, &raw, sizeof(value));
        dst[i] = static_cast<T>(value);
      }
    } else {
      // Sign-extend from the stored width.
      if (bytes < 8 && (raw >> (bytes * 8 - 1)) != 0) raw |= ~uint64_t{0} << (bytes * 8);
      dst[i] = static_cast<T>(static_cast<int64_t>(raw));
    }
  }
}

Tensor parse_plain(const uint8_t* data, size_t size, const std::string& name, const char* op) {
  TESSERA_CHECK(size >= 4, "[", op, "] ", name, ": truncated header: ", size,
                " bytes, an IDX file starts with 4 bytes (0x00 0x00 type ndims)");
  TESSERA_CHECK(data[0] == 0 && data[1] == 0, "[", op, "] ", name, ": bad magic ",
                hex_byte(data[0]), " ", hex_byte(data[1]),
                "; an IDX file starts with 0x00 0x00 (or 1f 8b if gzip-compressed)");
  const IdxType* type = nullptr;
  for (const IdxType& candidate : kIdxTypes) {
    if (candidate.code == data[2]) type = &candidate;
  }
  TESSERA_CHECK(type != nullptr, "[", op, "] ", name, ": unknown element type ", hex_byte(data[2]),
                "; valid: 0x08 (u8), 0x09 (i8), 0x0b (i16), 0x0c (i32), 0x0d (f32), 0x0e (f64)");
  const size_t ndims = data[3];
  const size_t header = 4 + 4 * ndims;
  TESSERA_CHECK(size >= header, "[", op, "] ", name, ": truncated header: ", ndims, " dims need ",
                header, " header bytes, but the file has ", size);
  Shape shape(ndims);
  // Strides multiply the non-zero dims even when another dim is 0, so their
  // product must fit in int64 whatever the element count.
  int64_t extent = 1;
  bool too_large = false;
  bool empty = false;
  for (size_t d = 0; d < ndims; ++d) {
    shape[d] = static_cast<int64_t>(load_big_endian(data + 4 + 4 * d, 4));
    if (shape[d] == 0) {
      empty = true;
    } else {
      too_large = too_large || __builtin_mul_overflow(extent, shape[d], &extent);
    }
  }
  TESSERA_CHECK(!too_large, "[", op, "] ", name, ": dims ", shape_str(shape),
                " are too large: the product of the non-zero dims exceeds 2^63 - 1");
  const uint64_t count = empty ? 0 : static_cast<uint64_t>(extent);
  uint64_t payload = 0;
  const bool overflow = __builtin_mul_overflow(count, static_cast<uint64_t>(type->bytes), &payload);
  const uint64_t available = size - header;
  TESSERA_CHECK(!overflow && payload <= available, "[", op, "] ", name, ": dims ", shape_str(shape),
                " of ", type->name, " need ",
                overflow ? std::string("more than 2^64") : std::to_string(payload),
                " data bytes, but only ", available, " follow the header (truncated file?)");
  TESSERA_CHECK(payload == available, "[", op, "] ", name, ": ", available - payload,
                " bytes of trailing garbage after the ", payload, " data bytes that dims ",
                shape_str(shape), " of ", type->name, " declare");

  Tensor out = Tensor::empty(shape, type->dtype);
  const uint8_t* src = data + header;
  const auto elements = static_cast<size_t>(count);
  if (elements == 0) return out;
  switch (type->dtype) {
    case DType::u8:
      std::memcpy(out.data<uint8_t>(), src, elements);
      break;
    case DType::i32:
      decode_elements(src, elements, type->bytes, out.data<int32_t>());
      break;
    case DType::f32:
      decode_elements(src, elements, type->bytes, out.data<float>());
      break;
    default:
      decode_elements(src, elements, type->bytes, out.data<double>());
      break;
  }
  return out;
}

Tensor parse(const uint8_t* data, size_t size, const std::string& name, const char* op) {
  TESSERA_CHECK(data != nullptr || size == 0, "[", op, "] ", name, ": null data pointer with size ",
                size);
  if (!is_gzip(data, size)) return parse_plain(data, size, name, op);
  std::vector<uint8_t> inflated = gunzip(data, size, name, op);
  return parse_plain(inflated.data(), inflated.size(), name + " (after gunzip)", op);
}

}  // namespace

Tensor read_idx(const std::string& path) {
  const RegularFile file(path, "read_idx");
  // gzip never shrinks what it cannot compress, so a file over the limit
  // could only inflate past it too.
  TESSERA_CHECK(file.size() <= kMaxIdxBytes, "[read_idx] '", path, "' has ", file.size(),
                " bytes, more than the ", kMaxIdxBytes, "-byte limit for an IDX file");
  std::vector<uint8_t> bytes(static_cast<size_t>(file.size()));
  file.read_at(bytes.data(), bytes.size(), 0);
  return parse(bytes.data(), bytes.size(), path, "read_idx");
}

Tensor parse_idx(const uint8_t* data, size_t size, const std::string& name) {
  return parse(data, size, name, "parse_idx");
}

}  // namespace tessera::data
