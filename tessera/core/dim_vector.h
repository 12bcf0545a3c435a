#pragma once

// DimVector: the int64 list a shape or strides is. It keeps up to kInline
// values inside the object and moves to the heap only beyond that, so the
// shapes an op call copies (its inputs' metadata, its outputs' shapes and
// strides) cost no allocation, as PyTorch's c10::SmallVector<int64_t, 5>
// sizes do. It reads like std::vector<int64_t> and converts to and from one.

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace tessera {

class DimVector {
 public:
  using value_type = int64_t;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = int64_t&;
  using const_reference = const int64_t&;
  using pointer = int64_t*;
  using const_pointer = const int64_t*;
  using iterator = int64_t*;
  using const_iterator = const int64_t*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  // Dims kept in the object; an 8-d shape still needs no allocation.
  static constexpr size_t kInline = 8;

  DimVector() noexcept = default;
  explicit DimVector(size_t count, int64_t value = 0) { assign(count, value); }
  DimVector(std::initializer_list<int64_t> values) { assign(values.begin(), values.end()); }
  template <std::input_iterator It>
  DimVector(It first, It last) {
    assign(first, last);
  }
  // NOLINTNEXTLINE(google-explicit-constructor): a std::vector is a shape
  DimVector(const std::vector<int64_t>& values) { copy_from(values.data(), values.size()); }
  DimVector(const DimVector& other) { copy_from(other.data(), other.size()); }
  DimVector(DimVector&& other) noexcept { take(other); }
  DimVector& operator=(const DimVector& other) {
    if (this != &other) {
      clear();
      copy_from(other.data(), other.size());
    }
    return *this;
  }
  DimVector& operator=(DimVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  DimVector& operator=(std::initializer_list<int64_t> values) {
    assign(values.begin(), values.end());
    return *this;
  }
  ~DimVector() { release(); }

  // NOLINTNEXTLINE(google-explicit-constructor): a shape is a std::vector
  operator std::vector<int64_t>() const { return {begin(), end()}; }
  std::vector<int64_t> vec() const { return {begin(), end()}; }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  int64_t* data() noexcept { return heap_ ? heap_ : inline_; }
  const int64_t* data() const noexcept { return heap_ ? heap_ : inline_; }

  int64_t& operator[](size_t i) noexcept { return data()[i]; }
  const int64_t& operator[](size_t i) const noexcept { return data()[i]; }
  int64_t& at(size_t i) {
    check_index(i);
    return data()[i];
  }
  const int64_t& at(size_t i) const {
    check_index(i);
    return data()[i];
  }
  int64_t& front() noexcept { return data()[0]; }
  const int64_t& front() const noexcept { return data()[0]; }
  int64_t& back() noexcept { return data()[size_ - 1]; }
  const int64_t& back() const noexcept { return data()[size_ - 1]; }

  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }

  void reserve(size_t count) {
    if (count <= capacity_) return;
    auto* grown = new int64_t[count];
    if (size_ > 0) std::memcpy(grown, data(), size_ * sizeof(int64_t));
    delete[] heap_;
    heap_ = grown;
    capacity_ = count;
  }
  void clear() noexcept { size_ = 0; }
  void resize(size_t count, int64_t value = 0) {
    reserve(count);
    if (count > size_) std::fill(data() + size_, data() + count, value);
    size_ = count;
  }
  void assign(size_t count, int64_t value) {
    clear();
    resize(count, value);
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>)
      reserve(static_cast<size_t>(std::distance(first, last)));
    for (; first != last; ++first) push_back(static_cast<int64_t>(*first));
  }
  void push_back(int64_t value) {
    if (size_ == capacity_) reserve(capacity_ * 2);
    data()[size_++] = value;
  }
  int64_t& emplace_back(int64_t value) {
    push_back(value);
    return back();
  }
  void pop_back() noexcept { --size_; }

  iterator insert(const_iterator pos, int64_t value) { return insert(pos, size_t{1}, value); }
  iterator insert(const_iterator pos, size_t count, int64_t value) {
    const size_t at = open_gap(pos, count);
    std::fill(data() + at, data() + at + count, value);
    return data() + at;
  }
  template <std::forward_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    // A copy first: [first, last) may lie in this vector.
    const DimVector values(first, last);
    const size_t at = open_gap(pos, values.size());
    std::copy(values.begin(), values.end(), data() + at);
    return data() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<int64_t> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = static_cast<size_t>(first - begin());
    const auto count = static_cast<size_t>(last - first);
    std::copy(data() + at + count, end(), data() + at);
    size_ -= count;
    return data() + at;
  }
  void swap(DimVector& other) noexcept {
    DimVector moved(std::move(other));
    other = std::move(*this);
    *this = std::move(moved);
  }

  friend bool operator==(const DimVector& a, const DimVector& b) noexcept {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }
  friend std::strong_ordering operator<=>(const DimVector& a, const DimVector& b) noexcept {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  void release() noexcept {
    delete[] heap_;
    heap_ = nullptr;
    size_ = 0;
    capacity_ = kInline;
  }
  // Moves `other`'s values here (its heap block, or a copy of its inline
  // values) and leaves it empty. This vector must hold no heap block.
  void take(DimVector& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    heap_ = other.heap_;
    if (heap_ == nullptr && size_ > 0) std::memcpy(inline_, other.inline_, size_ * sizeof(int64_t));
    other.heap_ = nullptr;
    other.size_ = 0;
    other.capacity_ = kInline;
  }
  // Makes this empty vector hold `count` values from `values` (which may be
  // its own): one copy, and no heap block up to kInline.
  void copy_from(const int64_t* values, size_t count) {
    reserve(count);
    if (count > 0) std::memmove(data(), values, count * sizeof(int64_t));
    size_ = count;
  }
  // Makes room for `count` values at `pos`; returns its index.
  size_t open_gap(const_iterator pos, size_t count) {
    const auto at = static_cast<size_t>(pos - begin());
    const size_t old_size = size_;
    resize(size_ + count);
    std::copy_backward(data() + at, data() + old_size, data() + old_size + count);
    return at;
  }
  void check_index(size_t i) const {
    if (i >= size_) throw std::out_of_range("DimVector::at: index out of range");
  }

  int64_t* heap_ = nullptr;  // null while the values fit in inline_
  size_t size_ = 0;
  size_t capacity_ = kInline;
  int64_t inline_[kInline];
};

}  // namespace tessera
