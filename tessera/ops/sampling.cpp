#include "tessera/ops/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "tessera/core/error.h"
#include "tessera/core/grad_mode.h"

namespace tessera {
namespace {

// A uniform double in (0, 1] from counter `index` of the stream.
double uniform_at(uint64_t seed, uint64_t offset, uint64_t index) {
  const auto words = Philox::block(seed, offset, index);
  return 1.0 - Philox::to_unit_double(words[0], words[1]);
}

}  // namespace

Tensor randperm(int64_t n, DType dtype, Generator* generator) {
  TESSERA_CHECK(n >= 0, "[randperm] n must be non-negative, got ", n);
  Generator& gen = generator != nullptr ? *generator : default_generator();
  const uint64_t offset = gen.reserve(static_cast<uint64_t>(std::max<int64_t>(n, 1)));
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  // Fisher-Yates from the end, one counter per swap.
  for (int64_t i = n - 1; i > 0; --i) {
    const auto words = Philox::block(gen.seed(), offset, static_cast<uint64_t>(i));
    const uint64_t random = (static_cast<uint64_t>(words[0]) << 32) | words[1];
    const auto j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(random) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  Tensor out = Tensor::from_vector(order, {n});
  return dtype == DType::i64 ? out : out.to(dtype);
}

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement,
                   Generator* generator) {
  TESSERA_CHECK(probs.defined() && (probs.dim() == 1 || probs.dim() == 2), "[multinomial] probs "
                "must be 1-D or 2-D, got shape ", probs.defined() ? shape_str(probs.shape()) : "undefined");
  TESSERA_CHECK(is_floating(probs.dtype()), "[multinomial] probs must be floating point, got ",
                dtype_name(probs.dtype()));
  TESSERA_CHECK(num_samples > 0, "[multinomial] num_samples must be positive, got ", num_samples);
  const int64_t categories = probs.size(-1);
  const int64_t rows = probs.dim() == 2 ? probs.size(0) : 1;
  TESSERA_CHECK(categories > 0, "[multinomial] probs has no categories (shape ",
                shape_str(probs.shape()), ")");
  TESSERA_CHECK(replacement || num_samples <= categories, "[multinomial] cannot draw ",
                num_samples, " samples without replacement from ", categories, " categories");
  std::vector<double> weights;
  {
    NoGradGuard no_grad;
    weights = probs.to_vector<double>();
  }
  Generator& gen = generator != nullptr ? *generator : default_generator();
  const uint64_t per_row = static_cast<uint64_t>(replacement ? num_samples : categories);
  const uint64_t offset = gen.reserve(per_row * static_cast<uint64_t>(rows));
  std::vector<int64_t> out(static_cast<size_t>(rows * num_samples));
  for (int64_t row = 0; row < rows; ++row) {
    const double* w = weights.data() + row * categories;
    double total = 0.0;
    int64_t positive = 0;
    for (int64_t c = 0; c < categories; ++c) {
      TESSERA_CHECK(std::isfinite(w[c]) && w[c] >= 0.0, "[multinomial] probs must be finite and "
                    "non-negative; row ", row, " has ", w[c], " at category ", c);
      total += w[c];
      positive += w[c] > 0.0;
    }
    TESSERA_CHECK(total > 0.0, "[multinomial] row ", row, " of probs sums to 0");
    TESSERA_CHECK(replacement || num_samples <= positive, "[multinomial] cannot draw ",
                  num_samples, " samples without replacement: row ", row, " has only ", positive,
                  " categories with non-zero probability");
    const uint64_t base = static_cast<uint64_t>(row) * per_row;
    int64_t* samples = out.data() + row * num_samples;
    if (replacement) {
      std::vector<double> cumulative(static_cast<size_t>(categories));
      std::partial_sum(w, w + categories, cumulative.begin());
      for (int64_t s = 0; s < num_samples; ++s) {
        const double target = (1.0 - uniform_at(gen.seed(), offset, base + s)) * total;
        auto it = std::upper_bound(cumulative.begin(), cumulative.end(), target);
        int64_t c = std::min<int64_t>(it - cumulative.begin(), categories - 1);
        while (w[c] == 0.0 && c > 0) --c;  // never a zero-weight category
        samples[s] = c;
      }
    } else {
      // Sequential sampling without replacement equals taking the smallest
      // keys -log(u) / w (exponential races).
      std::vector<std::pair<double, int64_t>> keys;
      for (int64_t c = 0; c < categories; ++c) {
        if (w[c] > 0.0)
          keys.emplace_back(-std::log(uniform_at(gen.seed(), offset, base + c)) / w[c], c);
      }
      std::partial_sort(keys.begin(), keys.begin() + num_samples, keys.end());
      for (int64_t s = 0; s < num_samples; ++s) samples[s] = keys[static_cast<size_t>(s)].second;
    }
  }
  return Tensor::from_vector(out, probs.dim() == 2 ? Shape{rows, num_samples} : Shape{num_samples});
}

}  // namespace tessera
