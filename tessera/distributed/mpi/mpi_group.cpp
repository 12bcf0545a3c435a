#include "tessera/distributed/mpi/mpi_group.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include "tessera/core/error.h"
#include "tessera/distributed/collective_checks.h"
#include "tessera/distributed/rendezvous.h"
#include "tessera/ops/creation.h"

namespace tessera::distributed {

struct MpiGroup::Communicator {
  MPI_Comm comm = MPI_COMM_NULL;
};

// The requests one call started and everything MPI reads or writes until
// they complete: tensors, and the count arrays of the v-collectives.
struct MpiGroup::Pending {
  std::vector<MPI_Request> requests;
  std::vector<MPI_Status> statuses;
  std::vector<Tensor> memory;
  std::vector<std::vector<int>> arrays;

  MPI_Request* add() {
    requests.push_back(MPI_REQUEST_NULL);
    return &requests.back();
  }
  // Keeps `values` alive with the requests; returns its data.
  int* keep(std::vector<int> values) {
    arrays.push_back(std::move(values));
    return arrays.back().data();
  }
};

namespace {

// Messages are cut into pieces MPI's int counts can hold.
constexpr int64_t kMaxCount = int64_t{1} << 30;
// From this size on, all_reduce exchanges pieces point to point instead of
// calling MPI_Iallreduce, whose non-blocking algorithms (libnbc) move large
// messages several times slower than the shared-memory transport allows.
constexpr int64_t kPairwiseBytes = int64_t{1} << 16;

std::once_flag g_init_once;
// Set when a request timed out: MPI may still write its memory and its peers
// are out of step, so MPI is unusable and MPI_Finalize would wait forever.
std::atomic<bool> g_broken{false};
const char* g_broken_op = "";

std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return str_cat("MPI error ", code);
  return std::string(text, static_cast<size_t>(length));
}

// The world group's private communicator and the tag on which a rank
// announces that its program ended: OpenMPI's MPI_Finalize waits for every
// rank, so a rank that leaves while the others still wait in a collective
// would otherwise look alive to them until the timeout.
MPI_Comm g_world_comm = MPI_COMM_NULL;
int g_leave_tag = 0;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || g_broken.load()) return;
  if (g_world_comm != MPI_COMM_NULL) {
    int rank = 0, size = 1;
    MPI_Comm_rank(g_world_comm, &rank);
    MPI_Comm_size(g_world_comm, &size);
    static int payload = 0;
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      // Not waited on: a peer that already finished never receives it, and
      // MPI_Finalize completes or drops it.
      MPI_Request request = MPI_REQUEST_NULL;
      if (MPI_Isend(&payload, 1, MPI_INT, peer, g_leave_tag, g_world_comm, &request) ==
          MPI_SUCCESS) {
        MPI_Request_free(&request);
      }
    }
  }
  MPI_Finalize();
}

void initialise_mpi() {
  std::call_once(g_init_once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    int provided = 0;
    if (initialized) {
      // The program initialised MPI itself; it also finalizes it.
      MPI_Query_thread(&provided);
    } else {
      const int status = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
      TESSERA_CHECK(status == MPI_SUCCESS,
                    "[init_process_group] MPI_Init_thread failed: ", error_text(status));
      std::atexit(finalize_at_exit);
    }
    TESSERA_CHECK(provided >= MPI_THREAD_SERIALIZED, "[init_process_group] MPI gives thread level ",
                  provided, "; the mpi backend needs MPI_THREAD_SERIALIZED (",
                  MPI_THREAD_SERIALIZED, ") or better");
  });
  int finalized = 0;
  MPI_Finalized(&finalized);
  TESSERA_CHECK(!finalized, "[init_process_group] MPI was already finalized");
}

// Holds memory of timed-out requests until the process exits (never freed).
void abandon(std::vector<Tensor> memory, std::vector<std::vector<int>> arrays) {
  static auto* tensors = new std::vector<Tensor>();
  static auto* lists = new std::vector<std::vector<int>>();
  for (auto& tensor : memory) tensors->push_back(std::move(tensor));
  for (auto& list : arrays) lists->push_back(std::move(list));
}

// Polls `requests` until all complete (true), or `timeout` passes (false).
// `lost()`, asked every 50 ms, names peers that have gone; the call then
// gets one more second to complete (a peer that finished its part may leave
// before this rank sees the call complete) before it fails with `why` set.
bool poll(std::vector<MPI_Request>& requests, std::vector<MPI_Status>& statuses,
          std::chrono::milliseconds timeout, int& status,
          const std::function<std::string()>& lost = {}, std::string* why = nullptr) {
  const auto start = std::chrono::steady_clock::now();
  auto deadline = start + timeout;
  auto next_check = start + std::chrono::milliseconds(50);
  std::string gone;
  statuses.resize(requests.size());
  while (true) {
    int done = 0;
    status =
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, statuses.data());
    if (done || status != MPI_SUCCESS) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      if (why != nullptr) *why = gone;
      return false;
    }
    if (lost && gone.empty() && now > next_check) {
      next_check = now + std::chrono::milliseconds(50);
      gone = lost();
      if (!gone.empty()) deadline = std::min(deadline, now + std::chrono::seconds(1));
    }
    // MPI progresses only inside MPI calls; yielding keeps that going while
    // letting oversubscribed ranks share the cores.
    std::this_thread::yield();
  }
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::f64:
      return MPI_DOUBLE;
    case DType::i64:
      return MPI_INT64_T;
    case DType::i32:
      return MPI_INT32_T;
    case DType::u8:
      return MPI_UINT8_T;
    default:
      break;
  }
  TESSERA_FAIL("[mpi] dtype ", dtype_name(dtype), " has no MPI type");
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return MPI_SUM;
    case ReduceOp::max:
      return MPI_MAX;
    case ReduceOp::min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

// A datatype of `bytes` contiguous bytes, so counts go in rows, not bytes.
class RowType {
 public:
  explicit RowType(int64_t bytes) {
    MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &type_);
    MPI_Type_commit(&type_);
  }
  // Pending requests keep using a freed type (MPI frees it once they finish).
  ~RowType() { MPI_Type_free(&type_); }
  RowType(const RowType&) = delete;
  RowType& operator=(const RowType&) = delete;
  MPI_Datatype get() const { return type_; }

 private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// out[i] = op(out[i], in[i]) for `count` values of `dtype`.
void reduce_into(DType dtype, ReduceOp op, void* out, const void* in, int64_t count) {
  TESSERA_DISPATCH_NUMERIC(dtype, "all_reduce", [&] {
    scalar_t* a = static_cast<scalar_t*>(out);
    const scalar_t* b = static_cast<const scalar_t*>(in);
    switch (op) {
      case ReduceOp::sum:
        for (int64_t i = 0; i < count; ++i) a[i] += b[i];
        break;
      case ReduceOp::max:
        for (int64_t i = 0; i < count; ++i) a[i] = std::max(a[i], b[i]);
        break;
      case ReduceOp::min:
        for (int64_t i = 0; i < count; ++i) a[i] = std::min(a[i], b[i]);
        break;
    }
  });
}

uint64_t hash_list(const std::vector<int>& values) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (int value : values) hash = (hash ^ static_cast<uint32_t>(value)) * 1099511628211ull;
  return hash ^ values.size();
}

}  // namespace

std::shared_ptr<MpiGroup> MpiGroup::world(std::chrono::milliseconds timeout) {
  TESSERA_CHECK(timeout.count() > 0, "[init_process_group] timeout must be positive, got ",
                timeout.count(), " ms");
  TESSERA_CHECK(!g_broken.load(), "[init_process_group] MPI is unusable since '", g_broken_op,
                "' timed out; exit the process");
  initialise_mpi();
  // A private copy of the world keeps Tessera's messages apart from the program's own MPI use.
  auto communicator = std::make_unique<Communicator>();
  std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
  std::vector<MPI_Status> statuses;
  int status = MPI_Comm_idup(MPI_COMM_WORLD, &communicator->comm, requests.data());
  TESSERA_CHECK(status == MPI_SUCCESS,
                "[init_process_group] MPI_Comm_idup failed: ", error_text(status));
  if (!poll(requests, statuses, timeout, status)) {
    g_broken_op = "init_process_group";
    g_broken = true;
    TESSERA_FAIL("[init_process_group] timed out after ", timeout.count(),
                 " ms waiting for the other ranks mpirun started");
  }
  TESSERA_CHECK(status == MPI_SUCCESS,
                "[init_process_group] MPI_Comm_idup failed: ", error_text(status));
  std::shared_ptr<MpiGroup> group(new MpiGroup(std::move(communicator), timeout));
  group->exchange_processes();
  g_world_comm = group->communicator_->comm;
  g_leave_tag = group->leave_tag();
  return group;
}

void MpiGroup::exchange_processes() {
  const auto machine =
      static_cast<int64_t>(std::hash<std::string>{}(machine_identity()) & INT64_MAX);
  const std::vector<int64_t> all =
      gather_int64("init_process_group", {static_cast<int64_t>(::getpid()), machine});
  peer_pids_.resize(static_cast<size_t>(size_));
  peer_machines_.resize(static_cast<size_t>(size_));
  world_ranks_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) world_ranks_[static_cast<size_t>(r)] = r;
  for (int r = 0; r < size_; ++r) {
    peer_pids_[static_cast<size_t>(r)] = all[static_cast<size_t>(2 * r)];
    peer_machines_[static_cast<size_t>(r)] = all[static_cast<size_t>(2 * r + 1)];
  }
}

std::string MpiGroup::ended_peers() const {
  std::string text;
  for (int r = 0; r < static_cast<int>(world_ranks_.size()) && g_world_comm != MPI_COMM_NULL; ++r) {
    if (r == rank_) continue;
    int announced = 0;
    MPI_Iprobe(world_ranks_[static_cast<size_t>(r)], g_leave_tag, g_world_comm, &announced,
               MPI_STATUS_IGNORE);
    if (announced) text += str_cat(text.empty() ? "" : ", ", "rank ", r, " (its program ended)");
  }
  for (int r = 0; r < static_cast<int>(peer_pids_.size()); ++r) {
    const auto index = static_cast<size_t>(r);
    if (r == rank_ || peer_machines_[index] != peer_machines_[static_cast<size_t>(rank_)] ||
        text.find(str_cat("rank ", r, " (")) != std::string::npos ||
        !process_ended(peer_pids_[index])) {
      continue;
    }
    text +=
        str_cat(text.empty() ? "" : ", ", "rank ", r, " (process ", peer_pids_[index], " exited)");
  }
  return text;
}

MpiGroup::MpiGroup(std::unique_ptr<Communicator> communicator, std::chrono::milliseconds timeout)
    : communicator_(std::move(communicator)), timeout_(timeout) {
  MPI_Comm comm = communicator_->comm;
  // Errors come back as codes (turned into tessera::Error), not aborts.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank_);
  MPI_Comm_size(comm, &size_);
  void* value = nullptr;
  int found = 0;
  MPI_Comm_get_attr(comm, MPI_TAG_UB, &value, &found);
  if (found) max_tag_ = *static_cast<int*>(value);
}

MpiGroup::~MpiGroup() {
  if (communicator_->comm == g_world_comm) g_world_comm = MPI_COMM_NULL;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && !g_broken.load() && communicator_->comm != MPI_COMM_NULL) {
    MPI_Comm_free(&communicator_->comm);
  }
}

std::string MpiGroup::where() const {
  return str_cat("rank ", rank_, " of ", size_);
}

void MpiGroup::check_usable(const char* op) const {
  TESSERA_CHECK(!g_broken.load(), "[", op, "] ", where(), ": MPI is unusable since '", g_broken_op,
                "' timed out (MPI cannot cancel a started operation); exit the process");
}

void MpiGroup::wait(const char* op, Pending& pending) {
  int status = MPI_SUCCESS;
  std::string lost;
  // A peer that leaves (even with status 0, after MPI_Finalize) is seen at
  // once, not at the timeout: mpirun stops a job only for a failing rank.
  if (!poll(
          pending.requests, pending.statuses, timeout_, status, [this] { return ended_peers(); },
          &lost)) {
    g_broken_op = op;
    g_broken = true;
    abandon(std::move(pending.memory), std::move(pending.arrays));
    if (!lost.empty()) {
      TESSERA_FAIL("[", op, "] ", where(), " lost ", lost,
                   " during the call; MPI cannot cancel the operation, so exit this process "
                   "(mpirun then stops the others)");
    }
    const std::string ended = ended_peers();
    TESSERA_FAIL("[", op, "] ", where(), " timed out after ", timeout_.count(),
                 " ms: a peer did not take part", ended.empty() ? "" : "; lost " + ended,
                 "; MPI cannot cancel the operation, so exit this process (mpirun then stops "
                 "the others)");
  }
  if (status == MPI_SUCCESS) return;
  if (status == MPI_ERR_IN_STATUS) {
    for (const MPI_Status& each : pending.statuses) {
      if (each.MPI_ERROR != MPI_SUCCESS && each.MPI_ERROR != MPI_ERR_PENDING) {
        status = each.MPI_ERROR;
        break;
      }
    }
  }
  // Requests still running may write the memory later.
  for (const MPI_Request& request : pending.requests) {
    if (request != MPI_REQUEST_NULL) {
      abandon(std::move(pending.memory), std::move(pending.arrays));
      break;
    }
  }
  TESSERA_FAIL("[", op, "] ", where(), " failed: ", error_text(status));
}

// Starts an MPI call, turning a failure to start into an error naming `op`.
#define TESSERA_MPI_START(op, call)                                              \
  do {                                                                           \
    const int tessera_mpi_status = (call);                                       \
    TESSERA_CHECK(tessera_mpi_status == MPI_SUCCESS, "[", op, "] ", where(),     \
                  ": MPI could not start it: ", error_text(tessera_mpi_status)); \
  } while (0)

void MpiGroup::all_reduce(Tensor& tensor, ReduceOp op) {
  check_usable("all_reduce");
  check_tensor("all_reduce", tensor, kReduceDTypes, where());
  count_traffic(tensor);
  const int64_t count = tensor.numel();
  const int64_t item = static_cast<int64_t>(dtype_size(tensor.dtype()));
  const MPI_Datatype type = mpi_type(tensor.dtype());
  char* base = static_cast<char*>(tensor.raw_data());
  if (size_ == 1 || count == 0) return;
  if (count * item < kPairwiseBytes || count / size_ >= INT_MAX) {
    Pending pending;
    pending.memory.push_back(tensor);
    for (int64_t start = 0; start < count; start += kMaxCount) {
      const int chunk = static_cast<int>(std::min(kMaxCount, count - start));
      TESSERA_MPI_START("all_reduce",
                        MPI_Iallreduce(MPI_IN_PLACE, base + start * item, chunk, type, mpi_op(op),
                                       communicator_->comm, pending.add()));
    }
    wait("all_reduce", pending);
    return;
  }
  // Rank j owns chunk j: every rank sends it chunk j, j reduces them, then
  // sends the result to every rank. Each rank moves 2 (n - 1) / n of the
  // tensor once, and every chunk is reduced by one rank, in one order, so
  // all ranks get bitwise the same result.
  auto first = [&](int rank) { return count * rank / size_; };
  auto length = [&](int rank) { return static_cast<int>(first(rank + 1) - first(rank)); };
  const int own = length(rank_);
  char* own_data = base + first(rank_) * item;
  Tensor scratch = Tensor::empty({static_cast<int64_t>(own) * (size_ - 1)}, tensor.dtype());
  auto slot = [&](int peer) {
    const int index = peer < rank_ ? peer : peer - 1;
    return static_cast<char*>(scratch.raw_data()) + int64_t{index} * own * item;
  };
  Pending scatter;
  scatter.memory = {tensor, scratch};
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    TESSERA_MPI_START("all_reduce", MPI_Irecv(slot(peer), own, type, peer, data_tag(),
                                              communicator_->comm, scatter.add()));
    TESSERA_MPI_START("all_reduce", MPI_Isend(base + first(peer) * item, length(peer), type, peer,
                                              data_tag(), communicator_->comm, scatter.add()));
  }
  wait("all_reduce", scatter);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) reduce_into(tensor.dtype(), op, own_data, slot(peer), own);
  }
  Pending gather;
  gather.memory = {tensor};
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    TESSERA_MPI_START("all_reduce", MPI_Irecv(base + first(peer) * item, length(peer), type, peer,
                                              data_tag(), communicator_->comm, gather.add()));
    TESSERA_MPI_START("all_reduce", MPI_Isend(own_data, own, type, peer, data_tag(),
                                              communicator_->comm, gather.add()));
  }
  wait("all_reduce", gather);
}

std::vector<int64_t> MpiGroup::gather_int64(const char* op, const std::vector<int64_t>& values) {
  const int64_t count = static_cast<int64_t>(values.size());
  Tensor mine = Tensor::from_vector(values, {count});
  Tensor all = Tensor::empty({count * size_}, DType::i64);
  Pending pending;
  pending.memory = {mine, all};
  TESSERA_MPI_START(
      op, MPI_Iallgather(mine.raw_data(), static_cast<int>(count), MPI_INT64_T, all.raw_data(),
                         static_cast<int>(count), MPI_INT64_T, communicator_->comm, pending.add()));
  wait(op, pending);
  return all.to_vector<int64_t>();
}

std::vector<Tensor> MpiGroup::all_gather(const Tensor& tensor) {
  return gather("all_gather", tensor, true);
}

std::vector<Tensor> MpiGroup::all_gather_uneven(const Tensor& tensor) {
  return gather("all_gather_uneven", tensor, false);
}

std::vector<Tensor> MpiGroup::gather(const char* op, const Tensor& tensor, bool equal_shapes) {
  check_usable(op);
  check_tensor(op, tensor, kMoveDTypes, where());
  count_traffic(tensor);
  TESSERA_CHECK(equal_shapes || tensor.dim() >= 1, "[", op, "] ", where(),
                ": needs at least one dimension to vary, got a 0-d tensor");
  const Layout mine = layout_of(tensor);
  const std::vector<int64_t> all = gather_int64(op, mine.encode());
  std::vector<int64_t> rows(size_);
  for (int peer = 0; peer < size_; ++peer) {
    const Layout theirs = Layout::decode(all, peer);
    check_compatible(op, mine, rank_, theirs, peer, equal_shapes, where());
    rows[peer] = theirs.rows();
  }
  // One buffer receives every rank's rows; the results are views into it,
  // which saves a copy of everything gathered.
  const GatheredRows layout(std::move(rows));
  Tensor buffer = Tensor::empty(layout.shape_of(tensor.shape()), tensor.dtype());
  if (mine.row_bytes > 0 && layout.total > 0) {
    TESSERA_CHECK(layout.total <= INT_MAX && mine.row_bytes <= INT_MAX, "[", op, "] ", where(),
                  ": ", layout.total, " rows of ", mine.row_bytes,
                  " bytes exceed MPI's int counts; gather fewer or smaller rows");
    RowType row(mine.row_bytes);
    Pending pending;
    pending.memory = {tensor, buffer};
    if (equal_shapes) {
      const int count = static_cast<int>(mine.rows());
      TESSERA_MPI_START(op, MPI_Iallgather(tensor.raw_data(), count, row.get(), buffer.raw_data(),
                                           count, row.get(), communicator_->comm, pending.add()));
    } else {
      int* counts = pending.keep(std::vector<int>(layout.rows.begin(), layout.rows.end()));
      int* displacements = pending.keep(std::vector<int>(layout.first.begin(), layout.first.end()));
      TESSERA_MPI_START(op, MPI_Iallgatherv(tensor.raw_data(), static_cast<int>(mine.rows()),
                                            row.get(), buffer.raw_data(), counts, displacements,
                                            row.get(), communicator_->comm, pending.add()));
    }
    wait(op, pending);
  }
  return layout.pieces(buffer, tensor.shape());
}

std::vector<Tensor> MpiGroup::all_to_all(const std::vector<Tensor>& inputs) {
  check_usable("all_to_all");
  check_per_rank("all_to_all", inputs, size_, kMoveDTypes, false, where());
  count_traffic(inputs);
  // Every rank learns every rank's row counts and layout, so each knows what it receives.
  const Layout mine = layout_of(inputs[0]);
  std::vector<int64_t> header = mine.encode();
  for (const Tensor& input : inputs) header.push_back(input.size(0));
  const size_t stride = header.size();
  const std::vector<int64_t> all = gather_int64("all_to_all", header);
  std::vector<int64_t> send_rows(size_), recv_rows(size_);
  int64_t send_total = 0, recv_total = 0;
  for (int peer = 0; peer < size_; ++peer) {
    const Layout theirs = Layout::decode(all, peer, stride);
    check_compatible("all_to_all", mine, rank_, theirs, peer, false, where());
    recv_rows[peer] = all[peer * stride + Layout::kFields + rank_];
    send_rows[peer] = inputs[peer].size(0);
    recv_total += recv_rows[peer];
    send_total += send_rows[peer];
  }
  Shape shape = inputs[0].shape();
  shape[0] = recv_total;
  Tensor received = Tensor::empty(shape, inputs[0].dtype());
  if (mine.row_bytes > 0 && (send_total > 0 || recv_total > 0)) {
    TESSERA_CHECK(std::max(send_total, recv_total) <= INT_MAX && mine.row_bytes <= INT_MAX,
                  "[all_to_all] ", where(), ": ", std::max(send_total, recv_total), " rows of ",
                  mine.row_bytes, " bytes exceed MPI's int counts; exchange fewer rows");
    shape[0] = send_total;
    Tensor packed = Tensor::empty(shape, inputs[0].dtype());
    char* cursor = static_cast<char*>(packed.raw_data());
    std::vector<int> send_counts(size_), send_first(size_), recv_counts(size_), recv_first(size_);
    int64_t sent = 0, got = 0;
    for (int peer = 0; peer < size_; ++peer) {
      const size_t bytes = static_cast<size_t>(send_rows[peer] * mine.row_bytes);
      if (bytes > 0) std::memcpy(cursor, inputs[peer].raw_data(), bytes);
      cursor += bytes;
      send_counts[peer] = static_cast<int>(send_rows[peer]);
      send_first[peer] = static_cast<int>(sent);
      recv_counts[peer] = static_cast<int>(recv_rows[peer]);
      recv_first[peer] = static_cast<int>(got);
      sent += send_rows[peer];
      got += recv_rows[peer];
    }
    RowType row(mine.row_bytes);
    Pending pending;
    pending.memory = {packed, received};
    int* sc = pending.keep(std::move(send_counts));
    int* sd = pending.keep(std::move(send_first));
    int* rc = pending.keep(std::move(recv_counts));
    int* rd = pending.keep(std::move(recv_first));
    TESSERA_MPI_START("all_to_all",
                      MPI_Ialltoallv(packed.raw_data(), sc, sd, row.get(), received.raw_data(), rc,
                                     rd, row.get(), communicator_->comm, pending.add()));
    wait("all_to_all", pending);
  }
  const int64_t row_elements = mine.row_bytes / static_cast<int64_t>(dtype_size(inputs[0].dtype()));
  std::vector<Tensor> out;
  int64_t first = 0;
  for (int peer = 0; peer < size_; ++peer) {
    Shape piece = inputs[0].shape();
    piece[0] = recv_rows[peer];
    out.push_back(make_alias(received, piece, contiguous_strides(piece), first * row_elements));
    first += recv_rows[peer];
  }
  return out;
}

Tensor MpiGroup::reduce_scatter(const std::vector<Tensor>& inputs, ReduceOp op) {
  check_usable("reduce_scatter");
  check_per_rank("reduce_scatter", inputs, size_, kReduceDTypes, true, where());
  count_traffic(inputs);
  const Layout mine = layout_of(inputs[0]);
  const std::vector<int64_t> all = gather_int64("reduce_scatter", mine.encode());
  for (int peer = 0; peer < size_; ++peer) {
    check_compatible("reduce_scatter", mine, rank_, Layout::decode(all, peer), peer, true, where());
  }
  const int64_t count = inputs[0].numel();
  TESSERA_CHECK(count <= INT_MAX, "[reduce_scatter] ", where(), ": pieces of ", count,
                " elements exceed MPI's int counts; use pieces below 2^31 elements");
  Tensor result = inputs[rank_].clone();
  if (count == 0 || size_ == 1) return result;
  // Point to point straight from the inputs (no packing), then a local
  // reduction; MPI_Ireduce_scatter_block was several times slower.
  const DType dtype = result.dtype();
  const MPI_Datatype type = mpi_type(dtype);
  const int64_t piece_bytes = count * static_cast<int64_t>(dtype_size(dtype));
  Tensor scratch = Tensor::empty({count * (size_ - 1)}, dtype);
  auto slot = [&](int peer) {
    const int index = peer < rank_ ? peer : peer - 1;
    return static_cast<char*>(scratch.raw_data()) + int64_t{index} * piece_bytes;
  };
  Pending pending;
  pending.memory = {scratch};
  for (const Tensor& input : inputs) pending.memory.push_back(input);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    TESSERA_MPI_START("reduce_scatter", MPI_Irecv(slot(peer), static_cast<int>(count), type, peer,
                                                  data_tag(), communicator_->comm, pending.add()));
    TESSERA_MPI_START("reduce_scatter",
                      MPI_Isend(inputs[peer].raw_data(), static_cast<int>(count), type, peer,
                                data_tag(), communicator_->comm, pending.add()));
  }
  wait("reduce_scatter", pending);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) reduce_into(dtype, op, result.raw_data(), slot(peer), count);
  }
  return result;
}

void MpiGroup::broadcast(Tensor& tensor, int root) {
  check_usable("broadcast");
  check_tensor("broadcast", tensor, kMoveDTypes, where());
  check_peer("broadcast", root, size_, true, rank_, where());
  count_traffic(tensor);
  const int64_t bytes = tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  Pending pending;
  pending.memory.push_back(tensor);
  for (int64_t start = 0; start < bytes; start += kMaxCount) {
    const int chunk = static_cast<int>(std::min(kMaxCount, bytes - start));
    TESSERA_MPI_START("broadcast", MPI_Ibcast(static_cast<char*>(tensor.raw_data()) + start, chunk,
                                              MPI_BYTE, root, communicator_->comm, pending.add()));
  }
  wait("broadcast", pending);
}

void MpiGroup::send(const Tensor& tensor, int peer, int tag) {
  check_usable("send");
  check_tensor("send", tensor, kMoveDTypes, where());
  check_peer("send", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0 && tag < leave_tag(), "[send] ", where(), ": tag ", tag,
                " is outside [0, ", leave_tag(), ") (the top three MPI tags are reserved)");
  const int64_t bytes = tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  Pending pending;
  pending.memory.push_back(tensor);
  // Messages between two ranks with one tag arrive in order, so pieces reassemble.
  for (int64_t start = 0; start < bytes; start += kMaxCount) {
    const int chunk = static_cast<int>(std::min(kMaxCount, bytes - start));
    TESSERA_MPI_START("send", MPI_Isend(static_cast<char*>(tensor.raw_data()) + start, chunk,
                                        MPI_BYTE, peer, tag, communicator_->comm, pending.add()));
  }
  wait("send", pending);
}

void MpiGroup::recv(Tensor& tensor, int peer, int tag) {
  check_usable("recv");
  check_tensor("recv", tensor, kMoveDTypes, where());
  check_peer("recv", peer, size_, false, rank_, where());
  TESSERA_CHECK(tag >= 0 && tag < leave_tag(), "[recv] ", where(), ": tag ", tag,
                " is outside [0, ", leave_tag(), ") (the top three MPI tags are reserved)");
  const int64_t bytes = tensor.numel() * static_cast<int64_t>(dtype_size(tensor.dtype()));
  Pending pending;
  pending.memory.push_back(tensor);
  std::vector<int> expected;
  for (int64_t start = 0; start < bytes; start += kMaxCount) {
    expected.push_back(static_cast<int>(std::min(kMaxCount, bytes - start)));
    TESSERA_MPI_START(
        "recv", MPI_Irecv(static_cast<char*>(tensor.raw_data()) + start, expected.back(), MPI_BYTE,
                          peer, tag, communicator_->comm, pending.add()));
  }
  try {
    wait("recv", pending);
  } catch (const Error& error) {
    const std::string text = error.what();
    TESSERA_CHECK(text.find("truncat") == std::string::npos, "[recv] ", where(), ": rank ", peer,
                  " sent more than this tensor's ", bytes, " bytes (", shape_str(tensor.shape()),
                  " ", dtype_name(tensor.dtype()), "); sizes must match");
    throw;
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    int got = 0;
    MPI_Get_count(&pending.statuses[i], MPI_BYTE, &got);
    TESSERA_CHECK(got == expected[i], "[recv] ", where(), ": rank ", peer, " sent ",
                  i * kMaxCount + got, " bytes but this tensor (", shape_str(tensor.shape()), " ",
                  dtype_name(tensor.dtype()), ") holds ", bytes, "; sizes must match");
  }
}

void MpiGroup::barrier() {
  check_usable("barrier");
  Pending pending;
  TESSERA_MPI_START("barrier", MPI_Ibarrier(communicator_->comm, pending.add()));
  wait("barrier", pending);
}

std::shared_ptr<Group> MpiGroup::split(const std::vector<int>& ranks) {
  check_usable("split");
  const int new_rank = check_split(ranks, size_, rank_, where());
  // MPI_Comm_create_group has no timeout: the members first check in with
  // each other (on the reserved split tag), so a member that never calls
  // split, or passes another list, raises instead of blocking.
  const int members = static_cast<int>(ranks.size());
  Tensor token = Tensor::from_vector<int64_t>({static_cast<int64_t>(hash_list(ranks))}, {1});
  Tensor tokens = zeros({members}, DType::i64);
  Pending pending;
  pending.memory = {token, tokens};
  for (int i = 0; i < members; ++i) {
    if (i == new_rank) continue;
    TESSERA_MPI_START("split", MPI_Isend(token.raw_data(), 1, MPI_INT64_T, ranks[i], split_tag(),
                                         communicator_->comm, pending.add()));
    TESSERA_MPI_START("split", MPI_Irecv(tokens.data<int64_t>() + i, 1, MPI_INT64_T, ranks[i],
                                         split_tag(), communicator_->comm, pending.add()));
  }
  wait("split", pending);
  const std::vector<int64_t> received = tokens.to_vector<int64_t>();
  for (int i = 0; i < members; ++i) {
    TESSERA_CHECK(i == new_rank || received[i] == token.item<int64_t>(), "[split] ", where(),
                  ": rank ", ranks[i], " called split with a different list than ",
                  ranks_str(ranks), "; every member must pass the same list");
  }
  MPI_Group parent = MPI_GROUP_NULL, subset = MPI_GROUP_NULL;
  MPI_Comm_group(communicator_->comm, &parent);
  MPI_Group_incl(parent, members, ranks.data(), &subset);
  auto communicator = std::make_unique<Communicator>();
  const int status = MPI_Comm_create_group(communicator_->comm, subset, 0, &communicator->comm);
  MPI_Group_free(&subset);
  MPI_Group_free(&parent);
  TESSERA_CHECK(status == MPI_SUCCESS, "[split] ", where(),
                ": MPI_Comm_create_group failed: ", error_text(status));
  std::shared_ptr<MpiGroup> group(new MpiGroup(std::move(communicator), timeout_));
  for (int member : ranks) {
    if (peer_pids_.empty()) break;
    group->world_ranks_.push_back(world_ranks_[static_cast<size_t>(member)]);
    group->peer_pids_.push_back(peer_pids_[static_cast<size_t>(member)]);
    group->peer_machines_.push_back(peer_machines_[static_cast<size_t>(member)]);
  }
  return group;
}

}  // namespace tessera::distributed
