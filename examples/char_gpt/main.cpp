// Trains a small decoder-only transformer on the text of Debian's `fortunes`
// package, one byte per token, and prints generated fortunes as it learns.
//
//   ./build/examples/char_gpt [--steps 2000] [--batch-size 32] [--context 64]
//       [--d-model 128] [--heads 4] [--layers 4] [--lr 0.001] [--sample-every 500]
//       [--text FILE] [--seed 0] [--compile]   (--help lists all)
#include <cstdio>
#include <cstdlib>
#include <string>

#include "examples/models/gpt.h"
#include "tessera/tessera.h"
#include "tessera/utils/flags.h"
#include "tessera/utils/progress.h"

using namespace tessera;

namespace {

struct Options {
  int64_t steps = 2000;
  int64_t batch_size = 32;
  int64_t context = 64;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t layers = 4;
  double lr = 1e-3;
  int64_t sample_every = 500;
  std::string text;  // a text file instead of the fortunes
  uint64_t seed = 0;
  bool compile = false;
};

Options parse(int argc, char** argv) {
  Options options;
  utils::Flags flags(
      "Trains a small GPT on the fortunes text, one byte per token, printing samples.");
  flags.add("--steps", options.steps, "training steps");
  flags.add("--batch-size", options.batch_size, "windows per step");
  flags.add("--context", options.context, "bytes per window");
  flags.add("--d-model", options.d_model, "model width");
  flags.add("--heads", options.heads, "attention heads");
  flags.add("--layers", options.layers, "transformer blocks");
  flags.add("--lr", options.lr, "peak AdamW learning rate");
  flags.add("--sample-every", options.sample_every, "steps between generated samples");
  flags.add("--text", options.text, "train on this text file instead of the fortunes");
  flags.add("--seed", options.seed, "seed for initialisation, shuffling and sampling");
  flags.add_switch("--compile", options.compile,
                   "trace the training step into a graph (graph mode) and run that");
  flags.parse(argc, argv);
  if (options.steps < 1 || options.batch_size < 1 || options.context < 2 ||
      options.sample_every < 1)
    flags.fail("--steps, --batch-size and --sample-every must be at least 1, --context 2");
  return options;
}

// Generates a fortune: 200 bytes after a newline, at temperature 0.8.
std::string sample(models::GPT& model, Generator& generator) {
  model.eval();
  std::vector<int64_t> tokens = model.generate({'\n'}, 200, 0.8, 0, &generator);
  model.train();
  std::string text;
  // Bytes that are not printable ASCII (early samples are full of them)
  // would garble the terminal.
  for (size_t i = 1; i < tokens.size(); ++i) {
    const int64_t byte = tokens[i];
    text += (byte == '\n' || byte == '\t' || (byte >= 32 && byte < 127)) ? static_cast<char>(byte)
                                                                         : '?';
  }
  return text;
}

int train(const Options& options) {
  manual_seed(options.seed);

  auto dataset = options.text.empty()
                     ? std::make_shared<data::CharDataset>(
                           data::CharDataset::from_fortunes(options.context))
                     : std::make_shared<data::CharDataset>(
                           data::CharDataset::read_text_file(options.text), options.context);
  data::DataLoader loader(dataset, {.batch_size = options.batch_size,
                                    .shuffle = true,
                                    .drop_last = true,
                                    .seed = options.seed});

  models::GPTConfig config{.vocab_size = 256,
                           .context = options.context,
                           .d_model = options.d_model,
                           .heads = options.heads,
                           .layers = options.layers};
  auto model = std::make_shared<models::GPT>(config);
  optim::AdamW optimizer(model->parameters(), {.lr = options.lr, .weight_decay = 0.1});
  optim::LinearWarmupCosine schedule(optimizer, std::min<int64_t>(100, options.steps / 10),
                                     options.steps, options.lr / 10);
  nn::CrossEntropyLoss loss_fn;
  std::printf("%lld parameters, %lld training windows of %lld bytes, %d threads\n",
              static_cast<long long>(model->num_parameters()),
              static_cast<long long>(dataset->size()), static_cast<long long>(options.context),
              num_threads());

  // One step; with --compile traced into a graph (docs/graph_mode.md). The
  // scheduler stays outside: a compiled update reads the current lr.
  auto train_step = [&](const TensorVector& batch) -> TensorVector {
    optimizer.zero_grad();
    Tensor logits = model->forward(batch[0]);
    Tensor loss = loss_fn(logits.flatten(0, 1), batch[1].flatten());
    loss.backward();
    optim::clip_grad_norm_(model->parameters(), 1.0);
    optimizer.step();
    return {loss};
  };
  auto compiled_step = graph::compile(train_step);

  Generator sampler(options.seed + 1);
  utils::ProgressBar progress("training", options.steps);
  int64_t step = 0;
  for (int64_t epoch = 0; step < options.steps; ++epoch) {
    loader.set_epoch(epoch);
    for (const data::Example& batch : loader) {
      const TensorVector inputs{batch.data, batch.target};
      Tensor loss = options.compile ? compiled_step(inputs)[0] : train_step(inputs)[0];
      schedule.step();  // sets the lr the next step's update reads, compiled or not
      progress.update(batch.data.size(0), loss.item<float>());
      ++step;
      if (step % options.sample_every == 0 || step == options.steps) {
        std::printf("\n--- sample after step %lld ---%s\n---\n", static_cast<long long>(step),
                    sample(*model, sampler).c_str());
      }
      if (step == options.steps) break;
    }
  }
  if (options.compile) std::printf("graph mode: %d compile(s)\n", compiled_step.compiles());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  try {
    return train(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "char_gpt: %s\n", error.what());
    return 1;
  }
}
