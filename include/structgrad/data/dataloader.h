// Mini-batches of in-memory tensors, in the spirit of libtorch's data::DataLoader without its
// datasets, samplers and worker threads: the tensors stay on their device, and each batch is
// gathered there (sg::index_select with a device permutation), so nothing passes through the host.
#pragma once

#include <cstdint>
#include <vector>

#include <structgrad/core/tensor.h>

namespace sg::data {

/// How a DataLoader cuts an epoch, chainable like libtorch's:
/// `sg::data::DataLoaderOptions().batch_size(64).shuffle(true).drop_last(true)`.
struct DataLoaderOptions {
  int64_t batch_size_ = 1;  ///< examples per batch
  bool shuffle_ = false;    ///< a new random order each epoch (sg::randperm, seeded by sg::manual_seed)
  bool drop_last_ = false;  ///< skip a last batch smaller than batch_size

  /// @{
  /// A copy with one option changed. Example: `sg::data::DataLoaderOptions().batch_size(32)`.
  DataLoaderOptions batch_size(int64_t b) const { auto o = *this; o.batch_size_ = b; return o; }
  DataLoaderOptions shuffle(bool s = true) const { auto o = *this; o.shuffle_ = s; return o; }
  DataLoaderOptions drop_last(bool d = true) const { auto o = *this; o.drop_last_ = d; return o; }
  /// @}
};

/// Mini-batches over tensors that share their first dimension (features, targets, labels — any
/// dtype), on one device. Iterating is one epoch: each batch is a vector with one tensor per input,
/// holding the rows of that batch. Example:
/// `for (const auto& batch : loader) { auto loss = sg::mse_loss(net.forward(batch[0]), batch[1]); ... }`
class DataLoader {
 public:
  /// Checks that the tensors are defined, share one device and one first dimension.
  /// Example: `sg::data::DataLoader loader({x, y}, sg::data::DataLoaderOptions().batch_size(64).shuffle());`
  explicit DataLoader(std::vector<Tensor> tensors, DataLoaderOptions options = {});

  /// Batches per epoch. Example: `progress.total = loader.size();`
  int64_t size() const;
  /// Examples (rows) in the data.
  int64_t num_examples() const { return examples_; }
  /// The options it was made with.
  const DataLoaderOptions& options() const { return options_; }

  /// Walks the batches of one epoch; dereferencing gives the batch's tensors.
  class Iterator {
   public:
    /// The batch's tensors, in the order the loader was given them.
    const std::vector<Tensor>& operator*() const;
    /// The batch's tensors, as a pointer. Example: `it->at(0)`.
    const std::vector<Tensor>* operator->() const { return &**this; }
    /// The next batch.
    Iterator& operator++();
    /// @{
    /// Compares batch positions (for range-for).
    bool operator==(const Iterator& other) const { return batch_ == other.batch_; }
    bool operator!=(const Iterator& other) const { return batch_ != other.batch_; }
    /// @}

   private:
    friend class DataLoader;
    Iterator(const DataLoader* loader, Tensor order, int64_t batch) : loader_(loader), order_(std::move(order)), batch_(batch) {}
    const DataLoader* loader_ = nullptr;
    Tensor order_;  // this epoch's permutation (undefined: in order)
    int64_t batch_ = 0;
    mutable std::vector<Tensor> current_;
    mutable bool ready_ = false;
  };

  /// Starts an epoch (draws its order when shuffling). Example: `for (const auto& batch : loader) ...`
  Iterator begin() const;
  /// Past the last batch.
  Iterator end() const;

 private:
  std::vector<Tensor> batch(const Tensor& order, int64_t index) const;

  std::vector<Tensor> tensors_;
  DataLoaderOptions options_;
  int64_t examples_ = 0;
};

}  // namespace sg::data
