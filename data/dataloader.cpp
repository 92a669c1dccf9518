// DataLoader: an epoch's order from sg::randperm on the data's device, batches gathered there.
#include <structgrad/data/dataloader.h>

#include <structgrad/ops/factories.h>
#include <structgrad/ops/index.h>

namespace sg::data {

DataLoader::DataLoader(std::vector<Tensor> tensors, DataLoaderOptions options)
    : tensors_(std::move(tensors)), options_(options) {
  SG_CHECK(!tensors_.empty(), "DataLoader: expected at least one tensor");
  SG_CHECK(options_.batch_size_ >= 1, "DataLoader: batch_size must be at least 1, got ", options_.batch_size_);
  for (size_t k = 0; k < tensors_.size(); ++k) {
    const Tensor& t = tensors_[k];
    SG_CHECK(t.defined(), "DataLoader: tensor ", k, " is undefined");
    SG_CHECK(t.dim() >= 1, "DataLoader: tensor ", k, " has shape ", t.shape(), "; expected examples along dimension 0");
    SG_CHECK(t.device() == tensors_[0].device(), "DataLoader: tensor ", k, " is on ", t.device(), ", tensor 0 on ",
             tensors_[0].device());
    SG_CHECK(t.size(0) == tensors_[0].size(0), "DataLoader: tensor ", k, " has ", t.size(0),
             " examples, tensor 0 has ", tensors_[0].size(0));
  }
  examples_ = tensors_[0].size(0);
}

int64_t DataLoader::size() const {
  const int64_t b = options_.batch_size_;
  return options_.drop_last_ ? examples_ / b : (examples_ + b - 1) / b;
}

DataLoader::Iterator DataLoader::begin() const {
  Tensor order;
  if (options_.shuffle_) order = randperm(examples_, TensorOptions().device(tensors_[0].device()));
  return Iterator(this, order, 0);
}

DataLoader::Iterator DataLoader::end() const { return Iterator(this, Tensor(), size()); }

std::vector<Tensor> DataLoader::batch(const Tensor& order, int64_t index) const {
  const int64_t start = index * options_.batch_size_;
  const int64_t length = std::min(options_.batch_size_, examples_ - start);
  std::vector<Tensor> out;
  out.reserve(tensors_.size());
  if (order.defined()) {
    // The batch's positions stay on the device; a permutation is always in range.
    const Tensor positions = narrow(order, 0, start, length);
    for (const Tensor& t : tensors_) out.push_back(detail::index_select_trusted(t, 0, positions));
  } else {
    for (const Tensor& t : tensors_) out.push_back(narrow(t, 0, start, length));
  }
  return out;
}

const std::vector<Tensor>& DataLoader::Iterator::operator*() const {
  SG_CHECK(batch_ < loader_->size(), "DataLoader: dereferencing the end of an epoch");
  if (!ready_) {
    current_ = loader_->batch(order_, batch_);
    ready_ = true;
  }
  return current_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  ++batch_;
  ready_ = false;
  current_.clear();
  return *this;
}

}  // namespace sg::data
