// Trains a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist) and
// reports test accuracy after every epoch. A checkpoint is written after
// each epoch; --resume continues from it.
//
//   ./build/examples/fashion_mnist [--epochs 5] [--batch-size 128] [--lr 0.001]
//       [--data DIR] [--checkpoint FILE] [--resume] [--seed 0] [--compile]
//       (--help lists all)
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "examples/models/cnn.h"
#include "tessera/tessera.h"
#include "tessera/utils/flags.h"
#include "tessera/utils/progress.h"

using namespace tessera;

namespace {

struct Options {
  int64_t epochs = 5;
  int64_t batch_size = 128;
  double lr = 1e-3;
  std::string data = data::FashionMNIST::default_root();
  std::string checkpoint = "fashion_mnist.ckpt.safetensors";
  bool resume = false;
  uint64_t seed = 0;
  int64_t limit = 0;  // train on only this many batches per epoch (smoke tests)
  bool compile = false;
};

Options parse(int argc, char** argv) {
  Options options;
  utils::Flags flags(
      "Trains a small CNN on Fashion-MNIST, reporting test accuracy after every epoch.");
  flags.add("--epochs", options.epochs, "passes over the training set");
  flags.add("--batch-size", options.batch_size, "images per training step");
  flags.add("--lr", options.lr, "Adam learning rate");
  flags.add("--data", options.data, "folder with the Fashion-MNIST IDX files");
  flags.add("--checkpoint", options.checkpoint, "checkpoint written after each epoch");
  flags.add_switch("--resume", options.resume, "continue from --checkpoint");
  flags.add("--seed", options.seed, "seed for initialisation and shuffling");
  flags.add("--limit", options.limit, "train on only this many batches per epoch (0: all)");
  flags.add_switch("--compile", options.compile,
                   "trace the training step into a graph (graph mode) and run that");
  flags.parse(argc, argv);
  if (options.epochs < 1 || options.batch_size < 1)
    flags.fail("--epochs and --batch-size must be at least 1");
  return options;
}

// Fraction of test images whose arg-max logit is the label.
double evaluate(nn::Module& model, data::DataLoader& loader) {
  NoGradGuard no_grad;
  model.eval();
  int64_t correct = 0, seen = 0;
  for (const data::Example& batch : loader) {
    Tensor predicted = argmax(model(batch.data), 1);
    correct += sum(eq(predicted, batch.target)).item<int64_t>();
    seen += batch.target.size(0);
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(seen);
}

int train(const Options& options) {
  manual_seed(options.seed);

  auto train_set = std::make_shared<data::FashionMNIST>(options.data, /*train=*/true);
  auto test_set = std::make_shared<data::FashionMNIST>(options.data, /*train=*/false);
  data::DataLoader train_loader(train_set, {.batch_size = options.batch_size,
                                            .shuffle = true,
                                            .seed = options.seed,
                                            .num_workers = 1});
  data::DataLoader test_loader(test_set, {.batch_size = 1000});

  auto model = models::make_cnn();
  optim::Adam optimizer(model->parameters(), {.lr = options.lr});
  nn::CrossEntropyLoss loss_fn;
  std::printf("%s\n%lld parameters, %lld training images, %lld test images, %d threads\n",
              model->repr().c_str(), static_cast<long long>(model->num_parameters()),
              static_cast<long long>(train_set->size()), static_cast<long long>(test_set->size()),
              num_threads());

  int64_t first_epoch = 0;
  if (options.resume) {
    io::Checkpoint checkpoint = io::load_checkpoint(options.checkpoint);
    model->load_state_dict(checkpoint.model);
    optimizer.load_state_dict(checkpoint.optimizer);
    if (checkpoint.rng) default_generator().set_state(checkpoint.rng->first, checkpoint.rng->second);
    first_epoch = checkpoint.step;
    std::printf("resumed from %s after epoch %lld\n", options.checkpoint.c_str(),
                static_cast<long long>(first_epoch));
  }

  // One training step: forward, loss, backward and the Adam update. With
  // --compile, graph::compile traces the whole step into one graph (its
  // first call runs eagerly and makes Adam's state; the second traces) and
  // runs the optimised graph from then on. The batch dim is marked dynamic,
  // so the epoch's short last batch re-plans the graph instead of tracing.
  auto train_step = [&](const TensorVector& batch) -> TensorVector {
    optimizer.zero_grad();
    Tensor loss = loss_fn(model->forward(batch[0]), batch[1]);
    loss.backward();
    optimizer.step();
    return {loss};
  };
  auto compiled_step = graph::compile(train_step);

  double accuracy = 0.0;
  for (int64_t epoch = first_epoch; epoch < options.epochs; ++epoch) {
    train_loader.set_epoch(epoch);
    const int64_t steps = options.limit > 0 ? std::min<int64_t>(options.limit, train_loader.size())
                                            : train_loader.size();
    utils::ProgressBar progress(
        "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(options.epochs), steps);
    int64_t step = 0;
    for (const data::Example& batch : train_loader) {
      if (step++ == steps) break;
      const TensorVector inputs{graph::dynamic(batch.data, 0), graph::dynamic(batch.target, 0)};
      Tensor loss = options.compile ? compiled_step(inputs)[0] : train_step(inputs)[0];
      progress.update(batch.target.size(0), loss.item<float>());
    }
    const double epoch_seconds = progress.elapsed();
    accuracy = evaluate(*model, test_loader);
    std::printf("epoch %lld: %.1f s, test accuracy %.2f%%\n", static_cast<long long>(epoch + 1),
                epoch_seconds, 100.0 * accuracy);

    io::Checkpoint checkpoint;
    checkpoint.model = model->state_dict();
    checkpoint.optimizer = optimizer.state_dict();
    checkpoint.step = epoch + 1;
    checkpoint.rng = {{default_generator().seed(), default_generator().offset()}};
    io::save_checkpoint(options.checkpoint, checkpoint);
  }
  if (first_epoch >= options.epochs) accuracy = evaluate(*model, test_loader);
  if (options.compile) {
    std::printf("graph mode: %d compile(s), %d re-plan(s) for other batch sizes\n",
                compiled_step.compiles(), compiled_step.replans());
  }
  std::printf("test accuracy: %.2f%%\n", 100.0 * accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    return train(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "fashion_mnist: %s\n", error.what());
    return 1;
  }
}
