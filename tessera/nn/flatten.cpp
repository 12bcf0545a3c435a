#include "tessera/nn/flatten.h"

namespace tessera::nn {

Unflatten::Unflatten(int64_t dim, std::vector<int64_t> sizes)
    : Module("Unflatten"), dim_(dim), sizes_(std::move(sizes)) {
  TESSERA_CHECK(!sizes_.empty(), "[Unflatten] unflattened_size must not be empty");
  int inferred = 0;
  for (int64_t size : sizes_) {
    TESSERA_CHECK(size >= 0 || size == -1, "[Unflatten] unflattened_size ", extra_repr(),
                  " may hold non-negative sizes and one -1");
    inferred += size == -1;
  }
  TESSERA_CHECK(inferred <= 1, "[Unflatten] unflattened_size ", extra_repr(),
                " may hold at most one -1");
}

Tensor Unflatten::forward(const Tensor& x) {
  const int64_t rank = x.dim();
  TESSERA_CHECK(dim_ >= -rank && dim_ < rank && rank > 0, "[Unflatten] dim ", dim_,
                " is out of range for an input of shape ", shape_str(x.shape()));
  const int64_t dim = dim_ < 0 ? dim_ + rank : dim_;
  const Shape& shape = x.shape();
  int64_t known = 1;
  bool infer = false;
  for (int64_t size : sizes_) {
    if (size == -1) {
      infer = true;
    } else {
      known *= size;
    }
  }
  const int64_t length = shape[static_cast<size_t>(dim)];
  const bool fits = infer ? (known != 0 && length % known == 0) : known == length;
  TESSERA_CHECK(fits, "[Unflatten] cannot split dim ", dim, " of size ", length, " of input ",
                shape_str(shape), " into ", extra_repr().substr(extra_repr().find('(')),
                infer ? "" : "; the sizes' product must equal the dim's size");
  Shape out(shape.begin(), shape.begin() + dim);
  for (int64_t size : sizes_) out.push_back(size == -1 ? length / known : size);
  out.insert(out.end(), shape.begin() + dim + 1, shape.end());
  return x.reshape(out);
}

std::string Unflatten::extra_repr() const {
  std::string sizes;
  for (size_t i = 0; i < sizes_.size(); ++i) sizes += str_cat(i == 0 ? "" : ", ", sizes_[i]);
  return str_cat("dim=", dim_, ", unflattened_size=(", sizes, sizes_.size() == 1 ? ",)" : ")");
}

}  // namespace tessera::nn
