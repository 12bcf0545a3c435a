#include "tessera/distributed/nccl/nccl_group.h"

#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "tessera/backend/cuda.h"
#include "tessera/backend/cuda/runtime.h"
#include "tessera/core/device_memory.h"
#include "tessera/distributed/collective_checks.h"
#include "tessera/distributed/rendezvous.h"

namespace tessera::distributed {

struct NcclGroup::Handles {
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
};

namespace {

using Clock = std::chrono::steady_clock;

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return ncclFloat32;
    case DType::f64:
      return ncclFloat64;
    case DType::i64:
      return ncclInt64;
    case DType::i32:
      return ncclInt32;
    case DType::u8:
      return ncclUint8;
    default:
      break;
  }
  TESSERA_FAIL("[nccl] dtype ", dtype_name(dtype), " has no NCCL type");
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return ncclSum;
    case ReduceOp::max:
      return ncclMax;
    case ReduceOp::min:
      return ncclMin;
  }
  return ncclSum;
}

// "ncclSystemError (unhandled system error ...)" plus NCCL's last message.
std::string nccl_text(ncclResult_t result, ncclComm_t comm) {
  std::string text = ncclGetErrorString(result);
  const char* last = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  if (last != nullptr && *last != '\0') text += str_cat(": ", last);
  return text;
}

// Runs the NCCL calls of `body` as one group (grouped send/recv move at once).
template <typename Fn>
ncclResult_t grouped(Fn&& body) {
  const ncclResult_t start = ncclGroupStart();
  if (start != ncclSuccess) return start;
  const ncclResult_t first = body();
  const ncclResult_t end = ncclGroupEnd();
  return first != ncclSuccess && first != ncclInProgress ? first : end;
}

size_t bytes_of(const Tensor& tensor) {
  return static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
}

// Writes `buffer` back into `tensor` when it was staged (a CPU tensor).
void copy_back(const Tensor& tensor, const Tensor& buffer) {
  if (buffer.is_same(tensor)) return;
  device_memory::copy(tensor.raw_data(), tensor.device(), buffer.raw_data(), buffer.device(),
                      bytes_of(tensor));
}

// Result tensors live where the caller's inputs were.
Tensor to_caller(const Tensor& result, const Tensor& like) {
  return like.device().type == DeviceType::cpu ? result.cpu() : result;
}

}  // namespace

NcclGroup::NcclGroup(std::shared_ptr<Store> store, std::string prefix, int rank, int size,
                     int device, std::chrono::milliseconds timeout, std::string job_prefix,
                     std::vector<int> job_ranks)
    : store_(std::move(store)),
      prefix_(std::move(prefix)),
      rank_(rank),
      size_(size),
      device_(device),
      timeout_(timeout),
      handles_(std::make_unique<Handles>()),
      job_prefix_(std::move(job_prefix)),
      job_ranks_(std::move(job_ranks)) {
  TESSERA_CHECK(store_ != nullptr, "[init_process_group] the store is null");
  TESSERA_CHECK(size_ >= 1 && rank_ >= 0 && rank_ < size_, "[init_process_group] rank ", rank_,
                " is outside [0, ", size_, ")");
  TESSERA_CHECK(timeout_.count() > 0, "[init_process_group] timeout must be positive, got ",
                timeout_.count(), " ms");
  const int count = cuda::device_count();
  TESSERA_CHECK(device_ >= 0 && device_ < count, "[init_process_group] ", where(),
                ": cuda:", device_, " is not available for the nccl backend: ",
                count == 0 ? cuda::unavailable_reason()
                           : str_cat("this process sees ", count, " CUDA device(s)"));
  ncclUniqueId id;
  const std::string id_key = prefix_ + "nccl_id";
  if (rank_ == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    TESSERA_CHECK(result == ncclSuccess, "[init_process_group] ", where(),
                  ": ncclGetUniqueId failed: ", nccl_text(result, nullptr));
    store_->set(id_key, std::vector<char>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    const std::vector<char> bytes = store_->get(id_key);
    TESSERA_CHECK(bytes.size() == sizeof(id.internal), "[init_process_group] ", where(), ": key '",
                  id_key, "' holds ", bytes.size(), " bytes, not an NCCL id (", sizeof(id.internal),
                  " bytes)");
    std::memcpy(id.internal, bytes.data(), sizeof(id.internal));
  }
  // Marks this rank's key, as the Gloo backend's address does, so a later
  // job reusing the rendezvous is refused (init_process_group checks it).
  store_->set(prefix_ + std::to_string(rank_), {'n', 'c', 'c', 'l'});
  cuda::DeviceGuard guard(device_);
  TESSERA_CUDA_CHECK(cudaStreamCreateWithFlags(&handles_->stream, cudaStreamNonBlocking),
                     "[init_process_group] ", where(),
                     ": cannot create a stream on cuda:", device_);
  // Non-blocking: calls return at once and wait() polls them, so a rank
  // that never joins ends in a timeout instead of a hang.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  try {
    const ncclResult_t result = ncclCommInitRankConfig(&handles_->comm, size_, id, rank_, &config);
    if (result != ncclSuccess && result != ncclInProgress) {
      fail("init_process_group", str_cat("failed: ", nccl_text(result, handles_->comm)));
    }
    wait("init_process_group");
  } catch (...) {
    (void)cudaStreamDestroy(handles_->stream);
    throw;
  }
}

NcclGroup::~NcclGroup() {
  // Nothing is in flight (every call waits for its work), so finalizing
  // only waits for the peers to finalize too; a peer that never does is
  // cut off after the timeout.
  if (handles_->comm != nullptr) {
    int previous = 0;
    const bool switched = cudaGetDevice(&previous) == cudaSuccess && previous != device_ &&
                          cudaSetDevice(device_) == cudaSuccess;
    ncclResult_t state = ncclCommFinalize(handles_->comm);
    const auto deadline = Clock::now() + timeout_;
    while (state == ncclInProgress && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      if (ncclCommGetAsyncError(handles_->comm, &state) != ncclSuccess) break;
    }
    if (state == ncclSuccess) {
      ncclCommDestroy(handles_->comm);
    } else {
      ncclCommAbort(handles_->comm);
    }
    if (switched) (void)cudaSetDevice(previous);
  }
  if (handles_->stream != nullptr) (void)cudaStreamDestroy(handles_->stream);
}

std::string NcclGroup::where() const {
  return str_cat("rank ", rank_, " of ", size_);
}

std::string NcclGroup::ended_peers() const {
  if (job_ranks_.size() != static_cast<size_t>(size_)) return "";
  return ended_ranks(*store_, job_prefix_, job_ranks_, job_ranks_[static_cast<size_t>(rank_)]);
}

void NcclGroup::check_usable(const char* op) const {
  TESSERA_CHECK(broken_.empty(), "[", op, "] ", where(), ": this NCCL group is unusable since ",
                broken_, "; create a new group (or exit)");
}

void NcclGroup::fail(const char* op, const std::string& what) {
  std::string text = str_cat("[", op, "] ", where(), " ", what);
  const std::string ended = ended_peers();
  if (!ended.empty()) text += "; lost " + ended;
  if (handles_->comm != nullptr) {
    // Stops kernels that wait for a lost peer; the communicator is gone after it.
    ncclCommAbort(handles_->comm);
    handles_->comm = nullptr;
    text += "; the NCCL communicator was aborted, so this group is unusable";
  }
  broken_ = str_cat("'", op, "' ", what);
  TESSERA_FAIL(text);
}

void NcclGroup::wait(const char* op) {
  const auto start = Clock::now();
  auto deadline = start + timeout_;
  // Polls briefly at first (small collectives finish in microseconds),
  // then sleeps between polls so a long wait leaves the CPU to others.
  auto pause = [&] {
    if (Clock::now() - start < std::chrono::milliseconds(2)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  };
  auto timed_out = [&] {
    fail(op, str_cat("timed out after ", timeout_.count(),
                     " ms: a peer did not take part or is too slow"));
  };
  // A peer whose process ended ends the wait a second later (the call may
  // still complete if it finished its part before leaving), not at the timeout.
  auto next_check = start + std::chrono::milliseconds(100);
  bool peer_gone = false;
  auto check_peers = [&] {
    if (peer_gone || Clock::now() < next_check) return;
    next_check = Clock::now() + std::chrono::milliseconds(100);
    if (!ended_peers().empty()) {
      peer_gone = true;
      deadline = std::min(deadline, Clock::now() + std::chrono::seconds(1));
    }
  };
  auto give_up = [&] {
    if (peer_gone) fail(op, "failed: a peer left during the call");
    timed_out();
  };
  // A non-blocking communicator may still be enqueueing the calls.
  while (true) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t query = ncclCommGetAsyncError(handles_->comm, &state);
    if (query != ncclSuccess) fail(op, str_cat("failed: ", nccl_text(query, handles_->comm)));
    if (state == ncclSuccess) break;
    if (state != ncclInProgress) fail(op, str_cat("failed: ", nccl_text(state, handles_->comm)));
    check_peers();
    if (Clock::now() > deadline) give_up();
    pause();
  }
  while (true) {
    const cudaError_t status = cudaStreamQuery(handles_->stream);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) {
      (void)cudaGetLastError();
      fail(op, str_cat("failed on cuda:", device_, ": ", cudaGetErrorName(status), " (",
                       cudaGetErrorString(status), ")"));
    }
    // A peer that failed or left shows up here while the kernels wait.
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(handles_->comm, &state);
    if (state != ncclSuccess && state != ncclInProgress) {
      fail(op, str_cat("failed: ", nccl_text(state, handles_->comm)));
    }
    check_peers();
    if (Clock::now() > deadline) give_up();
    pause();
  }
}

template <typename Fn>
void NcclGroup::run(const char* op, Fn&& launch) {
  check_usable(op);
  cuda::DeviceGuard guard(device_);
  const ncclResult_t result = launch();
  if (result != ncclSuccess && result != ncclInProgress) {
    fail(op, str_cat("failed to start: ", nccl_text(result, handles_->comm)));
  }
  wait(op);
}

Tensor NcclGroup::on_device(const Tensor& tensor) const {
  const Device device{DeviceType::cuda, device_};
  if (tensor.device() == device) return tensor;
  return tensor.detach().to(device);
}

std::vector<int64_t> NcclGroup::gather_int64(const char* op, const std::vector<int64_t>& values) {
  const Device device{DeviceType::cuda, device_};
  const int64_t count = static_cast<int64_t>(values.size());
  Tensor mine = Tensor::from_vector(values, {count}).to(device);
  Tensor all = Tensor::empty({count * size_}, DType::i64, device);
  run(op, [&] {
    return ncclAllGather(mine.raw_data(), all.raw_data(), static_cast<size_t>(count), ncclInt64,
                         handles_->comm, handles_->stream);
  });
  return all.to_vector<int64_t>();
}

void NcclGroup::check_peers(const char* op, const Tensor& tensor, const std::string& hint) {
  if (size_ == 1) return;
  const Layout mine = layout_of(tensor);
  const std::vector<int64_t> all = gather_int64(op, mine.encode());
  for (int peer = 0; peer < size_; ++peer) {
    check_compatible(op, mine, rank_, Layout::decode(all, peer), peer, true, where(), hint);
  }
}

void NcclGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_usable("all_reduce");
  check_tensor("all_reduce", tensor, kReduceDTypes, where(), device_);
  count_traffic(tensor);
  check_peers("all_reduce", tensor);
  if (tensor.numel() == 0) return;
  Tensor buffer = on_device(tensor);
  run("all_reduce", [&] {
    return ncclAllReduce(buffer.raw_data(), buffer.raw_data(), static_cast<size_t>(buffer.numel()),
                         nccl_type(buffer.dtype()), nccl_op(op), handles_->comm, handles_->stream);
  });
  copy_back(tensor, buffer);
}

std::vector<Tensor> NcclGroup::all_gather(const Tensor& tensor) {
  return gather("all_gather", tensor, true);
}

std::vector<Tensor> NcclGroup::all_gather_uneven(const Tensor& tensor) {
  return gather("all_gather_uneven", tensor, false);
}

std::vector<Tensor> NcclGroup::gather(const char* op, const Tensor& tensor, bool equal_shapes) {
  check_usable(op);
  check_tensor(op, tensor, kMoveDTypes, where(), device_);
  count_traffic(tensor);
  TESSERA_CHECK(equal_shapes || tensor.dim() >= 1, "[", op, "] ", where(),
                ": needs at least one dimension to vary, got a 0-d tensor");
  const Layout mine = layout_of(tensor);
  std::vector<int64_t> rows(size_, mine.rows());
  if (size_ > 1) {
    const std::vector<int64_t> all = gather_int64(op, mine.encode());
    for (int peer = 0; peer < size_; ++peer) {
      const Layout theirs = Layout::decode(all, peer);
      check_compatible(op, mine, rank_, theirs, peer, equal_shapes, where(),
                       equal_shapes ? "every rank needs the same dtype and shape "
                                      "(all_gather_uneven allows dim 0 to differ)"
                                    : "");
      rows[peer] = theirs.rows();
    }
  }
  // One buffer receives every rank's rows; the results are views of it.
  const GatheredRows layout(std::move(rows));
  Tensor gathered = Tensor::empty(layout.shape_of(tensor.shape()), tensor.dtype(),
                                  Device{DeviceType::cuda, device_});
  if (mine.row_bytes > 0 && layout.total > 0) {
    Tensor input = on_device(tensor);
    char* out = static_cast<char*>(gathered.raw_data());
    run(op, [&] {
      if (equal_shapes) {
        return ncclAllGather(input.raw_data(), out, bytes_of(input), ncclUint8, handles_->comm,
                             handles_->stream);
      }
      // NCCL has no all-gather of uneven pieces: each rank broadcasts its rows.
      return grouped([&] {
        for (int peer = 0; peer < size_; ++peer) {
          if (layout.rows[peer] == 0) continue;
          char* slot = out + layout.first[peer] * mine.row_bytes;
          const ncclResult_t result =
              ncclBroadcast(peer == rank_ ? input.raw_data() : slot, slot,
                            static_cast<size_t>(layout.rows[peer] * mine.row_bytes), ncclUint8, peer,
                            handles_->comm, handles_->stream);
          if (result != ncclSuccess && result != ncclInProgress) return result;
        }
        return ncclSuccess;
      });
    });
  }
  return layout.pieces(to_caller(gathered, tensor), tensor.shape());
}

Tensor NcclGroup::reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op) {
  check_usable("reduce_scatter");
  check_per_rank("reduce_scatter", inputs, size_, kReduceDTypes, true, where(), device_);
  count_traffic(inputs);
  check_peers("reduce_scatter", inputs[0], "every rank needs inputs of the same dtype and shape");
  const Device device{DeviceType::cuda, device_};
  const DType dtype = inputs[0].dtype();
  const int64_t count = inputs[0].numel();
  Tensor result = Tensor::empty(inputs[0].shape(), dtype, device);
  if (count > 0) {
    // NCCL reads the pieces from one buffer, in rank order.
    const size_t piece_bytes = bytes_of(inputs[0]);
    Tensor packed = Tensor::empty({count * size_}, dtype, device);
    for (int peer = 0; peer < size_; ++peer) {
      device_memory::copy(static_cast<char*>(packed.raw_data()) + peer * piece_bytes, device,
                          inputs[peer].raw_data(), inputs[peer].device(), piece_bytes);
    }
    run("reduce_scatter", [&] {
      return ncclReduceScatter(packed.raw_data(), result.raw_data(), static_cast<size_t>(count),
                               nccl_type(dtype), nccl_op(op), handles_->comm, handles_->stream);
    });
  }
  return to_caller(result, inputs[0]);
}

std::vector<Tensor> NcclGroup::all_to_all(const std::vector<Tensor>& inputs) {
  check_usable("all_to_all");
  check_per_rank("all_to_all", inputs, size_, kMoveDTypes, false, where(), device_);
  count_traffic(inputs);
  // Every rank learns every rank's row counts and layout, so each knows what it receives.
  const Layout mine = layout_of(inputs[0]);
  std::vector<int64_t> header = mine.encode();
  for (const Tensor& input : inputs) header.push_back(input.size(0));
  const size_t stride = header.size();
  const std::vector<int64_t> all = gather_int64("all_to_all", header);
  std::vector<int64_t> send_first(size_), recv_rows(size_), recv_first(size_);
  int64_t send_total = 0, recv_total = 0;
  for (int peer = 0; peer < size_; ++peer) {
    const Layout theirs = Layout::decode(all, peer, stride);
    check_compatible("all_to_all", mine, rank_, theirs, peer, false, where());
    recv_rows[peer] = all[peer * stride + Layout::kFields + rank_];
    send_first[peer] = send_total;
    recv_first[peer] = recv_total;
    send_total += inputs[peer].size(0);
    recv_total += recv_rows[peer];
  }
  const Device device{DeviceType::cuda, device_};
  Shape shape = inputs[0].shape();
  shape[0] = recv_total;
  Tensor received = Tensor::empty(shape, inputs[0].dtype(), device);
  if (mine.row_bytes > 0) {
    shape[0] = send_total;
    Tensor packed = Tensor::empty(shape, inputs[0].dtype(), device);
    char* send = static_cast<char*>(packed.raw_data());
    char* recv = static_cast<char*>(received.raw_data());
    for (int peer = 0; peer < size_; ++peer) {
      device_memory::copy(send + send_first[peer] * mine.row_bytes, device, inputs[peer].raw_data(),
                          inputs[peer].device(), bytes_of(inputs[peer]));
    }
    // This rank's own rows are a local copy; the rest move as grouped
    // send/recv pairs. Both sides of a pair know its row count, so they
    // agree on skipping empty ones.
    device_memory::copy(recv + recv_first[rank_] * mine.row_bytes, device,
                        send + send_first[rank_] * mine.row_bytes, device,
                        static_cast<size_t>(recv_rows[rank_] * mine.row_bytes));
    bool exchanges = false;
    for (int peer = 0; peer < size_; ++peer) {
      exchanges = exchanges || (peer != rank_ && (inputs[peer].size(0) > 0 || recv_rows[peer] > 0));
    }
    if (exchanges) {
      run("all_to_all", [&] {
        return grouped([&] {
          for (int peer = 0; peer < size_; ++peer) {
            if (peer == rank_) continue;
            const int64_t send_rows = inputs[peer].size(0);
            ncclResult_t result = ncclSuccess;
            if (send_rows > 0) {
              result = ncclSend(send + send_first[peer] * mine.row_bytes,
                                static_cast<size_t>(send_rows * mine.row_bytes), ncclUint8, peer,
                                handles_->comm, handles_->stream);
            }
            if (result != ncclSuccess && result != ncclInProgress) return result;
            if (recv_rows[peer] > 0) {
              result = ncclRecv(recv + recv_first[peer] * mine.row_bytes,
                                static_cast<size_t>(recv_rows[peer] * mine.row_bytes), ncclUint8,
                                peer, handles_->comm, handles_->stream);
            }
            if (result != ncclSuccess && result != ncclInProgress) return result;
          }
          return ncclSuccess;
        });
      });
    }
  }
  received = to_caller(received, inputs[0]);
  const int64_t row_elements = mine.row_bytes / static_cast<int64_t>(dtype_size(inputs[0].dtype()));
  std::vector<Tensor> out;
  for (int peer = 0; peer < size_; ++peer) {
    Shape piece = inputs[0].shape();
    piece[0] = recv_rows[peer];
    out.push_back(
        make_alias(received, piece, contiguous_strides(piece), recv_first[peer] * row_elements));
  }
  return out;
}

void NcclGroup::broadcast(Tensor& tensor, int root) {
  check_usable("broadcast");
  check_tensor("broadcast", tensor, kMoveDTypes, where(), device_);
  count_traffic(tensor);
  check_peer("broadcast", root, size_, true, rank_, where());
  check_peers("broadcast", tensor);
  if (tensor.numel() == 0) return;
  Tensor buffer = on_device(tensor);
  run("broadcast", [&] {
    return ncclBroadcast(buffer.raw_data(), buffer.raw_data(), bytes_of(buffer), ncclUint8, root,
                         handles_->comm, handles_->stream);
  });
  copy_back(tensor, buffer);
}

void NcclGroup::send(const Tensor& tensor, int peer, int tag) {
  check_usable("send");
  check_tensor("send", tensor, kMoveDTypes, where(), device_);
  check_peer("send", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0, "[send] ", where(), ": tag must be >= 0, got ", tag);
  point_to_point("send", tensor, peer, tag, true);
}

void NcclGroup::recv(Tensor& tensor, int peer, int tag) {
  check_usable("recv");
  check_tensor("recv", tensor, kMoveDTypes, where(), device_);
  check_peer("recv", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0, "[recv] ", where(), ": tag must be >= 0, got ", tag);
  point_to_point("recv", tensor, peer, tag, false);
}

void NcclGroup::point_to_point(const char* op, const Tensor& tensor, int peer, int tag,
                               bool sending) {
  const Device device{DeviceType::cuda, device_};
  // Headers both ways first: (layout, tag), so a size or order mismatch
  // raises on both sides before any data moves.
  const Layout mine = layout_of(tensor);
  std::vector<int64_t> header = mine.encode();
  header.push_back(tag);
  const int64_t fields = static_cast<int64_t>(header.size());
  Tensor outgoing = Tensor::from_vector(header, {fields}).to(device);
  Tensor incoming = Tensor::empty({fields}, DType::i64, device);
  run(op, [&] {
    return grouped([&] {
      const ncclResult_t result = ncclSend(outgoing.raw_data(), static_cast<size_t>(fields),
                                           ncclInt64, peer, handles_->comm, handles_->stream);
      if (result != ncclSuccess && result != ncclInProgress) return result;
      return ncclRecv(incoming.raw_data(), static_cast<size_t>(fields), ncclInt64, peer,
                      handles_->comm, handles_->stream);
    });
  });
  const std::vector<int64_t> theirs = incoming.to_vector<int64_t>();
  check_same_size(op, mine, rank_, Layout::decode(theirs.data()), peer, where());
  const int64_t their_tag = theirs[Layout::kFields];
  TESSERA_CHECK(their_tag == tag, "[", op, "] ", where(), ": this rank ",
                sending ? "sends to" : "receives from", " rank ", peer, " with tag ", tag,
                " but that rank ", sending ? "receives" : "sends", " with tag ", their_tag,
                "; the nccl backend matches send and recv between two ranks in order, so tags "
                "must come in the same order on both sides");
  if (tensor.numel() == 0) return;
  Tensor buffer = sending || tensor.device() == device
                      ? on_device(tensor)
                      : Tensor::empty(tensor.shape(), tensor.dtype(), device);
  run(op, [&] {
    return sending ? ncclSend(buffer.raw_data(), bytes_of(buffer), ncclUint8, peer, handles_->comm,
                              handles_->stream)
                   : ncclRecv(buffer.raw_data(), bytes_of(buffer), ncclUint8, peer, handles_->comm,
                              handles_->stream);
  });
  if (!sending) copy_back(tensor, buffer);
}

void NcclGroup::barrier() {
  check_usable("barrier");
  Tensor token = Tensor::empty({1}, DType::i32, Device{DeviceType::cuda, device_});
  run("barrier", [&] {
    return ncclAllReduce(token.raw_data(), token.raw_data(), 1, ncclInt32, ncclSum, handles_->comm,
                         handles_->stream);
  });
}

std::shared_ptr<Group> NcclGroup::split(const std::vector<int>& ranks) {
  check_usable("split");
  const int new_rank = check_split(ranks, size_, rank_, where());
  std::string prefix =
      prefix_ + "split" + ranks_str(ranks) + "#" + std::to_string(split_counts_[ranks]++) + "/";
  std::vector<int> job_ranks;
  for (int member : ranks) {
    if (job_ranks_.size() == static_cast<size_t>(size_)) {
      job_ranks.push_back(job_ranks_[static_cast<size_t>(member)]);
    }
  }
  return std::make_shared<NcclGroup>(store_, std::move(prefix), new_rank,
                                     static_cast<int>(ranks.size()), device_, timeout_, job_prefix_,
                                     std::move(job_ranks));
}

}  // namespace tessera::distributed
