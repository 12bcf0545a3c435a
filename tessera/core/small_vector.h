#pragma once

// SmallVector<T, N>: a vector that keeps up to N elements inside the object
// and moves to the heap only beyond that, like LLVM's and c10's SmallVector.
// An op call passes its inputs, their metas and its outputs in these, so a
// call with a few operands allocates nothing for its lists. It reads like
// std::vector<T> and converts to and from one, so code that wants a
// std::vector still gets one (a copy).

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

namespace tessera {

template <typename T, size_t N>
class SmallVector {
  static_assert(N > 0, "SmallVector keeps at least one element inline");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  static constexpr size_t kInline = N;

  SmallVector() noexcept = default;
  // Every constructor delegates to the default one first, so an element
  // constructor that throws part-way leaves an object the destructor cleans
  // up: no element or heap block leaks.
  explicit SmallVector(size_t count) : SmallVector() { resize(count); }
  SmallVector(size_t count, const T& value) : SmallVector() { resize(count, value); }
  SmallVector(std::initializer_list<T> values) : SmallVector() {
    append(values.begin(), values.end());
  }
  template <std::input_iterator It>
  SmallVector(It first, It last) : SmallVector() {
    append(first, last);
  }
  // NOLINTNEXTLINE(google-explicit-constructor): reads as the std::vector it was
  SmallVector(const std::vector<T>& values) : SmallVector() {
    append(values.begin(), values.end());
  }
  // NOLINTNEXTLINE(google-explicit-constructor)
  SmallVector(std::vector<T>&& values) : SmallVector() {
    append(std::make_move_iterator(values.begin()), std::make_move_iterator(values.end()));
  }
  SmallVector(const SmallVector& other) : SmallVector() { append(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    take(other);
  }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) {
      clear();
      append(other.begin(), other.end());
    }
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> values) {
    clear();
    append(values.begin(), values.end());
    return *this;
  }
  ~SmallVector() { release(); }

  // NOLINTNEXTLINE(google-explicit-constructor): for code that takes a std::vector
  operator std::vector<T>() const& { return {begin(), end()}; }
  // NOLINTNEXTLINE(google-explicit-constructor)
  operator std::vector<T>() && {
    return {std::make_move_iterator(begin()), std::make_move_iterator(end())};
  }
  std::vector<T> vec() const { return {begin(), end()}; }

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  T* data() noexcept { return heap_ ? heap_ : inline_data(); }
  const T* data() const noexcept { return heap_ ? heap_ : inline_data(); }

  T& operator[](size_t i) noexcept { return data()[i]; }
  const T& operator[](size_t i) const noexcept { return data()[i]; }
  T& at(size_t i) {
    check_index(i);
    return data()[i];
  }
  const T& at(size_t i) const {
    check_index(i);
    return data()[i];
  }
  T& front() noexcept { return data()[0]; }
  const T& front() const noexcept { return data()[0]; }
  T& back() noexcept { return data()[size_ - 1]; }
  const T& back() const noexcept { return data()[size_ - 1]; }

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
    T* grown = std::allocator<T>().allocate(count);
    T* old = data();
    // Moved only when that cannot throw (else copied), so a failure leaves
    // this vector intact.
    if constexpr (std::is_nothrow_move_constructible_v<T>) {
      std::uninitialized_move_n(old, size_, grown);
    } else {
      try {
        std::uninitialized_copy_n(old, size_, grown);
      } catch (...) {
        std::allocator<T>().deallocate(grown, count);
        throw;
      }
    }
    std::destroy_n(old, size_);
    free_heap();
    heap_ = grown;
    capacity_ = count;
  }
  void clear() noexcept {
    std::destroy_n(data(), size_);
    size_ = 0;
  }
  void resize(size_t count) {
    if (count < size_) return truncate(count);
    reserve(count);
    std::uninitialized_value_construct_n(data() + size_, count - size_);
    size_ = count;
  }
  void resize(size_t count, const T& value) {
    if (count < size_) return truncate(count);
    reserve(count);
    std::uninitialized_fill_n(data() + size_, count - size_, value);
    size_ = count;
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    append(first, last);
  }
  void assign(size_t count, const T& value) {
    clear();
    resize(count, value);
  }

  void push_back(const T& value) { emplace_back(value); }
  void push_back(T&& value) { emplace_back(std::move(value)); }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      // `args` may refer into this vector: build the new element first.
      T value(std::forward<Args>(args)...);
      reserve(capacity_ * 2);
      ::new (static_cast<void*>(data() + size_)) T(std::move(value));
    } else {
      ::new (static_cast<void*>(data() + size_)) T(std::forward<Args>(args)...);
    }
    return data()[size_++];
  }
  void pop_back() noexcept {
    --size_;
    std::destroy_at(data() + size_);
  }

  iterator insert(const_iterator pos, const T& value) { return insert(pos, &value, &value + 1); }
  iterator insert(const_iterator pos, T&& value) {
    const auto at = static_cast<size_t>(pos - begin());
    emplace_back(std::move(value));
    std::rotate(begin() + at, end() - 1, end());
    return begin() + at;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const auto at = static_cast<size_t>(pos - begin());
    const size_t old_size = size_;
    // Appended, then rotated into place: [first, last) may lie in this vector.
    SmallVector values(first, last);
    append(std::make_move_iterator(values.begin()), std::make_move_iterator(values.end()));
    std::rotate(begin() + at, begin() + old_size, end());
    return begin() + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> values) {
    return insert(pos, values.begin(), values.end());
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const auto at = static_cast<size_t>(first - begin());
    const auto count = static_cast<size_t>(last - first);
    std::move(begin() + at + count, end(), begin() + at);
    truncate(size_ - count);
    return begin() + at;
  }
  void swap(SmallVector& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    SmallVector moved(std::move(other));
    other = std::move(*this);
    *this = std::move(moved);
  }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* inline_data() noexcept { return std::launder(reinterpret_cast<T*>(inline_)); }
  const T* inline_data() const noexcept {
    return std::launder(reinterpret_cast<const T*>(inline_));
  }
  template <typename It>
  void append(It first, It last) {
    if constexpr (std::forward_iterator<It>) {
      reserve(size_ + static_cast<size_t>(std::distance(first, last)));
      // size_ counts an element once it is built, so a throwing constructor
      // leaves only built elements for the destructor.
      for (; first != last; ++first) {
        ::new (static_cast<void*>(data() + size_)) T(*first);
        ++size_;
      }
    } else {
      for (; first != last; ++first) emplace_back(*first);
    }
  }
  void truncate(size_t count) noexcept {
    std::destroy(data() + count, data() + size_);
    size_ = count;
  }
  void free_heap() noexcept {
    if (heap_ != nullptr) std::allocator<T>().deallocate(heap_, capacity_);
    heap_ = nullptr;
  }
  void release() noexcept {
    clear();
    free_heap();
    capacity_ = N;
  }
  // Moves `other`'s elements here (its heap block, or its inline elements
  // one by one) and leaves it empty. This vector must be empty, inline.
  void take(SmallVector& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (other.heap_ != nullptr) {
      heap_ = other.heap_;
      capacity_ = other.capacity_;
      size_ = other.size_;
      other.heap_ = nullptr;
      other.capacity_ = N;
      other.size_ = 0;
      return;
    }
    std::uninitialized_move_n(other.inline_data(), other.size_, inline_data());
    size_ = other.size_;
    other.clear();
  }
  void check_index(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at: index out of range");
  }

  T* heap_ = nullptr;  // null while the elements fit inline
  size_t size_ = 0;
  size_t capacity_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

}  // namespace tessera
